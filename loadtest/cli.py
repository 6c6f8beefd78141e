"""The `loadtest` command line. Imports of heavy parts (Ray, pyarrow) happen inside commands,
so `loadtest --help` and `loadtest sim` start fast; Locust is never imported here (it
monkey-patches the process with gevent, which hangs `ray.init()`): it runs as a child process."""

from __future__ import annotations

import argparse
import sys

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2), not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from cluster.sim.cli import add_arguments as add_sim_arguments

    top = _Parser(
        prog="loadtest",
        description="Measure what speculative decoding buys on an LLM fleet: provision one fleet per "
        "speculation mode on Ray, replay the same multi-tenant trace against each with Locust, and "
        "compare latency, throughput and goodput from per-request Parquet records.",
    )
    top.add_argument("--version", action="version", version=_version())
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser(
        "run",
        help="the main job: build the trace, start the fleet, replay every mode, write results, print the table",
        description="Build the trace from a scenario, start one fleet per speculation mode on Ray, replay the "
        "same trace against each mode in turn (open loop, streaming) with Locust, write "
        "results/<run_id>/ and print a per-mode comparison. The fleet is torn down on every exit path.",
    )
    run.add_argument("--scenario", default="saas-mix", metavar="NAME|PATH",
                     help="built-in scenario name or a scenario TOML file (default: saas-mix)")
    run.add_argument("--fleet", default="local-sim", metavar="NAME|PATH",
                     help="built-in fleet name or a fleet TOML file (default: local-sim, the simulator on a local Ray)")
    run.add_argument("--modes", default=None, metavar="A,B,...",
                     help="comma-separated modes of the fleet to test (default: all the fleet's modes; "
                     "local-sim has baseline,draft,medusa,eagle,ngram)")
    run.add_argument("--requests", type=_positive_int, default=None, metavar="N",
                     help="requests in the trace (default: the scenario's demo size; --requests 50000 "
                     "runs saas-mix in full)")
    run.add_argument("--out", default="results", metavar="DIR", help="results directory (default: results/)")
    run.add_argument("--run-id", default=None, metavar="ID",
                     help="name of this run's folder under --out (default: UTC time and scenario)")
    run.add_argument("--seed", type=int, default=None, metavar="N", help="trace seed (default: the scenario's)")
    run.add_argument("--max-inflight", type=_positive_int, default=1024, metavar="N",
                     help="most requests in flight per mode; past it a request waits and its lateness is "
                     "recorded (default 1024)")
    run.add_argument("--timeout", type=float, default=600.0, metavar="S",
                     help="per-request timeout in seconds (default 600)")
    run.add_argument("--cooldown", type=float, default=2.0, metavar="S",
                     help="pause between modes after the previous one drains, in seconds (default 2)")

    sim = sub.add_parser(
        "sim",
        help="the vLLM-compatible simulator (same flags as `vllm serve`, plus simulator-only options)",
        description="Serve vLLM's OpenAI-compatible API from a performance model of the given deployment: "
        "continuous batching, chunked prefill, speculative decoding with multi-token chunks, and "
        "vLLM's /metrics. Stands in for `vllm serve` where there is no GPU.",
    )
    add_sim_arguments(sim)
    return top


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _version() -> str:
    from loadtest import __version__

    return f"loadtest {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Report an unknown option against the subcommand it was given to.
        sub = _subparsers(parser).get(args.command or "", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command == "sim":
        from cluster.sim.cli import run as run_sim

        return run_sim(args)
    if args.command == "run":
        from loadtest.run import main as run_main

        return run_main(args)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
