"""Traces match their spec on 50,000 requests: arrival statistics, tenant shares, length means."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from scenarios.arrivals import send_times
from scenarios.spec import Diurnal, Gamma, OnOff, Poisson, Ramp, Scenario, Steps, load_scenario
from scenarios.trace import build_trace

N = 50_000


def _cv(times: np.ndarray) -> float:
    gaps = np.diff(times)
    return float(gaps.std() / gaps.mean())


def test_poisson_and_gamma_burstiness_on_50k():
    assert _cv(send_times(Poisson(process="poisson", rate=10), seed=1, count=N)) == pytest.approx(1.0, abs=0.05)
    for cv in (0.5, 2.0, 3.0):
        times = send_times(Gamma(process="gamma", rate=10, cv=cv), seed=2, count=N)
        assert _cv(times) == pytest.approx(cv, abs=0.05)
        assert N / times[-1] == pytest.approx(10, rel=0.05)


def test_saas_mix_50k_matches_its_spec():
    s, _ = load_scenario("saas-mix")
    t = build_trace(s)
    assert t.num_rows == N
    assert _cv(t["offset_s"].to_numpy()) == pytest.approx(1.0, abs=0.05)
    for name, tenant in s.tenants.items():
        sub = t.filter(pc.equal(t["tenant"], name))
        assert sub.num_rows / N == pytest.approx(tenant.share, abs=0.01), name
        for column, dist in (("max_tokens", tenant.output_tokens), ("prompt_tokens_est", tenant.prompt_tokens)):
            if dist is None:   # a corpus tenant's prompts are its items, whole (tests/test_corpora.py)
                continue
            expected = {"fixed": lambda d: d.value, "uniform": lambda d: (d.min + d.max) / 2}.get(
                dist.dist, lambda d: d.mean)(dist)
            assert pc.mean(sub[column]).as_py() == pytest.approx(expected, rel=0.03), (name, column)


def _rate_in(times: np.ndarray, start: float, end: float) -> float:
    return float(((times >= start) & (times < end)).sum() / (end - start))


def test_time_varying_rates_follow_their_curve():
    ramp = send_times(Ramp.model_validate({"process": "ramp", "from": 2, "to": 22, "over": 1000}), 3,
                      duration=1500)
    assert _rate_in(ramp, 0, 100) == pytest.approx(3, rel=0.15)
    assert _rate_in(ramp, 900, 1000) == pytest.approx(21, rel=0.1)
    assert _rate_in(ramp, 1000, 1500) == pytest.approx(22, rel=0.05)
    steps = send_times(Steps.model_validate({"process": "steps", "steps": [
        {"rate": 5, "duration": 10}, {"rate": 0, "duration": 10}, {"rate": 20, "duration": 10}]}), 4, duration=3000)
    phase = (steps % 30) // 10
    assert [int((phase == k).sum()) for k in range(3)] == pytest.approx([5000, 0, 20000], rel=0.05)
    diurnal = send_times(Diurnal(process="diurnal", mean=10, amplitude=0.5, period=100), 5, duration=10_000)
    assert _rate_in(diurnal % 100, 20, 30) / _rate_in(diurnal % 100, 70, 80) == pytest.approx(
        (1 + 0.5 * np.sin(2 * np.pi * 0.25)) / (1 + 0.5 * np.sin(2 * np.pi * 0.75)), rel=0.1)
    onoff = send_times(OnOff(process="onoff", rate=20, on=5, off=15), 6, count=N)
    assert ((onoff % 20) > 5).sum() == 0 and N / onoff[-1] == pytest.approx(5, rel=0.05)


def test_duration_and_count_are_honoured_exactly():
    s, _ = load_scenario("burst")  # a gamma share plus a tenant with its own on/off process
    by_count = build_trace(s, requests=777)
    assert by_count.num_rows == 777
    by_time = build_trace(s, duration=120.0)
    offsets = by_time["offset_s"].to_numpy()
    assert offsets.max() < 120.0 and np.all(np.diff(offsets) >= 0)
    assert by_time.equals(build_trace(s, duration=120.0))
    assert set(by_time["tenant"].to_pylist()) == {"chat", "batch-burst"}


def test_closed_loop_scenario_marks_its_concurrency():
    s = Scenario.model_validate({
        "name": "c", "requests": 10, "arrival": {"process": "closed", "concurrency": 4},
        "tenants": {"a": {"share": 1.0, "domain": "chat", "prompt_tokens": {"dist": "fixed", "value": 9},
                          "output_tokens": {"dist": "fixed", "value": 9}}}})
    t = build_trace(s)
    assert t.schema.metadata[b"loadtest.closed_concurrency"] == b"4"
    assert t["offset_s"].to_pylist() == [0.0] * 10


def test_a_ramp_down_to_zero_ends():
    ramp = Ramp.model_validate({"process": "ramp", "from": 10, "to": 0, "over": 60})
    times = send_times(ramp, 7, duration=120)  # finishes, and nothing lands after the ramp
    assert len(times) == pytest.approx(300, rel=0.15) and times.max() < 60
    with pytest.raises(ValueError, match="ramp down to 0 ends after"):
        send_times(ramp, 7, count=10_000)
