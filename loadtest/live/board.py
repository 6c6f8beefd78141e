"""The live comparison `loadtest ui` keeps while its modes replay, and serves, on loopback only, to
the web UI's process (loadtest/replay/front.py), which shows it on the Comparison page.

It reads the one live statistic (loadtest.request.tally): the table is each mode's and tenant's
tally since the start, as the command's `LiveTallies` adds it up (what /metrics and the progress
bars read too); once a second it keeps a point for the charts, the tally of what reached the
records in the last WINDOW_S seconds (the reports that came in, added up); the server's
acceptance comes from the scraper's latest counters. A request to `/board?since=N` answers the
state, the table and the points after N; `/feed` hands over what reached the records since the
last call, per mode, for Locust's own statistics in the web UI. Both need the token the front was
given (the port is loopback, but other users of the machine could reach it).

The figures are the report's: goodput is requests within every SLO of their tenant, tokens per
step is the chunks after each request's first, and latencies and tokens are those of the
requests that succeeded; the percentiles are within 1% (loadtest.request.histogram).
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from analysis.cells import ALL
from analysis.server import ACCEPTED, DRAFT_TOKENS
from contract.records import CLIENT, FAILED, NOT_SENT, OK
from loadtest.engine.events import Began, Observer
from loadtest.replay import protocol
from loadtest.replay.front_process import TOKEN_HEADER
from loadtest.request.exporter import key_of
from loadtest.request.histogram import bucket_value
from loadtest.request.tally import LiveTallies, TallyReport, TenantTally, added_up

log = logging.getLogger("loadtest")
TICK_S = 1.0
WINDOW_S = 10.0            # the charts' trailing window: each point is what reached the records in 10 s
HISTORY_POINTS = 3600      # an hour of one-second points; older ones drop off the charts
FEED_KEEP = 2_000          # reports waiting for the front's Locust statistics, at most
QUANTILES = (0.5, 0.9, 0.99)
LATENCIES = ("ttft", "tpot", "itl", "e2e")

Latest = Callable[[], dict[str, dict[str, dict[str, float]]]]   # Scraper.latest: mode -> replica -> name -> sum


def _f(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), 3)


def table_row(t: TenantTally, elapsed_s: float) -> dict:
    """The table's figures: counts, percentiles (ms), and rates over `elapsed_s`."""
    per_s = (lambda n: n / elapsed_s) if elapsed_s > 0 else (lambda n: None)
    outcomes, recorded = t.outcomes, t.recorded
    row: dict = {"ok": outcomes[OK], "errors": outcomes[FAILED], "client": outcomes[CLIENT],
                 "not_sent": outcomes[NOT_SENT], "done": recorded - outcomes[NOT_SENT], "good": t.good,
                 "goodput": _f(per_s(t.good)),
                 # as the report's goodput share: of every request recorded, not_sent included
                 "good_share": _f(t.good / recorded) if recorded else None,
                 "output_tok_s": _f(per_s(t.tokens)), "tokens_per_step": _f(t.tokens_per_step)}
    for metric in LATENCIES:
        for q in QUANTILES:
            row[f"{metric}_p{round(q * 100)}"] = _f(t.quantile(metric, q))
    return row


def window_row(t: TenantTally, window_s: float) -> dict:
    """The charts' point: what reached the records in a window of `window_s` seconds, per second
    (requests, errors, goodput, output tokens), the successful requests' p50 and p99 (ms) and
    their tokens per step."""
    outcomes = t.outcomes
    row: dict = {"req_s": _f((t.recorded - outcomes[NOT_SENT]) / window_s), "errors_s": _f(outcomes[FAILED] / window_s),
                 "goodput": _f(t.good / window_s), "output_tok_s": _f(t.tokens / window_s),
                 "tokens_per_step": _f(t.tokens_per_step)}
    for metric in LATENCIES:
        for q in (0.5, 0.99):
            row[f"{metric}_p{round(q * 100)}"] = _f(t.quantile(metric, q))
    return row


def acceptance(accepted: float, draft_tokens: float) -> float | None:
    """The server's acceptance rate from its counters' deltas (None without drafts)."""
    return _f(accepted / draft_tokens) if draft_tokens > 0 else None


