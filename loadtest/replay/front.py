"""The web UI of `loadtest ui`: `locust -f loadtest/replay/front.py --web-host H --web-port P ...`,
started by the command (loadtest/commands/ui.py). It sends no request itself: Start and Stop, and
the start form's custom parameters (scenario, modes, rate scale), become lines on its stdout
(`protocol.StartAsked`, `protocol.StopAsked`); the command replays every chosen mode side by side
with headless Locust processes, as `loadtest run --mode-order parallel` does, into the same dataset.

What it shows comes back from the command's loopback board (loadtest/live/board.py), polled
every second: the "Comparison" tab (a table per mode) and page (charts over time, per tenant on
demand), and Locust's own statistics and charts, fed one request per record (name: the mode,
response time: E2E), so the Statistics and Charts tabs compare the modes too.

With `--login` every route (Locust's and these) answers 401 without the HTTP basic-auth
credentials of the environment (common/login.py).

Only ever loaded by Locust, in its own process (Locust monkey-patches it with gevent).
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
from typing import ClassVar

import gevent
import requests
from locust import LoadTestShape, User, constant, events, task

from common.login import CHALLENGE, authorized, credentials
from loadtest.replay import protocol
from loadtest.replay.comparison_page import TAB_COLUMNS, page, plotly_js, tab_rows
from loadtest.replay.front_process import ALREADY_REPLAYED, BOARD_ENV, MODES_ENV, TOKEN_ENV, TOKEN_HEADER

log = logging.getLogger("loadtest.front")
POLL_S = 1.0
TAB_KEY = "comparison"
# the column of Locust's web UI bundle (2.47) that the statistics table drops: the byte size of a
# response, which the board's feed cannot give (it has token counts)
AVERAGE_SIZE_COLUMN = "{key:`avgContentLength`,title:`Average size (bytes)`,round:2},"


class Front:
    """What the web UI knows: the board's last answer, whether Start was pressed."""

    view: ClassVar[dict] = {"state": "waiting", "message": "press Start", "table": {}, "modes": [], "tenants": []}
    asked = False            # Start pressed, and the board has not said the replay ended
    attempt = 0              # the board's count of starts Front waits to see (the one pressed last)
    ended_by_board = False   # the shape ended the test because the board said so (not Stop)


def _board(path: str) -> object:
    r = requests.get(os.environ[BOARD_ENV] + path, headers={TOKEN_HEADER: os.environ[TOKEN_ENV]}, timeout=5)
    r.raise_for_status()
    return r.json()


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:
    modes = json.loads(os.environ.get(MODES_ENV, "[]"))
    parser.add_argument("--scenario", default="saas-mix",
                        help="a built-in scenario's name, or the scenario or trace file given to loadtest ui")
    parser.add_argument("--modes", default=list(modes), choices=modes, is_multiple=True,
                        help="the modes to replay side by side, each with its own Locust process")
    parser.add_argument("--rate-scale", default="",
                        help="multiply the scenario's arrival rates by this (empty: the scenario's own)")
    parser.add_argument("--about", default="", include_in_web_ui=False, help="what Start replays, in words")
    parser.add_argument("--login", action="store_true", include_in_web_ui=False,
                        help="every route behind HTTP basic auth (LOADTEST_WEB_USER, LOADTEST_WEB_PASSWORD)")


class ComparisonShape(LoadTestShape):
    """One idle user from Start until the board says the replays ended (or could not start)."""

    def tick(self) -> tuple[int, float] | None:
        if Front.asked and Front.view.get("state") in ("finished", "failed"):
            Front.asked, Front.ended_by_board = False, True
        return (1, 1.0) if Front.asked else None


class Idle(User):
    """Locust needs a user to run a test; the replays run in the command's Locust processes."""

    wait_time = constant(1)
    host = "each mode's replicas"   # shown as the Host; this user sends nothing

    @task
    def idle(self) -> None:
        pass


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
CHANGES = ("/swarm", "/stop", "/stats/reset", "/user_count")   # the routes that change what runs


