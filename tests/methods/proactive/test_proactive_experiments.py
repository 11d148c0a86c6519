"""Notebook 06's run grid and its intervention table."""

from __future__ import annotations

import pytest

from workbench.studies.proactive_grids import proactive_configs
from workbench.studies.proactive_tables import intervention_table


def test_the_grid_is_the_action_agent_alone_and_every_variant(tmp_path):
    cfgs = proactive_configs("smollm2-135m-alfworld", "valid_unseen", "0:2", 50, tmp_path, interval=3,
                             triggers=["failed"])
    assert [c.memory for c in cfgs] == ["none", "proactive", "proactive-passive", "proactive-always",
                                        "proactive-advisor", "proactive-retrieval"]
    assert cfgs[0].interval is None and {c.interval for c in cfgs[1:]} == {3}
    assert cfgs[1].method == "proactive/k=3+failed"


def test_the_table_carries_the_reminder_re_score():
    m = {"n_episodes": 2, "success_rate": 0.5, "avg_steps": 10.0,
         "interventions": {"interventions_per_episode": 1.5, "silence_rate": 0.4, "reminder_o200k": 20.0,
                           "memory_calls_per_episode": 6, "latency_ms_per_call": 3.0, "errors_per_episode": 0,
                           "reminder_effect": {"n": 3, "mean_delta_p": 0.05, "changed": 1 / 3, "followed": 0.5}}}
    t = intervention_table({"proactive": m, "none": {"n_episodes": 2, "success_rate": 0.0, "avg_steps": 50.0}})
    assert t.loc["proactive", "mean Δp(action)"] == 0.05 and t.loc["proactive", "success_%"] == 50.0
    assert t.loc["none"].drop(["episodes", "success_%", "avg_steps"]).isna().all()  # no memory agent, no numbers


def test_the_placebo_keeps_every_position_and_replaces_only_the_reminders_words(tiny_lm):
    from workbench.agents.edits import EditError, PlaceboReminder
    from workbench.agents.policy import MemoryBlock
    from workbench.memory.trajectory import Step
    from workbench.prompts.layout import PromptBuilder

    b = PromptBuilder(tiny_lm.tokenizer, 4096)
    hist = [Step(observation="You arrive at drawer 1.", action="open drawer 1")]
    said = "drawer 1 failed twice; go to desk 1 instead."
    real = b.build("You are in a room.", "put a pen in shelf.", hist, final_observation="Nothing happens.",
                   reminder=said)
    fake = PlaceboReminder().edit_prompt(real, MemoryBlock(reminder=said), tiny_lm.tokenizer)
    assert (fake.n_tokens, len(fake.prefix), fake.spans) == (real.n_tokens, len(real.prefix), real.spans)
    start, end = real.kind_span("reminder")
    assert fake.tokens[:start] == real.tokens[:start] and fake.tokens[end - 1:] == real.tokens[end - 1:]
    said, placebo = (tiny_lm.tokenizer.decode(p.tokens[start:end]) for p in (real, fake))
    assert said.startswith("Reminder:") and placebo.startswith("Reminder: Keep working on the task")
    assert "drawer" not in placebo and "desk" not in placebo
    with pytest.raises(EditError, match="shows no reminder"):
        PlaceboReminder().edit_prompt(b.build("You are in a room.", "put a pen in shelf.", hist), MemoryBlock(),
                                      tiny_lm.tokenizer)


@pytest.mark.game
def test_reminder_attention_reports_the_placebo_control_at_the_same_steps(tiny_lm):
    from workbench.studies.reminder_attention import reminder_attention

    summary, trajs = reminder_attention(tiny_lm, [(0, 0), (1, 3)], "valid_unseen", "0", variant="proactive-always",
                                        max_steps=3)
    assert len(trajs) == 1 and summary["steps"] == summary["placebo_steps"] == len(summary["rows"]) > 0
    for r in summary["rows"]:
        assert r["u_token"] >= 0 and r["u_token_placebo"] >= 0 and 0 <= r["tv_vs_placebo"] <= 1
        assert isinstance(r["changed_vs_placebo"], bool)
    assert 0 <= summary["share_above_placebo"] <= 1 and summary["mean_u_token_placebo"] > 0
    off, _ = reminder_attention(tiny_lm, [(0, 0)], "valid_unseen", "0", variant="proactive-always", max_steps=2,
                                placebo=False)
    assert "placebo_steps" not in off and "u_token_placebo" not in off["rows"][0]


