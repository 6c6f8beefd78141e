"""The highest offered rate at which every tenant meets its SLOs, found with as few probes as a
noisy boundary allows: bracket by doubling from a start rate until a probe fails, then bisect
between the last rate that passed and the first that failed until they are within `precision`
of each other. Every rate the bisection decides on (and both ends of the bracket) is probed
`repeats` times and decided by the majority, so one unlucky probe near the boundary cannot flip
the answer. A probe is any function of the rate that says whether the SLOs held: a replay in
production, a fake fleet in the tests, the offline simulator for a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Probe:
    rate: float
    passed: bool
    attempt: int          # 0, 1, ... for the repeats at one rate
    phase: str            # "bracket", "confirm" or "bisect"


@dataclass
class Capacity:
    rate: float | None            # the highest rate that passed (None: even `start` failed)
    failed_at: float | None       # the lowest rate that failed (None: none failed up to max_rate)
    probes: list[Probe] = field(default_factory=list)
    reason: str = ""              # why the search stopped

    @property
    def precise(self) -> bool:
        return self.rate is not None and self.failed_at is not None


def _decide(probe: Callable[[float], bool], rate: float, repeats: int, phase: str, log: list[Probe]) -> bool:
    """The majority of `repeats` probes at `rate`, counting those already made there (stopping as
    soon as a majority is reached)."""
    before = [p for p in log if p.rate == rate]
    passed, failed = sum(p.passed for p in before), sum(not p.passed for p in before)
    need = repeats // 2 + 1
    attempt = len(before)
    while passed < need and failed < need:
        ok = bool(probe(rate))
        log.append(Probe(rate, ok, attempt, phase))
        passed, failed, attempt = passed + ok, failed + (not ok), attempt + 1
    return passed >= need


def search_capacity(probe: Callable[[float], bool], start: float, max_rate: float, precision: float = 0.05,
                    repeats: int = 1, max_probes: int = 200, min_rate: float | None = None) -> Capacity:
    """Bracket by doubling from `start` up to `max_rate` (or, when `start` fails, by halving
    down to `min_rate`, default `start`), then bisect until the bracket is within `precision`
    (relative to its low end). `repeats` (odd) probes decide each rate near the boundary; the
    bracketing probes once per rate and then confirms both ends."""
    floor = start if min_rate is None else min_rate
    if not (0 < floor <= start <= max_rate and 0 < precision < 1 and repeats >= 1 and repeats % 2 == 1):
        raise ValueError("need 0 < min_rate <= start <= max_rate, 0 < precision < 1 and an odd number of repeats")
    log: list[Probe] = []
    low, high = None, None
    rate = start
    while True:                                   # climb (or descend): one probe per rate
        ok = bool(probe(rate))
        log.append(Probe(rate, ok, 0, "bracket"))
        if ok:
            low = rate
            if high is not None or rate >= max_rate:
                break
            rate = min(rate * 2, max_rate)
        else:
            high = rate
            if low is not None or rate / 2 < floor:
                break
            rate /= 2
    # confirm the bracket's ends by majority (a single lucky or unlucky probe must not set it):
    # a failure that the majority overturns becomes the low end, and the climb goes on
    while high is not None and _decide(probe, high, repeats, "confirm", log):
        low, high = high, (min(high * 2, max_rate) if high < max_rate else None)
    while low is not None and not _decide(probe, low, repeats, "confirm", log):
        high, low = low, (low / 2 if low / 2 >= floor else None)
    if low is None:
        return Capacity(None, high, log, f"even {high:.3g} failed its SLOs")
    if high is None:
        return Capacity(low, None, log, f"every rate up to {max_rate:g} met the SLOs")
    while (high - low) / low > precision:
        if len(log) >= max_probes:
            return Capacity(low, high, log, f"stopped after {max_probes} probes")
        mid = (low + high) / 2
        if _decide(probe, mid, repeats, "bisect", log):
            low = mid
        else:
            high = mid
    return Capacity(low, high, log, f"bracket within {precision:.0%}")


def choose(answers: dict[str, tuple[float, bool]], raise_with: str | None = None) -> str:
    """The mode to choose from each mode's (highest rate within the SLOs, whether that was the
    top of the search), in words; ties and an answer at the top of the search said as such (with
    the option that searches higher, `raise_with`)."""
    best_value = max(answers.values(), default=(0.0, False))
    best = [m for m, v in answers.items() if v[0] == best_value[0] and v[0] > 0]
    higher = f": raise {raise_with} to find its limit" if raise_with else ""
    top = (f" (it met the SLOs up to the top of the search, {best_value[0]:,.2f} req/s{higher})"
           if best_value[1] else "")
    if not best:
        return "No mode met the SLOs at any rate probed."
    if len(best) > 1:
        return f"{', '.join(best)} met the SLOs up to {best_value[0]:,.2f} req/s alike: no choice between them here."
    if len(answers) == 1:
        return f"{best[0]} is the only mode searched{top}: give --modes to choose between modes."
    return f"For this traffic choose **{best[0]}**{top}."


@dataclass(frozen=True)
class CapacityRow:
    """One mode's line of a capacity table: its search (None: not searched or stopped before an
    answer, `why` says which), the goodput at the rate found (None where not measured) and
    what failed just above it."""

    mode: str
    found: Capacity | None
    binding: str = "-"
    goodput_req_per_s: float | None = None
    why: str = "not searched"


def capacity_table(rows: list[CapacityRow], gpus: int, with_goodput: bool,
                   raise_with: str | None = None) -> tuple[list[str], str]:
    """The capacity table's lines (header first) and the choice between the modes in words: one
    rendering for the measured search (`loadtest capacity`) and the model's (`plan --capacity`).
    A rate found at the top of the search is shown as `>= rate`; per GPU is over the fleet's
    `gpus` a mode."""
    header = ["mode", "max req/s", "per GPU", *(["goodput req/s"] if with_goodput else []), "binding SLOs", "search"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|" + ("---:|" if with_goodput else "") + "---|---|"]
    answers: dict[str, tuple[float, bool]] = {}
    for r in rows:
        f = r.found
        if f is None:
            lines.append("| " + " | ".join([r.mode, "-", "-", *(["-"] if with_goodput else []), "-", r.why]) + " |")
            continue
        top = f.rate is not None and f.failed_at is None     # the search's top passed
        above = ">= " if top else ""
        rate = "-" if f.rate is None else f"{above}{f.rate:,.2f}"
        per_gpu = "-" if f.rate is None else f"{above}{f.rate / gpus:,.3f}"
        goodput = ["-" if r.goodput_req_per_s is None else f"{r.goodput_req_per_s:,.2f}"] if with_goodput else []
        answers[r.mode] = (f.rate or 0.0, top)
        lines.append("| " + " | ".join([r.mode, rate, per_gpu, *goodput, r.binding or "-",
                                         f"{f.reason} ({len(f.probes)} probes)"]) + " |")
    return lines, choose(answers, raise_with)
