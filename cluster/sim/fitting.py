"""Fitting the performance model to a measured fleet, as pure functions (`loadtest calibrate`).

Hardware. A request's decode runs from its first token to its last, one step per chunk after the
first, so its mean step time is (last - first) / (chunks - 1). Over that window the engine held,
on average, some number of decoding sequences, some KV cache and some prefill; all three follow
from every request's own window (`Window`). The performance model's step time is affine in the
reciprocal compute efficiency, the reciprocal KV-read efficiency and the step overhead, with the
other constants held, so those three come from one linear least-squares fit over the requests.
(The weight-read efficiency and the step overhead are one number to a single model: the fit
keeps the first and puts the difference into the second.)

Acceptance. Per method and domain: the per-position conditional acceptance pooled from each
request's acceptance histogram (vLLM's --per-request-spec-decode-metrics, or the simulator's);
the share of steps that proposed (n-gram); and the per-request spread, the spread of each
request's logit offset less what its finite number of steps alone would give.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from cluster.sim import perf_model
from cluster.sim.acceptance import Acceptance, expected_tokens_per_step, tokens_per_step
from cluster.sim.profiles import MAX_NUM_BATCHED_TOKENS

FITTED_HARDWARE = ("compute_efficiency", "kv_read_efficiency", "step_overhead_s")
MIN_STEPS = 8          # a request with fewer decode steps says too little about its step time
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


@dataclass(frozen=True, eq=False)
class Window:
    """One request's chunks as the client saw them: when each arrived (seconds, first token
    first) and the tokens each carried; the first is the prefill's."""

    times: np.ndarray
    tokens: np.ndarray
    prompt_tokens: int
    sent_s: float | None = None     # when it was sent (None: at its first token's step)

    @property
    def steps(self) -> int:
        return len(self.times) - 1


@dataclass(frozen=True)
class StepLoad:
    """What the engine carried over one request's decode steps, and their mean time. Every chunk
    is one engine step of its request, so the sequence-steps inside the window are counted, not
    guessed: `decoding` is the mean number of sequences per step, `kv_tokens` their mean context,
    `prefill_tokens` the mean prompt tokens per step of the requests whose prefill ended inside."""

    step_s: float
    decoding: float
    kv_tokens: float
    prefill_tokens: float


def loads(windows: list[Window]) -> list[StepLoad]:
    """Each request's mean step time beside the mean load over its decode steps (requests with at
    least MIN_STEPS of them); every request of the replica counts towards the others' load."""
    # each request's chunk times, and the context (prompt + tokens so far) it attended to there
    times = [w.times for w in windows]
    contexts = [w.prompt_tokens + np.concatenate([[0.0], np.cumsum(w.tokens)[:-1]]) for w in windows]
    cum_ctx = [np.concatenate([[0.0], np.cumsum(c)]) for c in contexts]
    first = np.array([t[0] for t in times])
    sent = np.array([w.sent_s if w.sent_s is not None else t[0] for w, t in zip(windows, times, strict=True)])
    prompt = np.array([w.prompt_tokens for w in windows], dtype=np.float64)
    # prompts waiting or prefilling at once with each one: more than a step's budget, it was chunked
    together = np.array([prompt[(sent <= f) & (first >= s)].sum() for s, f in zip(sent, first, strict=True)])
    chunked = together > MAX_NUM_BATCHED_TOKENS
    out = []
    for w in windows:
        if w.steps < MIN_STEPS:
            continue
        a, b = float(w.times[0]), float(w.times[-1])
        # A prefill computed in chunks (when the prompts waiting exceed one step's token budget:
        # a burst, the start of a closed loop) may have run on both sides of an edge of the
        # window, so what fell inside is unknown: such a window says nothing exact.
        if (chunked & (((sent < a) & (first > a)) | ((sent < b) & (first > b)))).any():
            continue
        seq_steps = kv = 0.0
        for t, cc in zip(times, cum_ctx, strict=True):
            if t[-1] <= a or t[0] > b:
                continue
            # this request's decode chunks inside (a, b]: steps of the engine inside the window
            lo, hi = max(1, int(np.searchsorted(t, a, "right"))), int(np.searchsorted(t, b, "right"))
            if hi > lo:
                seq_steps += hi - lo
                kv += cc[hi] - cc[lo]
        # a prefill that ended inside computed its prompt there, attending to it as it went
        prefill = float(prompt[(first > a) & (first <= b)].sum())
        out.append(StepLoad((b - a) / w.steps, seq_steps / w.steps, (kv + prefill) / w.steps, prefill / w.steps))
    return out


