"""`loadtest run`: the main job, wiring the four packages together.

scenario -> trace.parquet -> fleet on Ray -> for each mode: a Locust child process replays the
trace open-loop against that mode's replicas and writes requests/mode=<mode>/ -> summary table.
The fleet is torn down on every exit path; Ctrl-C or SIGTERM stops the replay gracefully (the
in-flight requests get a grace period, unsent ones are recorded as not_sent) and the manifest
says `interrupted`; a second Ctrl-C stops the replay at once.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import ray
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

import loadtest
from analysis.gate import ErrorCheck, error_checks
from analysis.server import load_server_metrics
from analysis.summary import load_requests, summarize, tenant_speedups, write_summary, write_tenant_speedups
from analysis.table import mode_table, steady_state_note, tenant_table
from cluster import FleetError, StartupCancelled
from cluster.fleet import FleetSpec, load_fleet, redacted, resolve_modes
from cluster.process import die_with_parent
from cluster.provision import Fleet, Replica, init_ray, ray_address
from cluster.scrape import Scraper
from cluster.state import ClusterState, ExistingFleet, ReplicaState, check_health, load_endpoints
from common import exits
from common.exits import print_error
from loadtest import protocol
from loadtest.locust_process import start_reader
from loadtest.manifest import Manifest, ModeRun, utc_now
from loadtest.ray_workers import RayWorkers, driver_ip
from scenarios import ScenarioError
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, closed_concurrency, load_trace_file, scale_rate, scenario_hash, write_trace

log = logging.getLogger("loadtest")
EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERRUPTED = (
    exits.OK, exits.GATE_FAILED, exits.BAD_INPUT, exits.INCOMPLETE, exits.INTERRUPTED)
LOCUSTFILE = Path(loadtest.__file__).with_name("locustfile.py")
DEFAULT_FLEET = "local-sim"
# How long a Locust master waits for its workers to connect before giving up (its rows are then
# recorded as not_sent).
WORKER_CONNECT_WAIT_S = 120


class Interrupted(Exception):
    pass


class _Signals:
    """First SIGINT/SIGTERM: stop gracefully. Second: stop the replay at once."""

    def __init__(self) -> None:
        self.count = 0
        self.children: list[subprocess.Popen] = []
        self._old: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def rearm(self) -> None:
        """Take SIGINT and SIGTERM back (ray.init installs a SIGTERM handler that exits at once)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum, frame) -> None:
        self.count += 1
        for child in list(self.children):
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGTERM if self.count == 1 else signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.count == 1:
            print(f"\n{signal.Signals(signum).name}: stopping gracefully (again to stop at once)", file=sys.stderr)

    @property
    def stop(self) -> bool:
        return self.count > 0


@dataclass
class RunPlan:
    run_id: str
    run_dir: Path
    manifest: Manifest


