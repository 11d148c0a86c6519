"""The methods' LLM stages on a real model: what became of each reply, and the failure-pattern judge against the rule.

Three readers and two experiments, all over files the runs already wrote:

- :func:`refinement_calls` / :func:`run_calls`: the stage ledger (:mod:`workbench.llm.ledger`) of an AGMR refinement
  folder or of an episode run folder (the arbiter's and the proactive agent's per-step records).
- :func:`reply_table`: per stage and reply shaping, the shares of replies valid as sent, valid after the one repair
  retry, rejected (typed error, nothing applied) and failed (no answer), with the requests per call and the latency.
- :func:`replay_payloads` + :func:`replay`: the same recorded stage inputs sent to a backend with and without schema
  constraints (the comparison a run cannot make: a run plays one of them).
- :func:`judge_payloads` + :func:`judge` + :func:`agreement`: the ``pattern_judge`` stage on every failure-branch
  diagnosis of a refinement, against the rule's label recorded there (Cohen's kappa and the confusion matrix).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.eval.run_folder import read_episodes
from workbench.llm.errors import LLMOutputError
from workbench.llm.ledger import FATES, StageCall
from workbench.llm.stages import run_stage
from workbench.memory.trajectory import Trajectory
from workbench.methods.agmr.refine_folder import load_executions, load_log
from workbench.methods.agmr.stage_types import (
    FailureRefinerInput,
    FailureReflection,
    PatternJudgeInput,
    ReflectorInput,
)

__all__ = ["TABLE1_REFLECTOR_ROWS", "reflector_rows", "FAILURE_PATTERNS", "StagePayload", "StageRuns", "latest", "refinement_calls", "run_calls", "reply_table",
           "replay_payloads", "replay", "judge_payloads", "judge", "agreement", "cohen_kappa", "served_calls",
           "outcomes_table", "outcomes_beside", "judge_tables", "reflector_table", "foreign_objects", "stage_runs", "stage_pages"]

FAILURE_PATTERNS = ("attended_but_wrong", "missed_relevant", "distracted_by_irrelevant")


def latest(rows: Iterable[dict], key: Sequence[str]) -> list[dict]:
    """The last record of each ``key`` (a replay or judge file resumed after a failed call holds that call's record,
    then the retry's), in first-seen order."""
    out: dict[tuple, dict] = {}
    for r in rows:
        out[tuple(r.get(k) for k in key)] = r
    return list(out.values())


def refinement_calls(folder: str | Path) -> list[dict]:
    """Every stage call an AGMR refinement recorded (its task records' ``stage_calls``), each with its ``task_id``."""
    return [{**c, "task_id": r.task_id} for r in load_log(folder) for c in r.stage_calls]


def run_calls(folder: str | Path) -> list[dict]:
    """Every stage call of an episode run (the arbiter's and the proactive agent's step records), with task and step."""
    out = []
    for t in read_episodes(folder):
        for k, step in enumerate(t.meta.get("steps") or []):
            for key in ("arbiter", "proactive"):
                for c in (step.get(key) or {}).get("stage_calls") or ():
                    out.append({**c, "task_id": t.task_id, "step": k})
    return out


def reply_table(calls: Iterable[dict], by: Sequence[str] = ("stage", "mode")) -> Any:
    """Per stage (and reply shaping): calls, the shares of each fate, requests per call, latency (mean, median)."""
    import pandas as pd

    rows = list(calls)
    if not rows:
        return pd.DataFrame()
    groups: dict[tuple, list[dict]] = {}
    for c in rows:
        groups.setdefault(tuple(c.get(k, "") for k in by), []).append(c)
    out = []
    for key, cs in sorted(groups.items()):
        n, fates = len(cs), Counter(c["fate"] for c in cs)
        ms = [float(c["ms"]) for c in cs if c["fate"] != "failed"]
        row = dict(zip(by, key))
        row["calls"] = n
        for f, label in zip(FATES, ("valid as sent", "valid after repair", "rejected", "failed")):
            row[label] = fates.get(f, 0) / n
        row["requests/call"] = sum(c.get("requests", 1) for c in cs) / n
        row["ms mean"] = statistics.fmean(ms) if ms else None
        row["ms median"] = statistics.median(ms) if ms else None
        out.append(row)
    return pd.DataFrame(out).set_index(list(by))


# -- replay: the same inputs, constrained and not --------------------------------------------------------------------
@dataclass(frozen=True)
class StagePayload:
    """One recorded stage input: where it came from (``source``: task and step or attempt) and the payload."""

    stage: str
    source: str
    payload: Any


def _by_id(folder: str | Path) -> dict[str, Any]:
    return {e.id: e for e in load_executions(folder)}


def replay_payloads(refinement: str | Path | None = None, arbiter_run: str | Path | None = None,
                    proactive_run: str | Path | None = None, per_stage: int = 10) -> list[StagePayload]:
    """Recorded inputs of the stages, at most ``per_stage`` of each, in file order.

    From an AGMR refinement: ``reflector_failure`` / ``reflector_success`` on each task's first execution (m* and
    tau), ``refiner_failure`` and ``pattern_judge`` on each first failure attempt that got through the reflector
    (its reflection, the rule's column and scale). From an arbiter run: ``arbiter_state_parser`` on the first steps of
    each episode (goal, observation, history: exactly what the policy sent). From a proactive run: ``proactive_update``
    and ``proactive_intervene`` at step 0 of each episode (goal, first observation, empty bank: exact; later steps'
    banks are not recorded whole).
    """
    out: list[StagePayload] = []
    if refinement is not None:
        ex = _by_id(refinement)
        for r in load_log(refinement):
            first = ex.get(r.executions[0]) if r.executions else None
            if first is None:
                continue
            stage = "reflector_failure" if r.branch == "failure" else "reflector_success"
            out.append(StagePayload(stage, r.task_id, ReflectorInput(memory=first.memory, trajectory=first.trajectory)))
            a = next((a for a in r.attempts if a.reflection and a.rule), None)
            if r.branch == "failure" and a is not None:
                diagnosed = ex.get(r.executions[0]) if a.n == 1 else None
                if diagnosed is None:
                    continue
                refl = FailureReflection.model_validate(a.reflection)
                col, scale = tuple(a.rule["column"]), a.rule.get("scale")
                out.append(StagePayload("refiner_failure", f"{r.task_id} attempt {a.n}", FailureRefinerInput(
                    memory=diagnosed.memory, reflection=refl, utilization=col, scale=scale)))
                out.append(StagePayload("pattern_judge", f"{r.task_id} attempt {a.n}", PatternJudgeInput(
                    memory=diagnosed.memory, step=refl.critical_step, correct_action=refl.correct_action,
                    segment=refl.supporting_segment, utilization=col, scale=scale)))
    if arbiter_run is not None:
        from workbench.methods.arbiter.stage_types import StateParserInput

        for t in read_episodes(arbiter_run):
            for k in sorted({0, min(3, t.n_steps - 1)} - {-1}):
                obs = t.steps[k].observation if k else t.initial_observation
                out.append(StagePayload("arbiter_state_parser", f"{t.task_id} step {k}", StateParserInput(
                    goal=t.goal, observation=obs, history=tuple(t.steps[:k]))))
    if proactive_run is not None:
        from workbench.methods.proactive.stage_types import ProactiveInput

        for t in read_episodes(proactive_run):
            p = ProactiveInput(goal=t.goal, step=0, window=(), current_observation=t.initial_observation)
            out.append(StagePayload("proactive_update", f"{t.task_id} step 0", p))
            out.append(StagePayload("proactive_intervene", f"{t.task_id} step 0", p))
    kept: Counter = Counter()
    result = []
    for p in out:
        if kept[p.stage] < per_stage:
            kept[p.stage] += 1
            result.append(p)
    return result


def replay(backend: Any, payloads: Sequence[StagePayload], *, on_call: Any = None) -> list[dict]:
    """Run each payload's stage on ``backend``; returns one ledger record per call (with ``source``). A reply that
    never validates is counted, never raised; a transport failure (the server is gone) stops the replay."""
    records = []
    for p in payloads:
        ledger: list[StageCall] = []
        try:
            run_stage(backend, p.stage, p.payload, ledger=ledger)
        except LLMOutputError:
            pass
        finally:  # a failed call (the server is gone) is recorded too, then stops the replay
            if ledger:
                rec = {**ledger[-1].record(), "source": p.source}
                records.append(rec)
                if on_call is not None:
                    on_call(rec)
    return records


# -- the failure-pattern judge against the rule ----------------------------------------------------------------------
def judge_payloads(refinement: str | Path, first_only: bool = False) -> list[tuple[str, str, PatternJudgeInput]]:
    """``(source, rule pattern, judge input)`` for every failure-branch attempt of a refinement that got a rule label
    (``first_only``: each task's first such attempt, the diagnosis of m*'s own run): the memory it diagnosed (m* for
    attempt 1, the previous candidate after), the reflection's step and segment, the column C[:, j] and the scale the
    rule read."""
    ex = _by_id(refinement)
    out = []
    for r in load_log(refinement):
        if r.branch != "failure":
            continue
        run = ex.get(r.executions[0]) if r.executions else None  # the run attempt 1 diagnoses: m*'s
        for a in r.attempts:
            if run is None:
                break
            diagnosed = run
            if a.execution:  # the next attempt diagnoses this one's verification; one that erred played nothing
                run = ex.get(a.execution)
            if not (a.rule and a.reflection) or len(diagnosed.memory.segments) != len(a.rule["column"]):
                continue
            refl = FailureReflection.model_validate(a.reflection)
            out.append((f"{r.task_id} attempt {a.n}", a.rule["pattern"], PatternJudgeInput(
                memory=diagnosed.memory, step=refl.critical_step, correct_action=refl.correct_action,
                segment=refl.supporting_segment, utilization=tuple(a.rule["column"]), scale=a.rule.get("scale"))))
            if first_only:
                break
    return out


def judge(backend: Any, items: Sequence[tuple[str, str, PatternJudgeInput]], *, on_call: Any = None) -> list[dict]:
    """The judge's label beside the rule's for each item (``judge`` None when its reply was rejected)."""
    rows = []
    for source, rule, payload in items:
        ledger: list[StageCall] = []
        label = None
        try:
            label = run_stage(backend, "pattern_judge", payload, ledger=ledger).value.pattern
        except LLMOutputError:
            pass
        finally:  # a failed call (the server is gone) is recorded too, then stops the judging
            if ledger:
                row = {"source": source, "rule": rule, "judge": label,
                       **{k: v for k, v in ledger[-1].record().items() if k in ("fate", "ms", "mode", "model")}}
                rows.append(row)
                if on_call is not None:
                    on_call(row)
    return rows


def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = FAILURE_PATTERNS) -> float | None:
    """Cohen's kappa of two labelings of the same items; None when undefined (no items, or chance agreement 1)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(labels) | set(ca) | set(cb)) / (n * n)
    return None if pe >= 1 else (po - pe) / (1 - pe)


def agreement(rows: Sequence[dict]) -> dict:
    """Agreement of the judge with the rule over the items the judge labelled: n, rejected, raw agreement, Cohen's
    kappa, the confusion matrix (rule rows x judge columns) and each side's label counts."""
    labelled = [r for r in rows if r.get("judge")]
    rule, judged = [r["rule"] for r in labelled], [r["judge"] for r in labelled]
    confusion = {p: {q: sum(1 for r in labelled if r["rule"] == p and r["judge"] == q) for q in FAILURE_PATTERNS}
                 for p in FAILURE_PATTERNS}
    return {"items": len(rows), "labelled": len(labelled), "rejected": len(rows) - len(labelled),
            "agreement": (sum(x == y for x, y in zip(rule, judged)) / len(labelled)) if labelled else None,
            "kappa": cohen_kappa(rule, judged), "confusion": confusion,
            "rule_counts": dict(Counter(rule)), "judge_counts": dict(Counter(judged))}


