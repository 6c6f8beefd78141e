"""What a replaying command shows: one progress bar per mode while it runs, then the tables, the
warnings and the error gate from the run's records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from analysis.gate import ErrorCheck, error_checks
from analysis.html import report_html
from analysis.long_summary import LIST_COLUMNS, SCALAR_COLUMNS, long_summary
from analysis.markdown import report_markdown
from analysis.reader import read_requests
from analysis.server import load_server_metrics, spec_decode_stats
from analysis.slo import attainment, has_slos, with_slos
from analysis.summary import mode_summaries, tenant_speedups, write_summary, write_tenant_speedups
from analysis.table import mode_table, slo_table, steady_state_note, tenant_table
from common import files
from loadtest.manifest import Manifest
from loadtest.replay import protocol


def mode_progress(console: Console) -> Progress:
    """One bar per mode: what was done, sent and never sent, and the mode's own replay time."""
    return Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console)


def progress_counts(p: protocol.Progress) -> str:
    """`80/300 done · 88 sent · 212 not sent` (the bar is the done share)."""
    text = f"{p.done:,}/{p.total:,} done · {p.sent:,} sent"
    return text + (f" · {p.not_sent:,} not sent" if p.not_sent else "")


def live_text(live: protocol.Live) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    return (f"TTFT p50 {f(live.ttft_p50)} p99 {f(live.ttft_p99)}  TPOT p50 {f(live.tpot_p50)}  "
            f"late p99 {f(live.late_p99)} ms")


def print_summary(console: Console, run_dir: Path, modes: list[str], manifest: Manifest,
                  max_error_share: float | None = None, slo_details: bool = False) -> list[ErrorCheck]:
    """Summarise the run's records (summary.parquet in long format, modes.parquet as printed,
    tenant_speedups.parquet, report.md), print the tables and the client's warnings, and return
    the error gate of each mode (when `max_error_share`)."""
    # every column but the chunk lists; those are read a mode at a time (the long summary's chunks_of)
    table = read_requests(run_dir, columns=SCALAR_COLUMNS) if (run_dir / "requests").exists() else None
    if table is None or not table.num_rows:
        return []
    table = with_slos(table, run_dir) or table
    present = [m for m in modes if m in set(table["mode"].to_pylist())]
    metrics = load_server_metrics(run_dir)
    server = {m: spec_decode_stats(metrics, m) for m in present} if metrics is not None else {}
    memory = {m: next((r.get("memory") for r in manifest.mode_runs[m].replicas if r.get("memory")), None)
              for m in present if m in manifest.mode_runs}
    limited = {m: mr.client.get("client_limited") for m, mr in manifest.mode_runs.items() if mr.client}
    def chunks_of(mode: str) -> pa.Table:
        return read_requests(run_dir, columns=["mode", "tenant", "status", *LIST_COLUMNS],
                             filter=pc.field("mode") == mode)

    long = long_summary(table, manifest.run_id, present, server=server, memory=memory, client_limited=limited,
                        chunks_of=chunks_of)
    files.write_table(long, run_dir / "summary.parquet")
    summaries = mode_summaries(long, present)          # the console table: a view of the long summary
    write_summary(summaries, run_dir / "modes.parquet")
    notes: list[str] = []
    console.print(mode_table(summaries, title=f"{manifest.run_id} ({manifest.status})", skipped=manifest.skipped))
    for mode, why in manifest.skipped.items():
        console.print(f"[yellow]{mode}: skipped (--skip-unavailable): {why}[/yellow]", soft_wrap=True)
    by_tenant = tenant_speedups(long, modes)
    if by_tenant:
        write_tenant_speedups(by_tenant, run_dir / "tenant_speedups.parquet")
        if len(by_tenant) > 1:
            console.print(tenant_table(by_tenant, modes))
    slos = None
    if has_slos(table):
        slos = attainment(table, [s.mode for s in summaries])
        console.print(slo_table(slos, modes))
        for a in slos if slo_details else []:   # under --slo-gate: why the gate fails (report.md has them all)
            if not a.passed:
                console.print(f"[red]{a.mode}: {a.tenant} missed its SLO: {'; '.join(a.missed())}[/red]")
        manifest.slos = [{"mode": a.mode, "tenant": a.tenant, "passed": a.passed, "met_share": a.share,
                          "checks": {m: {"p99_ms": v, "target_ms": t} for m, (v, t) in a.checks.items()}}
                         for a in slos]
    else:
        console.print("no SLOs in this trace (its tenants set none): no goodput or SLO attainment to report")
    note = steady_state_note(summaries)
    if note:
        console.print(f"[yellow]{note}[/yellow]")
        notes.append(note)
    for mode, mr in manifest.mode_runs.items():
        if mr.client and mr.client.get("client_limited"):
            limited = (f"{mode}: client-limited ({'; '.join(mr.client['reasons'])}): its latencies include the "
                       "client's own delay; add workers (--workers) or client machines")
            console.print(f"[yellow]{limited}[/yellow]")
            notes.append(limited)
    notes += [f"{mode}: skipped (--skip-unavailable): {why}" for mode, why in manifest.skipped.items()]
    about = (f"Run **{manifest.status}**: {manifest.requests:,} requests of scenario `{manifest.scenario.get('name')}` "
             f"against fleet `{manifest.fleet.get('name')}`, modes {', '.join(present)}.")
    report_md = report_markdown(manifest.run_id, about, long, slos, notes)
    files.write_text(run_dir / "report.md", report_md)
    files.write_text(run_dir / "report.html", report_html(manifest.run_id, report_md, table, long, metrics, present))
    checks = error_checks(table, [s.mode for s in summaries], max_error_share) if max_error_share is not None else []
    for c in checks:
        if c.kinds:
            colour = "green" if c.passed else "red"
            console.print(f"[{colour}]{c.mode}: {c.failed:,} of {c.sent:,} sent failed: {c.kinds_text()}[/{colour}]")
    return checks


def record_gate(manifest: Manifest, checks: list[ErrorCheck], console: Console, slo_gate: bool = False) -> bool:
    """Put the gate in the manifest (the error checks, and with `slo_gate` every tenant's SLOs)
    and say why it failed; whether it passed."""
    manifest.checks = [c.as_dict() for c in checks]
    failed = [c.reason() for c in checks if not c.passed]
    if slo_gate:
        failed += [f"{s['mode']}: {s['tenant']} missed its SLO (--slo-gate)" for s in manifest.slos if not s["passed"]]
    manifest.gate = "failed" if failed else "passed"
    for reason in failed:
        console.print(f"[red bold]gate failed: {reason}[/red bold]", soft_wrap=True)
    return not failed
