"""A refinement's folder: the refined copy of the memory base, its log of task records and executions, and what a killed refinement recovers on the next call."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from workbench.envs.memory_base import default_memory_base
from workbench.files import FormatError, present, read_json, read_jsonl_models
from workbench.memory.base import MemoryBase
from workbench.memory.tokens import memory_tokens
from workbench.memory.trajectory import (
    append_jsonl,
    atomic_write_text,
    cut_torn_tail,
    iter_jsonl_dicts,
)
from workbench.methods.agmr.records import Execution, TaskRecord
from workbench.methods.agmr.refine_config import RefineConfig, saved_identity
from workbench.provenance import versions

__all__ = ["REFINE_DIR", "refine_paths", "load_log", "load_executions", "prepare", "refine_stats"]


REFINE_DIR = "refine"


# -- the run over a split ------------------------------------------------------------------------------------
def refine_paths(root: Path) -> tuple[Path, Path, Path]:
    d = root / REFINE_DIR
    return d / "config.json", d / "log.jsonl", d / "executions.jsonl"


def load_log(root: str | Path) -> list[TaskRecord]:
    """The task records of a refined base (a torn last line, from a kill, is skipped)."""
    _, log, _ = refine_paths(Path(root))
    if not present(log):
        return []
    return [r for _, r in read_jsonl_models(log, TaskRecord, torn_ok=True, what="refinement log")]


def load_executions(root: str | Path, ids: Sequence[str] | None = None) -> list[Execution]:
    """The executions of a refined base (all, or those with the given ids, in file order)."""
    _, _, path = refine_paths(Path(root))
    want = set(ids) if ids is not None else None
    if not present(path):
        return []
    return [e for _, e in read_jsonl_models(path, Execution, torn_ok=True, what="refinement executions")
            if want is None or e.id in want]


def _recover(base: MemoryBase, done: set[str]) -> list[TaskRecord]:
    """Task records for commits whose log line never landed (a kill between the commit and the log append)."""
    out = []
    for r in base.commits():
        p = r.provenance
        task = p.get("refinement_task")
        if p.get("method") != "agmr" or not task or task in done:
            continue
        out.append(TaskRecord(task_id=task, entry_id=r.entry_id, base_version=r.version - 1, branch=p.get("branch"),
                              outcome="committed", committed_version=r.version, committed_pattern=p.get("pattern"),
                              first_pattern=p.get("first_pattern"), first_rule_pattern=p.get("first_rule_pattern"),
                              final_pattern=p.get("final_pattern"), final_rule_pattern=p.get("final_rule_pattern"),
                              executions=tuple(p.get("executions") or ()), segments_after=len(r.entry.segments),
                              tokens_after=memory_tokens(r.entry), recovered=True))
        done.add(task)
    return out


def _refine_config(path: Path) -> dict:
    """``refine/config.json``, strictly: an object whose ``config`` is an object."""
    saved = read_json(path, "refinement config")
    if not isinstance(saved, dict) or not isinstance(saved.get("config", {}), dict):
        raise FormatError(path, "not a refinement record ({\"config\": {...}, \"source\": ..., \"versions\": ...})",
                          fix="refine into a new --base-out folder")
    return saved


def _open_base(root: Path, config: RefineConfig) -> MemoryBase:
    cfg_path, _, _ = refine_paths(root)
    if present(cfg_path) and _refine_config(cfg_path).get("cloning"):
        # a kill while the source was being copied: nothing was refined yet, so copy it again
        for name in ("entries.jsonl", "history.jsonl"):
            (root / name).unlink(missing_ok=True)
        cfg_path.unlink()
    if cfg_path.exists():
        saved = _refine_config(cfg_path)
        had = saved_identity(saved.get("config", {}))
        if had != config.identity():
            diff = {k: (had.get(k), v) for k, v in config.identity().items() if had.get(k) != v}
            raise ValueError(f"{root}: holds a refinement with other parameters {diff} (saved, given); refine into "
                             "a new --base-out folder or pass the same parameters to resume")
        return MemoryBase(root)
    if (root / "entries.jsonl").exists():
        raise ValueError(f"{root}: already holds a memory base that no refinement made; refine into a new folder")
    if config.source:
        src_root = Path(config.source)
        if not (src_root / "entries.jsonl").exists():
            raise FileNotFoundError(f"{src_root}: no memory base there (no entries.jsonl)")
        src = MemoryBase(src_root)
    elif config.env == "alfworld":
        src = default_memory_base()
    else:  # the benchmark's own default base (ScienceWorld: the gold paths of train@10)
        from workbench.envs.benchmarks import benchmark

        src = MemoryBase(benchmark(config.env).default_memory_base(config.env))
    record = {"config": config.identity(), "source": {"path": str(src.root), "digest": src.digest(),
                                                      "entries": len(src)}, "versions": versions()}
    cfg_path.parent.mkdir(parents=True, exist_ok=True)
    # the config first, marked: a kill during the copy leaves a folder the next call recognises and copies again
    atomic_write_text(cfg_path, json.dumps(record | {"cloning": True}, indent=1))
    base = src.clone(root)
    atomic_write_text(cfg_path, json.dumps(record, indent=1))
    return base


def prepare(root: Path, config: RefineConfig) -> tuple[MemoryBase, set[str]]:
    """Open (or create) the refined base in ``root`` and settle what a kill left: returns the base and the tasks done.

    A commit whose log line never landed gets its record back from the provenance; executions of a task that
    never finished are dropped (it is played again, so its ids stay unique).
    """
    base = _open_base(root, config)
    _, log_path, exec_path = refine_paths(root)
    cut_torn_tail(log_path)
    done = {r.task_id for r in load_log(root)}
    for rec in _recover(base, done):
        append_jsonl(log_path, rec)
    load_executions(root)  # every line checked (a torn last one skipped)
    rows = list(iter_jsonl_dicts(exec_path))
    kept = [d for d in rows if d.get("task_id") in done]
    if len(kept) != len(rows):
        atomic_write_text(exec_path, "".join(json.dumps(d) + "\n" for d in kept))
    cut_torn_tail(exec_path)
    return base, done


def _committed_by(record: TaskRecord) -> str:
    """Why a committed failure-branch edit committed: its verification ``success`` or its ``reward_gain`` alone."""
    last = record.attempts[-1] if record.attempts else None
    return "success" if last is None or last.success else "reward_gain"


def refine_stats(root: str | Path) -> dict:
    """What a refinement did: tasks, branches, commits per pattern and branch, rollbacks, attempts, the base."""
    root = Path(root)
    cfg_path, _, _ = refine_paths(root)
    saved = _refine_config(cfg_path) if present(cfg_path) else {}
    log = load_log(root)
    base = MemoryBase(root)
    failures = [r for r in log if r.branch == "failure"]
    commits = [r for r in log if r.outcome == "committed"]
    by = Counter(f"{r.branch}/{r.committed_pattern or 'edit'}" for r in commits)
    tokens_now = sum(memory_tokens(e) for e in base)
    originals = {e.entry_id: base.original(e.entry_id) for e in base}
    tokens_then = sum(memory_tokens(e) for e in originals.values())
    return {
        "config": saved_identity(saved["config"]) if saved.get("config") is not None else None,
        "source": saved.get("source"),
        "tasks": len(log), "failures": len(failures), "successes": sum(r.branch == "success" for r in log),
        "no_memory": sum(r.outcome == "no_memory" for r in log),
        "outcomes": dict(Counter(r.outcome for r in log)),
        "commits": len(commits), "commits_by_branch_pattern": dict(sorted(by.items())),
        # a failure-branch edit commits on the verification's success, or on its reward gain alone (graded rewards:
        # ScienceWorld's score; Algorithm 1's "or reward rises by at least the threshold")
        "failure_commits_by": dict(Counter(_committed_by(r) for r in commits if r.branch == "failure")),
        "reward_gains_committed": [round(r.attempts[-1].reward_gain, 4) for r in commits
                                   if r.branch == "failure" and r.attempts and r.attempts[-1].reward_gain is not None],
        "failure_patterns": dict(Counter(r.final_pattern or "none" for r in failures)),  # final iteration's (Figure 9)
        "failure_rule_patterns": dict(Counter(r.final_rule_pattern or "none" for r in failures)),
        "first_failure_patterns": dict(Counter(r.first_pattern or "none" for r in failures)),
        "discarded": sum(r.outcome == "discarded" for r in log),
        "rolled_back": sum(r.outcome == "rolled_back" for r in log),
        "errors": sum(1 for r in log for a in r.attempts if a.error),
        "mean_attempts_failure": statistics.fmean([len(r.attempts) for r in failures]) if failures else None,
        "entries_before": len(originals), "entries_after": len(base),
        "entries_refined": sum(1 for e in base if e.version != originals[e.entry_id].version),
        "memory_tokens_before": tokens_then, "memory_tokens_after": tokens_now,
        "segments_before": sum(len(e.segments) for e in originals.values()),
        "segments_after": sum(len(e.segments) for e in base),
    }
