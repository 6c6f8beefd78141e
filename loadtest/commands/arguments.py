"""The command line's grammar, from the one table of commands (table.py): each command's help and
description, its options from its options record (grammar.add_options). Besides argparse only the
simulator's own option list and the options records are imported here, so `loadtest --help`
starts fast."""

from __future__ import annotations

import argparse

from common.exits import BAD_INPUT
from loadtest.commands.grammar import add_options
from loadtest.commands.table import COMMANDS, GROUPS


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2), not a usage dump."""

    def __init__(self, *args, **kwargs) -> None:
        # No abbreviations: `--det` must not pass for `--detach` (it is re-executed without it).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from cluster.sim.cli import add_arguments as add_sim_arguments

    top = Parser(
        prog="loadtest",
        description="Measure what speculative decoding buys on an LLM fleet: provision one fleet per "
        "speculation mode on Ray, replay the same multi-tenant trace against each with Locust, and "
        "compare latency (TTFT, TPOT, ITL, E2E), throughput, goodput under the tenants' SLOs and acceptance "
        "from per-request Parquet records, with paired 95% confidence intervals on every speedup. "
        "Exit codes: 0 passed, 1 a check failed (a mode's errors, a missed SLO with --slo-gate, a regression "
        "found by compare, an unhealthy fleet), 2 bad input, 3 the run could not complete or a gate could not "
        "judge (too few requests), 130 interrupted.",
    )
    top.add_argument("--version", action="version", version=_version())
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    actions: dict[str, argparse._SubParsersAction] = {}
    for c in COMMANDS:   # in the order --help lists them
        command, _, action = c.words.partition(" ")
        if action and command not in actions:   # cluster, scenario, trace: a command of actions
            group = sub.add_parser(command, help=GROUPS[command][0], description=GROUPS[command][1])
            actions[command] = group.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser,
                                                    required=True)
        where = actions[command] if action else sub
        add_options(where.add_parser(action or command, help=c.help, description=c.description), c.options)
    sim = sub.add_parser(
        "sim",
        help="the vLLM-compatible simulator (same flags as `vllm serve`, plus simulator-only options)",
        description="Serve vLLM's OpenAI-compatible API from a performance model of the given deployment: "
        "continuous batching, chunked prefill, speculative decoding with multi-token chunks, and "
        "vLLM's /metrics. Stands in for `vllm serve` where there is no GPU.",
    )
    add_sim_arguments(sim)
    return top


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _version() -> str:
    from loadtest import __version__

    return f"loadtest {__version__}"