def outcomes_beside(served: Sequence[Trajectory], offline: Sequence[Trajectory]) -> Any:
    """Per task of the served run: success and steps with the served stages and with the offline stand-in."""
    import pandas as pd

    off = {t.task_id: t for t in offline}
    rows = [{"task": t.task_id.split("/")[1] if "/" in t.task_id else t.task_id, "type": t.task_type,
             "served success": t.success, "served steps": t.n_steps,
             "offline success": off[t.task_id].success if t.task_id in off else None,
             "offline steps": off[t.task_id].n_steps if t.task_id in off else None} for t in served]
    return pd.DataFrame(rows)


# -- the report: what notebook 04's section renders ------------------------------------------------------------------
@dataclass(frozen=True)
class StageRuns:
    """Where one measurement of the stages on a served model lies (any of them may be missing).

    Attributes:
        model: the served model's name, as the tables say it.
        refinement / refinement_offline: AGMR refined on the same valid_seen slice with the served model and offline.
        replay, judge: the ``workbench llm-stages replay`` / ``judge`` records.
        runs: method -> (served run folder, the offline run of the same parameters on a superset of its tasks).
        oracle / plan_free: the refinements of the same base with the reflector shown the expert plan and without.
        table1: condition -> the valid_unseen run of Table 1 it names (``traj``, ``agmr`` over the oracle's base,
            ``agmr-plan-free`` over the plan-free one), for :func:`reflector_rows`.
    """

    model: str
    refinement: str | None = None
    refinement_offline: str | None = None
    replay: str | None = None
    judge: str | None = None
    runs: tuple[tuple[str, str, str], ...] = ()
    oracle: str | None = None
    plan_free: str | None = None
    table1: tuple[tuple[str, str], ...] = ()


