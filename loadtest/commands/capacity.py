"""`loadtest capacity`: per mode, the highest offered rate at which every tenant meets its SLOs,
measured. The fleet comes up once; per mode, the capacity search (analysis.capacity: bracket by
doubling, then bisect, each rate near the boundary decided by the majority of --repeats probes)
asks for rates, and each probe replays the scenario's requests at that rate into its own run
folder (probes/<mode>/rate-<r>-<attempt>/). A probe passes when every tenant's p99s are within
its targets and the errors stay within --max-errors. capacity.parquet holds every probe and
report.md the answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import pyarrow as pa

from analysis.capacity import Capacity, CapacityRow, capacity_table, search_capacity
from analysis.gate import error_checks
from analysis.slo import SLO_COLUMNS, attainment, has_targets, join_targets
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.commands.inputs import Trace, choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.commands.levels import Level, native_rate
from loadtest.commands.levels_run import LevelsRun, new_level, summarise
from loadtest.commands.metrics_server import MetricsError, MetricsServer
from loadtest.commands.run import Stage, served
from loadtest.session.options import CapacityOptions
from scenarios import ScenarioError

PROBE_SCHEMA = pa.schema([
    pa.field("mode", pa.string()), pa.field("rate", pa.float64()), pa.field("attempt", pa.int32()),
    pa.field("phase", pa.string()), pa.field("passed", pa.bool_()), pa.field("binding", pa.string()),
    pa.field("requests", pa.int64()), pa.field("goodput_req_per_s", pa.float64()),
    pa.field("error_share", pa.float64()), pa.field("folder", pa.string()),
])


@dataclass
class ModeCapacity:
    found: Capacity | None = None
    probes: list[dict] = field(default_factory=list)   # PROBE_SCHEMA rows, in the order probed


def with_targets(trace: Trace, slo: dict[str, float] | None) -> Trace:
    """The trace with every tenant held to `slo` (--slo) instead of its scenario's targets."""
    if slo is None:
        return trace
    table = trace.table
    for column in SLO_COLUMNS:
        value = slo.get(column.removeprefix("slo_"))
        i = table.schema.get_field_index(column)
        table = table.set_column(i, table.schema.field(i), pa.array([value] * table.num_rows, pa.float64()))
    return Trace(table.replace_schema_metadata(trace.table.schema.metadata), {**trace.info, "slo": slo}, trace.seed)


