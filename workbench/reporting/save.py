"""One way to save every figure, table and number a notebook produces into a reports set.

A reports *set* is one folder per reproduction profile (``reports/default/``, ``reports/full-bfloat16/``: the
profile, and the dtype where one was forced, as for the run folders), so rendering one profile never overwrites
another's results::

    reports/
      index.md                  the sets, what each is (:func:`write_home_index`)
      <set>/
        index.md                grouped by notebook: each section's profile, dtype, model, tasks and commit, then
                                its tables and figures in the order the notebook made them, each with its caption
        manifest.json           which notebook made each table and figure, and its caption
        metrics.json            the numbers and parameters, one section per notebook
        reproduce.json          per notebook: profile, dtype, wall time, versions, commit (written by `reproduce`)
        tables/NAME.{csv,md}    figures/NAME.png    notebooks/NN_name.ipynb
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from workbench.memory.trajectory import atomic_write_text

__all__ = ["Reports", "SECTION_TITLES", "frame_markdown", "set_index", "write_home_index", "write_set_index"]

# what each section of a set is; a section not named here is shown under its own name
SECTION_TITLES = {
    "01_baselines": "01 · Memory baselines: ReAct, ICL, Traj",
    "02_retrieval_heads": "02 · Retrieval heads (AGMR §3.1, Figures 2 and 8)",
    "03_utilization": "03 · The context utilization matrix C (AGMR §3.2, Figures 3 and 4)",
    "04_agmr": "04 · AGMR: attention-guided memory refinement (Tables 1-2, Figures 6, 7, 9)",
    "05_arbiter": "05 · MemArbiter and the flat baselines (Tables 2, 4, 5, Figure 3)",
    "06_proactive": "06 · The proactive memory agent",
    "07_live": "07 · Live loops: the player, live AGMR, replay parity",
    "08_scienceworld": "08 · ScienceWorld: the second benchmark (ReAct, ICL, Traj; the capture; AGMR's graded branch)",
    "agent_eval": "The agents' evaluations (make eval-agent-v2, make dtype-table)",
    "memory_following": "Does the agent follow its memory? (benchmarks/memory_following.py)",
}
# what a section written by a script (no parameters recorded) is
SECTION_NOTES = {
    "agent_eval": "Written by `benchmarks/agent_eval.py` from the runs of `make eval-agent-v2` (bfloat16, agent v2 "
                  "beside v1) and `make dtype-table`, and earlier float32 evaluations of agent v1; each table states "
                  "its dtype, tasks and the command that wrote it.",
    "memory_following": "Written by `benchmarks/memory_following.py` (its command is in the table).",
}
NA = "–"  # a cell with no value (pandas' NaN)


def _empty(v: Any) -> bool:
    import pandas as pd

    try:
        return v is None or bool(pd.isna(v))  # NaN, pd.NA, NaT
    except (TypeError, ValueError):  # a list or array in a cell
        return False


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not _empty(v)


def _integral(v: Any) -> bool:
    return _number(v) and (isinstance(v, int) or (math.isfinite(v) and float(v).is_integer()))


def _text(v: Any) -> str:
    """A cell's text for a pipe table: ``|`` escaped (it would end the cell), line breaks as spaces."""
    return str(v).replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def frame_markdown(df: Any, floatfmt: str = ".3f") -> str:
    """``df`` as a Markdown table a reader can read: no pandas artefacts.

    Row labels of a MultiIndex become columns of their own (not tuples), column labels of a MultiIndex are
    joined with " · ", an empty cell (NaN, NA, NaT) prints as "–", row labels print as they are (``rank 1``), and
    a number prints as an integer where its whole column holds integers, or its whole row does and holds a count
    above 1 (``episodes 4`` in a column of rates, not ``4.000``; a row of rates that happen to be 0 and 1 keeps
    its decimals); other floats take ``floatfmt``. ``|`` in a cell is escaped. Numeric columns are right-aligned.
    """
    from tabulate import tabulate

    frame = df.copy()
    if getattr(frame.columns, "nlevels", 1) > 1:
        frame.columns = [" · ".join(str(p) for p in c if str(p) != "") for c in frame.columns]
    names = list(frame.index.names)
    label_cols = len(names)
    frame = frame.reset_index(allow_duplicates=True)
    frame.columns = [*("" if n is None else n for n in names), *frame.columns[label_cols:]]
    rows = frame.astype(object).values.tolist()
    ncol = len(frame.columns)
    numeric = [c >= label_cols and any(_number(r[c]) for r in rows) for c in range(ncol)]
    int_col = [numeric[c] and all(_integral(r[c]) or _empty(r[c]) for r in rows) for c in range(ncol)]
    int_row = [any(numeric[c] and _number(r[c]) and abs(r[c]) > 1 for c in range(ncol))
               and all(_integral(r[c]) or _empty(r[c]) for c in range(ncol) if numeric[c]) for r in rows]

    def cell(v: Any, c: int, i: int) -> str:
        if _empty(v):
            return NA
        if not _number(v):
            return _text(v)
        if c < label_cols or int_col[c] or int_row[i]:
            return str(int(v)) if _integral(v) else (format(v, floatfmt) if c >= label_cols else str(v))
        return format(v, floatfmt)

    body = [[cell(v, c, i) for c, v in enumerate(r)] for i, r in enumerate(rows)]
    return tabulate(body, headers=[_text(c) for c in frame.columns], tablefmt="pipe", disable_numparse=True,
                    colalign=["right" if n else "left" for n in numeric])


