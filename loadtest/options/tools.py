"""The options of the commands that work from folders and files or hold a fleet (report, compare,
calibrate, cluster up/status/down, scenario show/validate, trace build/import/show), declared
as the replaying commands' are (options.py): one frozen record each, its fields' metadata the
flag, the bounds and the help, its defaults the one defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cluster import DEFAULT_STATE
from loadtest.options.replaying import DEFAULT_FLEET, TOKENIZER_HELP, option
from loadtest.options.values import (
    in_path,
    non_negative_float,
    out_dir,
    out_file,
    percent,
    positive_float,
    positive_int,
    seconds,
    tenant_slo_targets,
)
from loadtest.options.values import seed as random_seed
from loadtest.options.values import window as time_window
from loadtest.replay.options import ReplayConfig
from scenarios.importers import APIS, ImportOptions

FORMATS = ("sharegpt", "jsonl", "azure", "burstgpt")   # scenarios.importers' layouts


@dataclass(frozen=True)
class ReportOptions:
    """`loadtest report`."""

    PROG: ClassVar[str] = "loadtest report"
    runs: tuple[str, ...] = option((), "run folders (results/<run_id>/): runs that replayed the same trace (the same "
                                   "requests on the same schedule) are also read as repeats of one experiment: each "
                                   "mode's figures and speedup per run, the spread between the runs beside each "
                                   "run's interval, and whether the runs disagree more than one run's interval says; "
                                   "or a plan and a measured sweep of the same levels, to say how far the model is "
                                   "from the measurement", positional="+", metavar="RUN", parse=in_path)
    slo_gate: bool = option(False, "exit 1 when any tenant of any run missed an SLO target (exit 2 when a run has "
                            "none)")
    out: str | None = option(help="also write DIR/summary.parquet (every run's summary rows in one file, told apart "
                             "by run_id) and DIR/report.md (every run and mode side by side, and the spread "
                             "between runs of one trace, or why none)", metavar="DIR", parse=out_dir)


@dataclass(frozen=True)
class CompareOptions:
    """`loadtest compare`."""

    PROG: ClassVar[str] = "loadtest compare"
    base: str | None = option(help="the reference run folder", positional="1", metavar="BASE", parse=in_path)
    new: str | None = option(help="the run folder to judge", positional="1", metavar="NEW", parse=in_path)
    metric: tuple[str, ...] | None = option(
        help="a gated metric, repeatable: ttft, tpot, e2e, ttft_sched or e2e_sched at a percentile, e.g. e2e_p99 "
        "(default: ttft_p99, tpot_p99, e2e_p99)", metavar="LATENCY_pNN", repeat=True)
    max_regression: float = option(0.05, "how much worse a metric may get before it fails, in percent (default "
                                   "{default}); exit 1 when a judged figure regressed, 3 when no figure could be "
                                   "judged", parse=percent, metavar="PCT")


@dataclass(frozen=True)
class CalibrateOptions:
    """`loadtest calibrate`."""

    PROG: ClassVar[str] = "loadtest calibrate"
    result: str | None = option(help="a run folder, a sweep folder (every levels/<level>/) or a capacity folder "
                                "(its probes)", positional="1", metavar="RUN_OR_SWEEP", parse=in_path)
    out: str | None = option(help="where to write the fitted profile", metavar="PROFILE.toml", required=True,
                             parse=out_file)
    hardware: str | None = option(
        help="the datasheet (and prior constants) to fit from: a built-in profile or a profile file (default: the "
        "fleet's [sim] hardware, or its accelerator type for a vLLM fleet)", metavar="NAME|FILE")
    mode: str | None = option(help="the mode whose decode steps fix the hardware constants (default: the fleet's "
                              "baseline)", metavar="MODE")


@dataclass(frozen=True)
class ClusterStateOptions:
    """`loadtest cluster status` and `down`: the held fleet's state file."""

    state: str = option(DEFAULT_STATE, "the fleet's state file (default: {default})", metavar="FILE",
                       parse=out_file)


@dataclass(frozen=True)
class ClusterStatusOptions(ClusterStateOptions):
    """`loadtest cluster status`: the state file, and the key a run would send."""

    PROG: ClassVar[str] = "loadtest cluster status"
    api_key_env: str = option(ReplayConfig.api_key_env, "environment variable holding the API key a run sends "
                              "(default {default}): each replica is asked for its models with it, as a run's check "
                              "does", metavar="VAR")


@dataclass(frozen=True)
class ClusterUpOptions(ClusterStateOptions):
    """`loadtest cluster up`."""

    fleet: str = option(DEFAULT_FLEET, "built-in fleet name or a fleet TOML file (default: {default})",
                        metavar="NAME|PATH")
    modes: str | None = option(help="modes to start (default: all the fleet's); they must all fit on the cluster at "
                               "once, or `up` refuses (exit 2) and says the turns they would take", metavar="A,B,...")
    skip_unavailable: bool = option(False, "start the other modes when a mode cannot (a placeholder checkpoint, a "
                                    "missing path)")
    address: str | None = option(help="join this Ray cluster instead of starting a local Ray (default: $RAY_ADDRESS "
                                 "if set)", metavar="RAY_ADDRESS")
    detach: bool = option(False, "run the supervisor in the background; return once the fleet is ready")
    logs: str | None = option(help="replica and supervisor logs (default: results/cluster-<UTC time>/logs)",
                              metavar="DIR", parse=out_dir)


