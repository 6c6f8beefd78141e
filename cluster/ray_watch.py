"""Whether the Ray cluster this process joined is still there.

Ray's driver is not told when the cluster's head goes away. Calls that need the GCS block (a
placement group's removal waits until Ray gives up), and Ray's own client then ends the whole
process, with exit code 1 and no hook to run first, once it has failed to reach the GCS for
`gcs_rpc_server_reconnect_timeout_s` (RAY_gcs_rpc_server_reconnect_timeout_s, 60 s by default).
So a thread here connects to the GCS's port (a TCP connect, nothing of Ray's protocol): when it
has refused or not answered for GONE_AFTER_S, `on_gone` is told at once (the command stops its
replay and skips the Ray calls of its teardown), and if the command has not called `done()`
FINISH_WITHIN_S later, `last_resort` is called to end the process before Ray does.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 0.5            # one TCP connect to the GCS this often
PROBE_TIMEOUT_S = 1.0   # a head whose machine is gone does not refuse: it does not answer
# The GCS unreachable this long is a cluster gone, not a blip (a fault-tolerant GCS restarts in a
# few seconds, and running actors go on meanwhile: Ray's "GCS fault tolerance" docs).
GONE_AFTER_S = 10.0
# Then the command has this long to stop its replay and tear down; with GONE_AFTER_S this stays
# under Ray's default 60 s reconnect timeout, after which Ray itself ends the process (code 1).
FINISH_WITHIN_S = 35.0


def gcs_reachable(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts a TCP connection at `address` ("host:port")."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


class ClusterWatch:
    """Watches the GCS at `gcs` ("host:port") from a daemon thread until `done()`."""

    def __init__(self, gcs: str, on_gone: Callable[[float], None], last_resort: Callable[[], None],
                 gone_after_s: float = GONE_AFTER_S, finish_within_s: float = FINISH_WITHIN_S) -> None:
        self.gcs = gcs
        self.on_gone = on_gone              # told the seconds the GCS has been unreachable
        self.last_resort = last_resort      # the command did not end in time after on_gone
        self.gone_after_s, self.finish_within_s = gone_after_s, finish_within_s
        self.gone = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="ray-cluster-watch")

    def start(self) -> ClusterWatch:
        self._thread.start()
        return self

    def done(self) -> None:
        """The command has ended (or no longer needs Ray): stop watching, and never call last_resort."""
        self._done.set()

    def _watch(self) -> None:
        down_since: float | None = None
        while not self._done.wait(POLL_S):
            if gcs_reachable(self.gcs):
                down_since = None
                continue
            now = time.monotonic()
            down_since = down_since or now
            if now - down_since >= self.gone_after_s:
                break
        else:
            return
        self.gone = True
        log.debug("the GCS at %s has not answered for %.1f s", self.gcs, time.monotonic() - down_since)
        self.on_gone(time.monotonic() - down_since)
        if not self._done.wait(self.finish_within_s):
            self.last_resort()
