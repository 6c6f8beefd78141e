"""The grammar of the commands that measure or predict load curves: `plan` (the model's sweep),
`sweep` (a measured one) and `capacity` (the highest rate within the SLOs). Kept beside the
other commands' grammar (arguments.py), which calls `add_load_commands`."""

from __future__ import annotations

import argparse

from loadtest.commands.argtypes import (
    non_negative_float,
    percent,
    plain_name,
    positive_float,
    positive_floats,
    positive_int,
    positive_ints,
)
from loadtest.commands.option_groups import (
    DEFAULT_MAX_ERRORS,
    client_options,
    fleet_options,
    replay_options,
    slo_choice,
)


def _levels(p: argparse.ArgumentParser) -> None:
    levels = p.add_mutually_exclusive_group()
    levels.add_argument("--rate-scale", type=positive_floats, default=None, metavar="X,Y,...",
                        help="open-loop levels as multiples of the scenario's arrival rates (default 0.25,0.5,1,2,4)")
    levels.add_argument("--rates", type=positive_floats, default=None, metavar="R,S,...",
                        help="open-loop levels as offered requests per second (the scenario's arrivals scaled to "
                        "each)")
    levels.add_argument("--concurrency", type=positive_ints, default=None, metavar="N,M,...",
                        help="closed-loop levels: N requests kept in flight (each sent the moment one ends), "
                        "e.g. 1,4,16,64 from a single stream up")


def _level_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level-duration", type=positive_float, default=None, metavar="S",
                   help="per level and mode, stop sending S seconds after the start and let the requests in "
                   "flight finish (the rest are recorded not_sent); default: every request of the level")
    p.add_argument("--cooldown", type=non_negative_float, default=2.0, metavar="S",
                   help="pause between one mode's levels, and between modes, in seconds (default 2)")
    p.set_defaults(deadline=None)


