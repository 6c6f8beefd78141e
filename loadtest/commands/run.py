"""`loadtest run`: the main job, wiring the four rooms together.

scenario -> trace.parquet -> fleet on Ray -> for each mode: a Locust replay (LocustProcess) of the
trace against that mode's replicas, writing requests/mode=<mode>/ -> tables and the error gate.
The fleet is torn down on every exit path; Ctrl-C or SIGTERM stops the replay gracefully (the
in-flight requests get a grace period, unsent ones are recorded as not_sent) and the manifest
says `interrupted`; a second Ctrl-C stops the replay at once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID

from cluster import FleetError, StartupCancelled
from cluster.placement import PlanError
from cluster.provision import ACTOR_GONE, Fleet
from cluster.scrape import Scraper
from cluster.state import ExistingFleet
from common import exits, files
from common.exits import print_error
from common.times import utc_now
from loadtest.commands.bringup import BringUp
from loadtest.commands.console import new_console, say_summaries_not_written
from loadtest.commands.inputs import (
    FleetChoice,
    Trace,
    choose_fleet,
    default_workers,
    new_manifest,
    new_run_dir,
    prepare_trace,
)
from loadtest.commands.metrics_server import MetricsError, MetricsServer, serving
from loadtest.commands.ray_cluster import join_fleet
from loadtest.commands.report import live_text, mode_progress, print_summary, progress_counts, record_gate
from loadtest.commands.signals import Signals
from loadtest.manifest import Manifest, ModeRun
from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig, ReplayError
from loadtest.replay.process import LocustProcess, ReplayEnd
from loadtest.session.options import Replaying, RunOptions
from scenarios import ScenarioError
from scenarios.trace import closed_concurrency, write_trace

log = logging.getLogger("loadtest")


class Interrupted(Exception):
    pass


def main(args: RunOptions) -> int:
    console = new_console()
    try:  # everything that can be wrong with the input, before anything starts: the files, then the servers
        t_build = time.monotonic()
        trace = prepare_trace(args.trace, args.gate.slo_gate)
        fleet = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, trace.info["name"])
    except (ScenarioError, FleetError, FileExistsError, MetricsError) as exc:
        print_error("loadtest run", str(exc))
        return exits.BAD_INPUT
    manifest = new_manifest(run_dir, trace, fleet)
    manifest.write(run_dir)
    trace_path = run_dir / "trace.parquet"
    write_trace(trace.table, trace_path, trace.info["name"], trace.info["sha256"])
    console.print(f"[bold]{manifest.run_id}[/bold]: {trace.table.num_rows} requests of {trace.info['name']} over "
                  f"{trace.table['offset_s'][-1].as_py():.1f} s (trace ready in {time.monotonic() - t_build:.1f} s), "
                  f"modes {', '.join(fleet.modes)}, fleet {fleet.info['name']}")

    code = served(args, console, manifest, run_dir, lambda signals, server: Run(
        args, console, trace, fleet, run_dir, manifest, signals, server, args.cooldown, args.deadline).replay_all())
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    try:
        checks = print_summary(console, run_dir, fleet.modes, manifest, args.gate.max_errors, args.gate.slo_gate)
    except files.NotWritten as exc:  # a full disk: the records stay as they are, each summary whole or not at all
        say_summaries_not_written("loadtest run", run_dir, exc)
        code = exits.INCOMPLETE if code == exits.OK else code
    if code == exits.OK:
        if not record_gate(manifest, checks, console, args.gate.slo_gate):
            code = exits.GATE_FAILED
        manifest.write(run_dir)
    code = exits.INCOMPLETE if manifest.unwritten and code in (exits.OK, exits.GATE_FAILED) else code  # said once
    if (run_dir / "report.md").exists():
        console.print(f"report: {run_dir / 'report.md'}")
    console.print(f"results: {run_dir}/")
    return code


def served(args: Replaying, console: Console, manifest: Manifest, run_dir: Path,
           replay: Callable[[Signals, MetricsServer], None]) -> int | None:
    """`guarded`, with the command's /metrics (its --metrics-* options) served for its length;
    None, said in one line, when it cannot listen after all (checked before the run folder was made)."""
    try:
        with serving(MetricsServer.of(args.metrics, run_dir), manifest, console) as server:
            return guarded(lambda signals: replay(signals, server), manifest, run_dir, args.PROG)
    except MetricsError as exc:
        print_error(args.PROG, str(exc))
        return None


def guarded(replay: Callable[[Signals], None], manifest: Manifest, run_dir: Path, prog: str) -> int:
    """Run `replay` under the signal handlers and say in the manifest how it ended; the exit code
    (OK, INTERRUPTED, BAD_INPUT for a refused pre-flight, INCOMPLETE for anything else)."""
    status, reason, code = "failed", None, exits.INCOMPLETE
    with Signals() as signals:
        try:
            replay(signals)
            status, code = "completed", exits.OK
        except (Interrupted, StartupCancelled, KeyboardInterrupt):
            status, reason, code = "interrupted", "stopped by signal", exits.INTERRUPTED
        except PlanError as exc:  # the pre-flight: the cluster cannot hold a mode; nothing was started
            status, reason, code = "refused", str(exc), exits.BAD_INPUT
            print_error(prog, reason)
        except (FleetError, ReplayError) as exc:
            reason = str(exc)
            print_error(prog, reason)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.debug("replay failed", exc_info=True)
            print_error(prog, reason)
        finally:
            manifest.status, manifest.reason, manifest.ended_at = status, reason, utc_now()
            manifest.write(run_dir)
    return code


@dataclass
class Stage:
    """What every mode's replay shares once the fleet is up."""

    progress: Progress
    tasks: dict[str, TaskID]   # mode -> its progress bar
    scraper: Scraper
    bringup: BringUp           # the modes up in the plan's turns, their replicas recorded


