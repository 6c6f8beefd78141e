"""What the benchmarks share: a loopback port, pinning to a core, and starting a server process
that is ready once its /health answers."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(cpu: int | None):
    """A preexec_fn that pins the child to one core (None: no pinning)."""
    return (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None


def start_server(argv: list[str], port: int, cpu: int | None, what: str) -> tuple[subprocess.Popen, str]:
    """Start `argv` (listening on `port`) in its own process group; return it and its base URL
    once /health answers."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=pin(cpu))
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not start")


def rss_mb(pid: int) -> float | None:
    """A process's resident memory (VmRSS) in MB, None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
