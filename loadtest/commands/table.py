"""Every command of the command line, declared once: its words, its options record, the function
that runs it (imported only when it runs, so `loadtest --help` and `loadtest sim` start fast), its
one-line help and its description. The parser (arguments.py) and the dispatch (cli.py) read this
table and nothing else; the options themselves come from each record (grammar.add_options)."""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.options.replaying import CapacityOptions, PlanOptions, RunOptions, SoakOptions, SweepOptions, UIOptions
from loadtest.options.tools import (
    CalibrateOptions,
    ClusterStateOptions,
    ClusterStatusOptions,
    ClusterUpOptions,
    CompareOptions,
    ReportOptions,
    ScenarioListOptions,
    ScenarioShowOptions,
    ScenarioValidateOptions,
    TraceBuildOptions,
    TraceImportOptions,
    TraceShowOptions,
)


@dataclass(frozen=True)
class Command:
    words: str          # as typed: "run", "cluster up"
    options: type       # its frozen options record, which the function is handed
    main: str           # "module:function"
    help: str           # the line `loadtest --help` lists it with
    description: str    # what `loadtest WORDS --help` says first


COMMANDS: tuple[Command, ...] = (   # in the order `loadtest --help` lists them
    Command('run', RunOptions, "loadtest.commands.run:main",
            'the main job: build the trace, start the fleet, replay every mode, write results, print the '
            'table',
            'Build the trace from a scenario, start one fleet per speculation mode on Ray, replay the same '
            'trace against every mode (open loop, streaming) with Locust, write results/<run_id>/ and print a '
            "per-mode comparison. A pre-flight first fits the fleet to the cluster's GPUs (or CPUs): by "
            'default (--mode-order auto) every mode replays side by side when the cluster holds them all at '
            "once and no two replicas share a processor; otherwise modes run in turns, each mode's replicas "
            "stopping when its replay ends so the next mode's start on what they freed; a mode that fits "
            'nowhere fails at once (exit 2). The fleet is torn down on every exit path.'),
    Command('ui', UIOptions, "loadtest.commands.ui:main",
            "Locust's web UI: start a run of several modes from the form, compare them live",
            "Open Locust's web UI once; its start form chooses the scenario, the modes and the rate scale "
            '(Custom parameters). Start replays every chosen mode side by side, each with its own Locust '
            'process(es), writing the same dataset, manifest and report as `loadtest run --mode-order '
            'parallel`; Stop ends them (the rest is recorded as not_sent). The Comparison tab (a row per '
            'mode) and the Comparison page (per mode, and per tenant on demand) show TTFT, TPOT, ITL and E2E '
            "percentiles, output tokens/s, goodput, tokens per step and the server's acceptance; the page as "
            "a table and charts over time, every second. The form's scenario is a built-in name, or the "
            '--scenario or --trace file given here. The UI stays up after the run; Ctrl-C quits. Any '
            '--web-host but loopback needs LOADTEST_WEB_USER and LOADTEST_WEB_PASSWORD in the environment, '
            'and every route is then behind HTTP basic auth.'),
    Command('report', ReportOptions, "loadtest.commands.analyse:main",
            'analyse finished runs again: tables, summary.parquet, report.md',
            "Read finished runs' folders (records, trace, server metrics, manifest) and write, in each, "
            'summary.parquet (long format: run, mode, tenant, metric, statistic, value, CI bounds), '
            'report.md and report.html, printing the same tables as `run`.'),
    Command('compare', CompareOptions, "loadtest.commands.compare:main",
            'what got better and worse between two runs, with significance',
            'Compare two runs of the same requests (e.g. before and after a change): per mode and tenant, '
            'each --metric of NEW against BASE, paired by request (only requests that succeeded in both), '
            "with a paired bootstrap 95% interval on NEW / BASE, and the typical request's change (the "
            'geometric mean of NEW / BASE over requests), which far fewer requests bound than a p99. Exit 1 '
            'when a judged figure regressed: worse by more than --max-regression and significantly worse; 0 '
            'when figures were judged and none regressed; 3 when none could be judged (too few requests: '
            'never a pass); 2 when the runs cannot be compared (a missing run, no common mode or request). A '
            'run that did not complete, or whose client was the limit, is said.'),
    Command('plan', PlanOptions, "loadtest.commands.plan:main",
            "predict each mode at several loads from the simulator's model, in seconds",
            "Predict what a sweep of offered load would measure, per mode and tenant, from the simulator's "
            "performance model run in virtual time (its own scheduler, no HTTP, no sleeping): the fleet's "
            'modes on the hardware profile its [sim] section names (or --hardware). Each level is written as '
            'a run folder (levels/<level>/, readable by `loadtest report`), and sweep.parquet and report.md '
            'hold the curves: throughput, TPOT and TTFT against load, the speedup over the baseline with its '
            'interval, and where each mode stops paying (the crossover).'),
    Command('sweep', SweepOptions, "loadtest.commands.sweep:main",
            'measure every mode at several loads: throughput and latency curves, where speculation stops '
            'paying',
            'Start the fleet once and replay, per mode and level, the same requests (the same trace, so '
            'levels and modes pair by request): open loop at scaled arrival rates (--rate-scale, --rates) or '
            'closed loop at fixed concurrency (--concurrency). Each level is a run folder '
            '(levels/<level>/requests/mode=<mode>/, readable by `loadtest report`); sweep.parquet, report.md '
            'and report.html hold the curves per mode: throughput (total and per GPU), TPOT and TTFT against '
            'it, the speedup over the baseline with its interval, acceptance, and the load at which each mode'
            ' stops paying. A mode that saturates (its completions stop following the load) is not taken '
            'higher unless --keep-going. On a simulator fleet (provisioned, or held up and given as '
            '--endpoints STATE) the sweep is also predicted by the model (plan/) and the report says by how '
            'much the two differ.'),
    Command('capacity', CapacityOptions, "loadtest.commands.capacity:main",
            "find each mode's highest request rate within the tenants' SLOs, by measurement",
            'Per mode, find the highest offered rate at which every tenant meets its SLOs, by replaying the '
            "scenario's requests at chosen rates against the fleet: bracket by doubling up from --start-rate "
            "(or halving down from it, to a 16th of the scenario's rate), then bisect to --precision, each "
            'rate near the boundary probed --repeats times and decided by the majority. Prints, per mode, the'
            ' highest rate, per GPU, the goodput there and the tenant whose SLO binds, and the mode to '
            'choose; capacity.parquet holds every probe, each probe a run folder under probes/. Exit 2 when '
            'no SLO target is given.'),
    Command('calibrate', CalibrateOptions, "loadtest.commands.calibrate:main",
            'fit the simulator to a measured run or sweep: a profile for sim, fleets and plan',
            "Fit the simulator's performance model to what a fleet measured: the compute and KV-read "
            "efficiencies and the step overhead from the baseline's decode steps against its batch and "
            "context (each request's mean step time beside the load over its decode window), and, per "
            'speculative method and domain, the acceptance per draft position, its spread across requests and'
            " the share of steps that proposed, from each request's acceptance histogram (vLLM's "
            "--per-request-spec-decode-metrics, or the simulator's). Writes a profile TOML that `loadtest sim"
            ' --hardware FILE`, a fleet\'s [sim] hardware = "FILE" and `loadtest plan --hardware FILE` load, '
            'and prints the fit and its residuals. A sweep with several concurrency levels and varied prompt '
            'lengths fixes all three hardware constants; a constant the data cannot fix is held at the prior '
            "profile's value, and says so. Exit 2 on a folder with no runs."),
    Command('soak', SoakOptions, "loadtest.commands.soak:main",
            'hours of day-shaped or bursty load, for leaks and drift; exit codes for schedulers',
            "Replay a scenario's arrivals for --duration (hours), generating the trace a window ahead of the "
            'replay (never whole in memory) and writing the records in rolling Parquet parts. Every mode '
            'given runs at once. At the end (or on Ctrl-C) the SLOs are checked over sliding --window windows'
            ' and the run is searched for drift: a latency trend with the load held apart, error bursts, and '
            "the server's KV-cache use and waiting queue growing; each finding names its window (soak.md, "
            'findings.json, windows.parquet). Exit 0 passed, 1 an SLO window or a drift check failed, 2 bad '
            'input, 3 the run could not complete, 130 interrupted. --resume RUN continues a killed or '
            'interrupted soak into the same folder: every scheduled request ends up recorded once.'),
    Command('cluster up', ClusterUpOptions, "loadtest.commands.cluster:up",
            'start a fleet and hold it (in the foreground, or with --detach)',
            "Start the fleet's replicas on Ray, write the state file when all are ready, and hold them until "
            'SIGINT/SIGTERM (`loadtest cluster down`), then tear down. The replicas require an API key when '
            "VLLM_API_KEY is set in this command's environment (a local Ray's replicas inherit it) or in the "
            "fleet's env, as vLLM reads it; a run then sends the key in the variable its --api-key-env names "
            '(LOADTEST_API_KEY by default), and `cluster status` checks each replica with it.'),
    Command('cluster status', ClusterStatusOptions, "loadtest.commands.cluster:status",
            "print each replica's URL and whether a run could use it; exit 0 if every one could",
            "Print each replica's URL and whether a run could use it: its /health, then its /v1/models asked with "
            'the key in --api-key-env (a missing or refused key is said apart). Exit 0 when every replica '
            'could take a run, 1 when one could not or no fleet is up, 2 on a bad state file.'),
    Command('cluster down', ClusterStateOptions, "loadtest.commands.cluster:down",
            'stop the fleet (SIGTERM to its supervisor) and wait until it is torn down',
            'Stop the fleet (SIGTERM to its supervisor) and wait until it is torn down.'),
    Command('scenario list', ScenarioListOptions, "loadtest.commands.traffic:scenario_list",
            'the built-in scenarios, one line each',
            'List built-in scenarios.'),
    Command('scenario show', ScenarioShowOptions, "loadtest.commands.traffic:scenario_show",
            "print a scenario's TOML and hash",
            'Print a scenario file.'),
    Command('scenario validate', ScenarioValidateOptions, "loadtest.commands.traffic:scenario_validate",
            'check a scenario file; one line per problem, exit 2 if invalid',
            'Validate a scenario file: unknown keys, types, rates, shares, bounds, files.'),
    Command('trace build', TraceBuildOptions, "loadtest.commands.traffic:trace_build",
            'compile a scenario into a trace file',
            'Compile a scenario into trace.parquet, deterministic per seed.'),
    Command('trace import', TraceImportOptions, "loadtest.commands.traffic:trace_import",
            'turn a real trace (ShareGPT, JSONL, Azure, BurstGPT) into a trace file',
            'Import a real trace. Length-only traces get prompts generated to their lengths; untimed ones get'
            ' Poisson arrivals at --rate.'),
    Command('trace show', TraceShowOptions, "loadtest.commands.traffic:trace_show",
            'summarise a trace: tenants, rates over time, burstiness, lengths',
            'Summarise a trace file.'),
)

# The commands made of actions (`cluster up`): the group's own help and description.
GROUPS: dict[str, tuple[str, str]] = {
    'cluster': ('hold a fleet up across runs: up, status, down',
        'A long-lived fleet for the web UI and soak tests. `up` provisions it (the same provisioner as '
        '`loadtest run`), writes a state file of endpoints once every replica is ready, and holds the '
        'fleet until `down` or Ctrl-C; `run --endpoints` and `ui --endpoints` read the state file.'),
    'scenario': ('list, show or validate scenarios',
        'Built-in scenarios live beside the code as TOML; your own are TOML files.'),
    'trace': ('build, import or inspect traces (trace.parquet)',
        'Traces are the replayable schedule: one row per request.'),
}

BY_WORDS: dict[str, Command] = {c.words: c for c in COMMANDS}
