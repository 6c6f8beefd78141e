"""`loadtest scenario list|show|validate` and `loadtest trace build|import|show`: options to the
scenarios room's commands (scenarios/commands.py), a ScenarioError as one line and exit 2."""

from __future__ import annotations

from common.exits import BAD_INPUT, print_error
from loadtest.commands.console import new_console
from loadtest.session.tool_options import (
    ScenarioListOptions,
    ScenarioShowOptions,
    ScenarioValidateOptions,
    TraceBuildOptions,
    TraceImportOptions,
    TraceShowOptions,
)

Traffic = (ScenarioListOptions | ScenarioShowOptions | ScenarioValidateOptions | TraceBuildOptions
           | TraceImportOptions | TraceShowOptions)


def main(args: Traffic) -> int:
    from scenarios import ScenarioError
    from scenarios import commands as c

    console = new_console()
    try:
        match args:
            case ScenarioListOptions():
                return c.scenario_list(console)
            case ScenarioShowOptions():
                return c.scenario_show(console, args.name or "")
            case ScenarioValidateOptions():
                return c.scenario_validate(console, args.path or "")
            case TraceBuildOptions():
                return c.trace_build(console, args.scenario or "", args.out or "", args.requests, args.seed,
                                     args.duration, args.rate_scale)
            case TraceImportOptions():
                return c.trace_import(console, args.file or "", args.format or "", args.out or "", args.importing())
            case _:
                return c.trace_show(console, args.file or "")
    except ScenarioError as exc:
        print_error(f"loadtest {_words(args)}", str(exc))
        return BAD_INPUT


def _words(args: Traffic) -> str:
    from loadtest.session.registry import COMMANDS

    return next(words for words, record in COMMANDS.items() if isinstance(args, record))
