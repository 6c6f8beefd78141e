"""The frontier SREs compare on (SemiAnalysis' InferenceMAX): per mode, each level a point of
interactivity (output tokens per second per user) against output tokens per second per GPU;
its Pareto-optimal points, and in words where a speculating mode's frontier lies above the
baseline's and where it stops paying. Pure: points in, points and sentences out (the reading of
sweep.parquet into points is analysis.sweep_html's).

The frontier at an interactivity x is the most output tokens/s per GPU any level gave while
giving each user at least x output tokens/s (`best_at`): a staircase through the Pareto points,
falling as x grows. Two modes' frontiers are compared at every interactivity where either has a
Pareto point, up to the highest both reach; between two such points both staircases are flat,
so the ratio there is the ratio at the upper one, and nothing is interpolated between levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import groupby


@dataclass(frozen=True)
class Point:
    """One level of one mode on the frontier chart."""

    level: str
    interactivity: float          # output tokens/s per user (per request)
    per_gpu: float                # output tokens/s per GPU
    slo: str | None = None        # the level's SLO verdict (analysis.slo's words); None: no targets

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interactivity) and self.interactivity > 0
                and math.isfinite(self.per_gpu) and self.per_gpu > 0):
            raise ValueError(f"a frontier point needs positive, finite figures: {self}")


def dominates(a: Point, b: Point) -> bool:
    """`a` is at least as interactive and gives at least as many tokens/s per GPU, and more of one."""
    return (a.interactivity >= b.interactivity and a.per_gpu >= b.per_gpu
            and (a.interactivity > b.interactivity or a.per_gpu > b.per_gpu))


def pareto_front(points: list[Point]) -> list[Point]:
    """The points no other point dominates, from the least interactive up (so the most tokens/s
    per GPU first). A handful of levels: every pair is compared."""
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda p: (p.interactivity, -p.per_gpu))


def best_at(front: list[Point], interactivity: float) -> float | None:
    """The frontier's output tokens/s per GPU at `interactivity`: the most any point gives at that
    interactivity or higher (None: no point reaches it)."""
    return max((p.per_gpu for p in front if p.interactivity >= interactivity), default=None)


def reach(points: list[Point]) -> float:
    """The highest interactivity a mode reached."""
    return max(p.interactivity for p in points)


@dataclass(frozen=True)
class Stretch:
    """A run of interactivities over which the mode's frontier stays above the baseline's
    (`pays`), or stays at or below it: from just above `above` (None: from the lowest) up to and
    including `upto`, with the ratio at each of its points."""

    pays: bool
    above: float | None
    upto: float
    ratios: tuple[tuple[float, float], ...]    # (interactivity, mode's frontier / the baseline's)

    @property
    def best(self) -> tuple[float, float]:
        """Where the mode gains the most here (or loses the least), and the ratio there."""
        return max(self.ratios, key=lambda r: (r[1], r[0]))

    @property
    def worst(self) -> tuple[float, float]:
        return min(self.ratios, key=lambda r: (r[1], -r[0]))


def ratios(baseline: list[Point], mode: list[Point]) -> list[tuple[float, float]]:
    """(interactivity, the mode's frontier over the baseline's) at each interactivity where either
    has a Pareto point, up to the highest both reach; empty when either has no point."""
    if not baseline or not mode:
        return []
    base, other = pareto_front(baseline), pareto_front(mode)
    top = min(reach(base), reach(other))
    xs = sorted({p.interactivity for p in (*base, *other) if p.interactivity <= top})
    out = []
    for x in xs:
        b, m = best_at(base, x), best_at(other, x)
        assert b is not None and m is not None   # x <= top: both reach it
        out.append((x, m / b))
    return out


def stretches(pairs: list[tuple[float, float]]) -> list[Stretch]:
    """`ratios`' output cut where the mode starts or stops paying (its frontier above the
    baseline's: a ratio over 1; a tie does not pay)."""
    out: list[Stretch] = []
    for pays, run in groupby(pairs, key=lambda r: r[1] > 1.0):
        run_ = tuple(run)
        out.append(Stretch(pays, out[-1].upto if out else None, run_[-1][0], run_))
    return out


def _n(x: float) -> str:
    return f"{x:,.3g}"


def _x(r: float) -> str:
    return f"{r:.2f}x"


