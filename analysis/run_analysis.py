"""A run folder's analysis, once its modes ran: the long summary (summary.parquet, the one
computation of every statistic, and the only file of figures: every view reads it), each
tenant's SLO attainment, the notes a reader must see, report.md, report.html and the error
gate of each mode. Nothing is printed here: the console shows a `RunAnalysis` (the commands'
views), and a sweep's levels or a capacity's probes only need the files."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from analysis.category import categories_of, category_rows
from analysis.decision import Decision, decide_run
from analysis.gate import ErrorCheck, error_checks
from analysis.gpu import NOT_READ, gpu_unread, load_gpu_metrics
from analysis.html import report_html
from analysis.long_summary import LIST_COLUMNS, LONG_SCHEMA, SUMMARY_COLUMNS, SummaryView, long_summary
from analysis.markdown import report_markdown
from analysis.reader import read_requests
from analysis.server import load_server_metrics, spec_decode_stats
from analysis.slo import Attainment, has_slos, targets_of, with_slos
from analysis.summary import attainment, tenant_speedups, too_few_note
from analysis.table import steady_state_note
from analysis.tokens import content_notes, counted_by, plan_of, token_rows
from common import files
from contract.manifest import Manifest


@dataclass
class RunAnalysis:
    """What a run's analysis found, for its views."""

    run_id: str
    status: str
    modes: list[str]                                        # the modes asked for, in order
    present: list[str] = field(default_factory=list)       # the modes that have records (the console table's rows)
    summary: SummaryView | None = None                      # the long summary (summary.parquet), for the views
    by_tenant: dict = field(default_factory=dict)           # tenant -> mode -> speedup (tenant_speedups)
    slos: list[Attainment] | None = None                 # None: the trace sets no SLO
    steady_note: str | None = None
    stopped_note: str | None = None                         # the run was stopped: what that leaves out
    too_few_note: str | None = None                         # percentiles too few requests support, with intervals
    decision: Decision | None = None                        # what to deploy, said first everywhere
    limited: list[str] = field(default_factory=list)        # client-limited modes, said as a reader must see it
    skipped: dict[str, str] = field(default_factory=dict)   # mode -> why --skip-unavailable left it out
    checks: list[ErrorCheck] = field(default_factory=list)  # the error gate per mode (when asked)
    simulated: str | None = None                            # the numbers are the simulator's: said first
    counted_by: str | None = None                           # how the plan's prompt lengths were counted
    content_notes: list[str] = field(default_factory=list)  # tenants whose acceptance is not their content's

    @property
    def empty(self) -> bool:
        return not self.present

    @property
    def slo_entries(self) -> list[dict]:
        """Each tenant's SLOs as the manifest keeps them (`slos`), and the --slo-gate reads them."""
        return [{"mode": a.mode, "tenant": a.tenant, "passed": a.passed, "verdict": a.verdict,
                 "unjudged": a.unjudged(), "met_share": a.share,
                 "checks": {m: {"p99_ms": v, "target_ms": t} for m, (v, t) in a.checks.items()}}
                for a in self.slos or []]

    def manifest_fields(self) -> dict:
        """What the manifest keeps of the analysis (its decision, each tenant's SLOs), by field name;
        the engine records it (the analysis writes no manifest)."""
        out: dict = {"decision": self.decision.record()} if self.decision is not None else {}
        if self.slos is not None:
            out["slos"] = self.slo_entries
        return out


def stopped_note(manifest: Manifest, modes: list[str]) -> str | None:
    """What a run that was stopped (a signal, Stop in the web UI) leaves out: its figures are of
    the requests sent before the stop, and the modes it never reached have none (None when it was
    not stopped)."""
    if manifest.status != "interrupted":
        return None
    never = [m for m in modes if m not in manifest.skipped
             and (m not in manifest.mode_runs or manifest.mode_runs[m].end in (None, "not started"))]
    return ("interrupted (stopped before its trace ended): the figures are of the requests sent before the stop, "
            "the rest recorded as not sent" + (f"; never started: {', '.join(never)}" if never else ""))


