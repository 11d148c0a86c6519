"""Head-masking ablation of the retrieval heads (AGMR section 2.1, appendix C.3, Figure 2).

Conditions on the same tasks: ICL (a fixed demonstration, no retrieved memory), Traj (retrieved trajectory
memory), Traj with the top-k retrieval heads masked, and Traj with k random heads masked (``n_random`` seeded
draws that never include a top-k head). Each condition is measured by teacher-forced next-action accuracy on the
expert plans (the low-variance signal; an untrained model fails every episode) and, when episode tasks are
given, by episode success rate. Masks are :class:`HeadMaskInstrument` s, so they act on every forward of a run
(the KV cache is filled under the same mask).

The question the figure answers: how much of the memory gain (Traj - ICL) is left once the top heads are masked,
compared with masking as many random heads.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from workbench.agents.teacher_forcing import teacher_forced_accuracy
from workbench.attention.head_set import Head, HeadSet
from workbench.attention.instrument import HeadMaskInstrument
from workbench.attention.masking import random_heads
from workbench.memory.keyed import read_keyed_json, write_keyed_json
from workbench.memory.trajectory import atomic_write_text

__all__ = ["AblationCondition", "ConditionScore", "HeadAblationResult", "ablation_conditions", "run_head_ablation"]

GROUPS = ("none", "icl", "traj", "top", "random")
_BASELINE_NAMES = {"none": "No memory", "icl": "ICL"}


@dataclass(frozen=True)
class AblationCondition:
    """One arm: a memory policy name and the heads masked under it (none for the baselines)."""

    name: str
    group: str  # none | icl | traj | top | random
    memory: str  # the policy key: none | icl | traj
    heads: tuple[Head, ...] = ()
    seed: int | None = None


class ConditionScore(BaseModel):
    """What one arm scored (JSON-serialisable; the cache and the saved result hold these)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    group: str
    memory: str
    heads: list[tuple[int, int]]
    seed: int | None = None
    tf_accuracy: float | None = None
    tf_mean_p: float | None = None
    tf_steps: int = 0
    success_rate: float | None = None
    n_episodes: int = 0
    episodes: dict[str, bool] = {}


class _ResultRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_name: str
    k: int
    rows: list[ConditionScore]


def ablation_conditions(top: HeadSet | Iterable[Head], n_layers: int, n_heads: int, n_random: int = 3,
                        seed: int = 0, baselines: Sequence[str] = ("icl",)) -> list[AblationCondition]:
    """The baselines (ICL; optionally no memory), Traj, Traj with ``top`` masked and Traj with ``len(top)``
    random heads masked (``n_random`` draws).

    Random draw ``i`` uses seed ``seed + i`` and excludes every head of ``top``.
    """
    top = HeadSet.of(top)
    k = len(top)
    bad = [b for b in baselines if b not in _BASELINE_NAMES]
    if bad:
        raise ValueError(f"baselines {bad}: each must be one of {list(_BASELINE_NAMES)}")
    out = [AblationCondition(_BASELINE_NAMES[b], b, b) for b in GROUPS if b in baselines]
    out += [AblationCondition("Traj", "traj", "traj"),
            AblationCondition(f"Traj, top-{k} masked", "top", "traj", top.heads)]
    for i in range(n_random):
        rand = random_heads(k, n_layers, n_heads, exclude=top, seed=seed + i)
        out.append(AblationCondition(f"Traj, random-{k} masked #{i}", "random", "traj", rand.heads, seed + i))
    return out