@pytest.mark.game
def test_reminder_attention_resumes_from_its_cache(tiny_lm, tmp_path, monkeypatch):
    import workbench.agents.loop as loop
    from workbench.studies.reminder_attention import reminder_attention

    first, trajs = reminder_attention(tiny_lm, [(0, 0)], "valid_unseen", "0", variant="proactive-always",
                                      max_steps=2, cache_dir=tmp_path)

    def played(*a, **k):
        raise AssertionError("played again")

    monkeypatch.setattr(loop.Agent, "run", played)
    again, trajs2 = reminder_attention(tiny_lm, [(0, 0)], "valid_unseen", "0", variant="proactive-always",
                                       max_steps=2, cache_dir=tmp_path)
    assert again == first and [t.task_id for t in trajs2] == [t.task_id for t in trajs] and first["steps"] > 0
    with pytest.raises(AssertionError, match="played again"):  # another variant is another analysis
        reminder_attention(tiny_lm, [(0, 0)], "valid_unseen", "0", variant="proactive-retrieval", max_steps=2,
                           cache_dir=tmp_path)


def _episode(task, success, reminders, actions=None):
    """An episode whose steps carry ``reminders`` (None: a silent step) with their re-score records."""
    from workbench.memory.trajectory import Step, Trajectory

    steps = []
    for text, changed, mentions, followed in reminders:
        rec = {"proactive": {"reminder": text, "silent": text is None}}
        if text is not None:
            rec |= {"reminder": text, "reminder_effect": {"p_action": 0.3, "p_action_without": 0.2, "tv": 0.1,
                                                          "changed": changed, "mentions": mentions,
                                                          "followed": followed}}
        steps.append(rec)
    return Trajectory(task_id=task, goal="g", success=success, meta={"steps": steps},
                      steps=tuple(Step(observation="o", action=a) for a in actions or ["look"] * len(reminders)))


def test_reminders_by_kind_and_the_tasks_where_the_memory_agent_spoke():
    from workbench.studies.proactive_tables import reminder_kinds, spoken_tasks

    warn = ("Stop repeating: you already did 'go to shelf 2'.", True, ["go to shelf 2"], True)
    direct = ("Go to fridge 1 next.", False, ["go to fridge 1"], False)
    fact = ("Memory: apple 1 is in/on fridge 1.", False, [], None)
    task = ("task: turn on a desklamp to look at it", False, ["look"], False)  # names no command: look is unquoted
    silent = (None, None, None, None)
    runs = {
        "none": ([_episode(t, ok, [silent]) for t, ok in (("t1", False), ("t2", True), ("t3", False))], {}, {}),
        "proactive": ([_episode("t1", True, [warn, fact, silent, task]), _episode("t2", True, [silent, silent]),
                       _episode("t3", False, [direct, warn], actions=["go to shelf 3", "go to shelf 2"])], {}, {}),
    }
    kinds = reminder_kinds({"proactive": runs["proactive"]})
    assert kinds.loc[("proactive", "warning"), "reminders"] == 2 and kinds.loc[("proactive", "warning"), "share"] == 0.4
    # t1 chose look (not the warned-against command: followed), t3 chose 'go to shelf 2' again (not followed)
    assert kinds.loc[("proactive", "warning"), "followed"] == 0.5 and kinds.loc[("proactive", "warning"), "episodes"] == 2
    assert kinds.loc[("proactive", "directive"), "followed"] == 0  # go to shelf 3, not fridge 1
    assert kinds.loc[("proactive", "fact"), "reminders"] == 2 and kinds.loc[("proactive", "fact"), "judged"] == 0
    assert kinds.loc[("proactive", "fact"), "success_% of those episodes"] == 100

    spoke = spoken_tasks(runs).loc["proactive"]
    assert (spoke["shown something"], spoke["never shown anything"]) == (2, 1)  # t2: silent throughout
    assert (spoke["success_% where shown"], spoke["none success_% there"]) == (50, 0)
    assert (spoke["only this"], spoke["only none"], spoke["p_mcnemar"]) == (1, 0, 1.0)


