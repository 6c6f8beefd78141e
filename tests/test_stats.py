"""Every statistic of the comparison against a direct numpy computation on raw rows, and the
bootstrap interval's coverage on seeded synthetic cases."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.slo import MET, MISSED, UNJUDGED, request_meets, targets_of
from analysis.stats import (
    EXACT_RANKS_MAX,
    MIN_BOOTSTRAP_PAIRS,
    counter_increase,
    itl_per_chunk,
    itl_per_token,
    min_bootstrap_pairs,
    paired_speedup_ci,
    paired_speedups_ci,
    percentiles,
    percentiles_with_intervals,
    quantile_ranks,
    supported_count,
    tokens_per_step,
)
from analysis.summary import attainment
from contract.records import REQUEST_SCHEMA, meets_slos
from tests.summaries import summarize


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


def test_past_20000_pairs_the_little_bootstraps_hold_the_true_ratio_in_about_95_percent_of_cases():
    """The bag of little bootstraps (forced here at 3,000 pairs so the test is quick), for two
    metrics at once, one missing on every 7th request as TPOT is on one-token answers."""
    hits, cases = np.zeros(2), 300
    for seed in range(cases):
        rng = np.random.default_rng(20_000 + seed)
        true_log = rng.uniform(-0.5, 0.8)
        base = rng.lognormal(7, 0.6, 3000)
        mode = base / np.exp(rng.normal(true_log, 0.4, 3000))
        gappy = mode.copy()
        gappy[::7] = math.nan
        ratios = paired_speedups_ci([(base, mode), (base, gappy)], seed=seed, exact_max_pairs=0)
        hits += [r.low <= math.exp(true_log) <= r.high for r in ratios]
        assert ratios[1].pairs == 3000 - len(range(0, 3000, 7))
        assert ratios[1].value == pytest.approx(math.exp(np.nanmean(np.log(base / gappy))))
    assert all(0.92 <= h / cases <= 0.98 for h in hits), hits / cases


def test_the_little_bootstraps_agree_with_the_full_bootstrap_on_one_large_sample():
    rng = np.random.default_rng(8)
    base = rng.lognormal(7, 0.6, 30_000)
    mode = base / rng.lognormal(0.2, 0.5, 30_000)
    blb = paired_speedup_ci(base, mode)                           # 30,000 pairs: the little bootstraps
    full = paired_speedup_ci(base, mode, exact_max_pairs=10**9)
    assert blb.value == full.value
    width = full.high - full.low
    assert abs(blb.low - full.low) < 0.1 * width and abs(blb.high - full.high) < 0.1 * width


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
    view = summarize(table, ["baseline", "eagle"])
    for mode in ("baseline", "eagle"):
        mine = [(r, m) for r, m in zip(rows, expect, strict=True) if r["mode"] == mode]
        # the steady window: from the first arrival plus the E2E p99 (warm-up) to the last arrival (then drain)
        p99 = np.percentile([r["e2e_ms"] for r, _ in mine if r["status"] == "ok"], 99)
        start = min(r["scheduled_ns"] for r, _ in mine) + p99 * 1e6
        end = max(r["scheduled_ns"] for r, _ in mine)
        inside = [m for r, m in mine if m and start <= r["last_token_ns"] <= end]
        assert view.get(mode, "steady_window_s", "length") == pytest.approx((end - start) / 1e9)
        assert view.get(mode, "goodput_req_per_s", "rate") == pytest.approx(len(inside) / ((end - start) / 1e9))
        assert view.get(mode, "goodput_share", "share") == pytest.approx(sum(m for _, m in mine) / 200)
    verdicts = attainment(view, targets_of(table, ["baseline", "eagle"]))
    assert [(a.mode, a.tenant) for a in verdicts] == [(m, t) for m in ("baseline", "eagle") for t in ("chat", "code")]
    for a in verdicts:
        mine = [(r, m) for r, m in zip(rows, expect, strict=True) if r["mode"] == a.mode and r["tenant"] == a.tenant]
        assert (a.requests, a.met) == (len(mine), sum(m for _, m in mine))
        ok = [r for r, _ in mine if r["status"] == "ok"]
        p99 = np.percentile([r["ttft_ms"] for r in ok], 99)
        assert a.checks["ttft"] == (pytest.approx(p99), target[a.tenant][0])
        assert a.bounds["ttft"][2] == len(ok)
        assert set(a.checks) == ({"ttft", "tpot"} if a.tenant == "chat" else {"ttft", "e2e"})
        assert a.passed == all(v <= t for v, t in a.checks.values())


def test_a_run_without_targets_has_no_goodput():
    table = pa.Table.from_pylist([_row("baseline", i, "chat", 500.0) for i in range(5)], schema=REQUEST_SCHEMA)
    view = summarize(table, ["baseline"])
    assert view.get("baseline", "goodput_req_per_s", "rate") is None and view.get("baseline", "goodput_share",
                                                                                     "share") is None
    for col in ("slo_ttft_p99_ms", "slo_tpot_p99_ms", "slo_e2e_p99_ms"):     # targets of none: no tenant judged
        table = table.append_column(col, pa.array([math.nan] * 5))
    assert targets_of(table, ["baseline"]) == {}


def test_counter_increase_survives_a_reset():
    values = np.array([100.0, 130.0, 160.0, 20.0, 50.0])   # the server restarted after 160
    expect = (130 - 100) + (160 - 130) + 20 + (50 - 20)
    assert counter_increase(values) == expect
    assert counter_increase(np.array([5.0])) == 0.0
    assert counter_increase(np.array([1.0, 4.0, 9.0])) == 9.0 - 1.0


def test_server_acceptance_from_counter_increases_with_a_reset_on_one_replica():
    from analysis.server import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POS, spec_decode_stats
    from cluster.scrape import METRICS_SCHEMA

    # replica a: scraped three times; replica b restarted between its 2nd and 3rd scrape.
    scrapes = {"a": {DRAFTS: [0, 10, 30], DRAFT_TOKENS: [0, 50, 150], ACCEPTED: [0, 20, 70]},
               "b": {DRAFTS: [5, 15, 4], DRAFT_TOKENS: [25, 75, 20], ACCEPTED: [10, 40, 3]}}
    pos = {"a": {"0": [0, 8, 25], "1": [0, 6, 20]}, "b": {"0": [4, 12, 3], "1": [3, 9, 0]}}
    rows = []
    for rep, metrics in scrapes.items():
        for metric, values in metrics.items():
            rows += [{"time_ns": i, "mode": "eagle", "replica": rep, "metric": metric, "labels": "{}", "value": v}
                     for i, v in enumerate(values)]
        for p, values in pos[rep].items():
            rows += [{"time_ns": i, "mode": "eagle", "replica": rep, "metric": PER_POS,
                      "labels": f'{{"position": "{p}"}}', "value": v} for i, v in enumerate(values)]
    stats = spec_decode_stats(pa.Table.from_pylist(rows, schema=METRICS_SCHEMA), "eagle")

    def grew(v):  # by hand: the sum of rises, and after a drop the value itself
        return sum(b - a if b >= a else b for a, b in pairwise(v))

    drafts = grew(scrapes["a"][DRAFTS]) + grew(scrapes["b"][DRAFTS])
    assert drafts == 30 + 14
    accepted = grew(scrapes["a"][ACCEPTED]) + grew(scrapes["b"][ACCEPTED])
    tokens = grew(scrapes["a"][DRAFT_TOKENS]) + grew(scrapes["b"][DRAFT_TOKENS])
    assert stats.acceptance_rate == pytest.approx(accepted / tokens)
    assert stats.mean_acceptance_length == pytest.approx(1 + accepted / drafts)
    assert stats.per_position == pytest.approx(
        [(grew(pos["a"][p]) + grew(pos["b"][p])) / drafts for p in ("0", "1")])


def test_the_long_summary_against_numpy_on_raw_rows():
    from analysis.long_summary import long_summary

    rng = np.random.default_rng(11)
    rows = []
    for mode in ("baseline", "draft"):
        for i in range(120):
            tenant = ("chat", "code")[i % 2]
            steps = int(rng.integers(2, 8))
            tokens = [int(rng.integers(1, 4))] + [int(rng.integers(1, 5 if mode == "draft" else 2))
                                                  for _ in range(steps)]
            ttft = float(rng.lognormal(5, 0.4))
            itl = [ttft] + [float(rng.uniform(10, 40)) for _ in range(steps)]
            r = _row(mode, i, tenant, e2e=float(sum(itl)), ttft=ttft, tpot=float(rng.uniform(5, 30)),
                     status="error" if i % 29 == 5 else "ok")
            r.update(itl_ms=itl, chunk_tokens=tokens, n_chunks=len(tokens), completion_tokens=sum(tokens),
                     error_kind="http" if r["status"] == "error" else None, e2e_sched_ms=float(sum(itl)) + 3.0)
            rows.append(r)
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    long = long_summary(table, "r", ["baseline", "draft"])
    got = {(r["mode"], r["tenant"], r["metric"], r["statistic"]): (r["value"], r["ci_low"], r["ci_high"])
           for r in long.to_pylist()}
    for mode in ("baseline", "draft"):
        for tenant in ("all", "chat", "code"):
            mine = [r for r in rows if r["mode"] == mode and (tenant == "all" or r["tenant"] == tenant)]
            ok = [r for r in mine if r["status"] == "ok"]
            key = (mode, tenant)
            assert got[(*key, "requests", "ok")][0] == len(ok)
            assert got[(*key, "requests", "error/http")][0] == len(mine) - len(ok)
            for metric in ("ttft_ms", "e2e_sched_ms"):
                assert got[(*key, metric, "p95")][0] == pytest.approx(np.percentile([r[metric] for r in ok], 95))
            chunk_gaps = [g for r in ok for g in r["itl_ms"][1:]]
            token_gaps = [g / n for r in ok for g, n in zip(r["itl_ms"][1:], r["chunk_tokens"][1:], strict=True)]
            assert got[(*key, "itl_chunk_ms", "p99")][0] == pytest.approx(np.percentile(chunk_gaps, 99))
            assert got[(*key, "itl_token_ms", "p50")][0] == pytest.approx(np.percentile(token_gaps, 50))
            after_first = [n for r in ok for n in r["chunk_tokens"][1:]]
            assert got[(*key, "tokens_per_step", "mean")][0] == pytest.approx(np.mean(after_first))
            if mode == "draft":
                base = {r["request_id"]: r for r in rows if r["mode"] == "baseline" and r["status"] == "ok"}
                pairs = [(base[r["request_id"]]["tpot_ms"], r["tpot_ms"]) for r in ok if r["request_id"] in base]
                value, low, high = got[(*key, "speedup_tpot", "geomean")]
                assert value == pytest.approx(math.exp(np.mean([math.log(b / m) for b, m in pairs])))
                assert low < value < high
                assert got[(*key, "speedup_tpot", "pairs")][0] == len(pairs)
    assert ("baseline", "all", "speedup_e2e", "geomean") not in got


def test_the_long_summary_leaves_out_modes_not_asked_for_and_modes_without_rows():
    from analysis.long_summary import long_summary

    rows = [_row(mode, i, ("chat", "code")[i % 3 == 0], e2e=100.0 + i) for mode in ("baseline", "ngram", "eagle")
            for i in range(30)]
    rows = [r for r in rows if not (r["mode"] == "eagle" and r["tenant"] == "code")]   # eagle served no code
    long = long_summary(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), "r", ["baseline", "eagle", "medusa"])
    cells = {(r["mode"], r["tenant"]) for r in long.to_pylist()}
    assert cells == {("baseline", "all"), ("baseline", "chat"), ("baseline", "code"), ("eagle", "all"),
                     ("eagle", "chat")}
    got = {(r["mode"], r["tenant"], r["metric"], r["statistic"]): r["value"] for r in long.to_pylist()}
    eagle = [r["e2e_ms"] for r in rows if r["mode"] == "eagle"]
    assert got[("eagle", "all", "e2e_ms", "p90")] == pytest.approx(np.percentile(eagle, 90))
    assert got[("eagle", "all", "requests", "ok")] == len(eagle)
    assert got[("eagle", "chat", "speedup_e2e", "pairs")] == len(eagle)


def test_per_request_acceptance_against_numpy_on_raw_rows():
    """The responses' own counts (spec_*), summed per tenant: rate, mean length and per position."""
    from analysis.long_summary import long_summary

    rng = np.random.default_rng(12)
    rows = []
    for i in range(90):
        r = _row("eagle", i, ("chat", "code")[i % 2], e2e=500.0, status="error" if i == 7 else "ok")
        hist = rng.integers(0, 6, size=4).tolist()             # steps that accepted 0, 1, 2, 3 drafts
        r.update(spec_steps=sum(hist), spec_draft_tokens=3 * sum(hist),
                 spec_accepted_tokens=sum(k * n for k, n in enumerate(hist)), spec_acceptance_histogram=hist)
        if i == 11:                                            # a response without the server's counts
            r.update(spec_steps=None, spec_draft_tokens=None, spec_accepted_tokens=None, spec_acceptance_histogram=None)
        if i == 13:                                            # ... and one whose histogram alone was malformed
            r.update(spec_acceptance_histogram=None)
        rows.append(r)
    long = long_summary(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), "r", ["eagle"])
    got = {(r["tenant"], r["metric"], r["statistic"]): r["value"] for r in long.to_pylist()}
    for tenant in ("all", "chat", "code"):
        mine = [r for r in rows if r["status"] == "ok" and r["spec_acceptance_histogram"] is not None
                and tenant in ("all", r["tenant"])]
        hist = np.sum([r["spec_acceptance_histogram"] for r in mine], axis=0)
        steps, accepted = hist.sum(), (np.arange(4) * hist).sum()
        assert got[(tenant, "mean_acceptance_length", "requests")] == pytest.approx(1 + accepted / steps)
        assert got[(tenant, "acceptance_rate", "requests")] == pytest.approx(accepted / (3 * steps))
        for pos in (1, 2, 3):   # steps that accepted at least `pos` drafts
            share = got[(tenant, "request_acceptance_at_position", f"pos{pos}")]
            assert share == pytest.approx(hist[pos:].sum() / steps)


