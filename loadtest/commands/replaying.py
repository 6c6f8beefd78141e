"""What every replaying command shows around the engine's pipeline (loadtest.engine.pipeline),
beside the observers it hands the engine (loadtest.live.watch): the run's first lines, and a
concluded run's tables and gate."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from loadtest.commands.console import say_summaries_not_written
from loadtest.commands.views import show_gate, show_run
from loadtest.engine.conclude import Concluded
from loadtest.engine.pipeline import Run


def show_start(console: Console, run: Run, line: str) -> None:
    """The run's first line (`line`, in rich's markup), where its numbers come from when that is
    the simulator, and the notes its scenario carries (a real-prompt tenant with ignore_eos)."""
    console.print(line, soft_wrap=True)
    if run.manifest.simulated:
        console.print(f"[bold magenta]{run.manifest.simulated}[/bold magenta]", soft_wrap=True)
    for note in run.manifest.scenario.get("notes", []):
        console.print(f"note: {note}", style="yellow", soft_wrap=True, highlight=False, markup=False)


def show_concluded(console: Console, prog: str, run_dir: Path, concluded: Concluded, slo_details: bool = False) -> None:
    """A concluded run's tables and notes, a full disk said in one line, and its gate."""
    if concluded.found is not None:
        show_run(console, concluded.found, slo_details)
    if concluded.not_written is not None:
        say_summaries_not_written(prog, run_dir, concluded.not_written)
    if concluded.gate is not None:
        show_gate(console, concluded.gate.failed, concluded.gate.unjudged)
