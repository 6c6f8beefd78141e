"""`loadtest soak`: hours of a scenario's arrivals against one fleet, every mode at once, its trace
written a part at a time just ahead of the replay, its records in rolling Parquet parts; then the
SLOs over sliding windows and drift over the run (analysis.soak), each finding naming its window,
and an exit code a scheduler can act on. `--resume RUN` goes on with a killed soak in its folder.
"""

from __future__ import annotations

import pyarrow as pa
from rich.console import Console

from cluster import FleetError
from common import exits
from common.exits import print_error
from common.times import span_text
from loadtest.commands.console import new_console, say_written
from loadtest.commands.views import show_gate, show_run
from loadtest.engine.events import CannotObserve
from loadtest.engine.inputs import OutError
from loadtest.engine.soak import LEAD_PARTS, Soak, new_soak, resumed_soak
from loadtest.engine.soak_run import SoakConcluded, conclude_soak, replay_soak, soak_run
from loadtest.live.watch import observers
from loadtest.options.replaying import SoakOptions
from scenarios import ScenarioError


def main(args: SoakOptions) -> int:
    console = new_console()
    watch = observers(args, console)
    try:
        soak = resumed_soak(args, watch.check) if args.resume else new_soak(args, watch.check)
    except (ScenarioError, FleetError, OutError, CannotObserve, PermissionError) as exc:
        print_error(args.PROG, str(exc))
        return exits.BAD_INPUT
    except (KeyError, OSError, pa.ArrowInvalid) as exc:   # a run folder that is not what a soak leaves
        print_error(args.PROG, f"--resume: {args.resume}: cannot read it ({type(exc).__name__}: {exc})")
        return exits.BAD_INPUT
    with soak.lock:
        run = soak_run(soak)
        show_started(console, soak)
        replayed, writer_failed = replay_soak(run, soak, watch)
        if not replayed.ran:   # /metrics could not listen after all: nothing ran
            return replayed.code
        if writer_failed is not None:
            print_error(args.PROG, f"writing the trace's parts failed: {writer_failed}")
        concluded = conclude_soak(run, soak, replayed.code)
        show_soak(console, soak, concluded)
        return concluded.code


def show_started(console: Console, soak: Soak) -> None:
    p, stream = soak.params, soak.stream
    console.print(f"[bold]soak {soak.manifest.run_id}[/bold] {'resumed' if soak.options.resume else 'started'}: "
                  f"{stream.info.rows:,} requests of {stream.info.scenario} over {span_text(p['duration_s'])}, modes "
                  f"{', '.join(soak.choice.modes)}, SLO windows of {p['window_s']:g} s every {p['step_s']:g} s; "
                  f"trace parts of {stream.window_s:g} s written {LEAD_PARTS} ahead; records flushed every "
                  f"{p['flush_s']:g} s"
                  + (f"; going on after {soak.dropped:,} requests the stop left unsent and "
                     f"{soak.resumed_unknown:,} whose outcome it lost (recorded as error/worker_lost)"
                     if soak.options.resume else ""), soft_wrap=True)


def show_soak(console: Console, soak: Soak, concluded: SoakConcluded) -> None:
    """The usual tables and error gate, then each finding of the SLO windows and drift checks."""
    if concluded.unreadable is not None:
        print_error(soak.options.PROG, f"no verdict: {concluded.unreadable}")
        return
    assert concluded.analysed is not None and concluded.soaked is not None and concluded.errors is not None
    show_run(console, concluded.analysed)
    soaked = concluded.soaked
    for f in soaked.findings:
        console.print(f"[red bold]{f.check}[/red bold]: {f.message}", soft_wrap=True, highlight=False)
    if not soaked.findings:
        console.print(f"soak: no SLO window missed{'' if soak.targets else ' (no targets set)'} and no drift found "
                      f"over {soaked.windows.num_rows // max(1, len(soak.choice.modes))} windows", soft_wrap=True)
    show_gate(console, concluded.errors.failed)
    say_written(console, "soak", soak.run_dir / "soak.md", ("windows", soak.run_dir / "windows.parquet"),
                ("findings", soak.run_dir / "findings.json"))
