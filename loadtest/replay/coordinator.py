"""The Locust master's side of a distributed replay: it hands out an explicit shard map when the
test starts (not Locust's worker_index, which is never reused after a reconnect), adds up what the
workers report, notices a lost worker and writes the rows it did not record, and ends the replay
when every shard is done.

No Locust and no gevent here: the coordinator is given the master (who is connected, who is
missing, how to send and quit), a clock, and where rows go. The locustfile calls `tick()` twice a
second; a test calls it with a fake clock and checks the lost-worker rules exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from contract.records import RequestRecord
from loadtest.replay import protocol
from loadtest.replay.dispatcher import Clock
from loadtest.replay.shards import iter_index, shard_keys
from loadtest.request.client import EpochClock
from loadtest.request.client_stats import ClientStats
from loadtest.request.sink import RecordsNotWritten
from loadtest.request.tally import Tally

log = logging.getLogger("loadtest.replay")
LOST_GRACE_S = 2.0  # a missing worker this long is lost; then this long again for its last part file
T0_MARGIN_S = 0.5   # offset 0 comes this long after the shard map is sent, plus the start delay


class Master(Protocol):
    """What the coordinator needs of Locust's master runner."""

    def clients(self) -> list[str]:
        """The connected workers' client ids."""

    def missing(self, client_id: str) -> bool:
        """Whether the worker stopped sending heartbeats (or is gone)."""

    def send(self, msg: protocol.Wire, client_id: str) -> None: ...

    def quit(self) -> None:
        """End the test: every shard is done."""


class Sink(Protocol):
    def add(self, row: dict) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class CoordinatorOptions:
    trace_file: str
    total_rows: int
    run_id: str
    mode: str
    start_delay_s: float       # ReplayConfig's
    first_row: int = 0         # a resumed soak: the rows before this one are recorded already ...
    resume_at_s: float = 0.0   # ... and the workers' offset 0 is this long before their start

    @property
    def rows(self) -> int:
        """The rows this replay schedules."""
        return self.total_rows - self.first_row


@dataclass
class _Worker:
    index: int
    counts: protocol.Counts = field(default_factory=protocol.Counts)
    done: str | None = None            # its end reason, once done (or recovered)
    missing_since: float | None = None
    lost_at: float | None = None       # declared lost (or failed) at; its rows are written later
    lost_why: str = "lost"
    on_disk: int | None = None         # of its counts' recorded rows, those written (when not all were)

    @property
    def worker_id(self) -> str:
        return f"w{self.index}"


