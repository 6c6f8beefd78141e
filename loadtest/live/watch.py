"""The observers every replaying command hands the engine: the console's bars and notices, and
the client's /metrics (its --metrics-* options), with any more the command has (the web UI's board)."""

from __future__ import annotations

from rich.console import Console

from loadtest.engine.events import Observer, Observers
from loadtest.live.metrics_server import MetricsServer
from loadtest.live.progress import ProgressView
from loadtest.options.replaying import Replaying


def observers(args: Replaying, console: Console, *more: Observer) -> Observers:
    """The console's bars and notices, the client's /metrics (its --metrics-* options), and `more`."""
    return Observers(ProgressView(console, args.folder.progress_every), MetricsServer.of(args.metrics, console), *more)
