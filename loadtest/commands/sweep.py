"""`loadtest sweep`: every mode measured at several loads, on one fleet brought up once
(loadtest.session.sweep drives the levels), then the curves, the gate of every level and, on a
simulator fleet, the model's prediction beside the measurement.
"""

from __future__ import annotations

import time

from cluster import FleetError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console, say_written
from loadtest.commands.views import show_gate
from loadtest.session.engine import Session
from loadtest.session.guard import served
from loadtest.session.inputs import OutError, choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.session.level_dirs import new_level
from loadtest.session.levels import levels_of
from loadtest.session.metrics_server import MetricsError, MetricsServer
from loadtest.session.options import SweepOptions
from loadtest.session.sweep import SweepLevels, plan_beside, write_report
from scenarios import ScenarioError
from scenarios.trace import write_trace


def main(args: SweepOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        trace = prepare_trace(args.trace)   # the base trace, at the scenario's own rate
        levels = levels_of(args.levels, trace.table)
        choice = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"sweep-{trace.info['name']}",
                              trace.table.num_rows * len(levels) * len(choice.modes))
    except (ScenarioError, FleetError, OutError, MetricsError) as exc:
        print_error("loadtest sweep", str(exc))
        return exits.BAD_INPUT
    manifest = new_manifest(run_dir, trace, choice)
    manifest.level_duration_s = args.level_duration
    write_trace(trace.table, run_dir / "trace.parquet", trace.info["name"], trace.info["sha256"])   # the base
    dirs = [new_level(manifest, trace.table, lv, run_dir / "levels" / lv.name) for lv in levels]
    manifest.levels = [lv.entry() for lv in dirs]
    manifest.write(run_dir)
    console.print(f"[bold]sweep {manifest.run_id}[/bold]: {trace.table.num_rows:,} requests of {trace.info['name']} "
                  f"per level, levels {', '.join(lv.name for lv in levels)}, modes {', '.join(choice.modes)}, fleet "
                  f"{choice.info['name']}", soft_wrap=True)
    if manifest.simulated:
        console.print(f"[bold magenta]{manifest.simulated}[/bold magenta]", soft_wrap=True)
    driver = SweepLevels(dirs, args.keep_going, args.level_duration)
    code = served(args, console, manifest, run_dir, lambda signals, server: Session(
        args, console, trace, choice, run_dir, manifest, signals, server, driver, args.cooldown).replay_all())
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    manifest.levels = [lv.entry() for lv in dirs]
    manifest.write(run_dir)
    gpus = choice.spec.gpus_per_mode if choice.spec is not None else 1
    title = (f"Sweep {manifest.run_id} ({manifest.status}): {trace.info['name']} on fleet {choice.info['name']}, "
             "measured")
    try:
        # a simulator fleet, started here or held up (its state file names it): the model beside it
        predicted = (plan_beside(choice.spec, choice.modes, trace.table, dirs, run_dir, manifest, args.level_duration)
                     if code == exits.OK else None)
        checks = write_report(console, run_dir, title, dirs, manifest, gpus, predicted, args.gate.max_errors)
    except Exception as exc:   # the replays are on disk: say what failed, and that `loadtest report` reads them
        print_error("loadtest sweep", f"the analysis failed ({type(exc).__name__}: {exc}); the records are in "
                    f"{run_dir / 'levels'}")
        return exits.INCOMPLETE
    failed = [f"{name}: {c.reason()}" for name, level_checks in checks for c in level_checks if not c.passed]
    if show_gate(console, failed) != exits.OK and code == exits.OK:
        code = exits.GATE_FAILED
    say_written(console, "sweep", run_dir / "report.md", ("curves", run_dir / "sweep.parquet"),
                ("plots", run_dir / "report.html"), ("levels as run folders", run_dir / "levels"),
                took_s=time.monotonic() - started)
    return code
