"""What `loadtest soak` checks and prepares before anything starts: a new soak (its scenario,
duration, windows and targets, the run folder with a copy of the scenario and the trace's plan), or
one to resume (read back from its manifest, with where each mode goes on and the rows whose
outcome the crash lost). Bad input raises ScenarioError or FleetError with one line."""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from analysis.reader import ContractError, read_requests
from cluster import FleetError
from common import files
from common.times import utc_now
from contract.manifest import Manifest
from contract.parts import record_parts
from contract.records import REQUEST_SCHEMA, RequestRecord
from loadtest.engine.inputs import FleetChoice, choose_fleet, new_run_dir
from loadtest.options.replaying import SOAK_WINDOW_S, SoakOptions, value_of, with_values
from loadtest.request.sink import ParquetSink
from scenarios import ScenarioError
from scenarios.spec import Closed, Scenario, load_scenario
from scenarios.stream import TraceStream
from scenarios.tokens import ESTIMATE, TokenCounter, load_tokenizer
from scenarios.trace import scenario_hash

MIN_WINDOW_S = 5.0    # an SLO window shorter than this holds too few requests to judge a p99
MAX_WINDOWS = 20_000  # sliding windows over a soak (an 8 h soak at a 5 m window every 1 m: 480)
PART_S = 60.0         # a trace part covers this many seconds of arrivals (less when --window is shorter)
LOST = "the soak was killed after this request was due; its outcome is unknown (resumed with --resume)"


# The client's options a resumed soak takes from its manifest, as the soak started (by field name).
CLIENT = ("workers", "ray_workers", "ray_worker_nodes", "max_inflight", "timeout", "lateness_limit", "api_key_env",
          "max_errors")


class RunLock:
    """An exclusive lock on a soak's folder for the whole command: a second soak (a resume while
    it still runs, two resumes at once) is refused instead of writing the same records twice."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".soak.lock"
        self.file = open(self.path, "a")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise ScenarioError(f"{run_dir}: another soak is writing it (it holds {self.path})") from None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


@dataclass
class Soak:
    """One soak, as its manifest's `soak` keeps it."""

    run_dir: Path
    manifest: Manifest
    stream: TraceStream
    choice: FleetChoice
    options: SoakOptions                                   # for a resumed soak: its client as it started
    params: dict                                           # the manifest's soak: duration, windows, targets, ...
    extra: dict[str, dict] = field(default_factory=dict)   # mode -> ReplayConfig fields (flush, resume)
    lock: RunLock | None = None
    resumed_unknown: int = 0                               # rows recorded as unknown outcomes on resume
    dropped: int = 0                                       # an interruption's not_sent records, sent now

    @property
    def targets(self) -> dict | None:
        return self.params.get("targets")


def tenant_targets(scenario: Scenario, slo: dict[str, float] | None) -> dict | None:
    """tenant -> {slo column: ms}: --slo for every tenant, else each tenant's own (None: no target)."""
    if slo:
        return {t: {f"slo_{k}": v for k, v in slo.items()} for t in scenario.tenants}
    out = {t: {f"slo_{k}": v for k, v in spec.slo.model_dump().items() if v is not None}
           for t, spec in scenario.tenants.items()}
    out = {t: v for t, v in out.items() if v}
    return out or None


def too_many_windows(args: SoakOptions, duration: float, step: float) -> str:
    """One line for a soak that would hold more than MAX_WINDOWS windows, blaming the flag the user
    gave: --window-step, else --window (its step a fifth of it), else --duration (or the scenario's)."""
    count = f"{duration / step:,.0f} windows, past the {MAX_WINDOWS:,} a soak is judged over"
    if args.window_step is not None:
        return f"--window-step: {step:g} s over the {duration:g} s soak is {count}: give a longer step"
    if args.window != SOAK_WINDOW_S:
        return (f"--window: {args.window:g} s (each a fifth of it apart) over the {duration:g} s soak is {count}: "
                "give a longer window or --window-step")
    source = "--duration" if args.duration else f"the scenario's duration ({args.trace.scenario})"
    return (f"{source}: {duration / 3600:,.6g} h at the default window ({SOAK_WINDOW_S:g} s, every {step:g} s) is "
            f"{count}: give a shorter --duration, or a longer --window or --window-step")


