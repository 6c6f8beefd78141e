"""The command line generated from the options records (loadtest.options.replaying): each field
becomes one argparse option, with its default, its bounds (the field's `parse`, whose BadValue
becomes argparse's one-line error) and its help, and the parsed namespace is read back into the
record. Nothing else builds a replaying command's options or reads its namespace."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import Field, fields, is_dataclass
from typing import Any

from loadtest.options.replaying import option_fields
from loadtest.options.values import BadValue, percent, precision_percent


def checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            value = parse(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return tuple(value) if isinstance(value, list) else value

    read.__name__ = getattr(parse, "__name__", "value")
    return read


def shown(value: Any, parse: Callable[[str], Any] | None) -> str:
    """A default as its help text says it: 10 for a share of 0.10 read as a percentage, 2 for 2.0."""
    if isinstance(value, tuple):
        return ",".join(shown(v, None) for v in value)
    if parse in (percent, precision_percent):
        value *= 100
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_options(parser: argparse.ArgumentParser, record: type) -> None:
    """Every option of `record` (a command's options record) on `parser`; the defaults are the
    record's, so a command's own (a soak's scenario) stands where a group's differs."""
    defaults = record()
    scope = getattr(record, "SCOPE", "")
    groups: dict[str, Any] = {}      # argument groups, by title
    exclusive: dict[str, Any] = {}   # mutually exclusive groups, by name
    for path, f, within in option_fields(record):
        meta = f.metadata["option"]
        if f.name in within.get("omit", ()):
            continue
        default = _value(defaults, path, f)
        text = within.get("helps", {}).get(f.name, meta["help"])
        text += within["suffix"] if f.name in within.get("suffixed", ()) else ""
        text = text.replace("{default}", shown(default, meta["parse"])).replace("{scope}", scope).replace("%", "%%")
        if f.name in within.get("hide", ()):
            text = argparse.SUPPRESS
        where: Any = parser
        if meta["exclusive"]:
            if meta["exclusive"] not in exclusive:
                exclusive[meta["exclusive"]] = parser.add_mutually_exclusive_group()
            where = exclusive[meta["exclusive"]]
        elif meta["group"]:
            if meta["group"] not in groups:
                groups[meta["group"]] = parser.add_argument_group(meta["group"])
            where = groups[meta["group"]]
        kwargs: dict[str, Any] = {"dest": f.name, "help": text}
        if default is False and f.type in ("bool", bool):
            kwargs["action"] = "store_true"
        else:
            kwargs.update(default=default, metavar=meta["metavar"])
            if meta["parse"] is not None:
                kwargs["type"] = checked(meta["parse"])
            if meta["choices"] is not None:
                kwargs["choices"] = meta["choices"]
                del kwargs["metavar"]
            if meta["required"]:
                kwargs["required"] = True
            if meta["repeat"]:
                kwargs["action"] = "append"
        if meta["positional"]:
            del kwargs["dest"]
            if meta["positional"] != "1":
                kwargs["nargs"] = meta["positional"]
            where.add_argument(f.name, **kwargs)
            continue
        where.add_argument(meta["flag"] or "--" + f.name.replace("_", "-"), **kwargs)


def read_options(record: type, args: argparse.Namespace) -> Any:
    """The record `add_options` declared, from what argparse parsed (the options it did not offer
    keep their defaults)."""
    return _read(record, record(), vars(args))


def _read(record: type, defaults: Any, parsed: dict[str, Any], omit: tuple[str, ...] = ()) -> Any:
    values = {}
    for f in fields(record):
        current = getattr(defaults, f.name)
        if "group" in f.metadata and is_dataclass(current):
            values[f.name] = _read(type(current), current, parsed, f.metadata["group"]["omit"])
        elif "option" in f.metadata:
            value = current if f.name in omit else parsed.get(f.name, current)
            values[f.name] = tuple(value) if isinstance(value, list) else value   # nargs, append: a tuple
    return record(**values)


def _value(defaults: Any, path: tuple[str, ...], f: Field) -> Any:
    for name in path:
        defaults = getattr(defaults, name)
    return getattr(defaults, f.name)
