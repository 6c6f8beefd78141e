"""A sweep's levels, shared by `loadtest plan` and `loadtest sweep` so a plan and a measured sweep
name (and pair) their levels the same way: open loop, the trace's arrivals scaled to a multiple
of their rate (`--rate-scale`) or to an offered rate (`--rates`); closed loop, the same requests
with a fixed number in flight (`--concurrency`). Every level replays the same requests, in the
same order, so levels and modes pair by request id."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from loadtest.options.replaying import LevelOptions
from scenarios import ScenarioError
from scenarios.limits import check_span
from scenarios.trace import META_CLOSED, closed_concurrency, scale_rate


@dataclass(frozen=True)
class Level:
    name: str                       # its folder: scale-0.5, rate-8, concurrency-16
    rate_scale: float | None = None  # open loop: the trace's arrivals this many times as fast
    concurrency: int | None = None   # closed loop: this many requests in flight
    duration_s: float | None = None  # open loop: only the requests that arrive within this many seconds

    def trace(self, base: pa.Table) -> pa.Table:
        if self.concurrency is not None:
            meta = {**(base.schema.metadata or {}), META_CLOSED: str(self.concurrency).encode()}
            return base.replace_schema_metadata(meta)
        scaled = scale_rate(base, self.rate_scale or 1.0)
        if self.duration_s is None:
            return scaled
        within = int(np.searchsorted(scaled["offset_s"].to_numpy(), self.duration_s, side="left"))
        return scaled.slice(0, max(1, within))


def native_rate(trace: pa.Table) -> float:
    """The trace's offered requests per second (its requests over the span of their arrivals)."""
    span = trace["offset_s"][-1].as_py() if trace.num_rows > 1 else 0.0
    if closed_concurrency(trace) or span <= 0:
        raise ScenarioError("the trace has no arrival span to scale (a closed loop, or one request); give "
                            "--concurrency levels, or an open-loop scenario")
    return (trace.num_rows - 1) / span


def offered_rate(trace: pa.Table) -> float:
    """A level's offered req/s, NaN for a closed loop (its rate is what the fleet completes)."""
    try:
        return native_rate(trace)
    except ScenarioError:
        return float("nan")


def levels_of(args: LevelOptions, base: pa.Table) -> list[Level]:
    """The levels a command's --rate-scale, --rates or --concurrency ask for, lowest load first;
    ScenarioError when the trace cannot give them, or when two would share a folder."""
    levels = _levels(args, base)
    span = base["offset_s"][-1].as_py() if base.num_rows else 0.0
    for lv in levels:   # every level's arrivals within the span a trace may have, before anything starts
        if lv.rate_scale:
            check_span(span / lv.rate_scale, f"level {lv.name}: {base.num_rows:,} requests")
    # ... and all of them, one after another (as a sweep replays them)
    check_span(sum(span / lv.rate_scale for lv in levels if lv.rate_scale),
               f"{len(levels):,} levels of {base.num_rows:,} requests each", "fewer levels, fewer requests or higher "
               "rates")
    names = [lv.name for lv in levels]
    for name in names:
        if names.count(name) > 1:
            raise ScenarioError(f"two levels would both be {name!r}: give levels that differ in their first six "
                                "digits")
    return levels


def _levels(args: LevelOptions, base: pa.Table) -> list[Level]:
    if args.concurrency:
        return [Level(f"concurrency-{c}", concurrency=c) for c in sorted(set(args.concurrency))]
    if closed_concurrency(base):
        raise ScenarioError("the scenario is closed loop (a fixed concurrency, no arrival rate to scale): give "
                            "--concurrency levels")
    if args.rates:
        native = native_rate(base)
        return [Level(f"rate-{r:.6g}", rate_scale=r / native) for r in sorted(set(args.rates))]
    native_rate(base)
    return [Level(f"scale-{x:.6g}", rate_scale=x) for x in sorted(set(args.rate_scales))]
