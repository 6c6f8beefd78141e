"""The live comparison of modes while they replay (`loadtest ui`'s Comparison page), from the
records as their parts reach disk: per mode and tenant, everything since the start (`Totals`,
added to part by part, so a tick costs what arrived, not what the run holds) and the last
`WINDOW_S` seconds (`window_row`, for the charts over time).

Pure: records in, rows of plain numbers out (JSON-able; None where nothing is known yet). The
statistics are the report's (analysis/stats.py): goodput is requests within every SLO of their
tenant (`meets_slos`), tokens per step is the chunks after each request's first (`tokens_per_step`),
and, as in the report, latencies and tokens are those of the requests that succeeded. The rates
are over the time since the mode's first request (the report's, over its steady window)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.cells import ALL
from analysis.slo import SLO_COLUMNS
from analysis.stats import itl_per_chunk, meets_slos
from loadtest.records import CLIENT, FAILED, NOT_SENT, OK, outcomes
from loadtest.request.histogram import LogHistogram

WINDOW_S = 10.0           # the charts' trailing window: each point is 10 s of ended requests ...
# ... ending this long before the tick: a record reaches disk up to ~1 s after it ends (the parts'
# flush, ReplayConfig.flush_s) and the board reads them once a second (board.TICK_S)
LAG_S = 2.0
QUANTILES = (0.5, 0.9, 0.99)
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
# what a record must carry for the board (the rest of the record contract stays on disk)
COLUMNS = ["mode", "tenant", "request_id", "status", "error_kind", "sent_ns", "e2e_ms", "ttft_ms", "tpot_ms", "itl_ms",
           "chunk_tokens", "completion_tokens"]


def _f(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 3)


def succeeded(records: pa.Table) -> pa.Table:
    """The records whose latencies and tokens count (the report's: status ok)."""
    return records.filter(pc.equal(records["status"], "ok"))


def ended_ns(records: pa.Table) -> np.ndarray:
    """When each request ended on the client's clock: sent plus E2E; a request never sent (or
    without an E2E) counts as ended when it was sent, else at 0 (outside every window)."""
    sent = records["sent_ns"].to_numpy(zero_copy_only=False).astype(np.float64)
    e2e = records["e2e_ms"].to_numpy(zero_copy_only=False).astype(np.float64)
    out = np.where(np.isnan(e2e), sent, sent + e2e * 1e6)
    return np.nan_to_num(out, nan=0.0)


def good(records: pa.Table) -> np.ndarray:
    """Per record: succeeded and within its tenant's SLOs (records joined with their targets; a
    record without targets only has to succeed)."""
    n = records.num_rows
    ok = pc.equal(records["status"], "ok").to_numpy(zero_copy_only=False)

    def col(name: str) -> np.ndarray:
        if name not in records.column_names:
            return np.full(n, np.nan)
        return records[name].to_numpy(zero_copy_only=False).astype(np.float64)

    return meets_slos(col("ttft_ms"), col("tpot_ms"), col("e2e_ms"), *(col(c) for c in SLO_COLUMNS), ok)


def _decode(chunk_tokens: pa.ChunkedArray | pa.Array) -> tuple[int, int]:
    """(tokens, chunks) after each request's first chunk: tokens per step is their ratio."""
    lists = chunk_tokens.combine_chunks() if isinstance(chunk_tokens, pa.ChunkedArray) else chunk_tokens
    lists = lists.filter(pc.greater(pc.list_value_length(lists), 1))
    if not len(lists):
        return 0, 0
    rest = pc.list_flatten(pc.list_slice(lists, 1))
    return int(pc.sum(rest).as_py() or 0), len(rest)


@dataclass
class Totals:
    """One mode's (or one tenant's) records since the start."""

    hists: dict[str, LogHistogram] = field(default_factory=lambda: {m: LogHistogram() for m in LATENCIES})
    outcomes: dict[str, int] = field(default_factory=dict)   # loadtest.records.outcomes, as the report counts
    good: int = 0
    output_tokens: int = 0
    decode_tokens: int = 0
    decode_chunks: int = 0

    def add(self, records: pa.Table, good_mask: np.ndarray) -> None:
        for outcome, n in zip(*np.unique(outcomes(records).to_numpy(zero_copy_only=False), return_counts=True),
                              strict=True):
            self.outcomes[str(outcome)] = self.outcomes.get(str(outcome), 0) + int(n)
        self.good += int(good_mask.sum())
        ok = succeeded(records)
        self.output_tokens += int(pc.sum(ok["completion_tokens"]).as_py() or 0)
        tokens, chunks = _decode(ok["chunk_tokens"])
        self.decode_tokens, self.decode_chunks = self.decode_tokens + tokens, self.decode_chunks + chunks
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            values = ok[metric].to_numpy(zero_copy_only=False).astype(np.float64)
            self.hists[metric].add_many(values[~np.isnan(values)].tolist())
        self.hists["itl_ms"].add_many(itl_per_chunk(ok["itl_ms"]).tolist())

    def row(self, elapsed_s: float) -> dict:
        """The table's figures: counts, percentiles (ms), and rates over `elapsed_s`."""
        per_s = (lambda n: n / elapsed_s) if elapsed_s > 0 else (lambda n: None)
        done = sum(n for s, n in self.outcomes.items() if s != NOT_SENT)
        recorded = sum(self.outcomes.values())
        row: dict = {"ok": self.outcomes.get(OK, 0), "errors": self.outcomes.get(FAILED, 0),
                     "client": self.outcomes.get(CLIENT, 0), "not_sent": self.outcomes.get(NOT_SENT, 0),
                     "done": done, "good": self.good, "goodput": _f(per_s(self.good)),
                     # as the report's goodput share: of every request recorded, not_sent included
                     "good_share": _f(self.good / recorded) if recorded else None,
                     "output_tok_s": _f(per_s(self.output_tokens)),
                     "tokens_per_step": _f(self.decode_tokens / self.decode_chunks) if self.decode_chunks else None}
        for metric, h in self.hists.items():
            for q in QUANTILES:
                row[f"{metric.removesuffix('_ms')}_p{round(q * 100)}"] = _f(h.quantile(q))
        return row


def window_row(records: pa.Table, good_mask: np.ndarray, window_s: float = WINDOW_S) -> dict:
    """The charts' point: the requests that ended in a window of `window_s` seconds (already
    selected): per second, requests, errors, goodput and output tokens; the successful ones'
    p50 and p99 (ms) and tokens per step."""
    done = pc.not_equal(records["status"], "not_sent").to_numpy(zero_copy_only=False)
    ok = succeeded(records)
    tokens, chunks = _decode(ok["chunk_tokens"])
    row: dict = {"req_s": _f(done.sum() / window_s),
                 "errors_s": _f(int(np.count_nonzero(pc.equal(outcomes(records), FAILED))) / window_s),
                 "goodput": _f(good_mask.sum() / window_s),
                 "output_tok_s": _f((pc.sum(ok["completion_tokens"]).as_py() or 0) / window_s),
                 "tokens_per_step": _f(tokens / chunks) if chunks else None}
    for metric in LATENCIES:
        if metric == "itl_ms":
            values = itl_per_chunk(ok["itl_ms"]) if ok.num_rows else np.empty(0)
        else:
            values = ok[metric].to_numpy(zero_copy_only=False).astype(np.float64)
            values = values[~np.isnan(values)]
        for q in (0.5, 0.99):
            key = f"{metric.removesuffix('_ms')}_p{round(q * 100)}"
            row[key] = _f(float(np.quantile(values, q))) if len(values) else None
    return row


def groups(records: pa.Table) -> dict[tuple[str, str], np.ndarray]:
    """(mode, tenant) and (mode, ALL) -> the boolean mask of their rows."""
    modes = records["mode"].to_numpy(zero_copy_only=False)
    tenants = records["tenant"].to_numpy(zero_copy_only=False)
    out: dict[tuple[str, str], np.ndarray] = {}
    for mode in dict.fromkeys(modes.tolist()):
        mine = modes == mode
        out[(mode, ALL)] = mine
        for tenant in dict.fromkeys(tenants[mine].tolist()):
            out[(mode, tenant)] = mine & (tenants == tenant)
    return out


def acceptance(accepted: float, draft_tokens: float) -> float | None:
    """The server's acceptance rate from its counters' deltas (None without drafts)."""
    return _f(accepted / draft_tokens) if draft_tokens > 0 else None
