"""The operations side of the command line: the client's /metrics, which every replaying command
serves (run, sweep, capacity, ui, soak), `loadtest ui` and `loadtest soak`."""

from __future__ import annotations

import argparse

from loadtest.commands.argtypes import duration, port
from loadtest.commands.option_groups import client_options, fleet_options, replay_options, slo_choice


def add_soak(sub) -> None:
    soak = sub.add_parser(
        "soak", help="hours of day-shaped or bursty load, for leaks and drift; exit codes for schedulers",
        description="Replay a scenario's arrivals for --duration (hours), generating the trace a window ahead "
        "of the replay (never whole in memory) and writing the records in rolling Parquet parts. Every mode "
        "given runs at once. At the end (or on Ctrl-C) the SLOs are checked over sliding --window windows and "
        "the run is searched for drift: a latency trend with the load held apart, error bursts, and the "
        "server's KV-cache use and waiting queue growing; each finding names its window (soak.md, "
        "findings.json, windows.parquet). Exit 0 passed, 1 an SLO window or a drift check failed, 2 bad input, "
        "3 the run could not complete, 130 interrupted. --resume RUN continues a killed or interrupted soak "
        "into the same folder: every scheduled request ends up recorded once.")
    fleet_options(soak)
    replay_options(soak, "in a mode", requests=False, gate="errors", trace=False, scenario="soak")
    soak.set_defaults(trace=None, requests=None, cooldown=0.0, deadline=None)
    soak.add_argument("--duration", type=duration, default=None, metavar="T",
                      help="how long to send, e.g. 8h, 30m, 90s (default: the scenario's duration)")
    soak.add_argument("--window", type=duration, default=300.0, metavar="T",
                      help="the SLO window: each target is held over every window this long (default 5m), one "
                      "window every --window-step; drift is judged over tumbling windows this long")
    soak.add_argument("--window-step", type=duration, default=None, metavar="T",
                      help="how far each SLO window slides (default: a fifth of --window)")
    soak.add_argument("--flush-every", type=duration, default=10.0, metavar="T",
                      help="a new Parquet part per worker at least this often (default 10s): what a crash can "
                      "lose, at most, before --resume records it as an unknown outcome")
    soak.add_argument("--resume", default=None, metavar="RUN",
                      help="continue the soak in this run folder (killed, interrupted, or its machine rebooted): "
                      "its scenario, duration, modes and targets come from its manifest; rows already due are "
                      "not sent again, the rest go on where it stopped")
    slo_choice(soak)
    client_options(soak)
    _always_parallel(soak)   # a soak's modes share its clock


def add_ui(sub) -> None:
    ui = sub.add_parser(
        "ui", help="Locust's web UI: start a run of several modes from the form, compare them live",
        description="Open Locust's web UI once; its start form chooses the scenario, the modes and the rate "
        "scale (Custom parameters). Start replays every chosen mode side by side, each with its own Locust "
        "process(es), writing the same dataset, manifest and report as `loadtest run --parallel-modes`; Stop "
        "ends them (the rest is recorded as not_sent). The Comparison tab (a row per mode) and the Comparison "
        "page (per mode, and per tenant on demand) show TTFT, TPOT, ITL and E2E percentiles, output tokens/s, "
        "goodput, tokens per step and the server's acceptance; the page as a table and charts over time, "
        "every second. The form's scenario is a built-in name, or the --scenario or --trace file given here. "
        "The UI stays up after the run; Ctrl-C quits. Any --web-host but loopback needs LOADTEST_WEB_USER and "
        "LOADTEST_WEB_PASSWORD in the environment, and every route is then behind HTTP basic auth.")
    fleet_options(ui)
    ui.add_argument("--web-host", default="127.0.0.1", metavar="HOST",
                    help="address the web UI listens on (default 127.0.0.1, this machine only; any other needs "
                    "the login above)")
    ui.add_argument("--web-port", type=port, default=8089, metavar="PORT", help="web UI port (default 8089)")
    replay_options(ui, "per mode")
    client_options(ui)
    ui.set_defaults(parallel_modes=True, cooldown=0.0, deadline=None)
    _always_parallel(ui)
    for action in ui._actions:
        if action.dest in ("scenario", "trace", "rate_scale"):
            action.help += " (the start form's default)"


def _always_parallel(p: argparse.ArgumentParser) -> None:
    """A command that always replays its modes at once: --parallel-modes is not offered in its help."""
    for action in p._actions:
        if "--parallel-modes" in action.option_strings:
            action.help = argparse.SUPPRESS
