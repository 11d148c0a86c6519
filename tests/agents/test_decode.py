"""How the action model acts: ``generate`` maps a written action to an admissible command, ``generate-verbatim``
executes it as written, so ALFWorld answers an invalid one "Nothing happens." and the failure-response metrics
(MemArbiter's Table 5 (a)) count it."""

import pytest

from workbench.agents.loop import DECODES, Agent
from workbench.agents.policy import NoMemory
from workbench.envs.normalize import to_admissible
from workbench.eval.behaviour import failures, task_behaviour
from workbench.eval.config import RunConfig, select_tasks
from workbench.eval.sweep import GridError, load_grid


def test_unknown_decode_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="decode 'verbatim': expected one of score, generate, generate-verbatim, constrained"):
        RunConfig(out=str(tmp_path / "r"), memory="none", decode="verbatim")
    grid = tmp_path / "g.yaml"
    grid.write_text(f"out: {tmp_path / 'o'}\nconfigurations:\n  - {{name: a, memory: none, decode: verbatim}}\n")
    with pytest.raises(GridError, match="generate-verbatim"):
        load_grid(grid)
    assert DECODES == ("score", "generate", "generate-verbatim", "constrained")


@pytest.mark.integration
def test_verbatim_executes_what_the_model_writes_and_generate_maps_it(smollm):
    """The untrained instruct model writes chat replies instead of commands: verbatim, each one is executed and
    answered "Nothing happens."; mapped, the same replies become admissible commands that never fail."""
    from workbench.envs.alfworld import ALFWorldEnv

    task = select_tasks(RunConfig(out="-", split="valid_unseen", tasks="0:1", memory="none"))[0]
    env = ALFWorldEnv(max_steps=4)
    try:
        played = {d: Agent.from_model(smollm, decode=d, record_admissible=True).run(env, task, NoMemory(), max_steps=4)
                  .trajectory for d in ("generate-verbatim", "generate")}
    finally:
        env.close()
    verbatim, mapped = played["generate-verbatim"], played["generate"]
    invalid = [k for k, (s, rec) in enumerate(zip(verbatim.steps, verbatim.meta["steps"]))
               if to_admissible(s.action, rec["admissible"]) is None]
    assert [s.action for s in verbatim.steps] == [r["parsed_action"] for r in verbatim.meta["steps"]]
    assert invalid, "the untrained model should write at least one command ALFWorld cannot execute"
    assert failures(verbatim) == invalid
    assert task_behaviour(verbatim)["n_failures"] == len(invalid)
    assert all(to_admissible(s.action, r["admissible"]) for s, r in zip(mapped.steps, mapped.meta["steps"]))
    assert failures(mapped) == []
