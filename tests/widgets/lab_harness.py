"""A real JupyterLab for the browser tests: served on 127.0.0.1 from a folder, stopped by PID; a notebook opened
in Debian's chromium (driven by Playwright) and run."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def notebook(*sources: str) -> dict:
    """A notebook of code cells (python3 kernel)."""
    return {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": src}
                      for src in sources],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(root: Path, env: dict | None = None):
    """JupyterLab serving ``root``: yields (url, token); stopped by PID on exit."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: `make install-browser` installs Debian's chromium")
    port, token = _free_port(), secrets.token_hex(16)
    # no "get notified about Jupyter news?" toast over the widgets (and their screenshots)
    (root / ".jupyter" / "labconfig").mkdir(parents=True, exist_ok=True)
    (root / ".jupyter" / "labconfig" / "page_config.json").write_text(
        '{"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": true}}')
    env = {**os.environ, **(env or {}), "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
           "JUPYTER_RUNTIME_DIR": str(root / ".runtime")}
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


def open_and_run_all(page, url: str, token: str, name: str) -> None:
    """Open ``name`` in JupyterLab, wait for its kernel, and Run All Cells."""
    page.goto(f"{url}/lab/tree/{name}?token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    try:  # a fresh notebook asks which kernel to start
        page.get_by_role("button", name="Select", exact=True).click(timeout=30_000)
    except Exception:
        pass  # no dialog: the kernel was chosen from the notebook's metadata
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
    page.get_by_role("menuitem", name="Run", exact=True).click()  # the menu bar's Run menu
    page.get_by_text("Run All Cells", exact=True).click()
