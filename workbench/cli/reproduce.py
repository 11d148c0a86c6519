"""``workbench reproduce``: render the report notebooks with papermill under a reproduction profile."""

from __future__ import annotations

import argparse

from workbench.cli._options import add_device, add_dtype, add_out
from workbench.reporting.profiles import PROFILES
from workbench.reporting.reproduce import reproduce

__all__ = ["add_parser", "cmd_reproduce"]

# what the README measured for each profile; a profile added to PROFILES is offered without one
_PROFILE_NOTES = {"smoke": "the notebooks' own parameters (what `make test` runs)",
                  "default": "about 70 min on 2 cores", "full": "paper scale: all 134 valid_unseen tasks"}


def cmd_reproduce(a: argparse.Namespace) -> int:
    """Render ``a.notebooks`` (default: all of the profile's) into ``a.reports``.

    Args:
        a: the parsed ``workbench reproduce`` options.

    Returns:
        0; errors are raised (``main`` turns them into exit status 2).
    """
    reproduce(profile=a.profile, reports=a.reports, notebooks=a.notebooks, dtype=a.dtype,
              stall_minutes=a.stall_minutes)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``workbench reproduce``."""
    rp = sub.add_parser("reproduce", help="run the report notebooks with papermill into reports/")
    rp.add_argument("--profile", default="default", choices=list(PROFILES),
                    help="; ".join(f"{p}: {_PROFILE_NOTES[p]}" if p in _PROFILE_NOTES else p for p in PROFILES)
                    + " (default: default)")
    add_out(rp, "the rendered notebooks (OUT/notebooks/) and reproduce.json", "--reports", default="reports")
    rp.add_argument("--notebooks", nargs="*", metavar="NOTEBOOK",
                    choices=sorted({name for notebooks in PROFILES.values() for name in notebooks}),
                    help="only these (default: every notebook of the profile)")
    add_dtype(rp, default=None, help="every notebook's model dtype (none given: the notebooks' own, float32)")
    add_device(rp)
    rp.add_argument("--stall-minutes", type=float, default=20.0,
                    help="restart a render whose papermill, kernel and workers used no CPU this long (papermill's "
                         "lost-reply hang; every run resumes); 0: never (default: 20)")
    rp.set_defaults(fn=cmd_reproduce)