def locust_argv(trace_path: Path, mode: str, endpoints: list[str], served_model: str, run_id: str,
                run_dir: Path, max_inflight: int = 1024, timeout: float = 600.0, role: str = "local",
                workers: int = 1, master_port: int = 0, worker_index: int = 0, deadline: float | None = None,
                master_host: str = "127.0.0.1",
                api_key_env: str = "LOADTEST_API_KEY", lateness_limit: float = 10.0,
                web: tuple[str, int] | None = None, about: str | None = None) -> list[str]:
    """The command line of one Locust process replaying `trace_path` against `endpoints`: the only
    process (`local`; with `web` = (host, port), Locust's web UI instead of headless), or the
    `master` or a `worker` of a distributed replay."""
    replay = [
        "--trace-file", str(trace_path), "--mode", mode, "--endpoints", ",".join(endpoints),
        "--served-model", served_model, "--run-id", run_id,
        "--records-dir", str(run_dir / "requests" / f"mode={mode}"),
        "--max-inflight", str(max_inflight), "--request-timeout", str(timeout), "--api-key-env", api_key_env,
        "--lateness-limit", str(lateness_limit),
    ]
    if deadline:
        replay += ["--deadline", str(deadline)]
    if about:
        replay += ["--about", about]
    head = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    if role == "worker":
        log_file = run_dir / "logs" / f"locust-{mode}-worker{worker_index}.log"
        return [*head, "--worker", "--master-host", master_host, "--master-port", str(master_port),
                "--logfile", str(log_file), *replay]
    runner = ["--headless", "--only-summary"] if web is None else ["--web-host", web[0], "--web-port", str(web[1])]
    argv = [*head, *runner, "-u", str(workers), "-r", str(workers), "--host", endpoints[0],
            "--logfile", str(run_dir / "logs" / f"locust-{mode}.log"), *replay]
    if role == "master":
        argv += ["--master", "--expect-workers", str(workers), "--connect-wait", str(WORKER_CONNECT_WAIT_S),
                 "--master-bind-host", master_host,
                 "--master-bind-port", str(master_port)]
    return argv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def replay_mode(plan: RunPlan, mode: str, replicas: list[Replica] | list[ReplicaState], trace_path: Path,
                args: argparse.Namespace, signals: _Signals, progress: Progress, task_id,
                mode_run: ModeRun) -> tuple[str, int]:
    """Replay `mode` with one Locust process, or a master and `--workers` worker processes;
    return (end reason, records written)."""
    logs = plan.run_dir.resolve() / "logs"
    urls = [r.url for r in replicas]
    # Absolute paths: workers on other nodes (--ray-workers) do not share the driver's directory.
    common = (trace_path.resolve(), mode, urls, replicas[0].served_model, plan.run_id, plan.run_dir.resolve(),
              args.max_inflight, args.timeout)
    extra = {"deadline": args.deadline, "api_key_env": args.api_key_env, "lateness_limit": args.lateness_limit}
    workers: list[subprocess.Popen] = []
    on_ray = args.ray_workers
    if args.workers > 1 or on_ray:
        port = _free_port()
        # Workers on other nodes reach the master at this node's address; local ones at loopback.
        extra["master_host"] = driver_ip() if on_ray else "127.0.0.1"
        argv = locust_argv(*common, role="master", workers=args.workers, master_port=port, **extra)
        worker_argvs = [locust_argv(*common, role="worker", master_port=port, worker_index=i, **extra)
                        for i in range(args.workers)]
    else:
        argv, worker_argvs = locust_argv(*common, **extra), []
    ray_pool = None
    if on_ray:
        key = os.environ.get(args.api_key_env)  # handed to each worker's environment, never its argv
        ray_pool = RayWorkers(worker_argvs, plan.run_dir, {args.api_key_env: key} if key else {})
        ray_pool.check_capacity()
    end, recorded = "failed", 0
    with open(logs / f"locust-{mode}.stdout.txt", "w") as stats_out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True, preexec_fn=die_with_parent)
        mine = [proc]
        signals.children.append(proc)
        try:
            if ray_pool is not None:
                ray_pool.start()
                mode_run.ray_workers = ray_pool.placements
            else:
                for i, wargv in enumerate(worker_argvs):
                    with open(logs / f"locust-{mode}-worker{i}.stderr.txt", "wb") as err:
                        workers.append(subprocess.Popen(wargv, stdout=subprocess.DEVNULL, stderr=err,
                                                        start_new_session=True, preexec_fn=die_with_parent))
        except BaseException:
            for p in [proc, *workers]:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            signals.children.remove(proc)
            if ray_pool is not None:
                ray_pool.stop()
            raise
        mine += workers
        signals.children.extend(workers)
        if signals.stop:  # a signal arrived while these were starting: pass it on now
            for p in mine:
                os.killpg(p.pid, signal.SIGTERM)
        mode_run.locust_pids = [p.pid for p in mine]
        plan.manifest.write(plan.run_dir)

        def on_message(msg: protocol.Message) -> None:
            nonlocal end, recorded
            if isinstance(msg, protocol.Progress):
                progress.update(task_id, completed=msg.done, total=msg.total, counts=progress_counts(msg))
            elif isinstance(msg, protocol.Live):
                progress.update(task_id, live=live_text(msg))
            elif isinstance(msg, protocol.ClientVerdict):
                mode_run.client = msg.verdict
            elif isinstance(msg, protocol.Finished):
                end, recorded = msg.reason, msg.recorded

        reader = start_reader(proc, stats_out, on_message)
        while proc.poll() is None:
            time.sleep(0.1)
        reader.join(5)
        for w in workers:  # the master quits its workers; make sure none lingers
            try:
                w.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait()
        for p in mine:
            signals.children.remove(p)
        if ray_pool is not None:  # the master has quit its workers; stop any that linger, drop the actors
            ray_pool.stop()
    if proc.returncode not in (0, None) and end != "interrupted":
        raise RuntimeError(f"the Locust replay of {mode} exited with code {proc.returncode}; "
                           f"see {logs / f'locust-{mode}.log'}")
    return end, recorded