def test_written_action_table_reads_failures_and_what_the_warning_did():
    """Failures, recovery and repetition per run, and after a failed command: repeated with the warning vs
    written again without it (the same prompt without the reminder)."""
    from workbench.agents.counterfactual import written_reminder_effect
    from workbench.memory.trajectory import Step, Trajectory
    from workbench.studies.proactive_tables import written_action_table

    bad, nothing = "open drawer 9", "Nothing happens."

    def episode(actions, observations, reminders, success=False):
        steps = tuple(Step(observation=o, action=a) for a, o in zip(actions, observations))
        recs = []
        for k, text in enumerate(reminders):
            rec = {"proactive": {"reminder": text}}
            if text:
                rec |= {"reminder": text, "reminder_effect": written_reminder_effect(text, [bad], actions[k], bad)}
            recs.append(rec)
        return Trajectory(task_id="t1", goal="g", success=success, steps=steps,
                          meta={"steps": recs, "final_observation": "ok"})

    none = episode([bad, bad, "look"], ["start", nothing, nothing], [None, None, None])
    warn = f"'{bad}' did nothing before; do not repeat it."
    pro = episode([bad, "look", "look"], ["start", nothing, "room"], [None, warn, None], success=True)
    table = written_action_table({"none-verbatim": ([none], {}, {}), "proactive-verbatim": ([pro], {}, {})})
    assert table.loc["none-verbatim", "failed_executions"] == 2
    assert table.loc["proactive-verbatim", "failed_executions"] == 1
    assert table.loc["none-verbatim", "failed_action_repetition_own"] == 0.5  # repeated once, then looked
    assert table.loc["proactive-verbatim", "failed_action_repetition_own"] == 0.0
    assert table.loc["proactive-verbatim", "common (1 tasks): one_step_recovery"] == 1.0
    row = table.loc["proactive-verbatim"]
    assert row["reminders after a failure"] == 1
    assert (row["repeats the failed command with the reminder"], row["without it"]) == (0, 1)
    assert table.loc["none-verbatim", "reminders after a failure"] == 0 and row["success_%"] == 100


def _assert_rows_replay_the_run(rows, trajs, states) -> None:
    """An ablation's rows are the run's ``states`` in order, and each replays what the run recorded there: the
    reminder, the action, and the action its own counterfactual took without the reminder."""
    assert [(r["task_id"], r["step"]) for r in rows] == states
    by_task = {t.task_id: t for t in trajs}
    for r in rows:
        rec = by_task[r["task_id"]].meta["steps"][r["step"]]
        assert r["replayed_same"] and r["as played"] == r["recorded"] and r["reminder"] == rec["reminder"]
        assert r["without"] == rec["reminder_effect"]["action_without"]


@pytest.mark.game
def test_the_reminder_quote_ablation_writes_the_action_again_four_ways_at_each_state_after_a_failure(tiny_lm, tmp_path,
                                                                                                    monkeypatch):
    """A random model's written commands all fail, so every reminder step after the first is such a state. The
    replay gives the reminder played and writes the recorded command; unquoted / placebo / without write from
    other prompts; the rows come back from the cache, and a scoring run is refused."""
    from dataclasses import replace

    from workbench.eval.behaviour import failures
    from workbench.eval.config import RunConfig
    from workbench.eval.run import run
    from workbench.eval.run_folder import load_run
    from workbench.models.generation import PrefixGenerator
    from workbench.studies.reminder_quote import (
        REMINDER_ABLATIONS,
        reminder_quote_ablation,
        summarize_reminder_quote,
    )

    cfg = RunConfig(out=str(tmp_path / "proactive-always-verbatim"), split="valid_unseen", tasks="0:2",
                    memory="proactive-always", interval=1, max_steps=5, decode="generate-verbatim",
                    teacher_forcing=False, model=tiny_lm.name)
    run(cfg, lm=tiny_lm, progress=False)
    trajs = load_run(cfg.out)[0]
    states = [(t.task_id, k) for t in trajs for k, rec in enumerate(t.meta["steps"])
              if rec.get("reminder") and k - 1 in set(failures(t))]
    assert len(states) >= 4
    rows = reminder_quote_ablation(tiny_lm, cfg, trajs, cache_dir=tmp_path / "analysis")
    _assert_rows_replay_the_run(rows, trajs, states)
    for r in rows:
        assert r["quoted"] == (r["failed"].lower() in r["reminder"].lower())
        assert all(isinstance(r[f"{v}|repeats"], bool) for v in REMINDER_ABLATIONS)
    summary = summarize_reminder_quote(rows)
    assert list(summary.index) == list(REMINDER_ABLATIONS) and summary.attrs["replayed_same"] == len(rows)
    assert summary.loc["as played", "writes another command than as played"] == 0
    assert summary.loc["unquoted", "states"] == sum(r["quoted"] for r in rows)

    def no_generation(*a, **k):
        raise AssertionError("cached episodes are not analysed again")

    monkeypatch.setattr(PrefixGenerator, "generate", no_generation)
    assert reminder_quote_ablation(tiny_lm, cfg, trajs, cache_dir=tmp_path / "analysis") == rows
    with pytest.raises(ValueError, match="expected 'generate-verbatim'"):
        reminder_quote_ablation(tiny_lm, replace(cfg, decode="score"), trajs)