class Reports:
    """A reports set: ``figures/NAME.png``, ``tables/NAME.{csv,md}``, ``metrics.json``, ``manifest.json``,
    ``index.md``.

    ``section`` is the notebook (or script) that saves; ``metrics.json`` and ``manifest.json`` hold one section
    each, so notebooks can be re-run one at a time. Creating a ``Reports`` with ``parameters`` starts the section
    afresh (a new render): its manifest entries are cleared, and each table or figure saved takes its place in
    the order the notebook saves it. When the parameters name the model's ``dtype``, every table says it under its
    title (a table of model results is only comparable with others of the same dtype).
    """

    def __init__(self, root: str | Path, section: str, parameters: dict | None = None):
        from filelock import FileLock

        self.root = Path(root)
        self.section = section
        self.dtype = (parameters or {}).get("dtype")
        (self.root / "figures").mkdir(parents=True, exist_ok=True)
        (self.root / "tables").mkdir(parents=True, exist_ok=True)
        # every read-modify-write of the set's JSON files holds this: two notebooks (or a notebook and a script)
        # saving into one set keep each other's entries
        self._lock = FileLock(self.root / ".reports.lock", thread_local=False)
        if parameters is not None:  # a new render of this section: what the last one saved is not its
            with self._lock:
                manifest = self._manifest()
                manifest[section] = []
                self._write_manifest(manifest)
                data = self._json("metrics.json", "metrics")
                data[section] = {"parameters": parameters}
                atomic_write_text(self.root / "metrics.json", json.dumps(data, indent=1, default=str) + "\n")
            self.index()

    # -- the set's JSON files, read strictly: a damaged one is named, never overwritten ----------------------
    def _json(self, name: str, what: str) -> dict:
        path = self.root / name
        if not path.exists():
            return {}
        try:
            data = json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not valid JSON ({e}); it is the set's {what}: restore it from git "
                             "(`git checkout -- FILE`) or delete it and render the set's notebooks again") from None
        if not isinstance(data, dict) or not all(isinstance(v, (dict, list)) for v in data.values()):
            raise ValueError(f"{path}: not the set's {what} (a JSON object of sections); restore it from git or "
                             "delete it and render the set's notebooks again")
        return data

    def _manifest(self) -> dict[str, list[dict]]:
        data = self._json("manifest.json", "manifest")
        for section, entries in data.items():
            if not isinstance(entries, list) or not all(
                    isinstance(e, dict) and e.get("kind") in ("table", "figure") and isinstance(e.get("name"), str)
                    for e in entries):
                raise ValueError(f"{self.root / 'manifest.json'}: section '{section}' is not a list of "
                                 "{kind: table|figure, name, caption}; restore it from git or delete it and render "
                                 "the set's notebooks again")
        return data

    def _write_manifest(self, manifest: dict) -> None:
        atomic_write_text(self.root / "manifest.json", json.dumps(manifest, indent=1) + "\n")

    def _record(self, kind: str, name: str, caption: str | None) -> None:
        with self._lock:
            manifest = self._manifest()
            for section, entries in manifest.items():  # a file belongs to one section: the last one to save it
                manifest[section] = [e for e in entries if not (e["kind"] == kind and e["name"] == name)
                                     or section == self.section]
            entries = manifest.setdefault(self.section, [])
            entry = {"kind": kind, "name": name, "caption": caption}
            old = next((i for i, e in enumerate(entries) if e["kind"] == kind and e["name"] == name), None)
            if old is None:
                entries.append(entry)
            else:
                entries[old] = entry
            self._write_manifest(manifest)

    # -- saving ---------------------------------------------------------------------------------------------
    def figure(self, fig: Any, name: str, caption: str | None = None) -> Path:
        """Save ``fig`` as ``figures/NAME.png``; ``caption`` is shown under it in the index."""
        path = self.root / "figures" / f"{name}.png"
        partial = path.with_name(f".{path.name}.partial")  # a kill mid-write leaves the old figure, not half a new
        fig.savefig(partial, dpi=130, bbox_inches="tight", format="png")
        os.replace(partial, path)
        self._record("figure", name, caption)
        self.index()
        return path

    def table(self, df: Any, name: str, floatfmt: str = ".3f", model_results: bool = True,
              caption: str | None = None) -> Path:
        """Save ``df`` as ``tables/NAME.csv`` and ``.md`` (:func:`frame_markdown`); ``model_results=False`` for a
        table no model made (it then states no dtype); ``caption`` is shown above it in the index."""
        path = self.root / "tables" / f"{name}.csv"
        atomic_write_text(path, df.to_csv())
        head = f"dtype: {self.dtype}\n\n" if self.dtype and model_results else ""
        atomic_write_text(path.with_suffix(".md"), head + frame_markdown(df, floatfmt) + "\n")
        self._record("table", name, caption)
        self.index()
        return path

    def add(self, path: str | Path, caption: str | None = None) -> Path:
        """Register a table page another writer made (``tables/NAME.md``, e.g. by
        :func:`workbench.reporting.write_table`) as this section's."""
        path = Path(path)
        if path.parent.resolve() != (self.root / "tables").resolve() or path.suffix != ".md":
            raise ValueError(f"{path}: a table page of this set is {self.root / 'tables'}/NAME.md")
        self._record("table", path.stem, caption)
        self.index()
        return path

    def metrics(self, values: dict) -> Path:
        path = self.root / "metrics.json"
        with self._lock:
            data = self._json("metrics.json", "metrics")
            data.setdefault(self.section, {}).update(values)
            atomic_write_text(path, json.dumps(data, indent=1, default=str) + "\n")
        self.index()
        return path

    # -- the index ------------------------------------------------------------------------------------------
    def index(self) -> Path:
        """Rewrite ``index.md`` from the manifest (also tables saved by scripts, shown last)."""
        return write_set_index(self.root)


