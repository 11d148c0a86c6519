"""Widgets that drive an agent live in the kernel: the agent player with its intervention panel, live AGMR and the
failure browser (notebook 07; reused by 04-06).

Every number they show comes from the library (:class:`~workbench.live.Session`,
:class:`~workbench.live.LiveRefinement`, :func:`~workbench.eval.failures.failure_findings`): a widget only wires
controls to it and renders what it returns. Long actions (Run, replaying a run to a step, an AGMR execution) run
in a thread and show their progress; Stop ends them at the next step, and nothing half-done is written (a session
is only ever stepped whole, a working copy only changes by atomic commits). A bad request (an unknown task, bad
options, an edit that names nothing, a run folder of another model) is a message in the widget, the session as it
was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from workbench.agents.edits import (
    DropBank,
    DropItem,
    Edit,
    EditError,
    MaskHeads,
    MaskSegments,
    PlaceboReminder,
    RemoveReminder,
    ReplaceReminder,
    SetBand,
)
from workbench.models.registry import DEFAULT_AGENT

__all__ = ["AgentPlayer", "agent_player", "live_agmr", "failure_browser", "distribution_html", "prompt_html",
           "memory_html", "parse_heads"]

_MODELS: dict[tuple[str, str], Any] = {}  # one loaded model per (name, dtype) in a kernel


def _model(name: Any, dtype: str):
    """A model by name, loaded once per (name, dtype) in this kernel; a loaded model is kept under its own."""
    from workbench.models import load_model

    if not isinstance(name, str):
        _MODELS[(name.name, name.dtype)] = name
        return name
    key = (name, dtype)
    if key not in _MODELS:
        _MODELS[key] = load_model(name, dtype=dtype)
    return _MODELS[key]


# -- renderings (plain functions: tested without a browser) ----------------------------------------------------

def distribution_html(dist: dict[str, float], edited: dict[str, float] | None = None, top: int = 8,
                      css: str = "live-distribution") -> str:
    """p over the candidates as bars, strongest first (``edited``: a second column and Δp)."""
    order = sorted(dist, key=lambda c: -dist[c])[:top]
    if edited:
        for c in sorted(edited, key=lambda c: -edited[c])[:3]:
            if c not in order:
                order.append(c)
    rows = []
    for c in order:
        p = dist[c]
        bar = f"<div style='background:#4c72b0;height:9px;width:{max(1, round(160 * p))}px'></div>"
        row = f"<td><code>{escape(c)}</code></td><td>{p:.4f}</td><td>{bar}</td>"
        if edited is not None:
            q = edited.get(c, 0.0)
            bar2 = f"<div style='background:#dd8452;height:9px;width:{max(1, round(160 * q))}px'></div>"
            row += f"<td>{q:.4f}</td><td>{bar2}</td><td>{q - p:+.4f}</td>"
        rows.append(f"<tr>{row}</tr>")
    head = "<tr><th>command</th><th>p</th><th></th>" + ("<th>p edited</th><th></th><th>Δp</th>" if edited is not None
                                                         else "") + "</tr>"
    return f"<table class='{css}'>{head}{''.join(rows)}</table>"


def prompt_html(tokenizer: Any, prompt: Any, spans: Sequence[dict] | None = None, max_height: int = 260) -> str:
    """The prompt, span by span, each shaded by the attention mass the captured heads put on it (``spans``: rows of
    :meth:`Session.attention`); hover a span for its kind, piece and mass."""
    mass = {(r["start"], r["end"]): r for r in spans or ()}
    top = max((r["mass"] for r in spans or ()), default=0.0) or 1.0
    parts = []
    for sp in prompt.spans:
        text = tokenizer.decode(list(prompt.tokens[sp.start:sp.end]))
        r = mass.get((sp.start, sp.end))
        alpha = 0.85 * (r["mass"] / top) if r else 0.0
        label = sp.kind + "".join(f" {k} {v}" for k, v in (("segment", sp.segment), ("item", sp.item),
                                                             ("bank", sp.bank), ("band", sp.band)) if v is not None)
        title = f"{label}" + (f" · mass {r['mass']:.4f}" if r else "")
        parts.append(f"<span title='{escape(title)}' style='background:rgba(255,127,14,{alpha:.3f})'>"
                     f"{escape(text)}</span>")
    return (f"<pre class='live-prompt' style='white-space:pre-wrap;max-height:{max_height}px;overflow:auto;"
            f"font-size:11px'>{''.join(parts)}</pre>")


def memory_html(block: Any) -> str:
    """The memory block of a state: MemArbiter's items with bank, gate band, shown band, d and eta; a retrieved
    trajectory's segments; the reminder."""
    out = []
    arb = (block.record or {}).get("arbiter")
    if arb:
        texts = {p.item: p.text.strip() for p in block.working_memory if p.kind == "wm_item"}
        rows = []
        for item_id, bank, gate, shown, eta, tr in arb["items"]:
            d = arb["demand"].get(bank, arb["demand"].get("pool"))
            rows.append(f"<tr><td><code>{escape(item_id)}</code></td><td>{bank}</td><td>{gate}</td><td><b>{shown}</b>"
                        f"</td><td>{d if d is None else round(d, 3)}</td><td>{round(eta, 3)}</td><td>{tr or ''}</td>"
                        f"<td>{escape(texts.get(item_id, ''))}</td></tr>")
        out.append("<table class='live-memory'><tr><th>item</th><th>bank</th><th>gate</th><th>shown</th><th>d</th>"
                   "<th>eta</th><th>transition</th><th>text</th></tr>" + "".join(rows) + "</table>")
    elif block.working_memory:
        out.append("<pre class='live-memory'>" + escape("".join(p.text for p in block.working_memory)) + "</pre>")
    if block.pieces:
        segs: dict = {}
        for kind, seg, text in block.pieces:
            segs.setdefault(seg, []).append(text)
        out.append("<table class='live-memory'><tr><th>segment</th><th>text</th></tr>" + "".join(
            f"<tr><td>{'' if s is None else f's{s}'}</td><td><pre style='margin:0'>{escape(''.join(t).strip())}</pre>"
            f"</td></tr>" for s, t in segs.items()) + "</table>")
    if block.reminder:
        out.append(f"<p class='live-reminder'><b>{escape(block.reminder_label)}:</b> {escape(block.reminder)}</p>")
    return "".join(out) or "<p class='live-memory'><i>no memory shown</i></p>"


