"""`loadtest run`: the main job. The trace (built from a scenario, or a file) and the fleet are
checked first; then the engine's pipeline (loadtest.engine.pipeline) brings the fleet up on Ray and
replays the trace against each mode in turn (or all at once), each into requests/mode=<mode>/;
then the run concluded (loadtest.engine.conclude: its analysis, tables and gate). The fleet is torn
down on every exit path; Ctrl-C or SIGTERM stops the replay gracefully (the in-flight requests get
a grace period, unsent ones are recorded as not_sent) and the manifest says `interrupted`; a
second Ctrl-C stops the replay at once.
"""

from __future__ import annotations

import time

from cluster import FleetError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.replaying import show_concluded, show_start
from loadtest.engine.conclude import conclude
from loadtest.engine.events import CannotObserve
from loadtest.engine.inputs import OutError, prepare_trace
from loadtest.engine.pipeline import open_run, replay
from loadtest.engine.replays import OneReplay
from loadtest.live.watch import observers
from loadtest.options.replaying import RunOptions
from scenarios import ScenarioError


def main(args: RunOptions) -> int:
    console = new_console()
    watch = observers(args, console)
    try:  # everything that can be wrong with the input, before anything starts: the files, then the servers
        t_build = time.monotonic()
        trace = prepare_trace(args.trace, args.gate.slo_gate, args.slo or ())
        run = open_run(args, trace, watch, trace.info["name"], trace.table.num_rows)
    except (ScenarioError, FleetError, OutError, CannotObserve) as exc:
        print_error(args.PROG, str(exc))
        return exits.BAD_INPUT
    show_start(console, run, f"[bold]{run.manifest.run_id}[/bold]: {trace.table.num_rows} requests of "
               f"{trace.info['name']} over {trace.table['offset_s'][-1].as_py():.1f} s (trace ready in "
               f"{time.monotonic() - t_build:.1f} s), modes {', '.join(run.choice.modes)}, fleet "
               f"{run.choice.info['name']}")
    replayed = replay(run, OneReplay(args.deadline), watch, args.cooldown)
    if not replayed.ran:   # /metrics could not listen after all: nothing ran
        return replayed.code
    concluded = conclude(run, replayed)
    show_concluded(console, args.PROG, run.run_dir, concluded, args.gate.slo_gate)
    if (run.run_dir / "report.md").exists():
        console.print(f"report: {run.run_dir / 'report.md'}")
    console.print(f"results: {run.run_dir}/")
    return concluded.code
