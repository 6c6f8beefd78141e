"""A "Speculation" tab in Locust's web UI: the project's own latency histograms (TTFT, TPOT, ITL,
E2E, send lateness) and tokens per chunk, live, beside Locust's charts (whose response-time
buckets are too coarse for inter-token latency). Uses Locust's documented web-UI extension
points: `extendedTabs`/`extendedTables` template arguments and an `extended_stats` entry added to
the `/stats/requests` answer."""

from __future__ import annotations

import json
from collections.abc import Callable

from loadtest.client_stats import ClientStats

TAB_KEY = "speculation"
COLUMNS = [("metric", "Metric"), ("count", "Count"), ("p50", "p50"), ("p90", "p90"), ("p99", "p99")]
LABELS = {"ttft_ms": "TTFT (ms)", "tpot_ms": "TPOT (ms)", "itl_ms": "ITL per chunk (ms)", "e2e_ms": "E2E (ms)",
          "lateness_ms": "send lateness (ms)"}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def tab_rows(stats: ClientStats, mode: str) -> list[dict[str, str]]:
    """The tab's table: one row per latency metric, then tokens per chunk and events."""
    rows = []
    for metric, label in LABELS.items():
        h = stats.hists[metric]
        rows.append({"metric": f"{mode}: {label}", "count": f"{h.count:,}",
                     **{f"p{int(q * 100)}": _fmt(h.quantile(q)) for q in (0.5, 0.9, 0.99)}})
    per_chunk = stats.tokens / stats.events if stats.events else None
    rows.append({"metric": f"{mode}: tokens per chunk, mean (usage / text chunks)", "count": f"{stats.events:,}",
                 "p50": "-" if per_chunk is None else f"{per_chunk:.2f}", "p90": "", "p99": ""})
    return rows


def install_tab(web_ui, rows: Callable[[], list[dict[str, str]]]) -> None:
    """Add the tab to `web_ui` (a locust.web.WebUI); `rows` is called on every stats poll."""
    web_ui.template_args["extendedTabs"] = [{"title": "Speculation", "key": TAB_KEY}]
    web_ui.template_args["extendedTables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in COLUMNS]}]

    @web_ui.app.after_request
    def _add_rows(response):
        from flask import request

        if request.path != "/stats/requests" or response.status_code != 200:
            return response
        body = response.get_json(silent=True)
        if isinstance(body, dict):
            body["extended_stats"] = [{"key": TAB_KEY, "data": rows()}]
            response.set_data(json.dumps(body))
        return response
