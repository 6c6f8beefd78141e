"""The option groups several commands share: the fleet and its modes, how the modes are
replayed, the trace and the client's limits, the client's /metrics and the SLO targets.
The commands' grammars (arguments.py, load_arguments.py, ops_arguments.py) compose them."""

from __future__ import annotations

import argparse
from dataclasses import fields

from loadtest.commands.argtypes import (
    non_negative_float,
    non_negative_int,
    percent,
    plain_name,
    port_or_zero,
    positive_float,
    positive_int,
    slo_targets,
)
from loadtest.replay.options import ReplayConfig
from loadtest.request.retry import POLICIES

DEFAULT_MAX_ERRORS = 0.10  # analysis.gate.DEFAULT_MAX_ERROR_SHARE, without importing pyarrow here
# The client's limits' defaults, written once: in the replay's own configuration record.
REPLAY = {f.name: f.default for f in fields(ReplayConfig)}


def fleet_options(p: argparse.ArgumentParser) -> None:
    """The fleet to provision (or one already running) and its modes: run, sweep, capacity."""
    p.add_argument("--fleet", default=None, metavar="NAME|PATH",
                   help="built-in fleet name or a fleet TOML file (default: local-sim, the simulator on a local Ray)")
    p.add_argument("--endpoints", default=None, metavar="STATE|MODE=URL,...",
                   help="replay against a fleet that is already running instead of provisioning one: the state "
                   "file of `loadtest cluster up` (e.g. .loadtest/cluster.json), or MODE=URL pairs of servers "
                   "started elsewhere (replicas of one mode joined by |)")
    p.add_argument("--address", default=None, metavar="RAY_ADDRESS",
                   help="join this Ray cluster (e.g. auto, or ray://head:10001) instead of starting a local Ray; "
                   "default: $RAY_ADDRESS if set (as under `ray job submit`)")
    p.add_argument("--modes", default=None, metavar="A,B,...",
                   help="comma-separated modes of the fleet to test (default: all the fleet's modes; "
                   "local-sim has baseline,draft,medusa,eagle,ngram)")
    p.add_argument("--skip-unavailable", action="store_true",
                   help="run the other modes when a mode cannot start (a placeholder checkpoint such as "
                   "h100-70b's your-org/... Medusa heads, or a model path that does not exist); without it such "
                   "a mode is refused before anything starts (exit 2)")


def client_options(p: argparse.ArgumentParser) -> None:
    """How the modes are replayed: in turn or at once, and by how many Locust processes; /metrics."""
    metrics_options(p)
    p.add_argument("--parallel-modes", action="store_true",
                   help="replay all modes at once, each with its own Locust process(es), instead of one after "
                   "the other (faster; the modes share the client machine, and the manifest says so); refused "
                   "(exit 2) when the cluster cannot hold every mode at once")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="Locust worker processes: 1 runs one process; more run a master and N workers, each "
                   "replaying its shard of the trace (default: one per core, minus what local simulator "
                   "replicas reserve)")
    p.add_argument("--ray-workers", action="store_true",
                   help="start the --workers Locust workers as Ray actors spread over the Ray cluster's nodes "
                   "(the master stays here); --out must then be on storage every node mounts")


