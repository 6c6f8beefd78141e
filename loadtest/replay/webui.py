"""Locust's web UI made to fit a trace replay.

- A "Speculation" tab: the project's own latency histograms (TTFT, TPOT, ITL, E2E, send
  lateness) and tokens per chunk, live, beside Locust's charts (whose response-time buckets are
  too coarse for inter-token latency), through Locust's documented extension points
  (`extendedTabs`/`extendedTables` template arguments and `extended_stats` in `/stats/requests`).
- The start form says what will be replayed, and the users and ramp-up fields, which mean nothing
  for a trace (it sets the load), are disabled: the replay runs as a LoadTestShape, Locust's own
  way of saying "the test decides the load", which also ends the test when the trace is done.
- A second Start is refused where the user clicked (the form shows the message): the records of
  the first replay are written, and a second one into the same run would duplicate them.
- Once stopped, the header's RPS reads 0, not the last rate measured while running.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from loadtest.request.client_stats import ClientStats

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


ALREADY_REPLAYED = ("This trace has been replayed once already in this session; its records are written. "
                    "Quit loadtest ui (Ctrl-C) and start it again for another replay.")


def replay_shape(finished: Callable[[], bool]):
    """A LoadTestShape of one user (the dispatcher) until `finished()`, then the end of the test.
    (Locust is imported here, in the Locust process only: importing it patches the process.)"""
    from locust import LoadTestShape

    class ReplayShape(LoadTestShape):
        def tick(self) -> tuple[int, float] | None:
            return None if finished() else (1, 1.0)

    return ReplayShape()


def banner(about: str) -> str:
    """The line above Locust's page saying what Start replays."""
    return ('<div id="loadtest-replay" style="font-family: sans-serif; padding: 8px 16px; background: #1e3a5f; '
            f'color: #fff; font-size: 14px">Start replays <b>{html.escape(about)}</b>, open loop, at the trace\'s '
            "own schedule: the number of users and the ramp-up do not apply (the trace sets the load), and the "
            "host is the mode's first replica. Stop ends the replay; requests not yet sent are recorded as "
            "not_sent.</div>")


def install_replay_page(web_ui, about: str, replayed: Callable[[], bool]) -> None:
    """The banner on the start page, a second Start refused with a message, RPS 0 once stopped."""
    from flask import jsonify, request

    @web_ui.app.before_request
    def _refuse_second_start():
        if request.path.endswith("/swarm") and request.method == "POST" and replayed():
            return jsonify({"success": False, "message": ALREADY_REPLAYED, "host": web_ui.environment.host})
        return None

    @web_ui.app.after_request
    def _page(response):
        if request.path == "/" and response.status_code == 200 and response.mimetype == "text/html":
            response.set_data(response.get_data(as_text=True).replace("<body>", f"<body>{banner(about)}", 1))
        elif request.path == "/stats/requests" and response.status_code == 200:
            body = response.get_json(silent=True)
            if isinstance(body, dict) and body.get("state") in ("stopped", "stopping"):
                body["current_rps"] = body["current_fail_per_sec"] = 0.0
                response.set_data(json.dumps(body))
        return response


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
