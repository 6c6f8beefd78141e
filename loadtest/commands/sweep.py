"""`loadtest sweep`: every mode measured at several loads, on one fleet brought up once
(loadtest.engine.sweep drives the levels), then the curves, the gate of every level and, on a
simulator fleet, the model's prediction beside the measurement.
"""

from __future__ import annotations

import time

from cluster import FleetError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console, say_written, show_markdown
from loadtest.commands.replaying import show_start
from loadtest.commands.views import show_gate
from loadtest.engine.events import CannotObserve
from loadtest.engine.inputs import OutError, prepare_trace
from loadtest.engine.level_dirs import new_level
from loadtest.engine.levels import levels_of
from loadtest.engine.pipeline import open_run, replay
from loadtest.engine.sweep import SweepLevels, plan_beside, write_report
from loadtest.live.watch import observers
from loadtest.options.replaying import SweepOptions
from scenarios import ScenarioError


def main(args: SweepOptions) -> int:
    console = new_console()
    started = time.monotonic()
    watch = observers(args, console)
    try:
        trace = prepare_trace(args.trace)   # the base trace, at the scenario's own rate
        levels = levels_of(args.levels, trace.table)
        run = open_run(args, trace, watch, f"sweep-{trace.info['name']}", trace.table.num_rows * len(levels))
    except (ScenarioError, FleetError, OutError, CannotObserve) as exc:
        print_error(args.PROG, str(exc))
        return exits.BAD_INPUT
    manifest, run_dir, choice = run.manifest, run.run_dir, run.choice
    dirs = [new_level(manifest, trace.table, lv, run_dir / "levels" / lv.name) for lv in levels]
    run.record(level_duration_s=args.level_duration, levels=[lv.entry() for lv in dirs],
               gpu_hour_cost=args.gpu_hour_cost)
    show_start(console, run, f"[bold]sweep {manifest.run_id}[/bold]: {trace.table.num_rows:,} requests of "
               f"{trace.info['name']} per level, levels {', '.join(lv.name for lv in levels)}, modes "
               f"{', '.join(choice.modes)}, fleet {choice.info['name']}")
    replayed = replay(run, SweepLevels(dirs, args.keep_going, args.level_duration), watch, args.cooldown)
    if not replayed.ran:   # /metrics could not listen after all: nothing ran
        return replayed.code
    code = replayed.code
    run.record(levels=[lv.entry() for lv in dirs])
    gpus = choice.spec.gpus_per_mode if choice.spec is not None else 1
    title = (f"Sweep {manifest.run_id} ({manifest.status}): {trace.info['name']} on fleet {choice.info['name']}, "
             "measured")
    try:
        # a simulator fleet, started here or held up (its state file names it): the model beside it
        predicted = (plan_beside(choice.spec, choice.modes, trace.table, dirs, run_dir, manifest, args.level_duration)
                     if code == exits.OK else None)
        found = write_report(run_dir, title, dirs, manifest, gpus, predicted, args.gate.max_errors)
    except Exception as exc:   # the replays are on disk: say what failed, and that `loadtest report` reads them
        print_error(args.PROG, f"the analysis failed ({type(exc).__name__}: {exc}); the records are in "
                    f"{run_dir / 'levels'}")
        return exits.INCOMPLETE
    if found.markdown is not None:
        show_markdown(console, found.markdown)   # drawn, as a person reads it; the file keeps the source
    failed = [f"{name}: {c.reason()}" for name, level_checks in found.checks for c in level_checks if not c.passed]
    if show_gate(console, failed) != exits.OK and code == exits.OK:
        code = exits.GATE_FAILED
    say_written(console, "sweep", run_dir / "report.md", ("curves", run_dir / "sweep.parquet"),
                ("plots", run_dir / "report.html"), ("levels as run folders", run_dir / "levels"),
                took_s=time.monotonic() - started)
    return code
