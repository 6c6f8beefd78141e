"""What every replaying command shows around the engine's pipeline (loadtest.engine.pipeline):
the views it hands the engine (the progress bars and the client's /metrics), the run's first
lines, and a concluded run's tables and gate."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from loadtest.commands.console import say_summaries_not_written
from loadtest.commands.views import show_gate, show_run
from loadtest.engine.conclude import Concluded
from loadtest.engine.events import Observer, Observers
from loadtest.engine.pipeline import Run
from loadtest.live.metrics_server import MetricsServer
from loadtest.live.progress import ProgressView
from loadtest.options.replaying import Replaying


def observers(args: Replaying, console: Console, *more: Observer) -> Observers:
    """The console's bars and notices, the client's /metrics (its --metrics-* options), and `more`."""
    return Observers(ProgressView(console, args.folder.progress_every), MetricsServer.of(args.metrics, console), *more)


def show_start(console: Console, run: Run, line: str) -> None:
    """The run's first line (`line`, in rich's markup), and where its numbers come from when that
    is the simulator."""
    console.print(line, soft_wrap=True)
    if run.manifest.simulated:
        console.print(f"[bold magenta]{run.manifest.simulated}[/bold magenta]", soft_wrap=True)


def show_concluded(console: Console, prog: str, run_dir: Path, concluded: Concluded, slo_details: bool = False) -> None:
    """A concluded run's tables and notes, a full disk said in one line, and its gate."""
    if concluded.found is not None:
        show_run(console, concluded.found, slo_details)
    if concluded.not_written is not None:
        say_summaries_not_written(prog, run_dir, concluded.not_written)
    if concluded.gate is not None:
        show_gate(console, concluded.gate.failed, concluded.gate.unjudged)
