"""The explorers in a real browser: JupyterLab on 127.0.0.1, the notebook run in its kernel, Debian's chromium
driven by Playwright. Each explorer must render, show its step, and follow the step slider.

The records come from policy replays of a real expert trajectory (the same records a run writes), so no model
is loaded in the kernel; AGMR's explorer reads a refined base whose executions were scripted, and accepts an edit
into a copy (checked on disk afterwards).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab_harness import CHROMIUM, CHROMIUM_ARGS, open_and_run_all, serve  # noqa: E402

NOTEBOOK = {
    "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": src} for src in (
        "from workbench.memory.trajectory import Trajectory, read_jsonl\n"
        "from workbench.viz import arbiter_explorer, proactive_explorer",
        'arbiter_explorer(read_jsonl("arbiter.jsonl", Trajectory))',
        'proactive_explorer(read_jsonl("proactive.jsonl", Trajectory))',
        "from workbench.methods.agmr.recording import load_utilization\nfrom workbench.viz import utilization_explorer\n"
        'utilization_explorer(load_utilization("utilization.jsonl"))',
        "from workbench.methods.agmr import recorded_verifier\nfrom workbench.viz import refinement_explorer\n"
        'refinement_explorer("refined", verify=recorded_verifier("refined"), copy="refined-copy")')],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def _refined(root: Path) -> None:
    """A refined base (one committed failure edit, one rolled-back simplification) and a C record for 03's explorer,
    as `workbench refine` and notebook 03 leave them (scripted executions: no model in the kernel)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods" / "agmr"))
    from agmr_builders import RIGHT, TASK, WRONG, ScriptedRefiner, make_base

    from workbench.envs.base import Task
    from workbench.memory.trajectory import append_jsonl
    from workbench.methods.agmr.recording import save_utilization
    from workbench.methods.agmr.refine_config import RefineConfig
    from workbench.methods.agmr.refine_folder import prepare, refine_paths

    make_base(root)
    base, _ = prepare(root / "refined", RefineConfig(heads=((0, 0),), retriever="bm25", source=str(root / "source")))
    _, log_path, exec_path = refine_paths(root / "refined")
    other = Task("valid_seen/pick_and_place_simple-Apple-None-Fridge-1/trial_2", "valid_seen", "pick", "/none")
    for task, script in ((TASK, [(False, WRONG, None), (True, RIGHT, None)]),
                         (other, [(True, RIGHT, None), (False, WRONG, None)])):
        r = ScriptedRefiner(base, script)
        r.on_execution = lambda e: append_jsonl(exec_path, e)
        append_jsonl(log_path, r.refine_task(task, "put a apple in fridge."))
    from workbench.methods.agmr.refine_folder import load_executions

    first = load_executions(root / "refined")[0].utilization
    save_utilization(root / "utilization.jsonl", [first.model_copy(update={
        "segment_texts": [f"> action {k}" for k in range(len(first.segment_texts))], "critical_step": 1,
        "ideal_segment": 1})])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a folder with the explorers' notebook and two episodes' records; stopped by PID."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
    from test_memory_explorers import replayed

    from workbench.envs.memory_base import expert_trajectories_for
    from workbench.memory.trajectory import write_jsonl
    from workbench.methods.arbiter import ArbiterPolicy
    from workbench.methods.proactive import ProactivePolicy

    root = tmp_path_factory.mktemp("lab")
    expert = next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")
    write_jsonl(root / "arbiter.jsonl", [replayed(ArbiterPolicy(budget=500), expert)[0]])
    write_jsonl(root / "proactive.jsonl", [replayed(ProactivePolicy(), expert)[0]])
    _refined(root)
    (root / "explorers.ipynb").write_text(json.dumps(NOTEBOOK))
    with serve(root) as (url, token):
        yield url, token, str(root)


def test_explorers_render_and_follow_their_controls(lab):
    from playwright.sync_api import sync_playwright

    url, token, _ = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_and_run_all(page, url, token, "explorers.ipynb")
            try:
                arbiter = page.wait_for_selector(".workbench-arbiter-explorer", timeout=120_000)
            except Exception:
                page.screenshot(path="/tmp/explorers-failed.png")
                raise AssertionError("no explorer rendered; the notebook's outputs: "
                                     + page.inner_text(".jp-Notebook")[-3000:]) from None
            block = arbiter.wait_for_selector("pre.arbiter-block")
            assert block.inner_text().startswith("Working memory:")
            assert "step 0" in arbiter.inner_text()
            readout = arbiter.wait_for_selector(".widget-readout")
            readout.click()
            page.keyboard.press("Control+A")
            page.keyboard.type("3")
            page.keyboard.press("Enter")
            page.wait_for_function("el => el.innerText.includes('step 3')", arg=arbiter, timeout=30_000)
            proactive = page.wait_for_selector(".workbench-proactive-explorer", timeout=60_000)
            assert "tool calls:" in proactive.inner_text() and "bank:" in proactive.inner_text()
            # 03's explorer: C of a task, and the step slider moves the table.
            util = page.wait_for_selector(".workbench-utilization-explorer", timeout=60_000)
            assert "u1" in util.inner_text() and util.wait_for_selector("img", timeout=30_000)
            slider = util.wait_for_selector(".widget-readout")
            slider.click()
            page.keyboard.press("Control+A")
            page.keyboard.type("2")
            page.keyboard.press("Enter")
            page.wait_for_function("el => el.innerText.includes('u2</b>') || el.innerText.includes('u2 (')",
                                   arg=util, timeout=30_000)
            # AGMR's explorer: diagnosis and diff, the task control changes the view, verify then accept a copy.
            agmr = page.wait_for_selector(".workbench-agmr-explorer", timeout=60_000)
            assert "attended_but_wrong" in agmr.inner_text() and "+thought: Do exactly" in agmr.inner_text()
            assert agmr.wait_for_selector("img", timeout=30_000)  # C with the diagnosis, as a picture
            box = page.locator(".workbench-agmr-explorer")
            box.get_by_role("button", name="Run verification").click()
            page.wait_for_function("el => el.innerText.includes('verification valid_seen/apple/t1#1: success')",
                                   arg=agmr, timeout=30_000)
            box.get_by_role("button", name="Accept").click()
            page.wait_for_function("el => el.innerText.includes('accepted: valid_train/tomato/t1 is version 2')",
                                   arg=agmr, timeout=30_000)
            box.locator("select").first.select_option(index=1)  # the other task: a rolled-back simplification
            page.wait_for_function("el => el.innerText.includes('outcome rolled_back')", arg=agmr, timeout=30_000)
            page.screenshot(path=str(Path(os.environ.get("WIDGET_SCREENSHOT", "/tmp/explorers.png"))))
        finally:
            browser.close()


def test_the_accepted_edit_landed_in_the_copy_only(lab, tmp_path_factory):
    """Runs after the browser test: the explorer wrote a new version into the copy, the refined base is as it was."""
    from workbench.memory.base import MemoryBase

    root = Path(lab[2])
    assert MemoryBase(root / "refined-copy").get("valid_train/tomato/t1").version == 2
    assert MemoryBase(root / "refined").get("valid_train/tomato/t1").version == 1
