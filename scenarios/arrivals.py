"""Arrival processes as send times, vectorised with numpy (no per-request Python objects).

Renewal processes (poisson, constant, gamma) draw gaps. Time-varying Poisson processes (ramp,
steps, diurnal, onoff) map a unit-rate Poisson process through the inverse of the cumulative
rate Λ(t) (time rescaling), so their counts in any window are Poisson with mean ∫λ.
"""

from __future__ import annotations

import numpy as np

from scenarios.spec import Closed, Constant, Diurnal, Gamma, OnOff, OpenArrival, Poisson, Ramp, Steps

GRID_POINTS_PER_FEATURE = 4000  # grid resolution of Λ for smooth rate curves (ramp, diurnal)


def mean_rate(arrival: OpenArrival) -> float:
    if isinstance(arrival, Poisson | Constant | Gamma):
        return arrival.rate
    if isinstance(arrival, Ramp):
        return max(arrival.to_rate, (arrival.from_rate + arrival.to_rate) / 2)
    if isinstance(arrival, Steps):
        total = sum(s.duration for s in arrival.steps)
        return sum(s.rate * s.duration for s in arrival.steps) / total
    if isinstance(arrival, Diurnal):
        return arrival.mean
    if isinstance(arrival, OnOff):
        return arrival.rate * arrival.on / (arrival.on + arrival.off)
    raise TypeError(arrival)


def _breakpoints(arrival: Steps | OnOff) -> tuple[np.ndarray, np.ndarray]:
    """Times and Λ at the step edges of one cycle (Λ is piecewise linear between them)."""
    steps = [(s.rate, s.duration) for s in arrival.steps] if isinstance(arrival, Steps) else \
        [(arrival.rate, arrival.on), (0.0, arrival.off)]
    t = np.concatenate([[0.0], np.cumsum([d for _, d in steps])])
    lam = np.concatenate([[0.0], np.cumsum([r * d for r, d in steps])])
    return t, lam


def _inverse_cumulative(arrival: OpenArrival, levels: np.ndarray) -> np.ndarray:
    """t such that Λ(t) = level, for each (non-decreasing) level."""
    if isinstance(arrival, Steps | OnOff):
        t, lam = _breakpoints(arrival)
        cycle_t, cycle_lam = t[-1], lam[-1]
        cycles = np.floor(levels / cycle_lam)
        rest = levels - cycles * cycle_lam
        # np.interp picks, for a level reached by a zero-rate segment's both ends, the later one,
        # so arrivals never land inside a silent segment.
        return cycles * cycle_t + np.interp(rest, lam, t)
    if isinstance(arrival, Ramp):
        a, b, span = arrival.from_rate, arrival.to_rate, arrival.over
        at_end = a * span + (b - a) * span / 2
        grid = np.linspace(0.0, span, GRID_POINTS_PER_FEATURE + 1)
        lam = a * grid + (b - a) * grid**2 / (2 * span)
        inside = np.interp(np.minimum(levels, at_end), lam, grid)
        if b == 0:
            return inside[levels <= at_end]  # the process ends with the ramp
        return np.where(levels <= at_end, inside, span + (levels - at_end) / b)
    if isinstance(arrival, Diurnal):
        m, amp, period = arrival.mean, arrival.amplitude, arrival.period
        grid = np.linspace(0.0, period, GRID_POINTS_PER_FEATURE + 1)
        lam = m * (grid + amp * period / (2 * np.pi) * (1 - np.cos(2 * np.pi * grid / period)))
        per_cycle = m * period
        cycles = np.floor(levels / per_cycle)
        return cycles * period + np.interp(levels - cycles * per_cycle, lam, grid)
    raise TypeError(arrival)


def send_times(arrival: OpenArrival, seed: int, rate_scale: float = 1.0, count: int | None = None,
               duration: float | None = None) -> np.ndarray:
    """Send times (s) of `count` arrivals, or of every arrival before `duration`; non-decreasing,
    and the same for the same arguments."""
    if (count is None) == (duration is None):
        raise ValueError("give count or duration")
    if count is not None:
        times = _draw(arrival, np.random.default_rng(seed), rate_scale, count)
        if len(times) < count:
            raise ValueError(f"a ramp down to 0 ends after {len(times)} arrivals, fewer than the {count} asked for; "
                             "ask for fewer requests, or give a duration")
        return times
    n = int(duration * mean_rate(arrival) * rate_scale * 1.2) + 64
    while True:  # draw more until past the duration; the stream's prefix is the same each time
        times = _draw(arrival, np.random.default_rng(seed), rate_scale, n)
        if len(times) < n or times[-1] >= duration:  # past the duration, or the process ended
            return times[times < duration]
        n *= 2


def _draw(arrival: OpenArrival, rng: np.random.Generator, rate_scale: float, n: int) -> np.ndarray:
    if isinstance(arrival, Poisson | Constant | Gamma):
        rate = arrival.rate * rate_scale
        if isinstance(arrival, Poisson):
            gaps = rng.exponential(1.0 / rate, size=n)
        elif isinstance(arrival, Constant):
            gaps = np.full(n, 1.0 / rate)
        else:
            shape = 1.0 / arrival.cv**2  # a gamma's CV is 1/sqrt(shape)
            gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
        gaps[0] = 0.0  # the first request goes at once
        return np.cumsum(gaps)
    levels = np.cumsum(rng.exponential(1.0, size=n)) / rate_scale
    return _inverse_cumulative(arrival, levels)


def is_closed(arrival) -> bool:
    return isinstance(arrival, Closed)
