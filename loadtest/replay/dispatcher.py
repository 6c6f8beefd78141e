"""One worker's dispatcher: every row of its shard sent at its scheduled time (open loop) or as soon
as a slot frees (closed loop), up to a cap on requests in flight, and every row it never sends
recorded as `not_sent` with the reason. Every scheduled request ends as exactly one record: the
sender records what it sent, the dispatcher what it did not.

No Locust and no gevent here: the dispatcher is given its clock, its pool of in-flight requests,
the function that sends one row and the one that records an unsent row. Under Locust those are
gevent's (loadtest/replay/worker.py); a test gives it a fake clock and a fake pool, and checks
lateness, the cap, the deadline and an interruption exactly, without sleeping.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

Row = tuple[int, dict]  # (index in the trace, the trace row)

# Why a row was never sent, by how the replay ended (the record's `error`).
UNSENT_BECAUSE = {
    "deadline": "run deadline reached before its scheduled time",
    "level_end": "the level's --level-duration ended before its scheduled time",
    "interrupted": "run interrupted before its scheduled time",
    "failed": "the replay failed before its scheduled time (see the Locust log)",
    "worker_lost": "the process that started its Locust worker (a Ray actor, or the command) died before "
                   "its scheduled time",
}


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""

    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass (other requests go on meanwhile)."""


class Pool(Protocol):
    """The requests in flight, at most a cap of them at once."""

    def wait_available(self) -> None:
        """Return once fewer than the cap are in flight."""

    def spawn(self, fn: Callable[..., None], *args) -> None:
        """Run fn(*args) concurrently; it holds a slot until it returns."""

    def join(self, timeout: float | None = None) -> bool:
        """Wait until none is in flight (at most `timeout` s); whether none is."""

    def kill(self) -> None:
        """Stop every request in flight (each records itself as interrupted)."""


@dataclass(frozen=True)
class Schedule:
    t0: float                       # the clock's time at offset 0 of the trace
    deadline_s: float | None = None  # stop sending this long after t0
    closed: bool = False            # closed loop: each row due the moment a slot frees
    grace_s: float = 10.0           # on interrupt, how long in-flight requests may still finish
    drain: bool = False             # at the deadline stop sending, but let the requests in flight finish

    @property
    def deadline(self) -> float:
        return self.t0 + self.deadline_s if self.deadline_s else float("inf")


class Dispatcher:
    """Dispatches `rows` (`total` of them) on `schedule`. `send(index, row, due)` runs in the pool
    and records the request; `unsent(row, due, why)` records a row never sent."""

    def __init__(self, rows: Iterator[Row], total: int, schedule: Schedule, clock: Clock, pool: Pool,
                 send: Callable[[int, dict, float], None], unsent: Callable[[dict, float, str], None]) -> None:
        self.rows = rows
        self.total = total
        self.schedule = schedule
        self.clock = clock
        self.pool = pool
        self.send = send
        self.unsent = unsent
        self.sent = 0
        self.not_sent = 0
        self.end_reason: str | None = None
        self._stop: str | None = None          # asked to stop, and why
        self._pending: Row | None = None       # taken from `rows`, not yet sent
        self._finished = threading.Event()     # cooperative under gevent's monkey-patching
        self._hurry = False                    # stop now: no grace period for the requests in flight

    def time_left(self) -> float | None:
        """Seconds until the deadline (None without one): a request's timeout is capped by it."""
        if not self.schedule.deadline_s or self.schedule.drain:
            return None
        return self.schedule.deadline - self.clock.now()

    def stop(self, reason: str) -> None:
        """Stop dispatching (`interrupted`, `failed`): the run loop finishes at its next step."""
        self._stop = self._stop or reason

    def hurry(self) -> None:
        """Stop now, not gracefully: dispatching stops, and the requests in flight are stopped at
        once (each records itself as error/interrupted) instead of getting the grace period; a
        finish() under way goes on to record the unsent rows."""
        self._hurry = True
        self.stop("interrupted")
        self.pool.kill()

    def run(self) -> str:
        """Dispatch every row at its time, then wait for the last request; the end reason."""
        s, clock = self.schedule, self.clock
        deadline = s.deadline
        for row in self.rows:
            self._pending = row  # finish() records it if we stop before it is sent
            if not s.closed:
                due = s.t0 + row[1]["offset_s"]
                delay = min(due, deadline) - clock.now()
                if delay > 0:
                    clock.sleep(delay)
            self.pool.wait_available()  # at the cap, lateness accrues (open loop) and is recorded
            if s.closed:
                clock.sleep(max(0.0, s.t0 - clock.now()))
                due = clock.now()
            if self._stop or clock.now() >= deadline:
                break
            self._pending = None
            self.sent += 1
            self.pool.spawn(self.send, row[0], row[1], due)
        if self._stop:
            self.finish(self._stop)
        elif self.end_reason is None:  # nobody finished us: drain and close
            self.pool.join()
            self.finish("completed" if self.sent == self.total else "level_end" if s.drain else "deadline")
        return self.end_reason or "completed"

    def finish(self, reason: str) -> None:
        """Stop dispatching, give in-flight requests the grace period (then stop them), and record
        every row not sent as not_sent with the reason. Idempotent; a second caller waits."""
        if self.end_reason is not None:
            self._finished.wait()
            return
        self.end_reason = reason
        self.stop(reason)
        if reason != "completed" and (self._hurry or not self.pool.join(timeout=self.schedule.grace_s)):
            self.pool.kill()
        why = UNSENT_BECAUSE.get(reason, reason)
        rest = [self._pending] if self._pending else []
        self._pending = None
        # every row never dispatched, streamed (a ShardRows gives them without waiting for a soak's parts)
        never = self.rows.rest() if hasattr(self.rows, "rest") else self.rows
        for _, row in itertools.chain(rest, never):
            self.unsent(row, self.schedule.t0 + row["offset_s"], why)
            self.not_sent += 1
        self._finished.set()
