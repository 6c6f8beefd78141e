"""Per-mode summaries of a run's request records, computed with pyarrow.compute."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.server import spec_decode_stats
from analysis.slo import has_slos, request_meets
from analysis.stats import Ratio, floats, paired_speedup_ci
from analysis.steady import in_window, steady_window
from common import files
from loadtest.records import CLIENT, FAILED, NOT_SENT, OK, outcome_counts


@dataclass(frozen=True)
class ModeSummary:
    mode: str
    requests: int
    ok: int
    errors: int            # errors and timeouts the server is answerable for (loadtest.records.outcomes: failed)
    client: int            # ends the client caused: stopped in flight, cut by --deadline, on a lost worker
    not_sent: int
    duration_s: float      # first scheduled send to last token
    req_per_s: float       # completed requests per second over the steady window (nan: none)
    out_tok_per_s: float   # completion tokens (from usage) per second, the same
    offered_req_per_s: float   # scheduled requests / the span of their scheduled times (nan: closed loop)
    arrival_span_s: float      # first to last scheduled time
    peak_in_flight: int        # most requests between send and last token at once (ok requests)
    steady: bool               # it had a steady window (analysis.steady)
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    lateness_p50_ms: float     # send time minus scheduled time, every sent request
    lateness_p99_ms: float
    tokens_per_chunk: float    # client-side view of mean acceptance length
    speedup: float | None      # geometric mean over requests of baseline E2E / this mode's E2E
    acceptance_rate: float | None = None         # server: Δaccepted / Δdraft tokens
    mean_acceptance_length: float | None = None  # server: 1 + Δaccepted / Δdrafts
    speedup_low: float | None = None             # the speedup's paired-bootstrap 95% interval
    speedup_high: float | None = None
    goodput_req_per_s: float = math.nan          # requests within every SLO of their tenant, per steady second
    goodput_share: float = math.nan              # ... as a share of the requests scheduled (nan: no SLOs)
    steady_s: float = math.nan                   # the steady window's length (nan: too short for one)

    @property
    def speedup_ratio(self) -> Ratio | None:
        if self.speedup is None or self.speedup_low is None or self.speedup_high is None:
            return None
        return Ratio(self.speedup, self.speedup_low, self.speedup_high, 0)


def _q(col: pa.ChunkedArray, q: float) -> float:
    col = pc.drop_null(col)
    if len(col) == 0:
        return math.nan
    return float(pc.quantile(col, q=q, interpolation="linear")[0].as_py())


def peak_in_flight(sent_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """The most intervals [sent, end) open at once (an end and a send at the same instant: the
    end first)."""
    if len(sent_ns) == 0:
        return 0
    times = np.concatenate([sent_ns, end_ns])
    steps = np.concatenate([np.ones(len(sent_ns), dtype=np.int64), -np.ones(len(end_ns), dtype=np.int64)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max())


def paired(mode_ok: pa.Table, base_ok: pa.Table, column: str = "e2e_ms") -> tuple[np.ndarray, np.ndarray]:
    """`column` of the requests that succeeded in both, paired by request_id: (baseline, mode), in
    the mode's row order (as the long summary pairs them, so the same seeded bootstrap draws the
    same pairs and both tables print the same interval; a hash join's order changes run to run)."""
    where = pc.index_in(mode_ok["request_id"], value_set=base_ok["request_id"])
    found = pc.is_valid(where)
    return (floats(base_ok[column])[pc.drop_null(where).to_numpy().astype(np.int64)],
            floats(mode_ok[column])[found.to_numpy(zero_copy_only=False)])


def paired_speedup(mode_ok: pa.Table, base_ok: pa.Table, column: str = "e2e_ms") -> Ratio | None:
    """Geometric mean of baseline / mode `column` over requests that succeeded in both, with
    its paired bootstrap interval."""
    return paired_speedup_ci(*paired(mode_ok, base_ok, column))


