"""manifest.json: what was run, on what, and how it ended. Rewritten atomically at each stage,
so a crash leaves the last stage's manifest readable. Never holds secrets.

A write that fails (a full disk) never stops the command: it says so in one line, leaves the
last manifest that was written as it was, and `unwritten` tells the command, which then exits
INCOMPLETE (common/exits.py) unless a later write succeeded."""

from __future__ import annotations

import errno
import json
import os
import platform
import socket
import sys
import threading
from dataclasses import asdict, dataclass, field, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from common import files
from common.exits import os_error_text, print_error
from common.times import utc_now

_WRITE_LOCK = threading.Lock()
SPACE_RESERVE = ".space-reserve"   # room a run folder holds back for the manifest's last word on a full disk
RESERVE_BYTES = 1 << 20            # a five-mode run's manifest is about 30 KB; a sweep's or a soak's more


def hold_reserve(run_dir: Path) -> None:
    """Set RESERVE_BYTES of the disk aside in `run_dir` (best effort: a disk already full holds none)."""
    try:
        with open(run_dir / SPACE_RESERVE, "wb") as f:
            f.write(bytes(RESERVE_BYTES))
    except OSError:
        (run_dir / SPACE_RESERVE).unlink(missing_ok=True)


def release_reserve(run_dir: Path) -> None:
    (run_dir / SPACE_RESERVE).unlink(missing_ok=True)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("loadtest", "locust", "ray", "pyarrow", "numpy", "vllm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def host_info() -> dict[str, object]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "argv": sys.argv[1:]}


@dataclass
class ModeRun:
    replicas: list[dict] = field(default_factory=list)   # label, url, pid, log
    locust_pids: list[int] = field(default_factory=list)  # the Locust process (or master) first, then workers
    ray_workers: list[dict] = field(default_factory=list)  # with --ray-workers: each worker's node and pid ...
    ray_worker_nodes: str | None = None                    # ... and which nodes they were dealt over, and why
    client: dict | None = None                             # the client's self-report: lateness, CPU, verdict
    started_at: str | None = None
    ended_at: str | None = None
    end: str | None = None   # completed, deadline, interrupted, failed, worker_lost, crashed, not started
    records: int | None = None
    unrecorded: int = 0      # requests it scheduled that its records do not hold (the end's recount)
    server_metrics: str | None = None                      # "scraped", or why the replicas' /metrics was not
    gpu_metrics: str | None = None                         # "read", "no GPUs", or why its GPUs were not read
    turn: int | None = None                                # the plan's turn (1 when every mode fits at once)
    provision_started_at: str | None = None                # its replicas asked for (each replica's timing too)
    loading_during_replay: list[str] = field(default_factory=list)  # modes whose replicas were starting meanwhile


@dataclass
class Manifest:
    run_id: str
    scenario: dict
    fleet: dict
    modes: list[str]
    seed: int
    requests: int
    status: str = "running"                # then completed, interrupted, failed, or refused (the pre-flight)
    reason: str | None = None
    simulated: str | None = None           # said first where the decision is: the simulator, and what it models
    started_at: str = field(default_factory=utc_now)
    ended_at: str | None = None
    mode_order: str = "sequential"
    plan: dict | None = None               # the pre-flight: turns, modes at once, what a replica takes
    skipped: dict[str, str] = field(default_factory=dict)  # mode -> why it was not run (--skip-unavailable)
    gate: str | None = None                # passed or failed (set when the run completed)
    checks: list[dict] = field(default_factory=list)  # per mode: the error gate (analysis.gate.ErrorCheck)
    slos: list[dict] = field(default_factory=list)    # per mode and tenant: p99s against targets (analysis.slo)
    decision: dict | None = None                      # what the run says to deploy (analysis.decision)
    levels: list[dict] = field(default_factory=list)  # a sweep's levels: name, load, saturated and skipped modes
    level_duration_s: float | None = None             # a sweep's --level-duration
    gpu_hour_cost: float | None = None                # a sweep's --gpu-hour-cost (a GPU-hour's price)
    metrics: str | None = None                        # where the command served the client's /metrics
    soak: dict | None = None                          # a soak's parameters, its stretches (resumes) and verdict
    unrecorded: dict[str, int] = field(default_factory=dict)   # mode -> scheduled requests with no record
    workers: dict | None = None            # the Locust workers per mode, and why (sizing.WorkerChoice)
    #                                                            (every level and probe): never silent
    versions: dict = field(default_factory=versions)
    host: dict = field(default_factory=host_info)
    mode_runs: dict[str, ModeRun] = field(default_factory=dict)

    @classmethod
    def read(cls, run_dir: Path) -> Manifest:
        """The manifest of a finished (or crashed) run; ValueError naming the file when it is not one."""
        path = Path(run_dir) / "manifest.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable run manifest ({exc})") from None
        known = {f.name for f in fields(cls)}
        run_keys = {f.name for f in fields(ModeRun)}
        try:
            data = {k: v for k, v in data.items() if k in known}
            data["mode_runs"] = {m: ModeRun(**{k: v for k, v in mr.items() if k in run_keys})
                                 for m, mr in data.get("mode_runs", {}).items()}
            return cls(**data)
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: not a run manifest ({exc})") from None

    def record(self, run_dir: Path, **values: object) -> bool:
        """`values` into their fields (by name; an unknown name is a bug), then written (`write`)."""
        names = {f.name for f in fields(self)}
        for name, value in values.items():
            if name not in names:
                raise AttributeError(f"the manifest has no field {name!r}")
            setattr(self, name, value)
        return self.write(run_dir)

    def write(self, run_dir: Path) -> bool:
        """Atomically replace manifest.json; safe to call from several threads (parallel modes).
        Whether it was written: if not (an OSError), the first failure since the last write that
        worked is said in one line, and `unwritten` holds it."""
        with _WRITE_LOCK:
            path = run_dir / "manifest.json"
            text = json.dumps(asdict(self), indent=2, default=str) + "\n"
            try:
                try:
                    files.write_text(path, text)
                except OSError as exc:   # a full disk: the room held back for this, then once more
                    if exc.errno != errno.ENOSPC or not (run_dir / SPACE_RESERVE).exists():
                        raise
                    release_reserve(run_dir)
                    files.write_text(path, text)
            except OSError as exc:
                said, self.unwritten = self.unwritten, f"could not write {path}: {os_error_text(exc)}"
                if said is None:
                    print_error(self._prog(), self.unwritten)
                return False
            self.unwritten = None
            return True

    @property
    def unwritten(self) -> str | None:
        """Why the last write failed; None when it worked (or none was tried)."""
        return getattr(self, "_unwritten", None)

    @unwritten.setter
    def unwritten(self, why: str | None) -> None:
        self._unwritten = why   # not a field: never in the file

    def _prog(self) -> str:
        """`loadtest run` (or whichever command this is, from its recorded argv), as its other
        errors name it."""
        command = next((a for a in self.host.get("argv", []) if not a.startswith("-")), None)
        return f"loadtest {command}" if command else "loadtest"