def write_set_index(root: str | Path) -> Path:
    """Rewrite ``ROOT/index.md`` (:func:`set_index`)."""
    root = Path(root)
    atomic_write_text(root / "index.md", set_index(root))
    return root / "index.md"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _header(root: Path, section: str) -> list[str]:
    """One line of what a section is: profile, dtype, model, its tasks parameters, and what rendered it."""
    params = _read_json(root / "metrics.json").get(section, {}).get("parameters", {})
    rendered = _read_json(root / "reproduce.json").get("notebooks", {}).get(section, {})
    bits = []
    profile = rendered.get("profile") or params.get("profile")
    if profile:
        bits.append(f"profile **{profile}**")
    dtype = rendered.get("dtype") or params.get("dtype")
    if dtype:
        bits.append(f"dtype **{dtype}**")
    models = params.get("model") or params.get("models")
    if models:
        bits.append("model " + ", ".join(f"`{m}`" for m in ([models] if isinstance(models, str) else models)))
    tasks = [f"{k} `{v}`" for k, v in params.items() if (k.endswith("tasks") or k == "split") and v not in (None, "")]
    if tasks:
        bits.append("; ".join(tasks))
    if "max_steps" in params:  # None: the benchmark's own limit (ScienceWorld's per task type)
        bits.append("each task type's step limit" if params["max_steps"] is None
                    else f"{params['max_steps']} steps at most")
    made = []
    if rendered.get("git_commit"):
        made.append(f"rendered at commit `{rendered['git_commit']}`")
    if rendered.get("finished"):
        made.append(f"on {rendered['finished'][:10]}")
    if rendered.get("wall_s") is not None:
        made.append(f"in {rendered['wall_s'] / 60:.1f} min")
    notebook = root / "notebooks" / f"{section}.ipynb"
    if notebook.exists():
        made.append(f"notebook [{notebook.name}](notebooks/{notebook.name})")
    lines = [" · ".join(bits)] if bits else ([SECTION_NOTES[section]] if section in SECTION_NOTES else [])
    if made:
        lines.append(" ".join(made[:-1]) + ("; " if len(made) > 1 else "") + made[-1] + ".")
    return [("  \n".join(lines)), ""] if lines else []


