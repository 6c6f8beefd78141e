"""Where speculation stops paying: the load at which a mode's speedup over the baseline falls to
1.0, from a sweep's speedups (each with its 95% interval) at increasing loads.

Loads are swept geometrically (concurrency 1, 4, 16, ...; rates 2, 4, 8, ...), so the curve is
interpolated linearly in log(load) and log(speedup) between the two levels around the crossing.
The crossover's interval is where the interval's bounds cross 1.0: the low bound's curve crosses
first (the earliest the mode may stop paying), the high bound's last (the latest); a bound that
does not cross inside the range leaves that side open ("beyond the range").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from analysis.stats import Ratio

CROSSES, NEVER_PAYS, BEYOND = "crosses", "never pays in the range", "beyond the range swept"


@dataclass(frozen=True)
class Crossover:
    verdict: str                 # CROSSES, NEVER_PAYS or BEYOND
    load: float | None           # the interpolated load where the speedup is 1.0 (CROSSES)
    low: float | None            # the earliest load the interval allows (None: below the range)
    high: float | None           # the latest (None: beyond the range)

    def text(self, unit: str = "") -> str:
        if self.verdict != CROSSES:
            return self.verdict
        lo = "below the range" if self.low is None else f"{self.low:,.3g}"
        hi = "beyond the range" if self.high is None else f"{self.high:,.3g}"
        return f"{self.load:,.3g}{unit} [{lo}, {hi}]"


def _first_fall(loads: list[float], values: list[float]) -> float | None:
    """The load where `values` first falls from >= 1 to < 1, interpolated in log-log; None when
    it never does inside the range."""
    for (x0, v0), (x1, v1) in pairwise(zip(loads, values, strict=True)):
        if v0 >= 1.0 > v1:
            y0, y1 = math.log(v0), math.log(v1)
            t = y0 / (y0 - y1)
            return math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0)))
    return None


def crossover(loads: list[float], speedups: list[Ratio]) -> Crossover:
    """From speedups at increasing `loads` (all > 0)."""
    if len(loads) != len(speedups) or not loads:
        raise ValueError("one speedup per load, and at least one")
    if any(b <= a for a, b in pairwise(loads)) or loads[0] <= 0:
        raise ValueError("loads must be positive and increasing")
    values = [r.value for r in speedups]
    if values[0] < 1.0:
        return Crossover(NEVER_PAYS, None, None, None)
    load = _first_fall(loads, values)
    if load is None:
        return Crossover(BEYOND, None, None, None)
    low = _first_fall(loads, [r.low for r in speedups]) if speedups[0].low >= 1.0 else None
    high = _first_fall(loads, [r.high for r in speedups])
    return Crossover(CROSSES, load, low, high)
