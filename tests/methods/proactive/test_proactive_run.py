"""`workbench run --memory proactive* [--interval K] [--trigger EVENT]` end to end on real ALFWorld games with a
tiny random model loaded by path: records, reminders in the action prompt of their own step only (a step without
one has no reminder span), teacher forcing."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.memory.trajectory import iter_jsonl_dicts


@pytest.mark.parametrize("memory,extra", [("proactive", ["--interval", "2", "--trigger", "failed"]),
                                          ("proactive-passive", [])])
@pytest.mark.game
def test_cli_run(tiny_model_dir, tmp_path, memory, extra):
    out = tmp_path / memory
    assert main(["run", "--model", str(tiny_model_dir), "--split", "valid_unseen", "--tasks", "0:134:67",
                 "--max-steps", "5", "--teacher-forcing-tasks", "0:1", "--memory", memory, *extra,
                 "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())["run"]
    assert cfg["memory"] == memory and cfg["interval"] == (2 if extra else 1)
    shown = 0
    for t in iter_jsonl_dicts(out / "trajectories.jsonl"):
        steps = t["meta"]["steps"]
        shown += sum(bool(s["proactive"]["reminder"]) for s in steps)
        for k, s in enumerate(steps):
            rec = s["proactive"]
            if memory == "proactive":
                assert (rec["trigger"] is not None) == (k % 2 == 0 or rec["trigger"] == "failed")
            if rec["reminder"]:
                assert s["reminder"] == rec["reminder"] and s["reminder_tokens"] > 0
                eff = s["reminder_effect"]  # the same state re-scored without the reminder
                assert eff["p_action"] == pytest.approx(s["p_action"], abs=1e-4)
                assert eff["changed"] == (eff["action_without"] != t["steps"][k]["action"])
            else:
                assert "reminder" not in s and "reminder_effect" not in s
    if memory == "proactive-passive":
        assert shown > 0  # the bank is in the prompt from the first sighting on
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interventions"]["interventions_per_episode"] == shown / 2
    assert json.loads((out / "teacher_forced.json").read_text())["result"]["n_steps"] > 0


@pytest.mark.game
def test_an_agent_that_writes_its_action_writes_it_again_without_the_reminder(tiny_lm, monkeypatch):
    """``decode=generate-verbatim``: at a reminder step the loop writes the action a second time from the same
    prompt without the reminder line, and records what it wrote (no distribution: no p fields)."""
    import workbench.agents.loop as loop
    from workbench.agents.counterfactual import follows
    from workbench.agents.policy import build_policy
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.envs.alfworld_text import normalize
    from workbench.eval.config import RunConfig, select_tasks
    from workbench.eval.interventions import intervention_metrics

    calls = []
    real = loop.PrefixGenerator.generate

    def spy(self, prefix, suffix, admissible):
        gen = real(self, prefix, suffix, admissible)
        calls.append((list(prefix) + list(suffix), gen.parsed))
        return gen

    monkeypatch.setattr(loop.PrefixGenerator, "generate", spy)
    task = select_tasks(RunConfig(out="-", split="valid_unseen", tasks="0:1", memory="none"))[0]
    env = ALFWorldEnv(max_steps=3)
    try:
        traj = loop.Agent.from_model(tiny_lm, decode="generate-verbatim").run(
            env, task, build_policy("proactive-always"), max_steps=3).trajectory
    finally:
        env.close()
    tok = tiny_lm.tokenizer
    k = 0
    for step, rec in zip(traj.steps, traj.meta["steps"]):
        assert rec["reminder"]  # always-on: a reminder at every trigger
        (with_tokens, written), (bare_tokens, again) = calls[k], calls[k + 1]
        k += 2
        assert written == step.action == rec["parsed_action"]
        assert rec["reminder"] in tok.decode(with_tokens) and rec["reminder"] not in tok.decode(bare_tokens)
        eff = rec["reminder_effect"]
        assert eff["written"] and "p_action" not in eff and eff["action_without"] == again
        assert eff["changed"] == (normalize(again) != normalize(written))
        assert eff["followed"] == follows(rec["reminder"], step.action, eff["mentions"])
    assert k == len(calls) == 2 * len(traj.steps)
    summary = intervention_metrics([traj])["reminder_effect"]
    assert summary["n"] == len(traj.steps) and "mean_delta_p" not in summary and 0 <= summary["changed"] <= 1
