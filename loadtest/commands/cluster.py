"""`loadtest cluster up|status|down`: options to the cluster room's commands (cluster/commands.py),
a FleetError as one line and exit 2."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from common.exits import BAD_INPUT, print_error
from loadtest.commands.console import new_console
from loadtest.options.replaying import DEFAULT_OUT
from loadtest.options.tools import ClusterStateOptions, ClusterStatusOptions, ClusterUpOptions


def up(args: ClusterUpOptions) -> int:
    from cluster import FleetError
    from cluster import commands as c

    stamp = f"cluster-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    logs = Path(args.logs) if args.logs else Path(DEFAULT_OUT) / stamp / "logs"
    relaunch = [sys.executable, "-m", "loadtest"]  # how --detach starts the same command again
    try:
        return c.up(new_console(), args.fleet, args.modes, Path(args.state), logs, args.address, args.detach,
                    relaunch, skip_unavailable=args.skip_unavailable)
    except FleetError as exc:
        print_error("loadtest cluster up", str(exc))
        return BAD_INPUT


def status(args: ClusterStatusOptions) -> int:
    from cluster import FleetError
    from cluster import commands as c

    try:
        return c.status(new_console(), Path(args.state), args.api_key_env)
    except FleetError as exc:
        print_error("loadtest cluster status", str(exc))
        return BAD_INPUT


def down(args: ClusterStateOptions) -> int:
    from cluster import FleetError
    from cluster import commands as c

    try:
        return c.down(new_console(), Path(args.state), c.DOWN_TIMEOUT_S)
    except FleetError as exc:
        print_error("loadtest cluster down", str(exc))
        return BAD_INPUT
