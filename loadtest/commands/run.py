"""`loadtest run`: the main job. The trace (built from a scenario, or a file) and the fleet are
checked first; then one session (loadtest.session.engine) brings the fleet up on Ray and replays
the trace against each mode in turn (or all at once), each into requests/mode=<mode>/; then the
run's analysis (analysis.run_analysis), its tables, and the gate. The fleet is torn down on every
exit path; Ctrl-C or SIGTERM stops the replay gracefully (the in-flight requests get a grace
period, unsent ones are recorded as not_sent) and the manifest says `interrupted`; a second
Ctrl-C stops the replay at once.
"""

from __future__ import annotations

import time

from analysis.gate import judge_gate
from analysis.run_analysis import analyse_run
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console, say_summaries_not_written
from loadtest.commands.views import show_gate, show_run
from loadtest.session.engine import OneReplay, Session
from loadtest.session.guard import served
from loadtest.session.inputs import OutError, choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.session.metrics_server import MetricsError, MetricsServer
from loadtest.session.options import RunOptions
from scenarios import ScenarioError
from scenarios.trace import write_trace


def main(args: RunOptions) -> int:
    console = new_console()
    try:  # everything that can be wrong with the input, before anything starts: the files, then the servers
        t_build = time.monotonic()
        trace = prepare_trace(args.trace, args.gate.slo_gate)
        fleet = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, trace.info["name"],
                              trace.table.num_rows * len(fleet.modes))
    except (ScenarioError, FleetError, OutError, MetricsError) as exc:
        print_error("loadtest run", str(exc))
        return exits.BAD_INPUT
    manifest = new_manifest(run_dir, trace, fleet)
    manifest.write(run_dir)
    trace_path = run_dir / "trace.parquet"
    write_trace(trace.table, trace_path, trace.info["name"], trace.info["sha256"])
    console.print(f"[bold]{manifest.run_id}[/bold]: {trace.table.num_rows} requests of {trace.info['name']} over "
                  f"{trace.table['offset_s'][-1].as_py():.1f} s (trace ready in {time.monotonic() - t_build:.1f} s), "
                  f"modes {', '.join(fleet.modes)}, fleet {fleet.info['name']}")
    if manifest.simulated:
        console.print(f"[bold magenta]{manifest.simulated}[/bold magenta]", soft_wrap=True)

    driver = OneReplay(args.deadline)
    code = served(args, console, manifest, run_dir, lambda signals, server: Session(
        args, console, trace, fleet, run_dir, manifest, signals, server, driver, args.cooldown).replay_all())
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    checks = []
    try:
        found = analyse_run(run_dir, fleet.modes, manifest, args.gate.max_errors)
        show_run(console, found, slo_details=args.gate.slo_gate)
        checks = found.checks
    except files.NotWritten as exc:  # a full disk: the records stay as they are, each summary whole or not at all
        say_summaries_not_written("loadtest run", run_dir, exc)
        code = exits.INCOMPLETE if code == exits.OK else code
    if code == exits.OK:
        gate = judge_gate(manifest, checks, args.gate.slo_gate)
        code = show_gate(console, gate.failed, gate.unjudged)
        manifest.write(run_dir)
    code = exits.INCOMPLETE if manifest.unwritten and code in (exits.OK, exits.GATE_FAILED) else code  # said once
    if (run_dir / "report.md").exists():
        console.print(f"report: {run_dir / 'report.md'}")
    console.print(f"results: {run_dir}/")
    return code