class Run:
    """One `loadtest run` after its inputs are checked: the fleet up, every mode replayed."""

    trace_file = "trace.parquet"   # in the run folder (a soak's: the folder of its parts)

    def __init__(self, args: Replaying, console: Console, trace: Trace, fleet: FleetChoice, run_dir: Path,
                 manifest: Manifest, signals: Signals, metrics: MetricsServer, cooldown_s: float = 0.0,
                 deadline_s: float | None = None) -> None:
        self.args, self.console, self.trace, self.choice = args, console, trace, fleet
        self.run_dir, self.manifest, self.signals, self.metrics = run_dir, manifest, signals, metrics
        workers = args.processes.workers or default_workers(fleet.spec, len(fleet.modes))
        closed = closed_concurrency(trace.table)
        self.workers = min(workers, closed) if closed else workers  # each worker keeps one request in flight
        self.cooldown_s = cooldown_s                                # between modes (a sweep's: between levels)
        self.deadline_s, self.drain = deadline_s, False             # a sweep's levels stop sending and drain
        self.replay_extra: dict[str, dict] = {}   # mode -> more ReplayConfig fields (a soak's flush, its resume)
        self.stage: Stage | None = None           # once the fleet is up

    def replay_all(self) -> None:
        with ExitStack() as stack:
            # a Ray cluster that goes away ends the run (exit 3, one line)
            processes = self.args.processes
            fleet = join_fleet(self.choice, self.args.fleet.address, processes.ray_workers, self.signals,
                               self.manifest, self.run_dir, self.args.PROG, stack)
            bringup = BringUp(fleet, self.choice.modes, self.manifest, self.run_dir, self.console,
                              processes.parallel_modes)
            progress = stack.enter_context(mode_progress(self.console))
            modes = self.choice.modes
            tasks = {m: progress.add_task(m, total=self.trace.table.num_rows, start=False, counts="waiting", live="")
                     for m in modes}
            self.stage = stage = Stage(progress, tasks, stack.enter_context(Scraper(self.run_dir)), bringup)
            if processes.parallel_modes:
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
            stage.progress.update(stage.tasks[mode], counts="starting replicas")
        stage.bringup.up(modes)

    def one_mode(self, stage: Stage, mode: str) -> None:
        mr = self.manifest.mode_runs.setdefault(mode, ModeRun())
        mr.started_at = utc_now()
        self.manifest.write(self.run_dir)
        replicas = stage.bringup.replicas[mode]
        progress, task, scraper = stage.progress, stage.tasks[mode], stage.scraper
        scraper.watch(mode, [(r.label, r.url) for r in replicas])
        self.metrics.watch(mode, [(r.label, r.url) for r in replicas])
        progress.start_task(task)
        progress.update(task, counts="starting")
        try:
            end = self.replay(mode, replicas, mr, progress, task)
        finally:
            progress.stop_task(task)
            scraper.unwatch(mode)
            self.metrics.unwatch(mode)
        mr.end, mr.records, mr.client = end.reason, end.recorded, end.client
        if end.reason not in (None, "completed"):
            counts = progress.tasks[task].fields.get("counts", "")
            progress.update(task, counts=f"[yellow]{end.reason}[/yellow]: {counts}")
        mr.server_metrics = scraper.problem(mode) or "scraped"
        if scraper.problem(mode):
            self.console.print(f"[yellow]{mode}: no server-side metrics ({scraper.problem(mode)}); the replay "
                               "is unaffected, the acceptance column stays empty[/yellow]", soft_wrap=True)
        self._report_dead_replicas(stage.bringup.fleet, replicas, mr)
        mr.ended_at = utc_now()
        self.manifest.write(self.run_dir)

    def replay(self, mode: str, replicas: list, mr: ModeRun, progress: Progress, task: TaskID,
               run_dir: Path | None = None, run_id: str | None = None, workers: int | None = None) -> ReplayEnd:
        """Replay `mode` with one Locust process, or a master and --workers worker processes, from
        the trace of `run_dir` (default: the run's) into its records."""
        a = self.args.client
        run_dir = run_dir or self.run_dir
        # Absolute paths: workers on other nodes (--ray-workers) do not share the driver's directory.
        config = ReplayConfig(trace=(run_dir / self.trace_file).resolve(), mode=mode,
                              endpoints=tuple(r.url for r in replicas), served_model=replicas[0].served_model,
                              run_id=run_id or self.manifest.run_id, run_dir=run_dir.resolve(),
                              max_inflight=a.max_inflight, timeout_s=a.timeout, retry_after=a.retry_after,
                              max_retries=a.max_retries, deadline_s=self.deadline_s,
                              drain=self.drain, api_key_env=a.api_key_env, lateness_limit_ms=a.lateness_limit,
                              workers=workers or self.workers, ray_workers=self.args.processes.ray_workers,
                              **self.replay_extra.get(mode, {}))
        key = os.environ.get(a.api_key_env)  # Ray workers get it in their environment, never their argv

        def show(msg: protocol.Line) -> None:
            if isinstance(msg, protocol.Progress):
                progress.update(task, completed=msg.done, total=msg.total, counts=progress_counts(msg))
            elif isinstance(msg, protocol.Live):
                progress.update(task, live=live_text(msg))
            self.on_line(mode, msg)

        process = LocustProcess(config, show, {a.api_key_env: key} if key else {}, metrics=self.metrics.metrics)
        self.signals.watch(process)
        try:
            if self.signals.count >= 3:   # killed before it started, as a third signal asks: nothing to record
                mr.end, mr.records = "interrupted", 0
                raise Interrupted()
            process.start()
            mr.locust_pids, mr.ray_workers = process.pids, process.placements
            self.manifest.write(self.run_dir)
            end = process.wait()
        except BaseException:
            process.kill()
            raise
        finally:
            self.signals.unwatch(process)
        if end.not_written is not None:  # a full disk: the replay stopped, what it wrote is kept
            mr.end, mr.records = "failed", end.recorded
            raise ReplayError(end.not_written.message)
        if end.crashed and self.signals.count >= 3:   # the third signal killed it, as asked: not a crash
            mr.end, mr.records = "interrupted", end.recorded
            raise Interrupted()
        if end.crashed:   # the lone Locust process, or the master, died: its workers have stopped
            mr.end, mr.records = "crashed", end.recorded
            raise ReplayError(end.crash_text(config))
        return end

    def on_line(self, mode: str, msg: protocol.Line) -> None:
        """Every message of `mode`'s replay (the web UI's board listens here)."""

    def _report_dead_replicas(self, fleet: Fleet | ExistingFleet, replicas: list, mr: ModeRun) -> None:
        existing = self.choice.existing is not None
        for rep, entry in zip(replicas, mr.replicas, strict=False):
            code = fleet.exit_code(rep)
            if code is None:
                continue
            if existing:  # not ours: all we know is that it stopped answering
                entry["healthy_after_run"] = False
                self.console.print(f"[red]replica {rep.label} at {rep.url} stopped answering /health during the run; "
                                   "requests sent to it failed[/red]")
            else:  # died mid-run (or its Ray actor did, taking it along): its requests failed as errors
                if code == ACTOR_GONE:  # the server's own exit code went with the actor
                    entry["actor"], what = "died during the run", "'s Ray actor died"
                else:
                    entry["exit_code"], what = code, f" exited with code {code}"
                self.console.print(f"[red]replica {rep.label}{what} during the run; requests "
                                   f"sent to it failed (see {rep.log_path})[/red]")
