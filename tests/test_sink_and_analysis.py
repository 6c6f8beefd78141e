"""Records survive as complete Parquet files per flush; summaries compare modes correctly."""

from __future__ import annotations

import io
import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from gevent import GreenletExit
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from analysis.gate import error_checks
from analysis.html import goodput_by_mode, has_data, report_html
from analysis.long_summary import LONG_SCHEMA, SummaryView, long_summary, peak_in_flight
from analysis.reader import ContractError, read_requests
from analysis.stats import MIN_RATE_COUNT, rate_interval
from analysis.summary import RATES_SHOWN, tenant_speedups, too_few_note
from analysis.table import mode_table, steady_state_note
from contract.records import REQUEST_SCHEMA, RequestRecord
from loadtest.request.sink import ParquetSink
from tests.summaries import summarize


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


class _KilledWhileWaiting(ThreadPoolExecutor):
    """A pool whose first submit is interrupted, as gevent's ThreadPool is when the greenlet waiting
    for a free slot is killed (a replay's stop kills its request greenlets)."""

    def __init__(self) -> None:
        super().__init__(1)
        self.interrupted = False

    def submit(self, *args, **kwargs):
        if not self.interrupted:
            self.interrupted = True
            raise GreenletExit()
        return super().submit(*args, **kwargs)


def test_a_flush_killed_while_waiting_for_the_writer_loses_no_row(tmp_path):
    counted: list[int] = []
    with _KilledWhileWaiting() as ex:
        sink = ParquetSink(tmp_path, "w0", REQUEST_SCHEMA, ex, flush_rows=2,
                           on_flush=lambda rows: counted.append(len(rows)))
        sink.add(_rec("m", 0, 100.0))
        with pytest.raises(GreenletExit):
            sink.add(_rec("m", 1, 100.0))   # the batch's flush is killed
        sink.add(_rec("m", 2, 100.0))
        sink.close()
    assert sorted(pq.read_table(tmp_path)["request_id"].to_pylist()) == ["q0", "q1", "q2"]
    assert sum(counted) == 3 and sink.rows_written == 3   # each row counted once, as it went to disk


def test_tpot_follows_usage_not_chunks():
    row = _rec("m", 1, 140.0)
    assert row["tpot_ms"] == pytest.approx((140.0 - 50.0) / 9) and row["n_chunks"] == 2


def test_summary_counts_statuses_and_pairs_speedup():
    rows = [_rec("baseline", i, 200.0) for i in range(10)]
    rows += [_rec("draft", i, 100.0) for i in range(9)] + [_rec("draft", 9, 0, status="timeout")]
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    view = summarize(table, ["baseline", "draft"])
    counts = {m: (view.get(m, "requests", "ok"), view.get(m, "requests", "failed")) for m in ("baseline", "draft")}
    assert counts == {"baseline": (10, 0), "draft": (9, 1)}
    assert view.ratio("baseline", "speedup_e2e") is None
    assert view.ratio("draft", "speedup_e2e").value == pytest.approx(2.0)
    assert view.get("draft", "tokens_per_chunk", "mean") == pytest.approx(5.0)
    console = Console(file=io.StringIO(), width=400, color_system=None)    # the console table, from the same rows
    console.print(mode_table(view, ["baseline", "draft"]))
    lines = console.file.getvalue().splitlines()
    base_row, draft_row = (next(row for row in lines if row.strip(" │").startswith(m)) for m in ("baseline", "draft"))
    assert "ref" in base_row and "2.00x" in draft_row and draft_row.split("│")[-3].strip() == "1"


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
    by_tenant = tenant_speedups(long_summary(table, "r", ["baseline", "draft"]), ["baseline", "draft"])
    assert {t: {m: r.value for m, r in row.items()} for t, row in by_tenant.items()} == {
        "chat": {"draft": pytest.approx(2.0)}, "code": {"draft": pytest.approx(0.8)}}
    assert by_tenant["chat"]["draft"].pairs == 3


