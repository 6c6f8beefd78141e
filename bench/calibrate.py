"""Print the performance model beside the published figures, in two tables.

    python bench/calibrate.py

"Fitted" rows are the figures some constant was chosen to reproduce: they show the fit holds.
"Predicted" rows were never used to choose any constant: they are the model's test. Each row:
the case, its source, the published figure, the simulated one, their ratio, the tolerance band
and whether the model is inside it. cluster/sim/profiles.py and acceptance.py say which constant
was fitted to which row. "Known misses" are published figures the model does not meet, each with
why; they do not count against the exit code.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.table import Table

from cluster.sim.calibration import FITTED, MISSES, PREDICTED, Row


def _ratio(row: Row, value: float) -> str:
    published = (row.low + row.high) / 2 if row.low > 0 else None
    return f"{value / published:.2f}" if published else "-"


def table(title: str, rows: list[Row]) -> tuple[Table, int]:
    t = Table(title=title)
    for col in ("case", "source", "published", "simulated", "ratio", "band", "inside"):
        t.add_column(col, justify="left" if col in ("case", "source") else "right")
    inside = 0
    for row in rows:
        value, ok = row.check()
        inside += ok
        t.add_row(row.case, row.source, row.published, f"{value:.4g}{row.unit}", _ratio(row, value),
                  f"{row.low:.4g}-{row.high:.4g}", "yes" if ok else "[red]NO[/red]")
    return t, inside


def main() -> int:
    console = Console(width=170)
    start = time.perf_counter()
    fitted, n_fit = table("Fitted: rows some constant was chosen to reproduce", FITTED)
    predicted, n_pred = table("Predicted: rows no constant was chosen for (H100 SXM, vLLM V1)", PREDICTED)
    console.print(fitted)
    console.print(predicted)
    misses = Table(title="Known misses: published figures the model does not meet")
    for col in ("case", "source", "published", "simulated", "ratio", "why"):
        misses.add_column(col, justify="right" if col in ("published", "simulated", "ratio") else "left")
    for miss in MISSES:
        value, _ = miss.row.check()
        misses.add_row(miss.row.case, miss.row.source, miss.row.published, f"{value:.4g}{miss.row.unit}",
                       _ratio(miss.row, value), miss.why)
    console.print(misses)
    console.print(f"fitted: {n_fit}/{len(FITTED)} inside; predicted: {n_pred}/{len(PREDICTED)} inside "
                  f"({time.perf_counter() - start:.1f} s)")
    return 0 if n_fit == len(FITTED) and n_pred == len(PREDICTED) else 1


if __name__ == "__main__":
    sys.exit(main())
