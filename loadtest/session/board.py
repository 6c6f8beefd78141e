"""The live comparison `loadtest ui` keeps while its modes replay, and serves, on loopback only, to
the web UI's process (loadtest/replay/front.py), which shows it on the Comparison page.

Once a second the board reads the record parts that reached disk since the last tick (so what it
shows is what the report will read), adds them to each mode's and tenant's totals, and keeps a
point of the last WINDOW_S seconds for the charts; the server's acceptance comes from the
scraper's latest counters. A request to `/board?since=N` answers the state, the table and the
points after N; `/feed` hands over the records' (mode, status, E2E, tokens) for Locust's own
statistics in the web UI. Both need the token the front was given (the port is loopback, but
other users of the machine could reach it).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.cells import ALL
from analysis.live import COLUMNS, LAG_S, WINDOW_S, Totals, acceptance, ended_ns, good, groups, window_row
from analysis.server import ACCEPTED, DRAFT_TOKENS
from analysis.slo import SLO_COLUMNS, has_targets, join_targets
from loadtest.replay import protocol
from loadtest.replay.front_process import TOKEN_HEADER

log = logging.getLogger("loadtest")
TICK_S = 1.0
HISTORY_POINTS = 3600      # an hour of one-second points; older ones drop off the charts
FEED_KEEP = 20_000         # records waiting for the front's Locust statistics, at most

Latest = Callable[[], dict[str, dict[str, dict[str, float]]]]   # Scraper.latest: mode -> replica -> name -> sum


class Board:
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
        self.run_dir: Path | None = None
        self.targets: pa.Table | None = None
        self.latest: Latest = dict
        self.progress: dict[str, dict[str, int]] = {}
        self.totals: dict[tuple[str, str], Totals] = {}
        self.first_sent: dict[str, float] = {}
        self.recent: pa.Table | None = None
        self.counters: dict[str, deque] = {}    # mode -> (t, accepted, draft tokens) since the start, recent ticks
        self.server_prev: dict[tuple[str, str], tuple[float, float]] = {}   # (mode, replica) -> last counters
        self.server_sum: dict[str, tuple[float, float]] = {}   # mode -> increases since the start (resets handled)
        self.last_end: dict[str, float] = {}
        self.points: deque = deque(maxlen=HISTORY_POINTS)
        self.seq = 0
        self.feed: deque = deque(maxlen=FEED_KEEP)
        self._seen: set[Path] = set()

    # ---- what the command tells it ---------------------------------------------------------
    def starting(self, message: str) -> None:
        with self._lock:
            self._reset()
            self.state, self.message, self.report = "starting", message, None
            self.attempt += 1

    def begin(self, run_id: str, run_dir: Path, modes: list[str], trace: pa.Table, latest: Latest) -> None:
        """A replay of `modes` into `run_dir` starts (the trace's SLO targets judge goodput)."""
        with self._lock:
            self.run_id, self.run_dir, self.modes, self.latest = run_id, run_dir, list(modes), latest
            self.targets = trace.select(["request_id", *SLO_COLUMNS]) if has_targets(trace) else None
            self.progress = {m: {"total": trace.num_rows, "sent": 0, "done": 0, "not_sent": 0} for m in modes}
            self.state, self.message = "running", f"replaying {', '.join(modes)}"

    def on_line(self, mode: str, msg: protocol.Line) -> None:
        if isinstance(msg, protocol.Progress):
            with self._lock:
                self.progress[mode] = {"total": msg.total, "sent": msg.sent, "done": msg.done,
                                       "not_sent": msg.not_sent}

    def refuse(self, message: str) -> None:
        """A Start this session will not take (its one run is over): said in the web UI."""
        with self._lock:
            self.attempt += 1
            self.state, self.message = "failed", message

    def end(self, state: str, message: str, report: Path | None = None) -> None:
        """The replay is over (`finished`) or could not start (`failed`); a last tick first."""
        if state == "finished":
            self.tick()
        with self._lock:
            self.state, self.message = state, message
            self.report = str(report) if report is not None else None

    # ---- every second ------------------------------------------------------------------------
    def _new_records(self) -> tuple[pa.Table | None, list[Path]]:
        """The parts not read yet, as one table (with their targets), and their paths."""
        if self.run_dir is None or not (self.run_dir / "requests").is_dir():
            return None, []
        tables, paths = [], []
        for path in sorted((self.run_dir / "requests").glob("mode=*/part-*.parquet")):
            if path in self._seen:
                continue
            try:
                t = pq.read_table(path, columns=[c for c in COLUMNS if c != "mode"])
            except Exception as exc:   # a part replaced as it was read: the next tick reads it whole
                log.debug("board: could not read %s: %s", path, exc)
                continue
            mode = path.parent.name.removeprefix("mode=")
            tables.append(t.add_column(0, "mode", pa.array([mode] * t.num_rows, pa.string())))
            paths.append(path)
        if not tables:
            return None, []
        records = pa.concat_tables(tables)
        if self.targets is not None:
            records = join_targets(records, self.targets) or records
        return records, paths

    def tick(self) -> None:
        with self._lock:
            if self.state != "running":
                return
            now = time.time()
            new, paths = self._new_records()
            if new is not None and new.num_rows:
                mask = good(new)
                for key, rows in groups(new).items():
                    self.totals.setdefault(key, Totals()).add(new.filter(pa.array(rows)), mask[rows])
                sent = new["sent_ns"].to_numpy(zero_copy_only=False).astype(np.float64) / 1e9
                for mode in set(new["mode"].to_pylist()):
                    mine = sent[pc.equal(new["mode"], mode).to_numpy(zero_copy_only=False)]
                    if np.isfinite(mine).any():
                        self.first_sent[mode] = min(self.first_sent.get(mode, np.inf), float(np.nanmin(mine)))
                new = new.append_column("good", pa.array(mask)).append_column("ended_s", pa.array(ended_ns(new) / 1e9))
                for mode in set(new["mode"].to_pylist()):
                    ends = new.filter(pc.equal(new["mode"], mode))["ended_s"].to_numpy()
                    self.last_end[mode] = max(self.last_end.get(mode, 0.0), float(ends.max()))
                self.feed.extend(zip(new["mode"].to_pylist(), new["status"].to_pylist(), new["e2e_ms"].to_pylist(),
                                     new["completion_tokens"].to_pylist(), strict=True))
                self.recent = new if self.recent is None else pa.concat_tables([self.recent, new])
            self._seen.update(paths)   # counted: never again
            upto = now - LAG_S         # the window ends where the records on disk are complete
            if self.recent is not None:
                self.recent = self.recent.filter(pc.greater_equal(self.recent["ended_s"], upto - WINDOW_S))
            self._count_server(now)
            self.seq += 1
            self.points.append({"seq": self.seq, "t": round(upto, 3), "modes": self._window(upto)})

    def _window(self, upto: float) -> dict:
        """Each mode's and tenant's point: the requests that ended in the WINDOW_S before `upto`."""
        out: dict[str, dict] = {m: {} for m in self.modes}
        recent = self.recent
        if recent is not None:
            recent = recent.filter(pc.less(recent["ended_s"], upto))
        keys = groups(recent) if recent is not None and recent.num_rows else {}
        for (mode, tenant) in self.totals:
            rows = keys.get((mode, tenant))
            part = recent.filter(pa.array(rows)) if rows is not None else None
            # a mode's first seconds: the rates over the time it has run, not over a window it has not filled
            span = min(WINDOW_S, upto - self.first_sent.get(mode, upto - WINDOW_S))
            point = (window_row(part, part["good"].to_numpy(zero_copy_only=False), max(span, TICK_S))
                     if part is not None else {})
            if tenant == ALL:
                point["acceptance"] = self._acceptance(mode, window=True)
                point["in_flight"] = max(0, self.progress.get(mode, {}).get("sent", 0)
                                         - self.progress.get(mode, {}).get("done", 0))
            out.setdefault(mode, {})[tenant] = point
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
            table = {}
            for (mode, tenant), totals in self.totals.items():   # rates over the mode's first send to its last end
                end = self.last_end.get(mode, time.time()) if finished else time.time()
                row = totals.row(max(0.0, end - self.first_sent.get(mode, end)))
                if tenant == ALL:
                    row["acceptance"] = self._acceptance(mode, window=False)
                    progress = self.progress.get(mode, {})   # "done" stays the records'
                    row.update(total=progress.get("total", 0), sent=progress.get("sent", 0))
                table.setdefault(mode, {})[tenant] = row
            tenants = sorted({t for (_, t) in self.totals if t != ALL})
            return {"state": self.state, "message": self.message, "attempt": self.attempt, "run_id": self.run_id,
                    "modes": self.modes, "available": self.available, "tenants": tenants, "progress": self.progress,
                    "table": table, "points": [p for p in self.points if p["seq"] > since],
                    "report": self.report, "window_s": WINDOW_S, "lag_s": LAG_S}

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
                log.exception("the live board could not read the records")

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