def test_offered_and_done_rates_peak_in_flight_and_the_steady_state():
    # 10 arrivals 0.1 s apart (0.9 s of arrivals); each lasts 200 ms: two in flight at most
    short = pa.Table.from_pylist([_rec("baseline", i, 200.0) for i in range(10)], schema=REQUEST_SCHEMA)
    s = summarize(short, ["baseline"])
    assert s.get("baseline", "offered_req_per_s", "trace") == pytest.approx(10 / 0.9)
    assert s.get("baseline", "arrival_span_s", "length") == pytest.approx(0.9)
    # over the steady window, 0.2 s (one E2E p99 of warm-up) to 0.9 s (the last arrival): the 8 that end inside
    assert s.get("baseline", "steady_window_s", "length") == pytest.approx(0.7)   # 0.9 s >= 2 x 200 ms: steady
    assert s.get("baseline", "req_per_s", "rate") == pytest.approx(8 / 0.7)
    assert s.get("baseline", "out_tok_per_s", "rate") == pytest.approx(8 * 10 / 0.7)
    assert s.get("baseline", "in_flight", "peak") == 2
    slow = pa.Table.from_pylist([_rec("baseline", i, 600.0) for i in range(10)], schema=REQUEST_SCHEMA)
    s = summarize(slow, ["baseline"])
    assert s.get("baseline", "in_flight", "peak") == 6      # 0.9 s < 2 x 600 ms: a burst being drained,
    assert s.get("baseline", "steady_window_s", "length") is None       # with no steady window,
    assert s.get("baseline", "req_per_s", "rate") is None and s.get("baseline", "out_tok_per_s", "rate") is None
    note = steady_state_note(s, ["baseline"])                            # so no throughput is given
    assert note.startswith("too short for a steady state (baseline): sends lasted 0.9 s, less than 2 x the "
                           "E2E p99 (0.6 s in baseline)") and note.endswith("(replay more requests: --requests)")
    assert steady_state_note(summarize(short, ["baseline"]), ["baseline"]) is None
    # stopped after the first 4 sends (0.3 s of the 0.9 s scheduled): the stop is why, not the trace
    stopped = pa.Table.from_pylist([_rec("baseline", i, 200.0, "ok" if i < 4 else "not_sent") for i in range(10)],
                                   schema=REQUEST_SCHEMA)
    s = summarize(stopped, ["baseline"])
    assert s.get("baseline", "arrival_span_s", "length") == pytest.approx(0.9)
    assert s.get("baseline", "sent_span_s", "length") == pytest.approx(0.3)
    assert s.get("baseline", "steady_window_s", "length") is None
    assert steady_state_note(s, ["baseline"], stopped=True) == (
        "too short for a steady state (baseline): the replay was stopped after 0.3 s of sending, less than 2 x the "
        "E2E p99 (0.2 s in baseline) the in-flight count needs to settle, so no throughput is given")


def test_peak_in_flight_against_a_brute_force_count():
    rng = np.random.default_rng(4)
    sent = rng.integers(0, 10_000, size=300)
    end = sent + rng.integers(1, 2_000, size=300)
    brute = max(int(((sent <= t) & (end > t)).sum()) for t in np.unique(np.concatenate([sent, end])))
    assert peak_in_flight(sent, end) == brute


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 300)), min_size=1, max_size=200),
       st.sampled_from([1, 1_000, 10**9]))
def test_peak_in_flight_by_buckets_is_the_exact_count(intervals, scale):
    """The bucketed count is the exact one whatever the spread: many sends in one bucket, an end
    and a send at one instant (the end first), zero-length intervals, times far apart."""
    sent = np.array([a for a, _ in intervals], dtype=np.int64) * scale
    end = sent + np.array([d for _, d in intervals], dtype=np.int64) * scale
    times = np.unique(np.concatenate([sent, end]))
    brute = max(int(((sent <= t) & (end > t)).sum()) for t in times)
    assert peak_in_flight(sent, end) == brute


