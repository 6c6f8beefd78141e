"""Every replaying command's options, each declared once: one frozen record per command, composed
of the groups several commands share (the fleet, the trace, the run folder, the client's limits,
its processes, the gates, the client's /metrics). A field's metadata holds its flag, how its text
is read (`values.py`, which holds it to its bounds), its metavar and its help; the field's default
is the one default. The command line's grammar (`loadtest.commands.grammar`) is generated from
these records and reads the parsed values back into them; the engine takes the records and knows
nothing of argparse. In a help text `{default}` is the field's default and `{scope}` the
command's unit of replay ("per mode", "per probe"), both filled in by the grammar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields, is_dataclass, replace
from typing import Any, ClassVar

from loadtest.options.values import (
    at_most,
    concurrency_levels,
    in_path,
    node_selector,
    non_negative_float,
    non_negative_int,
    odd_count,
    out_dir,
    percent,
    plain_name,
    port,
    port_or_zero,
    positive_float,
    positive_floats,
    positive_int,
    precision_percent,
    seconds,
    slo_targets,
    speculative_tokens,
    tenant_slo_targets,
    worker_count,
)
from loadtest.options.values import (
    duration as time_span,
)
from loadtest.options.values import (
    seed as random_seed,
)
from loadtest.replay.options import MAX_INFLIGHT, ReplayConfig
from loadtest.request.retry import POLICIES

DEFAULT_FLEET = "local-sim"          # the simulator on a local Ray: what runs on any machine
# Where a capacity search stops: when the highest passing and the lowest failing rate are within
# this share of the former; the one default of `capacity --precision` and of `plan --capacity`
# (a measured and a planned capacity are bisected alike, so they can be held side by side).
CAPACITY_PRECISION = 0.10
SOAK_WINDOW_S = 300.0                # a soak's SLO window: five minutes, as SLO dashboards commonly hold p99s
DEFAULT_OUT = "results"              # where run folders go (and a held fleet's logs, `cluster up`)
# A GPU-hour's price past any cloud's (H100s rent for a few dollars an hour): a typo, not a price.
MAX_GPU_HOUR_COST = 10_000.0
GPU_HOUR_COST_HELP = ("what one GPU-hour costs you (any currency): report.md then gives each level's cost per million "
                      "output tokens, from its output tokens/s per GPU")
# A peak past any fleet's: a million requests/s (the replicas it needs are still a count a table shows).
MAX_PEAK_REQ_S = 1_000_000.0
PEAK_HELP = ("the peak load the fleet must serve, in req/s of the scenario's mix: per mode, the replicas and GPUs "
             "that hold it within every SLO (from the capacity found per replica), and the mode to choose")
DEFAULT_SCENARIO = "saas-mix"        # the built-in multi-tenant mix
TOKENIZER_HELP = ("the model's tokenizer.json (from its repository): the scenario's prompts are cut to their lengths "
                  "in its tokens, and each request's planned prompt length (prompt_tokens_est) is its count, not "
                  "an estimate of 4 characters a token; the trace's metadata and the report say which was used "
                  "(a chat request's count is of its messages' text: the server adds its chat template's tokens)")
DEFAULT_RATE_SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)   # a sweep's levels, as multiples of the scenario's rate
MODE_ORDERS = ("auto", "parallel", "turns")   # --mode-order: resolved by bringup.at_once
COOLDOWN_S = 2.0                     # between modes (and levels, and probes): the last one's requests drain
# A mode fails the error gate past this share of failed requests (the gate's definition:
# contract.records.outcomes). DESIGN.md's default.
MAX_ERROR_SHARE = 0.10


def option(default: Any = None, help: str = "", *, flag: str | None = None, parse: Callable[[str], Any] | None = None,
           metavar: str | None = None, choices: tuple[str, ...] | None = None, group: str | None = None,
           exclusive: str | None = None, positional: str | None = None, required: bool = False,
           repeat: bool = False) -> Any:
    """A field that is a command-line option: `flag` (default: --the-field-name), read from its
    text by `parse`, in the argument `group` or the mutually `exclusive` group of that name;
    `required`, or given again and again (`repeat`: a tuple). A bool that defaults to False is a
    switch. A `positional` is an argument, not a flag ("1": one value, "+": one or more)."""
    meta = {"help": help, "flag": flag, "parse": parse, "metavar": metavar, "choices": choices, "group": group,
            "exclusive": exclusive, "positional": positional, "required": required, "repeat": repeat}
    return field(default=default, metadata={"option": meta})


def group(record: Callable[[], Any], *, omit: tuple[str, ...] = (), hide: tuple[str, ...] = (),
          helps: dict[str, str] | None = None, suffix: str = "", suffixed: tuple[str, ...] = ()) -> Any:
    """A field holding a group of options (itself a record of options), made by `record`: its
    fields in `omit` are not offered (they keep the default), those in `hide` are accepted but
    left out of --help, `helps` replaces some help texts, and `suffix` is added to those in
    `suffixed`."""
    meta = {"omit": omit, "hide": hide, "helps": helps or {}, "suffix": suffix, "suffixed": suffixed}
    return field(default_factory=record, metadata={"group": meta})


@dataclass(frozen=True)
class FleetOptions:
    """The fleet to provision, or one already running, and which of its modes to replay."""

    fleet: str | None = option(help="built-in fleet name or a fleet TOML file (default: "
                               f"{DEFAULT_FLEET}, the simulator on a local Ray)", metavar="NAME|PATH")
    endpoints: str | None = option(
        help="replay against a fleet that is already running instead of provisioning one: the state file of "
        "`loadtest cluster up` (e.g. .loadtest/cluster.json), or MODE=URL pairs of servers started elsewhere "
        "(replicas of one mode joined by |)", metavar="STATE|MODE=URL,...")
    address: str | None = option(
        help="join this Ray cluster (e.g. auto, or ray://head:10001) instead of starting a local Ray; default: "
        "$RAY_ADDRESS if set (as under `ray job submit`)", metavar="RAY_ADDRESS")
    modes: str | None = option(
        help="comma-separated modes of the fleet to test (default: all the fleet's modes; local-sim has "
        "baseline,draft,medusa,eagle,ngram)", metavar="A,B,...")
    num_speculative_tokens: list[int] | None = option(
        help="replay each speculating mode once per number of draft tokens a step, e.g. 2,3,5: each K its own "
        "mode (eagle-k2, eagle-k3, ...) with its own replicas, curve and place in the decision (a fleet it "
        "provisions; default: each mode's own num_speculative_tokens)", parse=speculative_tokens, metavar="K,K,...")
    skip_unavailable: bool = option(
        False, "run the other modes when a mode cannot start (a placeholder checkpoint such as h100-70b's "
        "your-org/... Medusa heads, or a model path that does not exist); without it such a mode is refused "
        "before anything starts (exit 2)")


@dataclass(frozen=True)
class TraceOptions:
    """The trace: built from a scenario, or read from a file; how many requests, how fast."""

    scenario: str = option(DEFAULT_SCENARIO, "built-in scenario name or a scenario TOML file (default: {default})",
                           metavar="NAME|PATH")
    trace: str | None = option(
        help="replay this trace.parquet (from `loadtest trace build` or `trace import`) instead of building one "
        "from --scenario; --requests keeps its first N rows, --rate-scale speeds it up", metavar="FILE")
    requests: int | None = option(
        help="requests in the trace (default: the scenario's demo size; --requests 50000 runs saas-mix in full)",
        parse=positive_int, metavar="N")
    seed: int | None = option(
        help="trace seed (default: the scenario's; a --trace file keeps the seed it was built with)", parse=random_seed,
        metavar="N")
    rate_scale: float | None = option(
        help="multiply the arrival rates by X: the scenario's (default: its rate_scale), or a --trace file's (its "
        "times divided by X; not for a closed-loop trace)", parse=positive_float, metavar="X")
    tokenizer: str | None = option(help=TOKENIZER_HELP, parse=in_path, metavar="TOKENIZER.json")


@dataclass(frozen=True)
class FolderOptions:
    """Where the results go."""

    out: str = option(DEFAULT_OUT, "results directory (default: {default}/)", metavar="DIR", parse=out_dir)
    run_id: str | None = option(help="name of this run's folder under --out (default: UTC time and scenario)",
                                parse=plain_name, metavar="ID")
    progress_every: float = option(30.0, "when the output is not a terminal (a log, CI, nohup), a progress line per "
                                   "running mode every S seconds (default {default})", parse=seconds(positive_float),
                                   metavar="S")


@dataclass(frozen=True)
class ClientOptions:
    """The client's limits on each request; their defaults are the replay's own (ReplayConfig)."""

    max_inflight: int = option(
        ReplayConfig.max_inflight, "most requests in flight {scope}; past it a request waits and its lateness is "
        "recorded (default {default}; at most " f"{MAX_INFLIGHT:,})", parse=at_most(positive_int, MAX_INFLIGHT),
        metavar="N")
    timeout: float = option(ReplayConfig.timeout_s, "per-request timeout in seconds (default {default})",
                            parse=seconds(positive_float), metavar="S")
    retry_after: str = option(
        ReplayConfig.retry_after, "a 429 or 503 with Retry-After: record it as an error (default), or honour it: "
        "wait and resend, within --timeout, at most --max-retries times (the record counts its attempts)",
        choices=POLICIES)
    max_retries: int = option(ReplayConfig.max_retries, "with --retry-after honour, resends per request at most "
                              "(default {default})", parse=non_negative_int, metavar="N")
    api_key_env: str = option(
        ReplayConfig.api_key_env, "environment variable holding the servers' API key, sent as a Bearer token; the "
        "key is never taken on the command line nor written anywhere (default {default})", metavar="NAME")
    lateness_limit: float = option(
        ReplayConfig.lateness_limit_ms, "mark a replay client_limited when its send lateness p99 exceeds MS "
        "(default {default}) or a Locust process ran above 90% of a core", parse=positive_float, metavar="MS")


@dataclass(frozen=True)
class ProcessOptions:
    """How the modes are replayed: in turn or at once, and by how many Locust processes."""

    mode_order: str = option(
        "auto", "how the modes share the time: auto (default) replays them all at once where the pre-flight holds "
        "every mode on the cluster at once and no two replicas compute on the same processor (the simulator, or "
        "GPUs), and in turns otherwise (a vLLM fleet on CPUs, whose servers would each take every core, or "
        "--endpoints, whose hardware this cannot see); parallel insists on all at once (refused, exit 2, when "
        "the cluster cannot hold every mode); turns replays one mode after the other. At once, the modes share "
        "the client machine and the manifest says so", choices=MODE_ORDERS)
    workers: int | None = option(
        help="Locust worker processes per mode: 1 runs one process; more run a master and N workers, each "
        "replaying its shard of the trace (at most what fits in half the memory). auto (default): as many as the "
        "trace's busiest 10 s of requests and streamed events take at half a core each (the client's per-core "
        "cost, measured by bench/loadgen.py), within the free cores here (less what local simulator replicas "
        "reserve) or, with --ray-workers, the free CPUs of the workers' Ray nodes shared by the modes replayed at "
        "once; the console's client: line says how many and why", parse=worker_count, metavar="N|auto")
    ray_workers: bool = option(
        False, "start the --workers Locust workers as Ray actors, one CPU each, dealt over the Ray cluster's nodes "
        "without GPUs where it has any (else over every node; the master stays here); --out must then be on "
        "storage every node mounts. The manifest names each worker's node")
    ray_worker_nodes: str | None = option(
        help="the Ray nodes the workers go to instead (implies --ray-workers): those declaring the Ray resource "
        "NAME (ray start --resources), or carrying the node label KEY=VALUE (ray start --labels)",
        parse=node_selector, metavar="NAME|KEY=VALUE")

    @property
    def on_ray(self) -> bool:
        """The workers run as Ray actors: asked for, or their nodes named."""
        return self.ray_workers or self.ray_worker_nodes is not None


METRICS = "client metrics (Prometheus)"


@dataclass(frozen=True)
class MetricsOptions:
    """The client's own /metrics, served while a command replays."""

    metrics_port: int = option(
        0, "serve the client's view on http://HOST:PORT/metrics while the command runs: requests by status and "
        "error kind, TTFT, TPOT, ITL, E2E and send lateness as histograms, in-flight requests, output tokens and "
        "chunks, labelled by run, mode and tenant (default {default}: a free port, printed, written to the "
        "manifest and to OUT/prometheus-targets/RUN_ID.json, a Prometheus file_sd file that also names every "
        "replica by mode, removed at the end)", parse=port_or_zero, metavar="PORT", group=METRICS)
    metrics_host: str = option(
        "127.0.0.1", "address /metrics listens on (default {default}, this machine only); any other needs "
        "LOADTEST_WEB_USER and LOADTEST_WEB_PASSWORD in the environment and is then behind HTTP basic auth",
        metavar="HOST", group=METRICS)
    metrics_linger: float = option(
        0.0, "keep /metrics up S seconds after the end, so a scraper's last scrape sees the final counts (default "
        "{default}; set it to your scrape interval or more)", parse=seconds(non_negative_float), metavar="S",
        group=METRICS)
    no_metrics: bool = option(False, "serve no /metrics", group=METRICS)


