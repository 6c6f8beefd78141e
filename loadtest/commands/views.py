"""What the replaying commands print once a run is analysed: its tables (a view of the long
summary, analysis.run_analysis), the warnings a reader must see, each mode's errors, and why a
gate failed."""

from __future__ import annotations

from rich.console import Console

from analysis.repeats import Repeats
from analysis.run_analysis import RunAnalysis
from analysis.slo import MISSED
from analysis.table import mode_table, repeats_table, slo_table, tenant_table
from common import exits


def show_run(console: Console, found: RunAnalysis, slo_details: bool = False) -> None:
    """The run's tables and notes (`slo_details`: each SLO a tenant missed, as --slo-gate fails on)."""
    if found.stopped_note:
        console.print(f"[yellow]{found.stopped_note}[/yellow]", soft_wrap=True)
    if found.empty:
        return
    if found.simulated:   # before the answer: where its numbers come from
        console.print(f"[bold magenta]{found.simulated}[/bold magenta]", soft_wrap=True)
    if found.decision is not None:   # the answer first
        colour = {"deploy": "green", "none_better": "yellow"}.get(found.decision.kind, "yellow")
        console.print(f"[bold {colour}]decision: {found.decision.text}[/bold {colour}]", soft_wrap=True)
    console.print(mode_table(found.summaries, title=f"{found.run_id} ({found.status})", skipped=found.skipped))
    for mode, why in found.skipped.items():
        console.print(f"[yellow]{mode}: skipped (--skip-unavailable): {why}[/yellow]", soft_wrap=True)
    if len(found.by_tenant) > 1:
        console.print(tenant_table(found.by_tenant, found.modes))
    if found.slos is not None:
        console.print(slo_table(found.slos, found.modes))
        for a in found.slos if slo_details else []:   # why the gate fails (report.md has them all)
            if a.verdict == MISSED:
                console.print(f"[red]{a.mode}: {a.tenant} missed its SLO: {'; '.join(a.missed())}[/red]")
    else:
        console.print("no SLOs in this trace (its tenants set none): no goodput or SLO attainment to report")
    for note in [*(n for n in (found.steady_note, found.too_few_note) if n), *found.limited]:
        console.print(f"[yellow]{note}[/yellow]", soft_wrap=True)
    for c in found.checks:
        if c.kinds:
            colour = "green" if c.passed else "red"
            console.print(f"[{colour}]{c.mode}: {c.failed:,} of {c.sent:,} sent failed: {c.kinds_text()}[/{colour}]")


def show_repeats(console: Console, repeats: Repeats) -> None:
    """Several runs as one experiment: each mode's speedup verdict first, then the spread of every
    figure between the runs; or the one line saying why there is none (analysis.repeats)."""
    if not repeats.same_trace:
        console.print(f"[yellow]no between-run spread is computed: {repeats.why}[/yellow]", soft_wrap=True)
        return
    for s in repeats.speedups:
        colour = "yellow bold" if s.disagree else "bold"
        console.print(f"[{colour}]between runs: {s.verdict()}[/{colour}]", soft_wrap=True)
    for run in repeats.unfinished:
        console.print(f"[yellow]{run} did not complete: its figures are of fewer requests[/yellow]", soft_wrap=True)
    console.print(repeats_table(repeats))


def show_gate(console: Console, failed: list[str], unjudged: list[str] | None = None) -> int:
    """Why the gate failed, or what it could not judge, a line each; its exit code."""
    for reason in failed:
        console.print(f"[red bold]gate failed: {reason}[/red bold]", soft_wrap=True)
    if failed:
        return exits.GATE_FAILED
    for reason in unjudged or []:
        console.print(f"[yellow bold]gate not judged: {reason}[/yellow bold]", soft_wrap=True)
    return exits.INCOMPLETE if unjudged else exits.OK
