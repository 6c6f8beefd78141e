"""The fitting maths of `loadtest calibrate`, on the engine's own scheduler in virtual time: what a
known profile produced, the fit must give back."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from cluster.sim.acceptance import Acceptance, expected_tokens_per_step, request_alphas
from cluster.sim.calibration import LLAMA3_70, deployment
from cluster.sim.fitting import Window, fit_acceptance, fit_acceptance_from_counters, fit_hardware, loads
from cluster.sim.offline import SimRequest, simulate

TRUE = {"compute_efficiency": 0.5, "kv_read_efficiency": 0.6, "step_overhead_s": 0.004}


def _windows(dep, concurrency: int, seed: int) -> list[Window]:
    rng = random.Random(seed)
    reqs = [SimRequest(0.0, rng.randint(200, 2000), rng.randint(100, 450), "summarize") for _ in range(concurrency * 3)]
    res = simulate(dep, reqs, concurrency=concurrency)
    return [Window(np.array(r.chunk_s) + r.arrival_s, np.array(r.chunk_tokens), q.prompt_tokens, r.arrival_s)
            for r, q in zip(res, reqs, strict=True) if r]


def test_the_hardware_fit_recovers_the_constants_that_made_the_steps():
    base = deployment(None, tp=4, model=LLAMA3_70)
    measured = replace(base, hardware=base.hardware.with_fit(**TRUE))
    observed = [o for i, c in enumerate((1, 16, 64, 128)) for o in loads(_windows(measured, c, i))]
    fit = fit_hardware(base, observed)      # from the default profile, as a user would
    assert not fit.held and fit.residual_pct < 0.5
    for name, value in TRUE.items():
        assert fit.values[name] == pytest.approx(value, rel=0.01), name


def _histograms(acc: Acceptance, k: int, n: int, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    hist = np.zeros((n, k + 1))
    decode_tokens = np.zeros(n)
    for i in range(n):
        alphas = request_alphas(rng, acc, k)
        accepted = np.cumprod(rng.random((steps, k)) < alphas, axis=1).sum(axis=1)
        drafted = rng.random(steps) < acc.match
        accepted = np.where(drafted, accepted, 0)
        hist[i] = np.bincount(accepted[drafted], minlength=k + 1)
        decode_tokens[i] = steps + accepted.sum()
    return hist, np.full(n, steps), decode_tokens


@pytest.mark.parametrize("acc", [Acceptance((0.6, 0.55, 0.5), 0.3), Acceptance((0.7,), 1.0, 0.3)])
def test_the_acceptance_fit_recovers_positions_spread_and_match(acc):
    hist, steps, tokens = _histograms(acc, 3, 400, 120, 0)
    fit = fit_acceptance(hist, steps, tokens).acceptance
    positions = [acc.positions[min(i, len(acc.positions) - 1)] for i in range(3)]
    assert fit.positions == pytest.approx(positions, abs=0.04)   # a ratio per request: noisy where few reach
    assert fit.spread == pytest.approx(acc.spread, abs=0.1) and fit.match == pytest.approx(acc.match, abs=0.02)
    assert expected_tokens_per_step(fit, 3) == pytest.approx(expected_tokens_per_step(acc, 3), rel=0.03)


def test_without_histograms_the_counters_and_tokens_per_step_give_the_profile():
    acc = Acceptance((0.6, 0.55, 0.5), 0.3)
    hist, steps, tokens = _histograms(acc, 3, 400, 120, 1)
    drafts = hist.sum()
    per_position = [hist[:, p + 1:].sum() / drafts for p in range(3)]    # what /metrics counts
    fit = fit_acceptance_from_counters(per_position, 1.0, float(tokens.sum() / steps.sum()), 0.3)
    assert fit.modelled_tokens_per_step == pytest.approx(fit.tokens_per_step, rel=0.01)
    assert fit.acceptance.positions == pytest.approx(acc.positions, abs=0.05)
