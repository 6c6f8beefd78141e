"""A replay's configuration, both ends: `ReplayConfig` (what a command wants replayed) builds the
command line of each Locust process, and `add_replay_arguments` / `replay_options` read it back
inside that process. The option names live here once."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from loadtest.request.client_stats import LATENESS_LIMIT_MS
from loadtest.request.retry import MAX_RETRIES, POLICIES

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


class ReplayError(RuntimeError):
    """A replay that cannot start or go on (no room for its workers, a worker that cannot see the
    run directory): the message is one line saying what to change."""
# How long a Locust master waits for its workers to connect before giving up (its rows are then
# recorded as not_sent; Locust's own --expect-workers-max-wait exits without a word).
CONNECT_WAIT_S = 120.0


@dataclass(frozen=True)
class ReplayConfig:
    """One mode's replay: the trace, the replicas, the client's limits, how many processes."""

    trace: Path
    mode: str
    endpoints: tuple[str, ...]
    served_model: str
    run_id: str
    run_dir: Path
    max_inflight: int = 1024
    timeout_s: float = 600.0
    retry_after: str = "record"            # a 429 or 503 with Retry-After: record it, or honour it
    max_retries: int = MAX_RETRIES         # ... resending at most this many times
    deadline_s: float | None = None
    drain: bool = False                    # at the deadline stop sending; let the requests in flight finish
    api_key_env: str = "LOADTEST_API_KEY"
    lateness_limit_ms: float = LATENESS_LIMIT_MS
    workers: int = 1                       # 1: one process; more: a master and this many workers
    ray_workers: bool = False              # the workers as Ray actors on the cluster's nodes
    connect_wait_s: float = CONNECT_WAIT_S
    grace_s: float = 10.0                  # on interrupt, how long in-flight requests may still finish
    start_delay_s: float = 0.5             # from a process's start to offset 0
    flush_s: float = 1.0                   # a new records part at least this often (a soak: less often)
    first_row: int = 0                     # a resumed soak: rows before this one are recorded already ...
    resume_at_s: float = 0.0               # ... and this trace offset comes `start_delay_s` after the start

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.ray_workers

    @property
    def records_dir(self) -> Path:
        return self.run_dir / "requests" / f"mode={self.mode}"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def _replay_args(self) -> list[str]:
        args = ["--trace-file", str(self.trace), "--mode", self.mode, "--endpoints", ",".join(self.endpoints),
                "--served-model", self.served_model, "--run-id", self.run_id, "--run-dir", str(self.run_dir),
                "--max-inflight", str(self.max_inflight), "--request-timeout", str(self.timeout_s),
                "--retry-after", self.retry_after, "--max-retries", str(self.max_retries),
                "--api-key-env", self.api_key_env, "--lateness-limit", str(self.lateness_limit_ms),
                "--grace", str(self.grace_s), "--start-delay", str(self.start_delay_s), "--flush", str(self.flush_s)]
        if self.first_row:
            args += ["--first-row", str(self.first_row), "--resume-at", str(self.resume_at_s)]
        if self.deadline_s:
            args += ["--deadline", str(self.deadline_s)]
        if self.drain:
            args.append("--drain")
        return args

    def main_argv(self, master_host: str = "127.0.0.1", master_port: int = 0) -> list[str]:
        """The lone Locust process, or the master of a distributed replay (headless)."""
        runner = ["--headless", "--only-summary"]
        users = str(self.workers if self.distributed else 1)
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *runner, "-u", users, "-r", users,
                "--host", self.endpoints[0], "--logfile", str(self.logs_dir / f"locust-{self.mode}.log"),
                *self._replay_args()]
        if self.distributed:
            argv += ["--master", "--expect-workers", str(self.workers), "--connect-wait", str(self.connect_wait_s),
                     "--master-bind-host", master_host, "--master-bind-port", str(master_port)]
        return argv

    def worker_argv(self, index: int, master_host: str, master_port: int, python: str = sys.executable,
                    locustfile: Path = LOCUSTFILE) -> list[str]:
        """Worker `index` of a distributed replay (`python` and `locustfile` of the node it runs on)."""
        log_file = self.logs_dir / f"locust-{self.mode}-worker{index}.log"
        return [python, "-m", "locust", "-f", str(locustfile), "--worker", "--master-host", master_host,
                "--master-port", str(master_port), "--logfile", str(log_file), *self._replay_args()]


def add_replay_arguments(parser) -> None:
    """Locust's init_command_line_parser hook: the options `ReplayConfig` writes."""
    g = parser.add_argument_group("loadtest replay")
    g.add_argument("--trace-file", required=True, help="trace.parquet to replay")
    g.add_argument("--mode", required=True, help="speculation mode under test (Locust stats name)")
    g.add_argument("--endpoints", required=True, help="comma-separated base URLs of the mode's replicas")
    g.add_argument("--served-model", required=True, help="model name the replicas serve")
    g.add_argument("--run-id", required=True)
    g.add_argument("--run-dir", required=True, help="the run's folder (records go to requests/mode=MODE/)")
    g.add_argument("--worker-id", default="w0")
    g.add_argument("--shard", default="0/1", help="K/N: replay rows i with i %% N == K")
    g.add_argument("--max-inflight", type=int, default=1024)
    g.add_argument("--request-timeout", type=float, default=600.0)
    g.add_argument("--retry-after", choices=POLICIES, default="record")
    g.add_argument("--max-retries", type=int, default=MAX_RETRIES)
    g.add_argument("--deadline", type=float, default=0.0, help="stop sending after S seconds (0: none)")
    g.add_argument("--drain", action="store_true",
                   help="at the deadline stop sending, but let the requests in flight finish (a sweep's level)")
    g.add_argument("--grace", type=float, default=10.0, help="seconds in-flight requests get on interrupt")
    g.add_argument("--start-delay", type=float, default=0.5, help="seconds from start-up to offset 0")
    g.add_argument("--flush", type=float, default=1.0, help="seconds between the records' part files, at most")
    g.add_argument("--first-row", type=int, default=0, help="a resumed soak: replay from this row of the trace")
    g.add_argument("--resume-at", type=float, default=0.0,
                   help="a resumed soak: the trace offset (s) that comes --start-delay after the start")
    g.add_argument("--connect-wait", type=float, default=CONNECT_WAIT_S,
                   help="master: seconds to wait for every worker to connect; then record every row as "
                   "not_sent and quit")
    g.add_argument("--lateness-limit", type=float, default=LATENESS_LIMIT_MS,
                   help="send lateness p99 (ms) above which the run is marked client_limited")
    g.add_argument("--api-key-env", default="LOADTEST_API_KEY",
                   help="environment variable holding the API key (never passed on the command line)")


def replay_config(parsed) -> ReplayConfig:
    """The ReplayConfig a Locust process's parsed command line carries (its `--worker-id`, `--shard`
    and `--connect-wait` are read where they are used)."""
    return ReplayConfig(
        trace=Path(parsed.trace_file), mode=parsed.mode, endpoints=tuple(parsed.endpoints.split(",")),
        served_model=parsed.served_model, run_id=parsed.run_id, run_dir=Path(parsed.run_dir),
        max_inflight=parsed.max_inflight, timeout_s=parsed.request_timeout,
        retry_after=parsed.retry_after, max_retries=parsed.max_retries, deadline_s=parsed.deadline or None,
        drain=parsed.drain, api_key_env=parsed.api_key_env, lateness_limit_ms=parsed.lateness_limit,
        grace_s=parsed.grace, start_delay_s=parsed.start_delay, flush_s=parsed.flush, first_row=parsed.first_row,
        resume_at_s=parsed.resume_at)
