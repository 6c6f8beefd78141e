"""Mergeable histograms and the client's verdict on itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadtest.request.client_stats import ClientStats, verdict
from loadtest.request.histogram import LogHistogram
from loadtest.request.tally import Tally


def test_quantiles_within_one_percent_and_merge_is_exact():
    rng = np.random.default_rng(0)
    values = rng.lognormal(np.log(20), 0.8, size=20000)  # ITL-like: tens of ms
    whole = LogHistogram()
    parts = [LogHistogram(), LogHistogram(), LogHistogram()]
    for i, v in enumerate(values):
        whole.add(float(v))
        parts[i % 3].add(float(v))
    merged = LogHistogram()
    for p in parts:
        merged.merge(p.to_dict())  # as sent by workers
    assert merged.counts == whole.counts and merged.count == 20000
    for q in (0.5, 0.9, 0.99):
        assert whole.quantile(q) == pytest.approx(float(np.quantile(values, q)), rel=0.01)
    sub_ms = LogHistogram()
    for v in (0.21, 0.22, 0.23):
        sub_ms.add(v)
    assert sub_ms.quantile(0.5) == pytest.approx(0.22, rel=0.01)  # fine below a millisecond


@settings(max_examples=200)
@given(st.lists(st.floats(0.02, 1e6), min_size=1, max_size=60), st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_a_quantile_of_few_values_is_the_reports_within_one_percent(values, q):
    """As the analysis defines it (linear between the order statistics either side), not the
    nearest order statistic: the board's p99 of 25 requests is the report's."""
    h = LogHistogram()
    for v in values:
        h.add(v)
    assert h.quantile(q) == pytest.approx(float(np.quantile(values, q)), rel=0.01)


def _row(lateness: float) -> dict:
    return {"tenant": "chat", "status": "ok", "error_kind": None, "sent_ns": 1, "n_chunks": 3, "ttft_ms": 50.0,
            "tpot_ms": 10.0, "e2e_ms": 70.0, "lateness_ms": lateness, "itl_ms": [50.0, 10.0, 10.0]}


def test_verdict_flags_lateness_and_hot_workers():
    calm = Tally()
    calm.observe_many([_row(0.5)] * 100)
    assert verdict(ClientStats().load(), calm.total(), lateness_limit_ms=10)["client_limited"] is False
    records, worker = Tally(), ClientStats()
    for i in range(100):
        records.observe(_row(30.0 if i >= 95 else 0.5))
        worker.observe(_row(0.0))
    master = ClientStats()
    master.merge(worker.take(cpu=0.95))
    v = verdict(master.load(), records.total(), lateness_limit_ms=10)
    assert v["client_limited"] and len(v["reasons"]) == 2
    assert v["lateness_ms"]["count"] == 100 and records.total().count("itl") == 200
    assert v["cpu_max"] == 0.95 and master.events == 300
