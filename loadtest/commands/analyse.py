"""`loadtest report RUN [RUN ...]`: the analysis of finished runs, again, from their folders alone
(records, trace, server metrics, manifest): the tables on the console, summary.parquet (long
format), report.md and report.html in each run folder. Runs that replayed the same trace are
also read as one experiment (analysis.repeats): the spread of each figure between them, so a
boot-to-boot difference is not read as a speedup. With --slo-gate it exits 1 when a tenant
missed an SLO; the manifest is not rewritten."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.gate import slo_gate_lines
from analysis.long_summary import LONG_SCHEMA
from analysis.markdown import repeats_markdown, runs_markdown
from analysis.reader import ContractError
from analysis.repeats import RepeatRun, repeats_of
from analysis.run_analysis import analyse_run
from analysis.sweep import plan_vs_measured
from common import exits, files
from common.exits import print_error
from contract.manifest import Manifest
from loadtest.commands.console import new_console, say_summaries_not_written, show_markdown
from loadtest.commands.views import show_gate, show_repeats, show_run
from loadtest.options.tools import ReportOptions


def is_plan(sweep_dir: Path) -> bool:
    """A plan's folder (`loadtest plan`, or a sweep's plan/): its levels were planned, not run."""
    level = next(iter(sorted((sweep_dir / "levels").glob("*/manifest.json"))), None)
    return level is not None and "planned_on" in Manifest.read(level.parent).fleet


def sweeps_side_by_side(console, sweeps: list[Path], out: Path | None) -> int:
    """A plan and a measured sweep of the same levels: how far the model is from the measurement."""
    plans = [d for d in sweeps if is_plan(d)]
    measured = [d for d in sweeps if d not in plans]
    if len(sweeps) == 1 and measured:     # one measured sweep: its analysis again
        from loadtest.engine.sweep import reanalyse

        found = reanalyse(measured[0])
        if found.markdown is not None:
            show_markdown(console, found.markdown)
        console.print(f"sweep: {measured[0] / 'report.md'}  (curves: {measured[0] / 'sweep.parquet'})")
        return exits.OK
    if len(plans) != 1 or len(measured) != 1:
        raise ValueError("give one measured sweep (`loadtest sweep`) to analyse again, or one plan (`loadtest "
                         f"plan`) and one measured sweep to set side by side; got {len(plans)} plan(s) and "
                         f"{len(measured)} sweep(s)")
    plan, sweep = (pq.read_table(d / "sweep.parquet") for d in (plans[0], measured[0]))
    if not set(plan["level"].to_pylist()) & set(sweep["level"].to_pylist()):
        raise ValueError(f"{plans[0]} and {measured[0]} share no level (give the plan the sweep's --rate-scale, "
                         "--rates or --concurrency)")
    text = f"# {plans[0]} (plan) against {measured[0]} (measured)\n\n" + plan_vs_measured(plan, sweep)
    console.print(text, markup=False, highlight=False)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        files.write_text(out / "report.md", text)
        console.print(f"side by side: {out / 'report.md'}")
    return exits.OK


def fleet_identity(manifest: Manifest) -> str:
    """Which fleet a run replayed against: its name and the hash of its file (a redeploy of the
    same file keeps both)."""
    fleet = manifest.fleet or {}
    sha = str(fleet.get("sha256") or "")
    return f"{fleet.get('name', '')}" + (f" (file {sha[:12]})" if sha else "")


def main(args: ReportOptions) -> int:
    console = new_console()
    runs: list[tuple[Path, Manifest]] = []
    sweeps = [Path(t) for t in args.runs if (Path(t) / "sweep.parquet").is_file()]
    if sweeps:
        try:
            if len(sweeps) != len(args.runs):
                raise ValueError("give sweeps and plans, or run folders, not both (a sweep's levels are run "
                                 "folders: levels/<level>/)")
            return sweeps_side_by_side(console, sweeps, Path(args.out) if args.out is not None else None)
        except (ValueError, OSError) as exc:
            print_error("loadtest report", str(exc))
            return exits.BAD_INPUT
    try:  # every folder first, so a typo in the last one does not cost the others' time
        for text in args.runs:
            run_dir = Path(text)
            if not run_dir.is_dir():
                raise ValueError(f"{run_dir}: no such run folder")
            if not (run_dir / "requests").is_dir():
                raise ValueError(f"{run_dir}: no request records (requests/ is missing; not a loadtest run?)")
            runs.append((run_dir, Manifest.read(run_dir)))
    except ValueError as exc:
        print_error("loadtest report", str(exc))
        return exits.BAD_INPUT
    missed: list[str] = []
    unjudged: list[str] = []
    for run_dir, manifest in runs:
        try:
            found = analyse_run(run_dir, manifest.modes, manifest)
            show_run(console, found, slo_details=args.slo_gate)
        except ContractError as exc:
            print_error("loadtest report", str(exc))
            return exits.BAD_INPUT
        except files.NotWritten as exc:  # a full disk: each summary is written whole or not at all, the last kept
            say_summaries_not_written("loadtest report", run_dir, exc)
            return exits.INCOMPLETE
        gate = slo_gate_lines(found.slo_entries, f"{manifest.run_id}: ")
        missed += gate.failed
        unjudged += gate.unjudged
        if args.slo_gate and not found.slo_entries:
            print_error("loadtest report", f"--slo-gate: {run_dir} has no SLO targets to check")
            return exits.BAD_INPUT
        console.print(f"report: {run_dir / 'report.md'}  (summary: {run_dir / 'summary.parquet'})")
    longs = [pq.read_table(run_dir / "summary.parquet") if (run_dir / "summary.parquet").is_file()
             else LONG_SCHEMA.empty_table() for run_dir, _ in runs]
    repeats = None
    if len(runs) > 1:   # runs of one trace as one experiment: the spread between them
        repeats = repeats_of([RepeatRun(run_dir, manifest.run_id, manifest.status, long, fleet_identity(manifest))
                              for (run_dir, manifest), long in zip(runs, longs, strict=True)])
        show_repeats(console, repeats)
    out = Path(args.out) if args.out is not None else None
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            combined = pa.concat_tables(longs) if longs else LONG_SCHEMA.empty_table()
            files.write_table(combined, out / "summary.parquet")
            files.write_text(out / "report.md", runs_markdown(combined)
                             + ("\n" + repeats_markdown(repeats) if repeats is not None else ""))
        except OSError as exc:
            print_error("loadtest report", f"--out {out}: {exc.strerror or exc}")
            return exits.BAD_INPUT
        console.print(f"every run: {out / 'report.md'}  (summary: {out / 'summary.parquet'})")
    return show_gate(console, missed, unjudged) if args.slo_gate else exits.OK
