"""The `loadtest` command line. Imports of heavy parts (Ray, pyarrow) happen inside commands,
so `loadtest --help` and `loadtest sim` start fast; Locust is never imported here (it
monkey-patches the process with gevent, which hangs `ray.init()`): it runs as a child process."""

from __future__ import annotations

import importlib
import signal
import sys
import threading

from common import files
from common.exits import BAD_INPUT as EXIT_USAGE
from common.exits import INCOMPLETE, INTERRUPTED, os_error_text, print_error
from loadtest.commands.arguments import build_parser, subparsers
from loadtest.commands.grammar import read_options
from loadtest.commands.table import BY_WORDS

SIM = ("cluster.sim.cli", "run")   # the simulator's own command line: it gets its namespace


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        # SIGTERM outside a replay's own handlers (loadtest.engine.signals) ends the command as
        # Ctrl-C does: every `with` unwinds (the /metrics targets file goes, the manifest is
        # written), and the exit code is 130, never the shell's 143 for a process killed by it.
        signal.signal(signal.SIGTERM, _terminated)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Report an unknown option against the subcommand it was given to.
        sub = subparsers(parser).get(args.command or "", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    words = f"{args.command} {args.action}" if getattr(args, "action", None) else args.command
    command = BY_WORDS.get(words)
    module, function = command.main.split(":") if command is not None else SIM
    try:
        return getattr(importlib.import_module(module), function)(
            read_options(command.options, args) if command is not None else args)
    except KeyboardInterrupt:   # Ctrl-C outside a replay's handlers (writing the summaries, say)
        print(f"loadtest {words}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except files.NotWritten as exc:   # a result file on a full disk (the file before it is kept whole)
        print_error(f"loadtest {words}", f"could not write {exc.path}: {os_error_text(exc)}")
        return INCOMPLETE


if __name__ == "__main__":
    sys.exit(main())