def test_the_error_gate_counts_what_the_server_did_by_kind():
    rows = [_rec("baseline", i, 100.0) for i in range(17)]
    for i, (status, kind) in enumerate([("error", "http"), ("error", "http"), ("timeout", None),
                                        ("error", "interrupted"), ("timeout", "deadline"), ("not_sent", None)]):
        r = _rec("baseline", 100 + i, 0, status=status)
        r["error_kind"], r["sent_ns"] = kind, (None if status == "not_sent" else 1)
        rows.append(r)
    rows += [_rec("draft", 200 + i, 0, status="error") | {"error_kind": "not_sse", "sent_ns": 1} for i in range(3)]
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    base, draft = error_checks(summarize(table, ["baseline", "draft"]), ["baseline", "draft"], max_share=0.15)
    # the client's own doing (interrupted, cut by the deadline, never sent) is not the server's error
    assert (base.sent, base.ok, base.failed) == (20, 17, 3) and base.kinds == {"error/http": 2, "timeout": 1}
    assert base.passed and base.reason() is None
    assert not error_checks(summarize(table, ["baseline"]), ["baseline"], max_share=0.1)[0].passed
    assert not draft.passed and draft.reason() == "draft: no request succeeded (3 of 3 sent failed: error/not_sse 3)"


def test_the_reader_refuses_records_that_break_the_contract(tmp_path):
    good = pa.Table.from_pylist([_rec("baseline", i, 100.0) for i in range(3)], schema=REQUEST_SCHEMA)
    folder = tmp_path / "run" / "requests" / "mode=baseline"
    folder.mkdir(parents=True)
    pq.write_table(good, folder / "part-w0-00000.parquet")
    assert read_requests(tmp_path / "run", columns=["request_id", "status"]).num_rows == 3
    pq.write_table(good.drop_columns(["ttft_ms"]), folder / "part-w0-00000.parquet")
    with pytest.raises(ContractError, match="column 'ttft_ms' is missing"):
        read_requests(tmp_path / "run")
    bad = good.set_column(good.schema.get_field_index("status"), "status", pa.array(["ok", "done", "ok"]))
    pq.write_table(bad, folder / "part-w0-00000.parquet")
    with pytest.raises(ContractError, match="holds 'done', which is not a status"):
        read_requests(tmp_path / "run")
    with pytest.raises(ContractError, match="no request records"):
        read_requests(tmp_path / "nothing")


def _long(table: pa.Table, modes: list[str]) -> dict:
    from analysis.long_summary import long_summary

    rows = long_summary(table, "r", modes).to_pylist()
    return {(r["mode"], r["tenant"], r["metric"], r["statistic"]): r for r in rows}


def test_requests_never_sent_are_no_arrivals_of_the_steady_window():
    # 60 arrivals 0.1 s apart, each 200 ms; a --deadline left the last 20 unsent
    rows = [_rec("baseline", i, 200.0) if i < 40 else _rec("baseline", i, 0.0, status="not_sent") for i in range(60)]
    long = _long(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), ["baseline"])
    assert long[("baseline", "all", "steady_window_s", "length")]["value"] == pytest.approx(3.9 - 0.2)  # to the last
    # arrival that was sent; requests 0..37 end inside [0.2, 3.9] s
    assert long[("baseline", "all", "req_per_s", "rate")]["value"] == pytest.approx(38 / 3.7)


def test_the_console_and_the_long_summary_print_the_same_interval_whatever_the_chunking():
    rng = np.random.default_rng(9)
    rows = [_rec(mode, i, float(rng.lognormal(6, 0.3)) * (0.8 if mode == "draft" else 1.0))
            for mode in ("baseline", "draft") for i in range(600)]
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    chunked = pa.concat_tables([table.slice(k, 50) for k in range(0, table.num_rows, 50)])   # as a dataset reads
    whole = _long(table, ["baseline", "draft"])[("draft", "all", "speedup_e2e", "geomean")]
    cell = _long(chunked, ["baseline", "draft"])[("draft", "all", "speedup_e2e", "geomean")]
    assert (cell["value"], cell["ci_low"], cell["ci_high"]) == (
        pytest.approx(whole["value"]), pytest.approx(whole["ci_low"]), pytest.approx(whole["ci_high"]))
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(mode_table(summarize(chunked, ["baseline", "draft"]), ["baseline", "draft"]))
    assert f"{cell['value']:.2f}x [{cell['ci_low']:.2f}-{cell['ci_high']:.2f}]" in console.file.getvalue()


