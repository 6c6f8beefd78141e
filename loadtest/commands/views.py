"""What the commands print of what the engine and the analysis found: a run's tables (a view of
the long summary, analysis.run_analysis), the warnings a reader must see, each mode's errors, why
a gate failed, a comparison, runs of one trace together, and a calibration's fit."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from analysis.compare import PER_REQUEST, Change
from analysis.cost import measured, xid_findings
from analysis.gate import CompareGate, GateVerdict
from analysis.repeats import Repeats
from analysis.run_analysis import RunAnalysis
from analysis.slo import MISSED
from analysis.stats import MIN_BOOTSTRAP_PAIRS
from analysis.summary import too_few_rule
from analysis.table import cost_table, mode_table, repeats_table, slo_table, tenant_table, tokens_table
from cluster.sim.fitting import FITTED_HARDWARE


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
    if found.summary is not None:
        console.print(mode_table(found.summary, found.present, title=f"{found.run_id} ({found.status})",
                                 skipped=found.skipped))
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
    checked = tokens_table(found.summary, found.counted_by) if found.summary is not None else None
    if checked is not None:
        console.print(checked)
    if found.summary is not None and measured(found.summary):
        console.print(cost_table(found.summary))
        for line in xid_findings(found.summary):
            console.print(f"[red]{line}[/red]", soft_wrap=True)
    for note in [*(n for n in (found.steady_note, found.too_few_note) if n), *found.limited, *found.content_notes]:
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
    verdict = GateVerdict(failed, unjudged or [])
    for reason in failed:
        console.print(f"[red bold]gate failed: {reason}[/red bold]", soft_wrap=True)
    for reason in [] if failed else verdict.unjudged:
        console.print(f"[yellow bold]gate not judged: {reason}[/yellow bold]", soft_wrap=True)
    return verdict.code


def show_compare(console: Console, title: str, changes: list[Change], gate: CompareGate, limit: float,
                 said: list[str]) -> None:
    """A comparison: each figure's change with its interval and verdict, what a reader must know
    of the two runs (`said`: the requests compared, then each run's caveats), and the gate."""
    table = Table("mode", "tenant", "metric", "base ms", "new ms", "new / base (95% CI)", "verdict",
                  title=title, header_style="bold")
    colour = {"regressed": "red bold", "better": "green", "worse (within threshold)": "yellow"}
    for c in changes:
        verdict = c.verdict(limit)
        r = c.ratio
        table.add_row(c.mode, c.tenant, c.metric, f"{c.base:,.1f}", f"{c.new:,.1f}",
                      f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]",
                      f"[{colour[verdict]}]{verdict}[/{colour[verdict]}]" if verdict in colour
                      else f"[dim]{verdict}[/dim]" if c.too_few else verdict)
    console.print(table)
    console.print(said[0], soft_wrap=True)
    for caveat in said[1:]:
        console.print(f"[yellow]{caveat}[/yellow]", soft_wrap=True)
    for c in gate.regressed:
        what = f"the typical request's {c.metric}" if c.per_request else c.metric
        console.print(f"[red bold]gate failed: {c.mode}/{c.tenant} {what} regressed {c.ratio.value - 1:+.1%} "
                      f"(95% CI {c.ratio.low - 1:+.1%} to {c.ratio.high - 1:+.1%}; --max-regression "
                      f"{limit:.0%})[/red bold]", soft_wrap=True)
    unjudged = gate.figures - gate.judged
    if unjudged:
        console.print(f"[yellow]{unjudged} of {gate.figures} figures had too few requests in both runs to judge "
                      f"(neither passed nor failed): {too_few_rule()}; the typical request's change "
                      f"(*_{PER_REQUEST}) needs {MIN_BOOTSTRAP_PAIRS} pairs; replay more requests, or compare a "
                      "lower percentile (--metric e2e_p90)[/yellow]", soft_wrap=True)
    if gate.verdict == "not judged":
        console.print(f"[yellow bold]gate not judged: none of the {gate.figures} figures had the pairs it needs, "
                      "so nothing was passed or failed[/yellow bold]", soft_wrap=True)
    elif gate.verdict == "passed":
        console.print(f"no metric regressed beyond {limit:.0%} with significance "
                      f"({gate.judged} of {gate.figures} judged)")


def show_calibration(console: Console, prior, hw_fit, acc_report) -> None:
    """A calibration's fit: each hardware constant before and after, and acceptance per method and domain."""
    # the fit's one sentence is never broken by a narrow terminal (a log, CI): a reader greps it
    console.print(f"Hardware: fitted to {hw_fit.requests} baseline requests "
                  f"(mean step time, RMS residual {hw_fit.residual_pct:.1f}%)", soft_wrap=True)
    t = Table()
    for col in ("constant", "prior", "fitted", "ratio"):
        t.add_column(col, justify="left" if col == "constant" else "right")
    for name in FITTED_HARDWARE:
        before, after = getattr(prior, name), hw_fit.values[name]
        held = name in hw_fit.held
        t.add_row(name, f"{before:.4g}", "held" if held else f"{after:.4g}",
                  "-" if held or not math.isfinite(after) else f"{after / before:.3f}")
    console.print(t)
    if not acc_report:
        return
    console.print("Acceptance per method and domain (tokens per decode step: measured, and the fitted profile's)",
                  soft_wrap=True)
    a = Table()
    for col in ("mode", "domain", "requests", "per position", "spread", "match", "measured", "profile", "diff"):
        a.add_column(col, justify="left" if col in ("mode", "domain", "per position") else "right")
    for mode, domain, fit in acc_report:
        if isinstance(fit, str):
            a.add_row(mode, domain, "-", fit, "", "", "", "", "")
            continue
        acc = fit.acceptance
        diff = (fit.modelled_tokens_per_step - fit.tokens_per_step) / fit.tokens_per_step
        a.add_row(mode, domain, str(fit.requests), " ".join(f"{p:.2f}" for p in acc.positions), f"{acc.spread:.2f}",
                  f"{acc.match:.2f}", f"{fit.tokens_per_step:.2f}", f"{fit.modelled_tokens_per_step:.2f}",
                  f"{diff:+.1%}")
    console.print(a)