def _basis(dep: perf_model.Deployment, load: StepLoad, drafted: float) -> np.ndarray:
    """The step time's terms at this load: [const, per 1/compute_eff, per 1/kv_eff, per overhead]."""
    hw = dep.hardware

    def at(c: float, kv: float, o: float) -> float:
        d = replace(dep, hardware=hw.with_fit(compute_efficiency=1 / c if c else 1e12,
                                              kv_read_efficiency=1 / kv if kv else 1e12, step_overhead_s=o))
        return perf_model.step_s(d, load.decoding, load.kv_tokens, load.prefill_tokens, 0,
                                 drafted=load.decoding * drafted)

    const = at(0, 0, 0)
    return np.array([const, at(1, 0, 0) - const, at(0, 1, 0) - const, at(0, 0, 1) - const])


@dataclass(frozen=True)
class HardwareFit:
    values: dict[str, float]      # the fitted constants (FITTED_HARDWARE)
    held: tuple[str, ...]         # those the data could not fix, kept at the prior profile's values
    residual_pct: float           # RMS of (model - measured) / measured mean step time, %
    requests: int


def _solve(basis: np.ndarray, y: np.ndarray, prior: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """Least squares on relative error for the constants the data can fix; a constant driven to
    zero or below is held at its prior value and the rest solved again."""
    free, held, coef = list(FITTED_HARDWARE), [], dict(prior)
    while free and len(y) >= len(free) + 2:
        rhs = y - basis[:, 0] - sum(basis[:, 1 + FITTED_HARDWARE.index(n)] * prior[n] for n in held)
        cols = [1 + FITTED_HARDWARE.index(n) for n in free]
        sol, *_ = np.linalg.lstsq(basis[:, cols] / y[:, None], rhs / y, rcond=None)
        bad = [n for n, v in zip(free, sol, strict=True) if not v > 0]
        if not bad:
            coef.update(zip(free, sol.tolist(), strict=True))
            return coef, held
        free.remove(bad[0])
        held.append(bad[0])
    return dict(prior), list(FITTED_HARDWARE)


def fit_hardware(dep: perf_model.Deployment, observed: list[StepLoad], drafted: float = 1.0) -> HardwareFit:
    """compute_efficiency, kv_read_efficiency and step_overhead_s that best explain `observed`.
    Robust: after a first fit, requests whose step time it misses by more than 3 robust standard
    deviations (a client that fell behind, a stalled process) are left out and the fit made again."""
    hw = dep.hardware
    prior = {"compute_efficiency": 1 / hw.compute_efficiency, "kv_read_efficiency": 1 / hw.kv_read_efficiency,
             "step_overhead_s": hw.step_overhead_s}
    basis = np.stack([_basis(dep, o, drafted) for o in observed]) if observed else np.zeros((0, 4))
    y = np.array([o.step_s for o in observed])

    def rel_error(coef: dict[str, float]) -> np.ndarray:
        pred = basis[:, 0] + sum(basis[:, 1 + i] * coef[n] for i, n in enumerate(FITTED_HARDWARE))
        return (pred - y) / y

    coef, held = _solve(basis, y, prior)
    if len(y):
        err = rel_error(coef)
        mad = 1.4826 * float(np.median(np.abs(err - np.median(err))))
        keep = np.abs(err) <= max(3 * mad, 0.01)
        if keep.sum() < len(y) and keep.sum() >= len(FITTED_HARDWARE) + 2:
            basis, y = basis[keep], y[keep]
            coef, held = _solve(basis, y, prior)
    resid = float(np.sqrt(np.mean(rel_error(coef) ** 2)) * 100) if len(y) else float("nan")
    values = {"compute_efficiency": 1 / coef["compute_efficiency"],
              "kv_read_efficiency": 1 / coef["kv_read_efficiency"], "step_overhead_s": coef["step_overhead_s"]}
    return HardwareFit(values, tuple(held), resid, len(y))


@dataclass(frozen=True)
class AcceptanceFit:
    acceptance: Acceptance
    requests: int
    tokens_per_step: float        # measured: decode tokens over decode steps
    modelled_tokens_per_step: float


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def _population_mean(center: float, spread: float) -> float:
    """A position's conditional acceptance averaged over requests, for a centre and a spread."""
    return float(np.dot(_GH_WEIGHTS, 1 / (1 + np.exp(-(_logit(np.array(center)) + spread * _GH_NODES)))))


def _centre(target: float, spread: float) -> float:
    """The centre whose average over requests is `target` (bisection on the logit)."""
    lo, hi = -9.0, 9.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if _population_mean(1 / (1 + np.exp(-mid)), spread) < target:
            lo = mid
        else:
            hi = mid
    return float(1 / (1 + np.exp(-(lo + hi) / 2)))


def fit_acceptance(histograms: np.ndarray, decode_steps: np.ndarray, decode_tokens: np.ndarray,
                   seed: int = 0) -> AcceptanceFit:
    """One method's acceptance on one domain from its requests: `histograms[i, a]` steps of request
    i that accepted a drafts (0..K), `decode_steps[i]` its steps after the first token (drafted or
    not), `decode_tokens[i]` its tokens after the first.

    Requests count equally (pooling their steps would weight the slow, low-acceptance ones more):
    each position's conditional acceptance is averaged over requests, the spread is that of the
    requests' logit offsets less what their finite steps alone give, and the profile's centre is
    the value whose average over that spread is the measured one."""
    hist = np.asarray(histograms, dtype=np.float64)
    k = hist.shape[1] - 1
    drafted = hist.sum(axis=1)
    match = float(drafted.sum() / max(np.asarray(decode_steps).sum(), 1))
    usable = drafted >= MIN_STEPS
    rows = hist[usable] if usable.sum() >= 3 else hist[drafted > 0]
    at_least = rows[:, ::-1].cumsum(axis=1)[:, ::-1]            # steps accepting >= a, a = 0..K
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = at_least[:, 1:] / at_least[:, :-1]
    measured_cond = np.array([np.nanmean(c) if np.isfinite(c).any() else 0.0 for c in cond.T])
    mean_acc = (rows * np.arange(k + 1)).sum(axis=1) / np.maximum(rows.sum(axis=1), 1)
    grid = np.linspace(-4, 4, 161)
    rng = np.random.default_rng(seed)
    centre, spread = np.clip(measured_cond, 0, 0.999), 0.0
    for _ in range(3):
        curve = np.array([tokens_per_step(1 / (1 + np.exp(-(_logit(centre) + z)))) - 1 for z in grid])
        z = np.interp(mean_acc, curve, grid)
        # finite steps spread the offsets too: the same estimate on draws with no spread at all
        noise = [np.interp(np.cumprod(rng.random((int(n), k)) < centre, axis=1).sum(axis=1).mean(), curve, grid)
                 for n in rows.sum(axis=1)]
        spread = float(np.sqrt(max(0.0, np.var(z) - np.var(noise)))) if len(z) > 2 else 0.0
        centre = np.array([_centre(c, spread) if 0 < c < 1 else c for c in measured_cond])
    acc = Acceptance(tuple(float(min(c, 0.999)) for c in centre), spread, min(match, 1.0))
    measured = float(np.sum(decode_tokens) / max(np.sum(decode_steps), 1))
    return AcceptanceFit(acc, len(hist), measured, expected_tokens_per_step(acc, k))


def fit_acceptance_from_counters(per_position: list[float], match: float, tokens_per_step: float,
                                 spread: float) -> AcceptanceFit:
    """One method's acceptance on one domain where the server reported no per-request histograms:
    the shape per position from its /metrics counters (`per_position[p]`: the share of drafts that
    accepted position p), moved on the logit until the profile gives the client's `tokens_per_step`
    for the domain; the spread is not measured and stays `spread` (the method's default)."""
    cum = np.clip(np.asarray(per_position, dtype=np.float64), 1e-4, 1 - 1e-4)
    shape = cum / np.concatenate([[1.0], cum[:-1]])
    shape = np.clip(shape, 1e-4, 0.999)
    k = len(shape)

    def expected(z: float) -> float:
        acc = Acceptance(tuple(float(v) for v in 1 / (1 + np.exp(-(_logit(shape) + z)))), spread, match)
        return expected_tokens_per_step(acc, k)

    lo, hi = -8.0, 8.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected(mid) < tokens_per_step else (lo, mid)
    z = (lo + hi) / 2
    acc = Acceptance(tuple(float(min(v, 0.999)) for v in 1 / (1 + np.exp(-(_logit(shape) + z)))), spread, match)
    return AcceptanceFit(acc, 0, tokens_per_step, expected_tokens_per_step(acc, k))
