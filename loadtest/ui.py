"""`loadtest ui`: replay the trace against one mode of a running fleet from Locust's web UI.

The fleet is one held by `loadtest cluster up` (its state file) or servers given as MODE=URL.
Pressing Start in the UI replays the trace open loop, exactly as `loadtest run` does (same
locustfile, same records); Stop ends it (the rest is recorded as not_sent). The UI stays up after
the replay for its charts and the Speculation tab; Ctrl-C quits, writes the manifest and prints
the mode's summary.
"""

from __future__ import annotations

import argparse
import errno
import socket
import subprocess
import sys
import time

from rich.console import Console

from cluster import FleetError
from cluster.process import die_with_parent
from cluster.scrape import Scraper
from cluster.state import check_health, load_endpoints
from common.exits import print_error
from loadtest import protocol
from loadtest.locust_process import start_reader
from loadtest.manifest import Manifest, ModeRun, utc_now
from loadtest.run import (
    EXIT_GATE,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    _prepare_trace,
    _Signals,
    endpoints_fleet_info,
    locust_argv,
    new_run_dir,
    print_summary,
    record_gate,
    replica_entry,
)
from scenarios import ScenarioError
from scenarios.trace import write_trace


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
    console = Console(width=None if sys.stdout.isatty() else 160)

    def fail(message: str) -> int:
        print_error("loadtest ui", message)
        return EXIT_USAGE

    try:  # the files first, then the servers
        trace, info, seed = _prepare_trace(args)
        state, from_file = load_endpoints(args.endpoints, args.api_key_env)
        mode = args.mode or state.modes[0]
        if mode not in state.modes:
            raise FleetError(f"--mode: the fleet has no mode {mode!r} (it has: {', '.join(state.modes)})")
        check_health([r for r in state.replicas if r.mode == mode])
    except (FleetError, ScenarioError) as exc:
        return fail(str(exc))
    problem = _listen_problem(args.web_host, args.web_port)
    if problem:
        return fail(problem)
    try:
        run_dir = new_run_dir(args.out, args.run_id, f"{info['name']}-ui")
    except FileExistsError as exc:
        return fail(str(exc))
    run_id = run_dir.name
    replicas = [r for r in state.replicas if r.mode == mode]
    manifest = Manifest(run_id=run_id, scenario=info, modes=[mode], seed=seed, requests=trace.num_rows,
                        fleet=endpoints_fleet_info(state, args.endpoints, from_file, [mode]))
    manifest.mode_order = "web UI (started and stopped by a person)"
    mr = manifest.mode_runs.setdefault(mode, ModeRun())
    mr.replicas = [replica_entry(r) for r in replicas]
    manifest.write(run_dir)
    trace_path = run_dir / "trace.parquet"
    write_trace(trace, trace_path, info["name"], info["sha256"])
    argv = locust_argv(trace_path, mode, [r.url for r in replicas], replicas[0].served_model, run_id, run_dir,
                       args.max_inflight, args.timeout, api_key_env=args.api_key_env,
                       lateness_limit=args.lateness_limit, web=(args.web_host, args.web_port),
                       about=f"{trace.num_rows:,} requests of {info['name']} against {mode} "
                       f"({len(replicas)} replica(s) of fleet {state.fleet}); run {run_id}")
    url = f"http://{args.web_host}:{args.web_port}"
    console.print(f"[bold]{run_id}[/bold]: {trace.num_rows} requests of {info['name']} against {mode} "
                  f"({len(replicas)} replica(s) of fleet {state.fleet})")
    console.print(f"Locust web UI: [bold]{url}[/bold]  (press Start to replay; the Speculation tab shows TTFT, "
                  "TPOT, ITL and tokens per chunk; Ctrl-C here quits)", soft_wrap=True)
    status = {"end": None, "recorded": 0}
    with _Signals() as signals, open(run_dir / "logs" / f"locust-{mode}.stdout.txt", "w") as stats_out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True, preexec_fn=die_with_parent)
        signals.children.append(proc)
        mr.locust_pids = [proc.pid]
        manifest.write(run_dir)

        last = [0.0]

        def on_message(msg: protocol.Message) -> None:
            if isinstance(msg, protocol.Progress):
                if time.monotonic() - last[0] > 5 and msg.sent:
                    last[0] = time.monotonic()
                    console.print(f"{mode}: {msg.done:,}/{msg.total:,} done, {msg.sent:,} sent")
            elif isinstance(msg, protocol.ClientVerdict):
                mr.client = msg.verdict
            elif isinstance(msg, protocol.Finished):
                status["end"], status["recorded"] = msg.reason, msg.recorded
                console.print(f"{mode}: replay {msg.reason}: {msg.recorded} records in {run_dir}/requests/; "
                              "the UI stays up for its charts: Ctrl-C to quit")

        reader = start_reader(proc, stats_out, on_message)
        with Scraper(run_dir) as scraper:
            scraper.watch(mode, [(r.label, r.url) for r in replicas])
            mr.started_at = utc_now()
            while proc.poll() is None:
                time.sleep(0.2)
            scraper.unwatch(mode)
        mr.server_metrics = scraper.problems.get(mode, "scraped")
        if mode in scraper.problems:
            console.print(f"[yellow]{mode}: no server-side metrics ({scraper.problems[mode]})[/yellow]", soft_wrap=True)
        reader.join(5)
        signals.children.remove(proc)
    mr.ended_at, mr.end, mr.records = utc_now(), status["end"] or "never started", status["recorded"]
    completed = status["end"] == "completed"
    manifest.status = "completed" if completed else "interrupted"
    manifest.reason = None if completed else "stopped from the web UI or by a signal before the replay finished"
    manifest.ended_at = utc_now()
    manifest.write(run_dir)
    if not (run_dir / "requests").exists():
        console.print("no request was sent (Start was never pressed)")
    checks = print_summary(console, run_dir, [mode], manifest, args.max_errors)
    gate_passed = record_gate(manifest, checks, console) if completed else True
    manifest.write(run_dir)
    console.print(f"results: {run_dir}/")
    if proc.returncode not in (0, None) and not signals.stop:
        print_error("loadtest ui", f"Locust exited with code {proc.returncode}; see {run_dir}/logs/")
        return EXIT_INCOMPLETE
    if not gate_passed:
        return EXIT_GATE
    return EXIT_OK if completed or status["end"] is None else EXIT_INTERRUPTED