def new_soak(args: SoakOptions, check: Callable[[], None]) -> Soak:
    """A soak's start checked (`check`: the command's observers, before the run folder is made)."""
    scenario, raw = load_scenario(args.trace.scenario)
    if isinstance(scenario.arrival, Closed):
        raise ScenarioError(f"{scenario.name}: a soak needs open-loop arrivals (its arrival is closed loop)")
    duration = args.duration or scenario.duration
    if not duration:
        raise ScenarioError(f"--duration: the scenario {scenario.name} sets no duration; give one (e.g. 8h)")
    step = args.window_step or args.window / 5
    if args.window > duration:
        raise ScenarioError(f"--window: {args.window:g} s is longer than the soak ({duration:g} s)")
    if step > args.window:
        raise ScenarioError(f"--window-step: {step:g} s is longer than the window ({args.window:g} s)")
    if args.window < MIN_WINDOW_S:
        raise ScenarioError(f"--window: at least {MIN_WINDOW_S:g} s, got {args.window:g} s")
    if duration / step > MAX_WINDOWS:
        raise ScenarioError(too_many_windows(args, duration, step))
    sha = scenario_hash(raw)
    seed = scenario.seed if args.trace.seed is None else args.trace.seed
    rate_scale = args.trace.rate_scale
    tokens = load_tokenizer(args.trace.tokenizer) if args.trace.tokenizer else None
    stream = TraceStream(scenario, sha, duration, min(PART_S, args.window), seed, rate_scale, tokens)
    choice = choose_fleet(args.fleet, args.client.api_key_env)
    check()
    run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"soak-{scenario.name}")
    lock = RunLock(run_dir)
    (run_dir / "scenario.toml").write_bytes(raw)
    stream.start(run_dir / "trace")
    info = {"name": scenario.name, "source": str(args.trace.scenario), "sha256": sha,
            "rate_scale": rate_scale or scenario.rate_scale, "copy": "scenario.toml",
            "tokens": tokens.label if tokens is not None else ESTIMATE}
    manifest = Manifest(run_id=run_dir.name, scenario=info, fleet=choice.info, modes=choice.modes, seed=seed,
                        requests=stream.info.rows, skipped=choice.skipped)
    params = {"duration_s": duration, "window_s": args.window, "step_s": step, "part_s": stream.window_s,
              "flush_s": args.flush_every, "seed": seed, "rate_scale": rate_scale,
              "tokenizer": ({"path": str(Path(args.trace.tokenizer).resolve()), "label": tokens.label}
                            if tokens is not None else None),
              "targets": tenant_targets(scenario, args.slo.slo), "fleet_source": choice.info.get("source"),
              "client": {k: value_of(args, k) for k in CLIENT},
              "stretches": [{"started_at": utc_now(), "resumed": False}]}
    manifest.soak = params
    extra = {m: {"flush_s": args.flush_every} for m in choice.modes}
    return Soak(run_dir, manifest, stream, choice, args, params, extra, lock)


def _tokenizer_again(used: dict | None) -> TokenCounter | None:
    """The tokenizer a soak cut its prompts with, read again for its parts not yet written: the same
    file (by its SHA-256), or one line saying it is not."""
    if used is None:
        return None
    tokens = load_tokenizer(used["path"])
    if tokens.label != used["label"]:
        raise ScenarioError(f"--resume: the soak's tokenizer {used['path']} has changed since it started (it was "
                            f"{used['label']}); put that file back to resume it")
    return tokens


