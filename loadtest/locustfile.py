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

import logging
import os
import resource
import sys
import time
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

from loadtest.client import Clock, execute
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
    g.add_argument("--api-key-env", default="LOADTEST_API_KEY",
                   help="environment variable holding the API key (never passed on the command line)")


def _endpoint_labels(mode: str, endpoints: list[str]) -> list[str]:
    return [f"{mode}-{i}" for i in range(len(endpoints))]


class Replay:
    """One worker's open-loop replay of its shard, and the bookkeeping that keeps every row."""

    def __init__(self, environment, opts) -> None:
        self.env = environment
        self.opts = opts
        k, n = (int(x) for x in opts.shard.split("/"))
        table = pq.read_table(opts.trace_file, columns=TRACE_COLUMNS)
        cols = {c: table.column(c).to_pylist() for c in TRACE_COLUMNS}
        self.rows = [{c: cols[c][i] for c in TRACE_COLUMNS} for i in range(k, table.num_rows, n)]
        self.endpoints = [URL(e.rstrip("/")) for e in opts.endpoints.split(",")]
        self.labels = _endpoint_labels(opts.mode, self.endpoints)
        # A closed-loop trace keeps exactly its concurrency in flight; an open one up to the cap.
        self.closed = closed_concurrency(pq.read_schema(opts.trace_file))
        self.pool = gevent.pool.Pool(self.closed or opts.max_inflight)
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.sink = ParquetSink(Path(opts.records_dir), opts.worker_id, REQUEST_SCHEMA, self.executor)
        self.next_index = 0
        self.recorded = 0
        self.stopping = False
        self.end_reason: str | None = None
        self._finished = gevent.event.Event()
        self.clock: Clock | None = None
        self.t0 = 0.0
        key = os.environ.get(opts.api_key_env)
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def _record(self, row: dict, scheduled: float, status: str | None = None,
                error: str | None = None) -> RequestRecord:
        return RequestRecord(
            run_id=self.opts.run_id, mode=self.opts.mode, worker=self.opts.worker_id, tenant=row["tenant"],
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
        base = self.endpoints[ep]
        url = URL(f"{base}{PATHS[row['api']]}")
        headers = {**self.headers, "X-Request-Id": f"{self.opts.run_id}-{self.opts.mode}-{row['request_id']}"}
        timeout = self.opts.request_timeout
        if self.opts.deadline:
            timeout = max(0.001, min(timeout, self.t0 + self.opts.deadline - time.perf_counter()))
        try:
            execute(client_pool, url, self._body(row), headers, timeout, rec, scheduled, self.clock)
        finally:
            self.sink.add(rec.as_row())
            self.recorded += 1
            exc = None if rec.status == "ok" else Exception(f"{rec.status}: {rec.error_kind or ''} {rec.error or ''}")
            self.env.events.request.fire(
                request_type="POST", name=self.opts.mode, response_time=rec.e2e_ms or 0.0,
                response_length=rec.completion_tokens or 0, exception=exc,
                context={"tenant": row["tenant"]}, url=str(url),
            )

    def run(self, client_pool) -> None:
        """Dispatch every row at its time; return when all have been recorded."""
        self.clock = Clock.now()
        self.t0 = self.clock.mono + self.opts.start_delay
        ticker = gevent.spawn(self._tick)
        deadline = self.t0 + self.opts.deadline if self.opts.deadline else float("inf")
        try:
            for i, row in enumerate(self.rows):
                if self.closed is None:  # open loop: each request at its time
                    due = self.t0 + row["offset_s"]
                    delay = due - time.perf_counter()
                    if delay > 0:
                        gevent.sleep(delay)
                self.pool.wait_available()  # at the cap, lateness accrues (open loop) and is recorded
                if self.closed is not None:  # closed loop: due the moment a slot frees
                    gevent.sleep(max(0.0, self.t0 - time.perf_counter()))
                    due = time.perf_counter()
                if self.stopping or time.perf_counter() >= deadline:
                    break
                self.next_index = i + 1
                self.pool.spawn(self._one, i, row, client_pool, due)
            if self.end_reason is None:  # nobody stopped us: drain and close
                self.pool.join()
                self.finish("completed" if self.next_index == len(self.rows) else "deadline")
        finally:
            ticker.kill(block=False)

    def _tick(self) -> None:
        while True:
            print(f"@@progress {self.recorded} {len(self.rows)}", flush=True)
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
        if reason != "completed" and not self.pool.join(timeout=self.opts.grace):
            self.pool.kill(block=True, timeout=5)  # recorded as error/interrupted by the client
        if self.clock is None:  # stopped before the dispatcher started
            self.clock, self.t0 = Clock.now(), time.perf_counter()
        why = {"deadline": "run deadline reached before its scheduled time",
               "interrupted": "run interrupted before its scheduled time"}.get(reason, reason)
        for row in self.rows[self.next_index:]:
            self.sink.add(self._record(row, self.t0 + row["offset_s"], "not_sent", why).as_row())
            self.recorded += 1
        self.sink.close()
        self._finished.set()
        print(f"@@progress {self.recorded} {len(self.rows)}", flush=True)
        print(f"@@finished {reason} {self.recorded}", flush=True)


REPLAY: Replay | None = None


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
    global REPLAY
    REPLAY = Replay(environment, opts)


@events.quitting.add_listener
def _on_quitting(environment, **_kw) -> None:
    if REPLAY is None:
        return
    try:
        REPLAY.finish("interrupted")
        if environment.process_exit_code is None:
            environment.process_exit_code = 0
    except Exception:
        log.exception("could not close the records")
        environment.process_exit_code = 3


class TraceReplayUser(FastHttpUser):
    """Runs the dispatcher; spawn exactly one per worker process (-u 1)."""

    concurrency = 1024
    max_retries = 0
    connection_timeout = 10.0
    network_timeout = 600.0

    @task
    def replay(self) -> None:
        try:
            REPLAY.run(self.client.client.clientpool)
        except Exception:
            log.exception("replay failed")
            sys.stdout.flush()
            self.environment.process_exit_code = 3
        gevent.spawn(self.environment.runner.quit)
        raise StopUser()