@dataclass(frozen=True)
class Shift:
    """Where one speculating mode moves the frontier against the baseline's, and where it stops
    paying, from both modes' points."""

    mode: str
    baseline: str
    stretches: tuple[Stretch, ...]
    mode_reach: float | None          # the highest interactivity each reached (None: no point)
    baseline_reach: float | None

    @property
    def pays_above(self) -> float | None:
        """The interactivity above which the mode's frontier is higher, up to the highest both
        reach (0.0: at every interactivity; None: not at the top of the range)."""
        if not self.stretches or not self.stretches[-1].pays:
            return None
        return self.stretches[-1].above or 0.0

    @property
    def stops_paying_at(self) -> float | None:
        """The highest interactivity at which the baseline's frontier is as high or higher (None:
        nowhere both reach)."""
        return max((s.upto for s in self.stretches if not s.pays), default=None)

    def text(self) -> str:
        """The finding in words: where the mode's frontier is above the baseline's, by how much, and
        the interactivity at which it stops paying."""
        m, b, ss = self.mode, self.baseline, self.stretches
        if self.mode_reach is None or self.baseline_reach is None:
            missing = m if self.mode_reach is None else b
            return f"{m}: no frontier to compare ({missing} has no level with both figures)."
        unit = "output tokens/s per user"

        def said(s: Stretch) -> str:
            return (f"{_span(s)} {m}'s is higher ({_range(s)} the {b}'s)" if s.pays
                    else f"{_span(s)} the {b}'s is as high or higher ({m} {_range(s)})")

        if len(ss) == 1:
            (bx, _), top = ss[0].best, _n(ss[0].upto)
            out = (f"{m}'s frontier is above the {b}'s at every interactivity both reach (up to {top} {unit}): "
                   f"{_range(ss[0])} the {b}'s output tokens/s per GPU, the most at {_n(bx)}+ {unit}; it does not stop "
                   "paying in the range measured." if ss[0].pays else
                   f"{m} does not move the frontier: the {b}'s is as high or higher at every interactivity both reach "
                   f"(up to {top} {unit}), {m} giving {_range(ss[0])} its output tokens/s per GPU.")
        elif ss[-1].pays:
            (bx, br), below = ss[-1].best, ss[-2]
            out = (f"At {_n(bx)}+ {unit}, {m} gives {_x(br)} the {b}'s output tokens/s per GPU: its frontier is above "
                   f"the {b}'s at every interactivity above {_n(below.upto)} up to {_n(ss[-1].upto)} {unit} "
                   f"({_range(ss[-1])}). It stops paying at {_n(below.upto)} {unit}"
                   + (" and below" if len(ss) == 2 else "")
                   + f", where the {b}'s frontier is as high or higher ({m} {_range(below)}"
                   + (f" {_span(below)})." if len(ss) > 2 else ").")
                   + ("" if len(ss) == 2 else " Lower down they cross again: " + "; ".join(map(said, ss[:-2])) + "."))
        else:
            last = max((s for s in ss if s.pays), key=lambda s: s.upto)
            out = (f"{m}'s frontier is above the {b}'s only at lower interactivity: "
                   + "; ".join(said(s) for s in ss if s.pays)
                   + f". It stops paying above {_n(last.upto)} {unit}, where the {b}'s is as high or higher ({m} "
                   + f"{_range(ss[-1])})" + ("." if len(ss) == 2 else "; in all: " + "; ".join(map(said, ss)) + "."))
        if self.mode_reach > self.baseline_reach:
            out += f" Only {m} reaches above {_n(self.baseline_reach)} {unit} (up to {_n(self.mode_reach)})."
        elif self.baseline_reach > self.mode_reach:
            out += f" Only the {b} reaches above {_n(self.mode_reach)} {unit} (up to {_n(self.baseline_reach)})."
        return out


def _span(s: Stretch) -> str:
    return f"up to {_n(s.upto)}" if s.above is None else f"above {_n(s.above)} up to {_n(s.upto)}"


def _range(s: Stretch) -> str:
    """The ratios of a stretch: one, or from the lowest to the highest."""
    lo, hi = s.worst[1], s.best[1]
    return _x(lo) if _x(lo) == _x(hi) else f"{_x(lo)} to {_x(hi)}"


def shift(mode: str, points: list[Point], baseline: str, baseline_points: list[Point]) -> Shift:
    """How `mode`'s frontier stands against the baseline's."""
    return Shift(mode, baseline, tuple(stretches(ratios(baseline_points, points))),
                 reach(points) if points else None, reach(baseline_points) if baseline_points else None)
