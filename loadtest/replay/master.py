"""The Locust master's side, wired: Locust's master runner seen as the coordinator's Master, and
the greenlets that tick the coordinator and give up on workers that never connect. Gets the
Locust Environment but imports no Locust."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import gevent
from gevent.threadpool import ThreadPoolExecutor

from contract.records import REQUEST_SCHEMA
from loadtest.replay import protocol
from loadtest.replay.coordinator import Coordinator, CoordinatorOptions
from loadtest.replay.options import ReplayConfig
from loadtest.replay.shards import recorded_ids, trace_rows
from loadtest.replay.worker import GeventClock
from loadtest.request.sink import ParquetSink

log = logging.getLogger("loadtest.replay")
TICK_S = 0.5
NEVER_STARTED = "the replay never started (its Locust workers did not connect, or the run was stopped first)"


class LocustMaster:
    """Locust's master runner as the coordinator's Master."""

    def __init__(self, environment) -> None:
        self.env = environment

    def clients(self) -> list[str]:
        return list(self.env.runner.clients.keys())

    def missing(self, client_id: str) -> bool:
        node = self.env.runner.clients.get(client_id)
        return node is None or node.state == "missing"

    def send(self, msg: protocol.Wire, client_id: str) -> None:
        kind, data = protocol.to_locust(msg)
        self.env.runner.send_message(kind, data, client_id=client_id)

    def quit(self) -> None:
        self.env.process_exit_code = 0
        gevent.spawn(self.env.runner.quit)



def start_coordinator(environment, opts: ReplayConfig, say: Callable[[protocol.Line], None]) -> Coordinator:
    """The coordinator of this master, its messages registered and its greenlets running."""
    c = Coordinator(
        LocustMaster(environment),
        CoordinatorOptions(str(opts.trace), trace_rows(opts.trace), opts.run_id, opts.mode, opts.start_delay_s,
                           opts.first_row, opts.resume_at_s),
        GeventClock(), time.time, say,
        lambda: ParquetSink(opts.records_dir, "master", REQUEST_SCHEMA, ThreadPoolExecutor(1), flush_s=opts.flush_s),
        lambda worker: recorded_ids(opts.records_dir, worker), ready=set())
    for kind in ("loadtest_ready", "loadtest_report", "loadtest_done"):
        environment.runner.register_message(
            kind, lambda msg, kind=kind, **_: c.on_message(msg.node_id, protocol.from_locust(kind, msg.data)))

    def ticker() -> None:
        while True:
            gevent.sleep(TICK_S)
            c.tick()

    def watchdog() -> None:
        gevent.sleep(opts.connect_wait_s)
        if c.t0 is None:
            log.error("gave up after %g s: %d of %d workers connected", opts.connect_wait_s,
                      len(environment.runner.clients.ready), environment.parsed_options.expect_workers)
            # Locust's main greenlet is stuck in its own wait for workers (no quit or signal handler
            # reaches it yet): record every row as not_sent, close the files, and leave.
            c.record_unstarted(NEVER_STARTED)
            os._exit(1)

    gevent.spawn(ticker)
    gevent.spawn(watchdog)
    return c
