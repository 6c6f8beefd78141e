"""The console every command prints to, and the lines it says about it."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from common.exits import os_error_text, print_error

# Wide enough for the comparison table when stdout is a file or a pipe (rich assumes 80 columns).
WIDTH_OFF_TTY = 200


def new_console() -> Console:
    """The terminal's width on a terminal, WIDTH_OFF_TTY off one."""
    return Console(width=None if sys.stdout.isatty() else WIDTH_OFF_TTY)


def say_summaries_not_written(prog: str, run_dir: Path, exc: OSError) -> None:
    """A run's analysis met a full disk: one line (the records are as they were; each summary file
    is whole, the new one or the one before)."""
    print_error(prog, f"could not write the run's summaries to {run_dir}: {os_error_text(exc)}")