@pytest.mark.game
def test_the_warning_pull_ablation_scores_each_warning_state_five_ways(tiny_lm, tmp_path, monkeypatch):
    """A random scoring agent loops, so the memory agent warns: every reminder that warns against an admissible
    command is one state. The replay gives the reminder played and its choice; without the line it chooses what
    the run's own counterfactual chose; the rows come back from the cache, and a written-action run is refused."""
    from dataclasses import replace

    from workbench.agents.counterfactual import is_warning, named_commands
    from workbench.agents.loop import Agent
    from workbench.eval.config import RunConfig
    from workbench.eval.run import run
    from workbench.eval.run_folder import load_run
    from workbench.studies.warning_pull import (
        UNNAMED,
        WARNING_ABLATIONS,
        summarize_warning_pull,
        warning_pull_ablation,
    )

    cfg = RunConfig(out=str(tmp_path / "proactive-always"), split="valid_unseen", tasks="0:2",
                    memory="proactive-always", interval=1, max_steps=12, decode="score", teacher_forcing=False,
                    model=tiny_lm.name)
    run(cfg, lm=tiny_lm, progress=False)
    trajs = load_run(cfg.out)[0]
    states = [(t.task_id, k) for t in trajs for k, rec in enumerate(t.meta["steps"])
              if rec.get("reminder") and is_warning(rec["reminder"])
              and named_commands(rec["reminder"], rec["reminder_effect"]["mentions"])]
    assert len(states) >= 2
    rows = warning_pull_ablation(tiny_lm, cfg, trajs, cache_dir=tmp_path / "analysis")
    _assert_rows_replay_the_run(rows, trajs, states)
    for r in rows:
        assert r["warned"] and r["as played|warned"] == (r["recorded"] in r["warned"])
        assert r["has_memory"] == (" Memory: " in r["reminder"]) and (r["no memory"] is None) != r["has_memory"]
        assert all(0 <= r[f"{v}|p_warned"] <= 1 + 1e-6 for v in WARNING_ABLATIONS if r[v] is not None)
    summary = summarize_warning_pull(rows)
    assert list(summary.index) == list(WARNING_ABLATIONS) and summary.attrs["replayed_same"] == len(rows)
    assert summary.loc["without", "pulled vs without"] == summary.loc["without", "pushed vs without"] == 0
    assert summary.loc["no memory", "states"] == sum(r["has_memory"] for r in rows)
    played = summary.loc["as played"]
    assert played["pulled vs without"] == sum(r["as played|warned"] and not r["without|warned"] for r in rows)

    def no_scoring(*a, **k):
        raise AssertionError("cached episodes are not analysed again")

    monkeypatch.setattr(Agent, "decide", no_scoring)
    assert warning_pull_ablation(tiny_lm, cfg, trajs, cache_dir=tmp_path / "analysis") == rows
    with pytest.raises(ValueError, match="expected 'score'"):
        warning_pull_ablation(tiny_lm, replace(cfg, decode="generate-verbatim"), trajs)
    assert UNNAMED not in "".join(r["reminder"] for r in rows)
