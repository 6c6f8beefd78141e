"""The Locust side of a replay: `locust -f loadtest/replay/locustfile.py ...` (ReplayConfig.argv
builds the command line). Only Locust's hooks and the user class live here; they wire Locust to
the shard replay (worker.py) and the master's coordinator (coordinator.py); always headless (the
web UI of `loadtest ui` is its own process, front.py). One process's state is one Session, kept on
Locust's Environment.

Only ever loaded by Locust, in its own process: Locust monkey-patches the process with gevent,
and `ray.init()` hangs in a patched process.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
from dataclasses import dataclass

import gevent
import locust.runners
from locust import FastHttpUser, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from common.process import PARENT_GONE, PARENT_PID_ENV
from loadtest.replay import protocol
from loadtest.replay.coordinator import Coordinator
from loadtest.replay.master import NEVER_STARTED, start_coordinator
from loadtest.replay.options import ReplayConfig, add_replay_arguments, replay_config
from loadtest.replay.process import STOP_NOW
from loadtest.replay.worker import ShardReplay, request_event, tell_command, tell_master

log = logging.getLogger("loadtest.replay")
# who started this process: a Ray actor (--ray-workers), or the command (as it said, see PARENT_PID_ENV)
PARENT_PID = int(os.environ.get(PARENT_PID_ENV) or os.getppid())
PARENT_CHECK_S = 1.0    # how often the parent is looked for, in case its PARENT_GONE never came
SHARD_WAIT_S = 60.0     # a worker without a shard this long after its user started gives up
HISTORY_KEEP = 720      # Locust's chart history entries kept (an hour at its default interval)
MASTER_SILENT_S = 10.0  # a worker that hears no heartbeat from its master this long quits
INIT_WAIT_S = 60.0      # a message that comes before the process set its replay up waits this long for it


def say(msg: protocol.Line) -> None:
    """Tell the command that started this process (it reads our stdout)."""
    print(protocol.encode_line(msg), flush=True)


@dataclass
class Session:
    """This process's part in the replay."""

    replay: ShardReplay | None = None        # a lone process or a worker
    coordinator: Coordinator | None = None   # the master
    claimed: bool = False                    # a user is running the replay (others idle)
    orphaned: bool = False                   # the process that started this one died (PARENT_GONE)


def session(environment) -> Session:
    """This process's session. A worker's runner takes messages (Locust's spawn among them) while it
    connects, before Locust fires `init`, which makes the session: wait for it."""
    waited = 0.0
    while not hasattr(environment, "loadtest_session"):
        if waited >= INIT_WAIT_S:
            raise RuntimeError(f"the replay was not set up within {INIT_WAIT_S:g} s")
        gevent.sleep(0.05)
        waited += 0.05
    return environment.loadtest_session


events.init_command_line_parser.add_listener(add_replay_arguments)


@events.init.add_listener
def _on_init(environment, **_kw) -> None:
    parsed = environment.parsed_options
    if parsed is None:
        return
    opts = replay_config(parsed)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, opts.max_inflight * 2 + 256)), hard))
    TraceReplayUser.concurrency = opts.max_inflight
    TraceReplayUser.network_timeout = opts.timeout_s
    runner = environment.runner
    s = environment.loadtest_session = Session()
    if isinstance(runner, MasterRunner):
        s.coordinator = start_coordinator(environment, opts, say)
    elif isinstance(runner, WorkerRunner):
        # A worker whose master died (its heartbeats stop) quits this soon, recording its shard as
        # an interrupt would; Locust's own wait is 60 s. The command stops local workers at once.
        locust.runners.MASTER_HEARTBEAT_TIMEOUT = MASTER_SILENT_S
        to_master = tell_master(lambda m: runner.send_message(*protocol.to_locust(m)))
        s.replay = ShardReplay(opts, parsed.worker_id, to_master, request_event(environment))
        runner.register_message("loadtest_shard", lambda msg, **_: _assign(s.replay, protocol.from_locust(
            "loadtest_shard", msg.data)))
        runner.register_message("loadtest_abandon", lambda msg, **_: _abandoned())
        runner.register_message("loadtest_stop_now", lambda msg, **_: gevent.spawn(s.replay.stop_now))
        runner.send_message(*protocol.to_locust(protocol.WorkerReady()))   # only now can it take its shard
    else:
        s.replay = ShardReplay(opts, parsed.worker_id, tell_command(say),
                               request_event(environment))
        index, count = (int(x) for x in parsed.shard.split("/"))
        s.replay.assign(index, count, parsed.worker_id)
    gevent.signal_handler(STOP_NOW, lambda: gevent.spawn(_stop_now, s))
    gevent.signal_handler(PARENT_GONE, lambda: _parent_gone(s))
    gevent.spawn(_watch_parent, s)
    # Locust's own SIGTERM handler comes later, after a headless master's wait for its workers; until
    # then a SIGTERM would kill the process with nothing recorded. Both handlers run once Locust's is in.
    gevent.signal_handler(signal.SIGTERM, lambda: gevent.spawn(_stopped_early, s))
    gevent.spawn(_trim_history, environment)
    if not isinstance(runner, WorkerRunner):   # a worker's stdout is not read
        say(protocol.Ready())


