"""The run's summary in long format (DESIGN, "Analysis"): one row per run, mode, tenant, metric
and statistic, with a value and, for speedups, the bounds of its 95% interval. Tenant `all` is the
whole mode. Every table, report and gate is a view of it.

Metrics (latencies in ms, over requests that succeeded unless said):
- `ttft_ms`, `tpot_ms`, `e2e_ms`; `ttft_sched_ms`, `e2e_sched_ms` (from the scheduled time, so a
  late send counts against the server's answer); `lateness_ms` (every sent request);
- `itl_chunk_ms` (gaps between text chunks: what a user sees) and `itl_token_ms` (each gap over
  the tokens its chunk carried); statistics p50, p90, p95, p99, max;
- `requests` by `status` and `error_kind` (statistic `count`);
- `req_per_s`, `out_tok_per_s`, `goodput_req_per_s` (statistic `rate`), `goodput_share`;
- `tokens_per_step` (client: completion tokens after the first chunk over chunks after the
  first), `tokens_per_chunk`; server `acceptance_rate`, `mean_acceptance_length`,
  `acceptance_at_position` (statistic `pos1`, `pos2`, ...), from /metrics counter increases;
- `speedup_ttft`, `speedup_tpot`, `speedup_e2e`: paired geometric mean over the baseline with
  `ci_low`/`ci_high`, and statistic `pairs` for how many requests were paired.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from analysis.server import SpecDecodeStats
from analysis.slo import has_slos, request_meets
from analysis.stats import floats, itl_per_chunk, itl_per_token, paired_speedup_ci, percentiles, tokens_per_step
from analysis.summary import paired
from loadtest.records import OK, STATUSES

ALL = "all"
LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms")
SPEEDUPS = {"speedup_ttft": "ttft_ms", "speedup_tpot": "tpot_ms", "speedup_e2e": "e2e_ms"}

LONG_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("mode", pa.string()), pa.field("tenant", pa.string()),
    pa.field("metric", pa.string()), pa.field("statistic", pa.string()), pa.field("value", pa.float64()),
    pa.field("ci_low", pa.float64()), pa.field("ci_high", pa.float64()),
])


class _Rows:
    def __init__(self, run_id: str) -> None:
        self.run_id, self.rows = run_id, []

    def add(self, mode: str, tenant: str, metric: str, statistic: str, value: float | None,
            low: float | None = None, high: float | None = None) -> None:
        self.rows.append({"run_id": self.run_id, "mode": mode, "tenant": tenant, "metric": metric,
                          "statistic": statistic, "value": math.nan if value is None else float(value),
                          "ci_low": low, "ci_high": high})


def _group(out: _Rows, mode: str, tenant: str, t: pa.Table, base_ok: pa.Table | None, span_start: int) -> None:
    ok = t.filter(pc.equal(t["status"], OK))
    for status in STATUSES:
        out.add(mode, tenant, "requests", status, pc.sum(pc.equal(t["status"], status)).as_py() or 0)
    kinds = t.filter(pc.is_valid(t["error_kind"]))
    if kinds.num_rows:
        for row in pc.value_counts(pc.binary_join_element_wise(kinds["status"], kinds["error_kind"], "/")).to_pylist():
            out.add(mode, tenant, "requests", row["values"], row["counts"])
    for metric in LATENCIES:
        for stat, value in percentiles(floats(ok[metric])).items():
            out.add(mode, tenant, metric, stat, value)
    for stat, value in percentiles(floats(t["lateness_ms"])).items():
        out.add(mode, tenant, "lateness_ms", stat, value)
    for name, values in (("itl_chunk_ms", itl_per_chunk(ok["itl_ms"])),
                         ("itl_token_ms", itl_per_token(ok["itl_ms"], ok["chunk_tokens"]))):
        for stat, value in percentiles(values).items():
            out.add(mode, tenant, name, stat, value)
    tokens = pc.sum(ok["completion_tokens"]).as_py() or 0
    chunks = pc.sum(ok["n_chunks"]).as_py() or 0
    out.add(mode, tenant, "tokens_per_chunk", "mean", tokens / chunks if chunks else math.nan)
    out.add(mode, tenant, "tokens_per_step", "mean", tokens_per_step(ok["chunk_tokens"]))
    duration = ((pc.max(ok["last_token_ns"]).as_py() - span_start) / 1e9) if ok.num_rows else math.nan
    out.add(mode, tenant, "req_per_s", "rate", ok.num_rows / duration if ok.num_rows else 0.0)
    out.add(mode, tenant, "out_tok_per_s", "rate", tokens / duration if ok.num_rows else 0.0)
    if has_slos(t):
        met = int(request_meets(t).sum())
        out.add(mode, tenant, "goodput_req_per_s", "rate", met / duration if ok.num_rows else 0.0)
        out.add(mode, tenant, "goodput_share", "share", met / t.num_rows if t.num_rows else math.nan)
    if base_ok is not None:
        for name, column in SPEEDUPS.items():
            r = paired_speedup_ci(*paired(ok, base_ok, column))
            if r is not None:
                out.add(mode, tenant, name, "geomean", r.value, r.low, r.high)
                out.add(mode, tenant, name, "pairs", r.pairs)


def long_summary(table: pa.Table, run_id: str, modes: list[str], baseline: str = "baseline",
                 server: dict[str, SpecDecodeStats | None] | None = None) -> pa.Table:
    """The summary of one run's records (joined with their SLO targets when it has them)."""
    out = _Rows(run_id)
    base_all = table.filter(pc.and_(pc.equal(table["mode"], baseline), pc.equal(table["status"], OK)))
    tenants = sorted(set(table["tenant"].to_pylist()))
    for mode in modes:
        mine = table.filter(pc.equal(table["mode"], mode))
        if not mine.num_rows:
            continue
        start = pc.min(mine["scheduled_ns"]).as_py()
        paired_with = base_all if mode != baseline and base_all.num_rows else None
        _group(out, mode, ALL, mine, paired_with, start)
        for tenant in tenants:
            t = mine.filter(pc.equal(mine["tenant"], tenant))
            if t.num_rows:
                base = (paired_with.filter(pc.equal(paired_with["tenant"], tenant))
                        if paired_with is not None else None)
                _group(out, mode, tenant, t, base, start)
        spec = (server or {}).get(mode)
        if spec is not None:
            out.add(mode, ALL, "acceptance_rate", "server", spec.acceptance_rate)
            out.add(mode, ALL, "mean_acceptance_length", "server", spec.mean_acceptance_length)
            for i, share in enumerate(spec.per_position):
                out.add(mode, ALL, "acceptance_at_position", f"pos{i + 1}", share)
    return pa.Table.from_pylist(out.rows, schema=LONG_SCHEMA)
