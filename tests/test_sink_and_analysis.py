"""Records survive as complete Parquet files per flush; summaries compare modes correctly."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.summary import paired_speedup, summarize, tenant_speedups
from loadtest.records import REQUEST_SCHEMA, RequestRecord
from loadtest.sink import ParquetSink


def _rec(mode: str, i: int, e2e: float, status: str = "ok") -> dict:
    r = RequestRecord(run_id="r", mode=mode, worker="w0", tenant="t", request_id=f"q{i}",
                      scheduled_ns=i * 10**8, offset_s=i / 10, status=status)
    if status == "ok":
        r.sent_ns = r.scheduled_ns
        r.ttft_ms, r.e2e_ms = 50.0, e2e
        r.first_token_ns = r.sent_ns + 50 * 10**6
        r.last_token_ns = r.sent_ns + int(e2e * 1e6)
        r.itl_ms, r.chunk_tokens, r.completion_tokens = [50.0, 10.0], [1, 9], 10
    return r.as_row()


def test_each_flush_is_a_complete_readable_file(tmp_path):
    with ThreadPoolExecutor(1) as ex:
        sink = ParquetSink(tmp_path, "w0", REQUEST_SCHEMA, ex, flush_rows=3)
        for i in range(7):
            sink.add(_rec("m", i, 100.0))
        # Before close: two full flushes are already complete files on disk.
        sink._pending[-1].result()
        files = sorted(tmp_path.glob("part-w0-*.parquet"))
        assert len(files) == 2 and sum(pq.read_metadata(f).num_rows for f in files) == 6
        sink.close()
    assert pq.read_table(tmp_path).num_rows == 7
    assert not list(tmp_path.glob(".*tmp"))


def test_tpot_follows_usage_not_chunks():
    row = _rec("m", 1, 140.0)
    assert row["tpot_ms"] == pytest.approx((140.0 - 50.0) / 9) and row["n_chunks"] == 2


def test_summary_counts_statuses_and_pairs_speedup():
    rows = [_rec("baseline", i, 200.0) for i in range(10)]
    rows += [_rec("draft", i, 100.0) for i in range(9)] + [_rec("draft", 9, 0, status="timeout")]
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    base, draft = summarize(table, ["baseline", "draft"])
    assert (base.ok, base.errors, base.speedup) == (10, 0, None)
    assert (draft.ok, draft.errors) == (9, 1)
    assert draft.speedup == pytest.approx(2.0)
    assert draft.tokens_per_chunk == pytest.approx(5.0)
    assert paired_speedup(table.slice(0, 0), table.slice(0, 10)) is None


def test_a_failed_write_is_not_silently_dropped(tmp_path):
    with ThreadPoolExecutor(1) as ex:
        sink = ParquetSink(tmp_path, "w0", REQUEST_SCHEMA, ex, flush_rows=1)
        sink.add({"not": "a record"})  # cannot be converted to the schema: the write fails
        while not sink._pending[-1].done():
            time.sleep(0.01)
        with pytest.raises(Exception):  # noqa: B017 - whatever pyarrow raises must surface
            sink.add(_rec("m", 1, 10.0))  # the next flush looks at the finished write
            sink.close()


def test_speedup_by_tenant_pairs_requests_within_each_tenant():
    rows = []
    for i in range(6):
        tenant = "chat" if i < 3 else "code"
        for mode, e2e in (("baseline", 100.0), ("draft", 50.0 if tenant == "chat" else 125.0)):
            r = _rec(mode, i, e2e)
            r["tenant"] = tenant
            rows.append(r)
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    assert tenant_speedups(table, ["baseline", "draft"]) == {"chat": {"draft": pytest.approx(2.0)},
                                                              "code": {"draft": pytest.approx(0.8)}}
