"""The console every command prints to, and the lines it says about it."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown

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


def say_written(console: Console, label: str, first: Path, *others: tuple[str, Path],
                took_s: float | None = None) -> None:
    """`label: FIRST  (what: PATH; ...)` naming only the files and folders that exist, so that a
    command that failed half way never points at a report it did not write; when none exists,
    one line saying so."""
    there = [(what, path) for what, path in others if path.exists()]
    tail = f" in {took_s:.1f} s" if took_s is not None else ""
    if not first.exists():
        head = ", ".join(f"{what} {path}" for what, path in there)
        console.print(f"{label}: no report was written" + (f" ({head})" if head else "") + tail, soft_wrap=True)
        return
    rest = f"  ({'; '.join(f'{what}: {path}' for what, path in there)})" if there else ""
    console.print(f"{label}: {first}{rest}{tail}", soft_wrap=True)


def show_markdown(console: Console, text: str) -> None:
    """A report.md on the console as a person reads it (headings, bold, tables drawn), not as
    Markdown source: the file keeps the source."""
    console.print(Markdown(text))