@dataclass(frozen=True)
class ScenarioListOptions:
    """`loadtest scenario list`: no options."""

    PROG: ClassVar[str] = "loadtest scenario list"


@dataclass(frozen=True)
class ScenarioShowOptions:
    """`loadtest scenario show`."""

    PROG: ClassVar[str] = "loadtest scenario show"

    name: str | None = option(help="built-in scenario name or a scenario TOML file", positional="1",
                              metavar="NAME|PATH")


@dataclass(frozen=True)
class ScenarioValidateOptions:
    """`loadtest scenario validate`."""

    PROG: ClassVar[str] = "loadtest scenario validate"

    path: str | None = option(help="the scenario TOML file to check", positional="1", metavar="PATH", parse=in_path)


@dataclass(frozen=True)
class TraceBuildOptions:
    """`loadtest trace build`."""

    PROG: ClassVar[str] = "loadtest trace build"

    scenario: str | None = option(help="built-in scenario name or TOML file", metavar="NAME|PATH", required=True)
    out: str | None = option(help="where to write the trace (Parquet)", metavar="FILE", required=True,
                             parse=out_file)
    requests: int | None = option(help="number of requests (default: the scenario's requests or duration)",
                                  parse=positive_int, metavar="N")
    duration: float | None = option(help="seconds of traffic instead of a request count", parse=positive_float,
                                    metavar="S")
    seed: int | None = option(help="seed (default: the scenario's)", parse=random_seed, metavar="N")
    rate_scale: float | None = option(help="multiply the scenario's arrival rates by X", parse=positive_float,
                                      metavar="X")
    tokenizer: str | None = option(help=TOKENIZER_HELP, parse=in_path, metavar="TOKENIZER.json")


@dataclass(frozen=True)
class TraceImportOptions:
    """`loadtest trace import`; the defaults are the importer's own (ImportOptions)."""

    PROG: ClassVar[str] = "loadtest trace import"

    file: str | None = option(help="the trace to import", positional="1", metavar="FILE", parse=in_path)
    format: str | None = option(help="the file's layout", choices=FORMATS, required=True)
    out: str | None = option(help="where to write the trace (Parquet)", metavar="FILE", required=True,
                             parse=out_file)
    speedup: float = option(ImportOptions.speedup, "replay X times faster than recorded (default {default})",
                            parse=positive_float, metavar="X")
    window: tuple[float, float] | None = option(
        help="keep only requests between START and END seconds of the recorded timeline", parse=time_window,
        metavar="START:END")
    sample: float | None = option(help="keep N requests (N >= 1) or a fraction F (< 1), chosen by --seed",
                                  parse=positive_float, metavar="N|F")
    rate: float = option(ImportOptions.rate, "arrivals per second for traces without times (default {default})",
                         parse=positive_float, metavar="R")
    seed: int = option(ImportOptions.seed, "seed of sampling and generated parts (default {default})",
                       parse=random_seed,
                       metavar="N")
    think_time: float = option(
        ImportOptions.think_s, "sharegpt: a conversation's next turn is sent S seconds after the answer to the turn "
        "before it ends, with that answer in it (the file has no times; default {default})",
        parse=seconds(non_negative_float), metavar="S")
    first_turn_only: bool = option(
        False, "sharegpt: replay only each conversation's first turn, one request per conversation (as `vllm bench "
        "serve` reads ShareGPT) instead of every turn")
    api: str | None = option(help="jsonl: the API of lines that do not say (a line's own \"api\", or \"messages\", "
                             "wins; default completions)", choices=APIS)
    slo: tuple[tuple[str | None, dict[str, float]], ...] | None = option(
        None, "attach p99 SLO targets to the trace, for every tenant or (TENANT:...) for one, so a replay's report "
        "judges goodput and --slo-gate can gate it, e.g. --slo ttft_p99_ms=2000 --slo sharegpt:tpot_p99_ms=50 "
        "(keys: ttft_p99_ms, tpot_p99_ms, e2e_p99_ms; given again: a later target wins)",
        parse=tenant_slo_targets, metavar="[TENANT:]KEY=MS,...", repeat=True)

    def importing(self) -> ImportOptions:
        return ImportOptions(self.speedup, self.window, self.sample, self.rate, self.seed, self.think_time,
                             self.first_turn_only, self.api, self.slo or ())


@dataclass(frozen=True)
class TraceShowOptions:
    """`loadtest trace show`."""

    PROG: ClassVar[str] = "loadtest trace show"

    file: str | None = option(help="a trace.parquet", positional="1", metavar="FILE", parse=in_path)
