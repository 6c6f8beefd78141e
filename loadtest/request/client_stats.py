"""The client watching itself: latency histograms, send lateness, CPU and SSE events per worker,
merged on the master, and the verdict on whether the client, not the server, was the limit."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from loadtest.request.histogram import LogHistogram

METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "lateness_ms")
# A worker busier than this fraction of a core over a reporting interval ran hot. Measured here:
# one Locust process kept TTFT error under ~5 ms p99 up to ~25,000 SSE events/s, about half a
# core, and degraded past it; 0.9 flags a worker that had no headroom left.
HOT_CPU = 0.9


def cpu_seconds() -> float:
    """CPU time of the calling OS thread: under gevent, the event loop that times every request
    (Parquet writes run on another thread and do not count against it)."""
    return time.thread_time()


@dataclass(frozen=True)
class StatsReport:
    """What one worker observed since its last report: histogram counts (bucket -> count, as
    LogHistogram.to_dict) per metric, SSE events, tokens, requests, and its CPU share."""

    hists: dict[str, dict[str, int]]
    events: int
    tokens: int
    requests: int
    cpu: float


@dataclass
class ClientStats:
    hists: dict[str, LogHistogram] = field(default_factory=lambda: {m: LogHistogram() for m in METRICS})
    events: int = 0          # text chunks received (SSE events that carried tokens)
    tokens: int = 0          # completion tokens (from usage) of the requests observed
    requests: int = 0
    cpu_max: float = 0.0     # highest CPU share of one core seen over a reporting interval
    first: float | None = None
    last: float | None = None
    # (monotonic, process CPU seconds) when this process started replaying: the verdict's
    # cpu_mean is the whole process's CPU (all threads) over the replay, start-up excluded
    replay_started: tuple[float, float] | None = None

    def observe(self, row: dict) -> None:
        """Add one request record (a RequestRecord row)."""
        if row["sent_ns"] is None:
            return
        self.requests += 1
        self.events += row["n_chunks"] or 0
        self.tokens += row.get("completion_tokens") or 0
        for m in ("ttft_ms", "tpot_ms", "e2e_ms", "lateness_ms"):
            self.hists[m].add(row[m])
        self.hists["itl_ms"].add_many((row["itl_ms"] or [])[1:])
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        self.last = now

    def take(self, cpu: float) -> StatsReport:
        """A report of what was observed since the last one (for the master), then reset."""
        out = StatsReport({m: h.take() for m, h in self.hists.items()}, self.events, self.tokens, self.requests, cpu)
        self.events = self.tokens = self.requests = 0
        return out

    def merge(self, report: StatsReport) -> None:
        for m, counts in report.hists.items():
            self.hists[m].merge(counts)
        self.events += report.events
        self.tokens += report.tokens
        self.requests += report.requests
        self.cpu_max = max(self.cpu_max, report.cpu)
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        self.last = now

    def live(self) -> tuple[float | None, float | None, float | None, float | None]:
        """TTFT p50, TTFT p99, TPOT p50 and send lateness p99 (ms; None while unknown), live."""
        return (self.hists["ttft_ms"].quantile(0.5), self.hists["ttft_ms"].quantile(0.99),
                self.hists["tpot_ms"].quantile(0.5), self.hists["lateness_ms"].quantile(0.99))

    def start_replay(self) -> None:
        """Mark the start of sending, for the verdict's cpu_mean (start-up excluded)."""
        self.replay_started = (time.monotonic(), time.process_time())

    def _cpu_mean(self) -> float | None:
        if self.replay_started is None:
            return None
        wall0, cpu0 = self.replay_started
        wall = time.monotonic() - wall0
        return round((time.process_time() - cpu0) / wall, 3) if wall > 0 else None

    def verdict(self, lateness_limit_ms: float) -> dict:
        late = self.hists["lateness_ms"]
        p99 = late.quantile(0.99)
        reasons = []
        if p99 is not None and p99 > lateness_limit_ms:
            reasons.append(f"send lateness p99 {p99:.1f} ms > {lateness_limit_ms:g} ms")
        if self.cpu_max > HOT_CPU:
            reasons.append(f"a worker ran at {self.cpu_max:.0%} of a core")
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        return {
            "client_limited": bool(reasons),
            "reasons": reasons,
            "lateness_ms": {"p50": late.quantile(0.5), "p99": p99, "count": late.count},
            "cpu_max": round(self.cpu_max, 3),
            "cpu_mean": self._cpu_mean(),
            "events_per_s": round(self.events / span, 1) if span > 0 else None,
            "itl_ms": {"p50": self.hists["itl_ms"].quantile(0.5), "p99": self.hists["itl_ms"].quantile(0.99)},
        }