@dataclass(frozen=True)
class GateOptions:
    """What fails a run (exit 1)."""

    max_errors: float = option(
        MAX_ERROR_SHARE, "fail (exit 1) when the errors and timeouts {scope} pass PCT percent of the requests "
        "sent, or when none succeeded (default {default}; requests not sent, and the ends the client caused: "
        "stopped in flight, cut by --deadline, on a lost worker, do not count)", parse=percent, metavar="PCT")
    slo_gate: bool = option(
        False, "also fail (exit 1) when any tenant's p99 TTFT, TPOT or E2E misses the target its scenario sets "
        "(the SLO table says which); refused for a trace without targets")


@dataclass(frozen=True)
class SloChoice:
    """The SLO targets a search or a soak holds every tenant to."""

    slo_from_scenario: bool = option(
        False, "hold every tenant to the SLO targets its scenario sets (the default)", exclusive="slo")
    slo: dict[str, float] | None = option(
        help="hold every tenant to these p99 targets instead, e.g. ttft_p99_ms=2000,tpot_p99_ms=40 (keys: "
        "ttft_p99_ms, tpot_p99_ms, e2e_p99_ms)", parse=slo_targets, metavar="KEY=MS,...", exclusive="slo")


@dataclass(frozen=True)
class LevelOptions:
    """A sweep's (or a plan's) levels of load, lowest first."""

    rate_scales: tuple[float, ...] = option(
        DEFAULT_RATE_SCALES, "open-loop levels as multiples of the scenario's arrival rates (default {default})",
        flag="--rate-scale", parse=positive_floats, metavar="X,Y,...", exclusive="levels")
    rates: tuple[float, ...] | None = option(
        help="open-loop levels as offered requests per second (the scenario's arrivals scaled to each)",
        parse=positive_floats, metavar="R,S,...", exclusive="levels")
    concurrency: tuple[int, ...] | None = option(
        help="closed-loop levels: N requests kept in flight (each sent the moment one ends), e.g. 1,4,16,64 from a "
        f"single stream up (each at most {MAX_INFLIGHT:,})", parse=concurrency_levels, metavar="N,M,...",
        exclusive="levels")


