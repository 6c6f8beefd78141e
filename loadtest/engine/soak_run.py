"""A soak replayed and concluded, once its start (or resume) is checked (soak.py): every mode at
once through the one pipeline, its trace's parts written just ahead of the replay by a
`PartWriter`; then the run's analysis and error gate, the SLOs over sliding windows and drift over
the run (analysis.soak), and the soak's gate (analysis.gate.soak_gate), all kept in the manifest.
Typed, for the command's views; nothing printed here."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from analysis.gate import GateVerdict, judge_gate, soak_gate
from analysis.reader import ContractError
from analysis.run_analysis import RunAnalysis, analyse_run
from analysis.soak import SoakAnalysis, analyse_soak
from common import exits, files
from common.times import utc_now
from loadtest.engine.events import Observer
from loadtest.engine.inputs import Trace
from loadtest.engine.pipeline import Replayed, Run, replay
from loadtest.engine.replays import OneReplay
from loadtest.engine.soak import PartWriter, Soak
from loadtest.options.replaying import with_values
from scenarios.trace import TRACE_SCHEMA


def soak_run(soak: Soak) -> Run:
    """The soak as a run of the pipeline: every mode at once, its manifest written."""
    args = with_values(soak.options, mode_order="parallel" if len(soak.choice.modes) > 1 else "turns")
    trace = Trace(TRACE_SCHEMA.empty_table(), soak.manifest.scenario, soak.manifest.seed)
    run = Run(args, trace, soak.choice, soak.run_dir, soak.manifest)
    run.record()
    return run


def replay_soak(run: Run, soak: Soak, observer: Observer) -> tuple[Replayed, str | None]:
    """The soak replayed over the trace's parts as they are written; how it ended, and why the
    parts' writer failed (None when it did not)."""
    at_s = max((e.get("resume_at_s", 0.0) for e in soak.extra.values()), default=0.0)   # the mode furthest on
    writer = PartWriter(soak.stream, run.run_dir / "trace", at_s)
    writer.start()
    try:
        replayed = replay(run, OneReplay(), observer, trace_file="trace", replay_extra=soak.extra)
    finally:
        writer.stop.set()
    return replayed, None if writer.error is None else str(writer.error)


@dataclass(frozen=True)
class SoakConcluded:
    code: int
    analysed: RunAnalysis | None = None     # None: no verdict (`unreadable` says why)
    soaked: SoakAnalysis | None = None
    errors: GateVerdict | None = None       # the run's error gate
    gate: GateVerdict | None = None         # the soak's: the errors and every finding
    unreadable: str | None = None


def conclude_soak(run: Run, soak: Soak, code: int) -> SoakConcluded:
    """The usual analysis and error gate, then the SLO windows and the drift checks, the soak's
    gate and its exit code; files.NotWritten goes up (a full disk: the command says it, exit 3)."""
    params = soak.params
    try:
        analysed = analyse_run(run.run_dir, soak.choice.modes, run.manifest, soak.options.gate.max_errors)
        soaked = analyse_soak(run.run_dir, run.manifest.run_id, run.manifest.status, params, soak.targets)
    except files.NotWritten:
        raise
    except (ContractError, OSError, pa.ArrowInvalid) as exc:   # nothing recorded (it failed first), or unreadable
        return SoakConcluded(code if code != exits.OK else exits.INCOMPLETE,
                             unreadable=f"the records of {run.run_dir} cannot be read ({exc})")
    errors = judge_gate(analysed.checks, analysed.slo_entries)
    gate = soak_gate(errors, [f"{f.check}: {f.message}" for f in soaked.findings])
    params["findings"], params["ended_at"] = len(soaked.findings), utc_now()
    run.record(soak=params, gate=gate.state, checks=[c.as_dict() for c in analysed.checks],
               **analysed.manifest_fields())
    code = exits.GATE_FAILED if code == exits.OK and gate.state != "passed" else code
    return SoakConcluded(code, analysed, soaked, errors, gate)
