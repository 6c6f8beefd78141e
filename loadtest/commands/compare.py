"""`loadtest compare BASE NEW`: the same requests in two runs, paired (analysis.compare), each
figure's change with its interval, and the compare gate (analysis.gate.compare_gate): failed
(exit 1) when a judged figure regressed past --max-regression, passed, or not judged (exit 3)."""

from __future__ import annotations

from pathlib import Path

from analysis.compare import DEFAULT_METRICS, CompareError, caveats, compare_runs, read_compared
from analysis.gate import compare_gate
from analysis.reader import ContractError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.views import show_compare
from loadtest.options.tools import CompareOptions


def main(args: CompareOptions) -> int:
    console = new_console()
    base_dir, new_dir = Path(args.base or ""), Path(args.new or "")
    try:
        common, base, new = read_compared(base_dir, new_dir)
        changes = compare_runs(base, new, args.metric or list(DEFAULT_METRICS))
    except (CompareError, ContractError) as exc:
        print_error("loadtest compare", str(exc))
        return exits.BAD_INPUT
    gate = compare_gate(changes, args.max_regression)
    show_compare(console, f"{args.new} against {args.base}", changes, gate, args.max_regression,
                 [common.text(), *caveats(base_dir, "BASE"), *caveats(new_dir, "NEW")])
    return {"failed": exits.GATE_FAILED, "not judged": exits.INCOMPLETE}.get(gate.verdict, exits.OK)
