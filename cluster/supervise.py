"""Replica supervision: a replica's server that exits during the run is started again, on the same
port, up to the fleet's `max_restarts` times (named after Ray's actor option; 0, the default,
never restarts), and is waited for as at start (health, models, a warm-up completion).

One thread watches every ready replica of a fleet that restarts any. Each restart is kept on the
replica (`Replica.restarts`, listed in the manifest) and told to `on_restart`, which prints it.
A replica being stopped (its mode released, the fleet torn down) is never restarted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import ray

from cluster import StartupCancelled
from common.times import utc_now

log = logging.getLogger(__name__)

POLL_S = 0.5   # how often each watched replica's server is asked whether it is still running


@dataclass
class Restart:
    """One restart of a replica's server."""

    exited_at: str               # when its server was seen to have exited
    exit_code: int               # what it exited with (negative: killed by that signal, -9 for SIGKILL)
    old_pid: int
    pid: int | None = None       # the server started in its place, on the same port
    ready_s: float | None = None  # started again -> ready again (health, models, a warm-up completion)
    ready_at: str | None = None
    error: str | None = None     # why it did not get ready again (it is stopped then)
    n: int = 0                   # which restart of the replica this is (1 for its first)

    def text(self, label: str, limit: int) -> str:
        head = f"replica {label} exited with code {self.exit_code} during the run (pid {self.old_pid})"
        if self.error is not None:
            return f"{head}; restart {self.n} of {limit} failed: {self.error}"
        return f"{head}; restarted ({self.n} of {limit}) as pid {self.pid}, ready again in {self.ready_s:.1f} s"


class Supervised(Protocol):
    """What the supervisor reads of a replica (cluster.provision.Replica)."""

    pid: int
    actor: Any               # its Ray actor, asked whether the server still runs (`poll`)
    stopping: bool           # its mode released or the fleet torn down: never restarted
    restarts: list[Restart]

    @property
    def label(self) -> str: ...


class Limits(Protocol):
    max_restarts: int
    startup_timeout_s: float


class Restartable(Protocol):
    """What the supervisor asks of the fleet it watches (cluster.provision.Fleet)."""

    spec: Limits

    def restart(self, rep: Any) -> int | None: ...

    def wait_ready(self, rep: Any, deadline: float,
                   cancelled: Callable[[], bool] | None = None) -> tuple[float, float]: ...

    def stop_server(self, rep: Any) -> None: ...


class Supervisor:
    """Watches the fleet's ready replicas and restarts those whose server exits."""

    def __init__(self, fleet: Restartable, on_restart: Callable[[Any, Restart], None] | None = None) -> None:
        self.fleet = fleet
        self.on_restart = on_restart
        self._watched: list[Supervised] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, rep: Supervised) -> None:
        """Supervise `rep` from now on (it is ready)."""
        with self._lock:
            self._watched.append(rep)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name="loadtest-supervise")
                self._thread.start()

    def stop(self) -> None:
        """Stop watching, after a restart under way has noticed (the fleet is closing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.fleet.spec.startup_timeout_s + 30)

    def _loop(self) -> None:
        limit = self.fleet.spec.max_restarts
        while not self._stop.wait(POLL_S):
            with self._lock:
                watched = [r for r in self._watched if not r.stopping and len(r.restarts) < limit]
            for rep in watched:
                if self._stop.is_set():
                    return
                try:
                    code = ray.get(rep.actor.poll.remote(), timeout=10)
                except Exception as exc:  # the actor is gone (being torn down, or Ray is)
                    log.debug("replica %s: cannot poll (%s)", rep.label, exc)
                    continue
                if code is not None:
                    self._restart(rep, code, limit)

    def _restart(self, rep: Supervised, code: int, limit: int) -> None:
        restart = Restart(exited_at=utc_now(), exit_code=code, old_pid=rep.pid, n=len(rep.restarts) + 1)
        log.info("replica %s exited with code %s; restarting it (%d of %d)", rep.label, code, restart.n, limit)
        try:
            restart.pid = self.fleet.restart(rep)
            if restart.pid is None:   # it is being stopped
                return
            _healthy, restart.ready_s = self.fleet.wait_ready(rep, time.monotonic() + self.fleet.spec.startup_timeout_s,
                                                              lambda: self._stop.is_set() or rep.stopping)
            restart.ready_at = utc_now()
        except StartupCancelled:   # the run is ending: its teardown stops the new server
            restart.error = "the run ended before it was ready again"
        except Exception as exc:  # FleetError, or the actor gone: whatever it was, the run goes on without it
            restart.error = str(exc).splitlines()[0]
            self.fleet.stop_server(rep)
        rep.restarts.append(restart)
        log.info("%s", restart.text(rep.label, limit))   # on_restart prints it
        if self.on_restart is not None:
            self.on_restart(rep, restart)
