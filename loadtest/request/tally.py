"""The client's view in Prometheus's shape: per tenant, requests by status and error kind, and the
latency metrics as fixed-bucket histograms (count per bucket and a sum), tokens, and the decode
chunks (after each request's first) with their tokens, whose ratio is the tokens per step.

A Locust process keeps one `Tally`, adds each record as its part file is flushed (so what it
reports is on disk), and ships what it added
since the last time (`take()`, a `TallyReport`) to the command twice a second; the command adds
the reports up (`merge`) and serves them on /metrics. Its size depends on the tenants, never on
the requests, so a soak's memory stays flat.

The buckets are vLLM's own (common/vllm_buckets.py), so the client's histograms and
the server's `vllm:*` ones share their boundaries on one Grafana board; ITL and TPOT add four below
vLLM's lowest 10 ms, where a fast decode step falls.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.dataset as ds

from common.vllm_buckets import INTER_TOKEN_LATENCY_BUCKETS, REQUEST_LATENCY_BUCKETS, TIME_TO_FIRST_TOKEN_BUCKETS

# vLLM's inter-token buckets, with 1, 2.5, 5 and 7.5 ms added below its first (10 ms)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, *INTER_TOKEN_LATENCY_BUCKETS)
# Send lateness: the client's own delay past a request's scheduled time (10 ms marks it client_limited)
LATENESS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# metric -> (the record's column in ms, the buckets in seconds)
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "ttft": ("ttft_ms", TIME_TO_FIRST_TOKEN_BUCKETS), "tpot": ("tpot_ms", ITL_BUCKETS), "itl": ("itl_ms", ITL_BUCKETS),
    "e2e": ("e2e_ms", REQUEST_LATENCY_BUCKETS), "lateness": ("lateness_ms", LATENESS_BUCKETS)}
_BOUNDS = {m: np.asarray(b) for m, (_, b) in HISTOGRAMS.items()}


@dataclass(frozen=True)
class TallyReport:
    """What was added since the last report, JSON-able: `requests` rows [tenant, status,
    error_kind ("" for none), n]; `hists` rows [tenant, metric, sum of seconds, [count per bucket,
    the last one past the top bucket]]; `tokens` rows [tenant, completion tokens, tokens and
    chunks after each request's first chunk (its decode steps)]."""

    requests: list[list] = field(default_factory=list)
    hists: list[list] = field(default_factory=list)
    tokens: list[list] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.requests or self.hists or self.tokens)


@dataclass
class Hist:
    """One fixed-bucket histogram: counts per bucket (not cumulative) and the sum."""

    counts: np.ndarray
    sum: float = 0.0

    @classmethod
    def empty(cls, metric: str) -> Hist:
        return cls(np.zeros(len(_BOUNDS[metric]) + 1, dtype=np.int64))

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def cumulative(self, metric: str) -> list[tuple[str, int]]:
        """Prometheus's buckets: (le, observations <= le), ending with +Inf."""
        edges = [repr(float(b)) for b in HISTOGRAMS[metric][1]] + ["+Inf"]
        return list(zip(edges, np.cumsum(self.counts).tolist(), strict=True))


@dataclass
class Tally:
    requests: Counter = field(default_factory=Counter)         # (tenant, status, error_kind) -> n
    hists: dict[tuple[str, str], Hist] = field(default_factory=dict)   # (tenant, metric) -> Hist
    tokens: Counter = field(default_factory=Counter)           # tenant -> completion tokens (from usage)
    decode_tokens: Counter = field(default_factory=Counter)    # tenant -> tokens in chunks after the first
    decode_chunks: Counter = field(default_factory=Counter)    # tenant -> chunks after the first

    def observe_many(self, rows: list[dict]) -> None:
        for row in rows:
            self.observe(row)

    def observe(self, row: dict) -> None:
        """Add one request record (a RequestRecord row, any status)."""
        tenant = row["tenant"]
        self.requests[(tenant, row["status"], row.get("error_kind") or "")] += 1
        if row.get("sent_ns") is None:
            return
        tokens = row.get("completion_tokens")
        if tokens:
            self.tokens[tenant] += tokens
            steps = (row.get("chunk_tokens") or [])[1:]   # after the first chunk (the prefill's): decode steps
            self.decode_tokens[tenant] += sum(steps)
            self.decode_chunks[tenant] += len(steps)
        for metric, (column, bounds) in HISTOGRAMS.items():
            value = row.get(column)
            if metric == "itl":
                if value and len(value) > 1:
                    self._add(tenant, metric, np.asarray(value[1:], dtype=np.float64) / 1000.0)
            elif value is not None and value == value:  # one value: no numpy call
                h = self._hist(tenant, metric)
                h.counts[bisect_left(bounds, value / 1000.0)] += 1
                h.sum += value / 1000.0

    def _hist(self, tenant: str, metric: str) -> Hist:
        h = self.hists.get((tenant, metric))
        if h is None:
            h = self.hists[(tenant, metric)] = Hist.empty(metric)
        return h

    def _add(self, tenant: str, metric: str, seconds: np.ndarray) -> None:
        seconds = seconds[seconds == seconds]  # no NaN
        if not seconds.size:
            return
        h = self._hist(tenant, metric)
        # side="left" (as bisect_left): a value equal to a boundary is in that bucket (Prometheus's le, "<=")
        h.counts += np.bincount(np.searchsorted(_BOUNDS[metric], seconds, side="left"), minlength=len(h.counts))
        h.sum += float(seconds.sum())

    def merge(self, report: TallyReport) -> None:
        for tenant, status, kind, n in report.requests:
            self.requests[(tenant, status, kind)] += n
        for tenant, metric, total, counts in report.hists:
            h = self._hist(tenant, metric)
            h.counts += np.asarray(counts, dtype=np.int64)
            h.sum += total
        for tenant, tokens, decode_tokens, decode_chunks in report.tokens:
            self.tokens[tenant] += tokens
            self.decode_tokens[tenant] += decode_tokens
            self.decode_chunks[tenant] += decode_chunks

    def take(self) -> TallyReport:
        """What was added since the last take, and reset (what a Locust process ships)."""
        out = TallyReport(
            [[t, s, k, n] for (t, s, k), n in self.requests.items()],
            [[t, m, h.sum, h.counts.tolist()] for (t, m), h in self.hists.items()],
            [[t, self.tokens[t], self.decode_tokens[t], self.decode_chunks[t]] for t in sorted(self.tokens)])
        self.requests, self.hists = Counter(), {}
        self.tokens, self.decode_tokens, self.decode_chunks = Counter(), Counter(), Counter()
        return out


TALLY_COLUMNS = ["tenant", "status", "error_kind", "sent_ns", "scheduled_ns", "completion_tokens", "chunk_tokens",
                 *(column for column, _ in HISTOGRAMS.values())]


def tally_of(records_dir: Path, since_ns: int | None = None) -> Tally:
    """The tally of the records in a mode's folder (only rows scheduled from `since_ns` on): what
    the command settles its /metrics to when a replay ends, whatever reached it on the way."""
    out = Tally()
    parts = sorted(Path(records_dir).glob("part-*.parquet"))
    if not parts:
        return out
    table = ds.dataset(parts, format="parquet").to_table(columns=TALLY_COLUMNS)
    if since_ns is not None:
        table = table.filter(pc.greater_equal(table["scheduled_ns"], since_ns))
    for batch in table.to_batches(max_chunksize=4096):
        out.observe_many(batch.to_pylist())
    return out
