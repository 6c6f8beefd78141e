"""Reading a user's text files (trace imports, prompts, documents, length lists) as UTF-8, with
one line naming the place of a byte that is not."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

from common.validation import not_utf8
from scenarios import ScenarioError


def read_utf8(path: str | Path) -> str:
    """The file as UTF-8 text (a leading BOM, as spreadsheet exports write, is dropped). A byte
    that is not UTF-8 raises ScenarioError naming the file, line and column."""
    raw = Path(path).read_bytes()
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:   # its offsets count from after the BOM: the file's from its start
        raise ScenarioError(not_utf8(raw, exc, str(path), offset=bom)) from None


def read_lengths(path: str | Path) -> list[int]:
    """Token counts, one positive integer per line (blank lines skipped)."""
    out = []
    for n, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = int(line.strip())
        except ValueError:
            value = 0
        if value < 1:
            raise ScenarioError(f"{path}: line {n}: expected a positive integer (a length in tokens), "
                                f"got {line.strip()!r}")
        out.append(value)
    if not out:
        raise ScenarioError(f"{path}: no lengths in the file (one positive integer per line)")
    return out


def jsonl_objects(path: str | Path, bad: Callable[[int, str], None] | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSONL file; a line that is not a JSON
    object raises ScenarioError naming it (`file:line: ...`), or, given `bad`, is handed to it
    (line number, what is wrong) and skipped, so every problem can be said at once."""
    for n, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            problem = f"not valid JSON: {exc}"
        else:
            if isinstance(obj, dict):
                yield n, obj
                continue
            problem = f"expected a JSON object, got {line.strip()[:60]!r}"
        if bad is None:
            raise ScenarioError(f"{path}:{n}: {problem}")
        bad(n, problem)