def resumed_soak(args: SoakOptions, check: Callable[[], None]) -> Soak:
    """The soak in --resume RUN, set to go on: for each mode the row it goes on from, and a record
    (an unknown outcome) for every earlier row the crash left without one."""
    run_dir = Path(args.resume or "")
    try:
        manifest = Manifest.read(run_dir)
    except ValueError as exc:
        raise ScenarioError(f"--resume: {exc}") from None
    params = manifest.soak
    if not params:
        raise ScenarioError(f"--resume: {run_dir} is not a soak (its manifest has no `soak`)")
    scenario, _raw = _scenario_again(run_dir, manifest)
    stream = TraceStream(scenario, manifest.scenario["sha256"], params["duration_s"], params["part_s"],
                         params["seed"], params["rate_scale"], _tokenizer_again(params.get("tokenizer")))
    stream.start(run_dir / "trace")
    lock = RunLock(run_dir)
    # the client as the soak started it (--workers, ...)
    args = with_values(args, **{k: v for k, v in params.get("client", {}).items() if k in CLIENT})
    fleet = args.fleet
    if not (fleet.fleet or fleet.endpoints):
        source = params.get("fleet_source")
        if not source or source == "--endpoints":
            raise FleetError("--resume: the soak ran against --endpoints given on the command line; give them again")
        # a fleet held up by `cluster up` (its state file, which the manifest's fleet names as its
        # source beside the endpoints it had), or a fleet file to provision again
        held = "endpoints" in manifest.fleet
        fleet = replace(fleet, **{"endpoints" if held else "fleet": source})
    choice = choose_fleet(replace(fleet, modes=",".join(manifest.modes)), args.client.api_key_env)
    check()
    soak = Soak(run_dir, manifest, stream, choice, args, params, lock=lock)
    recorded = _recorded(run_dir)
    stretch = len(params.get("stretches", []))
    for mode in choice.modes:
        soak.extra[mode] = {"flush_s": params["flush_s"], **_go_on(soak, mode, recorded, stretch)}
    if all(soak.extra[m]["first_row"] >= stream.info.rows for m in choice.modes):
        raise ScenarioError(f"--resume: every request of {run_dir} is recorded already; `loadtest report` reads it")
    params.setdefault("stretches", []).append({"started_at": utc_now(), "resumed": True,
                                               "from_row": {m: soak.extra[m]["first_row"] for m in choice.modes},
                                               "unknown_outcomes": soak.resumed_unknown,
                                               "not_sent_dropped": soak.dropped})
    manifest.status, manifest.reason, manifest.ended_at = "running", None, None
    return soak


def _scenario_again(run_dir: Path, manifest: Manifest) -> tuple[Scenario, bytes]:
    """The scenario the soak started with: from where it was (so the files it names, a document or
    a prompts file, resolve as they did), else the copy in its folder; checked by its hash."""
    sha = manifest.scenario.get("sha256")
    source = manifest.scenario.get("source", "")
    for where in (source, run_dir / manifest.scenario.get("copy", "scenario.toml")):
        try:
            scenario, raw = load_scenario(where)
        except ScenarioError:
            continue
        if scenario_hash(raw) == sha:
            return scenario, raw
    raise ScenarioError(f"--resume: neither {source} nor {run_dir}/scenario.toml is the scenario the soak started "
                        "with (its sha256 in the manifest differs)")


def _recorded(run_dir: Path) -> pa.Table | None:
    try:
        return read_requests(run_dir, columns=["request_id", "mode", "offset_s", "scheduled_ns", "status"])
    except ContractError:   # killed before its first part was written
        return None


