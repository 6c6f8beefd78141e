"""A capacity search, measured: per mode, the highest offered rate at which every tenant meets
its SLOs. The search (analysis.capacity: bracket by doubling, then bisect, each rate near the
boundary decided by the majority of --repeats probes) asks for rates; each probe replays the
scenario's requests at that rate into its own run folder. capacity.parquet holds every probe
(analysis.capacity.PROBE_SCHEMA) and report.md the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from analysis.capacity import Capacity, CapacityRow, capacity_table, probe_row, search_capacity, with_phases
from analysis.decision import Decision
from analysis.gate import probe_verdict
from analysis.slo import SLO_COLUMNS, join_targets
from loadtest.session.engine import Session, Stage, replay_level
from loadtest.session.inputs import Trace
from loadtest.session.level_dirs import new_level, summarise
from loadtest.session.levels import Level, native_rate
from loadtest.session.options import CapacityOptions


@dataclass
class ModeCapacity:
    found: Capacity | None = None
    probes: list[dict] = field(default_factory=list)   # capacity.parquet's rows (probe_row), in the order probed


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


@dataclass
class CapacityProbes:
    """Per mode, the capacity search (analysis.capacity.search_capacity) asking for rates, and
    each rate probed: `--probe-duration` s of the trace's arrivals at that rate into its own
    folder (probes/<mode>/rate-<r>-<attempt>/), passed when every tenant's p99s are within its
    targets and the errors within --max-errors, as the run's gate counts them."""

    args: CapacityOptions
    results: dict[str, ModeCapacity]

    def drive(self, session: Session, stage: Stage, mode: str) -> None:
        a, base = self.args, session.trace.table
        max_errors = a.gate.max_errors
        native = native_rate(base)
        result = self.results[mode]
        attempts: dict[float, int] = {}

        def probe(rate: float) -> bool:
            attempt = attempts[rate] = attempts.get(rate, -1) + 1
            # in the order probed, with the rate as a person reads it (its exact value and attempt are in
            # capacity.parquet): probe-07-6.39rps, not rate-6.3937-0
            name = f"probe-{len(result.probes) + 1:02d}-{rate:.3g}rps"
            folder = session.run_dir / "probes" / mode / name
            level = Level(name, rate_scale=rate / native, duration_s=a.probe_duration)
            lv = new_level(session.manifest, base, level, folder, f"probes/{mode}/{name}")
            replay_level(session, mode, lv, bool(result.probes), None)
            verdict = probe_verdict(join_targets(lv.records(mode), lv.trace), mode, max_errors)
            passed, binding = verdict.passed, verdict.binding
            result.probes.append(probe_row(mode, rate, attempt, verdict, folder))
            summarise(lv, "completed")
            session.console.print(f"{mode}: {rate:,.2f} req/s {'met' if passed else 'missed'} the SLOs"
                               + (f" ({'; '.join(binding)})" if binding else ""), soft_wrap=True)
            return passed

        start, top = search_range(a, native)
        found = search_capacity(probe, start, top, precision=a.precision, repeats=a.repeats,
                                min_rate=min(start, native / 16))
        with_phases(result.probes, found)
        result.found = found


def search_range(args: CapacityOptions, native: float) -> tuple[float, float]:
    """The first rate probed and the highest (default: the scenario's own rate, and 8 times it)."""
    start = args.start_rate or native
    return start, max(args.max_rate or native * 8, start)


def report(results: dict[str, ModeCapacity], gpus: int, precision: float, repeats: int,
           probe_s: float, simulated: str | None = None) -> tuple[str, Decision]:
    """report.md's text, headed by where its numbers come from when that is the simulator
    (`simulated`) and by the search's decision, and the decision."""
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
                                sum(p["goodput_over_arrivals_req_per_s"] for p in at) / len(at) if at else None,
                                unjudged=sum(not p["judged"] for p in r.probes),
                                fewest=min((p["fewest_tenant_requests"] for p in r.probes), default=None)))
    table, decision = capacity_table(rows, gpus, with_goodput=True, raise_with="--max-rate")
    return "\n".join([
        "# Capacity: the highest offered rate within every tenant's SLOs (measured)", "",
        *([f"**{simulated}.**", ""] if simulated else []), f"**Decision: {decision.text}**", "",
        f"Bracketed by doubling, then bisected to {precision:.0%}; each rate near the boundary decided by the "
        f"majority of {repeats} probe(s). Per GPU over the fleet's {gpus} GPUs a mode (a draft model shares the "
        "target's). Goodput: requests within every target per second of the probe's arrivals (its rate times the "
        "share within target; a run's goodput is over its steady window), at the rate found. Binding: what failed "
        "just above it.", "", *table, "",
        f"Each probe here is {probe_s:g} s of arrivals at its rate (rate x {probe_s:g} requests); `loadtest plan "
        "--capacity` probes its trace's `--requests` whatever the rate, so its p99s are of other sample sizes and "
        f"of a longer or shorter burst, and its figure can differ: plan with `--requests` near the rate found x "
        f"{probe_s:g} for like with like.", ""]), decision
