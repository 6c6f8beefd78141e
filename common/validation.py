"""Validation problems of a user's file (scenario or fleet TOML) in the file's own words.

pydantic names its internals in an error's location (the tag of a tagged union, as in
`arrival.poisson.rate`, or validator names) and words its messages for programmers ("Dictionary
should have at least 1 item after validation"). A user wrote keys, not pydantic's schema: every
problem is given here as the key path as it appears in the file (`arrival.rate`,
`tenants.chat.output_tokens.max`, `steps[1].rate`) and a plain sentence. Shared by `scenarios`
and `cluster`; imports neither.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# Keys whose value picks the variant of a tagged union (scenarios: arrival `process`, length
# `dist`; fleets: speculation `method`): pydantic puts that value in the error's location.
TAG_KEYS = ("process", "dist", "method")


def key_path(loc: tuple[Any, ...], data: Any) -> str:
    """`loc` (a pydantic error location) as the path of keys in `data`, the file as parsed."""
    out: list[str] = []
    node, tag_seen = data, False
    for part in loc:
        if isinstance(node, list) and isinstance(part, int):
            out.append(f"{out.pop() if out else ''}[{part}]")
            node, tag_seen = (node[part] if 0 <= part < len(node) else None), False
        elif isinstance(node, dict) and not tag_seen and any(node.get(k) == part for k in TAG_KEYS):
            tag_seen = True  # pydantic names the variant of a union (`poisson`) before its keys
        elif isinstance(node, dict) and part in node:
            out.append(str(part))
            node, tag_seen = node[part], False
        elif not str(part).startswith(("function-", "tagged-union[")):  # not a validator's name
            out.append(str(part))  # a key missing from the file, or below a value of the wrong type
            node = None
    return ".".join(out) or "(top level)"


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _plain(err: dict[str, Any]) -> str:
    kind, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        return "unknown key (a typo?)"
    if kind == "missing":
        return "required key is missing"
    if kind == "too_short":
        what = "entry" if ctx.get("field_type") == "Dictionary" else "item"
        n = ctx.get("min_length", 1)
        return f"needs at least {n} {what}{'s' if n != 1 else ''}, the file gives {ctx.get('actual_length', 0)}"
    if kind == "union_tag_invalid":
        key = str(ctx.get("discriminator", "")).strip("'")
        return f"unknown {key} {ctx.get('tag')!r} (expected one of {ctx.get('expected_tags')})"
    if kind == "union_tag_not_found":
        return "required key is missing (it names which kind this is)"
    bounds = {"greater_than": "greater than {gt}", "greater_than_equal": "at least {ge}",
              "less_than": "less than {lt}", "less_than_equal": "at most {le}"}
    if kind in bounds:
        return f"must be {bounds[kind].format(**{k: _num(v) for k, v in ctx.items()})}, got {got!r}"
    types = {"int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
             "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
             "bool_parsing": "true or false", "string_type": "a string (in quotes)", "list_type": "a list",
             "dict_type": "a table", "model_type": "a table", "model_attributes_type": "a table"}
    if kind in types:
        return f"expected {types[kind]}, got {got!r}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {got!r}"
    return str(err["msg"]).removeprefix("Value error, ").replace("Input should be", "must be")


def problems(exc: ValidationError, data: Any, where: str) -> list[str]:
    """One line per problem: `<where>: <key path>: <plain words>`, in the file's order of errors."""
    out = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):  # the problem is the tag key itself
            loc += (str((err.get("ctx") or {}).get("discriminator", "")).strip("'"),)
        line = f"{where}: {key_path(loc, data)}: {_plain(err)}"
        if line not in out:
            out.append(line)
    return out


MAX_SEED = 2**63 - 1   # a random seed as manifests and traces keep it (int64; numpy's own are unsigned)


def not_utf8(raw: bytes, exc: UnicodeDecodeError, where: str, offset: int = 0) -> str:
    """The one line for a byte of `raw` (the file `where`) that is not UTF-8: its line and column
    (`offset`: where in `raw` the decoded bytes began, past a BOM)."""
    at = exc.start + offset
    line = raw.count(b"\n", 0, at) + 1
    col = at - (raw.rfind(b"\n", 0, at) + 1) + 1
    return f"{where}: line {line}, column {col}: byte 0x{raw[at]:02x} is not UTF-8 text (save the file as UTF-8)"


def file_state(path: Path) -> str:
    """What a path a user gave names: "file", "dir", "missing", or, where the name cannot even be
    looked up (too long, a loop of links), the OS's words for why."""
    try:
        return "file" if path.is_file() else "dir" if path.is_dir() else "missing"
    except OSError as exc:
        return os.strerror(exc.errno) if exc.errno else str(exc)


def file_problem(state: str) -> str:
    """`file_state`'s answer as the end of a one-line error ("does not exist", ...)."""
    return {"dir": "is a directory", "missing": "does not exist"}.get(state, f"cannot be read ({state})")


def shown_name(text: str, limit: int = 80) -> str:
    """A name a user gave, quoted, cut to `limit` characters for a one-line error."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
