"""The engine under every replaying command: one `Replays` brings the fleet up (a Ray cluster
joined or started, or a fleet already held up), replays every mode in turn or all at once, and
tears the fleet down on every path. What a mode's replay is comes from a `Driver`, composed in:
one replay into the run (run, ui, soak: `OneReplay`), a sweep's levels, or a capacity search's
probes. A `Replay` is one Locust replay of one mode into one folder; the drivers use it."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from cluster.placement import PlanError
from cluster.provision import ACTOR_GONE, Fleet
from cluster.scrape import Scraper
from cluster.state import ExistingFleet
from common.ray_nodes import GPU
from common.times import utc_now
from contract.manifest import Manifest, ModeRun
from loadtest.engine.bringup import BringUp
from loadtest.engine.events import Began, Observer
from loadtest.engine.guard import Interrupted
from loadtest.engine.inputs import FleetChoice, Trace, default_workers
from loadtest.engine.level_dirs import LevelDir
from loadtest.engine.ray_cluster import join_fleet
from loadtest.engine.signals import Signals
from loadtest.options.replaying import Replaying
from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig, ReplayError
from loadtest.replay.process import LocustProcess, ReplayEnd
from loadtest.replay.sizing import WorkerChoice, choose_workers, size_load
from loadtest.request.tally import LiveTallies, sent_to
from scenarios.trace import closed_concurrency


@dataclass
class Stage:
    """What every mode's replay shares once the fleet is up."""

    scraper: Scraper           # the run's server metrics (a level's or a probe's have their own)
    bringup: BringUp           # the modes up in the plan's turns, their replicas recorded


class Driver(Protocol):
    """What the session does with a mode once its replicas are up."""

    def drive(self, session: Replays, stage: Stage, mode: str) -> None: ...


