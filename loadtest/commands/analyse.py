"""`loadtest report RUN [RUN ...]`: the analysis of finished runs, again, from their folders alone
(records, trace, server metrics, manifest): the tables on the console, summary.parquet (long
format), modes.parquet and report.md in each run folder. With --slo-gate it exits 1 when a tenant
missed an SLO; the manifest is not rewritten."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.reader import ContractError
from common import exits
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.manifest import Manifest
from loadtest.commands.report import print_summary


def main(args: argparse.Namespace) -> int:
    console = new_console()
    runs: list[tuple[Path, Manifest]] = []
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
    missed = []
    for run_dir, manifest in runs:
        try:
            print_summary(console, run_dir, manifest.modes, manifest)
        except ContractError as exc:
            print_error("loadtest report", str(exc))
            return exits.BAD_INPUT
        missed += [f"{manifest.run_id}: {s['mode']}: {s['tenant']}" for s in manifest.slos if not s["passed"]]
        if args.slo_gate and not manifest.slos:
            print_error("loadtest report", f"--slo-gate: {run_dir} has no SLO targets to check")
            return exits.BAD_INPUT
        console.print(f"report: {run_dir / 'report.md'}  (summary: {run_dir / 'summary.parquet'})")
    if args.slo_gate and missed:
        for m in missed:
            console.print(f"[red bold]gate failed: {m} missed its SLO (--slo-gate)[/red bold]")
        return exits.GATE_FAILED
    return exits.OK
