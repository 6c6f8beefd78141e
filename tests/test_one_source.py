"""Every figure of a run computed once: the console table, report.md and report.html's tables
show the long summary's value (summary.parquet, tenant `all`, the only file of figures) to their
printed precision, read off the session's one `loadtest run`."""

from __future__ import annotations

import html
import json
import math
import re

import pyarrow.parquet as pq
import pytest

from analysis.stats import MIN_RATE_COUNT
from common.times import ms_text

pytestmark = pytest.mark.e2e


def _long(run_dir) -> dict[tuple[str, str, str], tuple[float, float | None, float | None]]:
    return {(r["mode"], r["metric"], r["statistic"]): (r["value"], r["ci_low"], r["ci_high"])
            for r in pq.read_table(run_dir / "summary.parquet").to_pylist() if r["tenant"] == "all"}


def _row(text: str, sep: str, mode: str) -> list[str]:
    """The cells of the first table row whose first cell is `mode`."""
    rows = ([c.strip() for c in line.strip().strip(sep).split(sep)] for line in text.splitlines()
            if line.strip().startswith(sep))
    return next(cells for cells in rows if cells[0] == mode)


def _html_row(page: str, mode: str) -> list[str]:
    """The text of each cell of the first HTML table row whose first cell is `mode`."""
    for tr in re.findall(r"<tr>(.*?)</tr>", page, flags=re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        if cells and cells[0] == mode:
            return cells
    raise AssertionError(f"no row for {mode} in report.html")


def _rate(v: float) -> str:       # the console's
    return "-" if math.isnan(v) else f"{v:,.2f}" if v < 100 else f"{v:,.0f}"


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def test_the_console_report_md_and_html_show_the_long_summary(session_run):
    run_dir, ran = session_run
    long = _long(run_dir)
    assert not (run_dir / "modes.parquet").exists()   # no second file of the same figures
    modes = dict.fromkeys(m for m, _, _ in long)
    report = (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    assert set(modes) == {"baseline", "eagle"}
    for mode in modes:
        def v(metric: str, stat: str, mode: str = mode) -> float:
            return _nan(long[mode, metric, stat][0]) if (mode, metric, stat) in long else math.nan

        def ms(metric: str, stat: str, mode: str = mode) -> str:
            """As printed: marked when the percentile's interval runs past the data (NaN there)."""
            _, low, high = long[mode, metric, stat]
            return ms_text(v(metric, stat)) + ("†" if math.isnan(low) or math.isnan(high) else "")

        def few(metric: str, counted: str = "req_per_s") -> str:
            """The mark of a rate of too few completions (the summary's count of them)."""
            n = v(counted, "count")
            return "†" if not math.isnan(v(metric, "rate")) and n < MIN_RATE_COUNT else ""

        failed, client = int(v("requests", "failed")), int(v("requests", "client"))
        # the console table, as printed
        cells = _row(ran.stdout, "│", mode)   # the console's few columns (the rest: report.md)
        assert len(cells) == 9, cells
        done = _rate(v("req_per_s", "rate")) + few("req_per_s")
        assert cells[1] == f"{_rate(v('offered_req_per_s', 'trace'))} / {done}", cells
        assert cells[2] == f"{ms('ttft_ms', 'p50')} / {ms('ttft_ms', 'p99')}"
        assert cells[3] == f"{ms('tpot_ms', 'p50')} / {ms('tpot_ms', 'p99')}"
        assert cells[4] == ms("e2e_ms", "p99")
        good = _rate(v("goodput_req_per_s", "rate")) + few("goodput_req_per_s", "goodput_req_per_s")
        assert cells[6].startswith(good), cells
        assert cells[-2].split()[0] == f"{failed:,}" and cells[-1] == f"{int(v('requests', 'not_sent')):,}"
        # report.md's modes table, and the same cells in report.html
        md = _row(report, "|", mode)
        assert md[1] == f"{v('req_per_s', 'rate'):.2f}{few('req_per_s')}"
        assert md[2] == f"{v('out_tok_per_s', 'rate'):,.0f}{few('out_tok_per_s')}"
        assert md[10] == f"{v('in_flight', 'peak'):,.0f}" and md[11] == f"{v('offered_req_per_s', 'trace'):.2f}"
        assert md[4] == f"{ms('ttft_ms', 'p50')} / {ms('ttft_ms', 'p99')}"
        assert md[6] == ms("e2e_ms", "p99")
        # 24 requests a mode: a p99 needs 368, so it is marked, its interval said
        assert v("e2e_ms", "count") == v("requests", "ok") < 368 and md[6].endswith("†")
        _, low, high = long[mode, "e2e_ms", "p99"]
        assert math.isnan(high) and low <= v("e2e_ms", "p99")
        note = f"E2E p99 {ms_text(v('e2e_ms', 'p99'))} [{ms_text(low)}, -] of {int(v('e2e_ms', 'count')):,}"
        clause = re.compile(rf"{mode}: [^;]*{re.escape(note)}")   # in this mode's clause of the note
        assert clause.search(" ".join(ran.stdout.split())) and clause.search(report)
        errors = f"{failed:,}" + (f" (+{client:,} client)" if client else "")
        assert md[-3:] == [f"{int(v('requests', 'ok')):,}", errors, f"{int(v('requests', 'not_sent')):,}"]
        assert _html_row(page, mode) == [c.replace("**", "") for c in md], mode
    # the decision: one, the same words first in the console and report.md, in report.html, the
    # manifest and summary.parquet, its figure the long summary's speedup
    decision = json.loads((run_dir / "manifest.json").read_text())["decision"]
    said = " ".join(ran.stdout.split())
    assert f"decision: {decision['text']}" in said
    assert said.index("decision:") < said.index("h (completed)")     # above the table (its title)
    # under the line that says the numbers are the simulator's (tests/test_new_user.py), then first
    assert report.splitlines()[2].startswith("**SIMULATED: ")
    assert report.splitlines()[4] == f"**Decision: {decision['text']}**"
    assert decision["text"] in html.unescape(page)
    rows = [r for r in pq.read_table(run_dir / "summary.parquet").to_pylist() if r["metric"] == "decision"]
    assert [(r["mode"], r["statistic"]) for r in rows] == [(decision["mode"] or "baseline", decision["kind"])]
    if decision["speedup"] is not None:
        assert decision["speedup"]["value"] == pytest.approx(long[decision["mode"], "speedup_e2e", "geomean"][0])
    eagle = long["eagle", "speedup_e2e", "geomean"]
    printed = _row(ran.stdout, "│", "eagle")[5]
    assert f"{eagle[0]:.2f}x" in printed        # the speedup and, when significant, its interval
    assert ("n.s." in printed) or f"[{eagle[1]:.2f}-{eagle[2]:.2f}]" in printed
