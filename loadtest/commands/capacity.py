"""`loadtest capacity`: per mode, the highest offered rate at which every tenant meets its SLOs,
measured on one fleet brought up once (loadtest.engine.capacity drives the probes); then every
probe in capacity.parquet and the answer in report.md.
"""

from __future__ import annotations

import time

from analysis.capacity import ModeCapacity
from cluster import FleetError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console, say_written, show_markdown
from loadtest.commands.replaying import show_start
from loadtest.engine.capacity import CapacityProbes, capacity_trace, write_capacity
from loadtest.engine.events import CannotObserve
from loadtest.engine.inputs import OutError
from loadtest.engine.pipeline import open_run, replay
from loadtest.live.watch import observers
from loadtest.options.replaying import CapacityOptions
from scenarios import ScenarioError


def main(args: CapacityOptions) -> int:
    console = new_console()
    started = time.monotonic()
    watch = observers(args, console)
    try:
        trace = capacity_trace(args)
        run = open_run(args, trace, watch, f"capacity-{trace.info['name']}")
    except (ScenarioError, FleetError, OutError, CannotObserve) as exc:
        print_error(args.PROG, str(exc))
        return exits.BAD_INPUT
    show_start(console, run, f"[bold]capacity {run.manifest.run_id}[/bold]: {args.probe_duration:g} s of "
               f"{trace.info['name']}'s arrivals a probe, modes {', '.join(run.choice.modes)}, fleet "
               f"{run.choice.info['name']}")
    results = {m: ModeCapacity() for m in run.choice.modes}
    replayed = replay(run, CapacityProbes(args, results), watch, args.cooldown)
    if not replayed.ran:   # /metrics could not listen after all: nothing ran
        return replayed.code
    show_markdown(console, write_capacity(run, results, args))
    say_written(console, "capacity", run.run_dir / "report.md", ("every probe", run.run_dir / "capacity.parquet"),
                ("run folders under", run.run_dir / "probes"), took_s=time.monotonic() - started)
    return replayed.code