def _present(path: str | None) -> bool:
    return bool(path) and Path(path).exists()


def served_calls(s: StageRuns) -> list[dict]:
    """Every stage call the served runs recorded, with the method."""
    rows = [{**c, "method": "agmr"} for c in refinement_calls(s.refinement)] if _present(s.refinement) else []
    for method, served, _ in s.runs:
        if _present(served):
            rows += [{**c, "method": method} for c in run_calls(served)]
    return rows


def outcomes_table(s: StageRuns) -> Any:
    """Per method and measure (rows), the served run beside the offline stand-in on the same tasks (columns):
    episodes' successes and steps; a refinement's outcomes (committed, discarded, rolled back, no edit, error)."""
    import pandas as pd

    rows = []
    for method, served, offline in s.runs:
        if not (_present(served) and _present(offline)):
            continue
        got = read_episodes(served)
        ref = {t.task_id: t for t in read_episodes(offline)}
        both = [t for t in got if t.task_id in ref]
        if not both:
            continue
        rows.append((method, len(both), "successes", sum(t.success for t in both),
                     sum(ref[t.task_id].success for t in both)))
        rows.append((method, len(both), "steps", sum(t.n_steps for t in both),
                     sum(ref[t.task_id].n_steps for t in both)))
    if _present(s.refinement) and _present(s.refinement_offline):
        got = {r.task_id: r for r in load_log(s.refinement)}
        ref = {r.task_id: r for r in load_log(s.refinement_offline)}
        both = [k for k in got if k in ref]
        for what in ("committed", "discarded", "rolled_back", "no_edit", "error"):
            rows.append(("agmr (refinement)", len(both), what, sum(got[k].outcome == what for k in both),
                         sum(ref[k].outcome == what for k in both)))
    table = pd.DataFrame(rows, columns=["method", "tasks", "measure", "served", "offline"])
    return table.set_index(["method", "tasks", "measure"]) if rows else pd.DataFrame()


