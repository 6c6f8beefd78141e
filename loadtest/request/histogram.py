"""A mergeable log-bucketed histogram: 1% relative precision from 0.01 ms to hours, sparse, so
workers can ship it to the master as a small dict and the master can add them up exactly.
(Locust's own response-time buckets round to whole milliseconds below 100 ms, too coarse for
inter-token latency.)"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

MIN_VALUE = 0.01          # ms; smaller values land in bucket 0
GROWTH = 1.01             # each bucket is 1% wider than the previous
_LOG_GROWTH = math.log(GROWTH)


def bucket_of(value: float) -> int:
    if value <= MIN_VALUE:
        return 0
    return int(math.log(value / MIN_VALUE) / _LOG_GROWTH) + 1


def bucket_value(index: int) -> float:
    """A representative value of bucket `index` (its geometric middle)."""
    if index == 0:
        return MIN_VALUE
    return MIN_VALUE * GROWTH ** (index - 0.5)


class LogHistogram:
    def __init__(self, counts: dict[int, int] | None = None) -> None:
        self.counts: Counter[int] = Counter(counts or {})

    def add(self, value: float | None) -> None:
        if value is not None and value == value:  # skip None and NaN
            self.counts[bucket_of(value)] += 1

    def add_many(self, values: list[float]) -> None:
        """Add a request's worth of values at once (its inter-chunk gaps): one numpy pass instead of
        a Python call per value."""
        if not values:
            return
        arr = np.asarray(values, dtype=np.float64)
        arr = arr[arr == arr]  # drop NaN
        idx = np.zeros(arr.shape, dtype=np.int64)
        above = arr > MIN_VALUE
        idx[above] = (np.log(arr[above] / MIN_VALUE) / _LOG_GROWTH).astype(np.int64) + 1
        self.counts.update(idx.tolist())

    def merge(self, other: LogHistogram | dict) -> None:
        counts = other.counts if isinstance(other, LogHistogram) else {int(k): v for k, v in other.items()}
        self.counts.update(counts)

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def quantile(self, q: float) -> float | None:
        """The `q` quantile within 1%, by the analysis's definition (numpy's default, linear): the
        order statistics either side of rank q x (count - 1), interpolated between, so a p99 of 25
        requests is the report's (24th and 25th values) and not the 24th alone."""
        total = self.count
        if not total:
            return None
        rank = q * (total - 1)
        low = math.floor(rank)
        below = above = None    # the order statistics `low` and the one after it (0-based), in one walk
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if below is None and seen > low:
                below = bucket_value(index)
            if seen > min(low + 1, total - 1):
                above = bucket_value(index)
                break
        return below + (rank - low) * (above - below)

    def to_dict(self) -> dict[str, int]:
        return {str(k): v for k, v in self.counts.items()}

    def take(self) -> dict[str, int]:
        """The counts so far, as a dict, and reset (what a worker sends as a delta)."""
        out = self.to_dict()
        self.counts.clear()
        return out
