"""A virtual clock and pool for driving the dispatcher in-process: time moves only when something
waits, so lateness, the in-flight cap, the deadline and an interruption are checked exactly."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class FakeLoop:
    """Virtual time with scheduled callbacks (a completion, a signal): `sleep` runs what falls due."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.t

    def at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._events, (when, next(self._seq), fn))

    def next_event(self) -> float | None:
        return self._events[0][0] if self._events else None

    def run_until(self, until: float) -> None:
        while self._events and self._events[0][0] <= until:
            when, _, fn = heapq.heappop(self._events)
            self.t = max(self.t, when)
            fn()
        self.t = max(self.t, until)

    def sleep(self, seconds: float) -> None:
        self.run_until(self.t + max(0.0, seconds))


class FakePool:
    """At most `cap` requests in flight; request `index` takes `duration(index)` seconds. `spawn`
    calls the sender at once (so it sees the send time) and holds the slot until the request ends."""

    def __init__(self, loop: FakeLoop, cap: int, duration: Callable[[int], float]) -> None:
        self.loop, self.cap, self.duration = loop, cap, duration
        self.in_flight: dict[int, float] = {}   # index -> end time
        self.killed: list[int] = []

    def wait_available(self) -> None:
        while len(self.in_flight) >= self.cap:
            self.loop.run_until(min(self.in_flight.values()))

    def spawn(self, fn: Callable[..., None], *args) -> None:
        index = args[0]
        fn(*args)
        end = self.loop.now() + self.duration(index)
        self.in_flight[index] = end
        self.loop.at(end, lambda: self.in_flight.pop(index, None))

    def join(self, timeout: float | None = None) -> bool:
        until = float("inf") if timeout is None else self.loop.now() + timeout
        while self.in_flight and min(self.in_flight.values()) <= until:
            self.loop.run_until(min(self.in_flight.values()))
        if self.in_flight and timeout is not None:
            self.loop.run_until(until)
        return not self.in_flight

    def kill(self) -> None:
        self.killed += sorted(self.in_flight)
        self.in_flight.clear()