def set_index(root: Path) -> str:
    """The index page of one reports set (see the module docstring)."""
    manifest = _read_json(root / "manifest.json")
    listed = {(e["kind"], e["name"]) for entries in manifest.values() for e in entries}
    lines = [f"# Reports: {root.name}", "",
             "Each section is one notebook (or script): what it ran (profile, dtype, model, tasks) and the commit "
             "that rendered it, then its tables and figures in the order it made them. Numbers and parameters: "
             "[metrics.json](metrics.json); wall times, package versions and machine per notebook: "
             "[reproduce.json](reproduce.json).", ""]
    order = [s for s in SECTION_TITLES if s in manifest] + sorted(s for s in manifest if s not in SECTION_TITLES)
    for section in order:
        entries = manifest[section]
        if not entries:
            continue
        lines += [f"## {SECTION_TITLES.get(section, section)}", "", *_header(root, section)]
        for e in entries:
            lines += _entry(root, e)
    rest_tables = sorted(p for p in (root / "tables").glob("*.md") if ("table", p.stem) not in listed)
    rest_figures = sorted(p for p in (root / "figures").glob("*.png") if ("figure", p.stem) not in listed)
    if rest_tables or rest_figures:
        lines += ["## Not listed by any notebook", "",
                  "Saved into this set by a script, or by a render made before the index recorded which notebook "
                  "made each file and its caption ([reproduce.json](reproduce.json) says when each notebook was "
                  "rendered).", ""]
        lines += [x for p in rest_tables for x in _entry(root, {"kind": "table", "name": p.stem, "caption": None})]
        lines += [x for p in rest_figures for x in _entry(root, {"kind": "figure", "name": p.stem, "caption": None})]
    return "\n".join(lines) + "\n"


def _entry(root: Path, e: dict) -> list[str]:
    caption = [e["caption"].strip(), ""] if e.get("caption") else []
    if e["kind"] == "table":
        page = root / "tables" / f"{e['name']}.md"
        if not page.exists():
            return []
        text = page.read_text().rstrip()
        if text.startswith("# "):  # a page with its own title (write_table): one level under the section
            title, _, text = text.partition("\n")
            heading = "##" + title
        else:
            heading = f"### {e['name']}"
        return [heading, "", *caption, text, "", f"*Table `tables/{e['name']}.md`*", ""]
    if not (root / "figures" / f"{e['name']}.png").exists():
        return []
    return [f"![{e['name']}](figures/{e['name']}.png)", "", f"*Figure `{e['name']}`.* " + (e.get("caption") or ""), ""]


# what each set is, for the home index; a set not named here is listed with its own reproduce.json
SET_NOTES = {
    "full-bfloat16": "**Paper scale, committed.** All 134 valid_unseen tasks (140 valid_seen for AGMR's refinement), "
                     "agent v2, bfloat16: notebooks 04-06 rendered with `workbench reproduce --profile full --dtype "
                     "bfloat16` from the runs of `make eval-methods-v2`, and the agents' tables of `make "
                     "eval-agent-v2` / `make dtype-table`. The numbers the docs' results pages quote. Notebook 06 was "
                     "rendered at an earlier commit (its tables are listed without captions): rendering it again "
                     "recomputes its model studies (over half an hour here), whose caches (`runs/**/analysis/`) "
                     "are not committed.",
    "default": "**The default profile**: what `make reproduce` regenerates in about 70 minutes on 2 cores: a few tasks "
               "per notebook, float32. It shows that everything runs and what each notebook makes; its few-episode "
               "numbers are not results.",
    "smoke": "The notebooks' own parameters (what `make test` runs): one task, three steps.",
}


def _minutes(rendered: dict) -> str:
    return "" if rendered.get("wall_s") is None else f"{rendered['wall_s'] / 60:.1f}"


def write_home_index(reports: str | Path) -> Path:
    """``reports/index.md``: one paragraph per set (profile, notebooks, commit), linking to the set's index."""
    reports = Path(reports)
    sets = sorted(p for p in reports.iterdir() if p.is_dir() and (p / "index.md").exists())
    sets.sort(key=lambda p: (list(SET_NOTES).index(p.name) if p.name in SET_NOTES else len(SET_NOTES), p.name))
    lines = ["# Reports", "",
             "One folder per reproduction profile: rendering one never overwrites another "
             "(`make reproduce` writes `default/`; `make reproduce PROFILE=full DTYPE=bfloat16` writes "
             "`full-bfloat16/`).", ""]
    for s in sets:
        rendered = _read_json(s / "reproduce.json").get("notebooks", {})
        manifest = _read_json(s / "manifest.json")
        lines += [f"## [{s.name}/]({s.name}/index.md)", "", SET_NOTES.get(s.name, ""), ""]
        rows = [f"| [{n}]({s.name}/notebooks/{n}.ipynb) | {r.get('profile', '')} | {r.get('dtype', '')} | "
                f"{_minutes(r)} | `{r.get('git_commit', '')}` | "
                f"{len(manifest.get(n, []))} |" for n, r in sorted(rendered.items())]
        if rows:
            lines += ["| notebook | profile | dtype | minutes (its last render; runs found are read, not played) | "
                      "commit | tables + figures |",
                      "|---|---|---|--:|---|--:|", *rows, ""]
    path = reports / "index.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
