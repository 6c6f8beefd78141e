"""`loadtest report RUN [RUN ...]`: the analysis of finished runs, again, from their folders alone
(records, trace, server metrics, manifest): the tables on the console, summary.parquet (long
format), report.md and report.html in each run folder. Runs that replayed the same trace are
also read as one experiment (analysis.repeats): the spread of each figure between them, so a
boot-to-boot difference is not read as a speedup. With --slo-gate it exits 1 when a tenant
missed an SLO; the manifest is not rewritten."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from analysis.folders import is_plan, repeats_among, run_folders, side_by_side, summaries_of, write_runs_report
from analysis.gate import slo_gate_lines
from analysis.reader import ContractError
from analysis.run_analysis import analyse_run
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console, say_summaries_not_written, show_markdown
from loadtest.commands.views import show_gate, show_repeats, show_run
from loadtest.options.tools import ReportOptions


def sweeps_again(console: Console, sweeps: list[Path], out: Path | None) -> int:
    """One measured sweep analysed again, or a plan and a measured sweep of the same levels side by side."""
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
    text = side_by_side(plans[0], measured[0])
    console.print(text, markup=False, highlight=False)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        files.write_text(out / "report.md", text)
        console.print(f"side by side: {out / 'report.md'}")
    return exits.OK


def main(args: ReportOptions) -> int:
    console = new_console()
    prog = "loadtest report"
    sweeps = [Path(t) for t in args.runs if (Path(t) / "sweep.parquet").is_file()]
    out = Path(args.out) if args.out is not None else None
    try:
        if sweeps:
            if len(sweeps) != len(args.runs):
                raise ValueError("give sweeps and plans, or run folders, not both (a sweep's levels are run "
                                 "folders: levels/<level>/)")
            return sweeps_again(console, sweeps, out)
        runs = run_folders(args.runs)
    except (ValueError, OSError) as exc:
        print_error(prog, str(exc))
        return exits.BAD_INPUT
    missed: list[str] = []
    unjudged: list[str] = []
    for run_dir, manifest in runs:
        try:
            found = analyse_run(run_dir, manifest.modes, manifest)
            show_run(console, found, slo_details=args.slo_gate)
        except ContractError as exc:
            print_error(prog, str(exc))
            return exits.BAD_INPUT
        except files.NotWritten as exc:  # a full disk: each summary is written whole or not at all, the last kept
            say_summaries_not_written(prog, run_dir, exc)
            return exits.INCOMPLETE
        gate = slo_gate_lines(found.slo_entries, f"{manifest.run_id}: ")
        missed += gate.failed
        unjudged += gate.unjudged
        if args.slo_gate and not found.slo_entries:
            print_error(prog, f"--slo-gate: {run_dir} has no SLO targets to check")
            return exits.BAD_INPUT
        console.print(f"report: {run_dir / 'report.md'}  (summary: {run_dir / 'summary.parquet'})")
    longs = summaries_of(runs)
    repeats = repeats_among(runs, longs)
    if repeats is not None:
        show_repeats(console, repeats)
    if out is not None:
        try:
            write_runs_report(out, longs, repeats)
        except OSError as exc:
            print_error(prog, f"--out {out}: {exc.strerror or exc}")
            return exits.BAD_INPUT
        console.print(f"every run: {out / 'report.md'}  (summary: {out / 'summary.parquet'})")
    return show_gate(console, missed, unjudged) if args.slo_gate else exits.OK
