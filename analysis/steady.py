"""The steady window of a mode's replay, the only span its throughput is measured over.

Arrivals start into an empty server: the in-flight count takes about one request's life (its
E2E p99) to fill, so the first E2E p99 after the first arrival is warm-up. After the last
arrival the server drains, and completions fall off: that is drain. What lies between, from the
first arrival plus the E2E p99 to the last arrival, is steady; a replay whose arrivals last less
than STEADY_SPAN_OVER_E2E_P99 x the E2E p99 has a window shorter than one request's life, too
short for a throughput, and says so instead of printing one.
"""

from __future__ import annotations

import math

import numpy as np

STEADY_SPAN_OVER_E2E_P99 = 2.0


def steady_window(first_arrival_ns: int, last_arrival_ns: int, e2e_p99_ms: float) -> tuple[int, int] | None:
    """(start, end) in epoch ns, or None when the arrivals were too short (or nothing succeeded)."""
    if math.isnan(e2e_p99_ms):
        return None
    life_ns = int(e2e_p99_ms * 1e6)
    if last_arrival_ns - first_arrival_ns < STEADY_SPAN_OVER_E2E_P99 * life_ns:
        return None
    return first_arrival_ns + life_ns, last_arrival_ns


def in_window(done_ns: np.ndarray, ok: np.ndarray, window: tuple[int, int] | None) -> np.ndarray:
    """Which requests completed (ok, last token) inside the window; none when there is no window."""
    if window is None:
        return np.zeros(len(done_ns), dtype=bool)
    return ok & (done_ns >= window[0]) & (done_ns <= window[1])
