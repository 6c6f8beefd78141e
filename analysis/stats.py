"""The statistics of a comparison, as small pure functions over numpy arrays: percentiles, the
paired speedup with its bootstrap confidence interval, goodput under SLOs, tokens per step and
per-token inter-token latency. Each is tested against a direct numpy computation on raw rows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PERCENTILES = (50, 90, 95, 99)           # and max, in every latency summary
BOOTSTRAP_RESAMPLES = 2000               # the floor; percentile bootstrap, 95%
BOOTSTRAP_SEED = 2026
CONFIDENCE = 0.95
BOOTSTRAP_BLOCK_CELLS = 4_000_000        # resamples x pairs drawn at once: bounds memory (~32 MB of indices)
# Past this many pairs the mean's interval comes from the bag of little bootstraps (Kleiner,
# Talwalkar, Sarkar, Jordan, "A scalable bootstrap for massive data", JRSS-B 76(4), 2014): s
# subsets of b = n^gamma pairs (the paper tries gamma 0.5-0.9 and finds 0.6-0.8 as good as the
# full bootstrap), each resampled r times to full size n by weights, so a resample costs b, not
# n; s x r = BOOTSTRAP_RESAMPLES resamples in all, r = 100 as in the paper. The weights are
# Multinomial(n, 1/b) counts; each is Binomial(n, 1/b) with mean n/b >= 20,000^0.4 = 52 here, and
# is drawn by its normal approximation: numpy's multinomial costs ~95 ns a count on this
# machine, a normal draw ~7 ns (bench/analysis.py shows what the intervals cost).
BOOTSTRAP_EXACT_MAX_PAIRS = 20_000       # 2,000 x 20,000 indices: ~0.3 s on this 2-core machine
BLB_GAMMA = 0.6
BLB_RESAMPLES_PER_SUBSET = 100


def percentiles(values: np.ndarray) -> dict[str, float]:
    """p50/p90/p95/p99 (linear interpolation, numpy's default and DuckDB's quantile_cont) and
    max of the finite values; NaN for each when there are none. float32 values (the chunk
    gaps) stay float32 for the partition; the results are floats."""
    v = np.asarray(values)
    if v.dtype.kind != "f":
        v = v.astype(np.float64)
    v = v[np.isfinite(v)]          # a copy of our own, so the partition may reorder it
    if not len(v):
        return {**{f"p{p}": math.nan for p in PERCENTILES}, "max": math.nan}
    qs = np.percentile(v, PERCENTILES, overwrite_input=True)
    return {**{f"p{p}": float(q) for p, q in zip(PERCENTILES, qs, strict=True)}, "max": float(v.max())}


# A rate (completions per second over a window) of n completions is a Poisson count's: its 95%
# interval is about +-z sqrt(n) completions, +-z / sqrt(n) of the rate. One wider than
# +-RATE_RESOLUTION is shown marked, as a percentile of too few requests is: fewer than
# MIN_RATE_COUNT (62) completions.
RATE_RESOLUTION = 0.25
Z_95 = NormalDist().inv_cdf(1 - (1 - CONFIDENCE) / 2)
MIN_RATE_COUNT = math.ceil((Z_95 / RATE_RESOLUTION) ** 2)


def too_few_completions(count: float | None) -> bool:
    """A rate of `count` completions is too few to show unmarked (None: not counted, not marked)."""
    return count is not None and count < MIN_RATE_COUNT


def rate_interval(rate: float, count: float) -> tuple[float, float]:
    """The 95% interval of a rate of `count` completions (normal approximation of the Poisson
    count, floored at 0)."""
    if count <= 0:
        return 0.0, math.nan
    half = Z_95 * math.sqrt(count) / count
    return max(0.0, rate * (1 - half)), rate * (1 + half)


EXACT_RANKS_MAX = 100_000    # past this many values the ranks come from the normal approximation
# A percentile is supported by its data when its distribution-free 95% interval (the order
# statistics whose ranks bracket it, from the binomial distribution of how many values fall below
# the true percentile; Hahn & Meeker, "Statistical Intervals", 1991, ch. 5) lies inside the data
# on both sides. Past the data on a side, nothing bounds the percentile there: a p99 needs 368
# values, a p95 72, a p90 36, a p50 6 (`supported_count`). A figure with fewer is "too few".
def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """The 1-based ranks (low, high) of the order statistics that bracket the q quantile of n
    values with `confidence`: low 0 or high n + 1 where the data cannot bound that side."""
    if n <= 0:
        return 0, 1
    half = (1 - confidence) / 2
    if n > EXACT_RANKS_MAX:   # the binomial's normal approximation: within a rank or two of exact here
        mid, spread = n * q, NormalDist().inv_cdf(1 - half) * math.sqrt(n * q * (1 - q))
        return max(0, math.floor(mid - spread)), min(n + 1, math.ceil(mid + spread) + 1)
    k = np.arange(n, dtype=np.float64)
    # the binomial(n, q) log-probabilities of 0..n values below the quantile, by the pmf's ratio
    with np.errstate(divide="ignore"):
        steps = np.log(n - k) - np.log(k + 1) + math.log(q) - math.log1p(-q)
    log_pmf = np.concatenate([[n * math.log1p(-q)], n * math.log1p(-q) + np.cumsum(steps)])
    cdf = np.cumsum(np.exp(log_pmf))
    low = int(np.count_nonzero(cdf[:n] <= half))            # P(below <= low - 1) <= half
    high = int(np.searchsorted(cdf, 1 - half)) + 1            # P(below >= high) <= half
    return low, min(high, n + 1)


def supported_count(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values whose interval for the q quantile lies inside the data on both sides."""
    return math.ceil(math.log((1 - confidence) / 2) / math.log(max(q, 1 - q)))


