"""Names that become file and folder names (a run id, a mode, a scenario's name in a run folder):
one path component of letters, digits, `.`, `_` and `-`, so that nothing taken from a command line
or a config file can write outside the results folder (`--run-id ../../etc`, a mode `../x`)."""

from __future__ import annotations

import re

SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def name_problem(text: str) -> str | None:
    """Why `text` cannot name a file or folder here (None when it can)."""
    if not SAFE.fullmatch(text) or text in (".", ".."):
        return (f"{text!r} is not a plain name: use letters, digits, '.', '_' and '-' (starting with a letter or "
                "digit, at most 128), no '/' nor '..'")
    return None


def slug(text: str) -> str:
    """`text` made into a plain name (a scenario's name in a run folder's default name)."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")[:128]
    return out or "run"