class Replaying:
    """What every replaying command's record holds (the engine reads these)."""

    PROG: ClassVar[str]
    SCOPE: ClassVar[str]
    fleet: FleetOptions
    trace: TraceOptions
    folder: FolderOptions
    client: ClientOptions
    processes: ProcessOptions
    metrics: MetricsOptions


@dataclass(frozen=True)
class RunOptions(Replaying):
    """`loadtest run`."""

    PROG: ClassVar[str] = "loadtest run"
    SCOPE: ClassVar[str] = "per mode"
    fleet: FleetOptions = group(FleetOptions)
    trace: TraceOptions = group(TraceOptions)
    folder: FolderOptions = group(FolderOptions)
    client: ClientOptions = group(ClientOptions)
    gate: GateOptions = group(GateOptions)
    slo: tuple[tuple[str | None, dict[str, float]], ...] | None = option(
        None, "hold tenants to these p99 targets instead of the trace's own (an imported trace has none): for every "
        "tenant, or (TENANT:...) for one, e.g. --slo ttft_p99_ms=2000 --slo chat:tpot_p99_ms=40 (keys: "
        "ttft_p99_ms, tpot_p99_ms, e2e_p99_ms; given again: a later target wins); the SLO table, goodput and "
        "--slo-gate then judge them", parse=tenant_slo_targets, metavar="[TENANT:]KEY=MS,...", repeat=True)
    cooldown: float = option(COOLDOWN_S, "pause between modes after the previous one drains, in seconds (default "
                             "{default})", parse=seconds(non_negative_float), metavar="S")
    deadline: float | None = option(
        help="per mode, stop sending S seconds after the start: in-flight requests time out at the deadline and "
        "unsent ones are recorded as not_sent (default: none)", parse=seconds(positive_float), metavar="S")
    processes: ProcessOptions = group(ProcessOptions)
    metrics: MetricsOptions = group(MetricsOptions)


