"""Item-level utilization over working-memory prompts: the formula on planted rows, and a real capture."""

from __future__ import annotations

import pytest
import torch

from workbench.agents.loop import Agent
from workbench.attention.capture import CapturedStep
from workbench.attention.instrument import CaptureInstrument
from workbench.attention.items import (
    focal_vs_ambient,
    item_utilization,
    span_utilization,
)
from workbench.prompts.layout import PromptBuilder
from workbench.prompts.working_memory import (
    WMPiece,
    build_working_memory_prompt,
    item_spans,
)

BLOCK = (WMPiece("wm_open", "Working memory:\n"), WMPiece("wm_bank", "Episodic:\n", bank="episodic"),
         WMPiece("wm_item", "- Step 2: 'open drawer 1' -> Nothing happens.\n", item="E1", bank="episodic", band="F"),
         WMPiece("wm_item", "- go to desk 1: ok\n", item="E2", bank="episodic", band="A"),
         WMPiece("wm_close", "(End of working memory.)\n"))


def test_planted_rows_give_the_formula(tiny_lm):
    p = build_working_memory_prompt(PromptBuilder(tiny_lm.tokenizer, 4096), "put a pen in shelf.", "You see a desk.", BLOCK)
    n = p.n_tokens
    spans = item_spans(p)
    rows = torch.full((2, n), 1.0 / n)  # uniform: every token worth 1
    e1 = spans["E1"]
    rows[0] = 0.0
    rows[0, e1.start:e1.end] = 1.0 / (e1.end - e1.start)  # head 0 reads only E1
    step = CapturedStep(rows=rows, prompt_len=n, n_cached=0)
    got = {r["item"]: r for r in item_utilization([step], [p])}
    assert got["E1"]["u"] == pytest.approx(n * (1.0 + (e1.end - e1.start) / n) / 2)
    assert got["E2"]["u_token"] == pytest.approx(0.5)  # only the uniform head reaches it: half of 1 per token
    fa = focal_vs_ambient(list(got.values()))
    assert fa["episodic"]["focal_higher"] == 1.0 and fa["episodic"]["steps"] == 1
    assert fa["episodic"]["focal_u"] == got["E1"]["u"] and fa["episodic"]["ambient_u"] == got["E2"]["u"]
    assert fa["episodic"]["focal_tokens"] == got["E1"]["tokens"] > fa["episodic"]["ambient_tokens"]
    assert (fa["episodic"]["focal_items"], fa["episodic"]["ambient_items"]) == (1, 1)
    # a bank shown in one band only is listed, with no within-step comparison
    alone = focal_vs_ambient([{**got["E1"], "bank": "goal", "step": 0}, {**got["E2"], "bank": "goal", "step": 1}])
    assert alone["goal"]["steps"] == 0 and alone["goal"]["focal_u_token"] is None
    assert (alone["goal"]["focal_items"], alone["goal"]["ambient_items"]) == (1, 1)
    with pytest.raises(ValueError, match="outside"):
        span_utilization(step, 0, n + 1)


@pytest.mark.game
def test_a_real_capture_of_an_arbiter_episode(tiny_lm):
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.eval.config import RunConfig, select_tasks
    from workbench.methods.arbiter import ArbiterPolicy

    env, task = ALFWorldEnv(), select_tasks(RunConfig(out="x", tasks="0"))[0]
    agent = Agent.from_model(tiny_lm, keep_prompts=True)
    inst = CaptureInstrument(agent, "all")
    inst.reset()
    try:
        res = agent.run(env, task, ArbiterPolicy(budget=300), instruments=[inst], max_steps=3)
    finally:
        env.close()
    rows = item_utilization(inst.capture.steps, inst.prompts)
    shown = sum(1 for p in res.prompts for s in p.spans if s.kind == "wm_item")
    assert len(rows) == shown > 0
    for r in rows:
        assert r["u"] >= 0 and r["band"] in ("F", "A") and r["tokens"] > 0
    per_step = {}
    for r in rows:
        per_step[r["step"]] = per_step.get(r["step"], 0.0) + r["u"]
    assert all(v <= p.n_tokens + 1e-3 for v, p in zip(per_step.values(), inst.prompts))  # rows sum to 1
