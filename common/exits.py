"""The one exit-code table of every command (DESIGN.md, "Exit codes"), and one-line errors."""

from __future__ import annotations

import os
import sys

OK = 0            # passed
GATE_FAILED = 1   # a check failed: a mode's errors, an SLO, a regression, drift, an unhealthy fleet
BAD_INPUT = 2     # a file, a flag or a server's reply we were given: one line naming it
INCOMPLETE = 3    # the run could not complete (a crash, a fleet that would not start)
INTERRUPTED = 130 # SIGINT or SIGTERM


def print_error(prog: str, message: str) -> None:
    """`prog: error: ...` on stderr, one line per line of `message` (a file with three problems
    gets three lines, each naming its key); a character that is not printable (one a user gave:
    a tab, a form feed, U+2028) is shown as its escape, so it can neither break a line nor hide."""
    for line in (line for line in str(message).split("\n") if line.strip()):   # a library's trailing newline
        print(f"{prog}: error: {printable(line)}", file=sys.stderr, flush=True)


def one_line(exc: BaseException) -> str:
    """A library's exception text as one line (pyarrow's Thrift errors end with a newline, others
    hold several): its words joined by single spaces."""
    return " ".join(str(exc).split())


def printable(text: str) -> str:
    """`text` with each character that is not printable written as its Python escape."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def os_error_text(exc: OSError) -> str:
    """`[Errno 28] No space left on device`: the OS's own words, not a library's wrapping of them
    (pyarrow says `[Errno 28] Error writing bytes to file. Detail: [errno 28] No space ...`)."""
    return f"[Errno {exc.errno}] {os.strerror(exc.errno)}" if exc.errno else str(exc)
