"""The model's levels (`loadtest plan`, and a sweep's plan/): a load sweep predicted before any GPU
is rented.

Each mode of the fleet is built as a simulator replica would be (`cluster.argv.sim_config`: the
simulator's typed configuration from the fleet's fields, which `serve_argv` writes as the same
flags; no argv is parsed), each trace row becomes the request
body the replay would send (`loadtest.request.body`) and then what the server would run for it
(`cluster.sim.server.sequence_for`), and the engine's scheduler serves the trace in virtual time
(`cluster.sim.offline.simulate`). The records it predicts are written in the record contract, one
run folder per level, so every analysis reads a plan as it reads a measured run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa

from analysis.capacity import CapacityRow, energy_at, probe_row, search_capacity, with_phases, write_probes
from analysis.cost import per_token
from analysis.gate import probe_verdict
from analysis.long_summary import SummaryView, long_summary
from analysis.slo import has_targets, join_targets, with_slos
from analysis.sweep import LEVEL_SCHEMA, with_level
from cluster import FleetError
from cluster.argv import sim_config
from cluster.fleet import FleetSpec, load_fleet, redacted, resolve_modes, with_speculative_tokens
from cluster.sim import sim_profile
from cluster.sim.config import build_server
from cluster.sim.gpu import GpuMeter, SimGpus
from cluster.sim.offline import SimRequest, simulate_metered
from cluster.sim.server import RequestError, SimServer, chat_prompt, completion_prompt, sequence_for
from common import files
from contract.gpu_metrics import FOLDER as GPU_FOLDER
from contract.gpu_metrics import GPU_SCHEMA
from contract.manifest import Manifest
from contract.records import REQUEST_SCHEMA, RequestRecord
from loadtest.engine.inputs import new_run_dir
from loadtest.engine.level_dirs import new_level
from loadtest.engine.levels import Level, levels_of, native_rate
from loadtest.options.replaying import CAPACITY_PRECISION, DEFAULT_FLEET, MAX_ERROR_SHARE, PlanOptions
from loadtest.replay.conversations import first_turn_keys
from loadtest.replay.dispatcher import UNSENT_BECAUSE
from loadtest.request.body import request_body
from scenarios import ScenarioError
from scenarios.spec import load_scenario
from scenarios.tokens import ESTIMATE, load_tokenizer
from scenarios.trace import (
    META_CLOSED,
    META_HASH,
    META_NAME,
    build_trace,
    closed_concurrency,
    scale_rate,
    scenario_hash,
)

EPOCH_NS = 1_700_000_000 * 10**9     # a plan's virtual clock starts here (no wall time is measured)
GPU_SAMPLE_S = 1.0                   # a predicted GPU sampled as often as the scraper reads a real one


def simulator_of(fleet: FleetSpec, mode: str, hardware: str | None) -> SimServer:
    """The simulator a replica of `mode` would run (`hardware` in place of the fleet's profile)."""
    return build_server(sim_config(fleet, mode, hardware))


def turn_before(rows: list[dict]) -> dict[int, int]:
    """Each later turn's row -> the row of the turn before it (rows of one trace, in send order)."""
    last: dict[str, int] = {}
    out = {}
    for i, row in enumerate(rows):
        conv = row.get("conversation")
        if conv is not None:
            if row.get("turn") and conv in last:
                out[i] = last[conv]
            last[conv] = i
    return out


def predicted_records(trace: pa.Table, server: SimServer, mode: str, run_id: str, replicas: int = 1,
                      stop_s: float | None = None, gpu: list[dict] | None = None, replica: int = 0) -> pa.Table:
    """The records the simulator predicts for `trace`, in the record contract (virtual times),
    the rows spread over `replicas` replicas round-robin, as the replay spreads them. A
    closed-loop trace keeps its concurrency, split over the replicas as the replay's slots are
    filled; a simulator run `--time-scale X` times faster is predicted X times faster too. With
    `stop_s` nothing is sent from then on (the rest are not_sent), as a level's --level-duration.
    With `gpu`, each replica's GPUs are sampled once a second of the prediction into it, as rows
    of contract.gpu_metrics (the power model's: cluster/sim/power.py), replica number `replica`."""
    closed = closed_concurrency(trace)
    # fewer in flight than replicas (closed loop): each request on a replica of its own, one at a time
    groups = min(replicas, closed) if closed else replicas
    # a conversation's turns on its first turn's replica, as the replay sends them
    keys = first_turn_keys(trace["conversation"].to_pylist() if "conversation" in trace.column_names
                           else [None] * trace.num_rows)
    if groups > 1:
        parts = []
        for r in range(groups):
            part = trace.take(np.flatnonzero(keys % groups == r))
            if closed:
                part = part.replace_schema_metadata({META_CLOSED: str(closed // groups
                                                                      + (r < closed % groups)).encode()})
            p = predicted_records(part, server, mode, run_id, stop_s=stop_s, gpu=gpu, replica=r)
            parts.append(p.set_column(p.schema.get_field_index("replica"), "replica",
                                      pa.array([f"{mode}-{r}"] * p.num_rows)))
        return pa.concat_tables(parts).cast(REQUEST_SCHEMA)
    scale = server.engine.time_scale     # wall seconds per virtual second
    rows = trace.to_pylist()
    requests, refused = [], {}
    before = turn_before(rows)
    for i, row in enumerate(rows):
        body = request_body(row, server.cfg.served_model_names[0])
        try:
            chat = row["api"] == "chat"
            text, n_prompt = chat_prompt(body["messages"]) if chat else completion_prompt(body["prompt"])
            seq = sequence_for(body, text, n_prompt, server.cfg.max_model_len, str(i))
            requests.append(SimRequest(row["offset_s"] / scale, seq.prompt_tokens, seq.target_tokens, seq.domain,
                                       seq.temperature, before.get(i), (row.get("think_s") or 0.0) / scale))
        except RequestError as exc:
            refused[i] = str(exc)
            requests.append(None)
    served = [r for r in requests if r is not None]
    timings, meter, ended = simulate_metered(server.engine.dep, served, max_num_seqs=server.engine.max_num_seqs,
                                             seed=server.cfg.seed, concurrency=closed,
                                             stop_s=None if stop_s is None else stop_s / scale)
    if gpu is not None:
        gpu += predicted_gpu(server, meter, ended, scale, f"{mode}-{replica}", mode)
    results = iter(timings)
    out = []
    answers: dict[int, int] = {}    # a turn's history: the answers before it (the model grew its prompt so)
    for i, (row, req) in enumerate(zip(rows, requests, strict=True)):
        res = next(results) if req is not None else None
        arrival = res.arrival_s * scale if res is not None and (closed or i in before) else row["offset_s"]
        scheduled = EPOCH_NS + int(arrival * 1e9)
        rec = RequestRecord(run_id=run_id, mode=mode, worker="plan", tenant=row["tenant"],
                            request_id=row["request_id"], scheduled_ns=scheduled,
                            offset_s=arrival if i in before else row["offset_s"],
                            replica=f"{mode}-plan", sent_ns=scheduled, lateness_ms=0.0)
        if req is not None and res is None:      # past the level's duration: never sent
            rec.status, rec.sent_ns, rec.lateness_ms = "not_sent", None, None
            rec.error = UNSENT_BECAUSE["level_end"]
            out.append(rec.as_row())
            continue
        if res is None:
            rec.status, rec.http_status, rec.error_kind, rec.error = "error", 400, "http", refused[i][:200]
            out.append(rec.as_row())
            continue
        times = [0.0, *(t * scale for t in res.chunk_s)]
        ttft, e2e = res.ttft_s * scale, res.e2e_s * scale
        rec.status, rec.http_status = "ok", 200
        rec.itl_ms = [(b - a) * 1e3 for a, b in pairwise(times)]
        rec.chunk_tokens = list(res.chunk_tokens)
        rec.ttft_ms = rec.ttft_sched_ms = ttft * 1e3
        rec.e2e_ms = rec.e2e_sched_ms = e2e * 1e3
        rec.first_token_ns, rec.last_token_ns = scheduled + int(ttft * 1e9), scheduled + int(e2e * 1e9)
        if i in before:
            answers[i] = answers.get(before[i], 0) + (out[before[i]]["completion_tokens"] or 0)
        rec.prompt_tokens, rec.completion_tokens = req.prompt_tokens + answers.get(i, 0), res.tokens
        rec.finish_reason = "length" if res.tokens >= row["max_tokens"] else "stop"
        if res.spec is not None and server.cfg.per_request_spec_decode_metrics != "none":   # as the server sends
            rec.spec_steps, rec.spec_draft_tokens, rec.spec_accepted_tokens = res.spec[:3]
            rec.spec_acceptance_histogram = list(res.spec[3])
        out.append(rec.as_row())
    return pa.Table.from_pylist(out, schema=REQUEST_SCHEMA)


def predicted_gpu(server: SimServer, meter: GpuMeter, ended: float, scale: float, label: str,
                  mode: str) -> list[dict]:
    """A predicted replica's GPUs once a second of its replay (virtual time, scaled as its records
    are), as contract.gpu_metrics rows."""
    dep = server.engine.dep
    gpus = SimGpus(meter, dep.tp, dep.hardware.hbm_bytes, dep.gpu_memory_utilization, dep.hardware.name,
                   int(label.rsplit("-", 1)[-1]), lambda: meter.started, host="plan")
    return [{"time_ns": EPOCH_NS + int(s.at_s * scale * 1e9), "mode": mode, "replica": label, "node": "plan",
             "source": "simulator", "uuid": s.uuid, "gpu": s.index,
             **{k: getattr(s, k) for k in GPU_SCHEMA.names[GPU_SCHEMA.get_field_index("power_w"):]}}
            for samples in gpus.every(GPU_SAMPLE_S, ended) for s in samples]


def capacity_of(base: pa.Table, server: SimServer, mode: str, start: float, max_rate: float,
                precision: float, replicas: int = 1) -> tuple[CapacityRow, list[dict]]:
    """The highest offered rate at which every tenant meets its SLOs in the model, which tenants
    missed them just above it (the binding SLOs), and how many probes decided on p99s their data
    cannot bound; and every probe, as capacity.parquet keeps it. Each probe is judged as `loadtest
    capacity` judges one (analysis.gate.probe_verdict). The model is deterministic for its seed,
    so each rate is probed once."""
    native = native_rate(base)
    rows: list[dict] = []

    def probe(rate: float) -> bool:
        trace = scale_rate(base, rate / native)
        gpu: list[dict] = []
        records = join_targets(predicted_records(trace, server, mode, "capacity", replicas, gpu=gpu), trace)
        verdict = probe_verdict(records, mode, MAX_ERROR_SHARE)
        rows.append(probe_row(mode, rate, 0, verdict, energy=predicted_energy(records, mode, gpu)))
        return verdict.passed

    found = search_capacity(probe, start, max_rate, precision=precision, repeats=1)
    with_phases(rows, found)
    binding = next((r["binding"] for r in rows if r["rate"] == found.failed_at), "")
    return CapacityRow(mode, found, binding or "-", unjudged=sum(not r["judged"] for r in rows),
                       fewest=min((r["fewest_tenant_requests"] for r in rows), default=None),
                       joules_per_token=energy_at(rows, found)), rows


def predicted_energy(records: pa.Table, mode: str, gpu: list[dict]) -> float | None:
    """A predicted probe's energy per output token, as a measured probe's summary has it."""
    found = per_token(SummaryView(long_summary(records, "capacity", [mode], gpu=pa.Table.from_pylist(
        gpu, schema=GPU_SCHEMA))), mode)
    return None if found is None else found.joules


def plan_capacity(base: pa.Table, servers: dict[str, SimServer], modes: list[str], fleet: FleetSpec,
                  run_dir: Path) -> list[CapacityRow]:
    """Each mode's highest rate within every tenant's SLOs in the model, searched from 1/16 of the
    scenario's rate to 16 times it; every probe into capacity.parquet."""
    native = native_rate(base)
    rows, probes = [], []
    for mode in modes:
        row, tried = capacity_of(base, servers[mode], mode, native / 16, native * 16, CAPACITY_PRECISION,
                                 fleet.replicas)
        probes += tried
        rows.append(row)
    write_probes(probes, run_dir / "capacity.parquet")
    return rows


def plan_levels(base: pa.Table, levels: list[Level], servers: dict[str, SimServer], fleet: FleetSpec,
                run_dir: Path, top: Manifest, prefix: str = "",
                on_level: Callable[[str, float], None] = lambda name, offered: None,
                stop_s: float | None = None) -> pa.Table:
    """Predict every level for every mode into `run_dir`/levels/<level>/ (a run folder each, made
    by the one level writer as a measured sweep's are, its manifest under `top`'s, named
    `prefix`<level>) and return the sweep's curves (LEVEL_SCHEMA), written to
    `run_dir`/sweep.parquet; `stop_s`: as a sweep's --level-duration, nothing sent from then on."""
    modes = list(servers)
    sweeps = []
    for level in levels:
        lv = new_level(top, base, level, run_dir / "levels" / level.name, prefix + level.name)
        tables = []
        gpu: list[dict] = []
        for mode in modes:
            mine: list[dict] = []
            records = predicted_records(lv.trace, servers[mode], mode, lv.manifest.run_id, fleet.replicas, stop_s,
                                        gpu=mine)
            (lv.dir / "requests" / f"mode={mode}").mkdir()
            files.write_table(records, lv.dir / "requests" / f"mode={mode}" / "part-plan-00000.parquet")
            (lv.dir / GPU_FOLDER / f"mode={mode}").mkdir(parents=True)
            files.write_table(pa.Table.from_pylist(mine, schema=GPU_SCHEMA),
                              lv.dir / GPU_FOLDER / f"mode={mode}" / "part-plan-00000.parquet")
            tables.append(records)
            gpu += mine
            lv.manifest.mode_runs[mode].end, lv.manifest.mode_runs[mode].records = "completed", records.num_rows
        lv.manifest.status = "completed"
        lv.manifest.write(lv.dir)
        records = pa.concat_tables(tables)
        long = long_summary(with_slos(records, lv.dir) or records, lv.manifest.run_id, modes,
                            gpu=pa.Table.from_pylist(gpu, schema=GPU_SCHEMA))
        files.write_table(long, lv.dir / "summary.parquet")
        sweeps.append(with_level(long, level.name, lv.offered, level.concurrency))
        on_level(level.name, lv.offered)
    sweep = pa.concat_tables(sweeps).cast(LEVEL_SCHEMA)
    files.write_table(sweep, run_dir / "sweep.parquet")
    return sweep


@dataclass
class Prediction:
    """A `loadtest plan` with its inputs checked: the fleet's modes as simulators, the base trace,
    the levels and the folder, and the manifest every level is written under."""

    fleet: FleetSpec
    modes: list[str]
    base: pa.Table
    levels: list[Level]
    servers: dict[str, SimServer]
    run_dir: Path
    top: Manifest
    hardware: str
    scenario: str

    def predicted(self) -> str:
        """What a plan's every output says first: nothing in it was measured."""
        return (f"PREDICTED: these numbers come from loadtest's performance model of {self.fleet.model} at "
                f"TP{self.fleet.tensor_parallel_size} on {self.hardware}, run in virtual time; nothing was measured")

    def title(self) -> str:
        return (f"Plan {self.run_dir.name}: {self.scenario} on fleet {self.fleet.name} ({self.hardware}), predicted "
                "by the simulator's performance model in virtual time")


def new_plan(args: PlanOptions) -> Prediction:
    """Everything a plan needs, checked before anything is written but its folder: ScenarioError,
    FleetError, SimArgsError or OutError, one line, otherwise."""
    fleet, raw_fleet = load_fleet(args.fleet.fleet or DEFAULT_FLEET)
    modes = resolve_modes(fleet.name, list(fleet.modes), args.fleet.modes)
    if args.fleet.num_speculative_tokens:
        fleet, modes = with_speculative_tokens(fleet, modes, args.fleet.num_speculative_tokens)
    if args.hardware is not None:
        try:
            sim_profile.resolve(args.hardware)
        except sim_profile.ProfileError as exc:
            raise FleetError(f"--hardware {exc}") from None
    scenario, raw = load_scenario(args.trace.scenario)
    seed = scenario.seed if args.trace.seed is None else args.trace.seed
    tokens = load_tokenizer(args.trace.tokenizer) if args.trace.tokenizer else None
    base = build_trace(scenario, requests=args.trace.requests or scenario.demo_requests, seed=seed, tokens=tokens)
    base = base.replace_schema_metadata({**(base.schema.metadata or {}), META_NAME: scenario.name.encode(),
                                         META_HASH: scenario_hash(raw).encode()})
    if args.capacity:
        native_rate(base)
    levels = levels_of(args.levels, base)
    if args.peak is not None and not args.capacity:
        raise ScenarioError("--peak: the fleet a peak needs comes from the capacity found; give --capacity too")
    if args.capacity and not has_targets(base):
        raise ScenarioError(f"--capacity: the scenario {scenario.name} sets no SLO targets to hold (give its "
                            "tenants an `slo`)")
    servers = {m: simulator_of(fleet, m, args.hardware) for m in modes}
    run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"plan-{scenario.name}",
                          base.num_rows * len(levels) * len(modes))
    hardware = args.hardware or fleet.sim.hardware
    top = Manifest(run_dir.name, {"name": scenario.name, "source": str(args.trace.scenario),
                                  "sha256": scenario_hash(raw),
                                  "tokens": tokens.label if tokens is not None else ESTIMATE},
                   {"name": fleet.name, "sha256": scenario_hash(raw_fleet), "spec": redacted(fleet),
                    "planned_on": hardware}, modes, seed, base.num_rows)
    plan = Prediction(fleet, modes, base, levels, servers, run_dir, top, hardware, scenario.name)
    top.simulated = plan.predicted()
    return plan
