"""SIGINT and SIGTERM for a command that replays: the first stops every replay gracefully
(in-flight requests get their grace period, unsent rows are recorded as not_sent), a second stops
them at once (in-flight requests recorded as interrupted), a third kills them. Ray's init installs
its own SIGTERM handler, which exits at once: `rearm` takes the signals back."""

from __future__ import annotations

import signal
import sys
import threading

from loadtest.replay.process import LocustProcess


class Signals:
    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.RLock()   # ask_stop comes from another thread (re-entrant: the handler may interrupt it)
        self.replays: list[LocustProcess] = []
        self._old: dict[int, object] = {}

    def __enter__(self) -> Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def rearm(self) -> None:
        """Take SIGINT and SIGTERM back (after ray.init)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def watch(self, replay: LocustProcess) -> None:
        """Pass signals on to `replay` (at once, if one came while it was starting)."""
        with self._lock:
            self.replays.append(replay)
            for _ in range(self.count):
                replay.signal()

    def unwatch(self, replay: LocustProcess) -> None:
        self.replays.remove(replay)

    def _handle(self, signum, frame) -> None:
        with self._lock:
            self.count += 1
            for replay in list(self.replays):
                replay.signal()
        name = signal.Signals(signum).name
        if self.count == 1:
            print(f"\n{name}: stopping gracefully (again to stop at once)", file=sys.stderr)
        elif self.count == 2 and self.replays:
            print(f"\n{name}: stopping now; the requests in flight are recorded as interrupted (again to kill "
                  "the replay, losing what it has not written)", file=sys.stderr)

    def ask_stop(self) -> None:
        """Stop gracefully, as a first signal does (the web UI's Stop button)."""
        with self._lock:
            if self.count == 0:
                self.count = 1
                for replay in list(self.replays):
                    replay.signal()

    @property
    def stop(self) -> bool:
        return self.count > 0