def parse_heads(text: str) -> list[tuple[int, int]]:
    """``"L13.H6, 20.7"`` -> ``[(13, 6), (20, 7)]``.

    Raises:
        ValueError: a piece that is not LAYER.HEAD.
    """
    out = []
    for piece in text.replace(";", ",").split(","):
        piece = piece.strip()
        if not piece:
            continue
        bare = piece.upper().replace("L", "").replace("H", "")
        try:
            layer, head = (int(x) for x in bare.split("."))
        except ValueError:
            raise ValueError(f"head {piece!r}: write it as L<layer>.H<head>, e.g. L13.H6") from None
        out.append((layer, head))
    return out


def _c_html(columns: list[tuple[int, dict]]) -> str:
    """C as it grows: one column per played step, one row per segment or item, the heads' mass shaded."""
    keys: list = []
    for _, col in columns:
        for k in col:
            if k not in keys:
                keys.append(k)
    if not keys:
        return ""
    top = max((v for _, col in columns for v in col.values()), default=0.0) or 1.0
    head = "<tr><th></th>" + "".join(f"<th>u{k}</th>" for k, _ in columns) + "</tr>"
    rows = []
    for key in keys:
        cells = "".join(
            f"<td title='{col[key]:.4f}' style='background:rgba(76,114,176,{0.9 * col[key] / top:.3f});"
            f"width:14px;height:12px'></td>" if key in col else "<td></td>" for _, col in columns)
        rows.append(f"<tr><td style='font-size:10px'>{escape(str(key))}</td>{cells}</tr>")
    return ("<p><b>Memory attention</b>: the retrieval heads' raw attention mass per memory piece (rows) at each "
            "step played (columns); AGMR's C rescales it by the prompt length "
            f"(<code>session.capture.utilization()</code>)</p><table class='live-c' style='border-collapse:collapse'>{head}{''.join(rows)}</table>")


def _err(e: BaseException) -> str:
    return f"<span class='live-error' style='color:#b00'>{escape(type(e).__name__)}: {escape(str(e))}</span>"


_ACTION = threading.Lock()  # one action at a time in this kernel, whichever widget starts it: they share the models


class _Worker:
    """Runs a widget's actions, in a thread (``background``) or the caller's, with a stop flag and the buttons it
    disables meanwhile. One action at a time in the kernel, whichever widget started it: the widgets share a loaded
    model, whose hooks (captures, head masks) would reach another thread's forward."""

    def __init__(self, buttons: Sequence[Any], status: Any) -> None:
        self.buttons, self.status = buttons, status
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """An action is under way in this kernel (this widget's or another's)."""
        return _ACTION.locked()

    def start(self, fn: Callable[[], None], background: bool = True) -> None:
        if not _ACTION.acquire(blocking=False):
            self.status.value = ("<i>busy: an action is under way (in this widget or another); wait, or press its "
                                 "Stop</i>")
            return
        self.stop.clear()

        def body():
            for b in self.buttons:
                b.disabled = True
            try:
                fn()
            except Exception as e:  # shown, never raised into the comm handler
                self.status.value = _err(e)
            finally:
                for b in self.buttons:
                    b.disabled = False
                _ACTION.release()

        if background:
            try:
                self.thread = threading.Thread(target=body, daemon=True)
                self.thread.start()
            except BaseException:
                _ACTION.release()
                raise
        else:
            body()