def test_a_reply_without_usage_counts_no_tokens_rather_than_wiping_out_the_rates():
    rows = [_rec("baseline", i, 200.0) for i in range(40)]
    rows[5]["completion_tokens"] = None
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    long = _long(table, ["baseline"])
    assert long[("baseline", "all", "out_tok_per_s", "rate")]["value"] > 0
    assert long[("baseline", "all", "tokens_per_chunk", "mean")]["value"] == pytest.approx(39 * 10 / 80)


def test_a_plot_with_nothing_to_draw_is_a_line_that_says_why():
    """A run too short for a steady window has no goodput rate: report.html says so in a line where
    the goodput plot would be, and draws no empty axes (nor for plots of records there are none of)."""
    modes = ["baseline", "eagle"]
    summary = pa.Table.from_pylist([{"run_id": "r", "mode": m, "tenant": "all", "metric": "goodput_req_per_s",
                                     "statistic": "rate", "value": math.nan} for m in modes], schema=LONG_SCHEMA)
    figure = goodput_by_mode(summary, modes)
    assert figure is not None and not has_data(figure)
    page = report_html("r", "# r\n\n## Modes\n", REQUEST_SCHEMA.empty_table(), summary, None, modes)
    assert '<div class="plot">' not in page
    assert ("<b>goodput: requests within every SLO of their tenant, per second</b>: nothing to plot, since no mode "
            "had a steady window") in page


def test_a_value_the_schema_cannot_hold_makes_its_request_an_error_row_not_a_lost_part(tmp_path):
    """Found by a new user: a worker died in the sink (OverflowError) on one row's time past
    int64 nanoseconds, and the rows of its part were lost with it."""
    huge_tokens = {**_rec("m", 1, 10.0), "completion_tokens": 10**12}      # past int32
    huge_time = {**_rec("m", 2, 10.0), "scheduled_ns": 10**21}             # past int64
    with ThreadPoolExecutor(1) as ex:
        sink = ParquetSink(tmp_path, "w0", REQUEST_SCHEMA, ex, flush_rows=10)
        for row in (_rec("m", 0, 10.0), huge_tokens, huge_time, _rec("m", 3, 10.0)):
            sink.add(row)
        sink.close()
    rows = {r["request_id"]: r for r in pq.read_table(tmp_path).to_pylist()}
    assert sorted(rows) == ["q0", "q1", "q2", "q3"] and sink.rows_written == 4 and sink.rows_lost == 0
    assert rows["q0"]["status"] == rows["q3"]["status"] == "ok"
    for rid, field in (("q1", "completion_tokens=1000000000000"), ("q2", "scheduled_ns=1000000000000000000000")):
        assert (rows[rid]["status"], rows[rid]["error_kind"]) == ("error", "unstorable")
        assert field in rows[rid]["error"] and rows[rid]["mode"] == "m"
    assert rows["q2"]["scheduled_ns"] == 2**63 - 1


def test_a_rate_of_too_few_completions_is_marked_as_a_percentile_of_too_few_is():
    """8 completions over the steady window: the done rate is marked, and the note gives its
    interval and count; 200 are enough (a rate needs MIN_RATE_COUNT for +-25%)."""
    few = pa.Table.from_pylist([_rec("baseline", i, 200.0) for i in range(10)], schema=REQUEST_SCHEMA)
    s = SummaryView(long_summary(few, "r", ["baseline"]))
    assert s.get("baseline", "req_per_s", "rate") == pytest.approx(8 / 0.7) and s.rate_too_few("baseline", "req_per_s")
    assert mode_table(s, ["baseline"]).columns[1]._cells[0].endswith(f"{8 / 0.7:,.2f}†")
    note = too_few_note(s, ["baseline"])
    low, high = rate_interval(8 / 0.7, 8)
    assert f"done {8 / 0.7:,.2f} req/s [{low:,.2f}, {high:,.2f}] of 8 completions" in note
    assert f"under {MIN_RATE_COUNT} completions" in note and MIN_RATE_COUNT == 62
    many = pa.Table.from_pylist([_rec("baseline", i, 200.0) for i in range(200)], schema=REQUEST_SCHEMA)
    s = summarize(many, ["baseline"])
    assert s.get("baseline", "steady_window_s", "length") is not None
    assert not any(s.rate_too_few("baseline", m) for m in RATES_SHOWN)
    assert "req/s" not in too_few_note(s, ["baseline"])      # its p99s of 200 are marked; no rate is
