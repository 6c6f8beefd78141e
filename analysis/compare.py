"""Two runs of the same requests, compared: per mode and tenant, how each gated latency percentile
moved from BASE to NEW, paired by request (only requests that succeeded in both count), with a
paired bootstrap 95% interval on the ratio NEW / BASE. A metric regressed when it got worse by
more than the threshold and the interval says it got worse at all (its low end is above 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.long_summary import ALL
from analysis.stats import Ratio, floats, paired_quantile_ratio_ci
from loadtest.records import OK

COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms", "ttft_sched": "ttft_sched_ms",
           "e2e_sched": "e2e_sched_ms"}
DEFAULT_METRICS = ("ttft_p99", "tpot_p99", "e2e_p99")
DEFAULT_MAX_REGRESSION = 0.05
COMPARE_RESAMPLES = 1000


class CompareError(ValueError):
    """The runs cannot be compared (no common mode, no common request, an unknown metric)."""


def parse_metric(text: str) -> tuple[str, float]:
    """`e2e_p99` -> ("e2e_ms", 99.0)."""
    name, _, pct = text.rpartition("_p")
    if name not in COLUMNS or not pct.replace(".", "", 1).isdigit() or not 0 < float(pct) <= 100:
        raise CompareError(f"--metric {text!r}: expected LATENCY_pNN with LATENCY one of {', '.join(COLUMNS)} "
                           "and NN a percentile (e.g. e2e_p99, ttft_p50)")
    return COLUMNS[name], float(pct)


@dataclass(frozen=True)
class Change:
    mode: str
    tenant: str
    metric: str
    base: float
    new: float
    ratio: Ratio            # new / base, paired, with its interval

    def verdict(self, max_regression: float) -> str:
        if not self.ratio.significant:
            return "no significant change"
        if self.ratio.low > 1:
            return "regressed" if self.ratio.value > 1 + max_regression else "worse (within threshold)"
        return "better"


def _ok(t: pa.Table, mode: str) -> pa.Table:
    return t.filter(pc.and_(pc.equal(t["mode"], mode), pc.equal(t["status"], OK)))


def compare_runs(base: pa.Table, new: pa.Table, metrics: list[str], resamples: int = COMPARE_RESAMPLES) -> list[Change]:
    """Every (mode, tenant, metric) change between the runs' common modes and requests."""
    parsed = [(m, *parse_metric(m)) for m in metrics]
    modes = [m for m in dict.fromkeys(base["mode"].to_pylist()) if m in set(new["mode"].to_pylist())]
    if not modes:
        raise CompareError(f"the runs have no mode in common (BASE: {', '.join(sorted(set(base['mode'].to_pylist())))};"
                           f" NEW: {', '.join(sorted(set(new['mode'].to_pylist())))})")
    out: list[Change] = []
    for mode in modes:
        b, n = _ok(base, mode), _ok(new, mode)
        cols = sorted({c for _, c, _ in parsed})
        joined = b.select(["request_id", "tenant", *cols]).join(
            n.select(["request_id", *cols]).rename_columns(["request_id", *[f"new_{c}" for c in cols]]), "request_id")
        if not joined.num_rows:
            continue
        tenants = joined["tenant"].to_numpy(zero_copy_only=False)
        for tenant in [ALL, *sorted(set(tenants))]:
            rows = np.ones(len(tenants), bool) if tenant == ALL else tenants == tenant
            for name, col, q in parsed:
                bv, nv = floats(joined[col])[rows], floats(joined[f"new_{col}"])[rows]
                r = paired_quantile_ratio_ci(bv, nv, q, resamples=resamples)
                if r is not None:
                    keep = np.isfinite(bv) & np.isfinite(nv)
                    out.append(Change(mode, tenant, name, float(np.percentile(bv[keep], q)),
                                      float(np.percentile(nv[keep], q)), r))
    if not out:
        raise CompareError("the runs have no request in common that succeeded in both (compare runs of the same "
                           "trace: the same scenario and seed, or the same --trace file)")
    return out