def linear_positions(n: int, percentiles: tuple[int, ...] = PERCENTILES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where np.percentile's linear method (its default) finds each percentile of n sorted
    values, as numpy computes it: the 0-based positions of the two order statistics it lies
    between and the weight of the upper one (numpy's own arithmetic, so `linear_value` gives its
    bits; past the last value numpy takes the last, with a weight that makes no difference)."""
    virtual = (n - 1) * np.true_divide(percentiles, 100)
    below = np.floor(virtual)
    last = virtual >= n - 1
    gamma = virtual - np.where(last, -1.0, below)
    below = np.where(last, n - 1, below).astype(np.intp)
    return below, np.where(last, n - 1, below + 1), gamma


def linear_value(low: np.ndarray, high: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """The values between order statistics `low` and `high` at weight `gamma`, by numpy's own
    interpolation (numpy.lib._function_base_impl._lerp): from the nearer end."""
    diff = high - low
    return np.where(gamma >= 0.5, high - diff * (1 - gamma), low + diff * gamma)


def percentiles_with_intervals(values: np.ndarray, confidence: float = CONFIDENCE) -> dict[str, tuple]:
    """`percentiles`, each with its distribution-free interval (low, high; NaN on a side the data
    cannot bound: too few values), and `count`, the finite values they are of. One partition
    of the values at every order statistic the figures need (the percentiles' neighbours, their
    intervals' ranks and the last for the max) gives them all: the same numbers as np.percentile
    and max, in about a third of the time."""
    v = np.asarray(values, dtype=np.float64)
    return percentiles_of_own(v[np.isfinite(v)], confidence)     # a copy of our own


def partition_in_place(v: np.ndarray, kth: np.ndarray) -> None:
    """v.partition(kth) of finite float64 values. Values that are all of sign bit 0 order as their
    bits do, read as integers, and an integer partition skips the NaN-aware comparison of floats:
    a third faster, the same values at every kth (a negative value or -0.0: the float partition)."""
    bits = v.view(np.int64)
    if len(bits) and bits.min() >= 0:
        bits.partition(kth)
    else:
        v.partition(kth)


def percentiles_of_own(v: np.ndarray, confidence: float = CONFIDENCE) -> dict[str, tuple]:
    """`percentiles_with_intervals` of float64 values that are all finite and that it may reorder
    (partition in place): a caller that owns its values spends no copy on them."""
    n = len(v)
    out: dict[str, tuple] = {"count": (float(n), None, None)}
    if not n:
        return {**out, **{f"p{p}": (math.nan, math.nan, math.nan) for p in PERCENTILES}, "max": (math.nan, None, None)}
    below, above, gamma = linear_positions(n)
    ranks = {p: quantile_ranks(n, p / 100, confidence) for p in PERCENTILES}
    partition_in_place(v, np.unique([n - 1, *below, *above,
                                     *(r - 1 for pair in ranks.values() for r in pair if 1 <= r <= n)]))
    values_at = linear_value(v[below], v[above], gamma)
    for p, value in zip(PERCENTILES, values_at, strict=True):
        low, high = ranks[p]
        out[f"p{p}"] = (float(value), float(v[low - 1]) if low >= 1 else math.nan,
                        float(v[high - 1]) if high <= n else math.nan)
    out["max"] = (float(v[n - 1]), None, None)
    return out


def min_bootstrap_pairs(resamples: int = BOOTSTRAP_RESAMPLES) -> int:
    """The fewest pairs with at least `resamples` distinct bootstrap resamples (n pairs have
    C(2n - 1, n): 3 for 2 pairs, 1,716 for 7, 6,435 for 8): below it the interval is drawn from
    so few distinct values that it says nothing (two pairs give an interval as narrow as their
    spread)."""
    n = 1
    while math.comb(2 * n - 1, n) < resamples:
        n += 1
    return n


MIN_BOOTSTRAP_PAIRS = min_bootstrap_pairs()   # 8 for 2,000 resamples


@dataclass(frozen=True)
class Ratio:
    """A paired speedup: the geometric mean over requests of baseline / mode, and its CI."""

    value: float
    low: float
    high: float
    pairs: int

    @property
    def too_few(self) -> bool:
        """Fewer pairs than an interval needs (MIN_BOOTSTRAP_PAIRS): the interval is not to be read."""
        return self.pairs < MIN_BOOTSTRAP_PAIRS

    @property
    def significant(self) -> bool:
        """False when the interval holds 1.0 (no significant difference) or too few pairs draw one."""
        return not self.too_few and not (self.low <= 1.0 <= self.high)

    def text(self) -> str:
        if self.too_few:
            return f"{self.value:.2f}x (too few: {self.pairs} pairs)"
        if not self.significant:
            return f"{self.value:.2f}x (n.s.)"
        return f"{self.value:.2f}x [{self.low:.2f}, {self.high:.2f}]"


def _bootstrap(n: int, statistic, resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """The percentile-bootstrap interval of a statistic over `n` pairs: `statistic` takes a
    (k, n) array of resampled pair indices and returns the k values; drawn in blocks of at most
    BOOTSTRAP_BLOCK_CELLS indices, so memory stays bounded."""
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    block = max(1, BOOTSTRAP_BLOCK_CELLS // n)
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        values[start:start + k] = statistic(rng.integers(0, n, size=(k, n)))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def little_bootstraps_of_means(x: np.ndarray, resamples: int, seed: int, confidence: float,
                               gamma: float = BLB_GAMMA) -> np.ndarray:
    """The bag-of-little-bootstraps interval of the mean of each column of `x` (n rows, one per
    pair; NaN where a pair lacks that column's metric), as a (columns, 2) array: see
    BOOTSTRAP_EXACT_MAX_PAIRS. Each subset of b = n^gamma rows drawn without replacement is
    resampled to size n with Multinomial(n, 1/b) weights, the same weights for every column (a
    column's mean is over its finite rows); the percentiles of each subset's resampled means
    about that subset's own mean are averaged over the subsets and put about the mean of all of
    `x` (BLB estimates the spread; centring each subset's interval on its own mean would move it
    by the subsets' sampling error)."""
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    n = len(x)
    present = np.isfinite(x)
    filled = np.where(present, x, 0.0).astype(np.float32)
    b = max(2, min(n, round(n ** gamma)))
    r = min(BLB_RESAMPLES_PER_SUBSET, resamples)
    subsets = max(1, -(-resamples // r))
    tail = (1 - confidence) / 2 * 100
    count, spread = n / b, math.sqrt(n / b * (1 - 1 / b))
    bounds = np.empty((subsets, 2, x.shape[1]))
    block = max(1, BOOTSTRAP_BLOCK_CELLS // (r * b))      # subsets drawn at once
    for start in range(0, subsets, block):
        k = min(block, subsets - start)
        rows = np.stack([rng.choice(n, size=b, replace=False) for _ in range(k)])               # (k, b)
        weights = rng.standard_normal((k, r, b), dtype=np.float32)
        weights *= spread
        weights += count
        np.maximum(weights, 0.0, out=weights)
        sums, totals = weights @ filled[rows], weights @ present[rows].astype(np.float32)        # (k, r, columns)
        with np.errstate(invalid="ignore", divide="ignore"):
            own = filled[rows].sum(axis=1) / present[rows].sum(axis=1)                             # (k, columns)
            spread_k = sums / totals - own[:, None, :]
        bounds[start:start + k] = np.nanpercentile(spread_k, [tail, 100 - tail], axis=1).transpose(1, 0, 2)
    with np.errstate(invalid="ignore"):
        means = np.nanmean(np.where(present, x, np.nan), axis=0)
    return (means[None, :] + np.nanmean(bounds, axis=0)).T


def paired_speedups_ci(pairs: list[tuple[np.ndarray, np.ndarray]], resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED, confidence: float = CONFIDENCE,
                       exact_max_pairs: int = BOOTSTRAP_EXACT_MAX_PAIRS) -> list[Ratio | None]:
    """`paired_speedup_ci` of several metrics of the same requests ((base, mode) per metric,
    element i of each the same request): the metrics with more than `exact_max_pairs` pairs
    share one bag of little bootstraps (the requests resampled once for all of them)."""
    logs = []
    for base, mode in pairs:
        b, m = np.asarray(base, dtype=np.float64), np.asarray(mode, dtype=np.float64)
        keep = np.isfinite(b) & np.isfinite(m) & (b > 0) & (m > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            logs.append(np.where(keep, np.log(np.where(keep, b, 1.0)) - np.log(np.where(keep, m, 1.0)), np.nan))
    counts = [int(np.isfinite(v).sum()) for v in logs]
    out: list[Ratio | None] = [None] * len(pairs)
    large = [j for j, c in enumerate(counts) if c > exact_max_pairs]
    if large:
        matrix = np.stack([logs[j] for j in large], axis=1)
        matrix = matrix[np.isfinite(matrix).any(axis=1)]
        for j, (low, high) in zip(large, little_bootstraps_of_means(matrix, resamples, seed, confidence), strict=True):
            v = logs[j][np.isfinite(logs[j])]
            out[j] = Ratio(float(np.exp(v.mean())), float(np.exp(low)), float(np.exp(high)), counts[j])
    for j, c in enumerate(counts):
        if 0 < c <= exact_max_pairs:
            v = logs[j][np.isfinite(logs[j])]
            low, high = _bootstrap(c, lambda idx, v=v: v[idx].mean(axis=1), resamples, seed, confidence)
            out[j] = Ratio(float(np.exp(v.mean())), float(np.exp(low)), float(np.exp(high)), c)
    return out


def paired_speedup_ci(base: np.ndarray, mode: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int = BOOTSTRAP_SEED, confidence: float = CONFIDENCE,
                      exact_max_pairs: int = BOOTSTRAP_EXACT_MAX_PAIRS) -> Ratio | None:
    """Speedup of `mode` over `base`, paired (element i of each is the same request): the
    geometric mean of base/mode, with a percentile-bootstrap interval that resamples the pairs
    (past `exact_max_pairs` pairs, the bag of little bootstraps of the same mean).
    Pairs with a non-positive or non-finite value are dropped; None when no pair is left."""
    return paired_speedups_ci([(base, mode)], resamples, seed, confidence, exact_max_pairs)[0]


def paired_quantile_ratio_ci(base: np.ndarray, new: np.ndarray, q: float, resamples: int = BOOTSTRAP_RESAMPLES,
                             seed: int = BOOTSTRAP_SEED, confidence: float = CONFIDENCE) -> Ratio | None:
    """How `new`'s q-th percentile compares to `base`'s, the same requests in both (element i of
    each): p_q(new) / p_q(base), with a percentile-bootstrap interval that resamples the pairs
    (so the same requests are drawn for both). Pairs with a non-finite value are dropped."""
    b, nv = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    keep = np.isfinite(b) & np.isfinite(nv)
    b, nv = b[keep], nv[keep]
    if not len(b) or np.percentile(b, q) <= 0:
        return None
    low, high = _bootstrap(len(b), lambda idx: np.percentile(nv[idx], q, axis=1) / np.percentile(b[idx], q, axis=1),
                           resamples, seed, confidence)
    return Ratio(float(np.percentile(nv, q) / np.percentile(b, q)), low, high, len(b))


def floats(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric Arrow column as float64 numpy, nulls as NaN (what every statistic here takes):
    Arrow's conversion writes them, in the one pass that makes the numpy array."""
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False)


def count_column(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A count column (tokens, chunks) as numpy, a null as 0: an integer column's integers, whose
    sums are exact; of another type, np.nan_to_num of `floats`."""
    if pa.types.is_integer(col.type):
        return pc.fill_null(col, 0).to_numpy()
    return np.nan_to_num(floats(col))


def counter_increase(values: np.ndarray) -> float:
    """How much a Prometheus counter grew over consecutive scrapes, as PromQL's increase() counts
    it without extrapolation: a drop is a reset (the server restarted), after which the counter
    grew from zero to its new value."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return 0.0
    step = np.diff(v)
    return float(np.where(step >= 0, step, v[1:]).sum())


def _lists(values) -> pa.ChunkedArray:
    """A list column as Arrow (a Python list of lists is converted)."""
    if isinstance(values, pa.ChunkedArray):
        return values
    if isinstance(values, pa.Array):
        return pa.chunked_array([values])
    return pa.chunked_array([pa.array(values)])


def _after_first(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each list without its first element (the prefill chunk), nulls kept as nulls."""
    return pa.chunked_array([pc.list_slice(chunk, 1) for chunk in col.chunks], type=col.type) if col.num_chunks \
        else col


def tokens_per_step(chunk_tokens) -> float:
    """Mean tokens per decoding step, the client's view of the mean acceptance length: every
    chunk's tokens after the first (the prefill's, whatever it held), over those chunks. NaN when
    no request had a second chunk."""
    rest = pc.list_flatten(_after_first(_lists(chunk_tokens)))
    return (pc.sum(rest).as_py() or 0) / len(rest) if len(rest) else math.nan


def itl_per_chunk(itl_ms) -> np.ndarray:
    """Inter-token latency as a user sees it: the gaps between text chunks. A record's `itl_ms[0]`
    is send to first chunk (the TTFT), so each record's gaps start at index 1."""
    return pc.list_flatten(_after_first(_lists(itl_ms))).to_numpy().astype(np.float64)


def itl_per_token(itl_ms, chunk_tokens) -> np.ndarray:
    """Inter-token latency per token: each chunk's gap divided by the tokens it carried (three
    accepted tokens 30 ms after the previous chunk are 10 ms a token). `itl_ms[j]` and
    `chunk_tokens[j]` describe the same chunk (records without per-chunk tokens are left out);
    the first (prefill) chunk is left out."""
    itl, tokens = _lists(itl_ms), _lists(chunk_tokens)
    both = pc.and_(pc.is_valid(itl), pc.is_valid(tokens))
    same = pc.and_(both, pc.equal(pc.list_value_length(itl), pc.list_value_length(tokens)))
    same = pc.fill_null(same, False)
    gaps = pc.list_flatten(_after_first(itl.filter(same))).to_numpy().astype(np.float64)
    counts = pc.list_flatten(_after_first(tokens.filter(same))).to_numpy().astype(np.float64)
    keep = counts > 0
    return gaps[keep] / counts[keep]
