"""Finished folders read again (`loadtest report`): run folders checked before any is analysed,
runs of one trace read as one experiment (analysis.repeats), their summaries and reports written
together (--out), and a plan set beside a measured sweep of the same levels."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.long_summary import LONG_SCHEMA
from analysis.markdown import repeats_markdown, runs_markdown
from analysis.repeats import RepeatRun, Repeats, repeats_of
from analysis.sweep import plan_vs_measured
from common import files
from contract.manifest import Manifest


def run_folders(paths: list[str]) -> list[tuple[Path, Manifest]]:
    """Each path as a run folder with its manifest, every one checked before any is read further
    (so a typo in the last does not cost the others' time); ValueError, one line, otherwise."""
    runs = []
    for text in paths:
        run_dir = Path(text)
        if not run_dir.is_dir():
            raise ValueError(f"{run_dir}: no such run folder")
        if not (run_dir / "requests").is_dir():
            raise ValueError(f"{run_dir}: no request records (requests/ is missing; not a loadtest run?)")
        runs.append((run_dir, Manifest.read(run_dir)))
    return runs


def fleet_identity(manifest: Manifest) -> str:
    """Which fleet a run replayed against: its name and the hash of its file (a redeploy of the
    same file keeps both)."""
    fleet = manifest.fleet or {}
    sha = str(fleet.get("sha256") or "")
    return f"{fleet.get('name', '')}" + (f" (file {sha[:12]})" if sha else "")


def summaries_of(runs: list[tuple[Path, Manifest]]) -> list[pa.Table]:
    """Each run's summary.parquet (empty where it has none)."""
    return [pq.read_table(d / "summary.parquet") if (d / "summary.parquet").is_file() else LONG_SCHEMA.empty_table()
            for d, _ in runs]


def repeats_among(runs: list[tuple[Path, Manifest]], longs: list[pa.Table]) -> Repeats | None:
    """Runs of one trace as one experiment: the spread of each figure between them (None for one run)."""
    if len(runs) < 2:
        return None
    return repeats_of([RepeatRun(d, m.run_id, m.status, long, fleet_identity(m))
                       for (d, m), long in zip(runs, longs, strict=True)])


def write_runs_report(out: Path, longs: list[pa.Table], repeats: Repeats | None) -> None:
    """Every run's summary in one summary.parquet, and report.md, under `out` (OSError otherwise)."""
    out.mkdir(parents=True, exist_ok=True)
    combined = pa.concat_tables(longs) if longs else LONG_SCHEMA.empty_table()
    files.write_table(combined, out / "summary.parquet")
    files.write_text(out / "report.md", runs_markdown(combined)
                     + ("\n" + repeats_markdown(repeats) if repeats is not None else ""))


def is_plan(sweep_dir: Path) -> bool:
    """A plan's folder (`loadtest plan`, or a sweep's plan/): its levels were planned, not run."""
    level = next(iter(sorted((sweep_dir / "levels").glob("*/manifest.json"))), None)
    return level is not None and "planned_on" in Manifest.read(level.parent).fleet


def side_by_side(plan_dir: Path, measured_dir: Path) -> str:
    """A plan and a measured sweep of the same levels: how far the model is from the measurement
    (ValueError when they share no level)."""
    plan, sweep = (pq.read_table(d / "sweep.parquet") for d in (plan_dir, measured_dir))
    if not set(plan["level"].to_pylist()) & set(sweep["level"].to_pylist()):
        raise ValueError(f"{plan_dir} and {measured_dir} share no level (give the plan the sweep's --rate-scale, "
                         "--rates or --concurrency)")
    return f"# {plan_dir} (plan) against {measured_dir} (measured)\n\n" + plan_vs_measured(plan, sweep)
