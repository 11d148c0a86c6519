"""The render watchdog: a stalled render is killed with its kernel and restarted; computing cells and computing
workers are never taken for a stall; a failing cell is a clear error (real papermill runs of tiny notebooks)."""

import json
import time

import nbformat
import psutil
import pytest

from workbench.reporting.watchdog import NotebookError, NotebookStalled, run_notebook


def notebook(path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("marker = ''", metadata={"tags": ["parameters"]}),
                *[nbformat.v4.new_code_cell(c) for c in cells]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_a_stalled_render_is_killed_restarted_and_reported(tmp_path):
    """A cell that sleeps uses no CPU anywhere in the tree, like papermill's lost-reply hang: each try is killed
    after the stall window, its kernel with it, and the error says it stalled and where the log is."""
    src = notebook(tmp_path / "hang.ipynb",
                   "import os, pathlib\n"
                   "with open(pathlib.Path(marker), 'a') as fh: fh.write(f'{os.getpid()}\\n')",
                   "import time\ntime.sleep(600)")
    pids, log = tmp_path / "kernels.txt", tmp_path / "logs" / "hang.log"
    t0 = time.monotonic()
    with pytest.raises(NotebookStalled, match=r"hang.ipynb: the render stalled 2 times") as err:
        run_notebook(src, tmp_path / "out" / "hang.ipynb", {"marker": str(pids)}, cwd=tmp_path, log=log,
                     stall_s=6, retries=1)
    assert time.monotonic() - t0 < 120
    assert str(log) in str(err.value)
    kernels = [int(x) for x in pids.read_text().split()]
    assert len(kernels) == 2  # started again once
    assert not any(psutil.pid_exists(k) and psutil.Process(k).status() != psutil.STATUS_ZOMBIE for k in kernels)
    assert log.read_text().count("watchdog:") == 2


def test_computing_cells_and_workers_are_not_a_stall(tmp_path):
    """The kernel busy for longer than the window, then the kernel idle while a child process it started computes
    for longer than the window: both finish, with no restart."""
    src = notebook(tmp_path / "busy.ipynb",
                   "import time\nt = time.time()\nwhile time.time() - t < 10: pass",
                   "import subprocess, sys\n"
                   "subprocess.run([sys.executable, '-c', 'import time\\nt = time.time()\\n"
                   "while time.time() - t < 10: pass'], check=True)\n"
                   "print('done')")
    out = tmp_path / "out" / "busy.ipynb"
    done = run_notebook(src, out, {}, cwd=tmp_path, log=tmp_path / "busy.log", stall_s=6, retries=0)
    assert done.restarts == 0 and done.wall_s >= 20
    cells = json.loads(out.read_text())["cells"]
    assert any("done" in "".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_the_cpu_seconds_of_the_whole_tree_are_counted(tmp_path):
    """The kernel and a process it starts each burn 3 CPU seconds (however busy the machine, which only stretches
    the wall time): the render's cpu_s holds both."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3: pass"
    src = notebook(tmp_path / "cpu.ipynb", burn,
                   f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}], check=True)")
    done = run_notebook(src, tmp_path / "out" / "cpu.ipynb", {}, cwd=tmp_path, log=tmp_path / "cpu.log", stall_s=0)
    assert 6 <= done.cpu_s < 6 + 30  # + papermill's and the kernel's start-up


def test_a_failing_cell_is_an_error_with_its_traceback(tmp_path):
    src = notebook(tmp_path / "bad.ipynb", "raise ValueError('runs_dir has no folder named full')")
    with pytest.raises(NotebookError, match="bad.ipynb: the render failed") as err:
        run_notebook(src, tmp_path / "out" / "bad.ipynb", {}, cwd=tmp_path, log=tmp_path / "bad.log", stall_s=60)
    assert not isinstance(err.value, NotebookStalled)
    assert "runs_dir has no folder named full" in str(err.value)
    assert (tmp_path / "out" / "bad.ipynb").exists()  # the executed copy shows the failing cell