@dataclass
class Replays:
    """One replaying command after its inputs are checked: the fleet up, every mode driven."""

    args: Replaying
    trace: Trace
    choice: FleetChoice
    run_dir: Path
    manifest: Manifest
    signals: Signals
    observer: Observer                          # told of everything (the progress bars, /metrics, the board)
    live: LiveTallies                           # every replay's tally as it arrives, which the observers read
    driver: Driver
    cooldown_s: float = 0.0                     # between modes
    trace_file: str = "trace.parquet"           # in the run folder (a soak's: the folder of its parts)
    replay_extra: dict[str, dict] = field(default_factory=dict)   # mode -> more ReplayConfig fields (a soak's)
    stage: Stage | None = None                  # once the fleet is up
    workers: int = 0                            # Locust workers per replay (set from the options)
    room: tuple[int, str] = (0, "")             # CPUs for workers per mode, and where (this machine, or Ray nodes)

    def __post_init__(self) -> None:
        self.room = (default_workers(self.choice.spec, len(self.choice.modes)), "this machine's free cores")
        self.workers = self.workers_for(self.trace.table).workers   # until _size_workers knows the room

    def workers_for(self, trace: pa.Table) -> WorkerChoice:
        """The workers a replay of `trace` gets: --workers, or what its peak load needs (auto)
        within the room the session has for them."""
        closed = closed_concurrency(trace)
        if closed or not trace.num_rows:
            unsized = "a closed loop's rate is the server's" if closed else "a soak's trace is drawn as it goes"
            return choose_workers(self.args.processes.workers, None, *self.room, closed, unsized)
        sizing = size_load(trace["offset_s"].to_numpy(), trace["max_tokens"].to_numpy())
        return choose_workers(self.args.processes.workers, sizing, *self.room, closed)

    def _size_workers(self, modes_at_once: int) -> None:
        """The workers per mode, now that the room for them is known (Ray's nodes are), said once;
        the modes replayed at once share it. Before any replica starts, so a cluster without room
        for the workers is refused (exit 2) with nothing started."""
        processes = self.args.processes
        local = default_workers(self.choice.spec, len(self.choice.modes))
        self.room = (max(1, local // modes_at_once), "this machine's free cores")
        if processes.on_ray:
            from loadtest.replay.ray_workers import worker_room

            try:
                free, where, gpu_nodes = worker_room(processes.ray_worker_nodes)
            except ReplayError as exc:
                raise PlanError(str(exc)) from None
            plan = self.manifest.plan or {}
            bundles = plan.get("replica_bundles", [])
            if gpu_nodes or not any(GPU in b for b in bundles):   # the replicas may take those CPUs too
                free -= sum(b.get("CPU", 0.0) for b in bundles) * plan.get("replicas_per_mode", 0) * modes_at_once
            free = max(0, int(free + 1e-9))
            self.room = (free // modes_at_once, where)
            asked = processes.workers or 1
            if free < asked * modes_at_once:
                raise PlanError(f"--ray-workers: {free} CPU(s) are left for Locust workers on {where}, and the "
                                f"{modes_at_once} mode(s) replayed at once need {asked * modes_at_once} (at least "
                                f"{asked} worker(s) each, one CPU a worker): use fewer --workers, more CPUs there, "
                                "or --mode-order turns")
        choice = self.workers_for(self.trace.table)
        self.workers = choice.workers
        self.manifest.workers = choice.as_dict()
        self.observer.say(choice.text())

    def replay_all(self) -> None:
        """Every mode driven, in turn (with the cooldown between) or all at once; Interrupted
        when a signal stopped them."""
        with ExitStack() as stack:
            processes = self.args.processes
            # a Ray cluster that goes away ends the run (exit 3, one line)
            fleet = join_fleet(self.choice, self.args.fleet.address, processes.on_ray, self.signals,
                               self.manifest, self.run_dir, self.args.PROG, stack)
            bringup = BringUp(fleet, self.choice.modes, self.manifest, self.run_dir, self.observer.say,
                              processes.mode_order)
            self._size_workers(len(self.choice.modes) if bringup.at_once else 1)
            modes = self.choice.modes
            scraper = stack.enter_context(Scraper(self.run_dir))
            self.stage = stage = Stage(scraper, bringup)
            self.observer.begin(Began(self.manifest.run_id, modes, self.trace.table.num_rows, self.live,
                                      scraper.latest_sums))
            stack.callback(self.observer.finish)
            if bringup.at_once:
                self.manifest.mode_order = "parallel (all modes at once, sharing the client machine)"
                self._up(stage, modes)
                with ThreadPoolExecutor(len(modes)) as pool:
                    for fut in [pool.submit(self.one_mode, stage, m) for m in modes]:
                        fut.result()
            else:
                for i, mode in enumerate(modes):
                    if i and self.cooldown_s and not self.signals.stop:
                        time.sleep(self.cooldown_s)
                    if self.signals.stop:  # a signal, maybe during the cooldown
                        break
                    self._up(stage, [mode])
                    self.one_mode(stage, mode)
                    bringup.done(mode)
        bringup.record()  # the fleet is down: when the rest stopped
        if self.signals.stop:
            raise Interrupted()

    def _up(self, stage: Stage, modes: list[str]) -> None:
        for mode in modes:
            self.observer.mode_state(mode, "starting replicas")
        stage.bringup.up(modes)

    def one_mode(self, stage: Stage, mode: str) -> None:
        """`mode` driven, with its manifest entry's times, its bar, its /metrics and its replicas'
        health said at the end."""
        mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
        mr.started_at = utc_now()
        self.manifest.write(self.run_dir)
        replicas = stage.bringup.replicas[mode]
        gpus = [(g.replica, g.url) for g in stage.bringup.fleet.gpu_sources(replicas) if g.url is not None]
        self.observer.mode_started(mode, [(r.label, r.url) for r in replicas], gpus)
        try:
            self.driver.drive(self, stage, mode)
        finally:
            self.observer.mode_ended(mode)
            self._report_dead_replicas(stage.bringup.fleet, replicas, mr, mode)
            mr.ended_at = utc_now()
            self.manifest.write(self.run_dir)

    def replay(self, mode: str, mr: ModeRun, run_dir: Path | None = None, run_id: str | None = None,
               workers: int | None = None, deadline_s: float | None = None, drain: bool = False) -> ReplayEnd:
        """Replay `mode` with one Locust process, or a master and --workers worker processes, from
        the trace of `run_dir` (default: the run's) into its records, recording into `mr`."""
        assert self.stage is not None
        replicas = self.stage.bringup.replicas[mode]
        a = self.args.client
        run_dir = run_dir or self.run_dir
        # Absolute paths: workers on other nodes (--ray-workers) do not share the driver's directory.
        config = ReplayConfig(trace=(run_dir / self.trace_file).resolve(), mode=mode,
                              endpoints=tuple(r.url for r in replicas), served_model=replicas[0].served_model,
                              run_id=run_id or self.manifest.run_id, run_dir=run_dir.resolve(),
                              max_inflight=a.max_inflight, timeout_s=a.timeout, retry_after=a.retry_after,
                              max_retries=a.max_retries, deadline_s=deadline_s,
                              drain=drain, api_key_env=a.api_key_env, lateness_limit_ms=a.lateness_limit,
                              workers=workers or self.workers, ray_workers=self.args.processes.on_ray,
                              ray_worker_nodes=self.args.processes.ray_worker_nodes,
                              **self.replay_extra.get(mode, {}))
        key = os.environ.get(a.api_key_env)  # Ray workers get it in their environment, never their argv

        def show(msg: protocol.Line) -> None:   # an Observed tally is added up into `live` before it is shown
            self.observer.line(mode, config.run_id, msg)

        process = LocustProcess(config, show, {a.api_key_env: key} if key else {}, live=self.live)
        self.signals.watch(process)
        try:
            if self.signals.count >= 3:   # killed before it started, as a third signal asks: nothing to record
                mr.end, mr.records = "interrupted", 0
                raise Interrupted()
            process.start()
            mr.locust_pids, mr.ray_workers = process.pids, process.placements
            mr.ray_worker_nodes = process.worker_nodes
            self.manifest.write(self.run_dir)
            end = process.wait()
        except BaseException:
            process.kill()
            raise
        finally:
            self.signals.unwatch(process)
        mr.unrecorded = end.unrecorded
        if end.unrecorded:   # said in the manifest whatever the end (the guard says it for an interrupt)
            self.manifest.unrecorded[mode] = self.manifest.unrecorded.get(mode, 0) + end.unrecorded
        if end.not_written is not None:  # a full disk: the replay stopped, what it wrote is kept
            mr.end, mr.records = "failed", end.recorded
            raise ReplayError(end.not_written.message)
        if end.crashed and self.signals.count >= 3:   # the third signal killed it, as asked: not a crash
            mr.end, mr.records = "interrupted", end.recorded
            raise Interrupted()
        if end.crashed:   # the lone Locust process, or the master, died: its workers have stopped
            mr.end, mr.records = "crashed", end.recorded
            raise ReplayError(end.crash_text(config))
        if end.unrecorded and not self.signals.stop:   # it said it ended, but rows are missing: never "completed"
            mr.end, mr.records = "failed", end.scheduled - end.unrecorded
            raise ReplayError(end.unrecorded_text(config))
        return end

    def _report_dead_replicas(self, fleet: Fleet | ExistingFleet, replicas: list, mr: ModeRun, mode: str) -> None:
        existing = self.choice.existing is not None
        for rep, entry in zip(replicas, mr.replicas, strict=False):
            code = fleet.exit_code(rep)
            if code is None:
                continue
            # what its records say was sent to it (a sweep's records are in its levels' folders); an
            # unreadable part must not hide how the run ended
            try:
                sent = entry["requests"] = sent_to(self.run_dir / "requests" / f"mode={mode}", rep.label)
            except (OSError, pa.ArrowException):
                sent = {}
            said = f" ({', '.join(f'{n:,} {s}' for s, n in sorted(sent.items()))})" if sent else ""
            if existing:  # not ours: all we know is that it stopped answering
                entry["healthy_after_run"] = False
                self.observer.say(f"[red]replica {rep.label} at {rep.url} stopped answering /health during the run; "
                                  f"requests sent to it failed{said}[/red]")
            else:  # died mid-run (or its Ray actor did, taking it along): its requests failed as errors
                if code == ACTOR_GONE:  # the server's own exit code went with the actor
                    entry["actor"], what = "died during the run", "'s Ray actor died"
                else:
                    entry["exit_code"], what = code, f" exited with code {code}"
                where = f"Ray node {entry['node_id'][:12]} at {entry['node']}; " if entry.get("node_id") else ""
                self.observer.say(f"[red]replica {rep.label}{what} during the run; requests sent to it "
                                  f"failed{said} ({where}see {rep.log_path})[/red]")


@dataclass
class OneReplay:
    """Each mode replayed once into the run's own folder (run, ui, soak), stopping at `deadline_s`."""

    deadline_s: float | None = None

    def drive(self, session: Replays, stage: Stage, mode: str) -> None:
        mr = session.manifest.mode_runs[mode]
        replicas = stage.bringup.replicas[mode]
        scraper = stage.scraper
        watch(scraper, stage, mode, replicas)
        session.observer.mode_state(mode, "starting")
        try:
            end = session.replay(mode, mr, deadline_s=self.deadline_s)
        finally:
            scraper.unwatch(mode)
        mr.end, mr.records, mr.client = end.reason, end.recorded, end.client
        if end.reason not in (None, "completed"):
            session.observer.stopped(mode, end.reason)
        mr.server_metrics = scraper.problem(mode) or "scraped"
        if scraper.problem(mode):
            session.observer.say(f"[yellow]{mode}: no server-side metrics ({scraper.problem(mode)}); the replay "
                                 "is unaffected, the acceptance column stays empty[/yellow]")
        mr.gpu_metrics = gpu_state(scraper, mode)
        if scraper.gpu_problem(mode):
            session.observer.say(f"[yellow]{mode}: GPU telemetry not measured ({scraper.gpu_problem(mode)}); "
                                 "the replay is unaffected, its energy and memory figures say not measured[/yellow]")


def watch(scraper: Scraper, stage: Stage, mode: str, replicas: list) -> None:
    """Scrape `mode`'s replicas' /metrics, and read their GPUs, from now on."""
    scraper.watch(mode, [(r.label, r.url) for r in replicas], stage.bringup.fleet.gpu_sources(replicas))


def gpu_state(scraper: Scraper, mode: str) -> str:
    """What the manifest says of `mode`'s GPU telemetry: read, its first problem, or no GPUs."""
    if not scraper.gpu_sources(mode):
        return "no GPUs (vLLM on CPU) or no exporter"
    return scraper.gpu_problem(mode) or "read"


def replay_level(session: Replays, mode: str, lv: LevelDir, pause: bool, deadline_s: float | None) -> ModeRun:
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
    session.observer.level(mode, lv.level.name, lv.trace.num_rows)
    choice = session.workers_for(lv.trace)   # a level's own rate (or concurrency) sizes its workers
    lv.manifest.workers, workers = choice.as_dict(), choice.workers
    with Scraper(lv.dir) as scraper:
        watch(scraper, stage, mode, replicas)
        try:
            end = session.replay(mode, lmr, lv.dir, lv.manifest.run_id, workers, deadline_s, drain=True)
        finally:
            scraper.unwatch(mode)
    lmr.end, lmr.records, lmr.client = end.reason, end.recorded, end.client
    lmr.server_metrics = scraper.problem(mode) or "scraped"
    lmr.gpu_metrics = gpu_state(scraper, mode)
    lmr.ended_at = utc_now()
    lv.manifest.write(lv.dir)
    if session.signals.stop:
        raise Interrupted()
    return lmr
