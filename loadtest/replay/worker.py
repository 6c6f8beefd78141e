"""One Locust process's replay of its shard: the dispatcher given gevent's clock and pool, the
request each row becomes, its record in the Parquet sink, the client's histograms, and what the
process tells the command (or its master) as it goes.

Runs under gevent inside a Locust process, but imports no Locust: the locustfile hands it the
HTTP connection pool and a callback for Locust's own request statistics.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import gevent
import gevent.event
import gevent.pool
import orjson
from gevent.threadpool import ThreadPoolExecutor
from geventhttpclient.url import URL

from contract.records import REQUEST_SCHEMA, RequestRecord
from loadtest.replay import protocol
from loadtest.replay.conversations import Answer, Conversations, followed_turns, next_messages, with_answer
from loadtest.replay.dispatcher import UNSENT_BECAUSE, Dispatcher, Schedule
from loadtest.replay.options import ReplayConfig
from loadtest.replay.shards import ShardRows, conversation_shard, shard_size, trace_closed, trace_rows
from loadtest.request.body import STREAM_OPTIONS as BODY_STREAM_OPTIONS
from loadtest.request.body import request_body
from loadtest.request.client import EpochClock, execute
from loadtest.request.client_stats import ClientStats, cpu_seconds
from loadtest.request.retry import RetryPolicy
from loadtest.request.sink import ParquetSink, RecordsNotWritten
from loadtest.request.tally import Tally, tenant_targets

log = logging.getLogger("loadtest.replay")
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
STREAM_OPTIONS = orjson.Fragment(orjson.dumps(BODY_STREAM_OPTIONS))   # encoded once


def _fragment(messages: str) -> orjson.Fragment:
    """A trace row's messages JSON, sent as it is."""
    return orjson.Fragment(messages.encode())


TICK_S = 0.5  # progress, live figures and the sink's time-bound flush, twice a second


class GeventClock:
    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        gevent.sleep(seconds)


class GeventPool:
    """A gevent pool of in-flight requests, as the dispatcher's Pool."""

    def __init__(self, size: int) -> None:
        self.pool = gevent.pool.Pool(size)

    def wait_available(self) -> None:
        self.pool.wait_available()

    def spawn(self, fn: Callable[..., None], *args) -> None:
        self.pool.spawn(fn, *args)

    def join(self, timeout: float | None = None) -> bool:
        return self.pool.join(timeout=timeout)

    def kill(self) -> None:
        self.pool.kill(block=True, timeout=5)  # each request records itself as error/interrupted


