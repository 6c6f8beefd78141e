"""What the engine tells whoever watches a run, and nothing more: it emits these events and never
imports a view. The views (loadtest.live: the progress bars, the client's /metrics, the web UI's
board) are `Observer`s the command hands in; `Observers` tells each of them in turn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadtest.replay import protocol
from loadtest.request.tally import LiveTallies


class CannotObserve(Exception):
    """An observer that cannot do its job (a /metrics address in use, or open without a login):
    said in one line, exit 2; nothing has started."""


@dataclass(frozen=True)
class Began:
    """The replays are about to start: every mode's, `total` requests each."""

    run_id: str
    modes: list[str]
    total: int
    live: LiveTallies                 # the replays' tallies as they arrive (what /metrics serves, the bars show)
    latest: Callable[[], dict]        # the servers' counters at their newest scrape, per mode and replica


class Observer:
    """Every event, heard and ignored: a view overrides what it shows."""

    def check(self) -> None:
        """CannotObserve now, before the run folder is made, when it could not do its job."""

    def open(self, run_dir: Path, live: LiveTallies) -> str | None:
        """The run's observers start (CannotObserve: nothing has started); the address it serves,
        for the manifest, if any."""
        return None

    def close(self) -> None:
        """The run is over, however it ended."""

    def begin(self, began: Began) -> None:
        """The fleet is coming up; the modes wait."""

    def say(self, text: str) -> None:
        """A notice for a person, in rich's markup (`[red]...[/red]`)."""

    def mode_state(self, mode: str, text: str) -> None:
        """What `mode` is doing: starting replicas, starting, or how its replay ended."""

    def mode_started(self, mode: str, replicas: list[tuple[str, str]], gpus: list[tuple[str, str]]) -> None:
        """`mode` replays against its replicas, (label, base URL), whose GPUs are read from these
        exporters, (replica label, URL; none where its GPUs are read through NVML or not at all)."""

    def level(self, mode: str, name: str, total: int) -> None:
        """`mode` starts a level (or a probe) of `total` requests."""

    def line(self, mode: str, run_id: str, msg: protocol.Line) -> None:
        """A message from `mode`'s replay (progress, a tally, ...) of the run (or level) `run_id`."""

    def stopped(self, mode: str, reason: str) -> None:
        """`mode`'s replay ended otherwise than completed (interrupted, its deadline, ...)."""

    def mode_ended(self, mode: str) -> None:
        """`mode` is done: its replays are over."""

    def finish(self) -> None:
        """Every mode is done (or the run was stopped); the fleet goes down."""


class Observers(Observer):
    """Each observer told of each event, in the order given; opened in that order, closed in reverse."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers

    def check(self) -> None:
        for o in self.observers:
            o.check()

    def open(self, run_dir: Path, live: LiveTallies) -> str | None:
        opened: list[Observer] = []
        address = None
        try:
            for o in self.observers:
                address = o.open(run_dir, live) or address
                opened.append(o)
        except BaseException:
            for o in reversed(opened):
                o.close()
            raise
        return address

    def close(self) -> None:
        for o in reversed(self.observers):
            o.close()

    def begin(self, began: Began) -> None:
        for o in self.observers:
            o.begin(began)

    def say(self, text: str) -> None:
        for o in self.observers:
            o.say(text)

    def mode_state(self, mode: str, text: str) -> None:
        for o in self.observers:
            o.mode_state(mode, text)

    def mode_started(self, mode: str, replicas: list[tuple[str, str]], gpus: list[tuple[str, str]]) -> None:
        for o in self.observers:
            o.mode_started(mode, replicas, gpus)

    def level(self, mode: str, name: str, total: int) -> None:
        for o in self.observers:
            o.level(mode, name, total)

    def line(self, mode: str, run_id: str, msg: protocol.Line) -> None:
        for o in self.observers:
            o.line(mode, run_id, msg)

    def stopped(self, mode: str, reason: str) -> None:
        for o in self.observers:
            o.stopped(mode, reason)

    def mode_ended(self, mode: str) -> None:
        for o in self.observers:
            o.mode_ended(mode)

    def finish(self) -> None:
        for o in self.observers:
            o.finish()