def feed_rows(mode: str, report: TallyReport) -> list:
    """For Locust's statistics: [mode, {E2E ms: requests that succeeded}, {status: requests that
    failed}] of one report (E2E within 1%)."""
    t = TenantTally()
    for entry in report.tenants:
        t.merge(entry)
    e2e = t.logs.get("e2e")
    times = {str(round(bucket_value(i), 3)): n for i, n in e2e.counts.items()} if e2e is not None else {}
    failed: dict[str, int] = {}
    for (status, _), n in t.requests.items():
        if status not in (OK, NOT_SENT):
            failed[status] = failed.get(status, 0) + n
    return [mode, times, failed]


class Board(Observer):
    def __init__(self, modes: list[str]) -> None:
        self.available = list(modes)
        self.state, self.message = "waiting", "press Start"
        self.run_id: str | None = None
        self.modes: list[str] = []
        self.report: str | None = None
        self.attempt = 0    # starts taken (a start that failed can be tried again from the form)
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.live = LiveTallies()
        self.latest: Latest = dict
        self.progress: dict[str, dict[str, int]] = {}
        self.arrived: dict[str, deque] = {}     # mode -> (time, TallyReport) of the last WINDOW_S
        self.counters: dict[str, deque] = {}    # mode -> (t, accepted, draft tokens) since the start, recent ticks
        self.server_prev: dict[tuple[str, str], tuple[float, float]] = {}   # (mode, replica) -> last counters
        self.server_sum: dict[str, tuple[float, float]] = {}   # mode -> increases since the start (resets handled)
        self.points: deque = deque(maxlen=HISTORY_POINTS)
        self.seq = 0
        self.feed: deque = deque(maxlen=FEED_KEEP)

    # ---- what the command tells it ---------------------------------------------------------
    def starting(self, message: str) -> None:
        with self._lock:
            self._reset()
            self.state, self.message, self.report = "starting", message, None
            self.attempt += 1

    def begin(self, began: Began) -> None:
        """A replay of every mode, `total` requests each, starts; `live` is the command's tally of it."""
        modes = began.modes
        with self._lock:
            self.run_id, self.modes, self.live, self.latest = began.run_id, list(modes), began.live, began.latest
            self.progress = {m: {"total": began.total, "sent": 0, "done": 0, "not_sent": 0} for m in modes}
            self.arrived = {m: deque() for m in modes}
            self.state, self.message = "running", f"replaying {', '.join(modes)}"

    def line(self, mode: str, run_id: str, msg: protocol.Line) -> None:
        with self._lock:
            if isinstance(msg, protocol.Progress):
                self.progress[mode] = {"total": msg.total, "sent": msg.sent, "done": msg.done,
                                       "not_sent": msg.not_sent}
            elif isinstance(msg, protocol.Observed):
                self.arrived.setdefault(mode, deque()).append((time.time(), msg.tally))
                self.feed.append(feed_rows(mode, msg.tally))

    def refuse(self, message: str) -> None:
        """A Start this session will not take (its one run is over): said in the web UI."""
        with self._lock:
            self.attempt += 1
            self.state, self.message = "failed", message

    def end(self, state: str, message: str, report: object | None = None) -> None:
        """The replay is over (`finished`) or could not start (`failed`); a last tick first."""
        if state == "finished":
            self.tick()
        with self._lock:
            self.state, self.message = state, message
            self.report = str(report) if report is not None else None

    # ---- every second ------------------------------------------------------------------------
    def _tallies(self) -> dict[str, dict[str, TenantTally]]:
        """mode -> tenant (and ALL) -> its tally since the start."""
        out = {}
        for mode in self.modes:
            tenants = self.live.of(key_of(self.run_id or "", mode))
            if tenants:
                out[mode] = {**tenants, ALL: added_up(tenants)}
        return out

    def tick(self) -> None:
        with self._lock:
            if self.state != "running":
                return
            now = time.time()
            self._count_server(now)
            self.seq += 1
            self.points.append({"seq": self.seq, "t": round(now, 3), "modes": self._window(now)})

    def _window(self, now: float) -> dict:
        """Each mode's and tenant's point: what reached the records in the WINDOW_S before `now`."""
        out: dict[str, dict] = {m: {} for m in self.modes}
        since = self._tallies()
        for mode in self.modes:
            arrived = self.arrived.get(mode, deque())
            while arrived and arrived[0][0] < now - WINDOW_S:
                arrived.popleft()
            window: dict[str, TenantTally] = {}
            for _, report in arrived:
                for entry in report.tenants:
                    window.setdefault(entry.tenant, TenantTally()).merge(entry)
            first = since.get(mode, {}).get(ALL)
            started = first.first_sent_ns / 1e9 if first is not None and first.first_sent_ns is not None else None
            # a mode's first seconds: the rates over the time it has run, not over a window it has not filled
            span = max(TICK_S, min(WINDOW_S, now - started)) if started is not None else WINDOW_S
            for tenant in since.get(mode, {}):
                t = added_up(window) if tenant == ALL else window.get(tenant, TenantTally())
                point = window_row(t, span)
                if tenant == ALL:
                    point["acceptance"] = self._acceptance(mode, window=True)
                    progress = self.progress.get(mode, {})
                    point["in_flight"] = max(0, progress.get("sent", 0) - progress.get("done", 0))
                out[mode][tenant] = point
        return out

    def _count_server(self, now: float) -> None:
        """The server's accepted and draft tokens since the start, per mode: each replica's
        increases added up (a counter that went down was reset: its new value is the increase)."""
        latest = self.latest() or {}
        for mode in self.modes:
            acc, drafted = self.server_sum.get(mode, (0.0, 0.0))
            replicas = latest.get(mode, {})
            for replica, sums in replicas.items():
                now_acc, now_drafted = sums.get(ACCEPTED, 0.0), sums.get(DRAFT_TOKENS, 0.0)
                prev = self.server_prev.get((mode, replica))
                if prev is not None:
                    acc += now_acc - prev[0] if now_acc >= prev[0] else now_acc
                    drafted += now_drafted - prev[1] if now_drafted >= prev[1] else now_drafted
                self.server_prev[(mode, replica)] = (now_acc, now_drafted)
            if not replicas:
                continue
            self.server_sum[mode] = (acc, drafted)
            series = self.counters.setdefault(mode, deque(maxlen=int(WINDOW_S / TICK_S) + 1))
            series.append((now, acc, drafted))

    def _acceptance(self, mode: str, window: bool) -> float | None:
        series = self.counters.get(mode)
        if not series:
            return None
        _, acc, drafted = series[-1]
        _, acc0, drafted0 = series[0] if window else (0.0, 0.0, 0.0)
        return acceptance(acc - acc0, drafted - drafted0)

    # ---- what the front reads ----------------------------------------------------------------
    def view(self, since: int = 0) -> dict:
        with self._lock:
            finished = self.state == "finished"
            table: dict[str, dict] = {}
            tallies = self._tallies()
            for mode, tenants in tallies.items():
                for tenant, t in tenants.items():   # rates over the mode's first send to its last end (or now)
                    if finished:
                        elapsed = t.span_s()
                    else:
                        elapsed = max(0.0, time.time() - t.first_sent_ns / 1e9) if t.first_sent_ns else 0.0
                    row = table_row(t, elapsed)
                    if tenant == ALL:
                        row["acceptance"] = self._acceptance(mode, window=False)
                        progress = self.progress.get(mode, {})   # "done" stays the records'
                        row.update(total=progress.get("total", 0), sent=progress.get("sent", 0))
                    table.setdefault(mode, {})[tenant] = row
            names = sorted({t for tenants in tallies.values() for t in tenants if t != ALL})
            return {"state": self.state, "message": self.message, "attempt": self.attempt, "run_id": self.run_id,
                    "modes": self.modes, "available": self.available, "tenants": names, "progress": self.progress,
                    "table": table, "points": [p for p in self.points if p["seq"] > since],
                    "report": self.report, "window_s": WINDOW_S}

    def take_feed(self) -> list:
        with self._lock:
            out = list(self.feed)
            self.feed.clear()
        return out


class BoardServer:
    """The board on 127.0.0.1 (a free port), ticking every TICK_S, for the command's length."""

    def __init__(self, board: Board) -> None:
        self.board, self.token = board, secrets.token_urlsafe(24)
        self._server: ThreadingHTTPServer | None = None
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> BoardServer:
        board, token = self.board, self.token

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not secrets.compare_digest(self.headers.get(TOKEN_HEADER, "").encode(), token.encode()):
                    return self._send(403, {"error": "wrong token"})
                url = urlsplit(self.path)
                if url.path == "/board":
                    since = parse_qs(url.query).get("since", ["0"])[0]
                    return self._send(200, board.view(int(since) if since.isdigit() else 0))
                if url.path == "/feed":
                    return self._send(200, board.take_feed())
                return self._send(404, {"error": "not found"})

            def _send(self, code: int, body: object) -> None:
                data = json.dumps(body, allow_nan=False).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="loadtest-board").start()
        threading.Thread(target=self._tick, daemon=True, name="loadtest-board-tick").start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.board.tick()
            except Exception:   # the board is a view: a bad part must not stop the replay
                log.exception("the live board could not tick")

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
