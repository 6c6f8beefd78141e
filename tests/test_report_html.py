"""report.html as a person sees it: a real run's report opened in headless Chromium (Debian's,
installed by `make test`), driven by Playwright. Every plot must have drawn its traces, the page
must log no error and ask the network for nothing (it opens offline), and the tables must be
there. The screenshot is kept under tests/artifacts/ (ignored by git)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.category import MIN_CATEGORY_REQUESTS
from analysis.long_summary import SummaryView
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "tests" / "artifacts"


def render(report: Path, screenshot: str) -> dict:
    """Open `report` in headless Chromium: what it logged as errors, what it asked the network
    for, how many plots it has and drew, their titles, each plot's axis titles and traces by name
    and the page's h2 headings."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: `make browser` (part of `make test`) installs it"
    errors, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto(report.as_uri())
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
            seen = {
                "plots": page.evaluate("document.querySelectorAll('.js-plotly-plot').length"),
                "drawn": page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].filter("
                                       "d => d.querySelectorAll('.main-svg .trace, .main-svg .hm').length > 0).length"),
                # a plot with a value to show, not only axes (a bar of NaN draws a trace of nothing)
                "with_data": page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].filter("
                                           "d => d._fullData.some("
                                           "t => Array.from(t.type === 'heatmap' ? (t.z || []).flat() : (t.y || []))"
                                           ".some(v => v !== null && Number.isFinite(v)))).length"),
                # each heat map's cells as plotly holds them, and the labels it drew on them
                "heatmaps": page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].flatMap(d => d._fullData"
                                          ".filter(t => t.type === 'heatmap').map(t => ({x: Array.from(t.x), y: "
                                          "Array.from(t.y), z: t.z.map(r => Array.from(r)), text: t.text.map("
                                          "r => Array.from(r))})))"),
                "heatmap_labels": page.evaluate("[...document.querySelectorAll('.heatmaplayer text')].map("
                                                "t => t.textContent)"),
                "no_plot": page.evaluate("[...document.querySelectorAll('.no-plot')].map(p => p.textContent)"),
                "titles": page.evaluate("[...document.querySelectorAll('.gtitle')].map(t => t.textContent)"),
                "axes": page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(d => [...d."
                                      "querySelectorAll('.xtitle, .ytitle')].map(t => t.textContent))"),
                # each plot's traces by name, as plotly drew them (the legend's entries and hover's)
                "traces": page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map("
                                        "d => d._fullData.map(t => t.name))"),
                "headings": page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)"),
            }
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{screenshot}.png"))
            page.locator(".plot").nth(1).scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"{screenshot}-2.png"))
        finally:
            browser.close()
    return {**seen, "errors": errors, "requests": requests}


def test_report_html_renders_every_plot_offline_with_no_console_error(session_run):
    run_dir, run = session_run    # a run of baseline and eagle against the shared fleet
    report = run_dir / "report.html"
    assert f"report: {run_dir / 'report.md'}" in run.stdout and report.exists()
    seen = render(report, "report")
    errors, requests, plots, drawn, titles = (seen[k] for k in ("errors", "requests", "plots", "drawn", "titles"))
    tables = seen["headings"]
    assert not errors, errors
    assert not requests, f"the report asked the network for {requests}"
    assert plots >= 7 and drawn == plots == seen["with_data"], (plots, drawn, seen["with_data"], titles)
    assert seen["no_plot"] == [], seen["no_plot"]   # every plot had data (tests/test_sink_and_analysis.py: one without)
    for title in ("goodput", "E2E speedup over the baseline by tenant", "TTFT: cumulative", "offered (dotted) and "
                  "completed requests per second", "output tokens per second", "server: running requests",
                  "server: share of steps that accepted the draft", "Energy per output token",
                  "GPU power per GPU"):
        assert any(t.startswith(title) for t in titles), (title, titles)
    assert {"Modes", "Plots", "SLOs by tenant", "Latency percentiles (ms)", "Acceptance by category",
            "Token counts: the plan against the server",
            "What each mode costs: energy, power and GPU memory"} <= set(tables), tables
    # the heat map of acceptance by category: a cell per mode and category the long summary has, each
    # coloured by its mean acceptance length and labelled with it, its interval and its requests
    assert any(t.startswith("Mean acceptance length by category") for t in titles), titles
    (heat,) = seen["heatmaps"]
    view = SummaryView(pq.read_table(run_dir / "summary.parquet"))
    cells = {(m, c) for (m, t, metric, c) in view.cells if metric == "category_acceptance_length" and t == "all"}
    assert heat["y"] == ["eagle"] and heat["x"] == ["chat", "rust"] and cells == {("eagle", "chat"), ("eagle", "rust")}
    labels = []
    for i, m in enumerate(heat["y"]):
        for j, c in enumerate(heat["x"]):
            value = view.get(m, "category_acceptance_length", c)
            low, high = view.interval(m, "category_acceptance_length", c)
            n = int(view.get(m, "category_requests", c))
            assert heat["z"][i][j] == pytest.approx(value)
            label = f"{value:.2f}<br>" + (f"[{low:.2f}, {high:.2f}]" if n >= MIN_CATEGORY_REQUESTS else
                                          "[no interval]") + f"<br>n={n:,}"
            assert heat["text"][i][j] == label
            labels.append(label.replace("<br>", ""))
    assert seen["heatmap_labels"] == labels
