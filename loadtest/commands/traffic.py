"""`loadtest scenario list|show|validate` and `loadtest trace build|import|show`: each hands its
options to the scenarios room's command (scenarios/commands.py); a ScenarioError is one line and
exit 2."""

from __future__ import annotations

from collections.abc import Callable

from common.exits import BAD_INPUT, print_error
from loadtest.commands.console import new_console
from loadtest.options.tools import (
    ScenarioListOptions,
    ScenarioShowOptions,
    ScenarioValidateOptions,
    TraceBuildOptions,
    TraceImportOptions,
    TraceShowOptions,
)


def _guarded(prog: str, command: Callable[[object], int]) -> int:
    from scenarios import ScenarioError

    try:
        return command(new_console())
    except ScenarioError as exc:
        print_error(prog, str(exc))
        return BAD_INPUT


def scenario_list(args: ScenarioListOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, c.scenario_list)


def scenario_show(args: ScenarioShowOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, lambda console: c.scenario_show(console, args.name or ""))


def scenario_validate(args: ScenarioValidateOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, lambda console: c.scenario_validate(console, args.path or ""))


def trace_build(args: TraceBuildOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, lambda console: c.trace_build(console, args.scenario or "", args.out or "",
                                                             args.requests, args.seed, args.duration,
                                                             args.rate_scale, args.tokenizer))


def trace_import(args: TraceImportOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, lambda console: c.trace_import(console, args.file or "", args.format or "",
                                                              args.out or "", args.importing()))


def trace_show(args: TraceShowOptions) -> int:
    from scenarios import commands as c

    return _guarded(args.PROG, lambda console: c.trace_show(console, args.file or ""))
