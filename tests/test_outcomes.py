"""One definition of a failed request (contract.records.outcomes): the gate, the console table,
report.md, summary.parquet, a capacity probe (which runs the gate on its records) and a soak's
windows count the same records the same way, whatever the mix of real errors and ends the client
caused (stopped in flight, cut by --deadline, a lost worker)."""

from __future__ import annotations

import io
import re

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from analysis.gate import error_checks
from analysis.long_summary import SummaryView, long_summary
from analysis.markdown import report_markdown
from analysis.soak import windows
from analysis.table import mode_table
from contract.records import CLIENT, FAILED, NOT_SENT, OK, OUTCOMES, REQUEST_SCHEMA, RequestRecord, outcomes
from loadtest.options.replaying import MAX_ERROR_SHARE
from tests.summaries import summarize

# (status, error_kind) -> the outcome it must be
ENDS = {
    ("ok", None): OK,
    ("error", "http"): FAILED,
    ("error", "connection"): FAILED,
    ("error", "incomplete_stream"): FAILED,
    ("timeout", "stream"): FAILED,
    ("timeout", "first_token"): FAILED,
    ("error", "interrupted"): CLIENT,
    ("error", "worker_lost"): CLIENT,
    ("timeout", "deadline"): CLIENT,
    ("not_sent", None): NOT_SENT,
}


def _records(ends: list[tuple[str, str | None]]) -> pa.Table:
    rows = []
    for i, (status, kind) in enumerate(ends):
        r = RequestRecord(run_id="r", mode="eagle", worker="w0", tenant="chat", request_id=f"q{i}",
                          scheduled_ns=10**18 + i * 10**8, offset_s=i / 10, status=status, error_kind=kind)
        if status != "not_sent":
            r.sent_ns = r.scheduled_ns
        if status == "ok":
            r.ttft_ms, r.e2e_ms = 50.0, 140.0
            r.first_token_ns, r.last_token_ns = r.sent_ns + 50 * 10**6, r.sent_ns + 140 * 10**6
            r.itl_ms, r.chunk_tokens, r.completion_tokens = [50.0, 90.0], [1, 9], 10
        rows.append(r.as_row())
    return pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)


def _errors_cell(text: str, header: str, row_start: str) -> str:
    """The errors cell of a markdown or box table's row."""
    lines = text.splitlines()
    head = next(line for line in lines if header in line)
    cells = [c.strip() for c in re.split(r"[|│┃]", head)]
    row = next(line for line in lines if line.strip(" |│┃").startswith(row_start))
    return [c.strip() for c in re.split(r"[|│┃]", row)][cells.index(header)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(sorted(ENDS, key=str)), min_size=1, max_size=40))
def test_every_view_counts_failed_and_client_ends_as_the_gate_does(ends):
    records = _records(ends)
    want = {o: sum(1 for e in ends if ENDS[e] == o) for o in OUTCOMES}
    assert outcomes(records).to_pylist() == [ENDS[e] for e in ends]

    long = long_summary(records, "r", ["eagle"])                # summary.parquet
    counts = long.filter(pc.and_(pc.equal(long["tenant"], "all"), pc.equal(long["metric"], "requests")))
    by = dict(zip(counts["statistic"].to_pylist(), counts["value"].to_pylist(), strict=True))
    assert (by[OK], by[FAILED], by[CLIENT], by[NOT_SENT]) == (want[OK], want[FAILED], want[CLIENT], want[NOT_SENT])

    # the gate, and a capacity probe's: its counts by kind add up to the summary's failed
    check = error_checks(SummaryView(long), ["eagle"], MAX_ERROR_SHARE)[0]
    assert (check.ok, check.failed, check.sent) == (want[OK], want[FAILED], want[OK] + want[FAILED])

    console = Console(file=io.StringIO(), width=400, color_system=None)   # the console table
    console.print(mode_table(SummaryView(long), ["eagle"]))
    shown = _errors_cell(console.file.getvalue(), "errors", "eagle")
    assert shown == f"{want[FAILED]}" + (f" +{want[CLIENT]} client" if want[CLIENT] else ""), shown
    assert _errors_cell(console.file.getvalue(), "sent", "eagle") == f"{want[NOT_SENT]}"

    md = report_markdown("r", "", long, None, [])               # report.md
    assert _errors_cell(md, "errors", "eagle") == f"{want[FAILED]}" + (f" (+{want[CLIENT]} client)"
                                                                       if want[CLIENT] else "")

    soak = windows(records, None, window_s=1.0, duration_s=len(ends) / 10 + 1)   # a soak's windows
    assert (pc.sum(soak["errors"]).as_py(), pc.sum(soak["client"]).as_py()) == (want[FAILED], want[CLIENT])


def test_a_probe_with_interrupted_and_deadline_rows_among_real_errors_is_judged_on_the_real_ones():
    # 8 ok, 1 real error: 11% of what the server answered, over --max-errors 10%, whatever the
    # client's own ends add; a count of sent minus ok (the old probe's) said 4 of 12, 33%
    ends = [("ok", None)] * 8 + [("error", "http"), ("error", "interrupted"), ("timeout", "deadline"),
                                 ("error", "worker_lost"), ("not_sent", None)]
    check = error_checks(summarize(_records(ends), ["eagle"]), ["eagle"], max_share=0.10)[0]
    assert (check.failed, check.sent, round(check.error_share, 3), check.passed) == (1, 9, 0.111, False)
    assert check.reason() == "eagle: 1 of 9 sent requests failed (11%, more than --max-errors 10%: error/http 1)"