def judge_tables(rows: Sequence[dict]) -> tuple[Any, Any]:
    """The judge's agreement with the rule (one row) and the confusion matrix (rule rows, judge columns)."""
    import pandas as pd

    ag = agreement(rows)
    summary = pd.DataFrame([{"diagnoses": ag["items"], "labelled": ag["labelled"], "rejected": ag["rejected"],
                             "agreement": ag["agreement"], "Cohen's kappa": ag["kappa"],
                             "judge labels": ", ".join(f"{k} {v}" for k, v in sorted(ag["judge_counts"].items()))}])
    confusion = pd.DataFrame(ag["confusion"]).T
    confusion.index.name, confusion.columns.name = "rule", "judge"
    return summary, confusion


def reflector_table(oracle: str | Path, plan_free: str | Path) -> Any:
    """The oracle (plan-seen) and the paper's (plan-free) reflector on the tasks both refinements have done: outcomes,
    commits and the entries committed, and how many of the oracle's commits the plan-free reflector also made (the
    same task committing an edit of the same entry)."""
    import pandas as pd

    a = {r.task_id: r for r in load_log(oracle)}
    b = {r.task_id: r for r in load_log(plan_free)}
    both = [k for k in a if k in b]
    rows = {}
    for name, log in (("sees the expert plan (oracle)", a), ("m*, tau only (paper)", b)):
        rs = [log[k] for k in both]
        row = {"tasks": len(rs), "failures": sum(r.branch == "failure" for r in rs)}
        for what in ("committed", "discarded", "no_edit", "rolled_back", "error"):
            row[what] = sum(r.outcome == what for r in rs)
        row["failure commits"] = sum(r.outcome == "committed" and r.branch == "failure" for r in rs)
        row["attempt errors"] = sum(1 for r in rs for x in r.attempts if x.error)
        rows[name] = row
    shared = sum(1 for k in both if a[k].outcome == b[k].outcome == "committed" and a[k].entry_id == b[k].entry_id)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table["commits also made by the other"] = shared
    table.index.name = "reflector"
    return table