def _index(request_ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each request id's row in the trace (r000038 -> 38; scenarios.trace writes them so)."""
    return pc.cast(pc.utf8_slice_codeunits(request_ids, 1), pa.int64())


def _drop_placeholders(folder: Path, after: int) -> int:
    """Remove the `not_sent` records an interrupted replay wrote for rows after row `after` (they
    were never sent: the resumed soak sends them), rewriting each part file atomically."""
    dropped = 0
    for part in record_parts(folder):
        table = pq.read_table(part)
        drop = pc.and_(pc.equal(table["status"], "not_sent"), pc.greater(_index(table["request_id"]), after))
        n = pc.sum(drop.cast("int64")).as_py() or 0
        if not n:
            continue
        keep = table.filter(pc.invert(drop))
        if keep.num_rows:
            files.write_table(keep, part, compression="zstd")
        else:
            part.unlink()
        dropped += n
    return dropped


def _go_on(soak: Soak, mode: str, recorded: pa.Table | None, stretch: int) -> dict:
    """Where `mode` goes on (first_row, resume_at_s): after the last request it sent (rows are in
    time order). Its interruption's `not_sent` records after that are dropped (those rows are sent
    now), and each earlier row without a record is recorded as an unknown outcome (it may have
    been sent; its record was never flushed)."""
    folder = soak.run_dir / "requests" / f"mode={mode}"
    mine = recorded.filter(pc.equal(recorded["mode"], mode)) if recorded is not None else None
    sent = mine.filter(pc.not_equal(mine["status"], "not_sent")) if mine is not None else None
    if sent is None or sent.num_rows == 0:
        soak.dropped += _drop_placeholders(folder, -1) if folder.is_dir() else 0
        return {"first_row": 0, "resume_at_s": 0.0}
    index = _index(sent["request_id"]).to_numpy()
    if index.max() >= soak.stream.info.rows or index.min() < 0:
        raise ScenarioError(f"--resume: {folder} holds requests this soak's trace does not")
    last = int(np.argmax(index))
    first, at = int(index[last]) + 1, float(soak.stream.offsets()[index[last]])
    t0_ns = int(sent["scheduled_ns"][last].as_py() - sent["offset_s"][last].as_py() * 1e9)
    soak.dropped += _drop_placeholders(folder, first - 1)
    kept = mine.filter(pc.or_(pc.not_equal(mine["status"], "not_sent"), pc.less(_index(mine["request_id"]), first)))
    have = set(kept["request_id"].to_pylist())
    trace = ds.dataset(soak.run_dir / "trace", format="parquet").to_table(
        columns=["request_id", "tenant", "offset_s"], filter=pc.field("offset_s") <= at + 1.0)
    sink = ParquetSink(folder, f"resume{stretch}", REQUEST_SCHEMA, ThreadPoolExecutor(1))
    for rid, tenant, off in zip(*(trace[c].to_pylist() for c in ("request_id", "tenant", "offset_s")), strict=True):
        if rid not in have and soak.stream.index_of(rid) < first:
            sink.add(RequestRecord(run_id=soak.manifest.run_id, mode=mode, worker=f"resume{stretch}", tenant=tenant,
                                   request_id=rid, scheduled_ns=t0_ns + round(off * 1e9), offset_s=off,
                                   status="error", error_kind="worker_lost", error=LOST).as_row())
            soak.resumed_unknown += 1
    sink.close()
    return {"first_row": first, "resume_at_s": at}


LEAD_PARTS = 2   # trace parts written ahead of the replay's clock


class PartWriter(threading.Thread):
    """Writes the trace's parts LEAD_PARTS ahead of where the soak's clock is (from `at_s` now)."""

    def __init__(self, stream: TraceStream, folder: Path, at_s: float) -> None:
        super().__init__(daemon=True, name="soak-trace-parts")
        self.stream, self.folder, self.at_s, self.t0 = stream, folder, at_s, time.monotonic()
        self.stop = threading.Event()
        self.error: Exception | None = None
        self.write_upto(stream.part_of(at_s) + LEAD_PARTS)   # before any replay starts

    def write_upto(self, k: int) -> None:
        for part in range(min(k, self.stream.parts - 1) + 1):
            self.stream.write(self.folder, part)

    def run(self) -> None:
        try:
            while not self.stop.wait(1.0):
                now_s = self.at_s + time.monotonic() - self.t0
                self.write_upto(self.stream.part_of(now_s) + LEAD_PARTS)
                if self.stream.part_of(now_s) + LEAD_PARTS >= self.stream.parts:
                    return
        except Exception as exc:   # the replay then waits for a part that never comes, and says so
            self.error = exc
