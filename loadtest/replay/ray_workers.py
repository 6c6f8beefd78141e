"""Locust workers on Ray nodes: each worker is a `locust --worker` child process of a Ray actor,
on the nodes worker_nodes.py chooses, connecting back to the master on the driver's node.

Locust is never imported here nor in the actors (gevent's monkey-patching hangs `ray.init()`);
the actor only starts and stops its child. Workers write their Parquet parts straight into the
run directory, and the master reads a lost worker's parts to account for its rows, so the run
directory must be on storage every node mounts (NFS, EFS, a Ray cluster's shared volume): each
actor checks that it can see the run directory before it starts, and says so if it cannot.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from common.process import child_env, signal_group, stop_group, told_when_parent_dies
from common.ray_nodes import alive_nodes
from loadtest.replay.options import LOCUSTFILE, ReplayConfig, ReplayError
from loadtest.replay.worker_nodes import chosen_nodes, deal

log = logging.getLogger("loadtest")
STOP_GRACE_S = 10.0
START_TIMEOUT_S = 120.0
ACTOR_DIED = "died during the run"   # a placement's "actor" when Ray says the actor was dead at its stop
SEATING = threading.Lock()           # one replay seats its workers at a time (modes replayed at once) ...
SETTLE_S = 10.0                      # ... and Ray's view of free CPUs is given this long to catch up


@ray.remote(num_cpus=1, max_restarts=0)
class LocustWorkerActor:
    """Owns one `locust --worker` process group on whichever node Ray placed it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def node(self) -> tuple[str, str]:
        """The node's address and Ray node id."""
        return ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id()

    def start(self, config: ReplayConfig, index: int, master: tuple[str, int], env: dict[str, str]) -> int:
        """Start worker `index` with this node's Python and locustfile; `env` carries what must not
        be on a command line (the API key)."""
        run_dir = config.run_dir
        if not Path(run_dir, "manifest.json").is_file():
            raise ReplayError(f"node {ray.util.get_node_ip_address()} cannot see the run directory {run_dir}: "
                             "with --ray-workers, --out must be on storage every node mounts")
        argv = config.worker_argv(index, *master, python=sys.executable, locustfile=LOCUSTFILE)
        with open(Path(run_dir, "logs", f"ray-worker{index}.stderr.txt"), "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                         cwd=config.logs_dir, env=child_env(env, home=config.logs_dir),
                                         start_new_session=True, preexec_fn=told_when_parent_dies)
        return self.proc.pid

    def signal(self, sig: int) -> None:
        """Pass the command's signal on to the worker's group, as to a local worker."""
        if self.proc is not None and self.proc.poll() is None:
            signal_group(self.proc.pid, sig)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the worker's group, SIGKILL after `grace_s`; its exit code."""
        if self.proc is None:
            return None
        return stop_group(self.proc, grace_s)