def analyse_run(run_dir: Path, modes: list[str], manifest: Manifest,
                max_error_share: float | None = None) -> RunAnalysis:
    """Summarise the run's records into its files (summary.parquet in long format, report.md,
    report.html) and with `max_error_share` check each mode's errors; the manifest is read, never
    written (`RunAnalysis.manifest_fields` is what it keeps). A run without records gives an empty one."""
    found = RunAnalysis(manifest.run_id, manifest.status, list(modes), skipped=dict(manifest.skipped),
                        simulated=manifest.simulated,
                        stopped_note=stopped_note(manifest, modes))
    # the columns the summary reads but the chunk lists; those are read a mode at a time (its chunks_of)
    table = read_requests(run_dir, columns=SUMMARY_COLUMNS) if (run_dir / "requests").exists() else None
    if table is None or not table.num_rows:
        return found
    table = with_slos(table, run_dir) or table
    present = [m for m in modes if m in set(table["mode"].to_pylist())]
    metrics = load_server_metrics(run_dir)
    gpu = load_gpu_metrics(run_dir)
    server = {m: spec_decode_stats(metrics, m) for m in present} if metrics is not None else {}
    memory = {m: next((r.get("memory") for r in manifest.mode_runs[m].replicas if r.get("memory")), None)
              for m in present if m in manifest.mode_runs}
    limited = {m: mr.client.get("client_limited") for m, mr in manifest.mode_runs.items() if mr.client}

    def chunks_of(mode: str) -> pa.Table:
        return read_requests(run_dir, columns=["mode", "tenant", "status", *LIST_COLUMNS],
                             filter=pc.field("mode") == mode)

    long = long_summary(table, manifest.run_id, present, server=server, memory=memory, client_limited=limited,
                        chunks_of=chunks_of, gpu=gpu)
    unread = [{"run_id": manifest.run_id, "mode": m, "tenant": "all", "metric": "gpu_telemetry",
               "statistic": NOT_READ, "value": math.nan, "ci_low": None, "ci_high": None}
              for m in present if m in manifest.mode_runs and gpu_unread(manifest.mode_runs[m].gpu_metrics)]
    if unread:   # GPUs that were to be read and were not: their figures say so, not nothing
        long = pa.concat_tables([long, pa.Table.from_pylist(unread, schema=LONG_SCHEMA)])
    categories = categories_of(run_dir)
    if categories is not None:   # acceptance and speedup by the prompts' category (analysis/category.py)
        by_category = [{"run_id": manifest.run_id, "mode": m, "tenant": "all", "metric": metric, "statistic": cat,
                        "value": value, "ci_low": low, "ci_high": high}
                       for m, metric, cat, value, low, high in category_rows(table, categories, present)]
        long = pa.concat_tables([long, pa.Table.from_pylist(by_category, schema=LONG_SCHEMA)])
    plan = plan_of(run_dir)
    if plan is not None:   # the plan's lengths against the server's counts (analysis/tokens.py)
        checked = [{"run_id": manifest.run_id, "mode": m, "tenant": tenant, "metric": metric, "statistic": stat,
                    "value": value, "ci_low": low, "ci_high": high}
                   for m, tenant, metric, stat, value, low, high in token_rows(table, plan, present)]
        long = pa.concat_tables([long, pa.Table.from_pylist(checked, schema=LONG_SCHEMA)])
        found.counted_by, found.content_notes = counted_by(run_dir), content_notes(plan)
    found.decision = decide_run(long, SummaryView(long).get(present[0], "offered_req_per_s", "trace"),
                                stopped=found.stopped_note is not None)
    long = pa.concat_tables([long, pa.Table.from_pylist(found.decision.rows(manifest.run_id), schema=LONG_SCHEMA)])
    files.write_table(long, run_dir / "summary.parquet")
    found.present, found.summary = present, SummaryView(long)   # the console table: a view of the long summary
    found.by_tenant = tenant_speedups(long, modes)
    if has_slos(table):
        found.slos = attainment(found.summary, targets_of(table, present))
    found.steady_note = steady_state_note(found.summary, present, stopped=found.stopped_note is not None)
    found.too_few_note = too_few_note(found.summary, present)
    found.limited = [f"{mode}: client-limited ({'; '.join(mr.client['reasons'])}): its latencies include the "
                     "client's own delay; add workers (--workers) or client machines"
                     for mode, mr in manifest.mode_runs.items() if mr.client and mr.client.get("client_limited")]
    notes = [*(n for n in (found.stopped_note, found.steady_note, found.too_few_note) if n), *found.limited,
             *found.content_notes,
             *(f"{mode}: skipped (--skip-unavailable): {why}" for mode, why in manifest.skipped.items()),
             *(f"{mode}: GPU telemetry not measured: {mr.gpu_metrics}" for mode, mr in manifest.mode_runs.items()
               if mode in present and gpu_unread(mr.gpu_metrics))]
    about = ((f"**{manifest.simulated}.**\n\n" if manifest.simulated else "") +
             f"**Decision: {found.decision.text}**\n\n"
             f"Run **{manifest.status}**: {manifest.requests:,} requests of scenario `{manifest.scenario.get('name')}` "
             f"against fleet `{manifest.fleet.get('name')}`, modes {', '.join(present)}.")
    report_md = report_markdown(manifest.run_id, about, long, found.slos, notes, counted=found.counted_by)
    files.write_text(run_dir / "report.md", report_md)
    files.write_text(run_dir / "report.html", report_html(manifest.run_id, report_md, table, long, metrics, present,
                                                                gpu))
    if max_error_share is not None:
        found.checks = error_checks(found.summary, present, max_error_share)
    return found
