"""The `loadtest` command line. Imports of heavy parts (Ray, pyarrow) happen inside commands,
so `loadtest --help` and `loadtest sim` start fast; Locust is never imported here (it
monkey-patches the process with gevent, which hangs `ray.init()`): it runs as a child process."""

from __future__ import annotations

import argparse
import importlib
import sys

from common import files
from common.exits import BAD_INPUT as EXIT_USAGE
from common.exits import INCOMPLETE, INTERRUPTED, os_error_text, print_error
from loadtest.commands.arguments import build_parser, subparsers
from loadtest.commands.console import new_console
from loadtest.commands.grammar import read_options
from loadtest.session.options import COMMANDS as OPTIONS


def _traffic(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from scenarios import ScenarioError
    from scenarios import commands as c
    from scenarios.importers import ImportOptions

    console = new_console()
    prog = f"loadtest {args.command} {args.action}"
    try:
        if args.command == "scenario":
            if args.action == "list":
                return c.scenario_list(console)
            if args.action == "show":
                return c.scenario_show(console, args.name)
            return c.scenario_validate(console, args.path)
        if args.action == "build":
            return c.trace_build(console, args.scenario, args.out, args.requests, args.seed, args.duration,
                                 args.rate_scale)
        if args.action == "import":
            opts = ImportOptions(args.speedup, args.window, args.sample, args.rate, args.seed)
            return c.trace_import(console, args.file, args.format, args.out, opts)
        return c.trace_show(console, args.file)
    except ScenarioError as exc:
        print_error(prog, str(exc))
        return EXIT_USAGE


def _cluster(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime
    from pathlib import Path

    from cluster import FleetError
    from cluster import commands as c

    console = new_console()
    state = Path(args.state)
    try:
        if args.action == "up":
            stamp = f"cluster-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
            logs = Path(args.logs) if args.logs else Path("results") / stamp / "logs"
            relaunch = [sys.executable, "-m", "loadtest"]  # how --detach starts the same command again
            return c.up(console, args.fleet, args.modes, state, logs, args.address, args.detach, relaunch,
                        skip_unavailable=args.skip_unavailable)
        if args.action == "status":
            return c.status(console, state)
        return c.down(console, state, c.DOWN_TIMEOUT_S)
    except FleetError as exc:
        print_error(f"loadtest cluster {args.action}", str(exc))
        return EXIT_USAGE


# Each command's module, imported only when it runs (so `--help` and `loadtest sim` start fast).
COMMANDS = {"sim": ("cluster.sim.cli", "run"), "run": ("loadtest.commands.run", "main"),
            "ui": ("loadtest.commands.ui", "main"), "report": ("loadtest.commands.analyse", "main"),
            "compare": ("loadtest.commands.analyse", "compare"), "plan": ("loadtest.commands.plan", "main"),
            "sweep": ("loadtest.commands.sweep", "main"), "capacity": ("loadtest.commands.capacity", "main"),
            "calibrate": ("loadtest.commands.calibrate", "main"), "soak": ("loadtest.commands.soak", "main")}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Report an unknown option against the subcommand it was given to.
        sub = subparsers(parser).get(args.command or "", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command in COMMANDS:
        module, function = COMMANDS[args.command]
        record = OPTIONS.get(args.command)   # a command with an options record gets it, the rest their namespace
        try:
            return getattr(importlib.import_module(module), function)(
                read_options(record, args) if record is not None else args)
        except KeyboardInterrupt:   # Ctrl-C outside a replay's handlers (writing the summaries, say)
            print(f"loadtest {args.command}: interrupted", file=sys.stderr)
            return INTERRUPTED
        except files.NotWritten as exc:   # a result file on a full disk (the file before it is kept whole)
            print_error(f"loadtest {args.command}", f"could not write {exc.path}: {os_error_text(exc)}")
            return INCOMPLETE
    if args.command == "cluster":
        return _cluster(args)
    if args.command in ("scenario", "trace"):
        return _traffic(args, subparsers(parser)[args.command])
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