@pytest.mark.parametrize(("n", "q"), [(5, 0.5), (6, 0.5), (35, 0.9), (36, 0.9), (50, 0.9), (367, 0.99), (368, 0.99),
                                      (400, 0.95), (1000, 0.5)])
def test_a_percentiles_ranks_are_the_binomials_own(n, q):
    """The interval's ranks against the binomial computed term by term (math.comb): the lowest
    rank leaves at most 2.5% below it, the highest at most 2.5% above; past the data, 0 or n + 1."""
    def cdf(k: int) -> float:
        return sum(math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k + 1)) if k >= 0 else 0.0

    low, high = quantile_ranks(n, q)
    assert cdf(low - 1) <= 0.025 < cdf(low)
    assert (high == n + 1 and 1 - cdf(n - 1) > 0.025) or (1 - cdf(high - 1) <= 0.025 < 1 - cdf(high - 2))
    bounded = 1 <= low and high <= n
    assert bounded == (n >= supported_count(q)), (n, q, low, high)   # the stated rule: p50 6, p90 36, p99 368


def test_a_percentiles_interval_covers_it_and_too_few_runs_past_the_data():
    rng = np.random.default_rng(5)
    truth = math.log(10)   # the exponential's p90
    hits = 0
    for _ in range(2000):
        _, low, high = percentiles_with_intervals(rng.exponential(size=50))["p90"]
        hits += low <= truth <= high
    assert hits / 2000 >= 0.94            # distribution-free: at least its 95%, less sampling noise
    few = percentiles_with_intervals(rng.exponential(size=100))
    assert few["count"][0] == 100 and math.isnan(few["p99"][2]) and not math.isnan(few["p99"][1])
    assert not any(math.isnan(b) for b in few["p50"][1:])
    exact, normal = quantile_ranks(EXACT_RANKS_MAX, 0.99), quantile_ranks(EXACT_RANKS_MAX + 1, 0.99)
    assert normal[0] == pytest.approx(exact[0], abs=2) and normal[1] == pytest.approx(exact[1], abs=3)


