"""The console every command prints to."""

from __future__ import annotations

import sys

from rich.console import Console

# Wide enough for the comparison table when stdout is a file or a pipe (rich assumes 80 columns).
WIDTH_OFF_TTY = 200


def new_console() -> Console:
    """The terminal's width on a terminal, WIDTH_OFF_TTY off one."""
    return Console(width=None if sys.stdout.isatty() else WIDTH_OFF_TTY)
