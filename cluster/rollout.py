"""Modes brought up in the plan's order, as many at once as the cluster holds.

When every mode fits, all start together and the first replay waits for all of them (as a run
always did). When they run in turns, a mode's replicas stop as soon as its replay ends and the
next mode waiting starts on what they freed, so its model loads while the modes before it still
replay: turn 2's first mode starts while turn 1's last mode replays. Which replicas were starting
during each replay is recorded (`loading_during`), since loading can contend with a replay on
the same node for host memory, disk and PCIe.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from cluster.placement import Plan


class Provisioner(Protocol):
    """What a rollout needs of a fleet (cluster.provision.Fleet; a fake in tests)."""

    def provision(self, mode: str, on_event: Callable[[str], None] | None = None) -> Future: ...

    def release(self, mode: str) -> None: ...


class Rollout:
    def __init__(self, fleet: Provisioner, plan: Plan, on_event: Callable[[str], None] | None = None,
                 on_up: Callable[[str], None] | None = None) -> None:
        self.fleet, self.plan = fleet, plan
        self.on_event = on_event
        self.on_up = on_up or (lambda _mode: None)   # called when a mode starts provisioning
        self.pending = list(plan.modes)              # not started yet, in replay order
        self.up: dict[str, Future] = {}              # started (loading or ready), not released
        self.loading_during: dict[str, list[str]] = {}   # mode replayed -> modes that were starting meanwhile

    def _fill(self) -> None:
        """Start waiting modes, in order, while the plan says they fit beside those up."""
        while self.pending and len(self.up) < self.plan.at_once:
            mode = self.pending.pop(0)
            self.on_up(mode)
            self.up[mode] = self.fleet.provision(mode, self.on_event)

    def up_future(self, mode: str) -> Future:
        """The start of `mode` (starting it, and what fits beside it, if it has not been)."""
        self._fill()
        if mode not in self.up:
            raise RuntimeError(f"{mode} is not in the plan's next turn")  # a caller's bug
        return self.up[mode]

    def ready(self, mode: str) -> list:
        """`mode`'s replicas once they are ready (and, when all modes fit, everyone's); raises what
        their start raised (FleetError, StartupCancelled)."""
        future = self.up_future(mode)
        if self.plan.all_at_once:
            for fut in self.up.values():
                fut.result()
        replicas = future.result()
        self.loading_during[mode] = [m for m, f in self.up.items() if m != mode and not f.done()]
        return replicas

    def done(self, mode: str) -> None:
        """`mode` has replayed: in turns, release it and start what now fits; when all fit,
        replicas stay up until the fleet is torn down (as they always did)."""
        if self.plan.all_at_once:
            return
        self.up.pop(mode, None)
        self.fleet.release(mode)
        self._fill()
