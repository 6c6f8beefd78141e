"""The Locust side of a replay: `locust -f loadtest/locustfile.py --headless ...`.

One TraceReplayUser per worker process runs an open-loop dispatcher over this worker's shard of
the trace: each request starts at its scheduled time in its own greenlet (up to --max-inflight
at once), whatever the server's speed, so slow responses cannot throttle the offered load. Every
scheduled request ends as exactly one record in the worker's Parquet sink; Locust's own stats get
one request event per LLM request, named after the mode, with E2E as the response time.

This file is only ever loaded by Locust, in its own process: Locust monkey-patches the process
with gevent, and `ray.init()` hangs in a patched process.
"""

from __future__ import annotations

import itertools
import logging
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import gevent
import gevent.event
import gevent.pool
import orjson
import pyarrow.parquet as pq
from gevent.threadpool import ThreadPoolExecutor
from geventhttpclient.url import URL
from locust import FastHttpUser, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from loadtest import protocol, webui
from loadtest.client import Clock, execute
from loadtest.client_stats import LATENESS_LIMIT_MS, ClientStats, cpu_seconds
from loadtest.records import REQUEST_SCHEMA, RequestRecord
from loadtest.sink import ParquetSink
from scenarios.trace import closed_concurrency

log = logging.getLogger("loadtest.replay")
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
STREAM_OPTIONS = orjson.Fragment(b'{"include_usage":true,"continuous_usage_stats":true}')
TRACE_COLUMNS = ["request_id", "tenant", "offset_s", "api", "prompt", "messages", "max_tokens",
                 "temperature", "ignore_eos"]


@events.init_command_line_parser.add_listener
def _add_arguments(parser) -> None:
    g = parser.add_argument_group("loadtest replay")
    g.add_argument("--trace-file", required=True, help="trace.parquet to replay")
    g.add_argument("--mode", required=True, help="speculation mode under test (Locust stats name)")
    g.add_argument("--endpoints", required=True, help="comma-separated base URLs of the mode's replicas")
    g.add_argument("--served-model", required=True, help="model name the replicas serve")
    g.add_argument("--run-id", required=True)
    g.add_argument("--records-dir", required=True, help="directory for this mode's part files")
    g.add_argument("--worker-id", default="w0")
    g.add_argument("--shard", default="0/1", help="K/N: replay rows i with i %% N == K")
    g.add_argument("--max-inflight", type=int, default=1024)
    g.add_argument("--request-timeout", type=float, default=600.0)
    g.add_argument("--deadline", type=float, default=0.0, help="stop sending after S seconds (0: none)")
    g.add_argument("--grace", type=float, default=10.0, help="seconds in-flight requests get on interrupt")
    g.add_argument("--start-delay", type=float, default=0.5, help="seconds from start-up to offset 0")
    g.add_argument("--connect-wait", type=float, default=120.0,
                   help="master: seconds to wait for every worker to connect; then record every row as "
                   "not_sent and quit (Locust's own --expect-workers-max-wait exits without a word)")
    g.add_argument("--lateness-limit", type=float, default=LATENESS_LIMIT_MS,
                   help="send lateness p99 (ms) above which the run is marked client_limited")
    g.add_argument("--api-key-env", default="LOADTEST_API_KEY",
                   help="environment variable holding the API key (never passed on the command line)")
    g.add_argument("--about", default="", help="web UI: what Start replays, in words (shown above the form)")