_OBJECT = re.compile(r"\b([a-z]+) (\d+)\b")


def _objects(text: str) -> set[str]:
    """The numbered object names a text mentions (``drawer 3``, ``egg 3``)."""
    return {f"{a} {b}" for a, b in _OBJECT.findall(text.lower())}


def _entry_text(entry) -> str:
    return " ".join([entry.initial_observation, entry.goal] + [f"{s.observation} {s.thought or ''} {s.action}"
                                                                for s in entry.segments])


def foreign_objects(base: str | Path, split: str = "valid_seen") -> dict:
    """Do a refinement's committed edits carry the refinement task's objects into entries about other rooms? For
    every commit of base ``base``: the numbered objects its edit adds that the entry's unedited version never names
    (``foreign``: not in the entry's room), and of those the ones the refinement task's room names (its expert
    trajectory: the room's first description, observations and actions): an oracle reflector that reads the plan
    can copy them; one that reads m* and tau only has them from tau, the same room.

    Returns ``commits``, ``with foreign objects``, ``from the task's room`` (commits adding an object the entry's
    room lacks and the refinement task's room has), ``foreign objects`` and ``room objects`` (counts over all
    commits) and ``examples`` (up to 5: entry, refinement task, the objects added from the task's room)."""
    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.memory.base import MemoryBase

    mb = MemoryBase(base)
    rooms = {t.task_id: _objects(" ".join([t.initial_observation] + [f"{st.observation} {st.action}"
                                                                     for st in t.steps]))
             for t in expert_trajectories_for(split)}
    out: dict[str, Any] = {"commits": 0, "with foreign objects": 0, "from the task's room": 0, "foreign objects": 0,
                           "room objects": 0, "examples": []}
    for entry in mb.entries():
        versions = mb.history(entry.entry_id)
        original = _objects(_entry_text(versions[0].entry))
        for prev, rec in zip(versions, versions[1:]):
            task = (rec.provenance or {}).get("refinement_task")
            if not task:
                continue
            foreign = _objects(_entry_text(rec.entry)) - _objects(_entry_text(prev.entry)) - original
            from_room = foreign & rooms.get(task, set())
            out["commits"] += 1
            out["with foreign objects"] += bool(foreign)
            out["from the task's room"] += bool(from_room)
            out["foreign objects"] += len(foreign)
            out["room objects"] += len(from_room)
            if from_room and len(out["examples"]) < 5:
                out["examples"].append({"entry": entry.entry_id, "refinement_task": task,
                                        "objects added": sorted(from_room)})
    return out