def add_load_commands(sub) -> None:
    plan = sub.add_parser("plan", help="predict each mode at several loads from the simulator's model, in seconds",
                          description="Predict what a sweep of offered load would measure, per mode and tenant, from "
                          "the simulator's performance model run in virtual time (its own scheduler, no HTTP, no "
                          "sleeping): the fleet's modes on the hardware profile its [sim] section names (or "
                          "--hardware). Each level is written as a run folder (levels/<level>/, readable by "
                          "`loadtest report`), and sweep.parquet and report.md hold the curves: throughput, TPOT "
                          "and TTFT against load, the speedup over the baseline with its interval, and where each "
                          "mode stops paying (the crossover).")
    plan.add_argument("--fleet", default=None, metavar="NAME|PATH", help="built-in fleet or a fleet TOML file "
                      "(default: local-sim); a vLLM fleet is planned as the simulator would serve it")
    plan.add_argument("--modes", default=None, metavar="A,B,...", help="modes to plan (default: all the fleet's)")
    plan.add_argument("--scenario", default="saas-mix", metavar="NAME|PATH",
                      help="built-in scenario or a scenario TOML file (default: saas-mix)")
    plan.add_argument("--requests", type=positive_int, default=None, metavar="N",
                      help="requests per level (default: the scenario's demo size)")
    plan.add_argument("--seed", type=int, default=None, metavar="N", help="trace seed (default: the scenario's)")
    _levels(plan)
    plan.add_argument("--capacity", action="store_true",
                      help="also find each mode's highest offered rate at which every tenant meets the SLOs its "
                      "scenario sets (bracket, then bisect to 5%%), which tenant binds, and the mode to choose")
    plan.add_argument("--hardware", default=None, metavar="PROFILE",
                      help="the simulator's hardware profile to plan on (default: the fleet's [sim] hardware)")
    plan.add_argument("--out", default="results", metavar="DIR", help="results directory (default: results/)")
    plan.add_argument("--run-id", type=plain_name, default=None, metavar="ID",
                      help="the plan's folder under --out (default: UTC time)")

    sweep = sub.add_parser(
        "sweep", help="measure every mode at several loads: throughput and latency curves, where speculation stops "
        "paying", description="Start the fleet once and replay, per mode and level, the same requests (the "
        "same trace, so levels and modes pair by request): open loop at scaled arrival rates (--rate-scale, "
        "--rates) or closed loop at fixed concurrency (--concurrency). Each level is a run folder "
        "(levels/<level>/requests/mode=<mode>/, readable by `loadtest report`); sweep.parquet, report.md and "
        "report.html hold the curves per mode: throughput (total and per GPU), TPOT and TTFT against it, the "
        "speedup over the baseline with its interval, acceptance, and the load at which each mode stops paying. "
        "A mode that saturates (its completions stop following the load) is not taken higher unless "
        "--keep-going. On a simulator fleet (provisioned, or held up and given as --endpoints STATE) the sweep "
        "is also predicted by the model (plan/) and the report says by how much the two differ.")
    fleet_options(sweep)
    replay_options(sweep, "of a mode at a level", rate_scale=False, gate="errors")
    _levels(sweep)
    _level_options(sweep)
    sweep.add_argument("--keep-going", action="store_true",
                       help="replay every level of every mode, also above a level where the mode saturated")
    client_options(sweep)

    cap = sub.add_parser(
        "capacity", help="find each mode's highest request rate within the tenants' SLOs, by measurement",
        description="Per mode, find the highest offered rate at which every tenant meets its SLOs, by replaying "
        "the scenario's requests at chosen rates against the fleet: bracket by doubling up from --start-rate "
        "(or halving down from it, to a 16th of the scenario's rate), then bisect to --precision, each rate "
        "near the boundary probed --repeats times and decided by the "
        "majority. Prints, per mode, the highest rate, per GPU, the goodput there and the tenant whose SLO "
        "binds, and the mode to choose; capacity.parquet holds every probe, each probe a run folder under "
        "probes/. Exit 2 when no SLO target is given.")
    fleet_options(cap)
    replay_options(cap, "per probe", rate_scale=False, requests=False, gate="")
    cap.add_argument("--max-errors", type=percent, default=DEFAULT_MAX_ERRORS, metavar="PCT",
                     help="a probe fails when its errors and timeouts pass PCT percent of the requests it sent, "
                     "whatever its latencies, counted as the run's gate counts them "
                     f"(default {DEFAULT_MAX_ERRORS * 100:g})")
    slo_choice(cap)
    cap.add_argument("--probe-duration", type=positive_float, default=30.0, metavar="S",
                     help="each probe offers S seconds of the scenario's arrivals at its rate (the first rows of one "
                     "trace, so probes share their requests), then lets them finish (default 30)")
    cap.add_argument("--cooldown", type=non_negative_float, default=2.0, metavar="S",
                     help="pause between probes, in seconds (default 2)")
    cap.set_defaults(deadline=None, level_duration=None)
    cap.add_argument("--repeats", type=positive_int, default=3, metavar="N",
                     help="probes that decide each rate near the boundary, by majority (odd; default 3)")
    cap.add_argument("--precision", type=percent, default=0.10, metavar="PCT",
                     help="stop when the highest passing and lowest failing rates are within PCT percent "
                     "(default 10)")
    cap.add_argument("--start-rate", type=positive_float, default=None, metavar="R",
                     help="the first rate probed, in req/s (default: the scenario's own)")
    cap.add_argument("--max-rate", type=positive_float, default=None, metavar="R",
                     help="the highest rate probed, in req/s (default: 8 times the scenario's)")
    client_options(cap)

    cal = sub.add_parser(
        "calibrate", help="fit the simulator to a measured run or sweep: a profile for sim, fleets and plan",
        description="Fit the simulator's performance model to what a fleet measured: the compute and KV-read "
        "efficiencies and the step overhead from the baseline's decode steps against its batch and context "
        "(each request's mean step time beside the load over its decode window), and, per speculative method and "
        "domain, the acceptance per draft position, its spread across requests and the share of steps that "
        "proposed, from each request's acceptance histogram (vLLM's --per-request-spec-decode-metrics, or the "
        "simulator's). Writes a profile TOML that `loadtest sim --hardware FILE`, a fleet's [sim] hardware = "
        "\"FILE\" and `loadtest plan --hardware FILE` load, and prints the fit and its residuals. A sweep with "
        "several concurrency levels and varied prompt lengths fixes all three hardware constants; a constant the "
        "data cannot fix is held at the prior profile's value, and says so. Exit 2 on a folder with no runs.")
    cal.add_argument("result", metavar="RUN_OR_SWEEP",
                     help="a run folder, a sweep folder (every levels/<level>/) or a capacity folder (its probes)")
    cal.add_argument("--out", required=True, metavar="PROFILE.toml", help="where to write the fitted profile")
    cal.add_argument("--hardware", default=None, metavar="NAME|FILE",
                     help="the datasheet (and prior constants) to fit from: a built-in profile or a profile file "
                     "(default: the fleet's [sim] hardware, or its accelerator type for a vLLM fleet)")
    cal.add_argument("--mode", default=None, metavar="MODE",
                     help="the mode whose decode steps fix the hardware constants (default: the fleet's baseline)")