# -- the agent player and its intervention panel ----------------------------------------------------------------

class AgentPlayer:
    """The agent player (its ``widget``): pick a model, a task and a memory policy; Step, Run, Stop, Reset; the
    state's distribution, memory block, the prompt shaded by the retrieval heads, C as it grows, the game's reply;
    and the intervention panel that re-scores the pending decision under the edits chosen at once and forks the
    episode from here. ``session`` is the live :class:`~workbench.live.Session`; ``last_rescore`` the panel's last
    :class:`~workbench.agents.rescore.Rescore`.
    """

    def __init__(self, model: str | None = None, task: str | None = None, memory: str = "arbiter",
                 options: dict | None = None, dtype: str = "bfloat16", split: str | None = None,
                 background: bool = True, heads: Sequence[tuple[int, int]] | None = None,
                 env: str | None = None) -> None:
        import ipywidgets as w

        from workbench.agents.policy import list_policies
        from workbench.envs.benchmarks import benchmark, load_tasks
        from workbench.live.session import benchmark_of

        self.background, self.heads = background, heads
        # the benchmark: named, or the task's (a ScienceWorld id plays ScienceWorld), else ALFWorld
        self.env = env or (benchmark_of(task) if task else "alfworld")
        split = split or benchmark(self.env).default_split
        self.tasks = {t.task_id: t for t in load_tasks(self.env, split)}
        if task and task not in self.tasks:
            raise ValueError(f"task {task} is not in {self.env}'s {split} ({len(self.tasks)} tasks): name its split "
                             "(split=...)")
        if options is None and memory in ("arbiter", "proactive") and self.env != "alfworld":
            options = {"budget": 500} if memory == "arbiter" else {}
            options["backend"] = "llama-server"  # their offline stages are ALFWorld's (a Session refuses them here)
        types = sorted({t.task_type for t in self.tasks.values()})
        first = self.tasks.get(task) if task else None
        if model is not None and not isinstance(model, str):  # a model the notebook already loaded
            _model(model, model.dtype)
            model, dtype = model.name, model.dtype
        self.model = w.Text(value=model or DEFAULT_AGENT, description="model", layout=w.Layout(width="320px"))
        self.dtype = w.Dropdown(options=["bfloat16", "float32"], value=dtype, description="dtype",
                                layout=w.Layout(width="200px"))
        self.memory = w.Dropdown(options=list_policies(), value=memory, description="memory",
                                 layout=w.Layout(width="240px"))
        self.options = w.Text(value=json.dumps(options or ({"budget": 500} if memory == "arbiter" else {})),
                              description="options", layout=w.Layout(width="300px"))
        self.task_type = w.Dropdown(options=types, value=first.task_type if first else types[0], description="type",
                                    layout=w.Layout(width="220px"))
        self.task = w.Dropdown(description="task", layout=w.Layout(width="640px"))
        self._fill_tasks(first.task_id if first else None)
        self.load_btn, self.step_btn, self.run_btn, self.stop_btn = (
            w.Button(description=d) for d in ("Load / Reset", "Step", "Run", "Stop"))
        self.status, self.progress = w.HTML(), w.HTML()
        self.status.add_class("live-status")
        self.dist, self.mem, self.prompt, self.c = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.dist.add_class("live-dist")
        self.panel = w.VBox()
        self.panel.add_class("live-intervene")
        self.rescored, self.panel_msg = w.HTML(), w.HTML()
        self.rescored.add_class("live-rescore")
        self.fork_btn = w.Button(description="Continue from here")
        self.session: Any = None
        self.last_rescore: Any = None
        self.columns: list[tuple[int, dict]] = []
        self._controls: list = []
        self.worker = _Worker([self.load_btn, self.step_btn, self.run_btn, self.fork_btn], self.status)
        self.task_type.observe(lambda _: self._fill_tasks(), names="value")
        self.load_btn.on_click(lambda _: self.worker.start(self.load, self.background))
        self.step_btn.on_click(lambda _: self.worker.start(self.step, self.background))
        self.run_btn.on_click(lambda _: self.worker.start(self.run, self.background))
        self.stop_btn.on_click(lambda _: self.worker.stop.set())
        self.fork_btn.on_click(lambda _: self.worker.start(self.fork, self.background))
        self.widget = w.VBox([
            w.HBox([self.model, self.dtype, self.memory, self.options]),
            w.HBox([self.task_type, self.task]),
            w.HBox([self.load_btn, self.step_btn, self.run_btn, self.stop_btn]), self.status, self.progress,
            w.HBox([self.dist, self.mem]), self.prompt, self.c,
            w.HTML("<b>Intervene on the pending decision</b> (re-scored at once; the agent's own episode is not "
                   "touched)"), self.panel, self.rescored, w.HBox([self.fork_btn]), self.panel_msg])
        self.widget.add_class("workbench-live-player")

    def _ipython_display_(self):  # a player as a cell's last expression shows its widget
        from IPython.display import display

        display(self.widget)

    def _fill_tasks(self, value: str | None = None) -> None:
        ids = [k for k, t in self.tasks.items() if t.task_type == self.task_type.value]
        self.task.options = [(f"variation {t.meta['variation']}" if "variation" in t.meta else k.split("/")[1], k)
                             for k, t in ((k, self.tasks[k]) for k in ids)]
        self.task.value = value if value in ids else ids[0]

    # -- actions -------------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Load the model (once per name and dtype) and begin the chosen task with the chosen memory."""
        from workbench.live import Session

        try:
            options = json.loads(self.options.value or "{}")
            if not isinstance(options, dict):
                raise ValueError("options: a JSON object, e.g. {\"budget\": 500}")
        except json.JSONDecodeError as e:
            raise ValueError(f"options: not JSON ({e.msg}); e.g. {{\"budget\": 500}}") from None
        self.status.value = f"<i>loading {escape(self.model.value)} ({self.dtype.value})...</i>"
        lm = _model(self.model.value, self.dtype.value)
        self.open(Session(lm, self.tasks[self.task.value], self.memory.value, options=options, heads=self.heads,
                          env=self.env))

    def open(self, session: Any, note: str = "") -> None:
        """Show ``session`` (a new one, a fork, a replayed run) in the player, its pickers set to it. The session it
        showed before is closed, whichever way it is replaced (Load / Reset, Continue from here, an episode the
        failure browser opens): its game and any LLM server it started (a served backend is a ~1 GB process per
        session). Keep a session you want to go on with out of the player, or fork it yourself."""
        old = self.session
        self.session, self.columns, self.last_rescore = session, [], None
        if old is not None and old is not session:
            try:
                old.close()
            except Exception as e:  # noqa: BLE001 - the new session is shown whatever the old one's close did
                import warnings

                warnings.warn(f"the session the player replaced did not close cleanly: {e}", stacklevel=2)
        t = session.task
        if t.task_id in self.tasks:
            self.task_type.value = t.task_type
            self._fill_tasks(t.task_id)
        if session._config["memory"] in self.memory.options:
            self.memory.value = session._config["memory"]
        self.options.value = json.dumps(session._config["options"])
        for p in session.played:
            self._add_column(p.step)
        self.rescored.value = self.panel_msg.value = ""
        self.progress.value = note
        self.refresh()

    def step(self) -> None:
        """Play the pending decision."""
        s = self._need()
        played = s.step()
        self._add_column(played.step)
        self.refresh(played)

    def run(self) -> None:
        """Play until the episode ends or Stop is pressed (the view follows every step)."""
        s = self._need()
        while not s.done and not self.worker.stop.is_set():
            played = s.step()
            self._add_column(played.step)
            self.refresh(played, light=True)
        self.refresh()

    def fork(self) -> None:
        """Continue the episode from here with the panel's memory edits applied to every decision."""
        s = self._need()
        edits = [e for e in self.edits() if e.stage != "forward"]
        if not edits:
            raise EditError("choose a memory edit in the panel first (a head mask is a re-score, not a fork)")
        self.status.value = "<i>forking: replaying the episode to here...</i>"
        f = s.fork(edits)
        self.open(f, note=f"<b>fork</b> of step {s.step_index} with {escape(', '.join(map(repr, edits)))}")

    def _need(self):
        if self.session is None:
            raise ValueError("press Load / Reset first")
        return self.session

    def _add_column(self, step: int) -> None:
        if self.session is not None and self.session.capture is not None:
            from workbench.live import memory_mass

            self.columns.append((step, memory_mass(self.session.attention(step))))

    # -- views ---------------------------------------------------------------------------------------------------
    def refresh(self, played: Any = None, light: bool = False) -> None:
        s = self.session
        last = played or (s.played[-1] if s.played else None)
        head = f"<b>step {s.step_index}</b> of <code>{escape(s.task.task_id)}</code> · memory {escape(s.policy.name)}"
        if last is not None:
            p = (last.distribution or {}).get(last.action)
            head += (f" · played <code>{escape(last.action)}</code>" + (f" (p={p:.4f})" if p is not None else "")
                     + f" · game: <i>{escape(last.observation[:300])}</i>")
        if s.done:
            head += f" · <b>episode over: {'won' if s.episode.won else 'lost'}</b>"
        self.status.value = head
        if last is not None and self.session.capture is not None:
            self.prompt.value = ("<p>the prompt of step {0}, shaded by the retrieval heads' attention</p>".format(
                last.step) + prompt_html(self.session.lm.tokenizer, last.prompt, self.session.attention(last.step)))
        self.c.value = _c_html(self.columns) if self.session.capture is not None else (
            "<p><i>no heads captured (the model has no committed retrieval heads): pass heads=[(layer, head), ...]"
            "</i></p>")
        if s.done:
            self.dist.value = distribution_html(last.distribution) if last and last.distribution else ""
            self.panel.children, self.mem.value = (), ""
            return
        if light:
            return
        self.progress.value = self.progress.value if self.progress.value.startswith("<b>fork") else ""
        self.dist.value = (f"<p>p over the candidates of step {s.step_index}</p>"
                           + distribution_html(s.distribution()))
        self.mem.value = memory_html(s.state.block)
        self._build_panel()

    def _build_panel(self) -> None:
        import ipywidgets as w

        state = self.session.state
        block = state.block
        controls: list = []
        rows = []
        arb = (block.record or {}).get("arbiter")
        if arb:
            for item_id, bank, gate, shown, eta, tr in arb["items"]:
                dd = w.Dropdown(options=[("as shown", ""), ("focal", "F"), ("ambient", "A"), ("hidden", "H"),
                                         ("drop (nothing takes its room)", "drop")], value="",
                                description=item_id, style={"description_width": "140px"},
                                layout=w.Layout(width="420px"))
                dd.add_class("live-item")
                dd.item, dd.kind = item_id, "item"
                rows.append(dd)
            banks = sorted({b for _, b, *_ in arb["items"] if b})
            for b in banks:
                cb = w.Checkbox(value=False, description=f"drop bank {b}", indent=False)
                cb.bank, cb.kind = b, "bank"
                rows.append(cb)
        segs = sorted({p[1] for p in block.pieces if p[1] is not None})
        for seg in segs:
            cb = w.Checkbox(value=False, description=f"mask segment s{seg}", indent=False)
            cb.segment, cb.kind = seg, "segment"
            rows.append(cb)
        reminder = w.Textarea(value=block.reminder or "", description="reminder", continuous_update=False,
                              layout=w.Layout(width="640px", height="48px"))
        reminder.kind = "reminder"
        rows.append(reminder)
        if block.reminder:
            for label, kind in (("remove the reminder", "remove_reminder"), ("placebo reminder", "placebo")):
                cb = w.Checkbox(value=False, description=label, indent=False)
                cb.kind = kind
                rows.append(cb)
        heads = w.Text(value="", description="mask heads", placeholder="L20.H3, L24.H8", continuous_update=False,
                       layout=w.Layout(width="400px"))
        heads.kind = "heads"
        rows.append(heads)
        controls = rows
        for c in controls:
            c.observe(lambda _: self._on_panel_change(), names="value")
        self._controls = controls
        self.panel.children = tuple(controls)

    def _on_panel_change(self) -> None:
        # a re-score takes well under two seconds: run it here, where the change arrived, unless an action is
        # under way (the pending decision is about to change)
        if self.worker.busy:
            self.rescored.value = ("<i>busy: an action is under way (the pending decision is about to change); "
                                   "change it again once it ends, or press Stop</i>")
            return
        self.worker.start(self.rescore, background=False)

    def edits(self) -> list[Edit]:
        """The memory edits the panel's controls say (what :meth:`rescore` scores)."""
        out: list[Edit] = []
        block = self.session.state.block
        for c in self._controls:
            kind = getattr(c, "kind", None)
            if kind == "item" and c.value:
                out.append(DropItem(c.item) if c.value == "drop" else SetBand(c.item, c.value))
            elif kind == "bank" and c.value:
                out.append(DropBank(c.bank))
            elif kind == "segment" and c.value:
                out.append(MaskSegments((c.segment,)))
            elif kind == "reminder" and c.value.strip() and c.value != (block.reminder or ""):
                out.append(ReplaceReminder(c.value.strip()))
            elif kind == "remove_reminder" and c.value:
                out.append(RemoveReminder())
            elif kind == "placebo" and c.value:
                out.append(PlaceboReminder())
            elif kind == "heads" and c.value.strip():
                out.append(MaskHeads(tuple(parse_heads(c.value))))
        segs = [e for e in out if isinstance(e, MaskSegments)]
        if len(segs) > 1:  # one masking instrument for all the segments chosen
            out = [e for e in out if not isinstance(e, MaskSegments)] + [
                MaskSegments(tuple(s for e in segs for s in e.segments))]
        return out

    def rescore(self) -> Any:
        """Re-score the pending decision under the panel's edits and show both distributions, Δp, TV, the choice."""
        s = self._need()
        try:
            edits = self.edits()
            r = s.rescore(edits)
        except (EditError, ValueError) as e:
            self.rescored.value = _err(e)
            return None
        self.last_rescore = r
        before, after = dict(zip(r.candidates, r.p)), dict(zip(r.candidates, r.p_edited))
        what = ", ".join(map(repr, edits)) or "no edit"
        flip = (f"the choice moves to <code>{escape(r.edited_command)}</code>" if r.flipped
                else "the choice stays")
        self.rescored.value = (f"<p class='live-rescore-line'>{escape(what)}: Δp(<code>{escape(r.choice)}</code>) = "
                               f"<b>{r.delta_p:+.6f}</b> · TV = <b>{r.tv:.6f}</b> · {flip}"
                               + (" · <i>this edit leaves the prompt as it was</i>" if r.noop else "") + "</p>"
                               + distribution_html(before, after, css="live-distribution live-compare"))
        return r