def stage_runs(runs_dir: str | Path, model: str, served: str) -> StageRuns:
    """The measurement's conventional layout under a runs folder (``make`` and the scripts beside the runs write it):
    ``04_agmr/<model>/llm-stages/`` (``agmr-llama-<served>``, ``agmr-offline``, ``replay.jsonl``, ``judge.jsonl``),
    ``05_arbiter/<model>/llm-stages/arbiter-500-llama-<served>`` beside ``05_arbiter/<model>/arbiter-500``,
    ``06_proactive/<model>/llm-stages/proactive-llama-<served>`` beside ``06_proactive/<model>/proactive``, and the
    oracle and plan-free bases ``04_agmr/<model>/bases/agmr``, ``.../bases/agmr-plan-free``."""
    r = Path(runs_dir)
    a = r / "04_agmr" / model
    return StageRuns(
        model=served, refinement=str(a / "llm-stages" / f"agmr-llama-{served}"),
        refinement_offline=str(a / "llm-stages" / "agmr-offline"), replay=str(a / "llm-stages" / "replay.jsonl"),
        judge=str(a / "llm-stages" / "judge.jsonl"),
        runs=(("arbiter", str(r / "05_arbiter" / model / "llm-stages" / f"arbiter-500-llama-{served}"),
               str(r / "05_arbiter" / model / "arbiter-500")),
              ("proactive", str(r / "06_proactive" / model / "llm-stages" / f"proactive-llama-{served}"),
               str(r / "06_proactive" / model / "proactive"))),
        oracle=str(a / "bases" / "agmr"), plan_free=str(a / "bases" / "agmr-plan-free"),
        table1=tuple((c, str(a / c)) for c in TABLE1_REFLECTOR_ROWS))


#: Table 1's rows the reflector comparison reads: Traj (the unrefined base), AGMR over the base the oracle reflector
#: refined, AGMR over the plan-free one (``04_agmr/<model>/<condition>``).
TABLE1_REFLECTOR_ROWS = ("traj", "agmr", "agmr-plan-free")


def reflector_rows(runs: Sequence[tuple[str, str]]) -> Any:
    """Table 1's rows over each reflector's base on the tasks every run has played: success, and each refined row
    paired with Traj and the two refined rows with each other (exact McNemar)."""
    import pandas as pd

    from workbench.eval.compare import paired_outcomes

    won = {name: {t.task_id: bool(t.success) for t in read_episodes(folder)} for name, folder in runs}
    common = set.intersection(*(set(w) for w in won.values())) if won else set()
    won = {name: {k: v for k, v in w.items() if k in common} for name, w in won.items()}
    names = list(won)
    rows = {}
    for name in names:
        row = {"episodes": len(won[name]), "success %": 100 * sum(won[name].values()) / max(1, len(won[name]))}
        for other in names[:names.index(name)]:
            p = paired_outcomes(won[name], won[other])
            row[f"won only here vs {other}"] = p["only_a"]
            row[f"won only by {other}"] = p["only_b"]
            row[f"p vs {other}"] = p["p_mcnemar"]
        rows[name] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "condition"
    return table