FORM = " (the start form's default)"


def _all_at_once() -> ProcessOptions:
    """A command that always replays its modes at once (ui, soak): --mode-order parallel is implied, and
    hidden."""
    return ProcessOptions(mode_order="parallel")


@dataclass(frozen=True)
class UIOptions(Replaying):
    """`loadtest ui`: every mode at once, the trace chosen on the start form."""

    PROG: ClassVar[str] = "loadtest ui"
    SCOPE: ClassVar[str] = "per mode"
    fleet: FleetOptions = group(FleetOptions)
    web_host: str = option("127.0.0.1", "address the web UI listens on (default {default}, this machine only; any "
                           "other needs the login above)", metavar="HOST")
    web_port: int = option(8089, "web UI port (default {default})", parse=port, metavar="PORT")
    trace: TraceOptions = group(TraceOptions, suffix=FORM, suffixed=("scenario", "trace", "rate_scale"))
    folder: FolderOptions = group(FolderOptions)
    client: ClientOptions = group(ClientOptions)
    gate: GateOptions = group(GateOptions)
    processes: ProcessOptions = group(_all_at_once, hide=("mode_order",))
    metrics: MetricsOptions = group(MetricsOptions)


@dataclass(frozen=True)
class SweepOptions(Replaying):
    """`loadtest sweep`."""

    PROG: ClassVar[str] = "loadtest sweep"
    SCOPE: ClassVar[str] = "of a mode at a level"
    fleet: FleetOptions = group(FleetOptions)
    trace: TraceOptions = group(TraceOptions, omit=("rate_scale",))
    folder: FolderOptions = group(FolderOptions)
    client: ClientOptions = group(ClientOptions)
    gate: GateOptions = group(GateOptions, omit=("slo_gate",))
    levels: LevelOptions = group(LevelOptions)
    level_duration: float | None = option(
        help="per level and mode, stop sending S seconds after the start and let the requests in flight finish "
        "(the rest are recorded not_sent); default: every request of the level", parse=seconds(positive_float),
        metavar="S")
    cooldown: float = option(COOLDOWN_S, "pause between one mode's levels, and between modes, in seconds (default "
                             "{default})", parse=seconds(non_negative_float), metavar="S")
    keep_going: bool = option(False, "replay every level of every mode, also above a level where the mode saturated")
    gpu_hour_cost: float | None = option(help=GPU_HOUR_COST_HELP, parse=at_most(positive_float, MAX_GPU_HOUR_COST),
                                         metavar="PRICE")
    processes: ProcessOptions = group(ProcessOptions)
    metrics: MetricsOptions = group(MetricsOptions)


