"""How many Locust workers a trace needs (`--workers auto`): a pure function of the trace's peak
request and event rates and the per-core cost of the client, as bench/loadgen.py measures it.

A worker's work is per request (a connection's turn, the record) and per streamed event (an SSE
chunk read, timed and tallied). The bench measures them together, not apart: its closed-loop
figure counts a request's 64 events in the request's cost, its paced figure counts the requests'
own work in the events'. Adding both counts each share twice, so at the bench's sizes (64 events
a response, prompts of a few tokens) the estimate is above what was measured; prompts of
thousands of tokens cost the client more bytes to send, which the bench did not measure. Events
per request are taken as its max_tokens, one token a chunk: the baseline's stream (a speculating
server sends several tokens a chunk, so fewer events).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

# bench/loadgen.py on this machine (2 cores, 2026-12-05, median of three runs at 70b8d94; the
# README's table): no delay, one worker on its own core: 3,098 streamed requests/s (64 events each) ...
REQUEST_CORE_S = 1 / 3_098
# ... and paced at 100 requests/s, an event every 10 ms, 64 events each: 16% of a core.
EVENT_CORE_S = 0.16 / (100 * 64)
# A worker is sized to at most half a core at the trace's peak: the client flags itself
# client_limited above 90% of a core (client_stats.py), and bursts inside the window need room.
WORKER_SHARE = 0.5
PEAK_WINDOW_S = 10.0     # the peak rates are the busiest 10 s of arrivals


@dataclass(frozen=True)
class LoadSizing:
    """The trace's peak load on the client and the workers it takes."""

    peak_requests_per_s: float
    peak_events_per_s: float
    cores: float            # CPU cores the peak takes, at the costs above
    workers: int            # at WORKER_SHARE of a core each, at least 1

    def text(self) -> str:
        return (f"the trace peaks at {self.peak_requests_per_s:,.1f} req/s and {self.peak_events_per_s:,.0f} "
                f"events/s (busiest {PEAK_WINDOW_S:g} s), {self.cores:.2f} core(s) of client work: "
                f"{self.workers} worker(s) at most {WORKER_SHARE:.0%} of a core each")

    def as_dict(self) -> dict:
        return asdict(self)


def size_load(offsets_s: np.ndarray, events: np.ndarray, window_s: float = PEAK_WINDOW_S) -> LoadSizing:
    """The busiest `window_s` of a trace's arrivals (`offsets_s`, with `events` each), as rates,
    and the workers they take."""
    order = np.argsort(offsets_s, kind="stable")
    t = np.asarray(offsets_s, dtype=float)[order]
    if t.size == 0:
        return LoadSizing(0.0, 0.0, 0.0, 1)
    ev = np.concatenate([[0.0], np.cumsum(np.asarray(events, dtype=float)[order])])
    end = np.searchsorted(t, t + window_s, side="left")   # arrivals in [t_i, t_i + window)
    idx = np.arange(t.size)
    peak_rps = float((end - idx).max()) / window_s
    peak_eps = float((ev[end] - ev[idx]).max()) / window_s
    cores = peak_rps * REQUEST_CORE_S + peak_eps * EVENT_CORE_S
    return LoadSizing(peak_rps, peak_eps, cores, max(1, math.ceil(cores / WORKER_SHARE - 1e-9)))


@dataclass(frozen=True)
class WorkerChoice:
    """The Locust workers each mode's replay gets, and in words why (the console's line)."""

    workers: int
    why: str
    sizing: LoadSizing | None = None

    def text(self) -> str:
        return f"client: {self.workers} Locust worker(s) per mode ({self.why})"

    def as_dict(self) -> dict:
        return {"per_mode": self.workers, "why": self.why,
                "sizing": self.sizing.as_dict() if self.sizing is not None else None}


def choose_workers(asked: int | None, sizing: LoadSizing | None, room: int, where: str,
                   closed: int | None = None, unsized: str = "") -> WorkerChoice:
    """`asked` (--workers N), or auto: what `sizing` needs, within the `room` (CPUs for workers, per
    mode, on `where`); no more than a closed loop's concurrency (each worker keeps one request in
    flight). Without a sizing (`unsized` says why: a closed loop's rate is the server's, a soak's
    trace is drawn as it goes) the workers take the room."""
    if asked is not None:
        n, why = asked, "--workers"
    elif sizing is None:
        n, why = room, f"auto: {unsized}, so one per free CPU on {where}"
    else:
        n, why = min(sizing.workers, room), f"auto: {sizing.text()}"
        if sizing.workers > room:
            why += f"; {where} has room for {room}: the replay may be client-limited (its verdict will say)"
    if closed and n > closed:
        n, why = closed, why + f"; at most {closed}, one per request the closed loop keeps in flight"
    return WorkerChoice(max(1, n), why, sizing)
