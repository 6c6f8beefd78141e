"""`python -m cluster.sim MODEL [vLLM flags]`: the simulator as a server of its own, startable
without the client packages (`loadtest sim` is the same command)."""

from __future__ import annotations

import argparse
import sys

from cluster.sim.cli import add_arguments, run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m cluster.sim", allow_abbrev=False,
                     description="The vLLM-compatible simulator (the same flags as `vllm serve`, plus simulator-only "
                     "options); `loadtest sim` is the same command.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
