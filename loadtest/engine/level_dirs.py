"""The one writer of a level's folder (a sweep's level, a capacity search's probe, a plan's level,
measured or predicted): each its own run folder (trace.parquet, manifest.json,
requests/mode=<mode>/, server_metrics/), so every analysis reads a level as it reads a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from analysis.gate import ErrorCheck
from analysis.long_summary import SCALAR_COLUMNS
from analysis.reader import read_requests
from analysis.run_analysis import analyse_run
from common.times import utc_now
from contract.manifest import Manifest, ModeRun
from loadtest.engine.levels import Level, offered_rate
from scenarios.trace import write_trace


@dataclass
class LevelDir:
    """One level (or one capacity probe): its folder, its trace and its own manifest."""

    level: Level
    dir: Path
    trace: pa.Table
    manifest: Manifest
    saturated: list[str] = field(default_factory=list)     # modes that saturated here
    unjudged: list[str] = field(default_factory=list)      # modes with too few requests here to judge saturation
    skipped: dict[str, str] = field(default_factory=dict)  # mode -> why it was not replayed here

    @property
    def offered(self) -> float:
        return offered_rate(self.trace)

    def entry(self) -> dict:
        """The level as the sweep's manifest lists it."""
        return {"name": self.level.name, "folder": str(self.dir), "rate_scale": self.level.rate_scale,
                "concurrency": self.level.concurrency, "offered_req_per_s": self.offered,
                "saturated": list(self.saturated), "too_few_to_judge": list(self.unjudged),
                "skipped": dict(self.skipped)}

    def records(self, mode: str) -> pa.Table:
        """`mode`'s records at this level, without their chunk lists."""
        return read_requests(self.dir, columns=SCALAR_COLUMNS, filter=pc.field("mode") == mode)


def new_level(top: Manifest, base: pa.Table, level: Level, folder: Path, name: str | None = None) -> LevelDir:
    """The folder of `level` under the sweep's: its trace (the base trace at that load) and a
    manifest that says which sweep it belongs to."""
    trace = level.trace(base)
    (folder / "requests").mkdir(parents=True, exist_ok=False)
    (folder / "logs").mkdir()
    write_trace(trace, folder / "trace.parquet", top.scenario.get("name", ""), top.scenario.get("sha256", ""))
    scenario = {**top.scenario, "rate_scale": level.rate_scale, "concurrency": level.concurrency,
                "offered_req_per_s": offered_rate(trace)}
    manifest = Manifest(f"{top.run_id}/{name or level.name}", scenario, top.fleet, list(top.modes), top.seed,
                        trace.num_rows)
    # every mode's entry made now: modes replayed in parallel then only fill in their own
    manifest.mode_runs = {m: ModeRun() for m in top.modes}
    manifest.write(folder)
    return LevelDir(level, folder, trace, manifest)


def summarise(lv: LevelDir, status: str, max_errors: float | None = None) -> list[ErrorCheck]:
    """The level's analysis (summary.parquet, report.md, report.html) once its modes ran, and
    with `max_errors` each mode's error gate."""
    lv.manifest.status, lv.manifest.ended_at = status, utc_now()
    lv.manifest.write(lv.dir)
    if not any((lv.dir / "requests").iterdir()):
        return []
    present = [m for m in lv.manifest.modes if lv.manifest.mode_runs[m].end is not None]
    found = analyse_run(lv.dir, present, lv.manifest, max_errors)
    lv.manifest.record(lv.dir, **found.manifest_fields())   # its decision and every tenant's SLOs
    return found.checks