class RayWorkers:
    """The config's Locust workers as Ray actors, one per CPU on the nodes `worker_nodes` chooses
    (those without GPUs, by default), connecting back to the master at `master_host`; stopped on
    every path."""

    def __init__(self, config: ReplayConfig, master_host: str, env: dict[str, str] | None = None) -> None:
        self.config = config
        self.master_host = master_host
        self.env = env or {}
        self.actors: list = []
        self.placements: list[dict] = []   # node (address, Ray node id) and pid of each worker, for the manifest
        self.cluster_gone = False          # the Ray cluster went away (cluster/ray_watch.py): call nothing of Ray
        self.where = ""                    # the nodes chosen, in words, for the manifest
        self.free: dict[str, float] = {}   # node id -> CPUs free when the workers were seated

    def start(self, master_port: int) -> None:
        """Seat the workers on their nodes (worker_nodes.py) and start them there. One replay seats
        its workers at a time, so modes replayed at once do not count the same free CPU twice."""
        with SEATING:
            nodes, self.where = chosen_nodes(alive_nodes(ray.nodes()), self.config.ray_worker_nodes)
            seats = self._seats(nodes)
            before = sum(self.free.get(n.node_id, 0.0) for n in nodes)
            self.actors = [LocustWorkerActor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
                node.node_id, soft=False)).remote() for node in seats]
            master = (self.master_host, master_port)
            try:
                pids = ray.get([a.start.remote(self.config, i, master, self.env) for i, a in enumerate(self.actors)],
                               timeout=START_TIMEOUT_S)
            except ray.exceptions.RayTaskError as exc:
                raise ReplayError(str(exc.cause) if exc.cause is not None else str(exc)) from None
            except ray.exceptions.GetTimeoutError:
                raise ReplayError(f"--ray-workers: the workers' actors did not start within {START_TIMEOUT_S:g} s "
                                 f"on {self.where} (cluster resources: {ray.cluster_resources()})") from None
            settled(lambda: sum(free_cpus().get(n.node_id, 0.0) for n in nodes) <= before - len(seats) + 1e-9)
        nodes_of = ray.get([a.node.remote() for a in self.actors])
        self.placements = [{"node": ip, "node_id": node_id, "pid": p}
                           for (ip, node_id), p in zip(nodes_of, pids, strict=True)]

    def _seats(self, nodes: list) -> list:
        """Each worker's node, from the CPUs free now. Ray's per-node view trails its raylets by a
        report or so: CPUs the last replay's workers gave back may not show yet, so a shortfall is
        looked at again for SETTLE_S before it is said."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            self.free = free_cpus()
            try:
                return deal(self.config.workers, nodes, self.free, self.where)
            except ReplayError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)

    def signal(self, sig: int) -> None:
        """Pass a signal of the command's on to every worker (not waited for: the replay's end says
        what came of it)."""
        if self.cluster_gone:
            return
        for a in self.actors:
            try:
                a.signal.remote(sig)
            except Exception:   # its actor has died: its worker was told by PARENT_GONE
                pass

    def stop(self) -> None:
        """Stop every worker and drop its actor; each placement (the manifest's entry) says how its
        worker ended: its exit code, or that its actor had died (its child then got PARENT_GONE through
        PR_SET_PDEATHSIG, finished its shard as worker_lost, and exited). Each worker gets the
        replay's grace for its in-flight requests and STOP_GRACE_S to write its rows, all at once:
        the whole stop takes at most that and 10 s more, however many workers."""
        if not self.actors:
            return
        if self.cluster_gone:   # Ray's calls would block; the workers lose their actors with their nodes
            for place in self.placements:
                place["actor"] = "not stopped through Ray: the Ray cluster went away"
            self.actors = []
            return
        grace_s = self.config.grace_s + STOP_GRACE_S
        refs = [a.stop.remote(grace_s) for a in self.actors]
        deadline = time.monotonic() + grace_s + 10
        for i, ref in enumerate(refs):
            place = self.placements[i] if i < len(self.placements) else {}
            try:
                place["exit_code"] = ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
            except ray.exceptions.RayActorError as exc:  # it died before we asked (or its node did)
                place["actor"] = ACTOR_DIED
                log.warning("Locust worker %d on Ray (pid %s, node %s): its actor died during the run (%s); the "
                            "rows it had not sent are recorded as not_sent, and the mode ends worker_lost",
                            i, place.get("pid"), place.get("node"), type(exc).__name__)
            except Exception as exc:  # the cluster did not answer
                place["actor"] = f"did not answer its stop: {type(exc).__name__}"
        for a in self.actors:
            try:
                ray.kill(a)
            except Exception:
                pass
        self.actors = []


def worker_room(selector: str | None) -> tuple[float, str, bool]:
    """The CPUs free now on the nodes the workers would be dealt over, those nodes in words, and
    whether any of them has GPUs (a fleet's GPU replicas may then take some of those CPUs)."""
    nodes, where = chosen_nodes(alive_nodes(ray.nodes()), selector)
    free = free_cpus()
    return sum(free.get(n.node_id, 0.0) for n in nodes), where, any(n.gpus for n in nodes)


def settled(done, limit_s: float = SETTLE_S) -> bool:
    """Wait until `done()` holds (Ray's view caught up), at most `limit_s`."""
    deadline = time.monotonic() + limit_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def free_cpus() -> dict[str, float]:
    """Each alive node's free CPUs (node id -> CPUs). Ray's public API gives only the cluster's
    sum; its per-node view is the same GCS call behind `ray status`."""
    from ray._private.state import available_resources_per_node

    return {node: res.get("CPU", 0.0) for node, res in available_resources_per_node().items()}


def driver_ip() -> str:
    """The address workers on other nodes reach the master at (this node's, as Ray sees it)."""
    return ray.util.get_node_ip_address()