class ShardReplay:
    """This process's shard: `assign` it, `run` it, `finish` it (also from a signal or Stop)."""

    def __init__(self, opts: ReplayConfig, worker_id: str, tell: Callable[[ShardReplay, bool], None],
                 on_request: Callable[..., None] | None = None) -> None:
        self.opts = opts
        self.tell = tell                  # tell(self, final): progress to the command or the master
        self.on_request = on_request      # Locust's request event, for its own statistics
        self.total_rows = trace_rows(opts.trace)
        self.closed = trace_closed(opts.trace)
        self.worker_id = worker_id
        self.shard_size = 0
        self.labels = [f"{opts.mode}-{i}" for i in range(len(opts.endpoints))]
        # Request URLs built once, not per request: [endpoint][api]
        self.urls = [{api: URL(f"{e.rstrip('/')}{path}") for api, path in PATHS.items()} for e in opts.endpoints]
        key = os.environ.get(opts.api_key_env)
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                        **({"Authorization": f"Bearer {key}"} if key else {})}
        self.clock = EpochClock.now()
        self.retry = RetryPolicy(opts.retry_after == "honour", opts.max_retries)
        self.stats = ClientStats()
        # per tenant, what reached the records' parts: the one live statistic, shipped to the command
        self.tally = Tally(tenant_targets(opts.trace))
        self.sink: ParquetSink | None = None
        self.dispatcher: Dispatcher | None = None
        self.recorded = 0
        self.turns_not_sent = 0           # later turns dispatched, then not sent (their turn before failed)
        self.conversations: Conversations | None = None
        self.keys = None                  # shard_keys: a conversation's turns go to its first turn's replica too
        self.not_written: RecordsNotWritten | None = None   # the sink could not write (a full disk)
        self.assigned = gevent.event.Event()
        self.done = gevent.event.Event()  # every row recorded, the sink closed, the end told
        self._closing = False
        self._client_pool = None
        self._cpu_mark = (time.monotonic(), cpu_seconds())

    # ---- set-up ------------------------------------------------------------------------------
    def assign(self, index: int, count: int, worker_id: str, t0_epoch: float | None = None) -> None:
        """Take shard `index` of `count`, as `worker_id`, with offset 0 at `t0_epoch` (default:
        `start_delay` from now)."""
        self.worker_id = worker_id
        keys, turns = conversation_shard(self.opts.trace, index, count)
        self.keys = keys
        self.shard_size = shard_size(self.total_rows, index, count, self.opts.first_row, keys)
        if keys is not None:
            self.conversations = Conversations(gevent.event.Event, followed_turns(turns))
        self.clock = EpochClock.now()
        t0 = self.clock.mono + (self.opts.start_delay_s if t0_epoch is None else t0_epoch - time.time())
        t0 -= self.opts.resume_at_s  # a resumed soak goes on from where it was
        cap = self.opts.max_inflight
        if self.closed:  # the scenario's concurrency is for the whole client, split over the shards
            cap = max(1, self.closed // count + (index < self.closed % count))
        self.sink = ParquetSink(self.opts.records_dir, worker_id, REQUEST_SCHEMA, ThreadPoolExecutor(1),
                                flush_s=self.opts.flush_s, on_flush=self.tally.observe_many)
        schedule = Schedule(t0, self.opts.deadline_s, self.closed is not None, self.opts.grace_s, self.opts.drain)
        rows = ShardRows(str(self.opts.trace), index, count, first=self.opts.first_row, keys=keys)
        self.dispatcher = Dispatcher(rows, self.shard_size, schedule,
                                     GeventClock(), GeventPool(cap), self._send, self._unsent)
        self.assigned.set()

    # ---- the replay --------------------------------------------------------------------------
    def run(self, client_pool) -> str:
        """Replay the shard on Locust's HTTP connections; the end reason."""
        self._client_pool = client_pool
        self._cpu_mark = (time.monotonic(), cpu_seconds())  # start-up work does not count
        self.stats.start_replay()
        ticker = gevent.spawn(self._tick)
        try:
            reason = self.dispatcher.run()  # it finishes itself, or waits for whoever is finishing it
        finally:
            ticker.kill(block=False)
        self._close()
        return self.end_reason or reason   # `failed` when its records could not be written

    def finish(self, reason: str) -> None:
        """End now (`interrupted`, `failed`): the rest is recorded as not_sent. Idempotent."""
        if self.dispatcher is None:  # never given a shard (a master, or stopped before its start)
            return
        self.dispatcher.finish(reason)
        self._close()

    def stop_now(self) -> None:
        """A second signal: cut the requests in flight (recorded as interrupted), record the rest
        as not_sent, close the records. Runs in its own greenlet."""
        if self.dispatcher is not None:
            self.dispatcher.hurry()
        self.finish("interrupted")

    @property
    def end_reason(self) -> str | None:
        if self.not_written is not None:
            return "failed"
        return self.dispatcher.end_reason if self.dispatcher else None

    def unwritten(self) -> protocol.UnwrittenRecords | None:
        """What the command (or the master) is told when the records could not all be written."""
        nw = self.not_written
        return nw and protocol.UnwrittenRecords(str(nw.directory), nw.error, self.on_disk, self.shard_size)

    @property
    def on_disk(self) -> int:
        """Rows recorded in part files: every row recorded, unless a write failed."""
        return self.sink.rows_written if self.not_written is not None else self.recorded

    def counts(self) -> protocol.Counts:
        d, later = self.dispatcher, self.turns_not_sent
        return protocol.Counts(self.recorded, d.sent - later if d else 0, d.not_sent + later if d else 0)

    def progress(self) -> protocol.Progress:
        c = self.counts()
        return protocol.Progress(total=self.shard_size, sent=c.sent, done=c.recorded - c.not_sent, not_sent=c.not_sent)

    def cpu_share(self) -> float:
        """This process's CPU use, as a share of one core, since the last call."""
        now, cpu = time.monotonic(), cpu_seconds()
        then, cpu_then = self._cpu_mark
        if now - then < 0.25:  # too short to say anything; keep accumulating
            return 0.0
        self._cpu_mark = (now, cpu)
        return (cpu - cpu_then) / (now - then)

    # ---- what the dispatcher calls -----------------------------------------------------------
    def _record(self, row: dict, scheduled: float, status: str = "not_sent", error: str | None = None) -> RequestRecord:
        return RequestRecord(run_id=self.opts.run_id, mode=self.opts.mode, worker=self.worker_id,
                             tenant=row["tenant"], request_id=row["request_id"],
                             scheduled_ns=self.clock.to_ns(scheduled), offset_s=scheduled - self.dispatcher.schedule.t0,
                             status=status, error=error)

    def _body(self, row: dict, messages: list[dict] | None = None) -> bytes:
        if messages is not None:   # a later turn of a conversation: the conversation as replayed so far
            return orjson.dumps(request_body({**row, "messages": messages}, self.opts.served_model, lambda m: m,
                                             STREAM_OPTIONS))
        return orjson.dumps(request_body(row, self.opts.served_model, _fragment, STREAM_OPTIONS))

    def _send(self, index: int, row: dict, scheduled: float) -> None:
        conversation, turn = row.get("conversation"), row.get("turn")
        if conversation is None or self.conversations is None:
            self._request(index, row, scheduled)
            return
        ended = Answer("not_sent", time.perf_counter())
        try:
            ended = self._turn(index, row, scheduled, conversation, turn)
        finally:   # a later turn never waits for ever, whatever became of this one
            self.conversations.answered(conversation, turn, ended)

    def _turn(self, index: int, row: dict, scheduled: float, conversation: str, turn: int) -> Answer:
        """One turn of a conversation: a later one waits for the answer before it and its think time."""
        messages = None
        if turn:
            try:
                why, due, prev = self._await_turn(row, conversation, turn)
            except gevent.GreenletExit:   # stopped while it waited: never sent, and recorded so
                self.turns_not_sent += 1
                self._unsent(row, scheduled, UNSENT_BECAUSE["interrupted"])
                raise
            if why is not None:
                self.turns_not_sent += 1
                self._unsent(row, due, why)
                return Answer("not_sent", time.perf_counter())
            scheduled = due
            messages = next_messages(prev.messages, orjson.loads(row["messages"]))
        answer: list[str] | None = [] if self.conversations.followed(conversation, turn) else None
        rec = self._request(index, row, scheduled, messages, answer)
        ended = (rec.last_token_ns - self.clock.epoch_ns) / 1e9 + self.clock.mono if rec.last_token_ns \
            else time.perf_counter()
        if rec.status != "ok" or answer is None:
            return Answer(rec.status, ended)
        sent = messages if messages is not None else orjson.loads(row["messages"])
        return Answer("ok", ended, with_answer(sent, "".join(answer)))

    def _await_turn(self, row: dict, conversation: str, turn: int) -> tuple[str | None, float, Answer | None]:
        """Wait for the turn before's answer, then the think time: (why it is not sent, or None; when
        it is due; that answer). Bounded by the run's deadline; a stop ends the wait (GreenletExit)."""
        left = self.dispatcher.time_left()
        prev = self.conversations.wait(conversation, turn, left)
        now = time.perf_counter()
        if prev is None:
            return UNSENT_BECAUSE["deadline"], now, None
        if prev.status != "ok":
            return (f"turn {turn - 1} of conversation {conversation} ended {prev.status}: this turn follows its "
                    "answer", now, None)
        due = prev.ended + (row.get("think_s") or 0.0)
        left = self.dispatcher.time_left()
        if left is not None and due - now >= left:
            return UNSENT_BECAUSE["deadline"], due, None
        if due > now:
            gevent.sleep(due - now)
        return None, due, prev

    def _request(self, index: int, row: dict, scheduled: float, messages: list[dict] | None = None,
                 answer: list[str] | None = None) -> RequestRecord:
        rec = self._record(row, scheduled)
        ep = int(self.keys[index] if self.keys is not None else index) % len(self.urls)   # a prefix cache's hits
        rec.replica = self.labels[ep]
        url = self.urls[ep][row["api"]]
        headers = {**self.headers, "X-Request-Id": f"{self.opts.run_id}-{self.opts.mode}-{row['request_id']}"}
        left = self.dispatcher.time_left()
        cut = left is not None and left < self.opts.timeout_s
        timeout = max(0.001, left) if cut else self.opts.timeout_s
        try:
            execute(self._client_pool, url, self._body(row, messages), headers, timeout, rec, scheduled, self.clock,
                    cut, self.retry, answer)
        finally:
            out = rec.as_row()
            self.sink.add(out)
            self.stats.observe(out)
            self.recorded += 1
            if self.on_request is not None:
                self.on_request(rec, str(url), row["tenant"])
        return rec

    def _unsent(self, row: dict, scheduled: float, why: str) -> None:
        self.sink.add(self._record(row, scheduled, "not_sent", why).as_row())
        self.recorded += 1

    def _tick(self) -> None:
        while not self.sink.failed:
            self.tell(self, False)
            self.sink.tick()
            gevent.sleep(TICK_S)
        gevent.spawn(self._stop_unwritable)  # not from here: run() kills this greenlet once the dispatcher ends

    def _stop_unwritable(self) -> None:
        """A write failed (a full disk): nothing more can be recorded, so stop now, with no grace period."""
        log.error("%s: stopping the replay", self.sink.error or "a records write failed")
        self.dispatcher.stop("failed")
        self.dispatcher.pool.kill()
        self.finish("failed")

    def _close(self) -> None:
        """Close the sink and tell the final figures, once: run and finish may both get here, and
        whoever comes second waits until it is done (the process may exit right after)."""
        if self.sink is None:
            return
        if self._closing:
            self.done.wait()
            return
        self._closing = True
        try:
            try:
                self.sink.close()
            except RecordsNotWritten as exc:
                self.not_written = exc
                log.error("%s; %d rows written, %d not", exc, exc.written, exc.lost)
            self.tell(self, True)
        finally:
            self.done.set()


def request_event(environment) -> Callable[..., None]:
    """Locust's own statistics: one request per LLM request, named after the mode, E2E as its time.
    A failure is named by its status and error kind only: Locust keeps one entry per distinct
    message for ever, and a request's own detail (in its Parquet record) would grow that in a soak."""

    def fire(rec, url: str, tenant: str) -> None:
        exc = None if rec.status == "ok" else Exception(f"{rec.status}: {rec.error_kind or 'unknown'}")
        environment.events.request.fire(request_type="POST", name=rec.mode, response_time=rec.e2e_ms or 0.0,
                                        response_length=rec.completion_tokens or 0, exception=exc,
                                        context={"tenant": tenant}, url=url)

    return fire


def tell_command(say: Callable[[protocol.Line], None]) -> Callable[[ShardReplay, bool], None]:
    """A lone replay process's `tell`: what reached the records and the progress on stdout, then
    how hard the client worked and the end."""

    def tell(replay: ShardReplay, final: bool) -> None:
        replay.stats.cpu_max = max(replay.stats.cpu_max, replay.cpu_share())
        tally = replay.tally.take()
        if tally:  # before the progress that counts its rows, so /metrics never lags the bar
            say(protocol.Observed(tally))
        say(replay.progress())
        if final:
            say(protocol.LoadReport(replay.stats.load()))
            if (unwritten := replay.unwritten()) is not None:
                say(unwritten)
            say(protocol.Finished(replay.end_reason or "failed", replay.on_disk))

    return tell


def tell_master(send: Callable[[protocol.Wire], None]) -> Callable[[ShardReplay, bool], None]:
    """A worker's `tell`: reports to the master, then its last one as WorkerDone."""

    def tell(replay: ShardReplay, final: bool) -> None:
        stats, tally = replay.stats.take(replay.cpu_share()), replay.tally.take()
        c = replay.counts()
        send(protocol.WorkerDone(replay.end_reason or "failed", c, stats, tally, replay.unwritten()) if final
             else protocol.WorkerReport(c, stats, tally))

    return tell
