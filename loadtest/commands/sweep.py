"""`loadtest sweep`: every mode measured at several loads, on one fleet brought up once.

Per mode, the levels run from the lowest load up, each the same requests (the trace's rows, in
order: open loop at scaled arrivals, or closed loop at a fixed concurrency) into its own run folder
under levels/<level>/. After each level the mode's completions are checked against its load
(analysis.sweep.saturation); a mode that saturated is taken no higher unless --keep-going, and
the manifest says which levels it skipped. Then every level is analysed as a run, the curves go
to sweep.parquet, report.md and report.html, and on a simulator fleet (provisioned here, or held
up by `cluster up` and given by its state file) the same levels are
predicted by the model (plan/, as `loadtest plan` would) and set beside what was measured.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from analysis.gate import ErrorCheck
from analysis.long_summary import long_summary
from analysis.sweep import LEVEL_SCHEMA, plan_vs_measured, saturation, sweep_markdown, with_level
from analysis.sweep_html import sweep_html
from cluster import FleetError
from cluster.fleet import FleetSpec
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.inputs import choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.commands.levels import Level, levels_of
from loadtest.commands.levels_run import LevelDir, LevelsRun, new_level, summarise
from loadtest.commands.metrics_server import MetricsError, MetricsServer
from loadtest.commands.run import Stage, served
from loadtest.manifest import Manifest
from loadtest.session.options import SweepOptions
from scenarios import ScenarioError
from scenarios.trace import write_trace

BASELINE = "baseline"    # taken to every level, saturated or not: every other mode's speedup needs it


class SweepRun(LevelsRun):
    def __init__(self, *args, levels: list[LevelDir], keep_going: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.levels, self.keep_going = levels, keep_going

    def drive(self, stage: Stage, mode: str) -> None:
        curves: list[pa.Table] = []
        saturated_at: str | None = None
        for i, lv in enumerate(self.levels):
            if saturated_at is not None and not self.keep_going and mode != BASELINE:
                lv.skipped[mode] = f"saturated at {saturated_at} (--keep-going replays it)"
                continue
            self.replay_level(stage, mode, lv, pause=i > 0)
            records = lv.records(mode)
            curves.append(with_level(long_summary(records, lv.manifest.run_id, [mode]), lv.level.name, lv.offered,
                                     lv.level.concurrency))
            if saturation(pa.concat_tables(curves).cast(LEVEL_SCHEMA)).get((lv.level.name, mode)):
                lv.saturated.append(mode)
                saturated_at = saturated_at or lv.level.name
                self.console.print(f"{mode}: saturated at {lv.level.name} (completions no longer follow the load)"
                                   + ("" if self.keep_going or i == len(self.levels) - 1 or mode == BASELINE
                                      else "; its higher levels are skipped"), soft_wrap=True)
        self.manifest.levels = [lv.entry() for lv in self.levels]


def plan_beside(spec: FleetSpec | None, modes: list[str], base: pa.Table, levels: list[LevelDir], run_dir: Path,
                top: Manifest, stop_s: float | None) -> pa.Table | None:
    """On a simulator fleet (provisioned by this sweep, or held up by `cluster up`, whose state
    file names it): the model's prediction of the same levels and requests, sent for as long
    (plan/, as `loadtest plan` writes it); None otherwise (servers given as MODE=URL pairs)."""
    from loadtest.commands.plan import plan_levels, simulator_of

    if spec is None or spec.engine != "sim":
        return None
    servers = {m: simulator_of(spec, m, None) for m in modes}
    shutil.rmtree(run_dir / "plan", ignore_errors=True)     # made again by `loadtest report SWEEP`

    def manifest_of(level: str, scale: float | None) -> Manifest:
        return Manifest(f"{top.run_id}/plan/{level}", {**top.scenario, "rate_scale": scale},
                        {**top.fleet, "planned_on": spec.sim.hardware}, modes, top.seed, base.num_rows,
                        status="completed")

    return plan_levels(base, [lv.level for lv in levels], servers, spec, run_dir / "plan", manifest_of,
                       stop_s=stop_s)


def write_report(console: Console, run_dir: Path, title: str, levels: list[LevelDir], status: str, gpus: int,
                 predicted: pa.Table | None, max_errors: float | None) -> list[tuple[str, list[ErrorCheck]]]:
    """Every level analysed as a run, then the sweep's curves; each level's error gate."""
    checks = [(lv.level.name, summarise(lv, status, max_errors)) for lv in levels]
    parts = [with_level(pq.read_table(lv.dir / "summary.parquet"), lv.level.name, lv.offered, lv.level.concurrency)
             for lv in levels if (lv.dir / "summary.parquet").is_file()]
    if not parts:
        return checks
    sweep = pa.concat_tables(parts).cast(LEVEL_SCHEMA)
    files.write_table(sweep, run_dir / "sweep.parquet")
    report = sweep_markdown(sweep, title)
    if predicted is not None:
        report += "\n" + plan_vs_measured(predicted, sweep)
    files.write_text(run_dir / "report.md", report)
    files.write_text(run_dir / "report.html", sweep_html(title, report, sweep, gpus, predicted))
    console.print(report, markup=False, highlight=False)
    return checks


def reanalyse(console: Console, run_dir: Path, max_errors: float | None = None) -> None:
    """A finished sweep's analysis again, from its folders alone (`loadtest report SWEEP`)."""
    manifest = Manifest.read(run_dir)
    levels = []
    for entry in manifest.levels:
        folder = run_dir / "levels" / entry["name"]
        level = Level(entry["name"], rate_scale=entry.get("rate_scale"), concurrency=entry.get("concurrency"))
        levels.append(LevelDir(level, folder, pq.read_table(folder / "trace.parquet"), Manifest.read(folder),
                               list(entry.get("saturated", [])), dict(entry.get("skipped", {}))))
    try:
        spec: FleetSpec | None = FleetSpec.model_validate(manifest.fleet["spec"])
    except (ValueError, KeyError, TypeError):   # a fleet that was already running: no spec of ours
        spec = None
    predicted, plan = None, run_dir / "plan" / "sweep.parquet"
    if plan.is_file():
        try:   # the model again, as the code now has it
            predicted = plan_beside(spec, manifest.modes, pq.read_table(run_dir / "trace.parquet"), levels,
                                    run_dir, manifest, manifest.level_duration_s)
        except (ValueError, KeyError, OSError):
            predicted = None
        if predicted is None:   # an older sweep, or a spec no longer valid: the plan it has
            predicted = pq.read_table(plan)
    gpus = spec.gpus_per_mode if spec is not None else 1
    title = (f"Sweep {manifest.run_id} ({manifest.status}): {manifest.scenario.get('name')} on fleet "
             f"{manifest.fleet.get('name')}, measured")
    write_report(console, run_dir, title, levels, manifest.status, gpus, predicted, max_errors)


