"""When a sweep calls a level saturated, against queues whose answer is known: a fleet that keeps up,
one that falls behind (with and without a steady window), and one whose arrivals were too short to
tell, which is neither."""

from __future__ import annotations

import pyarrow as pa

from analysis.long_summary import long_summary
from analysis.sweep import LEVEL_SCHEMA, saturation, with_level
from contract.records import REQUEST_SCHEMA, RequestRecord


def _queue(rate: float, seconds: float, life_s: float, servers: int | None = None) -> pa.Table:
    """Requests arriving every 1/rate s for `seconds`, each taking `life_s` once served; with
    `servers`, at most that many served at once, the rest queued first come first served (a fleet of
    capacity servers / life_s req/s); without, none waits."""
    free = [0.0] * (servers or 1)
    rows = []
    for i in range(int(rate * seconds)):
        sent = i / rate
        if servers is None:
            start = sent
        else:
            k = min(range(servers), key=free.__getitem__)
            start = max(sent, free[k])
            free[k] = start + life_s
        end = start + life_s
        r = RequestRecord(run_id="r", mode="baseline", worker="w0", tenant="t", request_id=f"r{i:06d}",
                          scheduled_ns=round(sent * 1e9), offset_s=sent, status="ok")
        r.sent_ns, r.first_token_ns, r.last_token_ns = r.scheduled_ns, round((start + 0.05) * 1e9), round(end * 1e9)
        r.ttft_ms, r.e2e_ms = (start + 0.05 - sent) * 1e3, (end - sent) * 1e3
        r.itl_ms, r.chunk_tokens, r.completion_tokens = [r.ttft_ms, 10.0], [1, 9], 10
        rows.append(r.as_row())
    return pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)


def _judged(records: pa.Table, rate: float) -> bool | None:
    level = with_level(long_summary(records, "r", ["baseline"]), "level", rate, None).cast(LEVEL_SCHEMA)
    return saturation(level)[("level", "baseline")]


def test_a_fleet_that_keeps_up_over_a_steady_window_is_not_saturated():
    assert _judged(_queue(5.0, 100.0, 2.0), 5.0) is False


def test_a_fleet_that_falls_behind_is_saturated_with_or_without_a_steady_window():
    assert _judged(_queue(40.0, 4.0, 1.0, servers=8), 40.0) is True     # 160 requests at 5x its 8 req/s
    assert _judged(_queue(10.0, 120.0, 1.0, servers=7), 10.0) is True   # a queue two minutes long


def test_arrivals_shorter_than_a_request_s_life_are_too_few_to_judge():
    """60 requests over 12 s that each take 10 s, in a fleet that would keep up: the in-flight count
    is still filling when the arrivals end, so nothing shows either way (the issue's eagle at scale-0.5)."""
    assert _judged(_queue(5.0, 12.0, 10.0), 5.0) is None
    assert _judged(_queue(5.0, 12.0, 10.0, servers=100), 5.0) is None