def foreign_request(method: str, path: str, host: str, headers, login: bool) -> str | None:
    """Why a request must be refused as coming from another site (None when it need not be):
    on loopback, a Host that is not a loopback name (a DNS-rebinding page); anywhere, a change
    (Start, Stop, a reset) sent by a page of another origin (a cross-site form)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if not login and name not in LOOPBACK_NAMES:
        return f"Host {host!r} is not this machine's loopback address"
    if method == "POST" or path in CHANGES:
        site, origin = headers.get("Sec-Fetch-Site"), headers.get("Origin")
        if site not in (None, "same-origin", "none") or (origin and origin.split("://", 1)[-1] != host):
            return "a request from another site may not start or stop a run"
    return None


def _modes(form) -> list[str]:
    """The form's modes (Locust's multiple select sends one field per mode; a client may join them with ,)."""
    return [m for field in form.getlist("modes") for m in field.split(",") if m]


def _rate_scale(form) -> str:
    """The form's rate scale (Locust's web form names it rateScale; its HTTP API rate_scale)."""
    return form.get("rate_scale", form.get("rateScale", "")).strip()


def form_problem(form, view: dict) -> str | None:
    """Why the start form's values cannot start a run (None when they can)."""
    if view.get("run_id"):
        return ALREADY_REPLAYED
    if view.get("state") in ("starting", "running"):
        return "a run is starting already"
    if not _modes(form):
        return "modes: choose at least one mode"
    scale = _rate_scale(form)
    if scale:
        try:
            if not (math.isfinite(float(scale)) and float(scale) > 0):
                raise ValueError
        except ValueError:
            return f"rate scale: {scale!r} is not a finite number above 0"
    if not form.get("scenario", "").strip():
        return "scenario: give a built-in scenario name or a TOML file"
    return None


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    web_ui = environment.web_ui
    if web_ui is None:
        return
    environment.shape_class = ComparisonShape()
    environment.shape_class.runner = environment.runner
    opts = environment.parsed_options
    from flask import Response, jsonify, request

    creds = credentials() if opts.login else None

    @web_ui.app.before_request
    def _login_and_start():
        if opts.login and (creds is None or not authorized(request.headers.get("Authorization"), *creds)):
            return Response("login required\n", 401, CHALLENGE)
        problem = foreign_request(request.method, request.path, request.host, request.headers, opts.login)
        if problem:
            return Response(f"{problem}\n", 403)
        if request.path == "/swarm" and request.method == "POST":
            problem = form_problem(request.form, Front.view)
            if problem:
                return jsonify({"success": False, "message": problem, "host": environment.host})
            ask_start(request.form)   # then Locust starts the shape, which holds one idle user until the end
        return None

    web_ui.template_args["extendedTabs"] = [{"title": "Comparison", "key": TAB_KEY}]
    web_ui.template_args["extendedTables"] = [{"key": TAB_KEY, "structure": [
        {"key": k, "title": t} for k, t in TAB_COLUMNS]}]

    @web_ui.app.after_request
    def _page(response):
        if request.path == "/" and response.status_code == 200 and response.mimetype == "text/html":
            response.set_data(response.get_data(as_text=True).replace("<body>", f"<body>{banner(opts.about)}", 1))
        elif request.path.startswith("/assets/") and request.path.endswith(".js") and response.status_code == 200:
            # Locust's statistics table: no "Average size (bytes)" column, since the records fed in carry
            # no byte count of a stream (its bundle declares the column once; a newer one is left as is)
            response.direct_passthrough = False
            body = response.get_data(as_text=True)
            if AVERAGE_SIZE_COLUMN in body:
                response.set_data(body.replace(AVERAGE_SIZE_COLUMN, ""))
        elif request.path == "/stats/requests" and response.status_code == 200:
            body = response.get_json(silent=True)
            if isinstance(body, dict):
                rows = tab_rows(Front.view.get("table", {}), Front.view.get("modes", []))
                body["extended_stats"] = [{"key": TAB_KEY, "data": rows}]
                if body.get("state") in ("stopped", "stopping"):
                    body["current_rps"] = body["current_fail_per_sec"] = 0.0
                response.set_data(json.dumps(body))
        return response

    @web_ui.app.route("/comparison")
    def _comparison():
        return Response(page(opts.about), mimetype="text/html")

    @web_ui.app.route("/comparison/plotly.min.js")
    def _plotly():
        return Response(plotly_js(), mimetype="application/javascript", headers={"Cache-Control": "max-age=3600"})

    @web_ui.app.route("/comparison/data")
    def _data():
        since = request.args.get("since", "0")
        try:
            return jsonify(_board(f"/board?since={int(since) if since.isdigit() else 0}"))
        except (requests.RequestException, ValueError) as exc:
            return jsonify({"state": "unreachable", "message": f"loadtest ui is not answering ({exc})"}), 503

    gevent.spawn(_poll, environment)


def banner(about: str) -> str:
    return ('<div id="loadtest-replay" style="font-family: sans-serif; padding: 8px 16px; background: #1e3a5f; '
            f'color: #fff; font-size: 14px">On <b>{html.escape(about)}</b>, Start replays the modes chosen under '
            "Custom parameters side by side, open loop at the trace's own schedule (users and ramp-up do not "
            "apply). Stop ends every mode; requests not yet sent are recorded as not_sent. "
            '<a href="/comparison" style="color: #9cf">Comparison page: charts over time, per tenant</a></div>')


def ask_start(form) -> None:
    """Tell the command to start the form's run (its values checked by `form_problem`)."""
    modes = _modes(form)
    scale = _rate_scale(form)
    Front.asked, Front.ended_by_board, Front.attempt = True, False, Front.view.get("attempt", 0) + 1
    Front.view = {**Front.view, "state": "waiting", "message": "starting"}
    ask = protocol.StartAsked(form.get("scenario", "").strip(), modes, float(scale) if scale else None)
    print(protocol.encode_line(ask), flush=True)


@events.test_stop.add_listener
def _on_test_stop(environment, **_kw) -> None:
    if not Front.ended_by_board and Front.view.get("state") in ("waiting", "starting", "running"):
        Front.asked = False
        print(protocol.encode_line(protocol.StopAsked()), flush=True)


def _poll(environment) -> None:
    """Every second: the board's state and table, and what reached the records since into Locust's
    statistics (one request each, E2E within 1% for the successful ones, 0 for the failed)."""
    while True:
        gevent.sleep(POLL_S)
        try:
            view = _board("/board?since=999999999")
            feed = _board("/feed")
        except (requests.RequestException, ValueError) as exc:
            log.warning("the board is not answering: %s", exc)
            continue
        if not Front.asked or view.get("attempt", 0) >= Front.attempt:   # not the board before it took Start
            Front.view = view
        fire = environment.events.request.fire
        for mode, times, failed in feed:
            for e2e_ms, n in times.items():
                for _ in range(n):
                    fire(request_type="replay", name=mode, response_time=float(e2e_ms), response_length=0,
                         exception=None, context={})
            for status, n in failed.items():
                for _ in range(n):
                    fire(request_type="replay", name=mode, response_time=0.0, response_length=0,
                         exception=RuntimeError(status), context={})
