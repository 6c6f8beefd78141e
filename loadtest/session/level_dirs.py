"""The levels of a sweep or the probes of a capacity search: the fleet up once (the session's
fleet, bring-up, progress bars and signals), and per mode a driver that replays one level after
another, each into its own run folder (trace.parquet, manifest.json, requests/mode=<mode>/, server_metrics/), so
every analysis reads a level as it reads a run. The sweep drives its levels in order and stops a
mode where it saturated; the capacity search chooses each next rate from the last verdict."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from analysis.gate import ErrorCheck
from analysis.long_summary import SCALAR_COLUMNS
from analysis.reader import read_requests
from analysis.run_analysis import analyse_run
from cluster.scrape import Scraper
from common.times import utc_now
from loadtest.manifest import Manifest, ModeRun
from loadtest.session.engine import Session
from loadtest.session.guard import Interrupted
from loadtest.session.levels import Level, offered_rate
from scenarios.trace import write_trace


@dataclass
class LevelDir:
    """One level (or one capacity probe): its folder, its trace and its own manifest."""

    level: Level
    dir: Path
    trace: pa.Table
    manifest: Manifest
    saturated: list[str] = field(default_factory=list)     # modes that saturated here
    skipped: dict[str, str] = field(default_factory=dict)  # mode -> why it was not replayed here

    @property
    def offered(self) -> float:
        return offered_rate(self.trace)

    def entry(self) -> dict:
        """The level as the sweep's manifest lists it."""
        return {"name": self.level.name, "folder": str(self.dir), "rate_scale": self.level.rate_scale,
                "concurrency": self.level.concurrency, "offered_req_per_s": self.offered,
                "saturated": list(self.saturated), "skipped": dict(self.skipped)}

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
    return analyse_run(lv.dir, present, lv.manifest, max_errors).checks


def replay_level(session: Session, mode: str, lv: LevelDir, pause: bool, deadline_s: float | None) -> ModeRun:
    """Replay `mode` at one level into its folder (after the session's cooldown when `pause`),
    stopping at `deadline_s` (--level-duration) and letting the requests in flight finish."""
    stage = session.stage
    assert stage is not None
    if session.signals.stop:
        raise Interrupted()
    if pause and session.cooldown_s:
        time.sleep(session.cooldown_s)
    replicas = stage.bringup.replicas[mode]
    top = session.manifest.mode_runs[mode]
    lmr = lv.manifest.mode_runs[mode]
    lmr.replicas, lmr.turn, lmr.started_at = top.replicas, top.turn, utc_now()
    stage.progress.update(stage.tasks[mode], description=f"{mode} {lv.level.name}", completed=0,
                          total=lv.trace.num_rows, counts="starting")
    workers = min(session.workers, lv.level.concurrency) if lv.level.concurrency else session.workers
    with Scraper(lv.dir) as scraper:
        scraper.watch(mode, [(r.label, r.url) for r in replicas])
        try:
            end = session.replay(mode, lmr, lv.dir, lv.manifest.run_id, workers, deadline_s, drain=True)
        finally:
            scraper.unwatch(mode)
    lmr.end, lmr.records, lmr.client = end.reason, end.recorded, end.client
    lmr.server_metrics = scraper.problem(mode) or "scraped"
    lmr.ended_at = utc_now()
    lv.manifest.write(lv.dir)
    if session.signals.stop:
        raise Interrupted()
    return lmr