def replay_options(p: argparse.ArgumentParser, scope: str, rate_scale: bool = True, requests: bool = True,
                    gate: str = "errors,slo", trace: bool = True, scenario: str = "saas-mix") -> None:
    """What the replaying commands share: the trace, the results folder, the client's limits and
    the gate (`rate_scale`: its one --rate-scale, where a sweep has levels; `requests`: its
    --requests, where a capacity search sizes its probes by duration; `gate`: which of the error
    and SLO gates it offers; `trace`: --trace, where the trace is not generated as it goes)."""
    p.add_argument("--scenario", default=scenario, metavar="NAME|PATH",
                   help=f"built-in scenario name or a scenario TOML file (default: {scenario})")
    if trace:
        p.add_argument("--trace", default=None, metavar="FILE", help="replay this trace.parquet (from `loadtest "
                       "trace build` or `trace import`) instead of building one from --scenario; --requests keeps "
                       "its first N rows, --rate-scale speeds it up")
    if requests:
        p.add_argument("--requests", type=positive_int, default=None, metavar="N",
                       help="requests in the trace (default: the scenario's demo size; --requests 50000 "
                       "runs saas-mix in full)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="trace seed (default: the scenario's; a --trace file keeps the seed it was built with)")
    if rate_scale:
        p.add_argument("--rate-scale", type=positive_float, default=None, metavar="X",
                       help="multiply the arrival rates by X: the scenario's (default: its rate_scale), or a "
                       "--trace file's (its times divided by X; not for a closed-loop trace)")
    p.add_argument("--out", default="results", metavar="DIR", help="results directory (default: results/)")
    p.add_argument("--run-id", type=plain_name, default=None, metavar="ID",
                   help="name of this run's folder under --out (default: UTC time and scenario)")
    p.add_argument("--max-inflight", type=positive_int, default=REPLAY["max_inflight"], metavar="N",
                   help=f"most requests in flight {scope}; past it a request waits and its lateness is "
                   f"recorded (default {REPLAY['max_inflight']})")
    p.add_argument("--timeout", type=positive_float, default=REPLAY["timeout_s"], metavar="S",
                   help=f"per-request timeout in seconds (default {REPLAY['timeout_s']:g})")
    p.add_argument("--retry-after", choices=POLICIES, default=REPLAY["retry_after"],
                   help="a 429 or 503 with Retry-After: record it as an error (default), or honour it: wait and "
                   "resend, within --timeout, at most --max-retries times (the record counts its attempts)")
    p.add_argument("--max-retries", type=non_negative_int, default=REPLAY["max_retries"], metavar="N",
                   help=f"with --retry-after honour, resends per request at most (default {REPLAY['max_retries']})")
    p.add_argument("--api-key-env", default=REPLAY["api_key_env"], metavar="NAME",
                   help="environment variable holding the servers' API key, sent as a Bearer token; the key "
                   f"is never taken on the command line nor written anywhere (default {REPLAY['api_key_env']})")
    p.add_argument("--lateness-limit", type=positive_float, default=REPLAY["lateness_limit_ms"], metavar="MS",
                   help="mark a replay client_limited when its send lateness p99 exceeds MS (default "
                   f"{REPLAY['lateness_limit_ms']:g}) or a Locust process ran above 90%% of a core")
    if "errors" in gate:
        p.add_argument("--max-errors", type=percent, default=DEFAULT_MAX_ERRORS, metavar="PCT",
                       help=f"fail (exit 1) when the errors and timeouts {scope} pass PCT percent of the requests "
                       f"sent, or when none succeeded (default {DEFAULT_MAX_ERRORS * 100:g}; requests not sent, and "
                       "the ends the client caused: stopped in flight, cut by --deadline, on a lost worker, do not "
                       "count)")
    if "slo" in gate:
        p.add_argument("--slo-gate", action="store_true",
                       help="also fail (exit 1) when any tenant's p99 TTFT, TPOT or E2E misses the target its "
                       "scenario sets (the SLO table says which); refused for a trace without targets")


def metrics_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("client metrics (Prometheus)")
    g.add_argument("--metrics-port", type=port_or_zero, default=0, metavar="PORT",
                   help="serve the client's view on http://HOST:PORT/metrics while the command runs: requests by "
                   "status and error kind, TTFT, TPOT, ITL, E2E and send lateness as histograms, in-flight "
                   "requests, output tokens and chunks, labelled by run, mode and tenant (default 0: a free "
                   "port, printed, written to the manifest and to OUT/prometheus-targets/RUN_ID.json, a "
                   "Prometheus file_sd file that also names every replica by mode, removed at the end)")
    g.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="address /metrics listens on (default 127.0.0.1, this machine only); any other needs "
                   "LOADTEST_WEB_USER and LOADTEST_WEB_PASSWORD in the environment and is then behind HTTP basic "
                   "auth")
    g.add_argument("--metrics-linger", type=non_negative_float, default=0.0, metavar="S",
                   help="keep /metrics up S seconds after the end, so a scraper's last scrape sees the final "
                   "counts (default 0; set it to your scrape interval or more)")
    g.add_argument("--no-metrics", action="store_true", help="serve no /metrics")


def slo_choice(p: argparse.ArgumentParser) -> None:
    slo = p.add_mutually_exclusive_group()
    slo.add_argument("--slo-from-scenario", action="store_true",
                     help="hold every tenant to the SLO targets its scenario sets (the default)")
    slo.add_argument("--slo", type=slo_targets, default=None, metavar="KEY=MS,...",
                     help="hold every tenant to these p99 targets instead, e.g. ttft_p99_ms=2000,tpot_p99_ms=40 "
                     "(keys: ttft_p99_ms, tpot_p99_ms, e2e_p99_ms)")
