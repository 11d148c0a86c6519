"""The ``llama-server`` backend on the packaged SmolLM2: it starts its own llama.cpp server, constrained replies of
every shape parse, a server killed mid-run is a typed transport error naming the death, and ``close`` stops it by PID.
"""

from __future__ import annotations

import os
import signal

import pytest

from workbench.llm import LLMTransportError, get_backend, run_stage
from workbench.methods.proactive.stage_types import ProactiveInput

pytestmark = pytest.mark.integration

PAYLOAD = ProactiveInput(goal="put a clean apple in fridge.", step=0,
                         current_observation="You are in the middle of a room. You see a fridge 1 and a sinkbasin 1.")


@pytest.fixture
def served():
    if os.environ.get("WORKBENCH_NO_SERVER") == "1":
        pytest.skip("WORKBENCH_NO_SERVER=1: real llama.cpp server tests disabled")
    b = get_backend("llama-server", n_ctx=4096, max_retries=0)
    yield b
    b.close()


def test_constrained_stages_of_both_shapes_parse_from_the_real_model(served) -> None:
    ledger: list = []
    reply = run_stage(served, "proactive_intervene", PAYLOAD, max_tokens=96, ledger=ledger).value
    calls = run_stage(served, "proactive_update", PAYLOAD, max_tokens=256, ledger=ledger).value
    assert reply.reminder is None or reply.reminder.strip()
    assert all(c.name.startswith("memory_") for c in calls)
    assert [c.mode for c in ledger] == ["json_object+tools:json"] * 2 and served.server.alive
    assert all(c.fate in ("valid", "repaired") and c.requests >= 1 and c.ms > 0 for c in ledger)


def test_a_server_killed_mid_run_is_a_typed_error_and_close_stops_it(served) -> None:
    run_stage(served, "proactive_intervene", PAYLOAD, max_tokens=32)
    pid = served.server.pid
    os.kill(pid, signal.SIGKILL)
    served.server.proc.wait(timeout=10)
    ledger: list = []
    with pytest.raises(LLMTransportError, match="killed by signal 9"):
        run_stage(served, "proactive_intervene", PAYLOAD, max_tokens=32, ledger=ledger)
    assert ledger[0].fate == "failed"
    served.close()
    assert not served.server.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
