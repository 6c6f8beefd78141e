"""Print the performance model beside the published figures it is calibrated to.

    python bench/calibrate.py

Each row: the case, the published figure, the simulated figure, their ratio, the tolerance band
and whether the model is inside it. Llama-3.3-70B-Instruct at TP4 on H100 SXM throughout.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.table import Table

from cluster.sim.calibration import ROWS


def main() -> int:
    t = Table(title="Performance model vs published figures (Llama-3.3-70B-Instruct, TP4, H100 SXM)")
    for col in ("case", "published", "simulated", "band", "inside"):
        t.add_column(col, justify="left" if col == "case" else "right")
    failures = 0
    start = time.perf_counter()
    for row in ROWS:
        value, ok = row.check()
        failures += not ok
        t.add_row(row.case, row.published, f"{value:.2f}{row.unit}", f"{row.low:.2f}-{row.high:.2f}",
                  "yes" if ok else "[red]NO[/red]")
    Console(width=140).print(t)
    print(f"{len(ROWS) - failures}/{len(ROWS)} rows inside their tolerance ({time.perf_counter() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
