"""The fleet as one run sees it: the pre-flight's plan said and recorded, modes brought up in the
plan's turns (cluster.rollout), and each mode's replicas, with what starting them cost, kept in
the manifest (also after they stop). A fleet that was already running (`--endpoints`) has no plan:
its modes are simply up."""

from __future__ import annotations

import logging
from pathlib import Path

from rich.console import Console

from cluster.plan import PlanError
from cluster.provision import Fleet
from cluster.rollout import Rollout
from cluster.state import ExistingFleet
from common.times import utc_now
from loadtest.commands.inputs import replica_entry
from loadtest.commands.manifest import Manifest, ModeRun

log = logging.getLogger("loadtest")


class BringUp:
    def __init__(self, fleet: Fleet | ExistingFleet, modes: list[str], manifest: Manifest, run_dir: Path,
                 console: Console, parallel: bool) -> None:
        self.fleet, self.modes, self.manifest, self.run_dir, self.console = fleet, modes, manifest, run_dir, console
        self.replicas: dict[str, list] = {}   # mode -> its replicas, kept after they stop for the manifest
        self.announced = False                # "fleet ready" said
        self.rollout = self._rollout(parallel) if isinstance(fleet, Fleet) else None

    def _rollout(self, parallel: bool) -> Rollout:
        plan = self.fleet.plan
        self.console.print(plan.text(), soft_wrap=True)
        self.manifest.plan = plan.as_dict()
        for i, turn in enumerate(plan.turns):
            for mode in turn:
                self.manifest.mode_runs.setdefault(mode, ModeRun()).turn = i + 1
        self.manifest.write(self.run_dir)
        if parallel and not plan.all_at_once:
            raise PlanError(f"--parallel-modes: the cluster holds {plan.at_once} of {len(plan.modes)} modes at a "
                            f"time ({len(plan.turns)} turns); drop --parallel-modes to run them in turns")

        def on_up(mode: str) -> None:
            self.manifest.mode_runs[mode].provision_started_at = utc_now()

        return Rollout(self.fleet, plan, on_event=log.info, on_up=on_up)

    def up(self, modes: list[str]) -> None:
        """Wait until `modes` are up (the rollout starts them, and whatever else fits); record
        their replicas and what starting them cost."""
        rollout, fleet = self.rollout, self.fleet
        for mode in modes:
            self.replicas[mode] = rollout.ready(mode) if rollout is not None else fleet.endpoints(mode)
            mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
            if rollout is not None and not rollout.plan.all_at_once:
                mr.loading_during_replay = loading = rollout.loading_during.get(mode, [])
                meanwhile = f"; starting meanwhile: {', '.join(loading)}" if loading else ""
                self.console.print(f"{mode} ready (turn {mr.turn} of {len(rollout.plan.turns)}): "
                                   + ", ".join(f"{r.label} in {r.timing.text()}" for r in self.replicas[mode])
                                   + meanwhile, soft_wrap=True)
        if not self.announced and (rollout is None or rollout.plan.all_at_once):  # everything is up now
            self.announced = True
            for mode in self.modes:
                self.replicas[mode] = fleet.endpoints(mode)
            if rollout is None:
                self.console.print(f"fleet ready: {len(fleet.replicas)} replica(s) already running")
            else:
                times = ", ".join(f"{r.label} {r.timing.text()}" for m in self.modes for r in self.replicas[m])
                self.console.print(f"fleet ready: {len(fleet.replicas)} replica(s) on Ray; time to ready (server "
                                   f"start to first completion): {times}", soft_wrap=True)
        self.record()

    def done(self, mode: str) -> None:
        """`mode` has replayed: in turns its replicas stop now and the next mode starts."""
        if self.rollout is not None:
            self.rollout.done(mode)
            self.record()  # when they stopped

    def record(self) -> None:
        """The manifest's replica entries, refreshed (their start and stop times), keeping what the
        run found about them (an exit code)."""
        for mode, replicas in self.replicas.items():
            mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
            found = {e["label"]: e for e in mr.replicas}
            mr.replicas = [{**found.get(r.label, {}), **replica_entry(r)} for r in replicas]
        self.manifest.write(self.run_dir)
