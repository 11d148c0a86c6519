"""The proactive memory agent's evaluation (notebook 06): the method, its four ablations and the unchanged action
agent alone, as run folders ``ROOT/<model>/<condition>`` on the same tasks, model and dtype; what the reminders did
(the counterfactual re-score every run records) and whether the retrieval heads read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import mean

from workbench.methods.proactive.variants import list_variants

__all__ = ["proactive_configs", "verbatim_configs", "written_action_table", "VERBATIM", "silent_pairs",
           "intervention_table", "reminder_attention", "placebo_prompt",
           "PLACEBO_TEXT", "named_commands", "reminder_kind", "reminder_kinds", "spoken_tasks",
           "REMINDER_ABLATIONS", "reminder_quote_ablation", "summarize_reminder_quote", "WARNING_ABLATIONS",
           "UNNAMED", "warning_pull_ablation", "summarize_warning_pull"]

#: Variants that show the action agent nothing until the memory agent speaks: where it stays silent for a whole
#: episode, the prompts are the action agent's alone at every step and the episode is ``none``'s.
SILENT_UNTIL_SPOKEN = ("proactive", "proactive-advisor")


def proactive_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                      variants: Sequence[str] | None = None, baselines: Sequence[str] = ("none",), interval: int = 1,
                      triggers: Sequence[str] = (), dtype: str = "float32", backend: str | None = None) -> list:
    """One run per baseline (``none``: the action agent alone) and per variant (default: all five)."""
    from workbench.eval.runner import RunConfig

    out = Path(root) / model
    common = dict(split=split, tasks=tasks, model=model, max_steps=max_steps, dtype=dtype, teacher_forcing=False)
    cfgs = [RunConfig(out=str(out / b), memory=b, **common) for b in baselines]
    for v in variants or list_variants():
        cfgs.append(RunConfig(out=str(out / v), memory=v, interval=interval, triggers=tuple(triggers),
                              **({"backend": backend} if backend else {}), **common))
    return cfgs


#: The folder suffix of the written-action runs (:func:`verbatim_configs`).
VERBATIM = "verbatim"


def verbatim_configs(model: str, split: str, tasks: str, max_steps: int, root: str | Path,
                     variants: Sequence[str] = ("proactive",), interval: int = 1, triggers: Sequence[str] = (),
                     dtype: str = "float32", backend: str | None = None) -> list:
    """The action agent alone and the method with the actions written by the model and executed as written
    (``decode="generate-verbatim"``), in folders ``<condition>-verbatim``.

    A scoring agent picks admissible commands, which ALFWorld always executes: it never fails a command, so the
    memory agent's rule for a known dead end (a command that failed before) never fires. An agent that writes its
    action fails commands ("Nothing happens.") and repeats them; there the memory agent's warnings can matter. At
    every reminder step the loop also writes the action again without the reminder
    (:func:`workbench.agents.counterfactual.written_reminder_effect`)."""
    from dataclasses import replace

    return [replace(c, out=f"{c.out}-{VERBATIM}", decode="generate-verbatim")
            for c in proactive_configs(model, split, tasks, max_steps, root, variants=variants, interval=interval,
                                       triggers=triggers, dtype=dtype, backend=backend)]


def written_action_table(runs: dict):
    """The written-action runs (:func:`verbatim_configs`), one row per condition: success and steps; failed
    executions and the tasks with any; one-step recovery and failed-action repetition over each run's own failure
    tasks and over the tasks every run failed a command on (``common``; :mod:`workbench.eval.behaviour`); adjacent
    repetition; and at the reminder steps that follow a failed command, how often the agent wrote the failed
    command again with the reminder and how often it would have without it (the same prompt written again
    without the reminder line). ``runs``: condition -> :func:`~workbench.eval.runner.load_run`."""
    import pandas as pd

    from workbench.envs.alfworld_text import normalize
    from workbench.eval.behaviour import common_failure_rates, failures, own_failure_rates, recurrence_rates

    trajs = {n: r[0] for n, r in runs.items()}
    common = common_failure_rates(trajs)
    rows = {}
    for name, ts in trajs.items():
        after = []  # (repeated with the reminder, would have repeated without it) after a failed command
        for t in ts:
            failed = set(failures(t))
            for k, (step, rec) in enumerate(zip(t.steps, t.meta.get("steps", []))):
                eff = rec.get("reminder_effect")
                if eff is None or k - 1 not in failed or "action_without" not in eff:
                    continue
                prev = normalize(t.steps[k - 1].action)
                after.append((normalize(step.action) == prev, normalize(eff["action_without"]) == prev))
        own = own_failure_rates(ts)
        rows[name] = {"episodes": len(ts), "success_%": 100 * mean(t.success for t in ts) if ts else None,
                      "avg_steps": mean(t.n_steps for t in ts) if ts else None, **own,
                      f"common ({len(common['tasks'])} tasks): one_step_recovery": common[name]["one_step_recovery"],
                      "common: failed_action_repetition": common[name]["failed_action_repetition"],
                      "adjacent_repetition": recurrence_rates(ts)["adjacent_repetition"],
                      "reminders after a failure": len(after),
                      "repeats the failed command with the reminder": mean(a for a, _ in after) if after else None,
                      "without it": mean(b for _, b in after) if after else None}
    return pd.DataFrame.from_dict(rows, orient="index")


def silent_pairs(cfgs: Sequence) -> list[tuple]:
    """``(configuration, none)`` pairs for :func:`workbench.eval.driver.drive`'s ``same_memory``: the
    :data:`SILENT_UNTIL_SPOKEN` variants adopt the action agent's episodes on which the memory agent never speaks
    (the pairs of ``grids/proactive_valid_unseen.yaml``)."""
    none = next((c for c in cfgs if c.memory == "none"), None)
    return [] if none is None else [(c, none) for c in cfgs if c.memory in SILENT_UNTIL_SPOKEN]


def intervention_table(metrics: dict[str, dict]):
    """Success, steps and ``metrics.json``'s ``interventions`` block per condition (reminders per episode, silence
    rate, reminder tokens, memory-agent calls and latency, and the reminder re-score: mean delta p, how flat the
    choice was without the reminder (median p of the chosen action) and how far the reminder moved the
    distribution (mean total variation), share changed, share followed)."""
    import pandas as pd

    rows = {}
    for name, m in metrics.items():
        iv = m.get("interventions") or {}
        eff = iv.get("reminder_effect") or {}
        rows[name] = {"episodes": m["n_episodes"], "success_%": 100 * m["success_rate"], "avg_steps": m["avg_steps"],
                      "interventions/episode": iv.get("interventions_per_episode"),
                      "silence_rate": iv.get("silence_rate"), "reminder_o200k": iv.get("reminder_o200k"),
                      "memory_calls/episode": iv.get("memory_calls_per_episode"),
                      "latency_ms/call": iv.get("latency_ms_per_call"), "errors/episode": iv.get("errors_per_episode"),
                      "re-scored reminders": eff.get("n"), "mean Δp(action)": eff.get("mean_delta_p"),
                      "median p(action) without": eff.get("median_p_action_without"), "mean TV": eff.get("mean_tv"),
                      "changed": eff.get("changed"), "followed": eff.get("followed")}
    return pd.DataFrame.from_dict(rows, orient="index")


def named_commands(effect: dict, reminder: str) -> list[str]:
    """The admissible commands a reminder names (:func:`workbench.agents.counterfactual.named_commands` over the
    re-score's ``mentions``: a one-word command such as look counts only when quoted)."""
    from workbench.agents.counterfactual import named_commands as named

    return named(reminder, effect.get("mentions") or [])


def reminder_kind(effect: dict, reminder: str) -> str:
    """What a reminder asks: ``warning`` (stop / avoid / already / failed / do not ...: the rule ``followed`` uses,
    :mod:`workbench.agents.counterfactual`), ``directive`` (names an admissible command, :func:`named_commands`,
    without warning against it), ``fact`` (names none: a location, the task, a status)."""
    from workbench.agents.counterfactual import is_warning

    return "warning" if is_warning(reminder) else "directive" if named_commands(effect, reminder) else "fact"


def reminder_kinds(runs: dict):
    """The counterfactual re-score of every reminder step (``reminder_effect`` records), per condition and
    :func:`reminder_kind`: reminders, their share of the condition's, mean total variation between the choice
    distributions with and without the reminder, share of choices it changed, share followed (of those naming a
    command, :func:`named_commands`: a warning is followed when the action is none of them, any other reminder
    when it is one of them), and the success of the episodes such reminders were shown in. ``runs``: condition ->
    :func:`~workbench.eval.runner.load_run`. A DataFrame indexed ``(condition, kind)``."""
    import pandas as pd

    from workbench.agents.counterfactual import follows

    rows = {}
    for name, (trajs, _, _) in runs.items():
        found = []
        for t in trajs:
            for step, rec in zip(t.steps, t.meta.get("steps", [])):
                if "reminder_effect" not in rec:
                    continue
                effect, text = rec["reminder_effect"], rec.get("reminder") or ""
                kind, followed = reminder_kind(effect, text), follows(text, step.action, effect.get("mentions") or [])
                found.append((kind, effect, followed, t.success, t.task_id))
        for kind in ("warning", "directive", "fact"):
            mine = [(e, f, ok, tid) for k, e, f, ok, tid in found if k == kind]
            if not mine:
                continue
            judged = [f for _, f, _, _ in mine if f is not None]
            tvs = [e["tv"] for e, _, _, _ in mine if "tv" in e]
            episodes = {tid: ok for _, _, ok, tid in mine}
            rows[(name, kind)] = {
                "reminders": len(mine), "share": len(mine) / len(found), "mean TV": mean(tvs) if tvs else None,
                "changed": mean(bool(e["changed"]) for e, _, _, _ in mine),
                "followed": mean(judged) if judged else None, "judged": len(judged),
                "episodes": len(episodes), "success_% of those episodes": 100 * mean(episodes.values())}
    return pd.DataFrame.from_dict(rows, orient="index")


def spoken_tasks(runs: dict, reference: str = "none"):
    """Where did the memory agent change anything? Per condition: the tasks on which the action agent was shown
    something at some step (a reminder, or for passive exposure the bank) and those on which it never was (for
    the silent-until-spoken variants those episodes *are* the action agent's alone), and on the shown tasks the
    paired comparison with ``reference`` (exact McNemar): the only tasks where the condition can differ from it.
    A DataFrame indexed by condition."""
    import pandas as pd

    from workbench.eval.compare import paired_outcomes

    ref = {t.task_id: t.success for t in runs[reference][0]}
    rows = {}
    for name, (trajs, _, _) in runs.items():
        if name == reference:
            continue
        shown = {t.task_id: t.success for t in trajs if any(s.get("reminder") for s in t.meta.get("steps", []))}
        pair = paired_outcomes(shown, ref)
        rows[name] = {"tasks": len(trajs), "shown something": len(shown),
                      "never shown anything": len(trajs) - len(shown),
                      "success_% where shown": 100 * pair["rate_a"] if pair["rate_a"] is not None else None,
                      f"{reference} success_% there": 100 * pair["rate_b"] if pair["rate_b"] is not None else None,
                      "only this": pair["only_a"], f"only {reference}": pair["only_b"], "p_mcnemar": pair["p_mcnemar"]}
    return pd.DataFrame.from_dict(rows, orient="index")


#: The placebo reminder's words: an instruction that names no object, place or command (its tokens are cut to the
#: real reminder's length).
PLACEBO_TEXT = "Keep working on the task one step at a time."


def placebo_prompt(prompt, tokenizer, text: str = PLACEBO_TEXT):
    """``prompt`` with its reminder's words replaced, token for token, by a content-free placebo of the same length.

    The label (``Reminder:``, whatever word the span starts with before its colon) and the span's last token (its line end) stay, every other token of the reminder
    span becomes a token of ``text`` (repeated and cut to length), so every position, the history, the candidates
    and the span are the same: only what the reminder says differs. None when the prompt has no reminder (or one
    with no words between label and line end).
    """
    from dataclasses import replace

    span = prompt.kind_span("reminder")
    if span is None:
        return None
    start, end = span
    toks = prompt.tokens
    label = tokenizer.decode(toks[start:end]).split(":", 1)[0].strip()
    head = list(tokenizer(f"{label}:", add_special_tokens=False).input_ids)
    k = len(head) if toks[start:start + len(head)] == head else 0
    body = end - 1 - (start + k)
    if body <= 0:
        return None
    filler = list(tokenizer((" " + text.strip()) * (body // 4 + 2), add_special_tokens=False).input_ids)[:body]
    if len(filler) < body:
        raise ValueError(f"placebo text '{text}' is too short to fill {body} tokens")
    new = toks[:start + k] + filler + toks[start + k + body:]
    cut = len(prompt.prefix)
    return replace(prompt, prefix=tuple(new[:cut]), suffix=tuple(new[cut:]))


def _placebo_row(agent, heads, prompt, admissible: list[str]) -> dict | None:
    """The reminder step re-scored twice at the same state: as played, and with the placebo in the reminder's
    place (heads captured); the placebo span's u_token and how the two distributions differ."""
    from workbench.models.scoring import ActionScorer
    from workbench.attention.instrument import CaptureInstrument
    from workbench.attention.items import span_utilization
    from workbench.agents.counterfactual import choice_shift

    fake = placebo_prompt(prompt, agent.builder.tokenizer)
    if fake is None:
        return None
    inst = CaptureInstrument(agent, list(heads))
    inst.reset()
    placebo = ActionScorer.normalise(agent.decide(fake, admissible, [inst]).scores)
    real = ActionScorer.normalise(agent.decide(prompt, admissible).scores)
    start, end = fake.kind_span("reminder")
    u = span_utilization(inst.capture.steps[-1], start, end)
    best, alt, tv = choice_shift(real, placebo)
    return {"u_token_placebo": u / (end - start), "p_action_placebo": placebo[best],
            "changed_vs_placebo": best != alt, "tv_vs_placebo": tv}


def reminder_attention(lm, heads, split: str, tasks: str, variant: str = "proactive", max_steps: int = 50,
                       placebo: bool = True, cache_dir: str | Path | None = None) -> tuple[dict, list]:
    """Do the retrieval heads read the reminder, and more than its place in the prompt explains? While ``variant``
    plays ``tasks`` with the heads captured: the reminder span's per-token attention u_token (1 = an average
    prompt token) at every reminder step; with ``placebo``, the same state re-scored with the reminder's words
    replaced by a content-free placebo of the same token length (:func:`placebo_prompt`): the placebo span's
    u_token is the position-and-length control (a reminder sits right before the action, where recency alone
    draws attention), and the choice and distribution with the reminder against the placebo's say what its
    content did.

    Returns:
        ``(summary, trajectories)``: ``summary`` has ``steps`` (reminder steps), ``mean_u_token``,
        ``share_above_average`` (u_token > 1), with ``placebo``: ``mean_u_token_placebo``,
        ``share_above_placebo`` (the reminder read more than the placebo at the same step),
        ``changed_vs_placebo`` (share of steps whose choice differs), ``mean_tv_vs_placebo``; and ``rows`` (one
        per reminder step, with the task id). Each task's rows and episode are kept in ``cache_dir`` as it finishes
        (:class:`~workbench.eval.task_cache.TaskCache`: a render resumes; None keeps nothing).
    """
    from workbench.agents.loop import Agent
    from workbench.attention.items import item_utilization
    from workbench.attention.instrument import CaptureInstrument
    from workbench.envs.alfworld import ALFWorldEnv
    from workbench.eval.runner import RunConfig, policy_for, select_tasks

    from workbench.eval.task_cache import TaskCache, analysis_key
    from workbench.memory.trajectory import Trajectory

    cfg = RunConfig(out="-", split=split, tasks=tasks, memory=variant)
    cache = TaskCache(cache_dir, f"reminder_attention-{variant}", analysis_key(
        lm, heads=[list(h) for h in heads], split=split, variant=variant, max_steps=max_steps, placebo=placebo))
    agent, env = None, None
    rows, trajs = [], []
    try:
        for task in select_tasks(cfg):
            if (done := cache.get(task.task_id)) is None:
                if env is None:
                    agent = Agent.from_model(lm, keep_prompts=True, record_admissible=True)
                    env = ALFWorldEnv(max_steps=max_steps)
                inst = CaptureInstrument(agent, list(heads))
                inst.reset()
                res = agent.run(env, task, policy_for(cfg), instruments=[inst], max_steps=max_steps)
                records = res.trajectory.meta["steps"]
                mine = []
                for r in item_utilization(inst.capture.steps, inst.prompts):
                    if r["item"] != "reminder":
                        continue
                    r = r | {"task_id": task.task_id}
                    if placebo:
                        r |= _placebo_row(agent, heads, inst.prompts[r["step"]], records[r["step"]]["admissible"]) or {}
                    mine.append(r)
                done = {"rows": mine, "trajectory": res.trajectory.model_dump(mode="json")}
                cache.put(task.task_id, done)
            rows += done["rows"]
            trajs.append(Trajectory.model_validate(done["trajectory"]))
    finally:
        if env is not None:
            env.close()
    summary = {"steps": len(rows), "mean_u_token": mean(r["u_token"] for r in rows) if rows else None,
               "share_above_average": mean(r["u_token"] > 1 for r in rows) if rows else None}
    if placebo:
        ctl = [r for r in rows if "u_token_placebo" in r]
        summary |= {"placebo_steps": len(ctl),
                    "mean_u_token_placebo": mean(r["u_token_placebo"] for r in ctl) if ctl else None,
                    "share_above_placebo": mean(r["u_token"] > r["u_token_placebo"] for r in ctl) if ctl else None,
                    "changed_vs_placebo": mean(r["changed_vs_placebo"] for r in ctl) if ctl else None,
                    "mean_tv_vs_placebo": mean(r["tv_vs_placebo"] for r in ctl) if ctl else None}
    summary["rows"] = rows
    return summary, trajs


#: How the reminder at a state after a failed command is shown in :func:`reminder_quote_ablation`.
REMINDER_ABLATIONS = ("as played", "unquoted", "placebo", "without")


def _reminder_cache(cache_dir, name: str, lm, cfg, **params):
    """The per-episode cache of a reminder ablation of run ``cfg``: keyed on the model and everything of the run
    that decides its reminders, plus ``params``."""
    from workbench.eval.task_cache import TaskCache, analysis_key

    return TaskCache(cache_dir, name, analysis_key(
        lm, memory=cfg.memory, decode=cfg.decode, split=cfg.split, interval=cfg.interval,
        triggers=list(cfg.triggers), backend=cfg.backend, placebo=PLACEBO_TEXT, **params))


def reminder_quote_ablation(lm, cfg, trajs: Sequence, cache_dir: str | Path | None = None) -> list[dict]:
    """After a failed command, the agent that writes its actions writes it again far more often with the memory
    agent's reminder than without it. Is that the reminder quoting the command (a command in the prompt is a
    command to copy), a reminder being there at all, or what it says?

    At every reminder step of written-action run ``cfg`` (``decode="generate-verbatim"``) whose previous command
    failed, the memory agent is replayed along the episode to the same reminder, and the action is written again
    (greedy, one :class:`~workbench.models.generation.PrefixGenerator` per episode) from the prompt as played; with
    the failed command written as :data:`~workbench.methods.arbiter.causal.UNQUOTED` wherever the reminder
    quotes it (``unquoted``; the rest of the reminder kept); with the reminder's words replaced token for token by
    the content-free :data:`PLACEBO_TEXT` (``placebo``: same positions and length, :func:`placebo_prompt`); and
    without the reminder line (``without``).

    Returns:
        One row per state: ``task_id``, ``step``, ``failed``, ``recorded`` (the command the run wrote),
        ``reminder``, ``replayed_same`` (the replay gives the reminder played and, as played, writes the recorded
        command), ``quoted`` (the reminder names the failed command; else ``unquoted`` is the prompt as played),
        and per variant of :data:`REMINDER_ABLATIONS` the command written and ``<variant>|repeats`` (it is the
        failed one again).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`).
    """
    import re
    from dataclasses import replace

    from workbench.agents.loop import Agent
    from workbench.agents.policy import replay_at
    from workbench.envs.alfworld_text import normalize
    from workbench.eval.behaviour import failures
    from workbench.eval.runner import policy_for, select_tasks
    from workbench.eval.task_cache import rows_per_episode
    from workbench.methods.arbiter.causal import UNQUOTED
    from workbench.models.generation import PrefixGenerator

    if cfg.decode != "generate-verbatim":
        raise ValueError(f"reminder_quote_ablation writes the actions again: run {cfg.out} decodes '{cfg.decode}', "
                         "expected 'generate-verbatim'")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = _reminder_cache(cache_dir, "reminder_quote", lm, cfg, variants=list(REMINDER_ABLATIONS), unquoted=UNQUOTED)
    agent = Agent.from_model(lm)
    tok = lm.tokenizer

    def pick(traj) -> list[int]:
        if traj.task_id not in tasks:
            return []
        failed = set(failures(traj))
        return [k for k, rec in enumerate(traj.meta.get("steps", [])) if rec.get("reminder") and k - 1 in failed]

    def analyse(traj, steps: list[int]) -> list[dict]:
        gen = PrefixGenerator(lm)
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            failed = traj.steps[k - 1].action
            quote = re.compile(r"(['\"]?)" + re.escape(failed.strip()) + r"\1", re.I)
            reminder = block.reminder or ""

            def with_reminder(text: str | None):  # the state's prompt with this reminder line (None: none)
                return agent.build_prompt(replace(block, reminder=text), traj.initial_observation, traj.goal,
                                          history, step.observation)

            shown = with_reminder(block.reminder)
            prompts = {"as played": shown, "unquoted": with_reminder(quote.sub(UNQUOTED, reminder)),
                       "placebo": placebo_prompt(shown, tok), "without": with_reminder(None)}
            row = {"task_id": traj.task_id, "step": k, "failed": failed, "recorded": step.action,
                   "reminder": reminder, "quoted": bool(quote.search(reminder))}
            for name, prompt in prompts.items():
                written = None if prompt is None else gen.generate(prompt.prefix, prompt.suffix, [failed]).parsed
                row[name] = written
                row[f"{name}|repeats"] = None if written is None else normalize(written) == normalize(failed)
            row["replayed_same"] = (reminder == traj.meta["steps"][k].get("reminder")
                                    and normalize(row["as played"]) == normalize(step.action))
            mine.append(row)
        return mine

    return rows_per_episode(cache, trajs, pick, analyse)


def summarize_reminder_quote(rows: Sequence[dict]):
    """Per variant: the states (``unquoted`` over those whose reminder quotes the failed command; ``placebo`` over
    those with a reminder to replace), the share where the agent writes the failed command again, and the share
    where it writes another command than as played. A DataFrame indexed by variant."""
    import pandas as pd

    from workbench.envs.alfworld_text import normalize

    out = {}
    for name in REMINDER_ABLATIONS:
        rs = [r for r in rows if r.get(f"{name}|repeats") is not None and (name != "unquoted" or r["quoted"])]
        out[name] = {"states": len(rs),
                     "repeats the failed command": mean(r[f"{name}|repeats"] for r in rs) if rs else None,
                     "writes another command than as played": mean(normalize(r[name]) != normalize(r["as played"])
                                                                   for r in rs) if rs else None}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.attrs["replayed_same"] = sum(r["replayed_same"] for r in rows)
    return df


#: What :func:`warning_pull_ablation` scores at each warning state.
WARNING_ABLATIONS = ("as played", "no memory", "unnamed", "placebo", "without")
#: The words that stand for each command a warning names in its ``unnamed`` variant.
UNNAMED = "an earlier command"
#: The bank facts the offline memory agent appends to a reminder ("... Memory: mug 1 is in/on desk 1.").
_MEMORY_FACTS = r"\s*Memory: .*$"


def _warned(reminder: str, cands: Sequence[str]) -> list[str]:
    """The admissible commands ``reminder`` warns against (none unless it is a warning)."""
    from workbench.agents.counterfactual import is_warning, mentioned_commands
    from workbench.agents.counterfactual import named_commands as named

    return named(reminder, mentioned_commands(reminder, cands)) if is_warning(reminder) else []


def warning_pull_ablation(lm, cfg, trajs: Sequence, cache_dir: str | Path | None = None) -> list[dict]:
    """A scoring agent never fails a command, so the memory agent's warnings are loop warnings that name the
    loop's commands ("Stop repeating: you are cycling through 'go to shelf 1' -> 'go to desk 1'. ..."), and the
    recorded counterfactual shows the agent choosing one of them with the warning where it would not without it
    far more often than the reverse. Does the warning pull the agent onto what it warns against, and is that the
    commands it names, a line being there at all, or the bank facts the offline memory agent appends?

    At every reminder step of scoring run ``cfg`` (``decode="score"``) whose reminder warns against an admissible
    command (:func:`~workbench.agents.counterfactual.named_commands` of a warning), the game is replayed along
    the episode for the step's admissible commands, the memory agent is replayed to the same reminder, and the
    state is scored with each of :data:`WARNING_ABLATIONS`: as played; ``no memory``, the reminder without its
    trailing bank facts (``Memory: ...``; the advisor ablation's reminder; only where it has them); ``unnamed``,
    each command it names written as :data:`UNNAMED`; ``placebo``, its words replaced token for token by
    :data:`PLACEBO_TEXT` (:func:`placebo_prompt`); ``without``, no reminder line.

    Returns:
        One row per state: ``task_id``, ``step``, ``recorded`` (the run's action), ``reminder``, ``warned`` (the
        commands it names), ``has_memory``, ``replayed_same`` (the replay gives the reminder played and, as
        played, chooses the recorded action), and per variant (None where it does not apply) the choice,
        ``<variant>|warned`` (it is a warned command) and ``<variant>|p_warned`` (their total probability).

    Each episode's rows are kept in ``cache_dir`` as they finish (:mod:`workbench.eval.task_cache`).
    """
    import re
    from dataclasses import replace

    from workbench.agents.counterfactual import argmax
    from workbench.agents.loop import Agent
    from workbench.agents.policy import replay_at
    from workbench.envs.alfworld_text import normalize
    from workbench.eval.runner import policy_for, select_tasks
    from workbench.eval.task_cache import admissible_along, replay_game, require_score, rows_per_episode
    from workbench.models.scoring import ActionScorer

    require_score(cfg, "warning_pull_ablation")
    tasks = {t.task_id: t for t in select_tasks(cfg)}
    cache = _reminder_cache(cache_dir, "warning_pull", lm, cfg, variants=list(WARNING_ABLATIONS), unnamed=UNNAMED)
    agent = Agent.from_model(lm)

    def pick(traj) -> list[int]:
        if traj.task_id not in tasks:
            return []
        recs = traj.meta.get("steps", [])
        return [k for k, rec in enumerate(recs) if rec.get("reminder")
                and _warned(rec["reminder"], (rec.get("reminder_effect") or {}).get("mentions", ()))]

    def analyse(traj, steps: list[int]) -> list[dict]:
        admissible = admissible_along(game(), tasks[traj.task_id], traj.actions()[:max(steps)])
        mine: list[dict] = []
        for k, step, history, block in replay_at(policy_for(cfg), tasks[traj.task_id], traj, steps):
            cands, reminder = admissible[k], block.reminder or ""
            warned = _warned(reminder, cands)
            warned_n = {normalize(c) for c in warned}

            def with_reminder(text: str | None):  # the state's prompt with this reminder line (None: none)
                return agent.build_prompt(replace(block, reminder=text), traj.initial_observation, traj.goal,
                                          history, step.observation)

            shown = with_reminder(reminder)
            bare = re.sub(_MEMORY_FACTS, "", reminder)
            unnamed = reminder
            for c in sorted(warned, key=len, reverse=True):
                unnamed = re.sub(r"(['\"]?)" + re.escape(c) + r"\1", UNNAMED, unnamed, flags=re.I)
            prompts = {"as played": shown, "no memory": with_reminder(bare) if bare != reminder else None,
                       "unnamed": with_reminder(unnamed), "placebo": placebo_prompt(shown, lm.tokenizer),
                       "without": with_reminder(None)}
            row = {"task_id": traj.task_id, "step": k, "recorded": step.action, "reminder": reminder,
                   "warned": warned, "has_memory": bare != reminder}
            for name, prompt in prompts.items():
                if prompt is None or not warned:
                    row[name] = row[f"{name}|warned"] = row[f"{name}|p_warned"] = None
                    continue
                probs = ActionScorer.normalise(agent.decide(prompt, cands).scores)
                choice = cands[argmax(probs)]
                row[name] = choice
                row[f"{name}|warned"] = normalize(choice) in warned_n
                row[f"{name}|p_warned"] = round(sum(p for c, p in zip(cands, probs) if normalize(c) in warned_n), 6)
            row["replayed_same"] = (reminder == traj.meta["steps"][k].get("reminder") and row["as played"] is not None
                                    and normalize(row["as played"]) == normalize(step.action))
            mine.append(row)
        return mine

    with replay_game(cfg) as game:
        return rows_per_episode(cache, trajs, pick, analyse)


def summarize_warning_pull(rows: Sequence[dict]):
    """Per variant of :data:`WARNING_ABLATIONS` over the states it applies to (``no memory``: those whose
    reminder carries bank facts): the states and their episodes, the share where the agent chooses a warned
    command, their mean total probability, and against ``without`` at the same states: ``pulled`` (this variant
    chooses a warned command, without the line it would not), ``pushed`` (the reverse) and the exact McNemar p of
    the two. A DataFrame indexed by variant; ``attrs["replayed_same"]`` counts the reproduced states."""
    import pandas as pd

    from workbench.eval.compare import mcnemar_exact

    rows = [r for r in rows if r.get("as played") is not None]
    out = {}
    for name in WARNING_ABLATIONS:
        rs = [r for r in rows if r.get(name) is not None]
        pulled = sum(r[f"{name}|warned"] and not r["without|warned"] for r in rs)
        pushed = sum(r["without|warned"] and not r[f"{name}|warned"] for r in rs)
        out[name] = {"states": len(rs), "episodes": len({r["task_id"] for r in rs}),
                     "chooses a warned command": mean(r[f"{name}|warned"] for r in rs) if rs else None,
                     "mean p(warned)": mean(r[f"{name}|p_warned"] for r in rs) if rs else None,
                     "pulled vs without": pulled, "pushed vs without": pushed,
                     "p_mcnemar": mcnemar_exact(pulled, pushed) if name != "without" else None}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.attrs["replayed_same"] = sum(r["replayed_same"] for r in rows)
    return df
