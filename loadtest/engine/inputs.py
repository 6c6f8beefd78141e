"""What a replaying command checks and prepares before anything starts: the trace (built from a
scenario or read from a file), the fleet (a fleet file, or one already running), the run folder,
and how many Locust workers to use. Bad input raises ScenarioError or FleetError with one line
per problem; nothing has started yet."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from analysis.slo import has_targets
from cluster import FleetError
from cluster.fleet import FleetSpec, available_modes, load_fleet, redacted, resolve_modes, with_speculative_tokens
from cluster.provision import Replica, ray_address
from cluster.state import ClusterState, ReplicaState, check_health, load_endpoints
from common.names import slug
from contract.manifest import Manifest
from loadtest.options.replaying import DEFAULT_FLEET, FleetOptions, TraceOptions
from scenarios import ScenarioError
from scenarios.limits import disk_problem
from scenarios.spec import eos_notes, load_scenario
from scenarios.tokens import ESTIMATE, load_tokenizer
from scenarios.trace import Targets, attach_slos, build_trace, load_trace_file, scale_rate, scenario_hash


@dataclass(frozen=True)
class Trace:
    table: pa.Table
    info: dict          # the manifest's `scenario`: name, source, sha256, rate_scale, ...
    seed: int | None


@dataclass(frozen=True)
class FleetChoice:
    """The fleet to replay against: one to provision (`spec`), or one already running (`existing`)."""

    spec: FleetSpec | None
    info: dict          # the manifest's `fleet`
    modes: list[str]
    existing: ClusterState | None = None
    skipped: dict[str, str] = field(default_factory=dict)   # mode -> why it cannot start (--skip-unavailable)

    @property
    def simulated(self) -> str | None:
        """Whether the numbers will come from the simulator (FleetSpec.simulated): known for a fleet
        provisioned here or held up by `cluster up`; not for bare --endpoints URLs."""
        return self.spec.simulated() if self.spec is not None else None


def prepare_trace(args: TraceOptions, slo_gate: bool = False, slo: Targets = ()) -> Trace:
    """The trace to replay, with the targets of --slo (a tenant's, or every tenant's) in place of its
    own, checked against --slo-gate (which needs targets to check)."""
    trace = _trace(args)
    if slo:
        table = attach_slos(trace.table, slo, "--slo")
        given = [{"tenant": tenant or "*", **targets} for tenant, targets in slo]
        trace = Trace(table, {**trace.info, "slo": given}, trace.seed)
    if slo_gate and not has_targets(trace.table):
        raise ScenarioError(f"--slo-gate: the trace {trace.info['name']} sets no SLO target (slo_ttft_p99_ms, "
                            "slo_tpot_p99_ms, slo_e2e_p99_ms are empty); give tenants an `slo` in the scenario, "
                            "attach targets with `trace import --slo`, or give them here with --slo")
    return trace


def _trace(args: TraceOptions) -> Trace:
    """Built from --scenario, or read from --trace (with --requests and --rate-scale applied; a
    trace file keeps its seed, so --seed with it is refused)."""
    if args.trace:
        if args.seed is not None:
            raise ScenarioError("--seed: a trace file is replayed exactly as it was built; give --scenario to build "
                                "one with a seed, or rebuild the file (`loadtest trace build --seed N`)")
        if args.tokenizer:
            raise ScenarioError("--tokenizer: a --trace file's prompts were cut when it was built; give --scenario to "
                                "build one with the tokenizer, or rebuild the file (`loadtest trace build "
                                "--tokenizer`)")
        table, meta = load_trace_file(Path(args.trace))
        if args.requests:
            table = table.slice(0, args.requests)
        if args.rate_scale:
            table = scale_rate(table, args.rate_scale)
        info = {"name": meta.get("name", Path(args.trace).stem), "source": str(args.trace),
                "sha256": meta.get("sha256", ""), "rate_scale": args.rate_scale or 1.0}
        return Trace(table, info, None)
    scenario, raw = load_scenario(args.scenario)
    seed = scenario.seed if args.seed is None else args.seed
    tokens = load_tokenizer(args.tokenizer) if args.tokenizer else None
    table = build_trace(scenario, requests=args.requests or scenario.demo_requests, seed=seed,
                        rate_scale=args.rate_scale, tokens=tokens)
    arrival = scenario.arrival.model_dump(by_alias=True) if scenario.arrival else "per tenant"
    info = {"name": scenario.name, "source": str(args.scenario), "sha256": scenario_hash(raw),
            "rate_scale": args.rate_scale or scenario.rate_scale, "arrival": arrival,
            "tokens": tokens.label if tokens is not None else ESTIMATE}
    notes = eos_notes(scenario)   # what its acceptance will not measure: said as the run starts
    return Trace(table, {**info, "notes": notes} if notes else info, seed)


def choose_fleet(args: FleetOptions, api_key_env: str) -> FleetChoice:
    """--fleet (a file or built-in name, to provision) or --endpoints (running; its replicas of
    the chosen modes, default all, must answer /health, asked with the key in `api_key_env`)."""
    modes_text = args.modes
    if args.endpoints:
        if args.fleet:
            raise FleetError("give --fleet (provision a fleet) or --endpoints (use a running one), not both")
        if args.num_speculative_tokens:
            raise FleetError("--num-speculative-tokens makes a mode per K to provision; a running fleet (--endpoints) "
                             "serves the K it was started with")
        existing, from_file = load_endpoints(args.endpoints, api_key_env)
        modes = resolve_modes(existing.fleet, existing.modes, modes_text)
        check_health([r for r in existing.replicas if r.mode in modes], api_key_env)
        return FleetChoice(existing.spec(), endpoints_fleet_info(existing, args.endpoints, from_file, modes), modes,
                           existing)
    spec, raw = load_fleet(args.fleet or DEFAULT_FLEET)
    modes = resolve_modes(spec.name, list(spec.modes), modes_text)
    if args.num_speculative_tokens:
        spec, modes = with_speculative_tokens(spec, modes, args.num_speculative_tokens)
    modes, skipped = available_modes(spec, modes, local=ray_address(args.address) is None,
                                     skip=args.skip_unavailable)
    for mode, why in skipped.items():
        print(f"loadtest run: skipping {mode}: {why}", file=sys.stderr)
    for mode in modes:
        if spec.modes[mode].note:
            print(f"loadtest run: note: modes.{mode}: {spec.modes[mode].note}", file=sys.stderr)
    info = {"name": spec.name, "source": str(args.fleet or DEFAULT_FLEET), "sha256": scenario_hash(raw),
            "spec": redacted(spec)}
    return FleetChoice(spec, info, modes, skipped=skipped)


def new_manifest(run_dir: Path, trace: Trace, fleet: FleetChoice) -> Manifest:
    """The manifest of a replaying command's run folder, before anything starts."""
    return Manifest(run_id=run_dir.name, scenario=trace.info, fleet=fleet.info, modes=fleet.modes, seed=trace.seed,
                    requests=trace.table.num_rows, skipped=fleet.skipped, simulated=fleet.simulated)


