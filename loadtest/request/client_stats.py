"""The client watching itself: CPU and SSE events per worker, merged on the master, and the
verdict on whether the client, not the server, was the limit (with the send lateness and
inter-chunk gaps from the records' tally, loadtest.request.tally)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from loadtest.request.tally import TenantTally

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
    """What one worker did since its last report: SSE events, requests, and its CPU share."""

    events: int
    requests: int
    cpu: float


@dataclass(frozen=True)
class ClientLoad:
    """How hard a replay's client worked: the highest CPU share of one core a process reached over
    a reporting interval, the lone process's (or master's) mean over the replay, and SSE events
    per second."""

    cpu_max: float
    cpu_mean: float | None
    events_per_s: float | None


@dataclass
class ClientStats:
    events: int = 0          # text chunks received (SSE events that carried tokens)
    requests: int = 0
    cpu_max: float = 0.0     # highest CPU share of one core seen over a reporting interval
    first: float | None = None
    last: float | None = None
    # (monotonic, process CPU seconds) when this process started replaying: cpu_mean is the whole
    # process's CPU (all threads) over the replay, start-up excluded
    replay_started: tuple[float, float] | None = None

    def observe(self, row: dict) -> None:
        """Add one request record (a RequestRecord row) as it ends."""
        if row["sent_ns"] is None:
            return
        self.requests += 1
        self.events += row["n_chunks"] or 0
        self._seen()

    def _seen(self) -> None:
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        self.last = now

    def take(self, cpu: float) -> StatsReport:
        """A report of what was observed since the last one (for the master), then reset."""
        out = StatsReport(self.events, self.requests, cpu)
        self.events = self.requests = 0
        return out

    def merge(self, report: StatsReport) -> None:
        self.events += report.events
        self.requests += report.requests
        self.cpu_max = max(self.cpu_max, report.cpu)
        self._seen()

    def start_replay(self) -> None:
        """Mark the start of sending, for cpu_mean (start-up excluded)."""
        self.replay_started = (time.monotonic(), time.process_time())

    def load(self) -> ClientLoad:
        cpu_mean = None
        if self.replay_started is not None:
            wall0, cpu0 = self.replay_started
            wall = time.monotonic() - wall0
            cpu_mean = round((time.process_time() - cpu0) / wall, 3) if wall > 0 else None
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        return ClientLoad(round(self.cpu_max, 3), cpu_mean, round(self.events / span, 1) if span > 0 else None)


def verdict(load: ClientLoad, seen: TenantTally, lateness_limit_ms: float) -> dict:
    """The client's verdict on itself: client_limited when its send lateness p99 (of every request
    it sent, from the records' tally) passed the limit or a process ran hot, and why."""
    p99 = seen.quantile("lateness", 0.99)
    reasons = []
    if p99 is not None and p99 > lateness_limit_ms:
        reasons.append(f"send lateness p99 {p99:.1f} ms > {lateness_limit_ms:g} ms")
    if load.cpu_max > HOT_CPU:
        reasons.append(f"a worker ran at {load.cpu_max:.0%} of a core")
    return {
        "client_limited": bool(reasons),
        "reasons": reasons,
        "lateness_ms": {"p50": seen.quantile("lateness", 0.5), "p99": p99, "count": seen.count("lateness")},
        "cpu_max": load.cpu_max,
        "cpu_mean": load.cpu_mean,
        "events_per_s": load.events_per_s,
        "itl_ms": {"p50": seen.quantile("itl", 0.5), "p99": seen.quantile("itl", 0.99)},
    }
