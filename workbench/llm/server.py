"""A llama.cpp server (llama-cpp-python's OpenAI-compatible one) started and stopped by the code that needs it.

``with LlamaServer("smollm2-135m-instruct") as srv:`` serves the model's GGUF (the packaged SmolLM2, or any ``.gguf``
path) on 127.0.0.1 at a free port, waits until ``/v1/models`` answers, and stops the process by its PID on exit
(SIGTERM, then SIGKILL after a grace period); an interpreter that exits first stops it too (``atexit``, and on Linux
the kernel's parent-death signal when the interpreter is killed). Nothing is downloaded. The backend ``llama-server`` (:func:`workbench.llm.get_backend`) owns one of these, so a run, a sweep or
a notebook that names it gets a server for its lifetime and never a stale URL in its configuration.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from workbench.llm.errors import LLMConfigError, LLMTransportError

__all__ = ["LlamaServer", "gguf_of", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gguf_of(model: str) -> Path:
    """The GGUF file of ``model``: a path to a ``.gguf``, or a registered model shipped as a GGUF in a PyPI package.

    Raises:
        LLMConfigError: neither (the message says what would do).
    """
    if model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise LLMConfigError(f"llama-server: no GGUF file at {path}")
        return path
    from workbench.models.registry import get_model_spec, packaged_gguf_path

    spec = get_model_spec(model)
    if spec is None or spec.gguf is None:
        raise LLMConfigError(f"llama-server: model '{model}' has no GGUF; name a .gguf file (model=/path/to/x.gguf) "
                             "or a registered model shipped as one (smollm2-135m-instruct)")
    try:
        return packaged_gguf_path(*spec.gguf)
    except FileNotFoundError as e:
        raise LLMConfigError(f"llama-server: {e}") from None


def _die_with_parent():
    """A ``preexec_fn`` that makes the server get SIGTERM when this process dies, however it dies (``atexit`` does
    not run on SIGKILL or an unhandled SIGTERM). Linux only, and only from the main thread: the signal follows the
    thread that started the child, and a worker thread that ends would take the server with it."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return preexec


class LlamaServer:
    """One llama.cpp server process on 127.0.0.1.

    Args:
        model: a registered model with a packaged GGUF, or a ``.gguf`` path.
        n_ctx: context length the server allocates (prompt + reply).
        n_threads: CPU threads of the server (1 beside an agent on a 2-core machine).
        port: the port (default: a free one).
        log: the server's output file (default: a temporary file, kept for a post-mortem).
        start_timeout_s: how long to wait for it to answer.
    """

    def __init__(self, model: str = "smollm2-135m-instruct", *, n_ctx: int = 8192, n_threads: int = 1,
                 port: int | None = None, log: str | os.PathLike | None = None,
                 start_timeout_s: float = 180.0) -> None:
        self.model, self.n_ctx, self.n_threads = model, int(n_ctx), int(n_threads)
        self.gguf = gguf_of(model)
        self.port = port or free_port()
        self.log = Path(log) if log else Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.start_timeout_s = float(start_timeout_s)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death(self) -> str | None:
        """Why the server is gone (exit status or signal, and its log's tail), or None while it runs."""
        if self.proc is None or self.proc.poll() is None:
            return None
        rc = self.proc.returncode
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with {rc}"
        tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
        return f"the llama.cpp server (pid {self.proc.pid}) {how}; its log ({self.log}) ends:\n{tail}"

    def start(self) -> LlamaServer:
        """Start the process and wait until it answers (idempotent while it runs)."""
        if self.alive:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise LLMConfigError("llama-server needs llama-cpp-python's server: `make install-server` (or pip install "
                                 "-e '.[server]'; compiles llama.cpp, ~5 min once)")
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads),
               "--n_threads_batch", str(self.n_threads)]
        with self.log.open("w") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent())
        atexit.register(self.stop)
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            if not self.alive:
                raise LLMTransportError(f"llama-server did not start: {self.death()}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LLMTransportError(f"llama-server not answering after {self.start_timeout_s:.0f} s; its log: "
                                        f"{self.log}")
            time.sleep(0.25)

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the process by its PID: SIGTERM, then SIGKILL after ``grace_s`` (no-op when it is not running)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace_s)
            except ProcessLookupError:
                pass
        self.proc = proc  # keep the exit status for death()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LlamaServer(model={self.model!r}, url={self.url!r}, pid={self.pid})"


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise LLMConfigError(f"llama-server: expected true or false, got {value!r}")


def served_backend(model: str = "smollm2-135m-instruct", constrain: object = True, n_ctx: object = 8192,
                   n_threads: object = 1, timeout_s: object = 120.0, max_retries: object = 1,
                   log: str | None = None):
    """An OpenAI backend over its own :class:`LlamaServer`, started on the first request and stopped with the process
    (or by ``backend.close()``). ``constrain``: send each stage's schema (tool stages: the schema of a list of calls)
    as the ``response_format``, which llama.cpp turns into a grammar; false sends no schema (the prompt still
    describes it) -- the unconstrained comparison.

    A server that dies mid-run is not restarted: the next request fails with a typed transport error, the run stops
    and keeps what it finished, and resuming it starts a fresh server.
    """
    from workbench.llm.openai_client import OpenAIBackend, OpenAIConfig

    server = LlamaServer(model, n_ctx=int(n_ctx), n_threads=int(n_threads), log=log)  # type: ignore[arg-type]

    class ServedBackend(OpenAIBackend):
        name = "llama-server"

        def __init__(self) -> None:
            super().__init__(OpenAIConfig(base_url=server.url, model=model, api_key_env=None,
                                          timeout_s=float(timeout_s), max_retries=int(max_retries),  # type: ignore[arg-type]
                                          backoff_s=0.5, tool_mode="json",
                                          response_format="json_object" if _flag(constrain) else "none"))
            self.server = server
            self._started = False

        def _post(self, body: dict) -> dict:
            if not self._started:  # once: a server that died later is not restarted (see above)
                self.server.start()
                self._started = True
            try:
                return super()._post(body)
            except LLMTransportError as e:
                why = self.server.death()
                if why is not None:
                    raise LLMTransportError(f"{e}; {why}", status=e.status, attempts=e.attempts) from None
                raise

        def close(self) -> None:
            self.server.stop()

        def cache_identity(self) -> dict:
            return {**super().cache_identity(), "gguf": self.server.gguf.name, "n_ctx": self.server.n_ctx}

        def __repr__(self) -> str:
            return f"ServedBackend({self.server!r})"

    return ServedBackend()
