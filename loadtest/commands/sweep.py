"""`loadtest sweep`: every mode measured at several loads, on one fleet brought up once.

Per mode, the levels run from the lowest load up, each the same requests (the trace's rows, in
order: open loop at scaled arrivals, or closed loop at a fixed concurrency) into its own run folder
under levels/<level>/. After each level the mode's completions are checked against its load
(analysis.sweep.saturation); a mode that saturated is taken no higher unless --keep-going, and
the manifest says which levels it skipped. Then every level is analysed as a run, the curves go
to sweep.parquet, report.md and report.html, and on a simulator fleet the same levels are
predicted by the model (plan/, as `loadtest plan` would) and set beside what was measured.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from analysis.long_summary import long_summary
from analysis.sweep import LEVEL_SCHEMA, plan_vs_measured, saturation, sweep_markdown, with_level
from analysis.sweep_html import sweep_html
from cluster import FleetError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.inputs import FleetChoice, choose_fleet, new_run_dir, prepare_trace
from loadtest.commands.levels import levels_of
from loadtest.commands.levels_run import LevelDir, LevelsRun, new_level, summarise
from loadtest.commands.manifest import Manifest
from loadtest.commands.run import Stage, guarded
from scenarios import ScenarioError


class SweepRun(LevelsRun):
    def __init__(self, *args, levels: list[LevelDir], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.levels = levels

    def drive(self, stage: Stage, mode: str) -> None:
        curves: list[pa.Table] = []
        saturated_at: str | None = None
        for i, lv in enumerate(self.levels):
            if saturated_at is not None and not self.args.keep_going:
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
                                   + ("" if self.args.keep_going or i == len(self.levels) - 1
                                      else "; its higher levels are skipped"), soft_wrap=True)
        self.manifest.levels = [lv.entry() for lv in self.levels]


def _one_trace(args: argparse.Namespace) -> argparse.Namespace:
    """The arguments as `prepare_trace` reads them: the base trace at the scenario's own rate."""
    return argparse.Namespace(**{**vars(args), "rate_scale": None})


def plan_beside(choice: FleetChoice, base: pa.Table, levels: list[LevelDir], run_dir, top: Manifest) -> pa.Table | None:
    """On a simulator fleet this sweep provisioned: the model's prediction of the same levels
    (plan/, as `loadtest plan` writes it); None otherwise."""
    from loadtest.commands.plan import plan_levels, simulator_of

    spec = choice.spec
    if choice.existing is not None or spec is None or spec.engine != "sim":
        return None
    servers = {m: simulator_of(spec, m, None) for m in choice.modes}

    def manifest_of(level: str, scale: float | None) -> Manifest:
        return Manifest(f"{top.run_id}/plan/{level}", {**top.scenario, "rate_scale": scale},
                        {**top.fleet, "planned_on": spec.sim.hardware}, choice.modes, top.seed, base.num_rows,
                        status="completed")

    return plan_levels(base, [lv.level for lv in levels], servers, spec, run_dir / "plan", manifest_of)


def write_report(console: Console, run_dir, title: str, levels: list[LevelDir], status: str, gpus: int,
                 predicted: pa.Table | None) -> pa.Table | None:
    for lv in levels:
        summarise(lv, status)
    parts = [with_level(pq.read_table(lv.dir / "summary.parquet"), lv.level.name, lv.offered, lv.level.concurrency)
             for lv in levels if (lv.dir / "summary.parquet").is_file()]
    if not parts:
        return None
    sweep = pa.concat_tables(parts).cast(LEVEL_SCHEMA)
    pq.write_table(sweep, run_dir / "sweep.parquet")
    report = sweep_markdown(sweep, title)
    if predicted is not None:
        report += "\n" + plan_vs_measured(predicted, sweep)
    (run_dir / "report.md").write_text(report)
    (run_dir / "report.html").write_text(sweep_html(title, report, sweep, gpus, predicted))
    console.print(report, markup=False, highlight=False)
    return sweep


def main(args: argparse.Namespace) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        trace = prepare_trace(_one_trace(args))
        levels = levels_of(args, trace.table)
        choice = choose_fleet(args, args.modes)
        run_dir = new_run_dir(args.out, args.run_id, f"sweep-{trace.info['name']}")
    except (ScenarioError, FleetError, FileExistsError) as exc:
        print_error("loadtest sweep", str(exc))
        return exits.BAD_INPUT
    manifest = Manifest(run_id=run_dir.name, scenario=trace.info, fleet=choice.info, modes=choice.modes,
                        seed=trace.seed, requests=trace.table.num_rows, skipped=choice.skipped)
    dirs = [new_level(manifest, trace.table, lv, run_dir / "levels" / lv.name) for lv in levels]
    manifest.levels = [lv.entry() for lv in dirs]
    manifest.write(run_dir)
    console.print(f"[bold]sweep {manifest.run_id}[/bold]: {trace.table.num_rows:,} requests of {trace.info['name']} "
                  f"per level, levels {', '.join(lv.name for lv in levels)}, modes {', '.join(choice.modes)}, fleet "
                  f"{choice.info['name']}", soft_wrap=True)
    code = guarded(lambda signals: SweepRun(args, console, trace, choice, run_dir, manifest, signals,
                                            levels=dirs).replay_all(), manifest, run_dir, "loadtest sweep")
    manifest.levels = [lv.entry() for lv in dirs]
    manifest.write(run_dir)
    predicted = plan_beside(choice, trace.table, dirs, run_dir, manifest) if code == exits.OK else None
    spec = choice.spec
    gpus = spec.tensor_parallel_size * spec.replicas if spec is not None else 1
    title = (f"Sweep {manifest.run_id} ({manifest.status}): {trace.info['name']} on fleet {choice.info['name']}, "
             "measured")
    write_report(console, run_dir, title, dirs, manifest.status, gpus, predicted)
    console.print(f"sweep: {run_dir / 'report.md'}  (curves: {run_dir / 'sweep.parquet'}, {run_dir / 'report.html'}; "
                  f"levels as run folders under {run_dir / 'levels'}) in {time.monotonic() - started:.1f} s",
                  soft_wrap=True)
    return code