def agent_player(model: str | None = None, task: str | None = None, memory: str = "arbiter",
                 options: dict | None = None, dtype: str = "bfloat16", *, load: bool = True,
                 split: str | None = None, background: bool = True,
                 heads: Sequence[tuple[int, int]] | None = None, env: str | None = None) -> AgentPlayer:
    """The agent player (an :class:`AgentPlayer`; display it, or its ``widget``), loaded with ``task`` (default: the
    first of its type) unless ``load=False``. ``heads``: the heads whose attention shades the prompt and fills C
    (default: the model's committed retrieval heads). ``background=False`` runs every action in the caller's
    thread. ``env``: the benchmark (default: the task's, else ALFWorld; ``scienceworld`` lists its tasks, and
    MemArbiter and the proactive agent then default to the served LLM for their stages); ``split``: its tasks
    (default: the benchmark's, ALFWorld's valid_unseen, ScienceWorld's test@10)."""
    p = AgentPlayer(model, task, memory, options, dtype, split=split, background=background, heads=heads, env=env)
    if load:
        p.worker.start(p.load, background=False)
    return p


# -- live AGMR ---------------------------------------------------------------------------------------------------

def _execution_html(ex: Any, label: str) -> str:
    t = ex.trajectory
    return (f"<p>{label} <code>{escape(ex.id)}</code>: <b>{'success' if t.success else 'failure'}</b> in "
            f"{t.n_steps} steps, memory <code>{escape(ex.entry_id)}</code> ({len(ex.memory.segments)} segments)</p>")


