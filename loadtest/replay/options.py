"""A replay's configuration, both ends: `ReplayConfig` (what a command wants replayed, and the
one place its defaults are written) builds the command line of each Locust process, which
carries it whole as one `--replay-config` (loadtest.replay.protocol's `encode_config`), and
`replay_config` reads it back inside that process. The commands' grammar takes its defaults
from here too (loadtest.options.replaying.ClientOptions)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from loadtest.replay.protocol import encode_config, parse_config
from loadtest.request.retry import MAX_RETRIES

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


class ReplayError(RuntimeError):
    """A replay that cannot start or go on (no room for its workers, a worker that cannot see the
    run directory): the message is one line saying what to change."""
# How long a Locust master waits for its workers to connect before giving up (its rows are then
# recorded as not_sent; Locust's own --expect-workers-max-wait exits without a word).
CONNECT_WAIT_S = 120.0
# A run whose send lateness p99 exceeds this is marked client_limited (the default).
LATENESS_LIMIT_MS = 10.0


# The most requests in flight one client may hold: each is a TCP connection, and one address holds
# at most 65,535 (16-bit ports) to a server's port; past it, a typo (99999999999999 once hung a run).
MAX_INFLIGHT = 65_535
# What one Locust process takes (measured: 145 MB resident, each of three workers replaying tiny-mix
# on this 2-core machine, 2026-12-05): how many fit in memory bounds --workers.
LOCUST_PROCESS_BYTES = 150 << 20


@dataclass(frozen=True)
class ReplayConfig:
    """One mode's replay: the trace, the replicas, the client's limits, how many processes."""

    # `trace` and `run_dir` are absolute (the engine resolves both): a Locust process runs in the run's
    # logs/ (common.process.child_env), and a Ray worker on another node
    trace: Path
    mode: str
    endpoints: tuple[str, ...]
    served_model: str
    run_id: str
    run_dir: Path
    max_inflight: int = 1024               # at most MAX_INFLIGHT
    timeout_s: float = 600.0
    retry_after: str = "record"            # a 429 or 503 with Retry-After: record it, or honour it
    max_retries: int = MAX_RETRIES         # ... resending at most this many times
    deadline_s: float | None = None
    drain: bool = False                    # at the deadline stop sending; let the requests in flight finish
    api_key_env: str = "LOADTEST_API_KEY"
    lateness_limit_ms: float = LATENESS_LIMIT_MS
    workers: int = 1                       # 1: one process; more: a master and this many workers
    ray_workers: bool = False              # the workers as Ray actors on the cluster's nodes ...
    ray_worker_nodes: str | None = None    # ... on those with this resource or label KEY=VALUE (None: without GPUs)
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
        return ["--replay-config", encode_config(self)]

    def main_argv(self, master_host: str = "127.0.0.1", master_port: int = 0) -> list[str]:
        """The lone Locust process, or the master of a distributed replay (headless)."""
        runner = ["--headless", "--only-summary"]
        users = str(self.workers if self.distributed else 1)
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *runner, "-u", users, "-r", users,
                "--host", self.endpoints[0], "--logfile", str(self.logs_dir / f"locust-{self.mode}.log"),
                *self._replay_args()]
        if self.distributed:
            argv += ["--master", "--expect-workers", str(self.workers), "--master-bind-host", master_host,
                     "--master-bind-port", str(master_port)]
        return argv

    def worker_argv(self, index: int, master_host: str, master_port: int, python: str = sys.executable,
                    locustfile: Path = LOCUSTFILE) -> list[str]:
        """Worker `index` of a distributed replay (`python` and `locustfile` of the node it runs on)."""
        log_file = self.logs_dir / f"locust-{self.mode}-worker{index}.log"
        return [python, "-m", "locust", "-f", str(locustfile), "--worker", "--master-host", master_host,
                "--master-port", str(master_port), "--logfile", str(log_file), *self._replay_args()]


def add_replay_arguments(parser) -> None:
    """Locust's init_command_line_parser hook: what `ReplayConfig` writes, and what only the
    process that reads it knows (a worker's name and shard)."""
    g = parser.add_argument_group("loadtest replay")
    g.add_argument("--replay-config", required=True, metavar="JSON", help="the replay's ReplayConfig, whole")
    g.add_argument("--worker-id", default="w0")
    g.add_argument("--shard", default="0/1", help="K/N: replay rows i with i %% N == K")


def replay_config(parsed) -> ReplayConfig:
    """The ReplayConfig a Locust process's parsed command line carries."""
    return parse_config(ReplayConfig, parsed.replay_config)