def main(args: SweepOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        trace = prepare_trace(args.trace)   # the base trace, at the scenario's own rate
        levels = levels_of(args.levels, trace.table)
        choice = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"sweep-{trace.info['name']}")
    except (ScenarioError, FleetError, FileExistsError, MetricsError) as exc:
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
    code = served(args, console, manifest, run_dir, lambda signals, server: SweepRun(
        args, console, trace, choice, run_dir, manifest, signals, server, args.cooldown, args.level_duration,
        levels=dirs, keep_going=args.keep_going).replay_all())
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
        checks = write_report(console, run_dir, title, dirs, manifest.status, gpus, predicted, args.gate.max_errors)
    except Exception as exc:   # the replays are on disk: say what failed, and that `loadtest report` reads them
        print_error("loadtest sweep", f"the analysis failed ({type(exc).__name__}: {exc}); the records are in "
                    f"{run_dir / 'levels'}")
        return exits.INCOMPLETE
    failed = [f"{name}: {c.reason()}" for name, level_checks in checks for c in level_checks if not c.passed]
    for reason in failed:
        console.print(f"[red bold]gate failed: {reason}[/red bold]", soft_wrap=True)
    if code == exits.OK and failed:
        code = exits.GATE_FAILED
    console.print(f"sweep: {run_dir / 'report.md'}  (curves: {run_dir / 'sweep.parquet'}, {run_dir / 'report.html'}; "
                  f"levels as run folders under {run_dir / 'levels'}) in {time.monotonic() - started:.1f} s",
                  soft_wrap=True)
    return code