@dataclass(frozen=True)
class CapacityOptions(Replaying):
    """`loadtest capacity`."""

    PROG: ClassVar[str] = "loadtest capacity"
    SCOPE: ClassVar[str] = "per probe"
    fleet: FleetOptions = group(FleetOptions)
    trace: TraceOptions = group(TraceOptions, omit=("rate_scale", "requests"))
    folder: FolderOptions = group(FolderOptions)
    client: ClientOptions = group(ClientOptions)
    gate: GateOptions = group(GateOptions, omit=("slo_gate",), helps={"max_errors": (
        "a probe fails when its errors and timeouts pass PCT percent of the requests it sent, whatever its "
        "latencies, counted as the run's gate counts them (default {default})")})
    slo: SloChoice = group(SloChoice)
    probe_duration: float = option(
        30.0, "each probe offers S seconds of the scenario's arrivals at its rate (the first rows of one trace, so "
        "probes share their requests), then lets them finish (default {default})", parse=seconds(positive_float),
        metavar="S")
    cooldown: float = option(COOLDOWN_S, "pause between probes, in seconds (default {default})",
                             parse=seconds(non_negative_float), metavar="S")
    repeats: int = option(3, "probes that decide each rate near the boundary, by majority (odd; default {default})",
                          parse=odd_count, metavar="N")
    precision: float = option(CAPACITY_PRECISION, "stop when the highest passing and lowest failing rates are "
                              "within PCT percent (default {default})", parse=precision_percent, metavar="PCT")
    start_rate: float | None = option(help="the first rate probed, in req/s (default: the scenario's own)",
                                      parse=positive_float, metavar="R")
    max_rate: float | None = option(help="the highest rate probed, in req/s (default: 8 times the scenario's)",
                                    parse=positive_float, metavar="R")
    peak: float | None = option(help=PEAK_HELP, parse=at_most(positive_float, MAX_PEAK_REQ_S), metavar="R")
    processes: ProcessOptions = group(ProcessOptions)
    metrics: MetricsOptions = group(MetricsOptions)


