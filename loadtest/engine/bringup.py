"""The fleet as one run sees it: the pre-flight's plan said and recorded, modes brought up in the
plan's turns (cluster.rollout), and each mode's replicas, with what starting them cost, kept in
the manifest (also after they stop), and each restart of a replica's server (the fleet's
`max_restarts`) printed and kept there too. A fleet that was already running (`--endpoints`) has
no plan: its modes are simply up.

When a mode cannot be brought up (a replica exits before it is ready, or is not ready within the
fleet's startup_timeout_s), the run stops: the replicas that were starting are still listed (pid,
log), and every mode whose replay had not begun says `end = "not started"` with 0 records, since
no request of it was scheduled (there are no records for it, not even not_sent ones)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from cluster.fleet import FleetSpec
from cluster.placement import Plan, PlanError
from cluster.provision import Fleet, Replica
from cluster.rollout import Rollout
from cluster.state import ExistingFleet
from cluster.supervise import Restart
from common.times import utc_now
from contract.manifest import Manifest, ModeRun
from loadtest.engine.inputs import replica_entry

log = logging.getLogger("loadtest")


def at_once(order: str, spec: FleetSpec | None, plan: Plan | None, held: bool = False) -> bool:
    """Whether --mode-order `order` replays the modes of `spec` all at once: `parallel` always
    (refused by the pre-flight when the cluster cannot hold them), `turns` never, and `auto` where
    every mode is up at once (the pre-flight's `plan` holds them all, or the fleet is `held` up by
    `cluster up`, which holds every mode at once or refuses) and no two replicas compute on the
    same processor: the simulator (its steps are timed sleeps, a fraction of a core each) or GPUs.
    A vLLM fleet on CPUs (each server takes every core) and bare --endpoints URLs (no fleet file:
    their hardware unseen) go in turns."""
    if order != "auto":
        return order == "parallel"
    all_up = held or (plan is not None and plan.all_at_once)
    return spec is not None and all_up and (spec.engine == "sim" or spec.device == "gpu")


class BringUp:
    def __init__(self, fleet: Fleet | ExistingFleet, modes: list[str], manifest: Manifest, run_dir: Path,
                 say: Callable[[str], None], order: str) -> None:
        self.fleet, self.modes, self.manifest, self.run_dir, self.say = fleet, modes, manifest, run_dir, say
        self.replicas: dict[str, list] = {}   # mode -> its replicas, kept after they stop for the manifest
        self.announced = False                # "fleet ready" said
        provisioned = isinstance(fleet, Fleet)
        spec = fleet.spec if provisioned else fleet.state.spec()   # a held fleet's state file names its fleet
        self.at_once = len(modes) > 1 and at_once(order, spec, fleet.plan if provisioned else None,
                                                  held=not provisioned)
        self.rollout = self._rollout(order == "parallel") if isinstance(fleet, Fleet) else None
        if isinstance(fleet, Fleet):
            fleet.supervisor.on_restart = self._restarted
            fleet.on_stopped = self.record   # when the replicas stopped, also on the way out of a failure

    def _rollout(self, parallel: bool) -> Rollout:
        plan = self.fleet.plan
        self.say(plan.text())
        self.manifest.plan = plan.as_dict()
        for i, turn in enumerate(plan.turns):
            for mode in turn:
                self.manifest.mode_runs.setdefault(mode, ModeRun()).turn = i + 1
        self.manifest.write(self.run_dir)
        if parallel and not plan.all_at_once:
            raise PlanError(f"--mode-order parallel: the cluster holds {plan.at_once} of {len(plan.modes)} modes at "
                            f"a time ({len(plan.turns)} turns); drop it to run them in turns")

        def on_up(mode: str) -> None:
            self.manifest.mode_runs[mode].provision_started_at = utc_now()

        return Rollout(self.fleet, plan, on_event=log.info, on_up=on_up)

    def up(self, modes: list[str]) -> None:
        """Wait until `modes` are up (the rollout starts them, and whatever else fits); record
        their replicas and what starting them cost."""
        rollout, fleet = self.rollout, self.fleet
        for mode in modes:
            try:
                self.replicas[mode] = rollout.ready(mode) if rollout is not None else fleet.endpoints(mode)
            except BaseException:
                self._not_started()
                raise
            mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
            if rollout is not None and not rollout.plan.all_at_once:
                mr.loading_during_replay = loading = rollout.loading_during.get(mode, [])
                meanwhile = f"; starting meanwhile: {', '.join(loading)}" if loading else ""
                self.say(f"{mode} ready (turn {mr.turn} of {len(rollout.plan.turns)}): "
                                   + ", ".join(f"{r.label} in {r.timing.text()}" for r in self.replicas[mode])
                                   + meanwhile)
        if not self.announced and (rollout is None or rollout.plan.all_at_once):  # everything is up now
            self.announced = True
            for mode in self.modes:
                self.replicas[mode] = fleet.endpoints(mode)
            if rollout is None:
                self.say(f"fleet ready: {len(fleet.replicas)} replica(s) already running")
            else:
                times = ", ".join(f"{r.label} {r.timing.text()}" for m in self.modes for r in self.replicas[m])
                self.say(f"fleet ready: {len(fleet.replicas)} replica(s) on Ray; time to ready (server "
                                   f"start to first completion): {times}")
        self.record()

    def done(self, mode: str) -> None:
        """`mode` has replayed: in turns its replicas stop now and the next mode starts."""
        if self.rollout is not None:
            self.rollout.done(mode)
            self.record()  # when they stopped

    def _not_started(self) -> None:
        """A mode did not come up and the run stops: keep the replicas that were starting (the fleet
        forgets them as it tears them down) and mark the modes that never replayed."""
        for mode in self.modes:
            if mode not in self.replicas and self.fleet.endpoints(mode):
                self.replicas[mode] = self.fleet.endpoints(mode)
            mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
            if mr.started_at is None:
                mr.end, mr.records = "not started", 0
        self.record()

    def _restarted(self, rep: Replica, restart: Restart) -> None:
        """A replica's server exited during the run and was started again (or failed to be)."""
        line = restart.text(rep.label, self.fleet.spec.max_restarts)
        self.say(f"[yellow]{line}[/yellow]" if restart.error is None else f"[red]{line}[/red]")
        self.record()

    def record(self) -> None:
        """The manifest's replica entries, refreshed (their start and stop times), keeping what the
        run found about them (an exit code)."""
        for mode, replicas in self.replicas.items():
            mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
            found = {e["label"]: e for e in mr.replicas}
            mr.replicas = [{**found.get(r.label, {}), **replica_entry(r), **self._restarts(r)} for r in replicas]
        self.manifest.write(self.run_dir)

    @staticmethod
    def _restarts(rep: object) -> dict:
        """Each restart of the replica's server (the entry's pid is its server now)."""
        if not isinstance(rep, Replica):
            return {}
        return {"restarts": [{k: v for k, v in asdict(x).items() if k != "n"} for x in rep.restarts]}
