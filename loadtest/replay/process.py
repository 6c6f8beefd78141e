"""One replay of one mode as Locust processes: the one every command starts (`run`, `ui`, and what
comes after them). `LocustProcess` builds the command lines from a ReplayConfig, starts the lone
process or a master and its workers (here, or as Ray actors on the cluster's nodes), reads the
typed messages the master prints, passes signals on, and ends with a typed `ReplayEnd`; every
process it started is stopped on every path.

Locust is never imported here (it monkey-patches the process it is imported in, which hangs
`ray.init()`): it runs only in the child processes.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from common.process import child_env, told_when_parent_dies
from contract.records import NO_RECORD
from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig
from loadtest.replay.shards import trace_rows, trace_tenants
from loadtest.request.client_stats import ClientLoad, verdict
from loadtest.request.compact import compact
from loadtest.request.exporter import Key, key_of
from loadtest.request.tally import LiveTallies, Tally, observe_batch, tally_of, tenant_targets

log = logging.getLogger("loadtest")
WORKER_EXIT_WAIT_S = 10.0  # past a worker's grace for in-flight requests, to write its rows and exit; then killed
STOP_NOW = signal.SIGUSR1  # to a Locust process: stop now (the locustfile's handler), after a SIGTERM


@dataclass
class ReplayEnd:
    """How a replay ended: `reason` (as protocol.Finished says; None if it never said), rows
    recorded, the client's verdict on itself, and the Locust process's exit code."""

    reason: str | None = None
    recorded: int = 0
    client: dict | None = None
    returncode: int | None = None
    not_written: protocol.UnwrittenRecords | None = None   # the records could not be written (a full disk)
    scheduled: int = 0                                # rows the replay was to record
    unrecorded: int = 0                               # ... that its records do not hold (the end's recount)

    @property
    def crashed(self) -> bool:
        """Locust failed (not a replay we interrupted)."""
        return self.returncode not in (0, None) and self.reason != "interrupted"

    def crash_text(self, config: ReplayConfig) -> str:
        """One line for a crashed replay: how the Locust process (or the master) ended, what the
        records hold, and its log."""
        what = f"the Locust {'master' if config.distributed else 'process'} of {config.mode}"
        log_file = config.logs_dir / f"locust-{config.mode}.log"
        code = self.returncode or 0
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        if self.reason is not None:   # it said how the replay ended, then failed
            return (f"{what} {how} after the replay ended ({self.reason}); {self.recorded:,} requests recorded; "
                    f"see {log_file}")
        return (f"{what} {how} before the replay ended; the records hold {self.recorded:,} of the "
                f"{self.scheduled:,} requests scheduled" + (f", {self.unrecorded:,} {NO_RECORD}"
                                                            if self.unrecorded else "") + f"; see {log_file}")

    def unrecorded_text(self, config: ReplayConfig) -> str:
        """One line for a replay that ended without a record of every request it scheduled."""
        return (f"{config.mode}: the records hold {self.scheduled - self.unrecorded:,} of the {self.scheduled:,} "
                f"requests scheduled, {self.unrecorded:,} {NO_RECORD}; see "
                f"{config.logs_dir / f'locust-{config.mode}.log'}")


def read_output(stdout, other: TextIO, on_message: Callable[[protocol.Line], None]) -> None:
    """Until `stdout` closes: each message line to `on_message`, any other line to `other`."""
    lost = False
    for line in stdout:
        try:
            msg = protocol.parse_line(line)
        except ValueError as exc:  # a bug between the two sides: say it, keep reading
            log.error("%s", exc)
            continue
        if msg is None:
            try:
                other.write(line)
            except OSError as exc:  # a full disk: Locust's own output is lost, never the messages
                if not lost:
                    log.error("could not keep Locust's output in %s: %s", getattr(other, "name", "its log"), exc)
                lost = True
        else:
            on_message(msg)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class LocustProcess:
    config: ReplayConfig
    on_message: Callable[[protocol.Line], None] = lambda msg: None
    env: dict[str, str] = field(default_factory=dict)   # for Ray workers: the API key, never on a command line
    live: LiveTallies | None = None     # the command's tally of every replay (its bars, /metrics and board read it)
    end: ReplayEnd = field(default_factory=ReplayEnd)
    main: subprocess.Popen | None = None
    workers: list[subprocess.Popen] = field(default_factory=list)
    ray_pool: object | None = None
    _signals: int = 0          # signals the command got ...
    _forwarded: int = 0        # ... and passed on (once the process is Ready)
    _ready: bool = False
    _lock: threading.RLock = field(default_factory=threading.RLock)   # the reader thread and the signal handler
    _reader: threading.Thread | None = None
    _stats_out: TextIO | None = None
    _started_ns: int = 0
    _targets: dict = field(default_factory=dict)   # tenant -> SLO targets, from the trace
    _load: ClientLoad | None = None

    # ---- start -------------------------------------------------------------------------------
    @property
    def _key(self) -> Key:
        return key_of(self.config.run_id, self.config.mode)

    def start(self) -> LocustProcess:
        cfg = self.config
        self._started_ns = time.time_ns()
        self._targets = tenant_targets(cfg.trace)
        if self.live is not None:
            self.live.expect(self._key, trace_tenants(cfg.trace), self._targets)
        host, port = "127.0.0.1", 0
        if cfg.ray_workers:
            from loadtest.replay.ray_workers import RayWorkers, driver_ip

            host = driver_ip()  # workers on other nodes reach the master at this node's address
            self.ray_pool = RayWorkers(cfg, host, self.env)
        if cfg.distributed:
            port = free_port()
        self._stats_out = open(cfg.logs_dir / f"locust-{cfg.mode}.stdout.txt", "w")
        self.main = subprocess.Popen(cfg.main_argv(host, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1, start_new_session=True, preexec_fn=told_when_parent_dies,
                                     cwd=cfg.logs_dir, env=child_env(home=cfg.logs_dir))
        try:
            if self.ray_pool is not None:
                self.ray_pool.start(port)
            elif cfg.distributed:
                for i in range(cfg.workers):
                    with open(cfg.logs_dir / f"locust-{cfg.mode}-worker{i}.stderr.txt", "wb") as err:
                        self.workers.append(subprocess.Popen(
                            cfg.worker_argv(i, host, port), stdout=subprocess.DEVNULL, stderr=err,
                            start_new_session=True, preexec_fn=told_when_parent_dies, cwd=cfg.logs_dir,
                            env=child_env(home=cfg.logs_dir)))
        except BaseException:
            self.kill()
            raise
        self._reader = threading.Thread(target=read_output, args=(self.main.stdout, self._stats_out, self._take),
                                        daemon=True, name=f"locust-{cfg.mode}-reader")
        self._reader.start()
        return self

    @property
    def pids(self) -> list[int]:
        """The lone process (or the master) first, then the local workers."""
        return [p.pid for p in [self.main, *self.workers] if p is not None]

    @property
    def placements(self) -> list[dict]:
        """With Ray workers: each worker's node and pid."""
        return list(self.ray_pool.placements) if self.ray_pool is not None else []

    @property
    def worker_nodes(self) -> str | None:
        """With Ray workers: the nodes they were dealt over, in words."""
        return self.ray_pool.where if self.ray_pool is not None else None

    # ---- run ---------------------------------------------------------------------------------
    def _take(self, msg: protocol.Line) -> None:
        if self.live is not None and isinstance(msg, protocol.Observed | protocol.Progress):
            try:   # the tally is for views: a bad report must not stop this reader (Locust would block on its pipe)
                if isinstance(msg, protocol.Observed):
                    self.live.add(self._key, msg.tally)
                else:
                    self.live.progress(self._key, msg.in_flight, msg.total)
            except Exception:
                log.exception("could not add a replay report to the live tally")
        if isinstance(msg, protocol.Ready):
            with self._lock:
                self._ready = True
                self._pass_on()   # the signals that came while it was starting
        if isinstance(msg, protocol.LoadReport):
            self._load = msg.load
        elif isinstance(msg, protocol.Finished):
            self.end.reason, self.end.recorded = msg.reason, msg.recorded
        elif isinstance(msg, protocol.UnwrittenRecords):
            self.end.not_written = msg
        self.on_message(msg)

    def signal(self) -> None:
        """A SIGINT or SIGTERM reached the command: the first stops the replay gracefully (in-flight
        requests get their grace period, the rest is recorded as not_sent); a second stops it now
        (STOP_NOW: in-flight requests are cut and recorded as interrupted, the records closed); a
        third kills the processes (what they had not yet flushed is lost). Held back until the
        process says it is Ready (before, a signal would kill it with nothing recorded)."""
        with self._lock:
            self._signals += 1
            if self._ready or self._signals >= 3:
                self._pass_on()

    def _pass_on(self) -> None:
        if self.main is None:   # not started yet: Ready passes on what came (the command starts none after a third)
            return
        while self._forwarded < self._signals:
            self._forwarded += 1
            sig = {1: signal.SIGTERM, 2: STOP_NOW}.get(self._forwarded, signal.SIGKILL)
            self._forward(sig)
            if self.ray_pool is not None:   # workers on Ray nodes get it as local ones do (the master may be gone),
                # from a thread: this may run in a signal handler, perhaps while the main thread is in a Ray call
                threading.Thread(target=self.ray_pool.signal, args=(sig,), daemon=True).start()

    def _signal_workers(self, sig: int) -> None:
        self._forward(sig, [*self.workers])
        if self.ray_pool is not None:
            self.ray_pool.stop()

    def _forward(self, sig: int, processes: list[subprocess.Popen] | None = None) -> None:
        for p in [self.main, *self.workers] if processes is None else processes:
            if p is not None and p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass

    def wait(self, poll_s: float = 0.1) -> ReplayEnd:
        """Until the replay has ended; then every process it started is gone."""
        try:
            while self.main.poll() is None:  # polled: a signal handler runs between polls
                time.sleep(poll_s)
            self._reader.join(5)
            if self.end.reason is None and self.main.returncode != 0:
                # the master died without quitting its workers: stop them gracefully now, so each
                # records its shard (in-flight requests get the grace period, the rest not_sent)
                self._signal_workers(signal.SIGTERM)
            # A stopped master leaves within a second, while each worker may still give its in-flight
            # requests their grace period, then write its rows: each gets both before it is killed.
            deadline = time.monotonic() + self.config.grace_s + WORKER_EXIT_WAIT_S
            for w in self.workers:
                try:
                    w.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(w.pid, signal.SIGKILL)
                    w.wait()
        finally:
            self._stop_ray()
            if self._stats_out is not None:
                try:
                    self._stats_out.close()
                except OSError:   # a full disk: said by the reader when it lost output
                    pass
        self.end.returncode = self.main.returncode
        on_disk = self._recount_and_compact()
        total = on_disk.total()
        self.end.scheduled = trace_rows(self.config.trace) - self.config.first_row
        self.end.unrecorded = max(0, self.end.scheduled - total.recorded)
        if self.end.crashed or self.config.distributed:
            self.end.recorded = total.recorded
        if self._load is not None:
            self.end.client = verdict(self._load, total, self.config.lateness_limit_ms)
        if self.live is not None:  # what reached us on the way may be short of the records (a lost worker)
            self.live.settle(self._key, on_disk)
        return self.end

    def _recount_and_compact(self) -> Tally:
        """The recount: what reached the records, whatever the processes said (an interrupted master
        counts its workers' last reports: they recorded the rest since); and the many small parts
        flushed on the way made a few files (nothing writes there now). The records are read once:
        the compaction hands the recount every row it reads, and the recount reads only the rest."""
        folder, since = self.config.records_dir, self._started_ns
        on_disk = Tally(self._targets)
        try:
            done = compact(folder, seen=lambda batch: observe_batch(on_disk, batch, since))
        except Exception as exc:   # the parts stay, whole: the dataset is as valid, only in more files
            log.warning("could not compact the records in %s (%s): its part files stay", folder, exc)
            return tally_of(folder, since, self._targets)   # what the compaction read is read again
        return tally_of(folder, since, skip=done.written, into=on_disk)

    def kill(self) -> None:
        """Stop every process at once (a failed start, or leaving on an error)."""
        self._forward(signal.SIGKILL)
        for p in [self.main, *self.workers]:
            if p is not None:
                p.wait()
        self._stop_ray()

    def _stop_ray(self) -> None:
        if self.ray_pool is not None:  # the master has quit its workers; stop any that linger, drop the actors
            self.ray_pool.stop()