@dataclass(frozen=True)
class SoakOptions(Replaying):
    """`loadtest soak`: every mode at once, its trace generated as it goes."""

    PROG: ClassVar[str] = "loadtest soak"
    SCOPE: ClassVar[str] = "in a mode"
    fleet: FleetOptions = group(FleetOptions)
    trace: TraceOptions = group(lambda: TraceOptions(scenario="soak"), omit=("trace", "requests"))
    folder: FolderOptions = group(FolderOptions)
    client: ClientOptions = group(ClientOptions)
    gate: GateOptions = group(GateOptions, omit=("slo_gate",))
    duration: float | None = option(help="how long to send, e.g. 8h, 30m, 90s (default: the scenario's duration)",
                                    parse=time_span, metavar="T")
    window: float = option(
        SOAK_WINDOW_S, "the SLO window: each target is held over every window this long (default {default} s), one "
        "window every --window-step; drift is judged over tumbling windows this long", parse=time_span, metavar="T")
    window_step: float | None = option(help="how far each SLO window slides (default: a fifth of --window)",
                                       parse=time_span, metavar="T")
    flush_every: float = option(
        10.0, "a new Parquet part per worker at least this often (default {default} s): what a crash can lose, at "
        "most, before --resume records it as an unknown outcome", parse=seconds(time_span), metavar="T")
    resume: str | None = option(
        help="continue the soak in this run folder (killed, interrupted, or its machine rebooted): its scenario, "
        "duration, modes and targets come from its manifest; rows already due are not sent again, the rest go on "
        "where it stopped", metavar="RUN")
    slo: SloChoice = group(SloChoice)
    processes: ProcessOptions = group(_all_at_once, hide=("mode_order",))
    metrics: MetricsOptions = group(MetricsOptions)


