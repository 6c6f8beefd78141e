"""A capacity search, measured: per mode, the highest offered rate at which every tenant meets
its SLOs. The search (analysis.capacity: bracket by doubling, then bisect, each rate near the
boundary decided by the majority of --repeats probes) asks for rates; each probe replays the
scenario's requests at that rate into its own run folder. capacity.parquet holds every probe
(analysis.capacity.PROBE_SCHEMA) and report.md the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pyarrow as pa

from analysis.capacity import (
    ModeCapacity,
    capacity_markdown,
    capacity_rows,
    peak_fleets,
    peak_markdown,
    probe_row,
    search_capacity,
    with_phases,
    write_probes,
)
from analysis.cost import energy_of_folder
from analysis.gate import probe_verdict
from analysis.slo import SLO_COLUMNS, has_targets, join_targets
from common import files
from loadtest.engine.inputs import Trace, prepare_trace
from loadtest.engine.level_dirs import new_level, summarise
from loadtest.engine.levels import Level, native_rate
from loadtest.engine.pipeline import Run
from loadtest.engine.replays import Replays, Stage, replay_level
from loadtest.options.replaying import CapacityOptions
from scenarios import ScenarioError


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

    def drive(self, session: Replays, stage: Stage, mode: str) -> None:
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
            summarise(lv, "completed")
            result.probes.append(probe_row(mode, rate, attempt, verdict, folder, energy_of_folder(folder, mode)))
            session.observer.say(f"{mode}: {rate:,.2f} req/s {'met' if passed else 'missed'} the SLOs"
                                 + (f" ({'; '.join(binding)})" if binding else ""))
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


def capacity_trace(args: CapacityOptions) -> Trace:
    """One trace long enough for the fastest probe (--probe-duration s at the highest rate), its
    tenants held to --slo when given; ScenarioError (one line) when the search cannot be made."""
    if args.start_rate and args.max_rate and args.start_rate > args.max_rate:
        raise ScenarioError(f"--start-rate {args.start_rate:g} is above --max-rate {args.max_rate:g}")
    native = native_rate(prepare_trace(args.trace).table)
    top = search_range(args, native)[1]
    fastest = f"the fastest probe ({top:g} requests/s for --probe-duration {args.probe_duration:g} s)"
    if not math.isfinite(top * args.probe_duration):
        raise ScenarioError(f"{fastest} is more requests than any trace holds: lower --max-rate or --start-rate")
    rows = math.ceil(top * args.probe_duration) + 1
    try:
        trace = with_targets(prepare_trace(replace(args.trace, requests=rows)), args.slo.slo)
    except ScenarioError as exc:   # its size is the search's, not a --requests the user gave
        raise ScenarioError(f"{fastest}: {exc}") from None
    if not has_targets(trace.table):
        raise ScenarioError(f"the scenario {trace.info['name']} sets no SLO targets to hold: give its tenants "
                            "an `slo`, or --slo ttft_p99_ms=...,tpot_p99_ms=...")
    return trace


def write_capacity(run: Run, results: dict[str, ModeCapacity], args: CapacityOptions) -> str:
    """Every probe into capacity.parquet, the answer into report.md and its decision into the
    manifest; report.md's text."""
    write_probes([p for r in results.values() for p in r.probes], run.run_dir / "capacity.parquet")
    gpus = run.choice.spec.gpus_per_mode if run.choice.spec is not None else 1
    rows = capacity_rows(results)
    text, decision = capacity_markdown(rows, gpus, args.precision, args.repeats, args.probe_duration,
                                       run.manifest.simulated)
    if args.peak is not None:   # the fleet each mode needs at the peak, from the capacity per replica
        spec = run.choice.spec
        replicas = spec.replicas if spec is not None else max(
            (len(mr.replicas) for mr in run.manifest.mode_runs.values()), default=1) or 1
        gpus_per_replica = max(1, gpus // replicas)
        text += "\n" + peak_markdown(peak_fleets(rows, args.peak, replicas, gpus_per_replica), args.peak, replicas,
                                     gpus_per_replica)
    run.record(decision=decision.record())
    files.write_text(run.run_dir / "report.md", text)
    return text
