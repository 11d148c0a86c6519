"""The ``workbench`` parser (one subcommand per module of this package) and ``main``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from workbench import __version__
from workbench.cli import (
    dagger,
    experts,
    heads,
    listing,
    llm_stages,
    memory,
    merge_runs,
    partings,
    proactive_sft,
    refine,
    reproduce,
    run,
    sweep,
    utilization,
)
from workbench.envs.base import SimulatorDiedError
from workbench.eval.executor import JobError
from workbench.eval.sweep_status import ConcurrentSweepError
from workbench.files import FormatError
from workbench.llm.errors import LLMError
from workbench.locks import FolderBusyError

__all__ = ["build_parser", "main", "COMMANDS"]

DESCRIPTION = """The command line over the workbench library: play agents on ALFWorld and ScienceWorld (run, sweep),
refine and audit memory bases (refine, memory), study retrieval heads (heads, utilization), re-score where a method
parts from ReAct (partings), build training data (experts, dagger, proactive-sft), merge runs and render the reports
(merge-runs, reproduce), and list what they accept (list). Every --out is a folder (partings: a JSON file);
`workbench COMMAND --help` for each one's options."""

# the order `workbench --help` lists them in
COMMANDS = (run, sweep, refine, memory, llm_stages, proactive_sft, dagger, merge_runs, experts, reproduce, heads,
            utilization, partings, listing)
# errors a user can fix from the message alone: one line on stderr and exit status 2, no traceback
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, JobError, ConcurrentSweepError, FormatError,
               FolderBusyError, OSError,  # OSError: a full disk, a permission, a path that is a file: not bugs
               LLMError,  # an endpoint that is down or misconfigured: the message names it (and --resume continues)
               SimulatorDiedError)  # a benchmark's simulator killed twice under one episode (--resume continues)


def build_parser() -> argparse.ArgumentParser:
    """The ``workbench`` parser; the closed sets among its options are read from the registries now.

    Returns:
        The parser; a parsed command's ``fn`` runs it.
    """
    p = argparse.ArgumentParser(prog="workbench", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of any error (a bug's, and a user "
                   "error's too); without it an error is one line on stderr")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


class _Stderr(logging.Handler):
    """Writes to the stderr of the moment (a caller may have redirected it since the handler was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


_NOTES = _Stderr(logging.WARNING)


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _use_device(args) -> None:
    """``--device`` and ``--gpus-per-worker`` become this process's defaults (inherited by its workers); a device
    this machine cannot use stops the command here, before anything is loaded or written."""
    from workbench.eval.executor import GPUS_ENV
    from workbench.models.device import set_default_device

    if getattr(args, "device", None):
        set_default_device(args.device)
    if getattr(args, "forward", None):
        from workbench.models.scoring import set_default_forward

        set_default_forward(args.forward)
    gpus = getattr(args, "gpus_per_worker", None)
    if gpus is not None:
        if gpus < 0:
            raise ValueError(f"--gpus-per-worker {gpus}: expected 0 or more")
        if gpus and getattr(args, "workers", None) is None and getattr(args, "ray_address", None) is None:
            raise ValueError("--gpus-per-worker reserves GPUs for Ray workers: add --workers N or --ray-address (in "
                             "this process, --device cuda runs the model on a GPU)")
        os.environ[GPUS_ENV] = str(gpus)


def main(argv: list[str] | None = None) -> int:
    """Run one ``workbench`` command.

    SIGTERM stops a command as Ctrl-C does (its ``finally`` blocks run: Ray workers shut down, a sweep records
    that it was interrupted; every batch resumes), and so does SIGINT even when a script started the command in
    the background (a non-interactive shell starts background jobs with SIGINT ignored, so a plain ``kill -INT``
    would do nothing).

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0; 2 after a one-line error on stderr (bad input: the message names the file, field and
        fix); 3 after a one-line report of a bug (``--debug`` shows its traceback). Argparse errors (a bad choice,
        ``--out`` on a file) exit with status 2 from the parser itself.
    """
    args = build_parser().parse_args(argv)
    _NOTES.setFormatter(logging.Formatter(f"workbench {args.command}: note: %(message)s"))
    wb = logging.getLogger("workbench")
    if _NOTES not in wb.handlers:  # the library's notes (a torn line cut, a stale lock taken over) on stderr
        wb.addHandler(_NOTES)
        wb.setLevel(logging.INFO if wb.level == logging.NOTSET else wb.level)
    handlers = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers can only be set there
        handlers = {signal.SIGTERM: signal.signal(signal.SIGTERM, _stop)}
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    saved_env = {k: os.environ.get(k) for k in ("WORKBENCH_DEVICE", "WORKBENCH_GPUS_PER_WORKER")}
    try:
        _use_device(args)
        return args.fn(args)
    except BrokenPipeError:  # `workbench list grids | head -1`: the reader left, which is no error of the command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush does not raise again
        return 1
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        if args.debug:
            raise
        stop = e.__context__
        while stop is not None and not isinstance(stop, KeyboardInterrupt):
            stop = stop.__context__
        if stop is not None:  # raised while a Ctrl-C / SIGTERM unwound (a half-started JVM's gateway): a stop
            print(f"workbench {args.command}: stopped ({str(stop) or 'interrupt'}); while stopping: "
                  f"{type(e).__name__}: {e}", file=sys.stderr)
            raise stop from None
        if isinstance(e, USER_ERRORS):
            print(f"workbench {args.command}: error: {e}", file=sys.stderr)
            return 2
        # a bug: one line, and where to see the rest
        print(f"workbench {args.command}: internal error: {type(e).__name__}: {e} (a bug: rerun with "
              f"`workbench --debug {args.command} ...` for the traceback, and report it)", file=sys.stderr)
        return 3
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)
        for key, value in saved_env.items():  # a command's defaults end with it (main called in-process)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
