"""Shared helpers: start the real simulator as a user would (`loadtest sim ...`), and clean up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("data")
MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadtest(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run the `loadtest` CLI as a user would, capturing its output."""
    return subprocess.run([sys.executable, "-m", "loadtest", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=kw.pop("cwd", ROOT), **kw)


@contextmanager
def loadtest_process(*args: str, env: dict | None = None) -> Iterator[subprocess.Popen]:
    """`loadtest ARGS` running in the background (its own process group, output captured as text,
    in `env` if given); killed with its group on the way out if the test did not end it."""
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@contextmanager
def sim_server(*flags: str, model: str = MODEL, env: dict | None = None) -> Iterator[str]:
    """A `loadtest sim` process on a free loopback port; yields its base URL; kills its group."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "sim", model, "--port", str(port), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sim exited early: {proc.stdout.read().decode()}")
            try:
                if requests.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("sim did not become healthy")
            time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        proc.stdout.close()


@pytest.fixture
def sim_factory():
    return sim_server
