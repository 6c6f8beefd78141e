"""Every statistic of the comparison against a direct numpy computation on raw rows, and the
bootstrap interval's coverage on seeded synthetic cases."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.slo import attainment, request_meets
from analysis.stats import (
    itl_per_chunk,
    itl_per_token,
    meets_slos,
    paired_speedup_ci,
    percentiles,
    tokens_per_step,
)
from analysis.summary import summarize
from loadtest.records import REQUEST_SCHEMA


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
@settings(max_examples=50, deadline=None)
def test_percentiles_are_numpys_linear_percentiles_and_the_max(values):
    got = percentiles(np.array([*values, math.nan]))   # NaN is ignored
    for p in (50, 90, 95, 99):
        assert got[f"p{p}"] == pytest.approx(np.percentile(values, p))
    assert got["max"] == max(values)


def test_paired_speedup_is_the_geometric_mean_of_per_request_ratios():
    rng = np.random.default_rng(1)
    base = rng.lognormal(7, 0.5, 500)
    mode = base / rng.lognormal(0.3, 0.2, 500)
    mode[3] = math.nan            # a request without the metric is not paired
    r = paired_speedup_ci(base, mode)
    keep = np.isfinite(mode)
    assert r.pairs == 499
    assert r.value == pytest.approx(math.exp(np.mean(np.log(base[keep] / mode[keep]))))
    assert r.low < r.value < r.high and r.significant
    # The interval is a paired bootstrap of that mean: redo it by hand with the same draws.
    logs = np.log(base[keep]) - np.log(mode[keep])
    idx = np.random.default_rng(2026).integers(0, 499, size=(2000, 499))
    low, high = np.exp(np.percentile(logs[idx].mean(axis=1), [2.5, 97.5]))
    assert (r.low, r.high) == (pytest.approx(low), pytest.approx(high))


def test_no_difference_is_said_as_such():
    rng = np.random.default_rng(3)
    base = rng.lognormal(7, 0.5, 300)
    r = paired_speedup_ci(base, base * rng.lognormal(0, 0.3, 300))
    assert not r.significant and r.text().endswith("(n.s.)")
    assert paired_speedup_ci(np.array([]), np.array([])) is None


def test_the_95_percent_interval_holds_the_true_ratio_in_about_95_percent_of_cases():
    hits, cases = 0, 300
    for seed in range(cases):
        rng = np.random.default_rng(10_000 + seed)
        true_log = rng.uniform(-0.5, 0.8)
        base = rng.lognormal(7, 0.6, 150)
        mode = base / np.exp(rng.normal(true_log, 0.4, 150))
        r = paired_speedup_ci(base, mode, resamples=1000, seed=seed)
        hits += r.low <= math.exp(true_log) <= r.high
    assert 0.91 <= hits / cases <= 0.98, hits / cases


def test_slos_per_request():
    ttft = np.array([100.0, 900.0, 100.0, 100.0, 100.0])
    tpot = np.array([10.0, 10.0, 80.0, math.nan, 10.0])
    e2e = np.array([1e3, 1e3, 1e3, 1e3, 1e3])
    ok = np.array([True, True, True, True, False])
    nan = np.full(5, math.nan)
    got = meets_slos(ttft, tpot, e2e, np.full(5, 500.0), np.full(5, 50.0), nan, ok)
    # within both; TTFT over; TPOT over; one token (no TPOT) meets; failed never meets
    assert got.tolist() == [True, False, False, True, False]
    assert meets_slos(ttft, tpot, e2e, nan, nan, nan, ok).tolist() == ok.tolist()   # no targets


def test_tokens_per_step_leaves_out_the_prefill_chunk_whatever_it_held():
    chunks = [[3, 2, 4], [1], [2, 1], None]
    assert tokens_per_step(chunks) == pytest.approx((2 + 4 + 1) / 3)
    assert math.isnan(tokens_per_step([[5]]))


def test_itl_per_chunk_and_per_token():
    itl = [[250.0, 30.0, 20.0], [100.0], [90.0, 12.0]]     # [0] is send -> first chunk (the TTFT)
    chunks = [[1, 3, 2], [1], [1, 1]]
    assert itl_per_chunk(itl).tolist() == [30.0, 20.0, 12.0]
    assert itl_per_token(itl, chunks).tolist() == pytest.approx([10.0, 10.0, 12.0])


def _row(mode, i, tenant, e2e, ttft=100.0, tpot=10.0, status="ok"):
    return {"run_id": "r", "mode": mode, "replica": "x", "worker": "w0", "tenant": tenant, "request_id": f"q{i}",
            "status": status, "scheduled_ns": i * 10**8, "sent_ns": i * 10**8, "first_token_ns": i * 10**8 + 1,
            "last_token_ns": i * 10**8 + int(e2e * 1e6), "offset_s": i / 10, "lateness_ms": 0.1, "ttft_ms": ttft,
            "tpot_ms": tpot, "e2e_ms": e2e, "ttft_sched_ms": ttft, "e2e_sched_ms": e2e, "itl_ms": [ttft, tpot],
            "chunk_tokens": [1, 1], "n_chunks": 2, "prompt_tokens": 10, "completion_tokens": 2,
            "finish_reason": "length", "http_status": 200, "error_kind": None, "error": None}


def test_goodput_and_attainment_against_numpy_on_raw_rows():
    rng = np.random.default_rng(5)
    rows = []
    for mode in ("baseline", "eagle"):
        for i in range(200):
            tenant = "chat" if i % 2 else "code"
            ttft = float(rng.lognormal(5.5 if mode == "baseline" else 5.3, 0.5))
            rows.append(_row(mode, i, tenant, e2e=ttft + 2000, ttft=ttft, tpot=float(rng.uniform(5, 60)),
                             status="error" if i % 37 == 0 else "ok"))
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    target = {"chat": (300.0, 50.0, math.nan), "code": (500.0, math.nan, 5000.0)}
    for j, col in enumerate(("slo_ttft_p99_ms", "slo_tpot_p99_ms", "slo_e2e_p99_ms")):
        table = table.append_column(col, pa.array([target[r["tenant"]][j] for r in rows], pa.float64()))
    meets = request_meets(table)
    expect = [r["status"] == "ok" and r["ttft_ms"] <= target[r["tenant"]][0]
              and (math.isnan(target[r["tenant"]][1]) or r["tpot_ms"] <= target[r["tenant"]][1])
              and (math.isnan(target[r["tenant"]][2]) or r["e2e_ms"] <= target[r["tenant"]][2]) for r in rows]
    assert meets.tolist() == expect
    base, eagle = summarize(table, ["baseline", "eagle"])
    first = min(r["scheduled_ns"] for r in rows)
    for s, mode in ((base, "baseline"), (eagle, "eagle")):
        mine = [(r, m) for r, m in zip(rows, expect, strict=True) if r["mode"] == mode]
        end = max(r["last_token_ns"] for r, _ in mine if r["status"] == "ok")
        assert s.goodput_req_per_s == pytest.approx(sum(m for _, m in mine) / ((end - first) / 1e9))
        assert s.goodput_share == pytest.approx(sum(m for _, m in mine) / 200)
    for a in attainment(table, ["baseline", "eagle"]):
        ok = [r for r in rows if r["mode"] == a.mode and r["tenant"] == a.tenant and r["status"] == "ok"]
        p99 = np.percentile([r["ttft_ms"] for r in ok], 99)
        assert a.checks["ttft"] == (pytest.approx(p99), target[a.tenant][0])
        assert set(a.checks) == ({"ttft", "tpot"} if a.tenant == "chat" else {"ttft", "e2e"})
        assert a.passed == all(v <= t for v, t in a.checks.values())


def test_a_run_without_targets_has_no_goodput():
    table = pa.Table.from_pylist([_row("baseline", i, "chat", 500.0) for i in range(5)], schema=REQUEST_SCHEMA)
    (s,) = summarize(table, ["baseline"])
    assert math.isnan(s.goodput_req_per_s) and math.isnan(s.goodput_share)
