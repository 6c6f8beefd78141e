"""The one replay pipeline under every replaying command (run, ui, sweep, capacity, soak):

1. `open_run`: the fleet chosen, the observers checked (a /metrics that cannot listen), the run
   folder made, the manifest and the trace written; bad input raises before anything starts.
2. `replay`: the observers opened (the progress bars, /metrics, the web UI's board), the fleet up
   and every mode driven by the command's `Driver` (one replay, a sweep's levels, a capacity
   search's probes, a soak's stream) under the signal handlers (guard.guarded), the observers
   closed; a typed `Replayed` says how it ended.
3. `Run.record`: what the command concluded (its decision, its gate, a sweep's levels), into the
   manifest. The engine is the manifest's only writer; the commands hand it what they found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import exits
from common.exits import print_error
from contract.manifest import Manifest
from loadtest.engine.events import CannotObserve, Observer
from loadtest.engine.guard import STOPPED, ended, guarded
from loadtest.engine.inputs import FleetChoice, Trace, choose_fleet, new_manifest, new_run_dir
from loadtest.engine.replays import Driver, Replays
from loadtest.engine.signals import Signals
from loadtest.options.replaying import Replaying
from loadtest.request.tally import LiveTallies
from scenarios.trace import write_trace

TRACE_FILE = "trace.parquet"   # in the run folder (a soak's trace is the folder of its parts)


@dataclass
class Run:
    """A replaying command's run once its inputs are checked: what it replays, against what, where."""

    args: Replaying
    trace: Trace
    choice: FleetChoice
    run_dir: Path
    manifest: Manifest

    def record(self, **fields: Any) -> None:
        """What the command concluded, into the manifest (each field by its name), written at once."""
        self.manifest.record(self.run_dir, **fields)


@dataclass(frozen=True)
class Replayed:
    """How the replays ended: the exit code so far and the manifest's status."""

    code: int          # OK, INTERRUPTED, BAD_INPUT (a refused pre-flight, an observer that cannot start), INCOMPLETE
    status: str        # completed, interrupted, refused, failed
    ran: bool = True   # False when nothing ran (an observer could not start)


def open_run(args: Replaying, trace: Trace, observer: Observer, name: str, records_per_mode: int = 0,
             choice: FleetChoice | None = None) -> Run:
    """The run's folder (named after `name`, its disk checked for `records_per_mode` records of
    every mode) and manifest, and its trace, after the fleet is chosen (unless given) and the
    observers checked. ScenarioError, FleetError, OutError or CannotObserve: nothing made."""
    choice = choice or choose_fleet(args.fleet, args.client.api_key_env)
    observer.check()   # before the run folder is made
    run_dir = new_run_dir(args.folder.out, args.folder.run_id, name, records_per_mode * len(choice.modes))
    manifest = new_manifest(run_dir, trace, choice)
    manifest.write(run_dir)
    write_trace(trace.table, run_dir / TRACE_FILE, trace.info["name"], trace.info["sha256"])
    return Run(args, trace, choice, run_dir, manifest)


def replay(run: Run, driver: Driver, observer: Observer, cooldown_s: float = 0.0, trace_file: str = TRACE_FILE,
           replay_extra: dict[str, dict] | None = None,
           on_signals: Callable[[Signals], None] | None = None) -> Replayed:
    """Every mode of `run` driven by `driver`, `observer` told of it all, under the signal handlers
    (`on_signals` is handed them first: the web UI's Stop asks them to stop); the manifest says how
    it ended. An observer that cannot start after all: one line, nothing runs (BAD_INPUT)."""
    args, manifest, run_dir = run.args, run.manifest, run.run_dir
    live = LiveTallies()

    def go(signals: Signals) -> None:
        if on_signals is not None:
            on_signals(signals)
        Replays(args, run.trace, run.choice, run_dir, manifest, signals, observer, live, driver, cooldown_s,
                trace_file, replay_extra or {}).replay_all()

    try:
        try:
            address = observer.open(run_dir, live)
        except CannotObserve as exc:
            print_error(args.PROG, str(exc))
            return Replayed(exits.BAD_INPUT, manifest.status, ran=False)
        try:
            if address:
                manifest.metrics = address
            code = guarded(go, manifest, run_dir, args.PROG)
        finally:
            observer.close()
    except KeyboardInterrupt:   # SIGTERM or Ctrl-C before the replay's own handlers took the signals
        # (cli.main turns SIGTERM into KeyboardInterrupt), or as the observers closed
        if manifest.status not in ("completed", "interrupted", "failed", "refused"):
            ended(manifest, run_dir, "interrupted", STOPPED)
        return Replayed(exits.INTERRUPTED, manifest.status)
    return Replayed(code, manifest.status)
