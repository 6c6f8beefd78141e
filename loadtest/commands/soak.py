"""`loadtest soak`: hours of a scenario's arrivals against one fleet, every mode at once, its trace
written a part at a time just ahead of the replay, its records in rolling Parquet parts; then the
SLOs over sliding windows and drift over the run (analysis.soak), each finding naming its window,
and an exit code a scheduler can act on. `--resume RUN` goes on with a killed soak in its folder.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console

from analysis.reader import ContractError, read_requests
from analysis.server import load_server_metrics
from analysis.soak import Finding, findings, slo_windows, span, windows
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from common.times import utc_now
from loadtest.commands.console import new_console
from loadtest.commands.inputs import Trace
from loadtest.commands.metrics_server import MetricsError
from loadtest.commands.report import print_summary, record_gate
from loadtest.commands.run import Run, served
from loadtest.commands.soak_inputs import Soak, new_soak, resumed_soak
from loadtest.session.options import SoakOptions, with_values
from scenarios import ScenarioError
from scenarios.stream import TraceStream
from scenarios.trace import TRACE_SCHEMA

LEAD_PARTS = 2   # trace parts written ahead of the replay's clock
COLUMNS = ["mode", "tenant", "status", "offset_s", "scheduled_ns", "ttft_ms", "tpot_ms", "e2e_ms", "error_kind"]


class PartWriter(threading.Thread):
    """Writes the trace's parts LEAD_PARTS ahead of where the soak's clock is (from `at_s` now)."""

    def __init__(self, stream: TraceStream, folder: Path, at_s: float) -> None:
        super().__init__(daemon=True, name="soak-trace-parts")
        self.stream, self.folder, self.at_s, self.t0 = stream, folder, at_s, time.monotonic()
        self.stop = threading.Event()
        self.error: Exception | None = None
        self.write_upto(stream.part_of(at_s) + LEAD_PARTS)   # before any replay starts

    def write_upto(self, k: int) -> None:
        for part in range(min(k, self.stream.parts - 1) + 1):
            self.stream.write(self.folder, part)

    def run(self) -> None:
        try:
            while not self.stop.wait(1.0):
                now_s = self.at_s + time.monotonic() - self.t0
                self.write_upto(self.stream.part_of(now_s) + LEAD_PARTS)
                if self.stream.part_of(now_s) + LEAD_PARTS >= self.stream.parts:
                    return
        except Exception as exc:   # the replay then waits for a part that never comes, and says so
            self.error = exc


class SoakRun(Run):
    trace_file = "trace"

    def __init__(self, *args: object, soak: Soak, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.replay_extra = soak.extra


def main(args: SoakOptions) -> int:
    console = new_console()
    try:
        soak = resumed_soak(args) if args.resume else new_soak(args)
    except (ScenarioError, FleetError, FileExistsError, MetricsError, PermissionError) as exc:
        print_error("loadtest soak", str(exc))
        return exits.BAD_INPUT
    except (KeyError, OSError, pa.ArrowInvalid) as exc:   # a run folder that is not what a soak leaves
        print_error("loadtest soak", f"--resume: {args.resume}: cannot read it ({type(exc).__name__}: {exc})")
        return exits.BAD_INPUT
    with soak.lock:
        return _soak(console, soak)


def _soak(console: Console, soak: Soak) -> int:
    run_dir, manifest, stream, p = soak.run_dir, soak.manifest, soak.stream, soak.params
    manifest.write(run_dir)
    args = with_values(soak.options, parallel_modes=len(soak.choice.modes) > 1)   # every mode at once
    at_s = max((e.get("resume_at_s", 0.0) for e in soak.extra.values()), default=0.0)   # the mode furthest on
    writer = PartWriter(stream, run_dir / "trace", at_s)
    writer.start()
    how = "resumed" if args.resume else "started"
    console.print(f"[bold]soak {manifest.run_id}[/bold] {how}: {stream.info.rows:,} requests of "
                  f"{stream.info.scenario} over {p['duration_s'] / 3600:.2f} h, modes {', '.join(soak.choice.modes)}, "
                  f"SLO windows of {p['window_s']:g} s every {p['step_s']:g} s; trace parts of {stream.window_s:g} s "
                  f"written {LEAD_PARTS} ahead; records flushed every {p['flush_s']:g} s"
                  + (f"; going on after {soak.dropped:,} requests the stop left unsent and "
                     f"{soak.resumed_unknown:,} whose outcome it lost (recorded as error/worker_lost)"
                     if args.resume else ""), soft_wrap=True)
    trace = Trace(TRACE_SCHEMA.empty_table(), manifest.scenario, manifest.seed)
    try:
        code = served(args, console, manifest, run_dir, lambda signals, server: SoakRun(
            args, console, trace, soak.choice, run_dir, manifest, signals, server, soak=soak).replay_all())
    finally:
        writer.stop.set()
    if code is None:   # /metrics could not listen: nothing ran
        return exits.BAD_INPUT
    if writer.error is not None:
        print_error("loadtest soak", f"writing the trace's parts failed: {writer.error}")
    return verdict(console, soak, code)


def verdict(console: Console, soak: Soak, code: int) -> int:
    """The usual tables and error gate, then the SLO windows and the drift checks; the exit code."""
    run_dir, manifest, p = soak.run_dir, soak.manifest, soak.params
    try:
        checks = print_summary(console, run_dir, soak.choice.modes, manifest, soak.options.gate.max_errors)
        records = read_requests(run_dir, columns=COLUMNS)
    except files.NotWritten:   # a full disk: said in one line by the command (exit 3)
        raise
    except (ContractError, OSError, pa.ArrowInvalid) as exc:   # nothing recorded (it failed first), or unreadable
        print_error("loadtest soak", f"no verdict: the records of {run_dir} cannot be read ({exc})")
        return code if code != exits.OK else exits.INCOMPLETE
    table = windows(records, load_server_metrics(run_dir), p["window_s"], p["duration_s"])
    files.write_table(table, run_dir / "windows.parquet")
    found = findings(table, p["window_s"])
    if soak.targets:
        found = slo_windows(records, p["window_s"], p["step_s"], p["duration_s"], soak.targets) + found
    files.write_text(run_dir / "findings.json", json.dumps([f.as_dict() for f in found], indent=1) + "\n")
    files.write_text(run_dir / "soak.md", soak_md(manifest.run_id, manifest.status, p, table, found))
    for f in found:
        console.print(f"[red bold]{f.check}[/red bold]: {f.message}", soft_wrap=True, highlight=False)
    if not found:
        console.print(f"soak: no SLO window missed{'' if soak.targets else ' (no targets set)'} and no drift found "
                      f"over {table.num_rows // max(1, len(soak.choice.modes))} windows", soft_wrap=True)
    passed = record_gate(manifest, checks, console) and not found
    p["findings"], p["ended_at"] = len(found), utc_now()
    manifest.gate = "passed" if passed else "failed"
    manifest.write(run_dir)
    console.print(f"soak: {run_dir / 'soak.md'} (windows: {run_dir / 'windows.parquet'}, findings: "
                  f"{run_dir / 'findings.json'})", soft_wrap=True)
    return exits.GATE_FAILED if code == exits.OK and not passed else code


def soak_md(run_id: str, status: str, p: dict, table: pa.Table, found: list[Finding]) -> str:
    """soak.md: the verdict, each finding with its window, and the windows per mode."""
    lines = [f"# Soak {run_id} ({status})", "",
             f"{p['duration_s'] / 3600:.2f} h; SLO windows of {p['window_s']:g} s every {p['step_s']:g} s; drift over "
             f"tumbling windows of {p['window_s']:g} s with the offered load held apart.", ""]
    lines += ["## Findings", ""] + ([f"- **{f.check}** ({span(f.start_s, f.end_s)}): {f.message}" for f in found]
                                    or ["- none: every SLO window met its targets and nothing drifted"])
    cols = ["window", "start", "scheduled", "ok", "errors", "client", "not_sent", "ttft_p99_ms", "tpot_p50_ms",
            "tpot_p99_ms", "e2e_p99_ms", "kv_cache_usage", "waiting"]
    for mode in sorted(set(table["mode"].to_pylist())):
        rows = table.filter(pc.equal(table["mode"], mode)).to_pylist()
        lines += ["", f"## {mode}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            r["start"] = span(r["start_s"], r["end_s"])
            lines.append("| " + " | ".join("-" if r[c] is None else f"{r[c]:,.3g}" if isinstance(r[c], float)
                                           else str(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"