def summarize(table: pa.Table, modes: list[str] | None = None, baseline: str = "baseline",
              server_metrics: pa.Table | None = None) -> list[ModeSummary]:
    modes = modes or sorted(set(table["mode"].to_pylist()))
    slos = has_slos(table)   # joined by analysis.slo.with_slos
    status_ok = pc.equal(table["status"], OK)
    base_ok = table.filter(pc.and_(status_ok, pc.equal(table["mode"], baseline)))
    out = []
    for mode in modes:
        t = table.filter(pc.equal(table["mode"], mode))
        ok = t.filter(pc.equal(t["status"], OK))
        counts = outcome_counts(t)
        if ok.num_rows:
            start = pc.min(t["scheduled_ns"]).as_py()
            end = pc.max(ok["last_token_ns"]).as_py()
            duration = max((end - start) / 1e9, 1e-9)
        else:
            duration = math.nan
        tokens = pc.sum(ok["completion_tokens"]).as_py() or 0
        chunks = pc.sum(ok["n_chunks"]).as_py() or 0
        spec = spec_decode_stats(server_metrics, mode) if server_metrics is not None else None
        span = (pc.max(t["offset_s"]).as_py() - pc.min(t["offset_s"]).as_py()) if t.num_rows else 0.0
        e2e_p99 = _q(ok["e2e_ms"], 0.99)
        ratio = None if mode == baseline or base_ok.num_rows == 0 else paired_speedup(ok, base_ok)
        meets = request_meets(t) if slos else None
        met = int(meets.sum()) if slos else 0
        sent_at = t["scheduled_ns"].filter(pc.is_valid(t["sent_ns"]))     # arrivals that were sent
        window = steady_window(pc.min(sent_at).as_py(), pc.max(sent_at).as_py(), e2e_p99) if len(sent_at) else None
        steady_s = (window[1] - window[0]) / 1e9 if window else math.nan
        done = in_window(pc.fill_null(t["last_token_ns"], 0).to_numpy(),
                         pc.equal(t["status"], OK).to_numpy(zero_copy_only=False), window)
        steady_tokens = float(np.nansum(floats(t["completion_tokens"])[done]))   # a reply without usage: 0
        out.append(ModeSummary(
            mode=mode,
            requests=t.num_rows,
            ok=counts[OK],
            errors=counts[FAILED],
            client=counts[CLIENT],
            not_sent=counts[NOT_SENT],
            duration_s=duration,
            req_per_s=done.sum() / steady_s if window else math.nan,
            out_tok_per_s=steady_tokens / steady_s if window else math.nan,
            offered_req_per_s=t.num_rows / span if span > 0 else math.nan,
            arrival_span_s=span,
            peak_in_flight=peak_in_flight(ok["sent_ns"].to_numpy(), ok["last_token_ns"].to_numpy()),
            steady=window is not None,
            ttft_p50_ms=_q(ok["ttft_ms"], 0.5),
            ttft_p99_ms=_q(ok["ttft_ms"], 0.99),
            tpot_p50_ms=_q(ok["tpot_ms"], 0.5),
            tpot_p99_ms=_q(ok["tpot_ms"], 0.99),
            e2e_p50_ms=_q(ok["e2e_ms"], 0.5),
            e2e_p99_ms=_q(ok["e2e_ms"], 0.99),
            lateness_p50_ms=_q(t["lateness_ms"], 0.5),
            lateness_p99_ms=_q(t["lateness_ms"], 0.99),
            tokens_per_chunk=tokens / chunks if chunks else math.nan,
            speedup=ratio.value if ratio else None,
            acceptance_rate=spec.acceptance_rate if spec else None,
            mean_acceptance_length=spec.mean_acceptance_length if spec else None,
            speedup_low=ratio.low if ratio else None,
            speedup_high=ratio.high if ratio else None,
            goodput_req_per_s=float((meets & done).sum()) / steady_s if slos and window else math.nan,
            goodput_share=met / t.num_rows if slos and t.num_rows else math.nan,
            steady_s=steady_s,
        ))
    return out


def tenant_speedups(table: pa.Table, modes: list[str], baseline: str = "baseline") -> dict[str, dict[str, Ratio]]:
    """Paired E2E speedup over the baseline, with its interval, per tenant and mode."""
    ok = table.filter(pc.equal(table["status"], OK))
    out: dict[str, dict[str, float]] = {}
    for tenant in sorted(set(ok["tenant"].to_pylist())):
        mine = ok.filter(pc.equal(ok["tenant"], tenant))
        base = mine.filter(pc.equal(mine["mode"], baseline))
        if base.num_rows == 0:
            continue
        for mode in modes:
            if mode != baseline:
                value = paired_speedup(mine.filter(pc.equal(mine["mode"], mode)), base)
                if value is not None:
                    out.setdefault(tenant, {})[mode] = value
    return out


SUMMARY_SCHEMA = pa.schema([pa.field(f.name, pa.string() if f.name == "mode" else pa.bool_() if f.type == "bool"
                                     else pa.int64() if f.type == "int" else pa.float64())
                            for f in fields(ModeSummary)])
TENANT_SPEEDUP_SCHEMA = pa.schema([pa.field("tenant", pa.string()), pa.field("mode", pa.string()),
                                   pa.field("speedup", pa.float64()), pa.field("speedup_low", pa.float64()),
                                   pa.field("speedup_high", pa.float64()), pa.field("pairs", pa.int64())])


def write_tenant_speedups(speedups: dict[str, dict[str, Ratio]], path: Path) -> None:
    """The per-tenant speedup table as printed, one row per tenant and mode."""
    rows = [{"tenant": t, "mode": m, "speedup": r.value, "speedup_low": r.low, "speedup_high": r.high,
             "pairs": r.pairs} for t, row in speedups.items() for m, r in row.items()]
    files.write_table(pa.Table.from_pylist(rows, schema=TENANT_SPEEDUP_SCHEMA), path)


def write_summary(summaries: list[ModeSummary], path: Path) -> None:
    table = pa.Table.from_pylist([asdict(s) for s in summaries], schema=SUMMARY_SCHEMA)
    files.write_table(table, path)