def live_agmr(model: str | None = None, copy: str | Path = "runs/live/agmr-copy", *, source: str | Path | None = None,
              run: str | Path | None = None, task: str | None = None, dtype: str = "bfloat16",
              background: bool = True, config: Any = None):
    """Live AGMR: pick a refinement task (a failed one of ``run``, or any of the split) -> Play (m* retrieved, the
    task played, C captured) -> Attempt (reflect, diagnose C[:, j], refine, re-execute with the model: the real
    verifier), each attempt with its before/after C -> Accept into the working copy, or Roll back.

    Args:
        copy: the working copy (a refine folder, created as a clone of ``source``); never the source.
        run: a run folder whose failed episodes fill the task list (its split must be the refinement's).
        task: the task chosen at first.

    Returns:
        (ipywidgets.VBox): the widget (its ``live`` attribute is the :class:`~workbench.live.LiveRefinement`).
    """
    import ipywidgets as w
    from IPython.display import display

    from workbench.envs.alfworld import load_alfworld_tasks
    from workbench.live import LiveRefinement
    from workbench.methods.agmr.refine import Attempted, Executed, Verdict
    from workbench.viz.utilization import episode_utilization_figure, figure_image

    progress = w.HTML()
    progress.add_class("agmr-progress")
    live = LiveRefinement(_model(model or DEFAULT_AGENT, dtype), copy, source=source, config=config,
                          on_progress=lambda text: setattr(progress, "value", f"<i>{escape(text)}</i>"))
    ids = [t.task_id for t in load_alfworld_tasks(live.config.split)]
    if run is not None:
        from workbench.eval.run_folder import read_episodes

        failed = [t.task_id for t in read_episodes(run) if not t.success]
        ids = [i for i in ids if i in set(failed)] or ids
    picker = w.Dropdown(options=[(i.split("/")[1], i) for i in ids], value=task if task in ids else ids[0],
                        description="task", layout=w.Layout(width="720px"))
    play, attempt, accept, back, stop = (w.Button(description=d) for d in
                                         ("Play", "Attempt", "Accept", "Roll back", "Stop"))
    status, log = w.HTML(), w.VBox()
    status.add_class("agmr-status")
    worker = _Worker([play, attempt, accept, back], status)

    def c_image(ex, attempt_=None):
        out = w.Output()
        rec = ex.utilization
        if attempt_ is not None and attempt_.rule:
            rec = rec.model_copy(update={"critical_step": attempt_.rule.get("step"),
                                         "ideal_segment": attempt_.rule.get("segment"),
                                         "pattern": attempt_.rule.get("pattern")})
        with out:
            display(figure_image(episode_utilization_figure(rec)))
        return out

    def show(event):
        if isinstance(event, Executed):
            log.children = (w.HTML(_execution_html(event.execution, "first execution")), c_image(event.execution))
        elif isinstance(event, Attempted):
            a = event.attempt
            refl, rule = a.reflection or {}, a.rule or {}
            html = [f"<h4>attempt {a.n}</h4>"]
            if refl:
                html.append(f"<p>reflection: critical step u{refl.get('critical_step')}, took <code>"
                            f"{escape(str(refl.get('wrong_action', '')))}</code>, should have taken <code>"
                            f"{escape(str(refl.get('correct_action', '')))}</code>, supporting segment "
                            f"s{refl.get('supporting_segment')}</p>")
            if rule:
                html.append(f"<p class='agmr-diagnosis'>diagnosis of C[:, {rule.get('step')}]: rule <b>"
                            f"{rule.get('pattern')}</b>, refiner <b>{a.pattern}</b> · C = {rule.get('value', 0):.4f}"
                            f", rank {rule.get('rank')}, share {rule.get('share', 0):.2f}</p>")
            if a.error:
                html.append(f"<p class='agmr-error'>no edit: {escape(a.error)}</p>")
            if a.diff:
                html.append(f"<pre class='agmr-diff'>{escape(a.diff)}</pre>")
            kids = [w.HTML("".join(html))]
            if event.verification is not None:
                kids += [w.HTML(_execution_html(event.verification, "verification")),
                         w.HBox([c_image(event.before, a), c_image(event.verification)])]
            log.children = (*log.children, *kids)
        if live.verdict is not None:
            v = live.verdict
            status.value = ("<b>verified</b>: press Accept to commit the edit to the working copy" if v.commit
                            else f"verdict: <b>{v.record.outcome}</b> (nothing to accept)")

    def do_play():
        status.value = ""
        show(live.begin(picker.value))

    def do_attempt():
        show(live.next())

    def do_accept():
        rec = live.accept()
        status.value = (f"<b>accepted</b>: {escape(rec.entry_id)} is version {rec.committed_version} in "
                        f"{escape(str(live.copy))}")

    def do_back():
        e = live.roll_back()
        status.value = (f"<b>rolled back</b>: {escape(e.entry_id)} holds its previous content as version "
                        f"{e.version} in {escape(str(live.copy))}")

    def guarded(fn):
        def run_it():
            from workbench.live import Interrupted, SessionError

            try:
                fn()
            except Interrupted:
                status.value = "<b>stopped</b>: nothing was committed; the working copy is as it was"
            except (SessionError, ValueError, KeyError) as e:
                status.value = _err(e)
            finally:
                progress.value = ""
        return run_it

    play.on_click(lambda _: worker.start(guarded(do_play), background))
    attempt.on_click(lambda _: worker.start(guarded(do_attempt), background))
    accept.on_click(lambda _: worker.start(guarded(do_accept), background))
    back.on_click(lambda _: worker.start(guarded(do_back), background))
    stop.on_click(lambda _: live.stop())
    box = w.VBox([w.HTML(f"working copy: <code>{escape(str(live.copy))}</code> (a clone of "
                         f"<code>{escape(str(live.source.root))}</code>, never written)"), picker,
                  w.HBox([play, attempt, accept, back, stop]), progress, status, log])
    box.add_class("workbench-live-agmr")
    box.live = live
    # the buttons' actions, callable from a cell (a rendered notebook presses them in order)
    box.play = lambda: worker.start(guarded(do_play), background=False)
    box.attempt = lambda: worker.start(guarded(do_attempt), background=False)
    box.accept = lambda: worker.start(guarded(do_accept), background=False)
    box.roll_back = lambda: worker.start(guarded(do_back), background=False)
    return box


