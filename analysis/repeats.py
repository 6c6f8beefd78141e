"""Runs that replayed the same trace (repeats on other days, after a redeploy), read as one
experiment: per mode and figure, each run's estimate with its own 95% interval, and the spread
between the runs, so that a boot-to-boot difference is not read as a speedup.

Runs replayed the same trace when their `trace.parquet` hold the same requests on the same
schedule (`trace_digest`: a hash of what `analysis.compare` pairs requests by, their id, tenant,
API, prompt or messages, max_tokens and send offset), whatever the manifest calls the scenario.

Every run's figure is read off its own long summary (summary.parquet: analysis.long_summary, the
one computation of it); what is new here is the spread between the runs' figures (`Spread`):
- min..max of the runs' estimates, and their standard deviation (ddof 1) from 2 runs;
- from MIN_RUNS_FOR_INTERVAL runs, the 95% t-interval of the mean of the runs' estimates
  (mean +- t(0.975, N - 1) sd / sqrt(N)): each run is one draw of the fleet's boot-to-boot
  behaviour, so this interval bounds the figure's mean over boots (one boot may land outside
  it); with fewer, none;
- whether the runs disagree more than sampling explains: the range of their estimates is wider
  than the range N runs that differ only by sampling would span 95% of the time. A run's 95%
  interval is about 2 x 1.96 standard errors wide, so from the widest of the runs' own intervals
  (the paired bootstrap of a speedup, the distribution-free interval of a percentile) that range
  is its width x q(N) / 3.92, q(N) the 95% quantile of the range of N standard normals (2.77 for
  2 runs, 3.31 for 3, 4.47 for 10: `range_quantile`). The false alarm stays at 5% however many
  runs; when it trips, the fleet differed between the runs. Not judged when a run's interval is
  not to be read (too few requests or pairs).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.compare import CONTENT, SCHEDULE, CompareError, read_trace
from analysis.decision import BASELINE
from analysis.long_summary import SummaryView
from analysis.stats import CONFIDENCE, MIN_BOOTSTRAP_PAIRS
from analysis.summary import NAMES, SHOWN, TOO_FEW
from common.times import ms_text

# the figures a run's console table shows of each mode (its latency percentiles, less the send
# lateness, which is the client's), and the paired E2E speedup over the run's own baseline
SPEEDUP = ("speedup_e2e", "geomean")
FIGURES = (*((metric, stat) for metric, stat in SHOWN if metric != "lateness_ms"), SPEEDUP)
MIN_RUNS_FOR_INTERVAL = 3   # the fewest runs whose estimates give an interval of their mean (2 give t = 12.7)
DIGEST_BATCH_ROWS = 10_000  # trace rows hashed at once (memory holds one batch's text)
# the last cell of a figure's row: its runs' spread against the widest of their own intervals
WIDER, WITHIN, NOT_JUDGED = "wider: runs disagree", "within", "not judged"


def trace_digest(run_dir: Path) -> str | None:
    """A hash of the requests a run's trace holds and when each was sent (`analysis.compare`'s
    CONTENT and SCHEDULE, by request id): equal for runs that replayed the same trace. None when
    the folder has no trace it can read (nothing says what it replayed)."""
    try:
        table = read_trace(run_dir)
    except (CompareError, OSError, pa.ArrowException):    # none, or not a Parquet file
        return None
    table = table.sort_by("request_id").select(["request_id", *CONTENT, *SCHEDULE])
    digest = hashlib.sha256()
    for batch in table.to_batches(max_chunksize=DIGEST_BATCH_ROWS):
        columns = [pc.fill_null(c.cast(pa.string()), "\x00null") for c in batch.columns]
        rows = pc.binary_join_element_wise(*columns, "\x1f")
        digest.update("\x1e".join(rows.to_pylist()).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student-t critical value: P(|T| <= t) = confidence for T with `df` degrees of
    freedom (12.706 for df 1, 4.303 for 2, 2.776 for 4 at 95%), found by bisection on the t
    distribution's closed form for whole degrees of freedom (Abramowitz & Stegun 26.7.3-4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df}: need at least 1")

    def within(t: float) -> float:      # P(|T| <= t)
        theta = math.atan(t / math.sqrt(df))
        c2, s = math.cos(theta) ** 2, math.sin(theta)
        if df % 2:     # odd: 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2.4/(3.5) cos^4 + ...))
            term, total = 1.0, 1.0 if df > 1 else 0.0
            for k in range(1, (df - 1) // 2):
                term *= 2 * k / (2 * k + 1) * c2
                total += term
            return 2 / math.pi * (theta + s * math.cos(theta) * total)
        term, total = 1.0, 1.0     # even: sin (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 + ...)
        for k in range(1, df // 2):
            term *= (2 * k - 1) / (2 * k) * c2
            total += term
        return s * total

    low, high = 0.0, 1.0
    while within(high) < confidence:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if within(mid) < confidence else (low, mid)
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2


@functools.cache
def range_quantile(n: int, confidence: float = CONFIDENCE) -> float:
    """The `confidence` quantile of the range (max - min) of `n` independent standard normals:
    P(R <= w) = n * integral of phi(x) (Phi(x + w) - Phi(x))^(n - 1) dx, by the trapezoid rule on a
    fine grid, then bisection on w (2.772 for 2, 3.314 for 3, 4.474 for 10 at 95%: the studentized
    range's values with infinite degrees of freedom, Harter 1960)."""
    if n < 2:
        raise ValueError(f"the range of {n} value(s): need at least 2")
    x = np.linspace(-9.0, 9.0, 7201)
    erf = np.frompyfunc(math.erf, 1, 1)
    cdf = lambda v: 0.5 * (1.0 + erf(v / math.sqrt(2.0)).astype(np.float64))   # noqa: E731
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)

    def below(w: float) -> float:
        return float(np.trapezoid(n * pdf * (cdf(x + w) - cdf(x)) ** (n - 1), x))

    low, high = 0.0, 12.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if below(mid) < confidence else (low, mid)
    return (low + high) / 2