@dataclass
class Coordinator:
    master: Master
    opts: CoordinatorOptions
    clock: Clock
    epoch: Callable[[], float]                 # seconds since the epoch (time.time)
    say: Callable[[protocol.Line], None]       # to the command that started the master
    sink_factory: Callable[[], Sink]           # the master's own part files, for rows it writes
    read_recorded: Callable[[str], set[str]]   # request ids a worker's part files hold
    workers: dict[str, _Worker] = field(default_factory=dict)  # Locust client id -> its shard
    stats: ClientStats = field(default_factory=ClientStats)
    tally: Tally = field(default_factory=Tally)  # the workers' and our own rows since the last Observed
    # with the real master: the workers that said they are ready (protocol.WorkerReady); None: no
    # handshake (every connected worker takes its shard at once)
    ready: set[str] | None = None
    t0: float | None = None
    finished: bool = False
    not_written: protocol.UnwrittenRecords | None = None   # a worker's records (or ours) could not be written
    _sink: Sink | None = None
    _start_asked: bool = False                 # the test started: shards go out once the workers are ready
    _lost: int = 0                             # rows our own sink could not write (counted as recorded)
    _records: EpochClock | None = None

    # ---- the test starts ---------------------------------------------------------------------
    def start(self) -> None:
        """Send each connected worker its shard, with one offset 0 for all, once every one of them
        said it is ready (with `ready` kept); until then the next tick tries again. Never after the
        rows were recorded as unstarted (a worker connecting while record_unstarted writes them
        would replay them again), and never twice."""
        self._start_asked = True
        if self.finished or self.t0 is not None:
            return
        clients = sorted(self.master.clients())
        if self.ready is not None and not set(clients) <= self.ready:
            return   # a worker still setting up would drop its shard
        t0_epoch = self.epoch() + self.opts.start_delay_s + T0_MARGIN_S
        self._records = EpochClock(round(self.epoch() * 1e9), self.clock.now())
        self.t0 = self.clock.now() + (t0_epoch - self.epoch()) - self.opts.resume_at_s
        for k, client_id in enumerate(clients):
            self.workers[client_id] = _Worker(k)
            self.master.send(protocol.ShardAssignment(k, len(clients), f"w{k}", t0_epoch), client_id)
        log.info("shard map: %s", {w.worker_id: c for c, w in self.workers.items()})

    # ---- what workers say --------------------------------------------------------------------
    def on_message(self, client_id: str, msg: protocol.Wire) -> None:
        if isinstance(msg, protocol.WorkerReady):
            if self.ready is not None:
                self.ready.add(client_id)
            if self._start_asked:
                self.start()
            return
        w = self.workers.get(client_id)
        if w is None or w.lost_at is not None:  # not ours, or declared lost: ignored
            return
        if isinstance(msg, protocol.WorkerReport | protocol.WorkerDone):
            w.counts = msg.counts
            self.stats.merge(msg.stats)
            self.tally.merge(msg.tally)
        if isinstance(msg, protocol.WorkerDone):
            if msg.not_written is not None:  # a full disk: its rows cannot be filled in either
                self.not_written = self.not_written or msg.not_written
                w.done, w.on_disk = "failed", msg.not_written.written
            elif msg.reason == "failed":  # it could not replay: fill in what it did not record
                self._declare_lost(client_id, w, "failed")
            else:
                w.done = msg.reason

    # ---- twice a second ----------------------------------------------------------------------
    def tick(self) -> None:
        if self.t0 is None and self._start_asked and not self.finished:
            self.start()   # the workers that were still setting up
        if self.finished or self.t0 is None:
            return
        now = self.clock.now()
        self._say_observed()
        self.say(self.progress())
        for client_id, w in self.workers.items():
            if w.done is not None:
                continue
            if w.lost_at is not None:
                if now - w.lost_at >= LOST_GRACE_S:  # its last part file has landed, or it stopped writing
                    self._recover(w)
            elif self.master.missing(client_id):
                if w.missing_since is None:
                    w.missing_since = now
                elif now - w.missing_since >= LOST_GRACE_S:
                    self._declare_lost(client_id, w, "lost")
            elif w.missing_since is not None:
                log.warning("worker %s (%s) missed heartbeats but came back", w.worker_id, client_id)
                w.missing_since = None
        if self.workers and all(w.done is not None for w in self.workers.values()):
            reasons = {w.done for w in self.workers.values()}
            self.finished = True
            self.close()
            self._say_observed()
            self.say(protocol.LoadReport(self.stats.load()))
            self._say_unwritten(self.recorded())
            self.say(protocol.Finished("completed" if reasons == {"completed"} else sorted(reasons - {"completed"})[0],
                                       self.recorded()))
            self.master.quit()

    def _say_observed(self) -> None:
        tally = self.tally.take()
        if tally:
            self.say(protocol.Observed(tally))

    def progress(self) -> protocol.Progress:
        total = protocol.Counts()
        for w in self.workers.values():
            total = total + w.counts
        return protocol.Progress(total=self.opts.rows, sent=total.sent, done=total.recorded - total.not_sent,
                                 not_sent=total.not_sent)

    def recorded(self) -> int:
        """Rows in part files, the workers' and ours."""
        return sum(w.counts.recorded if w.on_disk is None else w.on_disk for w in self.workers.values()) - self._lost

    def _say_unwritten(self, recorded: int) -> None:
        if self.not_written is not None:
            nw = self.not_written
            self.say(protocol.UnwrittenRecords(nw.directory, nw.error, recorded, self.opts.rows))

    # ---- the end -----------------------------------------------------------------------------
    def interrupted(self) -> None:
        """The master is quitting before every shard was done: say how far it got."""
        self.close()
        if self.workers and not self.finished:
            self.finished = True
            self._say_observed()
            self.say(self.progress())
            self._say_unwritten(self.recorded())
            self.say(protocol.Finished("interrupted", self.recorded()))

    def stop_now(self) -> None:
        """Tell every worker still replaying to stop now (the command's second signal)."""
        for client_id, w in self.workers.items():
            if w.done is None and w.lost_at is None:
                try:
                    self.master.send(protocol.StopNow(), client_id)
                except Exception:  # a worker that has gone cannot be told
                    log.warning("could not tell worker %s to stop now", w.worker_id)

    def record_unstarted(self, why: str) -> int:
        """Every row as not_sent: the master quit before it could hand out a single shard."""
        if self.workers or self.finished:
            return 0
        self.finished = True
        self._records = self._records or EpochClock(round(self.epoch() * 1e9), self.clock.now())
        t0 = self.clock.now() - self.opts.resume_at_s
        n = 0
        for _, row in iter_index(self.opts.trace_file, 0, 1, first=self.opts.first_row):
            self._write(row, t0 + row["offset_s"], t0, "master", "not_sent", None, why)
            n += 1
        self.close()
        self._say_observed()
        self.say(protocol.Progress(total=n, sent=0, done=0, not_sent=n))
        self._say_unwritten(n - self._lost)
        self.say(protocol.Finished("failed", n - self._lost))
        return n

    def close(self) -> None:
        """Close our own part files; if they could not all be written, say so with the rest."""
        if self._sink is None:
            return
        try:
            self._sink.close()
        except RecordsNotWritten as exc:
            log.error("%s; %d of the rows the master writes were lost", exc, exc.lost)
            self._lost += exc.lost
            self.not_written = self.not_written or protocol.UnwrittenRecords(str(exc.directory), exc.error, 0, 0)

    # ---- lost workers ------------------------------------------------------------------------
    def _declare_lost(self, client_id: str, w: _Worker, why: str) -> None:
        log.error("worker %s (%s) %s: recording its unrecorded rows", w.worker_id, client_id, why)
        w.lost_at, w.lost_why = (w.missing_since if why == "lost" else None) or self.clock.now(), why
        try:
            self.master.send(protocol.Abandon(), client_id)  # it writes nothing more, and exits
        except Exception:  # a dead worker cannot be told
            pass

    def _recover(self, w: _Worker) -> None:
        """Write a record for every row of the worker's shard it did not record: rows due before it
        was lost as error/worker_lost (they may have been sent), the rest as not_sent."""
        seen = self.read_recorded(w.worker_id)
        written = unsent = 0
        for _, row in iter_index(self.opts.trace_file, w.index, len(self.workers), first=self.opts.first_row,
                                 keys=shard_keys(self.opts.trace_file)):
            if row["request_id"] in seen:
                continue
            due = self.t0 + row["offset_s"]
            if due <= w.lost_at:
                self._write(row, due, self.t0, w.worker_id, "error", "worker_lost",
                            f"worker {w.worker_id} lost after this request was due; its outcome is unknown")
            else:
                self._write(row, due, self.t0, w.worker_id, "not_sent", None,
                            f"worker {w.worker_id} lost before its scheduled time")
                unsent += 1
            written += 1
        self._sink_().flush()
        w.done = "worker_lost" if w.lost_why == "lost" else "failed"
        w.counts = protocol.Counts(len(seen) + written, w.counts.sent, w.counts.not_sent + unsent)

    def _write(self, row: dict, due: float, t0: float, worker: str, status: str, kind: str | None,
               error: str) -> None:
        rec = RequestRecord(run_id=self.opts.run_id, mode=self.opts.mode, worker=worker, tenant=row["tenant"],
                            request_id=row["request_id"], scheduled_ns=self._records.to_ns(due),
                            offset_s=due - t0, status=status, error_kind=kind, error=error)
        row = rec.as_row()
        self._sink_().add(row)
        self.tally.observe(row)

    def _sink_(self) -> Sink:
        if self._sink is None:
            self._sink = self.sink_factory()
        return self._sink