def endpoints_fleet_info(state: ClusterState, text: str, from_file: bool, modes: list[str]) -> dict:
    """The manifest's `fleet` for a run against a running fleet (`--endpoints`)."""
    return {"name": state.fleet, "source": str(Path(text).resolve()) if from_file else "--endpoints",
            "endpoints": {m: [r.url for r in state.replicas if r.mode == m] for m in modes},
            "spec": state.fleet_spec}


class OutError(ValueError):
    """--out cannot take this run: its folder holds a run already, or cannot be written (one line)."""


def new_run_dir(out: str, run_id: str | None, name: str, records: int = 0) -> Path:
    """results/<run_id>/ with its logs/ folder (run_id defaults to the UTC time and `name`);
    OutError when that folder already holds a run, cannot be written (read-only, no permission,
    a file in the way), or its disk has no room for the `records` the command will write, before
    anything starts."""
    run_dir = Path(out) / (run_id or f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{slug(name)}")
    if run_dir.exists() and any(run_dir.iterdir()):
        raise OutError(f"{run_dir} already exists; pick another --run-id")
    if (full := disk_problem(records, run_dir)) is not None:
        raise OutError(f"--out {out}: {full}")
    try:
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OutError(f"--out {out}: cannot write {run_dir} ({exc.strerror or exc})") from None
    return run_dir


def replica_entry(rep: Replica | ReplicaState) -> dict:
    """A replica as the manifest lists it under its mode (with, for one this run started, its
    node and what its start cost)."""
    entry = {"label": rep.label, "url": rep.url, "pid": rep.pid, "log": str(rep.log_path)}
    if isinstance(rep, Replica):
        entry.update(node_id=rep.node_id, node=rep.node_ip, **{k: round(v, 3) if isinstance(v, float) else v
                                             for k, v in asdict(rep.timing).items()})
        entry["memory"] = rep.memory.as_dict() if rep.memory else None
    return entry


def default_workers(fleet: FleetSpec | None, n_modes: int) -> int:
    """One Locust worker per core, minus the cores local simulator replicas reserve."""
    reserved = 0.0
    if fleet is not None and fleet.engine == "sim":
        reserved = fleet.cpus_per_replica * fleet.replicas * n_modes
    return max(1, int((os.cpu_count() or 1) - math.ceil(reserved)))