class CapacityRun(LevelsRun):
    def __init__(self, *args, results: dict[str, ModeCapacity], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.results = results

    args: CapacityOptions

    def drive(self, stage: Stage, mode: str) -> None:
        a, base = self.args, self.trace.table
        max_errors = a.gate.max_errors
        native = native_rate(base)
        result = self.results[mode]
        attempts: dict[float, int] = {}

        def probe(rate: float) -> bool:
            attempt = attempts[rate] = attempts.get(rate, -1) + 1
            name = f"rate-{rate:.6g}-{attempt}"
            folder = self.run_dir / "probes" / mode / name
            level = Level(name, rate_scale=rate / native, duration_s=a.probe_duration)
            lv = new_level(self.manifest, base, level, folder, f"probes/{mode}/{name}")
            self.replay_level(stage, mode, lv, pause=bool(result.probes))
            records = lv.records(mode)
            verdicts = attainment(join_targets(records, lv.trace), [mode])
            check = error_checks(records, [mode], max_errors)[0]    # the run's gate, on the probe's records
            sent = check.sent
            errors = check.error_share if sent else math.nan
            met = sum(v.met for v in verdicts)
            passed = bool(verdicts) and all(v.passed for v in verdicts) and sent > 0 and errors <= max_errors
            binding = [f"{v.tenant} ({'; '.join(v.missed())})" for v in verdicts if not v.passed]
            if errors > max_errors:
                binding.append(f"errors {errors:.0%} > {max_errors:.0%}")
            result.probes.append({"mode": mode, "rate": rate, "attempt": attempt, "phase": "", "passed": passed,
                                  "requests": lv.trace.num_rows,
                                  "binding": "; ".join(binding), "error_share": errors, "folder": str(folder),
                                  "goodput_req_per_s": rate * met / lv.trace.num_rows})
            summarise(lv, "completed")
            self.console.print(f"{mode}: {rate:,.2f} req/s {'met' if passed else 'missed'} the SLOs"
                               + (f" ({'; '.join(binding)})" if binding else ""), soft_wrap=True)
            return passed

        start, top = search_range(a, native)
        found = search_capacity(probe, start, top, precision=a.precision, repeats=a.repeats,
                                min_rate=min(start, native / 16))
        for row, p in zip(result.probes, found.probes, strict=False):
            row["phase"] = p.phase
        result.found = found


def search_range(args: CapacityOptions, native: float) -> tuple[float, float]:
    """The first rate probed and the highest (default: the scenario's own rate, and 8 times it)."""
    start = args.start_rate or native
    return start, max(args.max_rate or native * 8, start)


def report(results: dict[str, ModeCapacity], gpus: int, precision: float, repeats: int) -> str:
    rows = []
    for mode, r in results.items():
        f = r.found
        if f is None:
            why = f"stopped after {len(r.probes)} probes (interrupted?)" if r.probes else "not searched"
            rows.append(CapacityRow(mode, None, why=why))
            continue
        at = [p for p in r.probes if f.rate is not None and p["rate"] == f.rate and p["passed"]]
        above_it = [p for p in r.probes if f.failed_at is not None and p["rate"] == f.failed_at and not p["passed"]]
        rows.append(CapacityRow(mode, f, above_it[0]["binding"] if above_it else "-",
                                sum(p["goodput_req_per_s"] for p in at) / len(at) if at else None))
    table, choice = capacity_table(rows, gpus, with_goodput=True, raise_with="--max-rate")
    return "\n".join([
        "# Capacity: the highest offered rate within every tenant's SLOs (measured)", "",
        f"Bracketed by doubling, then bisected to {precision:.0%}; each rate near the boundary decided by the "
        f"majority of {repeats} probe(s). Per GPU over the fleet's {gpus} GPUs a mode (a draft model shares the "
        "target's). Goodput: requests within every target per second, at the rate found. Binding: what failed "
        "just above it.", "", *table, "", choice, ""])


def main(args: CapacityOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        if args.repeats % 2 == 0:
            raise ScenarioError(f"--repeats {args.repeats}: give an odd number, so a majority decides each rate")
        if not 0.001 <= args.precision < 1:
            raise ScenarioError(f"--precision {args.precision:.4%}: give a percentage from 0.1 to under 100")
        if args.start_rate and args.max_rate and args.start_rate > args.max_rate:
            raise ScenarioError(f"--start-rate {args.start_rate:g} is above --max-rate {args.max_rate:g}")
        # one trace long enough for the fastest probe: --probe-duration s at the highest rate
        native = native_rate(prepare_trace(args.trace).table)
        rows = math.ceil(search_range(args, native)[1] * args.probe_duration) + 1
        trace = with_targets(prepare_trace(replace(args.trace, requests=rows)), args.slo.slo)
        if not has_targets(trace.table):
            raise ScenarioError(f"the scenario {trace.info['name']} sets no SLO targets to hold: give its tenants "
                                "an `slo`, or --slo ttft_p99_ms=...,tpot_p99_ms=...")
        choice = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics, None).check()  # before the run folder is made
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"capacity-{trace.info['name']}")
    except (ScenarioError, FleetError, FileExistsError, MetricsError) as exc:
        print_error("loadtest capacity", str(exc))
        return exits.BAD_INPUT
    manifest = new_manifest(run_dir, trace, choice)
    manifest.write(run_dir)
    console.print(f"[bold]capacity {manifest.run_id}[/bold]: {args.probe_duration:g} s of {trace.info['name']}'s "
                  f"arrivals a probe, modes {', '.join(choice.modes)}, fleet {choice.info['name']}",
                  soft_wrap=True)
    results = {m: ModeCapacity() for m in choice.modes}
    code = served(args, console, manifest, run_dir, lambda signals, server: CapacityRun(
        args, console, trace, choice, run_dir, manifest, signals, server, args.cooldown,
        results=results).replay_all())
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    probes = [p for r in results.values() for p in r.probes]
    files.write_table(pa.Table.from_pylist(probes, schema=PROBE_SCHEMA), run_dir / "capacity.parquet")
    gpus = choice.spec.gpus_per_mode if choice.spec is not None else 1
    text = report(results, gpus, args.precision, args.repeats)
    files.write_text(run_dir / "report.md", text)
    console.print(text, markup=False, highlight=False)
    console.print(f"capacity: {run_dir / 'report.md'}  (every probe: {run_dir / 'capacity.parquet'}, run folders "
                  f"under {run_dir / 'probes'}) in {time.monotonic() - started:.1f} s", soft_wrap=True)
    return code
