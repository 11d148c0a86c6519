"""The explorers in a real browser: JupyterLab on 127.0.0.1, the notebook run in its kernel, Debian's chromium
driven by Playwright. Each explorer must render, show its step, and follow the step slider.

The records come from policy replays of a real expert trajectory (the same records a run writes), so no model
is loaded in the kernel.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
NOTEBOOK = {
    "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": src} for src in (
        "from workbench.memory.trajectory import Trajectory, read_jsonl\n"
        "from workbench.viz import arbiter_explorer, proactive_explorer",
        'arbiter_explorer(read_jsonl("arbiter.jsonl", Trajectory))',
        'proactive_explorer(read_jsonl("proactive.jsonl", Trajectory))')],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving a folder with the explorers' notebook and two episodes' records; stopped by PID."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: `make install-browser` installs Debian's chromium")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "viz"))
    from test_memory_explorers import replayed

    from workbench.eval.memory_base import expert_trajectories_for
    from workbench.memory.trajectory import write_jsonl
    from workbench.methods.arbiter import ArbiterPolicy
    from workbench.methods.proactive import ProactivePolicy

    root = tmp_path_factory.mktemp("lab")
    expert = next(e for e in expert_trajectories_for("valid_unseen") if e.task_type == "clean")
    write_jsonl(root / "arbiter.jsonl", [replayed(ArbiterPolicy(budget=500), expert)[0]])
    write_jsonl(root / "proactive.jsonl", [replayed(ProactivePolicy(), expert)[0]])
    (root / "explorers.ipynb").write_text(json.dumps(NOTEBOOK))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(root / ".jupyter"), "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
    proc = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
                             "--ServerApp.disable_check_xsrf=True", "--allow-root"], cwd=root, env=env,
                            stdout=open(root / "lab.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}")
                time.sleep(1)
        yield f"http://127.0.0.1:{port}", token
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_explorers_render_and_follow_the_step_slider(lab):
    from playwright.sync_api import sync_playwright

    url, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/lab/tree/explorers.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            try:  # a fresh notebook asks which kernel to start
                page.get_by_role("button", name="Select", exact=True).click(timeout=30_000)
            except Exception:
                pass  # no dialog: the kernel was chosen from the notebook's metadata
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
            page.get_by_role("menuitem", name="Run", exact=True).click()  # the menu bar's Run menu
            page.get_by_text("Run All Cells", exact=True).click()
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
            page.screenshot(path=str(Path(os.environ.get("WIDGET_SCREENSHOT", "/tmp/explorers.png"))))
        finally:
            browser.close()