def _stopped_early(s: Session) -> None:
    """SIGTERM while a master still waits for its workers (Locust's main greenlet is in that wait,
    and no handler of Locust's reaches it): record every row as not_sent, close the files, leave.
    Anywhere else Locust's own handler stops the replay."""
    c = s.coordinator
    if c is not None and c.t0 is None:
        log.warning("stopped before the workers connected: every row is recorded as not_sent")
        c.record_unstarted(NEVER_STARTED)
        os._exit(0)


def _parent_gone(s: Session) -> None:
    """The process that started this one died (PR_SET_PDEATHSIG; maybe before our ppid changed):
    stop as a SIGTERM would, and a worker ends worker_lost, not interrupted. Once."""
    if not s.orphaned:
        s.orphaned = True
        log.error("the process that started this one (pid %d) died: stopping", PARENT_PID)
        os.kill(os.getpid(), signal.SIGTERM)


def _watch_parent(s: Session) -> None:
    """PARENT_GONE does not come if the parent died before this process asked for it (between fork
    and prctl): look for the parent too, once a PARENT_CHECK_S (after Locust's own SIGTERM handler
    is in, so the stop is recorded)."""
    while not s.orphaned:
        gevent.sleep(PARENT_CHECK_S)
        if os.getppid() != PARENT_PID:
            _parent_gone(s)


def _stop_now(s: Session) -> None:
    """The command's second signal (after the SIGTERM that began a graceful stop): stop now. The
    master has nothing in flight: it tells its workers (local ones got the signal too; stopping
    twice is stopping once)."""
    log.warning("stopping now: the requests in flight are recorded as interrupted")
    if s.replay is not None:
        s.replay.stop_now()
    if s.coordinator is not None:
        s.coordinator.stop_now()


def _assign(replay: ShardReplay, shard: protocol.ShardAssignment) -> None:
    replay.assign(shard.index, shard.count, shard.worker_id, shard.t0_epoch)


def _abandoned() -> None:
    # The master declared this worker lost and recorded its rows: write nothing more, exit.
    log.error("the master declared this worker lost; exiting without writing more records")
    os._exit(0)


def _stop_reason(environment) -> str:
    """Why a worker stops early: `interrupted`, or `worker_lost` when the process that started it
    has died (its Ray actor, killed: PARENT_GONE brought us here, and the run must say the worker
    was lost, not that someone interrupted it)."""
    gone = session(environment).orphaned or os.getppid() != PARENT_PID
    orphaned = isinstance(environment.runner, WorkerRunner) and gone
    return "worker_lost" if orphaned else "interrupted"


def _trim_history(environment) -> None:
    """Locust appends to stats.history every few seconds for its charts, forever; keep the last
    HISTORY_KEEP entries so memory stays flat in long soaks."""
    while True:
        gevent.sleep(30)
        stats = environment.stats
        if stats is not None and len(stats.history) > HISTORY_KEEP:
            del stats.history[: len(stats.history) - HISTORY_KEEP]


@events.test_start.add_listener
def _on_test_start(environment, **_kw) -> None:
    s = session(environment)
    if s.coordinator is not None:
        s.coordinator.start()


@events.quitting.add_listener
def _on_quitting(environment, **_kw) -> None:
    s = getattr(environment, "loadtest_session", None)
    if s is None:
        return
    try:
        if s.replay is not None:
            s.replay.finish(_stop_reason(environment))
        if s.coordinator is not None:
            if s.coordinator.t0 is None:  # quit before the test started (workers never connected, or a signal)
                s.coordinator.record_unstarted(NEVER_STARTED)
            s.coordinator.interrupted()
        if environment.process_exit_code is None:
            environment.process_exit_code = 0
    except Exception:
        log.exception("could not close the records")
        environment.process_exit_code = 3


class TraceReplayUser(FastHttpUser):
    """Runs the replay: the first user of a process replays its shard; any other (Locust
    rebalancing users after a worker is lost) idles."""

    concurrency = ReplayConfig.max_inflight      # the defaults; _on_init sets the replay's own
    max_retries = 0
    connection_timeout = 10.0
    network_timeout = ReplayConfig.timeout_s

    @task
    def replay(self) -> None:
        env = self.environment
        s = session(env)
        if s.claimed:
            while True:
                gevent.sleep(3600)
        s.claimed = True
        if not s.replay.assigned.wait(timeout=SHARD_WAIT_S):
            log.error("no shard from the master within %g s", SHARD_WAIT_S)
            env.process_exit_code = 3
            if isinstance(env.runner, WorkerRunner):
                env.runner.send_message(*protocol.to_locust(protocol.WorkerDone(
                    "failed", s.replay.counts(), s.replay.stats.take(0.0))))
        else:
            try:
                if s.replay.run(self.client.client.clientpool) == "failed":  # its records could not be written
                    env.process_exit_code = 3
            except Exception:
                log.exception("replay failed")
                s.replay.finish("failed")
                env.process_exit_code = 3
        if isinstance(env.runner, WorkerRunner):
            while True:  # the master quits every worker once all shards are done
                gevent.sleep(3600)
        gevent.spawn(env.runner.quit)   # the replay is the whole test
        raise StopUser()

