"""A replayed run concluded (run, ui): its analysis (analysis.run_analysis: the summary, the report,
each tenant's SLOs and the decision), its gate (the errors, and with --slo-gate the SLOs: passed,
failed or not judged) and the exit code, all of it kept in the manifest. Typed, for the views to
show; nothing printed here."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.gate import GateVerdict, judge_gate
from analysis.run_analysis import RunAnalysis, analyse_run
from common import exits, files
from loadtest.engine.pipeline import Replayed, Run


@dataclass(frozen=True)
class Concluded:
    code: int                                   # the command's exit code
    found: RunAnalysis | None                   # None: a full disk stopped the summaries (`not_written`)
    gate: GateVerdict | None                    # None: the replays did not complete, or nothing was analysed
    not_written: files.NotWritten | None = None


def conclude(run: Run, replayed: Replayed) -> Concluded:
    """`run` analysed and gated after its replays ended as `replayed` says; the manifest written."""
    code, found, gate, not_written = replayed.code, None, None, None
    options = run.args.gate
    try:
        found = analyse_run(run.run_dir, run.choice.modes, run.manifest, options.max_errors)
    except files.NotWritten as exc:  # a full disk: the records stay as they are, each summary whole or not at all
        not_written = exc
        code = exits.INCOMPLETE if code == exits.OK else code
    fields = found.manifest_fields() if found is not None else {}
    if code == exits.OK and found is not None:
        gate = judge_gate(found.checks, found.slo_entries, options.slo_gate)
        fields |= {"checks": [c.as_dict() for c in found.checks], "gate": gate.state}
        code = gate.code
    run.record(**fields)
    if run.manifest.unwritten and code in (exits.OK, exits.GATE_FAILED):   # said once, by the manifest's writer
        code = exits.INCOMPLETE
    return Concluded(code, found, gate, not_written)
