"""A sweep's levels, measured: the driver that takes each mode from the lowest load up (each level
the same requests, in its own run folder under levels/<level>/), stopping a mode above the level
where it saturated (analysis.sweep.saturation) unless --keep-going; then every level analysed
as a run, the curves (sweep.parquet, report.md, report.html) and, on a simulator fleet, the
same levels predicted by the model (plan/) beside what was measured.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.gate import ErrorCheck
from analysis.long_summary import long_summary
from analysis.sweep import LEVEL_SCHEMA, decide_sweep, plan_vs_measured, saturation, sweep_markdown, with_level
from analysis.sweep_html import sweep_html, tenant_targets
from cluster.fleet import FleetSpec
from common import files
from contract.manifest import Manifest
from loadtest.engine.level_dirs import LevelDir, summarise
from loadtest.engine.levels import Level
from loadtest.engine.plan import plan_levels, simulator_of
from loadtest.engine.replays import Replays, Stage, replay_level

BASELINE = "baseline"    # taken to every level, saturated or not: every other mode's speedup needs it


@dataclass
class SweepLevels:
    """Per mode, the levels from the lowest load up, each into its own folder, stopping (unless
    `keep_going`) above the level where the mode saturated; each level stops sending at
    `level_duration_s`."""

    levels: list[LevelDir]
    keep_going: bool = False
    level_duration_s: float | None = None

    def drive(self, session: Replays, stage: Stage, mode: str) -> None:
        curves: list[pa.Table] = []
        saturated_at: str | None = None
        for i, lv in enumerate(self.levels):
            if saturated_at is not None and not self.keep_going and mode != BASELINE:
                lv.skipped[mode] = f"saturated at {saturated_at} (--keep-going replays it)"
                continue
            replay_level(session, mode, lv, i > 0, self.level_duration_s)
            records = lv.records(mode)
            curves.append(with_level(long_summary(records, lv.manifest.run_id, [mode]), lv.level.name, lv.offered,
                                     lv.level.concurrency))
            judged = saturation(pa.concat_tables(curves).cast(LEVEL_SCHEMA)).get((lv.level.name, mode), False)
            if judged is None:   # its in-flight count was still filling: no verdict, and the sweep goes on
                lv.unjudged.append(mode)
                session.observer.say(f"{mode}: too few requests at {lv.level.name} to judge saturation (its first "
                                      "requests took more than half its arrivals' span; replay more: --requests or "
                                      "--level-duration)" + ("" if i == len(self.levels) - 1 else
                                                             "; its higher levels are replayed"))
            if judged:
                lv.saturated.append(mode)
                saturated_at = saturated_at or lv.level.name
                session.observer.say(f"{mode}: saturated at {lv.level.name} (completions no longer follow the load)"
                                     + ("" if self.keep_going or i == len(self.levels) - 1 or mode == BASELINE
                                        else "; its higher levels are skipped"))
        session.manifest.levels = [lv.entry() for lv in self.levels]


def plan_beside(spec: FleetSpec | None, modes: list[str], base: pa.Table, levels: list[LevelDir], run_dir: Path,
                top: Manifest, stop_s: float | None) -> pa.Table | None:
    """On a simulator fleet (provisioned by this sweep, or held up by `cluster up`, whose state
    file names it): the model's prediction of the same levels and requests, sent for as long
    (plan/, as `loadtest plan` writes it); None otherwise (servers given as MODE=URL pairs)."""
    if spec is None or spec.engine != "sim":
        return None
    servers = {m: simulator_of(spec, m, None) for m in modes}
    shutil.rmtree(run_dir / "plan", ignore_errors=True)     # made again by `loadtest report SWEEP`

    planned = Manifest(top.run_id, top.scenario, {**top.fleet, "planned_on": spec.sim.hardware}, modes, top.seed,
                       base.num_rows)
    return plan_levels(base, [lv.level for lv in levels], servers, spec, run_dir / "plan", planned, "plan/",
                       stop_s=stop_s)


@dataclass(frozen=True)
class SweepReport:
    """A sweep analysed: each level's error checks, and report.md's text (None: no level has a summary)."""

    checks: list[tuple[str, list[ErrorCheck]]]
    markdown: str | None = None


def write_report(run_dir: Path, title: str, levels: list[LevelDir], manifest: Manifest, gpus: int,
                 predicted: pa.Table | None, max_errors: float | None) -> SweepReport:
    """Every level analysed as a run, then the sweep's curves and its decision (also into the
    manifest), written as sweep.parquet, report.md and report.html."""
    checks = [(lv.level.name, summarise(lv, manifest.status, max_errors)) for lv in levels]
    parts = [with_level(pq.read_table(lv.dir / "summary.parquet"), lv.level.name, lv.offered, lv.level.concurrency)
             for lv in levels if (lv.dir / "summary.parquet").is_file()]
    if not parts:
        return SweepReport(checks)
    sweep = pa.concat_tables(parts).cast(LEVEL_SCHEMA)
    files.write_table(sweep, run_dir / "sweep.parquet")
    manifest.decision = decide_sweep(sweep).record()
    manifest.write(run_dir)
    report = sweep_markdown(sweep, title, manifest.simulated, gpus, manifest.gpu_hour_cost)
    if predicted is not None:
        report += "\n" + plan_vs_measured(predicted, sweep)
    files.write_text(run_dir / "report.md", report)
    files.write_text(run_dir / "report.html", sweep_html(title, report, sweep, gpus, predicted,
                                                         tenant_targets(levels[0].trace)))
    return SweepReport(checks, report)


def reanalyse(run_dir: Path, max_errors: float | None = None) -> SweepReport:
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
    return write_report(run_dir, title, levels, manifest, gpus, predicted, max_errors)