@pytest.mark.parametrize("n, above, verdict", [
    (100, 0, UNJUDGED),    # every request within 50 ms, but 100 cannot bound a p99 above: not a pass
    (400, 0, MET),         # 400 can: the p99's interval [.., ..] lies within the target
    (100, 10, MISSED),     # a tenth above the target: the p99's interval lies above it, even of 100
    (400, 4, UNJUDGED),    # 1% above (the p99 itself within): the interval holds the target
    (5, 0, UNJUDGED),
])
def test_an_slo_is_met_or_missed_only_where_the_p99s_interval_says_so(n, above, verdict):
    rows = [_row("baseline", i, "chat", e2e=1000.0, tpot=80.0 if i < above else 20.0 + i % 20) for i in range(n)]
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    for col, value in (("slo_ttft_p99_ms", math.nan), ("slo_tpot_p99_ms", 50.0), ("slo_e2e_p99_ms", math.nan)):
        table = table.append_column(col, pa.array([value] * n, pa.float64()))
    (a,) = attainment(summarize(table, ["baseline"]), targets_of(table, ["baseline"]))
    assert a.verdict == verdict
    low, high, count = a.bounds["tpot"]
    assert count == n and (a.passed or above)        # as measured, within target where none is above
    assert (verdict == UNJUDGED) == bool(a.unjudged())
    if verdict == MET:
        assert high <= 50.0 and n >= supported_count(0.99)
    if verdict == MISSED:
        assert low > 50.0


