"""The client's view in Prometheus's shape: per tenant, requests by status and error kind, and the
latency metrics as fixed-bucket histograms (count per bucket and a sum), tokens and text chunks.

A Locust process keeps one `Tally`, adds each record as it is written, and ships what it added
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

import numpy as np

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
    the last one past the top bucket]]; `tokens` rows [tenant, completion tokens, text chunks]."""

    requests: list = field(default_factory=list)
    hists: list = field(default_factory=list)
    tokens: list = field(default_factory=list)

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
    tokens: Counter = field(default_factory=Counter)           # tenant -> completion tokens
    chunks: Counter = field(default_factory=Counter)           # tenant -> text chunks

    def observe(self, row: dict) -> None:
        """Add one request record (a RequestRecord row, any status)."""
        tenant = row["tenant"]
        self.requests[(tenant, row["status"], row.get("error_kind") or "")] += 1
        if row.get("sent_ns") is None:
            return
        self.tokens[tenant] += row.get("completion_tokens") or 0
        self.chunks[tenant] += row.get("n_chunks") or 0
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
        for tenant, tokens, chunks in report.tokens:
            self.tokens[tenant] += tokens
            self.chunks[tenant] += chunks

    def take(self) -> TallyReport:
        """What was added since the last take, and reset (what a Locust process ships)."""
        out = TallyReport(
            [[t, s, k, n] for (t, s, k), n in self.requests.items()],
            [[t, m, h.sum, h.counts.tolist()] for (t, m), h in self.hists.items()],
            [[t, self.tokens[t], self.chunks[t]] for t in sorted(set(self.tokens) | set(self.chunks))])
        self.requests, self.hists, self.tokens, self.chunks = Counter(), {}, Counter(), Counter()
        return out
