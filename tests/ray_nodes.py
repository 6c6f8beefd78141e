"""Ray clusters of several nodes on this machine, for the tests: each node a `ray start --block` of
its own process group, started one after another (several raylets starting at once on 2 cores can
time out), with the resources the test gives it (fake GPUs and `accelerator_type:H100` included).
All nodes share this machine's address, so a node is known by its Ray node id."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import pid_alive

START_S = 90.0   # a node's raylet up (measured: 10-20 s each here; a busy suite takes longer)


def gpu_node(gpus: int = 4, cpus: int = 2) -> list[str]:
    """The flags of a node with `gpus` fake H100s."""
    return ["--num-cpus", str(cpus), "--num-gpus", str(gpus), "--resources", f'{{"accelerator_type:H100": {gpus}}}']


def cpu_node(cpus: int = 4) -> list[str]:
    """The flags of a node without GPUs (Ray sees none: --num-gpus 0)."""
    return ["--num-cpus", str(cpus), "--num-gpus", "0"]


def ray_env() -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "token"}  # the head enables Ray's token auth by default


@dataclass
class RayNodeProcess:
    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """The node lost at once (a machine gone): SIGKILL to its raylet and every process of its group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)

    def ask_stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # `ray start --block` stops the processes it started

    def stop(self) -> None:
        self.ask_stop()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:  # Ray's own processes that node started, in its process group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def start_node(args: Sequence[str]) -> RayNodeProcess:
    proc = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--block",
                             "--disable-usage-stats", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env=ray_env())
    node = RayNodeProcess(proc)
    threading.Thread(target=lambda: node.lines.extend(proc.stdout), daemon=True).start()
    return node


def _wait(node: RayNodeProcess, found) -> object:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and node.alive():
        if (got := found(node.text)) is not None:
            return got
        time.sleep(0.2)
    raise AssertionError(f"a Ray node did not start within {START_S:g} s:\n{node.text}")


@dataclass
class RayTestCluster:
    address: str
    nodes: list[RayNodeProcess]   # the head first, then the other nodes in the order given


@contextmanager
def ray_cluster(head: Sequence[str], others: Sequence[Sequence[str]]) -> Iterator[RayTestCluster]:
    """A head with `head`'s flags and one more node for each of `others`, each up before the next
    starts; every process stopped at the end, and checked gone."""
    nodes = [start_node(["--head", "--port", "0", "--include-dashboard", "false", *head])]
    try:
        address = _wait(nodes[0], lambda t: (m := re.search(r"ray start --address='([^']+)'", t)) and m.group(1))
        for flags in others:
            nodes.append(start_node([f"--address={address}", *flags]))
            _wait(nodes[-1], lambda t: True if "Ray runtime started" in t else None)
        yield RayTestCluster(str(address), nodes)
    finally:
        for node in reversed(nodes):   # all told at once: each stop waits for its own processes
            node.ask_stop()
        for node in reversed(nodes):
            node.stop()
    assert not any(pid_alive(n.proc.pid) for n in nodes)


def node_of(pid: int, nodes: Sequence[RayNodeProcess]) -> RayNodeProcess | None:
    """The test node whose process group holds `pid` or one of its ancestors (a replica's server is
    a child of its actor, which is a child of that node's raylet)."""
    groups = {n.proc.pid: n for n in nodes}
    while pid > 1:
        try:
            if (group := os.getpgid(pid)) in groups:
                return groups[group]
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (ProcessLookupError, FileNotFoundError):
            return None
        pid = int(stat.rsplit(")", 1)[1].split()[1])   # the field after the state: the parent's pid
    return None
