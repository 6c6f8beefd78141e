"""`loadtest soak`: hours of a scenario's arrivals against one fleet, every mode at once, its trace
written a part at a time just ahead of the replay, its records in rolling Parquet parts; then the
SLOs over sliding windows and drift over the run (analysis.soak), each finding naming its window,
and an exit code a scheduler can act on. `--resume RUN` goes on with a killed soak in its folder.
"""

from __future__ import annotations

import pyarrow as pa
from rich.console import Console

from analysis.gate import judge_gate, soak_gate
from analysis.reader import ContractError
from analysis.run_analysis import analyse_run
from analysis.soak import analyse_soak
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from common.times import span_text, utc_now
from loadtest.commands.console import new_console, say_written
from loadtest.commands.replaying import observers
from loadtest.commands.views import show_gate, show_run
from loadtest.engine.events import CannotObserve, Observer
from loadtest.engine.inputs import OutError, Trace
from loadtest.engine.pipeline import Run, replay
from loadtest.engine.replays import OneReplay
from loadtest.engine.soak import LEAD_PARTS, PartWriter, Soak, new_soak, resumed_soak
from loadtest.options.replaying import SoakOptions, with_values
from scenarios import ScenarioError
from scenarios.trace import TRACE_SCHEMA


def main(args: SoakOptions) -> int:
    console = new_console()
    watch = observers(args, console)
    try:
        soak = resumed_soak(args, watch.check) if args.resume else new_soak(args, watch.check)
    except (ScenarioError, FleetError, OutError, CannotObserve, PermissionError) as exc:
        print_error("loadtest soak", str(exc))
        return exits.BAD_INPUT
    except (KeyError, OSError, pa.ArrowInvalid) as exc:   # a run folder that is not what a soak leaves
        print_error("loadtest soak", f"--resume: {args.resume}: cannot read it ({type(exc).__name__}: {exc})")
        return exits.BAD_INPUT
    with soak.lock:
        return _soak(console, soak, watch)


def _soak(console: Console, soak: Soak, watch: Observer) -> int:
    run_dir, manifest, stream, p = soak.run_dir, soak.manifest, soak.stream, soak.params
    # every mode at once
    args = with_values(soak.options, mode_order="parallel" if len(soak.choice.modes) > 1 else "turns")
    trace = Trace(TRACE_SCHEMA.empty_table(), manifest.scenario, manifest.seed)
    run = Run(args, trace, soak.choice, run_dir, manifest)
    run.record()
    at_s = max((e.get("resume_at_s", 0.0) for e in soak.extra.values()), default=0.0)   # the mode furthest on
    writer = PartWriter(stream, run_dir / "trace", at_s)
    writer.start()
    how = "resumed" if args.resume else "started"
    console.print(f"[bold]soak {manifest.run_id}[/bold] {how}: {stream.info.rows:,} requests of "
                  f"{stream.info.scenario} over {span_text(p['duration_s'])}, modes {', '.join(soak.choice.modes)}, "
                  f"SLO windows of {p['window_s']:g} s every {p['step_s']:g} s; trace parts of {stream.window_s:g} s "
                  f"written {LEAD_PARTS} ahead; records flushed every {p['flush_s']:g} s"
                  + (f"; going on after {soak.dropped:,} requests the stop left unsent and "
                     f"{soak.resumed_unknown:,} whose outcome it lost (recorded as error/worker_lost)"
                     if args.resume else ""), soft_wrap=True)
    try:
        replayed = replay(run, OneReplay(), watch, trace_file="trace", replay_extra=soak.extra)
    finally:
        writer.stop.set()
    if not replayed.ran:   # /metrics could not listen after all: nothing ran
        return replayed.code
    if writer.error is not None:
        print_error("loadtest soak", f"writing the trace's parts failed: {writer.error}")
    return verdict(console, soak, run, replayed.code)


def verdict(console: Console, soak: Soak, run: Run, code: int) -> int:
    """The usual tables and error gate, then the SLO windows and the drift checks; the exit code."""
    run_dir, manifest, p = soak.run_dir, soak.manifest, soak.params
    try:
        analysed = analyse_run(run_dir, soak.choice.modes, manifest, soak.options.gate.max_errors)
        show_run(console, analysed)
        soaked = analyse_soak(run_dir, manifest.run_id, manifest.status, p, soak.targets)
    except files.NotWritten:   # a full disk: said in one line by the command (exit 3)
        raise
    except (ContractError, OSError, pa.ArrowInvalid) as exc:   # nothing recorded (it failed first), or unreadable
        print_error("loadtest soak", f"no verdict: the records of {run_dir} cannot be read ({exc})")
        return code if code != exits.OK else exits.INCOMPLETE
    for f in soaked.findings:
        console.print(f"[red bold]{f.check}[/red bold]: {f.message}", soft_wrap=True, highlight=False)
    if not soaked.findings:
        console.print(f"soak: no SLO window missed{'' if soak.targets else ' (no targets set)'} and no drift found "
                      f"over {soaked.windows.num_rows // max(1, len(soak.choice.modes))} windows", soft_wrap=True)
    errors = judge_gate(analysed.checks, analysed.slo_entries)
    show_gate(console, errors.failed)
    gate = soak_gate(errors, [f"{f.check}: {f.message}" for f in soaked.findings])
    passed = gate.state == "passed"
    p["findings"], p["ended_at"] = len(soaked.findings), utc_now()
    run.record(soak=p, gate=gate.state, checks=[c.as_dict() for c in analysed.checks], **analysed.manifest_fields())
    say_written(console, "soak", run_dir / "soak.md", ("windows", run_dir / "windows.parquet"),
                ("findings", run_dir / "findings.json"))
    return exits.GATE_FAILED if code == exits.OK and not passed else code
