"""The live widgets in a real browser: JupyterLab on 127.0.0.1, the default agent (SmolLM2-135M v2, bf16) loaded in
the kernel, Debian's chromium driven by Playwright.

* the player: Step three times, the step and the distribution change each time;
* the intervention panel: switch a shown item's band, the Δp shown is the library's own number (a kernel-side
  button re-scores the same edits through ``Session.rescore``);
* live AGMR: Play a refinement task the agent fails, one Attempt to its verdict (the model re-executes the task),
  Accept: the working copy holds the new version, the default base does not;
* the failure browser: pick an oscillating episode of the committed paper-scale Traj run, land on its first A,B,A,B
  step.

``WIDGET_SCREENSHOT_DIR`` (default: a temporary folder) receives a screenshot of each widget (docs/images/ holds
the committed ones).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab_harness import CHROMIUM, CHROMIUM_ARGS, notebook, open_and_run_all, serve  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.game]

ROOT = Path(__file__).resolve().parents[2]
TASK = "valid_unseen/pick_and_place_simple-Mug-None-Desk-308/trial_T20190908_125200_737896"
# the agent fails it, the offline refiner's first edit makes it succeed (the committed bf16 refinement: attempt 1)
AGMR_TASK = "valid_seen/pick_and_place_simple-Bowl-None-CoffeeTable-201/trial_T20190907_171639_045329"
RUN = ROOT / "runs/full-bfloat16/01_baselines/smollm2-135m-alfworld-v2/traj"

CELLS = (
    "from workbench.viz.live import agent_player, failure_browser, live_agmr",
    f'player = agent_player(task="{TASK}", memory="arbiter", options={{"budget": 500}}, dtype="bfloat16")\nplayer',
    f'agmr = live_agmr(copy="agmr-copy", task="{AGMR_TASK}", dtype="bfloat16")\nagmr',
    f'browser = failure_browser("{RUN}", model=player.session.lm)\nbrowser',
    # the library's own number for the panel's last edits, on a button (no cell typed in the test)
    "import ipywidgets as w\n"
    "out = w.HTML()\nout.add_class('check-out')\nbtn = w.Button(description='check against the library')\n"
    "def on(_):\n"
    "    r = player.last_rescore\n"
    "    lib = player.session.rescore(list(r.edits))\n"
    "    out.value = f'LIBRARY delta_p={lib.delta_p:+.6f} tv={lib.tv:.6f}'\n"
    "btn.on_click(on)\nw.VBox([btn, out])",
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not RUN.exists():
        pytest.fail(f"{RUN}: the committed paper-scale Traj run is missing from the checkout")
    root = tmp_path_factory.mktemp("live-lab")
    (root / "live.ipynb").write_text(json.dumps(notebook(*CELLS)))
    with serve(root, env={"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}) as (url, token):
        yield url, token, root


def _text(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def _wait_text(page, selector: str, needle: str, timeout: float = 60_000) -> None:
    page.wait_for_function("([sel, needle]) => { const el = document.querySelector(sel); "
                           "return el && el.innerText.includes(needle); }", arg=[selector, needle], timeout=timeout)


def _first_oscillation():
    from workbench.eval.failures import failure_findings
    from workbench.eval.run_folder import read_config, read_episodes

    limit = read_config(RUN).run.max_steps
    return next(f for t in read_episodes(RUN) for f in failure_findings(t, limit) if f.mode == "oscillation")


def test_the_live_widgets_in_jupyterlab(lab):
    from playwright.sync_api import expect, sync_playwright

    url, token, root = lab
    shots = Path(os.environ.get("WIDGET_SCREENSHOT_DIR") or root / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 2400})  # tall: whole widgets in a shot
            open_and_run_all(page, url, token, "live.ipynb")
            player = ".workbench-live-player"  # the first: the failure browser holds its own below
            try:
                _wait_text(page, f"{player} .live-status", "step 0 of", timeout=240_000)
            except Exception:
                page.screenshot(path=str(shots / "live-failed.png"))
                raise AssertionError("the player did not load; the notebook's outputs: "
                                     + page.inner_text(".jp-Notebook")[-3000:]) from None
            box = page.locator(player).first

            # -- Step three times: the step and the distribution change each time
            step_btn = box.get_by_role("button", name="Step", exact=True)
            dist = _text(page, f"{player} .live-dist")
            for k in range(1, 4):
                step_btn.click()
                _wait_text(page, f"{player} .live-status", f"step {k} of", timeout=60_000)
                _wait_text(page, f"{player} .live-dist", f"candidates of step {k}", timeout=60_000)
                expect(step_btn).to_be_enabled(timeout=60_000)  # the action is over: the panel is this state's
                now = _text(page, f"{player} .live-dist")
                assert now != dist  # another state, another distribution
                dist = now
            box.screenshot(path=str(shots / "live-player.png"))

            # -- switch a shown item's band: the Δp shown is the library's number
            rows = box.locator("table.live-memory tr")
            item, shown = None, None
            for i in range(1, rows.count()):
                cells = rows.nth(i).locator("td")
                if cells.nth(3).inner_text().strip() in ("F", "A"):
                    item, shown = cells.nth(0).inner_text().strip(), cells.nth(3).inner_text().strip()
                    break
            assert item is not None, "no shown item in MemArbiter's block"
            control = box.locator(".live-item").filter(has_text=item).first
            control.locator("select").select_option(label="hidden")
            _wait_text(page, f"{player} .live-rescore", "Δp", timeout=60_000)
            line = _text(page, f"{player} .live-rescore-line")
            assert f"SetBand(item='{item}', band='H')" in line
            shown_dp = re.search(r"= ([+-]\d+\.\d{6})", line).group(1)
            page.get_by_role("button", name="check against the library").click()
            _wait_text(page, ".check-out", "LIBRARY", timeout=60_000)
            lib_dp = re.search(r"delta_p=([+-]\d+\.\d{6})", _text(page, ".check-out")).group(1)
            assert shown_dp == lib_dp and float(shown_dp) != 0.0  # an item hidden: p moves, by the library's number
            box.locator(".live-intervene").screenshot(path=str(shots / "live-intervention.png"))

            # -- live AGMR: play, one attempt to its verdict, accept
            agmr = page.locator(".workbench-live-agmr").first
            agmr.get_by_role("button", name="Play", exact=True).click()
            _wait_text(page, ".workbench-live-agmr", "first execution", timeout=240_000)
            assert "failure" in agmr.inner_text()
            agmr.get_by_role("button", name="Attempt", exact=True).click()
            _wait_text(page, ".workbench-live-agmr .agmr-status", "verified", timeout=240_000)
            agmr.get_by_role("button", name="Accept", exact=True).click()
            _wait_text(page, ".workbench-live-agmr .agmr-status", "accepted", timeout=60_000)
            status = _text(page, ".workbench-live-agmr .agmr-status")
            agmr.screenshot(path=str(shots / "live-agmr.png"))

            # -- the failure browser: an oscillating episode opens at its first A,B,A,B step
            f = _first_oscillation()
            fb = page.locator(".workbench-failure-browser").first
            fb.locator("select").first.select_option(label="oscillation")
            fb.locator(".failure-episode").first.click()
            _wait_text(page, ".workbench-failure-browser .live-status", f"step {f.step} of", timeout=240_000)
            _wait_text(page, ".workbench-failure-browser .failure-note", "opened at step", timeout=120_000)
            assert f.task_id in _text(page, ".workbench-failure-browser .live-status")
            fb.screenshot(path=str(shots / "live-failure-browser.png"))
        finally:
            browser.close()
    m = re.search(r"accepted: (\S+) is version (\d+)", status)
    assert m, status
    (root / "accepted.json").write_text(json.dumps({"entry": m.group(1), "version": int(m.group(2))}))


def test_the_accept_landed_in_the_working_copy_only(lab):
    """After the browser test: the copy holds the accepted version with `workbench refine`'s provenance; the
    default base (what the copy was cloned from) does not."""
    from workbench.envs.memory_base import default_memory_base
    from workbench.memory.base import MemoryBase
    from workbench.methods.agmr.refine_folder import load_log

    root = lab[2]
    got = json.loads((root / "accepted.json").read_text())
    copy = MemoryBase(root / "agmr-copy")
    assert copy.get(got["entry"]).version == got["version"]
    assert default_memory_base().get(got["entry"]).version == got["version"] - 1
    last = copy.history(got["entry"])[-1]
    assert last.provenance["method"] == "agmr" and last.provenance["refinement_task"] == AGMR_TASK
    assert [r.outcome for r in load_log(root / "agmr-copy")] == ["committed"]