def _mean_sd(values: Sequence[float]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


@dataclass(frozen=True)
class HeadAblationResult:
    """All arms of one model.

    Attributes:
        model_name: the model.
        k: heads masked per arm.
        rows: one :class:`ConditionScore` per arm (the order of :func:`ablation_conditions`).
    """

    model_name: str
    k: int
    rows: tuple[ConditionScore, ...]

    def group(self, group: str) -> list[ConditionScore]:
        return [r for r in self.rows if r.group == group]

    def summary(self) -> dict[str, dict[str, float | None]]:
        """Per group (none, icl, traj, top, random): mean and sd over its arms of TF accuracy, mean p(expert)
        and success rate."""
        out = {}
        for g in GROUPS:
            rows = self.group(g)
            if not rows:
                continue
            out[g] = {"n_arms": len(rows)}
            for metric in ("tf_accuracy", "tf_mean_p", "success_rate"):
                out[g][metric], out[g][f"{metric}_sd"] = _mean_sd([getattr(r, metric) for r in rows])
        return out

    def metrics(self) -> dict[str, float | None]:
        """Memory gain (Traj - ICL) and the gain left after masking top-k vs random-k, per metric.

        The same against the no-memory arm, when it ran, under keys ending in ``_vs_none``.
        """
        s = self.summary()
        out: dict[str, float | None] = {"k": self.k}

        def diff(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a - b

        for metric in ("tf_accuracy", "tf_mean_p", "success_rate"):
            traj = s.get("traj", {}).get(metric)
            top, rand = s.get("top", {}).get(metric), s.get("random", {}).get(metric)
            for base, suffix in (("icl", ""), ("none", "_vs_none")):
                if base not in s:
                    continue
                ref = s[base][metric]
                out[f"{metric}_memory_gain{suffix}"] = diff(traj, ref)
                out[f"{metric}_gain_left_top{suffix}"] = diff(top, ref)
                out[f"{metric}_gain_left_random{suffix}"] = diff(rand, ref)
            out[f"{metric}_change_top"] = diff(top, traj)
            out[f"{metric}_change_random"] = diff(rand, traj)
        return out

    def caption(self) -> str:
        """What the head-masking test shows, in words: the teacher-forced accuracy of each group, and whether
        masking the retrieval heads removes more of Traj's accuracy than masking random heads (AGMR's Figure 2)."""
        s = self.summary()
        acc = {g: v["tf_accuracy"] for g, v in s.items() if v.get("tf_accuracy") is not None}
        if not {"traj", "top", "random"} <= set(acc):
            return "Teacher-forced accuracy per arm (Traj, top-k masked and random-k masked are needed to compare)."
        names = {"none": "no memory", "icl": "ICL", "traj": "Traj", "top": f"Traj with the top-{self.k} heads masked",
                 "random": f"Traj with {self.k} random heads masked (mean of {s['random']['n_arms']} draws)"}
        text = "Teacher-forced accuracy: " + ", ".join(f"{names[g]} {acc[g]:.1%}" for g in names if g in acc) + "."
        drop_top, drop_random = acc["traj"] - acc["top"], acc["traj"] - acc["random"]
        spread = s["random"].get("tf_accuracy_sd") or 0.0  # over the random draws
        costs = (f" Masking the retrieval heads costs {100 * drop_top:.1f} points, random heads "
                 f"{100 * drop_random:.1f}" + (f" (sd over the draws {100 * spread:.1f})" if spread else ""))
        if drop_top <= 0:
            return text + costs + ": **not as in AGMR's Figure 2** (masking the retrieval heads does not lower it)."
        if drop_top - drop_random > spread:
            return text + costs + ": as in AGMR's Figure 2."
        return text + costs + (": **not the clear gap of AGMR's Figure 2** (the difference is within the spread of "
                               "the random draws)." if drop_top > drop_random else
                               ": **not as in AGMR's Figure 2** (random heads cost as much or more).")

    def table(self):
        """A pandas DataFrame, one row per arm."""
        import pandas as pd

        return pd.DataFrame([{"condition": r.name, "masked heads": " ".join(f"L{a}H{b}" for a, b in r.heads),
                              "TF accuracy": r.tf_accuracy, "mean p(expert)": r.tf_mean_p, "TF steps": r.tf_steps,
                              "success rate": r.success_rate, "episodes": r.n_episodes} for r in self.rows]
                            ).set_index("condition")

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        atomic_write_text(path, _ResultRecord(model_name=self.model_name, k=self.k,
                                              rows=list(self.rows)).model_dump_json(indent=1))
        return path

    @classmethod
    def load(cls, path: str | Path) -> HeadAblationResult:
        rec = _ResultRecord.model_validate_json(Path(path).read_text())
        return cls(rec.model_name, rec.k, tuple(rec.rows))


def _score_arm(agent: Any, cond: AblationCondition, policy: Any, experts: Sequence, tasks: dict, env: Any,
               episode_tasks: Sequence, max_steps: int | None, progress: bool) -> ConditionScore:
    lm = agent.scorer.lm
    inst = [HeadMaskInstrument(cond.heads, lm.n_heads)] if cond.heads else []
    tf = teacher_forced_accuracy(agent, list(experts), tasks, policy, instruments=inst, progress=progress) \
        if experts else None
    episodes: dict[str, bool] = {}
    for task in tqdm(list(episode_tasks), desc=f"episodes [{cond.name}]", disable=not progress):
        run = agent.run(env, task, policy, instruments=inst, max_steps=max_steps)
        episodes[task.task_id] = bool(run.trajectory.success)
    return ConditionScore(
        name=cond.name, group=cond.group, memory=cond.memory, heads=list(cond.heads), seed=cond.seed,
        tf_accuracy=tf.accuracy if tf else None, tf_mean_p=tf.mean_p_expert if tf else None,
        tf_steps=tf.n_steps if tf else 0, success_rate=sum(episodes.values()) / len(episodes) if episodes else None,
        n_episodes=len(episodes), episodes=episodes,
    )


def run_head_ablation(
    agent: Any,
    policies: dict[str, Any],
    top_heads: HeadSet | Iterable[Head],
    experts: Sequence = (),
    tasks: dict | None = None,
    n_random: int = 3,
    seed: int = 0,
    env: Any = None,
    episode_tasks: Sequence = (),
    max_steps: int | None = None,
    cache_dir: str | Path | None = None,
    baselines: Sequence[str] = ("icl",),
    progress: bool = True,
) -> HeadAblationResult:
    """Run every arm of :func:`ablation_conditions` on the same tasks.

    Args:
        agent: an :class:`~workbench.agents.Agent` (decode ``score``).
        policies: ``{"icl": ..., "traj": ...}`` memory policies (and ``"none"`` when it is a baseline).
        top_heads: the retrieval heads to mask (k = their number).
        experts: expert trajectories (with ``meta["admissible"]``) for teacher-forced accuracy; empty: skip it.
        tasks: task_id -> Task, covering the experts' and the episode tasks.
        n_random: random draws.
        env: the environment for episodes (needed when ``episode_tasks`` is not empty).
        episode_tasks: tasks to play as episodes (empty: teacher forcing only).
        cache_dir: each finished arm is written there and reused when run again with the same parameters.
        baselines: the reference arms without masking: ``icl`` and/or ``none``.

    Returns:
        The :class:`HeadAblationResult`.
    """
    lm = agent.scorer.lm
    top = HeadSet.of(top_heads)
    if episode_tasks and env is None:
        raise ValueError("episode_tasks given without env: pass the environment to play them in")
    tasks = dict(tasks or {})
    for t in episode_tasks:
        tasks.setdefault(t.task_id, t)
    rows = []
    for cond in ablation_conditions(top, lm.n_layers, lm.n_heads, n_random=n_random, seed=seed, baselines=baselines):
        key = {"model": lm.name, "dtype": lm.dtype, "arm": asdict(cond), "experts": [e.task_id for e in experts],
               "episodes": [t.task_id for t in episode_tasks], "max_steps": max_steps,
               "policy": type(policies[cond.memory]).__name__}
        key = json.loads(json.dumps(key))  # tuples -> lists, as they read back
        # Unmasked arms do not depend on k: they are shared by ablations of any k.
        stem = cond.group if not cond.heads else f"{cond.group}-k{len(top)}-{cond.seed or 0}"
        path = Path(cache_dir) / f"{stem}.json" if cache_dir else None
        if path is not None and (cached := read_keyed_json(path, key)) is not None:
            rows.append(ConditionScore.model_validate(cached["score"]))
            continue
        row = _score_arm(agent, cond, policies[cond.memory], experts, tasks, env, episode_tasks, max_steps, progress)
        if path is not None:
            write_keyed_json(path, key, {"score": row.model_dump(mode="json")})
        rows.append(row)
    return HeadAblationResult(lm.name, len(top), tuple(rows))