class Replay:
    """One worker's open-loop replay of its shard, and the bookkeeping that keeps every row."""

    def __init__(self, environment, opts) -> None:
        self.env = environment
        self.opts = opts
        self.total_rows = pq.ParquetFile(opts.trace_file).metadata.num_rows
        self.shard = (0, 1)
        self.shard_size = 0
        self.worker_id = opts.worker_id
        self.endpoints = [URL(e.rstrip("/")) for e in opts.endpoints.split(",")]
        self.labels = [f"{opts.mode}-{i}" for i in range(len(self.endpoints))]
        # Request URLs built once, not per request: [endpoint][api]
        self.urls = [{api: URL(f"{e}{path}") for api, path in PATHS.items()} for e in self.endpoints]
        # A closed-loop trace keeps exactly its concurrency in flight; an open one up to the cap.
        self.closed = closed_concurrency(pq.read_schema(opts.trace_file))
        self.pool = gevent.pool.Pool(opts.max_inflight)
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.sink: ParquetSink | None = None
        self.assigned = gevent.event.Event()
        self.rows: Iterator[tuple[int, dict]] = iter(())
        self.pending: tuple[int, dict] | None = None
        self.dispatched = 0
        self.recorded = 0
        self.not_sent = 0
        self.stopping = False
        self.ui = False  # replaying from Locust's web UI (`loadtest ui`): the shard starts at Start
        self.end_reason: str | None = None
        self._finished = gevent.event.Event()
        self.clock = Clock.now()
        self.t0 = self.clock.mono + opts.start_delay
        self.stats = ClientStats()
        self._cpu_mark = (time.monotonic(), cpu_seconds())
        self.on_progress = self._print_progress
        key = os.environ.get(opts.api_key_env)
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def assign(self, index: int, count: int, worker_id: str, t0_epoch: float | None = None) -> None:
        """Take shard `index` of `count` (rows i with i % count == index), starting at `t0_epoch`."""
        self.shard = (index, count)
        if self.closed:  # the scenario's concurrency is for the whole client, split over the shards
            self.pool = gevent.pool.Pool(max(1, self.closed // count + (index < self.closed % count)))
        self.shard_size = len(range(index, self.total_rows, count))
        self.rows = iter_shard(self.opts.trace_file, index, count)
        self.worker_id = worker_id
        self.sink = ParquetSink(Path(self.opts.records_dir), worker_id, REQUEST_SCHEMA, self.executor)
        if t0_epoch is not None:
            self.clock = Clock.now()
            self.t0 = self.clock.mono + (t0_epoch - time.time())
        self.assigned.set()

    def _record(self, row: dict, scheduled: float, status: str | None = None,
                error: str | None = None) -> RequestRecord:
        return RequestRecord(
            run_id=self.opts.run_id, mode=self.opts.mode, worker=self.worker_id, tenant=row["tenant"],
            request_id=row["request_id"], scheduled_ns=self.clock.to_ns(scheduled), offset_s=scheduled - self.t0,
            status=status or "not_sent", error=error,
        )

    def _body(self, row: dict) -> bytes:
        body = {"model": self.opts.served_model, "max_tokens": row["max_tokens"],
                "temperature": row["temperature"], "stream": True, "stream_options": STREAM_OPTIONS}
        if row["ignore_eos"]:
            body["ignore_eos"] = True
        if row["api"] == "chat":
            body["messages"] = orjson.Fragment(row["messages"].encode())
        else:
            body["prompt"] = row["prompt"]
        return orjson.dumps(body)

    def _one(self, index: int, row: dict, client_pool, scheduled: float) -> None:
        rec = self._record(row, scheduled)
        ep = index % len(self.endpoints)
        rec.replica = self.labels[ep]
        url = self.urls[ep][row["api"]]
        headers = {**self.headers, "X-Request-Id": f"{self.opts.run_id}-{self.opts.mode}-{row['request_id']}"}
        timeout, cut = self.opts.request_timeout, False
        if self.opts.deadline:
            left = self.t0 + self.opts.deadline - time.perf_counter()
            timeout, cut = max(0.001, min(timeout, left)), left < timeout
        try:
            execute(client_pool, url, self._body(row), headers, timeout, rec, scheduled, self.clock, cut)
        finally:
            row_out = rec.as_row()
            self.sink.add(row_out)
            self.stats.observe(row_out)
            self.recorded += 1
            exc = None if rec.status == "ok" else Exception(f"{rec.status}: {rec.error_kind or ''} {rec.error or ''}")
            self.env.events.request.fire(
                request_type="POST", name=self.opts.mode, response_time=rec.e2e_ms or 0.0,
                response_length=rec.completion_tokens or 0, exception=exc,
                context={"tenant": row["tenant"]}, url=str(url),
            )

    def run(self, client_pool) -> None:
        """Dispatch every row of the shard at its time; return when all have been recorded."""
        self._cpu_mark = (time.monotonic(), cpu_seconds())  # start-up work does not count
        self.stats.start_replay()
        ticker = gevent.spawn(self._tick)
        deadline = self.t0 + self.opts.deadline if self.opts.deadline else float("inf")
        try:
            for i, row in self.rows:
                self.pending = (i, row)  # held until spawned: finish() records it if we stop first
                if self.closed is None:  # open loop: each request at its time
                    due = self.t0 + row["offset_s"]
                    delay = min(due, deadline) - time.perf_counter()
                    if delay > 0:
                        gevent.sleep(delay)
                self.pool.wait_available()  # at the cap, lateness accrues (open loop) and is recorded
                if self.closed is not None:  # closed loop: due the moment a slot frees
                    gevent.sleep(max(0.0, self.t0 - time.perf_counter()))
                    due = time.perf_counter()
                if self.stopping or time.perf_counter() >= deadline:
                    break
                self.pending = None
                self.dispatched += 1
                self.pool.spawn(self._one, i, row, client_pool, due)
            if self.end_reason is None:  # nobody stopped us: drain and close
                self.pool.join()
                self.finish("completed" if self.dispatched == self.shard_size else "deadline")
        finally:
            ticker.kill(block=False)

    def cpu_share(self) -> float:
        """This process's CPU use, as a share of one core, since the last call."""
        now, cpu = time.monotonic(), cpu_seconds()
        then, cpu_then = self._cpu_mark
        if now - then < 0.25:  # too short to say anything; keep accumulating
            return 0.0
        self._cpu_mark = (now, cpu)
        return (cpu - cpu_then) / (now - then)

    def counts(self) -> dict[str, int]:
        """What this process has done so far, for the progress line (and the master)."""
        return {"recorded": self.recorded, "sent": self.dispatched, "not_sent": self.not_sent}

    def progress(self) -> protocol.Progress:
        return protocol.Progress(total=self.shard_size, sent=self.dispatched,
                                 done=self.recorded - self.not_sent, not_sent=self.not_sent)

    def _print_progress(self) -> None:
        self.stats.cpu_max = max(self.stats.cpu_max, self.cpu_share())
        say(self.progress())
        say(self.stats.live())

    def _tick(self) -> None:
        while True:
            self.on_progress()
            self.sink.tick()
            gevent.sleep(0.5)

    def finish(self, reason: str) -> None:
        """Stop dispatching, give in-flight requests a grace period, record every unsent row as
        not_sent with the reason, and close the sink. Idempotent."""
        if self.end_reason is not None:  # another greenlet is finishing: wait for it
            self._finished.wait()
            return
        self.end_reason = reason
        self.stopping = True
        if self.sink is None:  # never given a shard (a master, or a worker stopped before its start)
            self._finished.set()
            return
        if reason != "completed" and not self.pool.join(timeout=self.opts.grace):
            self.pool.kill(block=True, timeout=5)  # recorded as error/interrupted by the client
        why = {"deadline": "run deadline reached before its scheduled time",
               "interrupted": "run interrupted before its scheduled time",
               "failed": "the replay failed before its scheduled time (see the Locust log)"}.get(reason, reason)
        rest = itertools.chain([self.pending] if self.pending else [], self.rows)
        self.pending = None
        for _, row in rest:  # every row never dispatched, streamed from the trace file
            self.sink.add(self._record(row, self.t0 + row["offset_s"], "not_sent", why).as_row())
            self.recorded += 1
            self.not_sent += 1
        self.sink.close()
        self._finished.set()
        self.on_progress()
        if not isinstance(self.env.runner, WorkerRunner):
            say(protocol.ClientVerdict(self.stats.verdict(self.opts.lateness_limit)))
            say(protocol.Finished(reason, self.recorded))


def say(msg: protocol.Message) -> None:
    """Tell the command that started this process (it reads our stdout)."""
    print(protocol.encode(msg), flush=True)


def iter_shard(trace_file: str, index: int, count: int, batch_rows: int = 4096) -> Iterator[tuple[int, dict]]:
    """The deterministic shard `index` of `count` (rows i with i % count == index), as (i, row),
    read from the trace file a batch at a time, so a worker's memory does not grow with the trace."""
    base = 0
    for batch in pq.ParquetFile(trace_file).iter_batches(batch_size=batch_rows, columns=TRACE_COLUMNS):
        cols = {c: batch.column(c).to_pylist() for c in TRACE_COLUMNS}
        for j in range((index - base) % count, batch.num_rows, count):
            yield base + j, {c: cols[c][j] for c in TRACE_COLUMNS}
        base += batch.num_rows


class Coordinator:
    """The master's side of a distributed replay: hands out an explicit shard map when the test
    starts (not runner.worker_index, which is never reused after a reconnect), collects progress,
    notices lost workers and writes their unrecorded rows, and quits when every shard is done."""

    LOST_GRACE_S = 2.0  # let a lost worker's last part file land before reading what it wrote

    def __init__(self, environment, replay: Replay) -> None:
        self.env = environment
        self.replay = replay
        self.shards: dict[str, int] = {}        # Locust client id -> shard index
        self.done: dict[str, tuple[str, int]] = {}
        self.progress: dict[str, dict[str, int]] = {}   # Locust client id -> Replay.counts()
        self.stats = ClientStats()
        self.count = 0
        self.sink: ParquetSink | None = None
        self.abandoned: set[str] = set()          # workers declared lost: anything they send is ignored
        runner = environment.runner
        runner.register_message("loadtest_done", self._on_done)
        runner.register_message("loadtest_progress", self._on_progress)
        gevent.spawn(self._connect_watchdog)

    def start(self) -> None:
        runner = self.env.runner
        clients = sorted(runner.clients.keys())
        self.count = len(clients)
        t0_epoch = time.time() + self.replay.opts.start_delay + 0.5
        for k, client_id in enumerate(clients):
            self.shards[client_id] = k
            runner.send_message("loadtest_shard", {"index": k, "count": self.count, "worker_id": f"w{k}",
                                                   "t0_epoch": t0_epoch}, client_id=client_id)
        self.replay.clock = Clock.now()
        self.replay.t0 = self.replay.clock.mono + (t0_epoch - time.time())
        log.info("shard map: %s", {f"w{k}": c for c, k in self.shards.items()})
        gevent.spawn(self._watch)

    def _on_done(self, msg, **_kw) -> None:
        if msg.node_id in self.abandoned:
            return
        self._on_progress(msg)
        if msg.data["reason"] == "failed" and msg.node_id in self.shards:
            # The worker could not replay (no shard in time, or a crash): fill in what it did not record.
            gevent.spawn(self._lost, msg.node_id, self.shards[msg.node_id], "failed")
            return
        self.done[msg.node_id] = (msg.data["reason"], msg.data["recorded"])

    def _on_progress(self, msg, **_kw) -> None:
        if msg.node_id in self.abandoned:
            return
        self.progress[msg.node_id] = {k: msg.data[k] for k in ("recorded", "sent", "not_sent")}
        self.stats.merge(msg.data["stats"])

    def recorded(self) -> int:
        return sum(p["recorded"] for p in self.progress.values())

    def total_progress(self) -> protocol.Progress:
        sent = sum(p["sent"] for p in self.progress.values())
        not_sent = sum(p["not_sent"] for p in self.progress.values())
        return protocol.Progress(total=self.replay.total_rows, sent=sent, done=self.recorded() - not_sent,
                                 not_sent=not_sent)

    def _watch(self) -> None:
        while True:
            gevent.sleep(0.5)
            say(self.total_progress())
            say(self.stats.live())
            for client_id, k in self.shards.items():
                if client_id not in self.done and client_id not in self.abandoned and self._missing(client_id):
                    self._lost(client_id, k, "lost")
            if self.shards and len(self.done) == len(self.shards):
                reasons = {r for r, _ in self.done.values()}
                reason = "completed" if reasons == {"completed"} else sorted(reasons - {"completed"})[0]
                say(protocol.ClientVerdict(self.stats.verdict(self.replay.opts.lateness_limit)))
                say(protocol.Finished(reason, sum(n for _, n in self.done.values())))
                self.env.process_exit_code = 0
                gevent.spawn(self.env.runner.quit)
                return

    def _connect_watchdog(self) -> None:
        gevent.sleep(self.replay.opts.connect_wait)
        if not self.shards:
            log.error("gave up after %g s: %d of %d workers connected", self.replay.opts.connect_wait,
                      len(self.env.runner.clients.ready), self.env.parsed_options.expect_workers)
            # Locust's main greenlet is stuck in its own wait for workers (no quit or signal handler
            # reaches it yet): record every row as not_sent, close the files, and leave.
            self.record_unstarted()
            self.sink.close()
            os._exit(1)

    def record_unstarted(self) -> None:
        """Every row as not_sent: the master quit before it could hand out a single shard."""
        if self.sink is not None:  # done already (the watchdog, then the quitting handler)
            return
        r = self.replay
        sink = self._master_sink()
        why = "the replay never started (its Locust workers did not connect, or the run was stopped first)"
        n = 0
        for _, row in iter_shard(r.opts.trace_file, 0, 1):
            rec = r._record(row, r.t0 + row["offset_s"], "not_sent", why)
            rec.worker = "master"
            sink.add(rec.as_row())
            n += 1
        say(protocol.Progress(total=n, sent=0, done=0, not_sent=n))
        say(protocol.Finished("failed", n))

    def _master_sink(self) -> ParquetSink:
        """The master's own part files, for the rows it records on behalf of workers."""
        if self.sink is None:
            self.sink = ParquetSink(Path(self.replay.opts.records_dir), "master", REQUEST_SCHEMA,
                                    ThreadPoolExecutor(max_workers=1))
        return self.sink

    def _missing(self, client_id: str) -> bool:
        node = self.env.runner.clients.get(client_id)
        return node is None or node.state == "missing"

    def _lost(self, client_id: str, k: int, why: str) -> None:
        """Write a record for every row of a lost (or failed) worker's shard it did not record: rows
        due before it was lost as error/worker_lost (they may have been sent), the rest as not_sent.
        A worker only briefly missing (a starved heartbeat) is left alone; one declared lost is told
        to stop writing and exit first, so no row is recorded twice."""
        worker = f"w{k}"
        lost_at = time.perf_counter()
        if why == "lost":
            gevent.sleep(self.LOST_GRACE_S)
            if not self._missing(client_id):
                log.warning("worker %s (%s) missed heartbeats but came back", worker, client_id)
                return
        log.error("worker %s (%s) %s: recording its unrecorded rows", worker, client_id, why)
        self.abandoned.add(client_id)
        try:
            self.env.runner.send_message("loadtest_abandon", None, client_id=client_id)
        except Exception:  # a dead worker cannot be told
            pass
        gevent.sleep(self.LOST_GRACE_S)  # its last part file lands, or it stops writing
        folder = Path(self.replay.opts.records_dir)
        seen: set[str] = set()
        for part in folder.glob(f"part-{worker}-*.parquet"):
            seen.update(pq.read_table(part, columns=["request_id"])["request_id"].to_pylist())
        r = self.replay
        sink = self._master_sink()
        written = unsent = 0
        for _, row in iter_shard(r.opts.trace_file, k, self.count):
            if row["request_id"] in seen:
                continue
            due = r.t0 + row["offset_s"]
            rec = r._record(row, due, "not_sent", f"worker {worker} lost before its scheduled time")
            rec.worker = worker
            if due <= lost_at:
                rec.status, rec.error_kind = "error", "worker_lost"
                rec.error = f"worker {worker} lost after this request was due; its outcome is unknown"
            else:
                unsent += 1
            sink.add(rec.as_row())
            written += 1
        sink.flush()
        self.done[client_id] = ("worker_lost" if why == "lost" else "failed", len(seen) + written)
        last = self.progress.get(client_id, {"sent": 0, "not_sent": 0})
        self.progress[client_id] = {"recorded": len(seen) + written, "sent": last["sent"],
                                    "not_sent": last["not_sent"] + unsent}


REPLAY: Replay | None = None
COORDINATOR: Coordinator | None = None


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    opts = environment.parsed_options
    if opts is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, opts.max_inflight * 2 + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    TraceReplayUser.concurrency = opts.max_inflight
    TraceReplayUser.network_timeout = opts.request_timeout
    global REPLAY, COORDINATOR
    REPLAY = Replay(environment, opts)
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        COORDINATOR = Coordinator(environment, REPLAY)
    elif isinstance(runner, WorkerRunner):
        def on_shard(msg, **_kw) -> None:
            d = msg.data
            REPLAY.assign(d["index"], d["count"], d["worker_id"], d["t0_epoch"])
            REPLAY.on_progress = lambda: runner.send_message("loadtest_progress", _report())

        def _report() -> dict:
            return {**REPLAY.counts(), "stats": REPLAY.stats.take(REPLAY.cpu_share())}

        def on_abandon(msg, **_kw) -> None:
            # The master declared this worker lost and recorded its rows: write nothing more, exit.
            log.error("the master declared this worker lost; exiting without writing more records")
            os._exit(0)

        runner.register_message("loadtest_shard", on_shard)
        runner.register_message("loadtest_abandon", on_abandon)
    elif opts.headless:
        k, n = (int(x) for x in opts.shard.split("/"))
        REPLAY.assign(k, n, opts.worker_id)
    else:  # the web UI (`loadtest ui`): the replay starts when someone presses Start
        REPLAY.ui = True
        environment.shape_class = webui.replay_shape(REPLAY._finished.is_set)
        environment.shape_class.runner = runner
        if environment.web_ui is not None:
            webui.install_tab(environment.web_ui, lambda: webui.tab_rows(REPLAY.stats, opts.mode))
            webui.install_replay_page(environment.web_ui, opts.about or opts.trace_file, REPLAY.assigned.is_set)
    gevent.spawn(_trim_history, environment)


def _trim_history(environment, keep: int = 720) -> None:
    """Locust appends to stats.history every few seconds for its charts, forever; keep the last
    `keep` entries (an hour at its default interval) so memory stays flat in long soaks."""
    while True:
        gevent.sleep(30)
        stats = environment.stats
        if stats is not None and len(stats.history) > keep:
            del stats.history[: len(stats.history) - keep]


@events.test_start.add_listener
def _on_test_start(environment, **_kw) -> None:
    if COORDINATOR is not None:
        COORDINATOR.start()
    elif REPLAY is not None and REPLAY.ui:
        if REPLAY.assigned.is_set():  # the web UI refuses a second Start; this is any other way in
            log.error(webui.ALREADY_REPLAYED)
            gevent.spawn(environment.runner.stop)
            return
        k, n = (int(x) for x in REPLAY.opts.shard.split("/"))
        REPLAY.assign(k, n, REPLAY.opts.worker_id, time.time() + REPLAY.opts.start_delay)


@events.test_stopping.add_listener
def _on_test_stopping(environment, **_kw) -> None:
    """In the web UI, Stop ends the replay: in-flight requests get the grace period, the rest are
    recorded as not_sent. (Locust stops a running user only after its task returns, and the replay
    is one long task, so it is told directly.)"""
    if REPLAY is not None and REPLAY.ui and REPLAY.assigned.is_set():
        gevent.spawn(REPLAY.finish, "interrupted")


@events.quitting.add_listener
def _on_quitting(environment, **_kw) -> None:
    if REPLAY is None:
        return
    try:
        REPLAY.finish("interrupted")
        if COORDINATOR is not None:
            if not COORDINATOR.shards:  # quit before the test started (workers never connected, or a signal)
                COORDINATOR.record_unstarted()
            if COORDINATOR.sink is not None:
                COORDINATOR.sink.close()
            if len(COORDINATOR.done) < len(COORDINATOR.shards):  # stopped before every shard finished
                say(COORDINATOR.total_progress())
                say(protocol.Finished("interrupted", COORDINATOR.recorded()))
        if environment.process_exit_code is None:
            environment.process_exit_code = 0
    except Exception:
        log.exception("could not close the records")
        environment.process_exit_code = 3


class TraceReplayUser(FastHttpUser):
    """Runs the dispatcher: the first user of a process replays its shard; any other (Locust
    rebalancing users after a worker is lost) idles."""

    concurrency = 1024
    max_retries = 0
    connection_timeout = 10.0
    network_timeout = 600.0
    _claimed = False

    @task
    def replay(self) -> None:
        runner = self.environment.runner
        if TraceReplayUser._claimed:
            while True:
                gevent.sleep(3600)
        TraceReplayUser._claimed = True
        if not REPLAY.assigned.wait(timeout=60):
            log.error("no shard from the master within 60 s")
            self.environment.process_exit_code = 3
        else:
            try:
                REPLAY.run(self.client.client.clientpool)
            except Exception:
                log.exception("replay failed")
                REPLAY.finish("failed")
                self.environment.process_exit_code = 3
        if isinstance(runner, WorkerRunner):
            runner.send_message("loadtest_done", {"reason": REPLAY.end_reason or "failed", **REPLAY.counts(),
                                                  "stats": REPLAY.stats.take(REPLAY.cpu_share())})
            while True:  # the master quits every worker once all shards are done
                gevent.sleep(3600)
        # Headless: the replay is the whole test. Web UI: stop the test but keep the UI up for its charts.
        gevent.spawn(runner.stop if REPLAY.ui else runner.quit)
        raise StopUser()
