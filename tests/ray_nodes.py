"""Ray clusters of several nodes on this machine, for the tests: each node a `ray start --block` of
its own process group, started one after another (several raylets starting at once on 2 cores can
time out), with the resources the test gives it (fake GPUs and `accelerator_type:H100` included).
All nodes share this machine's address, so a node is known by its Ray node id.

Each cluster brings its own token and its own Ray folder, as a new machine would have to: Ray's token
authentication (RAY_AUTH_MODE=token) with a token made in a folder of the cluster's own and handed to
every node and every driver as RAY_AUTH_TOKEN_PATH (Ray's order: RAY_AUTH_TOKEN, then
RAY_AUTH_TOKEN_PATH, then ~/.ray/auth_token); RAY_TMPDIR in the same folder (sessions, sockets, logs,
the `ray_current_cluster` file); and HOME an empty folder there, so no ~/.ray/auth_token of this
machine's can stand in for the token, and none is written (checked when the cluster stops). The
folder goes with the cluster."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import pid_alive
from tests.machine import TOKEN_NAME, new_ray_token

START_S = 90.0   # a node's raylet up (measured: 10-20 s each here; a busy suite takes longer)


def gpu_node(gpus: int = 4, cpus: int = 2) -> list[str]:
    """The flags of a node with `gpus` fake H100s."""
    return ["--num-cpus", str(cpus), "--num-gpus", str(gpus), "--resources", f'{{"accelerator_type:H100": {gpus}}}']


def cpu_node(cpus: int = 4) -> list[str]:
    """The flags of a node without GPUs (Ray sees none: --num-gpus 0)."""
    return ["--num-cpus", str(cpus), "--num-gpus", "0"]


@dataclass(frozen=True)
class RayHome:
    """A test cluster's own folder: its token file and Ray's temporary folder. Short (under the
    temporary folder, not a test's tmp_path): Ray's socket paths in it must fit 107 bytes."""

    folder: Path

    @classmethod
    def make(cls) -> RayHome:
        folder = Path(tempfile.mkdtemp(prefix="ray"))
        new_ray_token(folder / TOKEN_NAME)
        (folder / "home").mkdir()
        return cls(folder)

    @property
    def home(self) -> Path:
        """HOME for the cluster's nodes and drivers: empty, and kept so (no ~/.ray/auth_token)."""
        return self.folder / "home"

    @property
    def token_path(self) -> Path:
        return self.folder / TOKEN_NAME

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a node or a driver of this cluster: `base` (this process's by
        default) with token authentication on and this cluster's token and folder."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k != "RAY_AUTH_TOKEN"}
        return {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_path),
                "RAY_TMPDIR": str(self.folder), "HOME": str(self.home)}

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


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


def start_node(args: Sequence[str], env: dict[str, str]) -> RayNodeProcess:
    """`ray start --block ARGS` in a process group of its own, in `env`."""
    proc = subprocess.Popen([str(Path(sys.executable).with_name("ray")), "start", "--block",
                             "--disable-usage-stats", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env=env)
    node = RayNodeProcess(proc)
    threading.Thread(target=lambda: node.lines.extend(proc.stdout), daemon=True).start()
    return node


def head_address(node: RayNodeProcess) -> str:
    """The address a head prints for the other nodes to join, once it is up."""
    return str(_wait(node, lambda t: (m := re.search(r"ray start --address='([^']+)'", t)) and m.group(1)))


def joined(node: RayNodeProcess) -> None:
    """Once a node that joins a head is up."""
    _wait(node, lambda t: True if "Ray runtime started" in t else None)


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
    home: RayHome

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """A driver's environment for this cluster (its token included)."""
        return self.home.env(base)


@contextmanager
def ray_cluster(head: Sequence[str], others: Sequence[Sequence[str]]) -> Iterator[RayTestCluster]:
    """A head with `head`'s flags and one more node for each of `others`, each up before the next
    starts, all with the cluster's own token (RayHome); every process stopped at the end, and
    checked gone, and the cluster's folder removed."""
    home = RayHome.make()
    nodes: list[RayNodeProcess] = []
    try:
        nodes.append(start_node(["--head", "--port", "0", "--include-dashboard", "false", *head], home.env()))
        address = head_address(nodes[0])
        for flags in others:
            nodes.append(start_node([f"--address={address}", *flags], home.env()))
            joined(nodes[-1])
        yield RayTestCluster(address, nodes, home)
    finally:
        for node in reversed(nodes):   # all told at once: each stop waits for its own processes
            node.ask_stop()
        for node in reversed(nodes):
            node.stop()
        written = sorted(str(p.relative_to(home.home)) for p in home.home.rglob("*"))
        home.remove()
    assert not any(pid_alive(n.proc.pid) for n in nodes)
    assert not written, f"the cluster's nodes or drivers wrote under HOME: {written}"   # no ~/.ray/auth_token


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
