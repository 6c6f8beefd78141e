"""The operations side of the command line: the client's /metrics, which every replaying command
serves (run, sweep, capacity, ui)."""

from __future__ import annotations

import argparse

from loadtest.commands.argtypes import non_negative_float, port_or_zero


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