def stage_pages(s: StageRuns) -> list[tuple[str, Any, str]]:
    """``(name, table, caption)`` of every table the measurement has data for, in reading order."""
    from workbench.memory.trajectory import iter_jsonl_dicts

    pages: list[tuple[str, Any, str]] = []
    calls = served_calls(s)
    if calls:
        t = reply_table(calls, by=("method", "stage"))
        n = len(calls)
        pages.append(("llm_stage_replies_served", t, (
            f"Every stage call of the methods run with their stages on the served `{s.model}` (llama.cpp server, "
            f"schema-constrained replies), {n} calls: the share of replies valid as sent, valid after the one repair "
            "retry, rejected (typed error, nothing applied: a reply that never parsed, or one the method refused) and "
            "failed (no answer: a run that loses its server stops there and, resumed, plays that episode again, so "
            "its records hold none), with the requests per call and the latency in ms (one CPU core, shared with the "
            "agent and other jobs).")))
    if _present(s.replay):
        rows = latest(iter_jsonl_dicts(Path(s.replay)), ("label", "stage", "source"))
        t = reply_table(rows, by=("stage", "label"))
        pages.append(("llm_stage_replies_replay", t, (
            f"The same recorded stage inputs ({len(rows)} calls) sent to the served `{s.model}` with the schema as the "
            "`response_format` (constrained) and without (unconstrained: the prompt still describes the schema): "
            "AGMR's from the paper-scale refinement, the arbiter's state parser at steps 0 and 3, the proactive "
            "agent's two phases at step 0 (where the recorded bank is exact).")))
    out = outcomes_table(s)
    if not out.empty:
        pages.append(("llm_stage_outcomes", out, (
            f"Outcomes with the stages on `{s.model}` beside the offline stand-ins on the same tasks, agent, dtype and "
            "step limit (episodes: successes and steps; AGMR: each task's refinement outcome). With a 135M model the "
            "method's quality is not the point; that the endpoint drops in and every failure is caught and counted "
            "is.")))
    if _present(s.judge):
        rows = latest(iter_jsonl_dicts(Path(s.judge)), ("source",))
        summary, confusion = judge_tables(rows)
        ag = agreement(rows)
        kappa = "undefined" if ag["kappa"] is None else f"{ag['kappa']:.3f}"
        pages.append(("agmr_pattern_judge_agreement", summary, (
            f"The failure pattern named by `{s.model}` (stage `pattern_judge`, from C[:, j], the segments and the step) "
            f"against the rule the paper-scale refinement recorded, on each failed task's first diagnosis: Cohen's "
            f"kappa {kappa} over {ag['labelled']} labelled diagnoses ({ag['rejected']} replies rejected).")))
        pages.append(("agmr_pattern_judge_confusion", confusion, (
            "The judge's labels (columns) against the rule's (rows) on the same diagnoses.")))
    if _present(s.oracle) and _present(s.plan_free):
        t = reflector_table(s.oracle, s.plan_free)
        n = int(t["tasks"].iloc[0])
        pages.append(("agmr_reflector_oracle_share", t, (
            f"AGMR's refinement of the same base on the same first {n} valid_seen tasks (of 140) with the offline "
            "reflector shown each task's expert plan (the oracle every committed base used) and with the paper's "
            "reflector, which sees m* and tau only (the memory's own actions as its reference): outcomes, commits, and "
            "the commits both made (same task, same entry).")))
        import pandas as pd

        fo = {name: foreign_objects(base) for name, base in (("sees the expert plan (oracle)", s.oracle),
                                                             ("m*, tau only (paper)", s.plan_free))}
        t = pd.DataFrame.from_dict({k: {c: v for c, v in d.items() if c != "examples"} for k, d in fo.items()},
                                   orient="index")
        t.index.name = "reflector"
        pages.append(("agmr_reflector_foreign_objects", t, (
            "Do the committed edits carry the refinement task's objects into entries about other rooms? Per base: the "
            "commits whose edit adds a numbered object (`drawer 3`) the entry's own room never names (`foreign`), and "
            "those whose added object the refinement task's room names (its expert trajectory), where either reflector "
            "could have read it: the oracle in the plan, the paper's in tau.")))
    present = [(c, f) for c, f in s.table1 if _present(f) and _present(str(Path(f) / "trajectories.jsonl"))]
    if len(present) == len(s.table1) == 3:
        t = reflector_rows(present)
        pages.append(("agmr_reflector_table1", t, (
            f"Table 1's AGMR row over each reflector's refined base, on the {int(t['episodes'].iloc[0])} valid_unseen "
            "tasks all three runs played (agent, dtype and step limit of Table 1): `traj` is the unrefined base, `agmr` "
            "the base refined with the oracle reflector (the committed Table 1 row), `agmr-plan-free` the base refined "
            "with the paper's reflector (m*, tau only); `won only ...` count the discordant tasks of each pair, `p` is "
            "the exact McNemar test. Where a base shows a task the same memory as the unrefined one, its episode is "
            "Traj's (adopted).")))
    return pages
