"""`loadtest capacity`: per mode, the highest offered rate at which every tenant meets its SLOs,
measured on one fleet brought up once (loadtest.session.capacity drives the probes); then every
probe in capacity.parquet and the answer in report.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from analysis.capacity import write_probes
from analysis.slo import has_targets
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console, say_written, show_markdown
from loadtest.session.capacity import CapacityProbes, ModeCapacity, report, search_range, with_targets
from loadtest.session.engine import Session
from loadtest.session.guard import served
from loadtest.session.inputs import OutError, choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.session.levels import native_rate
from loadtest.session.metrics_server import MetricsError, MetricsServer
from loadtest.session.options import CapacityOptions
from scenarios import ScenarioError


def main(args: CapacityOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        if args.start_rate and args.max_rate and args.start_rate > args.max_rate:
            raise ScenarioError(f"--start-rate {args.start_rate:g} is above --max-rate {args.max_rate:g}")
        # one trace long enough for the fastest probe: --probe-duration s at the highest rate
        native = native_rate(prepare_trace(args.trace).table)
        top = search_range(args, native)[1]
        if not math.isfinite(top * args.probe_duration):
            raise ScenarioError(f"the fastest probe, {top:g} requests/s for --probe-duration "
                                f"{args.probe_duration:g} s, "
                                "is more requests than any trace holds: lower --max-rate or --start-rate")
        rows = math.ceil(top * args.probe_duration) + 1
        try:
            trace = with_targets(prepare_trace(replace(args.trace, requests=rows)), args.slo.slo)
        except ScenarioError as exc:   # its size is the search's, not a --requests the user gave
            raise ScenarioError(f"the fastest probe ({top:g} requests/s for --probe-duration "
                                f"{args.probe_duration:g} s): {exc}") from None
        if not has_targets(trace.table):
            raise ScenarioError(f"the scenario {trace.info['name']} sets no SLO targets to hold: give its tenants "
                                "an `slo`, or --slo ttft_p99_ms=...,tpot_p99_ms=...")
        choice = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"capacity-{trace.info['name']}")
    except (ScenarioError, FleetError, OutError, MetricsError) as exc:
        print_error("loadtest capacity", str(exc))
        return exits.BAD_INPUT
    manifest = new_manifest(run_dir, trace, choice)
    manifest.write(run_dir)
    console.print(f"[bold]capacity {manifest.run_id}[/bold]: {args.probe_duration:g} s of {trace.info['name']}'s "
                  f"arrivals a probe, modes {', '.join(choice.modes)}, fleet {choice.info['name']}",
                  soft_wrap=True)
    if manifest.simulated:
        console.print(f"[bold magenta]{manifest.simulated}[/bold magenta]", soft_wrap=True)
    results = {m: ModeCapacity() for m in choice.modes}
    driver = CapacityProbes(args, results)
    code = served(args, console, manifest, run_dir, lambda signals, server: Session(
        args, console, trace, choice, run_dir, manifest, signals, server, driver, args.cooldown).replay_all())
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    probes = [p for r in results.values() for p in r.probes]
    write_probes(probes, run_dir / "capacity.parquet")
    gpus = choice.spec.gpus_per_mode if choice.spec is not None else 1
    text, decision = report(results, gpus, args.precision, args.repeats, args.probe_duration, manifest.simulated)
    manifest.decision = decision.record()
    manifest.write(run_dir)
    files.write_text(run_dir / "report.md", text)
    show_markdown(console, text)
    say_written(console, "capacity", run_dir / "report.md", ("every probe", run_dir / "capacity.parquet"),
                ("run folders under", run_dir / "probes"), took_s=time.monotonic() - started)
    return code