Z_WIDTH = 2 * NormalDist().inv_cdf((1 + CONFIDENCE) / 2)   # a 95% interval's width in standard errors: 3.92


@dataclass(frozen=True)
class RunFigure:
    """One run's estimate of a figure, with its own 95% interval (NaN on a side the run's data
    cannot bound: too few requests for the percentile, too few pairs for the speedup)."""

    run_id: str
    value: float
    low: float
    high: float

    @property
    def bounded(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def width(self) -> float:
        """The interval's width; NaN when the run cannot bound it."""
        return self.high - self.low if self.bounded else math.nan


@dataclass(frozen=True)
class Spread:
    """One mode's figure across the runs that have it, in the order the runs were given."""

    mode: str
    metric: str
    statistic: str
    runs: tuple[RunFigure, ...]

    @property
    def is_speedup(self) -> bool:
        return (self.metric, self.statistic) == SPEEDUP

    @property
    def values(self) -> np.ndarray:
        return np.array([r.value for r in self.runs], dtype=np.float64)

    @property
    def n(self) -> int:
        return len(self.runs)

    @property
    def low(self) -> float:
        return float(self.values.min())

    @property
    def high(self) -> float:
        return float(self.values.max())

    @property
    def mean(self) -> float:
        return float(self.values.mean())

    @property
    def sd(self) -> float | None:
        """The standard deviation of the runs' estimates (ddof 1); None from one run."""
        return float(self.values.std(ddof=1)) if self.n >= 2 else None

    @property
    def mean_interval(self) -> tuple[float, float] | None:
        """The 95% t-interval of the mean of the runs' estimates (cut at 0); None from fewer than
        MIN_RUNS_FOR_INTERVAL runs."""
        if self.n < MIN_RUNS_FOR_INTERVAL or self.sd is None:
            return None
        half = t_quantile(self.n - 1) * self.sd / math.sqrt(self.n)
        return max(0.0, self.mean - half), self.mean + half     # a latency or a speedup is never below 0

    @property
    def within(self) -> float | None:
        """The widest of the runs' own 95% intervals; None when a run's cannot be read."""
        if not all(r.bounded for r in self.runs):
            return None
        return max(r.width for r in self.runs)

    @property
    def sampling_range(self) -> float | None:
        """The range the runs' estimates would stay within 95% of the time were they to differ by
        sampling alone (module docstring); None when a run's interval cannot be read."""
        if self.n < 2 or self.within is None:
            return None
        return self.within * range_quantile(self.n) / Z_WIDTH

    @property
    def disagree(self) -> bool | None:
        """The runs' estimates span more than sampling explains; None when not judged (one run, or
        a run's interval not to be read)."""
        limit = self.sampling_range
        return None if limit is None else self.high - self.low > limit

    @property
    def envelope(self) -> tuple[float, float] | None:
        """From the lowest run's interval to the highest's: what the runs' intervals hold together."""
        if not all(r.bounded for r in self.runs):
            return None
        return min(r.low for r in self.runs), max(r.high for r in self.runs)

    def text(self, v: float, width: bool = False) -> str:
        """A value of this figure as the views print it (a width without the x of a speedup)."""
        if self.is_speedup:
            return f"{v:.2f}" if width else f"{v:.2f}x"
        return f"{ms_text(v)} ms" if not width else ms_text(v)

    @property
    def name(self) -> str:
        if self.is_speedup:
            return "E2E speedup"
        return f"{NAMES.get(self.metric, self.metric)} {self.statistic}"

    def cells(self, run_ids: Sequence[str]) -> list[str]:
        """The row both views print (`Repeats.columns`), less the mode: the figure, each run's
        estimate (a speedup with its interval; a percentile its data cannot bound marked), the
        runs' min..max, their sd, the mean's interval, the widest run's interval, the judgement."""
        by_run = {r.run_id: r for r in self.runs}

        def run_cell(r: RunFigure | None) -> str:
            if r is None:
                return "-"
            if self.is_speedup:
                return f"{r.value:.2f}x [{r.low:.2f}-{r.high:.2f}]" if r.bounded else f"{r.value:.2f}x too few"
            return ms_text(r.value) + ("" if r.bounded else TOO_FEW)

        interval = self.mean_interval
        sd = self.sd
        return [self.name, *[run_cell(by_run.get(run_id)) for run_id in run_ids],
                f"{self.text(self.low, True)}..{self.text(self.high, True)}",
                "-" if sd is None else self.text(sd, width=True),
                (f"{self.text(self.mean, True)} [{self.text(interval[0], True)}, {self.text(interval[1], True)}]"
                 if interval else "too few runs" if self.n >= 2 else "-"),
                "-" if self.within is None else self.text(self.within, width=True),
                {True: WIDER, False: WITHIN, None: NOT_JUDGED}[self.disagree]]

    @property
    def reading(self) -> tuple[float, float] | None:
        """What to read the figure as across the runs, never narrower than the data supports: the
        95% t-interval of the mean of the runs' estimates, widened to the runs' own intervals
        together (`envelope`) where they reach further; None from fewer than
        MIN_RUNS_FOR_INTERVAL runs (too few for an interval across them)."""
        interval = self.mean_interval
        if interval is None:
            return None
        envelope = self.envelope or interval
        return min(interval[0], envelope[0]), max(interval[1], envelope[1])

    def verdict(self) -> str:
        """One line a reader can act on: whether the runs disagree more than one run's interval
        says, and what to read the figure as (`reading`), or that there are too few runs to say."""
        span = f"{self.text(self.low)}..{self.text(self.high)}"
        name = f"{self.mode} {self.name}"
        if self.n < 2:
            return f"{name}: in one run only ({self.runs[0].run_id}): no between-run spread"
        if self.disagree is None:
            said = (f"{name}: the runs span {span}; not judged against one run's interval (a run has too few "
                    f"{'paired requests' if self.is_speedup else 'requests'} for one)")
        else:
            limit = (f"{self.n} runs that differ by sampling alone span up to "
                     f"{self.text(self.sampling_range or 0.0, width=True)} 95% of the time, from their widest 95% "
                     f"interval, {self.text(self.within or 0.0, width=True)} wide")
            said = (f"{name}: the runs disagree more than sampling explains (they span {span}; {limit})"
                    if self.disagree else
                    f"{name}: the runs agree within sampling (they span {span}; {limit}): no boot-to-boot "
                    f"difference shows in {self.n} runs")
        reading = self.reading
        if reading is None:
            envelope = self.envelope
            return (f"{said}; too few runs for an interval ({self.n}; it takes {MIN_RUNS_FOR_INTERVAL})"
                    + (f": their own intervals together span {self.text(envelope[0])}..{self.text(envelope[1])}"
                       if envelope else "") + ("; repeat the run to bound it" if self.disagree else ""))
        how = f"the 95% t-interval of the mean of {self.n} runs" + (
            ", widened to the runs' own 95% intervals" if reading != self.mean_interval else "")
        return f"{said}: read it as {self.text(reading[0])}..{self.text(reading[1])} ({how})" + _holds_one(
            self, reading)


def _holds_one(s: Spread, interval: tuple[float, float] | None) -> str:
    """For a speedup, whether the interval it is to be read as holds 1.0."""
    if not s.is_speedup or interval is None or not interval[0] <= 1.0 <= interval[1]:
        return ""
    return ", which holds 1.0: across runs, no significant difference from the baseline"


@dataclass(frozen=True)
class Repeats:
    """What several runs say together: the spread of each figure when they replayed the same
    trace (`same_trace`), or why none is computed (`why`)."""

    run_ids: tuple[str, ...]               # each run's run_id (its folder where two runs share one)
    same_trace: bool
    why: str | None = None                 # why no spread: the traces differ, or one has none
    spreads: tuple[Spread, ...] = ()
    unfinished: tuple[str, ...] = ()       # "run_id (status)" of runs that did not complete

    def spread(self, mode: str, metric: str, statistic: str) -> Spread | None:
        return next((s for s in self.spreads if (s.mode, s.metric, s.statistic) == (mode, metric, statistic)), None)

    def columns(self) -> list[str]:
        """The header of the table both views print, a column per run."""
        return ["mode", "figure", *self.run_ids, "min..max", "sd", "mean [95% t-interval]", "widest run interval",
                "spread"]

    def rule(self) -> str:
        """What the table's columns are, in words (under both views' table)."""
        return ("latencies in ms, from the send; each run's estimate as its own summary has it (a speedup over "
                "that run's baseline with its paired bootstrap 95% interval; "
                f"{TOO_FEW}: a percentile its run has too few requests to bound); min..max and sd (ddof 1) of the "
                f"runs' estimates; mean [95% t-interval] of the runs' estimates, from {MIN_RUNS_FOR_INTERVAL} runs "
                "(too few runs: fewer); widest run interval: the widest of the runs' own 95% intervals (paired "
                f"bootstrap for a speedup, distribution-free for a percentile); spread: {WIDER!r} when the runs' "
                "min..max is wider than runs differing by sampling alone span 95% of the time (that interval's "
                "width x q(N)/3.92, q(N) the 95% range of N normals: the fleet differed between the runs), "
                f"{WITHIN!r} when not, {NOT_JUDGED!r} when a run's interval cannot be read")

    @property
    def speedups(self) -> list[Spread]:
        """Each mode's speedup over its run's baseline (the figure a deployment turns on), in mode order."""
        return [s for s in self.spreads if s.is_speedup and s.mode != BASELINE]

    def verdicts(self) -> list[str]:
        return [s.verdict() for s in self.speedups]


def _figure(view: SummaryView, run_id: str, mode: str, metric: str, stat: str) -> RunFigure | None:
    value = view.get(mode, metric, stat)
    if value is None:
        return None
    low, high = view.interval(mode, metric, stat)
    if (metric, stat) == SPEEDUP and (view.get(mode, metric, "pairs") or 0) < MIN_BOOTSTRAP_PAIRS:
        low = high = None       # an interval drawn from too few pairs is not to be read (analysis.stats.Ratio)
    return RunFigure(run_id, value, math.nan if low is None else low, math.nan if high is None else high)


def spreads_of(runs: Sequence[tuple[str, pa.Table]]) -> tuple[Spread, ...]:
    """Per mode (in the order the runs first hold them) and figure (FIGURES), every run's estimate
    off its long summary ((its label, its summary.parquet) per run)."""
    views = [(run_id, SummaryView(long)) for run_id, long in runs]
    modes = list(dict.fromkeys(m for _, v in views for m in v.modes))
    out = []
    for mode in modes:
        for metric, stat in FIGURES:
            found = tuple(f for run_id, v in views if (f := _figure(v, run_id, mode, metric, stat)) is not None)
            if found:
                out.append(Spread(mode, metric, stat, found))
    return tuple(out)


@dataclass(frozen=True)
class RepeatRun:
    """One run as the repeats read it."""

    folder: Path
    run_id: str
    status: str
    long: pa.Table          # its long summary (summary.parquet)
    fleet: str = ""         # the fleet it replayed against (its name and file hash): repeats share one


def repeats_of(runs: Sequence[RepeatRun]) -> Repeats:
    """Several runs together: the spread of every figure when they all replayed the same trace;
    otherwise why no spread is computed."""
    folders = [r.folder.resolve() for r in runs]
    ids = tuple(r.run_id if [x.run_id for x in runs].count(r.run_id) == 1 else str(r.folder) for r in runs)
    if len(set(folders)) < len(folders):
        twice = next(str(f) for f in folders if folders.count(f) > 1)
        return Repeats(ids, False, f"{twice} is given more than once: a run is no repeat of itself")
    digests = [(label, trace_digest(r.folder)) for label, r in zip(ids, runs, strict=True)]
    missing = [run_id for run_id, d in digests if d is None]
    if missing:
        return Repeats(ids, False, f"{', '.join(missing)} has no readable trace.parquet, so nothing says it "
                                   "replayed the same trace as the others")
    groups = list(dict.fromkeys(d for _, d in digests))
    if len(groups) > 1:
        said = "; ".join(", ".join(run_id for run_id, d in digests if d == g) for g in groups)
        return Repeats(ids, False, f"the runs replayed {len(groups)} different traces ({said}): their requests or "
                                   "send times differ")
    fleets = list(dict.fromkeys(r.fleet for r in runs))
    if len(fleets) > 1:
        said = "; ".join(f"{', '.join(i for i, r in zip(ids, runs, strict=True) if r.fleet == f)}: {f or 'unnamed'}"
                         for f in fleets)
        return Repeats(ids, False, f"the runs replayed one trace against {len(fleets)} different fleets ({said}): a "
                                   "difference between them is the fleets', not boot to boot (`loadtest compare` "
                                   "sets two runs against each other)")
    return Repeats(ids, True, spreads=spreads_of([(label, r.long) for label, r in zip(ids, runs, strict=True)]),
                   unfinished=tuple(f"{label} ({r.status})" for label, r in zip(ids, runs, strict=True)
                                    if r.status != "completed"))
