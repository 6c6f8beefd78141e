"""`loadtest ui`: replay the trace against one mode of a running fleet from Locust's web UI.

The fleet is one held by `loadtest cluster up` (its state file) or servers given as MODE=URL.
Pressing Start in the UI replays the trace open loop, exactly as `loadtest run` does (the same
LocustProcess, locustfile and records); Stop ends it (the rest is recorded as not_sent). The UI
stays up after the replay for its charts and the Speculation tab; Ctrl-C quits, writes the
manifest (with the client's verdict on itself) and prints the mode's summary and error gate.
"""

from __future__ import annotations

import argparse
import errno
import socket
import time

from cluster import FleetError
from cluster.scrape import Scraper
from common import exits
from common.exits import print_error
from common.times import utc_now
from loadtest.commands.console import new_console
from loadtest.commands.inputs import choose_fleet, new_run_dir, prepare_trace, replica_entry
from loadtest.commands.manifest import Manifest, ModeRun
from loadtest.commands.metrics_server import MetricsError, MetricsServer
from loadtest.commands.report import print_summary, record_gate
from loadtest.commands.run import serving
from loadtest.commands.signals import Signals
from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig
from loadtest.replay.process import LocustProcess
from scenarios import ScenarioError
from scenarios.trace import write_trace

PROGRESS_EVERY_S = 5.0


def _listen_problem(host: str, port: int) -> str | None:
    """Why the web UI could not listen on host:port (None if it can)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"{host}:{port} is in use; pick another --web-port"
            return f"cannot listen on {host}:{port} ({exc.strerror or exc}); check --web-host"
    return None


def main(args: argparse.Namespace) -> int:
    console = new_console()
    try:  # the files first, then the servers
        trace = prepare_trace(args)
        if args.mode and "," in args.mode:
            raise FleetError(f"--mode: one mode per web UI, got {args.mode!r} (`loadtest run` compares modes)")
        fleet = choose_fleet(args, args.mode, first_only=True)
        mode = fleet.modes[0]
        problem = _listen_problem(args.web_host, args.web_port)
        if problem:
            raise FleetError(problem)
        MetricsServer.from_args(args, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.out, args.run_id, f"{trace.info['name']}-ui")
    except (FleetError, ScenarioError, FileExistsError, MetricsError) as exc:
        print_error("loadtest ui", str(exc))
        return exits.BAD_INPUT
    run_id, state = run_dir.name, fleet.existing
    replicas = [r for r in state.replicas if r.mode == mode]
    manifest = Manifest(run_id=run_id, scenario=trace.info, modes=[mode], seed=trace.seed,
                        requests=trace.table.num_rows, fleet=fleet.info)
    manifest.mode_order = "web UI (started and stopped by a person)"
    mr = manifest.mode_runs.setdefault(mode, ModeRun())
    mr.replicas = [replica_entry(r) for r in replicas]
    manifest.write(run_dir)
    trace_path = run_dir / "trace.parquet"
    write_trace(trace.table, trace_path, trace.info["name"], trace.info["sha256"])
    about = (f"{trace.table.num_rows:,} requests of {trace.info['name']} against {mode} ({len(replicas)} replica(s) "
             f"of fleet {state.fleet}); run {run_id}")
    config = ReplayConfig(trace=trace_path, mode=mode, endpoints=tuple(r.url for r in replicas),
                          served_model=replicas[0].served_model, run_id=run_id, run_dir=run_dir,
                          max_inflight=args.max_inflight, timeout_s=args.timeout, api_key_env=args.api_key_env,
                          lateness_limit_ms=args.lateness_limit, web=(args.web_host, args.web_port), about=about)
    url = f"http://{args.web_host}:{args.web_port}"
    console.print(f"[bold]{run_id}[/bold]: {trace.table.num_rows} requests of {trace.info['name']} against {mode} "
                  f"({len(replicas)} replica(s) of fleet {state.fleet})")
    console.print(f"Locust web UI: [bold]{url}[/bold]  (press Start to replay; the Speculation tab shows TTFT, "
                  "TPOT, ITL and tokens per chunk; Ctrl-C here quits)", soft_wrap=True)
    last = [0.0]

    def show(msg: protocol.Line) -> None:
        if isinstance(msg, protocol.Progress) and msg.sent and time.monotonic() - last[0] > PROGRESS_EVERY_S:
            last[0] = time.monotonic()
            console.print(f"{mode}: {msg.done:,}/{msg.total:,} done, {msg.sent:,} sent")
        elif isinstance(msg, protocol.Finished):
            console.print(f"{mode}: replay {msg.reason}: {msg.recorded} records in {run_dir}/requests/; "
                          "the UI stays up for its charts: Ctrl-C to quit")

    server = MetricsServer.from_args(args, run_dir)
    process = LocustProcess(config, show, metrics=server.metrics)
    try:
        with serving(server, manifest, console), Signals() as signals, Scraper(run_dir) as scraper:
            signals.watch(process)
            scraper.watch(mode, [(r.label, r.url) for r in replicas])
            server.watch(mode, [(r.label, r.url) for r in replicas])
            mr.started_at = utc_now()
            try:
                process.start()
                mr.locust_pids = process.pids
                manifest.write(run_dir)
                end = process.wait()
            except BaseException:
                process.kill()
                raise
            scraper.unwatch(mode)
            server.unwatch(mode)
    except MetricsError as exc:   # it could listen a moment ago (checked before the run folder was made)
        print_error("loadtest ui", str(exc))
        return exits.BAD_INPUT
    mr.ended_at, mr.end, mr.records, mr.client = utc_now(), end.reason or "never started", end.recorded, end.client
    mr.server_metrics = scraper.problems.get(mode, "scraped")
    if mode in scraper.problems:
        console.print(f"[yellow]{mode}: no server-side metrics ({scraper.problems[mode]})[/yellow]", soft_wrap=True)
    completed = end.reason == "completed"
    manifest.status = "completed" if completed else "interrupted"
    manifest.reason = None if completed else "stopped from the web UI or by a signal before the replay finished"
    manifest.ended_at = utc_now()
    manifest.write(run_dir)
    if not (run_dir / "requests").exists():
        console.print("no request was sent (Start was never pressed)")
    checks = print_summary(console, run_dir, [mode], manifest, args.max_errors, args.slo_gate)
    gate_passed = record_gate(manifest, checks, console, args.slo_gate) if completed else True
    manifest.write(run_dir)
    if (run_dir / "report.md").exists():
        console.print(f"report: {run_dir / 'report.md'}")
    console.print(f"results: {run_dir}/")
    if end.returncode not in (0, None) and not signals.stop:
        print_error("loadtest ui", f"Locust exited with code {end.returncode}; see {run_dir}/logs/")
        return exits.INCOMPLETE
    if not gate_passed:
        return exits.GATE_FAILED
    return exits.OK if completed or end.reason is None else exits.INTERRUPTED