@dataclass(frozen=True)
class PlanOptions:
    """`loadtest plan`: no replay; the model in virtual time."""

    PROG: ClassVar[str] = "loadtest plan"
    SCOPE: ClassVar[str] = "per level"
    fleet: FleetOptions = group(FleetOptions, omit=("endpoints", "address", "skip_unavailable"), helps={
        "fleet": f"built-in fleet or a fleet TOML file (default: {DEFAULT_FLEET}); a vLLM fleet is planned as the "
        "simulator would serve it", "modes": "modes to plan (default: all the fleet's)"})
    trace: TraceOptions = group(TraceOptions, omit=("trace", "rate_scale"), helps={
        "requests": "requests per level (default: the scenario's demo size)",
        "seed": "trace seed (default: the scenario's)"})
    levels: LevelOptions = group(LevelOptions)
    capacity: bool = option(
        False, "also find each mode's highest offered rate at which every tenant meets the SLOs its scenario sets "
        "(bracket, then bisect to 5%), which tenant binds, and the mode to choose")
    hardware: str | None = option(help="the simulator's hardware profile to plan on (default: the fleet's [sim] "
                                  "hardware)", metavar="PROFILE")
    peak: float | None = option(help=PEAK_HELP + " (with --capacity)", parse=at_most(positive_float, MAX_PEAK_REQ_S),
                                metavar="R")
    gpu_hour_cost: float | None = option(help=GPU_HOUR_COST_HELP, parse=at_most(positive_float, MAX_GPU_HOUR_COST),
                                         metavar="PRICE")
    folder: FolderOptions = group(FolderOptions, helps={"run_id": "the plan's folder under --out (default: UTC time)"})


def option_fields(record: type) -> list[tuple[tuple[str, ...], Field, dict]]:
    """Every option of a record, depth first: (the path of group fields to it, its field, the
    metadata of the group it is in, or {} at the top)."""
    out: list[tuple[tuple[str, ...], Field, dict]] = []
    for f in fields(record):
        if "group" in f.metadata:
            inner = f.default_factory()   # type: ignore[misc]
            out += [((f.name, *path), g, f.metadata["group"]) for path, g, _ in option_fields(type(inner))]
        elif "option" in f.metadata:
            out.append(((), f, {}))
    return out


def with_values(options: Any, **values: Any) -> Any:
    """`options` with some of its options (by field name, in any of its groups) replaced."""
    changes: dict[str, Any] = {}
    for f in fields(options):
        current = getattr(options, f.name)
        if is_dataclass(current) and "group" in f.metadata:
            mine = {k: v for k, v in values.items() if k in {g.name for g in fields(current)}}
            if mine:
                changes[f.name] = with_values(current, **mine)
        elif f.name in values:
            changes[f.name] = values[f.name]
    return replace(options, **changes)


def value_of(options: Any, name: str) -> Any:
    """One option's value (by field name, in any of the record's groups)."""
    for f in fields(options):
        current = getattr(options, f.name)
        if "group" in f.metadata and is_dataclass(current):
            if name in {g.name for g in fields(current)}:
                return getattr(current, name)
        elif f.name == name:
            return current
    raise KeyError(name)