def test_a_speedup_of_fewer_pairs_than_distinct_resamples_allow_has_no_interval_to_read():
    assert MIN_BOOTSTRAP_PAIRS == 8 == min_bootstrap_pairs(2000)   # C(13, 7) = 1,716 < 2,000 <= C(15, 8)
    two = paired_speedup_ci(np.array([100.0, 200.0]), np.array([98.0, 199.0]))
    assert two.pairs == 2 and two.too_few and not two.significant and two.text().endswith("(too few: 2 pairs)")
    eight = paired_speedup_ci(np.linspace(100, 200, 8), np.linspace(50, 100, 8))
    assert not eight.too_few and eight.significant and eight.low > 1.9


def test_a_time_series_has_a_bounded_number_of_points_whatever_the_span():
    from analysis.html import MAX_TIME_BINS, per_second

    t = np.array([0.0, 0.5, 1.5, 1.3e9])          # a trace of 42 years once made 1.3 billion one-second bins
    x, rate = per_second(t)
    assert len(x) <= MAX_TIME_BINS + 1 and float((rate * (x[1] - x[0])).sum()) == pytest.approx(4.0)
    x, rate = per_second(np.array([0.2, 0.7, 1.1]))  # a short one keeps its one-second bins
    assert list(x) == [0.0, 1.0] and list(rate) == [2.0, 1.0]