def progress_counts(p: protocol.Progress) -> str:
    """`80/300 done · 88 sent · 212 not sent` (the bar is the done share)."""
    text = f"{p.done:,}/{p.total:,} done · {p.sent:,} sent"
    return text + (f" · {p.not_sent:,} not sent" if p.not_sent else "")


def live_text(live: protocol.Live) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    return (f"TTFT p50 {f(live.ttft_p50)} p99 {f(live.ttft_p99)}  TPOT p50 {f(live.tpot_p50)}  "
            f"late p99 {f(live.late_p99)} ms")


def mode_progress(console: Console) -> Progress:
    """One bar per mode: what was done, sent and never sent, and the mode's own replay time."""
    return Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console)


def new_run_dir(out: str, run_id: str | None, name: str) -> Path:
    """results/<run_id>/ with its logs/ folder (run_id defaults to the UTC time and `name`);
    FileExistsError when that folder already holds a run."""
    run_dir = Path(out) / (run_id or f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{name.replace(':', '-')}")
    if run_dir.exists() and any(run_dir.iterdir()):
        raise FileExistsError(f"{run_dir} already exists; pick another --run-id")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    return run_dir


def endpoints_fleet_info(state: ClusterState, text: str, from_file: bool, modes: list[str]) -> dict:
    """The manifest's `fleet` for a run against a running fleet (`--endpoints`)."""
    return {"name": state.fleet, "source": text if from_file else "--endpoints",
            "endpoints": {m: [r.url for r in state.replicas if r.mode == m] for m in modes},
            "spec": state.fleet_spec}


def replica_entry(rep: Replica | ReplicaState) -> dict:
    """A replica as the manifest lists it under its mode."""
    return {"label": rep.label, "url": rep.url, "pid": rep.pid, "log": str(rep.log_path)}


def print_summary(console: Console, run_dir: Path, modes: list[str], manifest: Manifest,
                  max_error_share: float | None = None) -> list[ErrorCheck]:
    """Summarise the run's records (summary.parquet, tenant_speedups.parquet), print the tables
    and the client's warnings, and return the error gate of each mode (when `max_error_share`)."""
    table = load_requests(run_dir) if (run_dir / "requests").exists() else None
    if table is None or not table.num_rows:
        return []
    summaries = summarize(table, [m for m in modes if m in set(table["mode"].to_pylist())],
                          server_metrics=load_server_metrics(run_dir))
    write_summary(summaries, run_dir / "summary.parquet")
    console.print(mode_table(summaries, title=f"{manifest.run_id} ({manifest.status})"))
    by_tenant = tenant_speedups(table, modes)
    if by_tenant:
        write_tenant_speedups(by_tenant, run_dir / "tenant_speedups.parquet")
        if len(by_tenant) > 1:
            console.print(tenant_table(by_tenant, modes))
    note = steady_state_note(summaries)
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    for mode, mr in manifest.mode_runs.items():
        if mr.client and mr.client.get("client_limited"):
            console.print(f"[yellow]{mode}: client-limited ({'; '.join(mr.client['reasons'])}): its latencies "
                          "include the client's own delay; add workers (--workers) or client machines[/yellow]")
    checks = error_checks(table, [s.mode for s in summaries], max_error_share) if max_error_share is not None else []
    for c in checks:
        if c.kinds:
            colour = "green" if c.passed else "red"
            console.print(f"[{colour}]{c.mode}: {c.failed:,} of {c.sent:,} sent failed: {c.kinds_text()}[/{colour}]")
    return checks


def record_gate(manifest: Manifest, checks: list[ErrorCheck], console: Console) -> bool:
    """Put the error gate in the manifest and say why it failed; whether it passed."""
    manifest.checks = [c.as_dict() for c in checks]
    failed = [c for c in checks if not c.passed]
    manifest.gate = "failed" if failed else "passed"
    for c in failed:
        console.print(f"[red bold]gate failed: {c.reason()}[/red bold]", soft_wrap=True)
    return not failed


def default_workers(fleet: FleetSpec | None, n_modes: int) -> int:
    """One Locust worker per core, minus the cores local simulator replicas reserve."""
    reserved = 0.0
    if fleet is not None and fleet.engine == "sim":
        reserved = fleet.cpus_per_replica * fleet.replicas * n_modes
    return max(1, int((os.cpu_count() or 1) - math.ceil(reserved)))


def _prepare_trace(args: argparse.Namespace) -> tuple[pa.Table, dict, int | None]:
    """The trace to replay: built from --scenario, or read from --trace; with what describes it."""
    if args.trace:
        if args.seed is not None:
            raise ScenarioError("--seed: a trace file is replayed exactly as it was built; give --scenario to build "
                                "one with a seed, or rebuild the file (`loadtest trace build --seed N`)")
        trace, meta = load_trace_file(Path(args.trace))
        if args.requests:
            trace = trace.slice(0, args.requests)
        if args.rate_scale:
            trace = scale_rate(trace, args.rate_scale)
        info = {"name": meta.get("name", Path(args.trace).stem), "source": str(args.trace),
                "sha256": meta.get("sha256", ""), "rate_scale": args.rate_scale or 1.0}
        return trace, info, None
    scenario, raw = load_scenario(args.scenario)
    seed = scenario.seed if args.seed is None else args.seed
    requests_n = args.requests or scenario.demo_requests
    trace = build_trace(scenario, requests=requests_n, seed=seed, rate_scale=args.rate_scale)
    arrival = scenario.arrival.model_dump(by_alias=True) if scenario.arrival else "per tenant"
    info = {"name": scenario.name, "source": str(args.scenario), "sha256": scenario_hash(raw),
            "rate_scale": args.rate_scale or scenario.rate_scale, "arrival": arrival}
    return trace, info, seed


def main(args: argparse.Namespace) -> int:
    # Wide enough for the table when stdout is a file or a pipe (rich assumes 80 columns there).
    console = Console(width=None if sys.stdout.isatty() else 160)

    def fail(message: str) -> None:  # one line per problem, never wrapped
        print_error("loadtest run", message)
    # -- everything that can be wrong with the input is found before anything starts ------------
    existing: ClusterState | None = None
    try:  # the files first, then the servers
        t_build = time.monotonic()
        trace, scenario_info, seed = _prepare_trace(args)
        if args.endpoints:
            if args.fleet:
                raise FleetError("give --fleet (provision a fleet) or --endpoints (use a running one), not both")
            existing, from_file = load_endpoints(args.endpoints, args.api_key_env)
            fleet_spec = existing.spec()
            modes = resolve_modes(existing.fleet, existing.modes, args.modes)
            check_health([r for r in existing.replicas if r.mode in modes])
            fleet_info = endpoints_fleet_info(existing, args.endpoints, from_file, modes)
        else:
            fleet_spec, fleet_raw = load_fleet(args.fleet or DEFAULT_FLEET)
            modes = resolve_modes(fleet_spec.name, list(fleet_spec.modes), args.modes)
            for mode in modes:
                if fleet_spec.modes[mode].note:
                    print(f"loadtest run: note: modes.{mode}: {fleet_spec.modes[mode].note}", file=sys.stderr)
            fleet_info = {"name": fleet_spec.name, "source": str(args.fleet or DEFAULT_FLEET),
                          "sha256": scenario_hash(fleet_raw), "spec": redacted(fleet_spec)}
    except (ScenarioError, FleetError) as exc:
        fail(str(exc))
        return EXIT_USAGE
    try:
        run_dir = new_run_dir(args.out, args.run_id, scenario_info["name"])
    except FileExistsError as exc:
        fail(str(exc))
        return EXIT_USAGE
    run_id = run_dir.name
    manifest = Manifest(
        run_id=run_id,
        scenario=scenario_info,
        fleet=fleet_info,
        modes=modes, seed=seed, requests=trace.num_rows,
    )
    manifest.write(run_dir)
    plan = RunPlan(run_id, run_dir, manifest)
    if args.workers is None:
        args.workers = default_workers(fleet_spec, len(modes))
    closed = closed_concurrency(trace)
    if closed and args.workers > closed:  # each worker keeps at least one request in flight
        args.workers = closed
    trace_path = run_dir / "trace.parquet"
    write_trace(trace, trace_path, scenario_info["name"], scenario_info["sha256"])
    span = trace["offset_s"][-1].as_py()
    console.print(f"[bold]{run_id}[/bold]: {trace.num_rows} requests of {scenario_info['name']} over {span:.1f} s "
                  f"(trace ready in {time.monotonic() - t_build:.1f} s), modes {', '.join(modes)}, "
                  f"fleet {fleet_info['name']}")

    status, reason, code = "failed", None, EXIT_INCOMPLETE
    with _Signals() as signals, ExitStack() as stack:
        try:
            if existing is not None:
                fleet_cm = ExistingFleet(existing, modes)
                if args.ray_workers and init_ray(ray_address(args.address) or existing.ray_address,
                                                 log_file=run_dir / "logs" / "ray.log"):
                    signals.rearm()  # ray.init installs its own SIGTERM handler
                    stack.callback(ray.shutdown)
            else:
                fleet_cm = Fleet(fleet_spec, modes, run_dir / "logs", address=ray_address(args.address),
                                 cancelled=lambda: signals.stop, on_ray_ready=signals.rearm)
            with fleet_cm as fleet:
                where = "already running" if existing is not None else "on Ray"
                console.print(f"fleet ready: {len(fleet.replicas)} replica(s) {where}")
                for rep in fleet.replicas:
                    manifest.mode_runs.setdefault(rep.mode, ModeRun()).replicas.append(replica_entry(rep))
                manifest.write(run_dir)
                progress = mode_progress(console)
                tasks = {m: progress.add_task(m, total=trace.num_rows, start=False, counts="waiting", live="")
                         for m in modes}
                with progress, Scraper(run_dir) as scraper:

                    def one_mode(mode: str) -> None:
                        mr = manifest.mode_runs.setdefault(mode, ModeRun())
                        mr.started_at = utc_now()
                        manifest.write(run_dir)
                        replicas = fleet.endpoints(mode)
                        scraper.watch(mode, [(r.label, r.url) for r in replicas])
                        progress.start_task(tasks[mode])
                        progress.update(tasks[mode], counts="starting")
                        try:
                            mr.end, mr.records = replay_mode(plan, mode, replicas, trace_path, args, signals,
                                                             progress, tasks[mode], mr)
                        finally:
                            progress.stop_task(tasks[mode])
                            scraper.unwatch(mode)
                        if mr.end not in (None, "completed"):
                            counts = progress.tasks[tasks[mode]].fields.get("counts", "")
                            progress.update(tasks[mode], counts=f"[yellow]{mr.end}[/yellow]: {counts}")
                        mr.server_metrics = scraper.problems.get(mode, "scraped")
                        if mode in scraper.problems:
                            console.print(f"[yellow]{mode}: no server-side metrics ({scraper.problems[mode]}); "
                                          "the replay is unaffected, the acceptance column stays empty[/yellow]",
                                          soft_wrap=True)
                        for rep, entry in zip(replicas, mr.replicas, strict=False):
                            code = fleet.exit_code(rep)
                            if code is None:
                                continue
                            if existing is not None:  # not ours: all we know is that it stopped answering
                                entry["healthy_after_run"] = False
                                console.print(f"[red]replica {rep.label} at {rep.url} stopped answering /health "
                                              "during the run; requests sent to it failed[/red]")
                            else:  # died mid-run: its requests failed as errors
                                entry["exit_code"] = code
                                console.print(f"[red]replica {rep.label} exited with code {code} during the run; "
                                              f"requests sent to it failed (see {rep.log_path})[/red]")
                        mr.ended_at = utc_now()
                        manifest.write(run_dir)

                    if args.parallel_modes:
                        manifest.mode_order = "parallel (all modes at once, sharing the client machine)"
                        with ThreadPoolExecutor(len(modes)) as pool:
                            for fut in [pool.submit(one_mode, m) for m in modes]:
                                fut.result()
                    else:
                        for i, mode in enumerate(modes):
                            if signals.stop:
                                break
                            if i and args.cooldown:
                                time.sleep(args.cooldown)
                            if signals.stop:  # a signal during the cooldown
                                break
                            one_mode(mode)
                if signals.stop:
                    raise Interrupted()
            status, code = "completed", EXIT_OK
        except (Interrupted, StartupCancelled, KeyboardInterrupt):
            status, reason, code = "interrupted", "stopped by signal", EXIT_INTERRUPTED
        except FleetError as exc:
            reason = str(exc)
            fail(reason)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.debug("run failed", exc_info=True)
            fail(reason)
        finally:
            manifest.status, manifest.reason, manifest.ended_at = status, reason, utc_now()
            manifest.write(run_dir)

    checks = print_summary(console, run_dir, modes, manifest, args.max_errors)
    if code == EXIT_OK:
        if not record_gate(manifest, checks, console):
            code = EXIT_GATE
        manifest.write(run_dir)
    console.print(f"results: {run_dir}/")
    return code