# -- the failure browser -------------------------------------------------------------------------------------------

def failure_browser(run: str | Path, refine: str | Path | None = None, player: AgentPlayer | None = None,
                    model: Any = None, limit: int = 60, background: bool = True):
    """A run's episodes filtered by what went wrong (A,B,A,B oscillation, loop to the step limit, put back, failed
    command; and, with ``refine`` (a refinement folder), attended-but-wrong / missed / distracted at their critical
    step, for the episodes that played what the refinement's first execution played up to it: the same split and
    memory, e.g. a Traj run on the refinement's split); a click replays that episode to that step in the player
    (whose Stop ends the replay).

    Args:
        run: a run folder.
        player: the player to open episodes in (default: a new one below the list).
        model: the run's model already loaded (default: loaded in the run's dtype on first click).

    Returns:
        (ipywidgets.VBox): the widget (its ``player`` attribute is the :class:`AgentPlayer`).
    """
    import ipywidgets as w

    from workbench.eval.config import RunConfig
    from workbench.eval.failures import diagnosed_failures, failure_findings
    from workbench.eval.run_folder import read_config, read_episodes

    cfg = read_config(run).run
    episodes = {t.task_id: t for t in read_episodes(run)}
    findings = [f for t in episodes.values() for f in failure_findings(t, cfg.max_steps)]
    if refine is not None:
        from workbench.methods.agmr.refine_folder import load_executions, load_log

        # a diagnosis is of the refinement's first execution (the task played with m*): shown at this run's
        # episode only where that episode played the same actions up to the critical step
        first = {e.task_id: e.trajectory.actions() for e in load_executions(refine) if e.id.endswith("#0")}
        for f in diagnosed_failures(load_log(refine)):
            ep = episodes.get(f.task_id)
            if ep is not None and first.get(f.task_id, [])[:f.step + 1] == ep.actions()[:f.step + 1]:
                findings.append(f)
    modes = sorted({f.mode for f in findings})
    if not modes:
        raise ValueError(f"{run}: no episode shows a failure mode the browser knows")
    mode = w.Dropdown(options=modes, description="what went wrong", style={"description_width": "120px"})
    listing, note = w.VBox(), w.HTML()
    note.add_class("failure-note")
    player = player or AgentPlayer(cfg.model, dtype=cfg.dtype, memory=cfg.memory, split=cfg.split, env=cfg.env,
                                   options=RunConfig.from_identity(str(run), cfg).options, background=background)
    worker = _Worker([player.load_btn, player.step_btn, player.run_btn, player.fork_btn], note)
    worker.stop = player.worker.stop  # the player's Stop ends a replay too

    def open_at(f):
        from workbench.live import Session

        note.value = f"<i>replaying {escape(f.task_id)} to step {f.step}...</i>"
        lm = model or _model(cfg.model, cfg.dtype)
        s = Session.from_run(str(run), f.task_id, model=lm)
        rows = []
        try:
            for k in range(f.step):  # one step at a time: progress shown, Stop honoured
                if worker.stop.is_set():
                    break
                rows += s.replay(to_step=k + 1)
                note.value = f"<i>replaying {escape(f.task_id)}: step {k + 1} of {f.step}</i>"
        except BaseException:
            s.close()  # a replay that fails leaves no game or LLM server behind
            raise
        same = sum(r["same_choice"] for r in rows)
        player.open(s, note=f"{f.mode} in <code>{escape(f.task_id)}</code> at step {f.step}: {escape(f.detail)}")
        note.value = (f"opened at step {s.step_index}: the replay reproduced {same} of {len(rows)} recorded choices"
                      + ("" if same == len(rows) else " (this machine's rounding or code differs from the run's)"))

    def fill(_=None):
        shown = [f for f in findings if f.mode == mode.value][:limit]
        buttons = []
        for f in shown:
            b = w.Button(description=f"{f.task_id.split('/')[1][:60]} · step {f.step}", tooltip=f.detail,
                         layout=w.Layout(width="640px"))
            b.add_class("failure-episode")
            b.on_click(lambda _, f=f: worker.start(lambda: open_at(f), background))
            b.finding = f
            buttons.append(b)
        listing.children = tuple(buttons)
        note.value = f"{len([f for f in findings if f.mode == mode.value])} episodes · click one to open it there"

    mode.observe(fill, names="value")
    fill()
    box = w.VBox([w.HTML(f"<b>{escape(str(run))}</b>: {cfg.model} ({cfg.dtype}), memory {cfg.memory}"), mode, listing,
                  note, player.widget])
    box.add_class("workbench-failure-browser")
    box.player, box.findings = player, findings
    box.open = lambda f: worker.start(lambda: open_at(f), background=False)  # what a click does, from a cell
    return box
