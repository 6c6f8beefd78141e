"""Acceptance by category (issue 43): per mode and prompt category (the trace's `category`, a
corpus item's, joined by request id), the mean acceptance length and acceptance rate from each
response's own speculative-decoding counts (vLLM's per-request metrics: the `spec_*` columns), with
95% intervals and counts, and the paired E2E speedup over the baseline by category.

The mean acceptance length of a category is 1 + the accepted drafts over the steps that verified
drafts, summed over its requests that succeeded and carry the counts; its interval treats each
request as a cluster (the delta method for a ratio of sums: the variance of accepted - R x steps
across the requests), so a few long requests cannot pass for many. Rows of the long summary
(tenant `all`, the category in the statistic): `category_acceptance_length`,
`category_acceptance_rate` (each with its interval), `category_requests` (the requests they are
of) and `category_speedup_e2e` (geomean, with its interval, and `category_pairs`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.stats import floats, paired_speedups_ci
from contract.records import OK

Z_95 = 1.959964   # the normal distribution's 97.5th percentile
MIN_CATEGORY_REQUESTS = 8   # fewer: no interval (a ratio's variance from a handful of requests is noise)
Row = tuple[str, str, str, float, float | None, float | None]   # mode, metric, statistic, value, low, high


def categories_of(run_dir: Path) -> pa.Table | None:
    """The run's trace's (request_id, category), or None where it has none (an older trace, an
    imported one, a soak's folder)."""
    path = Path(run_dir) / "trace.parquet"
    if not path.is_file() or "category" not in pq.read_schema(path).names:
        return None
    trace = pq.read_table(path, columns=["request_id", "category"])
    return None if trace["category"].null_count == trace.num_rows else trace


def ratio_interval(num: np.ndarray, den: np.ndarray) -> tuple[float, float | None, float | None]:
    """sum(num) / sum(den) over requests, with its 95% interval by the delta method for a ratio of
    sums (requests as clusters); no interval from fewer than MIN_CATEGORY_REQUESTS requests."""
    total = float(den.sum())
    ratio = float(num.sum()) / total
    n = len(den)
    if n < MIN_CATEGORY_REQUESTS:
        return ratio, None, None
    residual = num - ratio * den
    se = math.sqrt(n / (n - 1) * float((residual ** 2).sum())) / total
    return ratio, ratio - Z_95 * se, ratio + Z_95 * se


def category_rows(records: pa.Table, categories: pa.Table, modes: list[str], baseline: str = "baseline") -> list[Row]:
    """Each mode's acceptance and speedup per category of its records (`records` with request_id,
    mode, status, e2e_ms and the spec_* columns)."""
    index = pc.index_in(records["request_id"], value_set=categories["request_id"])
    category = pc.take(categories["category"], index).to_numpy(zero_copy_only=False)
    mode = records["mode"].to_numpy(zero_copy_only=False)
    ok = pc.equal(records["status"], OK).to_numpy(zero_copy_only=False)
    steps = floats(records["spec_steps"]) if "spec_steps" in records.column_names else np.full(len(mode), np.nan)
    drafts = floats(records["spec_draft_tokens"]) if "spec_steps" in records.column_names else steps
    accepted = floats(records["spec_accepted_tokens"]) if "spec_steps" in records.column_names else steps
    e2e = floats(records["e2e_ms"])
    ids = records["request_id"].to_numpy(zero_copy_only=False)
    rows: list[Row] = []
    names = sorted({c for c in category.tolist() if c is not None})
    base = {i: t for i, t, m, good in zip(ids, e2e, mode, ok, strict=True) if m == baseline and good}
    for m in modes:
        for cat in names:
            mine = (mode == m) & (category == cat) & ok
            counted = mine & np.isfinite(steps) & (steps > 0) & np.isfinite(accepted) & np.isfinite(drafts)
            if counted.any():
                length, low, high = ratio_interval(accepted[counted], steps[counted])
                rows.append((m, "category_acceptance_length", cat, 1 + length,
                             None if low is None else 1 + low, None if high is None else 1 + high))
                rows.append((m, "category_acceptance_rate", cat,
                             *ratio_interval(accepted[counted], drafts[counted])))
                rows.append((m, "category_requests", cat, float(counted.sum()), None, None))
            if m == baseline:
                continue
            pairs = [(base[i], t) for i, t in zip(ids[mine], e2e[mine], strict=True) if i in base]
            if pairs:
                (r,) = paired_speedups_ci([(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]))])
                if r is not None:
                    rows.append((m, "category_speedup_e2e", cat, r.value, r.low, r.high))
                    rows.append((m, "category_pairs", cat, float(r.pairs), None, None))
    return rows
