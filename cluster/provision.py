"""The Ray provisioner: one placement group and one actor per replica, each actor running its
server (`vllm serve` or the simulator) as a child process group, and teardown on every path.

Ready = /health answers, then /v1/models lists the served name, then one warm-up completion
succeeds, within the fleet's startup timeout. The driver talks to each replica's port directly
(never through Ray Serve, whose stream batching would merge chunks and falsify ITL).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import ray
import requests
from ray.exceptions import AuthenticationError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from cluster import ClusterAccessError, FleetError, StartupCancelled, memory
from cluster.argv import installed_vllm_version, serve_argv, server_api_key
from cluster.fleet import FleetSpec
from cluster.gpu_scrape import GpuSource, NvmlRead, gpu_sources
from cluster.gpu_telemetry import GpuSample, TelemetryError
from cluster.memory import ReplicaMemory
from cluster.nvml_reader import read_nvml
from cluster.placement import Plan, PlanError, make_plan, nodes_from_ray, replica_bundles
from cluster.ray_access import access_problem, refused_for_token, stderr_into, token_source
from cluster.supervise import Restart, Supervisor
from common.process import die_with_parent, stop_group
from common.times import utc_now

log = logging.getLogger(__name__)


STOP_GRACE_S = 10.0       # SIGTERM, then SIGKILL after this long
ACTOR_GONE = -1           # Fleet.exit_code when the replica's actor itself is gone (its server went with it)
HEALTH_POLL_S = 0.25
MEMORY_LOG_LINES = 5000   # the start-up log lines searched for the memory figures (vLLM prints them once)


@ray.remote(num_cpus=0)
class GpuHolder:
    """Holds one TP bundle's GPU for the replica's server and reports its id."""

    def gpu_ids(self) -> list[str]:
        return [str(g) for g in ray.get_gpu_ids()]


@ray.remote(num_cpus=0, max_restarts=0)
class ReplicaActor:
    """Owns one server process: starts it in its own process group, stops the whole group."""

    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def node(self) -> tuple[str, str]:
        """The node's address and Ray node id."""
        return ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id()

    def gpu_ids(self) -> list[str]:
        return [str(g) for g in ray.get_gpu_ids()]

    def free_port(self, host: str) -> int:
        with socket.socket() as s:
            s.bind((host, 0))
            return s.getsockname()[1]

    def start(self, argv: list[str], env: dict[str, str], cuda_devices: list[str] | None) -> int:
        """Start the server (again, after it exited: what is left of the old one's group is killed
        first, so a restart finds its port and devices free)."""
        if self.proc is not None:
            stop_group(self.proc, 0)
        full_env = {**os.environ, **env}
        if cuda_devices is not None:
            full_env["CUDA_VISIBLE_DEVICES"] = ",".join(cuda_devices)
        Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env,
                start_new_session=True, preexec_fn=die_with_parent,
            )
        return self.proc.pid

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(deque(f, maxlen=lines))
        except OSError:
            return ""

    def gpu_samples(self, indices: list[int]) -> tuple[list[GpuSample], str | None]:
        """The replica's GPUs read through NVML on its own node, or the one line why not."""
        try:
            return read_nvml(ray.util.get_node_ip_address(), indices, time.time()), None
        except TelemetryError as exc:
            return [], str(exc)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the server's process group, SIGKILL it after `grace_s`; return its exit code."""
        if self.proc is None:
            return None
        return stop_group(self.proc, grace_s)


@dataclass
class Replica:
    mode: str
    index: int
    url: str
    served_model: str
    pid: int
    log_path: Path
    actor: ray.actor.ActorHandle
    pg: object
    holders: list
    node_id: str = ""             # the Ray node it runs on ...
    node_ip: str = ""             # ... and that node's address
    started: float = 0.0          # monotonic time its server was started
    timing: ReplicaTiming = field(default_factory=lambda: ReplicaTiming())
    memory: ReplicaMemory | None = None   # what its memory holds, read once it is ready
    argv: list[str] = field(default_factory=list)   # its server's command, env and devices, for a restart
    env: dict[str, str] = field(default_factory=dict)
    cuda: list[str] | None = None
    restarts: list[Restart] = field(default_factory=list)   # each time its server exited and was started again
    stopping: bool = False        # being stopped (released, torn down): never restarted then
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)  # stopping vs. a restart

    @property
    def label(self) -> str:
        return f"{self.mode}-{self.index}"


@dataclass
class ReplicaTiming:
    """When a replica was up, and what its start cost: re-provisioning in turns spends it again."""

    requested_at: str = field(default_factory=utc_now)   # its placement group asked for
    reserved_s: float | None = None       # asked -> Ray reserved the resources
    healthy_s: float | None = None        # server started -> /health answered 200
    ready_s: float | None = None          # server started -> the first (warm-up) completion succeeded
    ready_at: str | None = None
    stopped_at: str | None = None

    def text(self) -> str:
        if self.ready_s is None:
            return "not ready"
        return f"{self.ready_s:.1f} s (healthy {self.healthy_s:.1f} s)"


def ray_address(given: str | None) -> str | None:
    """The Ray cluster to join: --address, else RAY_ADDRESS (set by `ray job submit`), else None
    (start a local Ray instance for this process)."""
    return given or os.environ.get("RAY_ADDRESS") or None


def ray_logs_to(log_file: Path) -> None:
    """Send what Ray's own loggers say in this process (its token-authentication notice, its
    warnings) to `log_file` instead of the console, which is the run's. Ray's import puts a stderr
    handler on the "ray" logger; it is replaced (and ray.init must then keep the handlers:
    configure_logging=True, which only sets their level and format)."""
    ray_log = logging.getLogger("ray")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    ray_log.handlers = [logging.FileHandler(str(log_file.resolve()))]
    ray_log.propagate = False


def init_ray(address: str | None, num_gpus: int | None = 0, log_file: Path | None = None) -> bool:
    """Join the Ray cluster at `address`, or start a local Ray instance of our own (never a
    `ray start` cluster found on the machine), unless this process is connected already; whether
    this call connected (and so should disconnect). Ray's own log lines go to `log_file`."""
    if ray.is_initialized():
        return False
    if log_file is not None:
        ray_logs_to(log_file)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING,
                  configure_logging=log_file is not None)
    with our_sigterm_kept():
        if address:
            join_ray(address, log_file, kwargs)
        else:
            try:
                ray.init(address="local", num_cpus=os.cpu_count() or 1, num_gpus=num_gpus, **kwargs)
            except SystemExit as exc:
                terminated(exc)
                raise
    return True


@contextmanager
def our_sigterm_kept() -> Iterator[None]:
    """ray.init (Ray 2.60, `_private/worker.py`) first replaces the process's SIGTERM handler with
    its own, `sys.exit(signum)`: a SIGTERM while it starts was then swallowed by Ray's own startup
    code (its traceback printed, the run went on to its end) or ended the command with code 15. For
    the call's length Ray's setter (`ray._private.utils.set_sigterm_handler`, looked up at each
    call) leaves the command's handler in place; where a Ray has no such setter, Ray's handler
    stands and `terminated` turns its exit into an interrupt."""
    utils = getattr(getattr(ray, "_private", None), "utils", None)
    setter = getattr(utils, "set_sigterm_handler", None)
    if setter is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = setter


def terminated(exc: SystemExit) -> None:
    """Ray's own SIGTERM handler, where it stood (`our_sigterm_kept`), exits with the signal's
    number: a stop the user asked for, raised as KeyboardInterrupt (the command's interrupted path,
    exit 130), not an exit with code 15."""
    if exc.code == signal.SIGTERM:
        raise KeyboardInterrupt("SIGTERM while Ray started") from None


def join_ray(address: str, log_file: Path | None, kwargs: dict) -> None:
    """ray.init(address) with what Ray's C++ client writes to stderr meanwhile sent to `log_file`;
    ClusterAccessError when the cluster refused this process's token (or its lack of one),
    FleetError when it could not be reached at all."""
    with stderr_into(log_file) as said:
        try:
            ray.init(address=address, **kwargs)
            return
        except (ConnectionError, AuthenticationError) as exc:
            failure = exc
        except SystemExit as exc:
            terminated(exc)
            raise
    if isinstance(failure, AuthenticationError) or refused_for_token(said[0]):
        raise ClusterAccessError(access_problem(address, token_source())) from None
    raise FleetError(f"cannot join the Ray cluster at {address}: {failure}") from None


class Fleet:
    """The replicas of a fleet's modes on Ray. Use as a context manager: entering joins (or starts)
    Ray and makes the pre-flight plan (`self.plan`, PlanError when a mode fits nowhere), starting
    no replica; `start()` brings every mode up at once, `provision(mode)` one mode in the
    background and `release(mode)` stops it again; teardown always runs on the way out."""

    def __init__(self, spec: FleetSpec, modes: list[str], logs_dir: Path, address: str | None = None,
                 cancelled: Callable[[], bool] = lambda: False, on_ray_ready: Callable[[], None] | None = None,
                 on_restart: Callable[[Replica, Restart], None] | None = None) -> None:
        unknown = [m for m in modes if m not in spec.modes]
        if unknown:
            raise FleetError(f"fleet {spec.name!r} has no mode {unknown[0]!r} (it has: {', '.join(spec.modes)})")
        self.spec = spec
        self.modes = modes
        self.logs_dir = logs_dir
        self.address = address
        self.replicas: list[Replica] = []
        self.plan: Plan | None = None
        self._started_ray = False
        self._closing = False
        self._lock = threading.Lock()
        self._launched = 0
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(modes)), thread_name_prefix="provision")
        self._cancelled = cancelled  # polled while waiting for replicas; True aborts the start
        self.on_ray_ready = on_ray_ready  # called right after ray.init (which installs its own SIGTERM handler)
        self.cluster_gone: str | None = None  # why, once the Ray cluster went away (cluster/ray_watch.py)
        self.supervisor = Supervisor(self, on_restart)  # restarts servers that exit (the fleet's max_restarts)
        self.on_stopped: Callable[[], None] | None = None  # called once every replica has stopped

    def cancelled(self) -> bool:
        return self._closing or self._cancelled()

    def __enter__(self) -> Fleet:
        try:
            self._init_ray()
            self.plan = make_plan(self.spec, self.modes, nodes_from_ray(ray.nodes()))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def gpu_sources(self, replicas: list[Replica]) -> list[GpuSource]:
        """Where `replicas`' GPUs are read: their node's exporter, else NVML in their actor."""
        return gpu_sources(self.spec, replicas, self._nvml if self.spec.engine == "vllm" else None)

    @staticmethod
    def _nvml(rep: Replica) -> NvmlRead | None:
        if not rep.cuda or not all(str(g).isdigit() for g in rep.cuda):
            return None   # GPUs Ray named by UUID (MIG, KubeRay): NVML reads by index, so only the exporter
        indices = [int(g) for g in rep.cuda]

        def read() -> list[GpuSample]:
            try:
                samples, problem = ray.get(rep.actor.gpu_samples.remote(indices), timeout=10)
            except Exception as exc:   # the actor is gone or Ray timed out: this read is lost, not the run
                raise TelemetryError(f"{rep.node_ip}: NVML could not be read in replica {rep.label}'s actor "
                                     f"({type(exc).__name__})") from None
            if problem:
                raise TelemetryError(problem)
            return samples
        return read

    def endpoints(self, mode: str) -> list[Replica]:
        with self._lock:
            return [r for r in self.replicas if r.mode == mode]

    # ---- start -------------------------------------------------------------------------------
    def _init_ray(self) -> None:
        gpus = 0 if self.spec.engine == "sim" or self.spec.device == "cpu" else None
        self._started_ray = init_ray(self.address, gpus, self.logs_dir / "ray.log")
        if self._started_ray and self.on_ray_ready:
            self.on_ray_ready()

    def start(self, on_event: Callable[[str], None] | None = None) -> None:
        """Every mode up at once (`cluster up`); PlanError when the plan needs turns."""
        assert self.plan is not None, "enter the Fleet first"
        if not self.plan.all_at_once:
            raise PlanError(f"the cluster cannot hold every mode at once: {self.plan.text()}")
        futures = [self.provision(m, on_event) for m in self.modes]
        for fut in futures:
            fut.result()

    def provision(self, mode: str, on_event: Callable[[str], None] | None = None) -> Future[list[Replica]]:
        """Start `mode`'s replicas in the background; the future holds them once all are ready."""
        return self._pool.submit(self._provision, mode, on_event or (lambda _msg: None))

    def _provision(self, mode: str, on_event: Callable[[str], None]) -> list[Replica]:
        started = []
        for i in range(self.spec.replicas):
            started.append(self._launch(mode, i))
            on_event(f"started {mode}-{i}")
        deadline = time.monotonic() + self.spec.startup_timeout_s
        for rep in started:
            rep.timing.healthy_s, rep.timing.ready_s = self.wait_ready(rep, deadline)
            rep.timing.ready_at = utc_now()
            with requests.Session() as http:
                rep.memory = self._memory(rep, http)
            on_event(f"ready {rep.label} at {rep.url} in {rep.timing.text()}")
        if self.spec.max_restarts:
            for rep in started:
                self.supervisor.watch(rep)
        return started

    def release(self, mode: str) -> None:
        """Stop `mode`'s replicas and give their resources back (the next turn's modes need them)."""
        with self._lock:
            mine = [r for r in self.replicas if r.mode == mode]
            self.replicas = [r for r in self.replicas if r.mode != mode]
        for rep in mine:
            self._teardown(rep)

    def _launch(self, mode: str, index: int) -> Replica:
        spec = self.spec
        bundles = replica_bundles(spec)
        if self.cancelled():
            raise StartupCancelled(f"stopped before {mode}-{index} started")
        pg = placement_group(bundles, strategy="STRICT_PACK", name=f"loadtest-{mode}-{index}-{os.getpid()}")
        # Register before waiting, so teardown removes it even if the wait fails.
        rep = Replica(mode, index, "", spec.served_model_name(mode), 0, self.logs_dir / f"{mode}-{index}.log",
                      None, pg, [])
        with self._lock:
            self.replicas.append(rep)
            self._launched += 1
            launched = self._launched
        asked = time.monotonic()
        deadline = asked + spec.startup_timeout_s
        while not pg.wait(timeout_seconds=1):  # in short waits, so a signal is noticed
            if self.cancelled():
                raise StartupCancelled(f"stopped while Ray reserved resources for {rep.label}")
            if time.monotonic() > deadline:
                raise FleetError(
                    f"replica {rep.label}: Ray could not reserve {bundles} within {spec.startup_timeout_s:g} s "
                    f"(free now: {ray.available_resources()}; other work on the cluster may hold them)"
                )
        rep.timing.reserved_s = time.monotonic() - asked
        gpu = spec.engine != "sim" and spec.device == "gpu"
        strategy = lambda b: PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=b)  # noqa: E731
        rep.holders = [GpuHolder.options(num_gpus=1, scheduling_strategy=strategy(b)).remote()
                       for b in range(1, len(bundles))] if gpu else []
        rep.actor = ReplicaActor.options(num_gpus=1 if gpu else 0, scheduling_strategy=strategy(0),
                                         name=None).remote(str(rep.log_path))
        ip, rep.node_id = ray.get(rep.actor.node.remote())
        rep.node_ip = ip
        loopback = spec.bind_host not in ("0.0.0.0", "::")
        if loopback and ip != ray.util.get_node_ip_address():
            raise FleetError(f"replica {rep.label} landed on node {ip}, but the fleet binds servers to "
                             f"{spec.bind_host}, which the driver cannot reach; set bind_host = \"0.0.0.0\" "
                             "in the fleet file to run replicas on other nodes")
        port = ray.get(rep.actor.free_port.remote(spec.bind_host))
        host = spec.bind_host if loopback else ip
        rep.url = f"http://{host}:{port}"
        cuda = None
        if gpu:
            cuda = ray.get(rep.actor.gpu_ids.remote()) + [g for h in rep.holders for g in ray.get(h.gpu_ids.remote())]
        argv = serve_argv(spec, mode, port, vllm_version=installed_vllm_version(spec.vllm_python)
                          if spec.engine == "vllm" else None)
        log.info("starting %s: %s", rep.label, argv)
        env = dict(spec.env)
        if spec.engine == "vllm" and spec.device == "cpu" and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            # vLLM's CPU backend pins its OpenMP threads; spread replicas over the cores.
            env["VLLM_CPU_OMP_THREADS_BIND"] = str((launched - 1) % (os.cpu_count() or 1))
        rep.argv, rep.env, rep.cuda = argv, env, cuda
        rep.pid = ray.get(rep.actor.start.remote(argv, env, cuda))
        rep.started = time.monotonic()
        return rep

    def restart(self, rep: Replica) -> int | None:
        """Start `rep`'s server again, as it was started (same command, port and devices); its new
        pid, or None when it is being stopped."""
        with rep.lock:
            if rep.stopping or self.cancelled():
                return None
            rep.pid = ray.get(rep.actor.start.remote(rep.argv, rep.env, rep.cuda), timeout=60)
            rep.started = time.monotonic()
            return rep.pid

    def stop_server(self, rep: Replica) -> None:
        """Stop `rep`'s server (its process group), keeping its actor: a restart that failed."""
        try:
            ray.get(rep.actor.stop.remote(), timeout=STOP_GRACE_S + 10)
        except Exception as exc:
            log.warning("replica %s: stop failed (%s)", rep.label, exc)

    def _memory(self, rep: Replica, http: requests.Session) -> ReplicaMemory | None:
        """Weights, KV cache and KV capacity as the server says them (None when it says nothing
        readable: the run goes on, and its report says the figures are missing)."""
        try:
            if self.spec.engine == "sim":
                return memory.from_sim_info(http.get(f"{rep.url}/sim/info", timeout=5).json())
            metrics = http.get(f"{rep.url}/metrics", timeout=5)
            return memory.from_vllm(ray.get(rep.actor.log_tail.remote(MEMORY_LOG_LINES)),
                                    metrics.text if metrics.status_code == 200 else None)
        except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
            log.warning("replica %s: no memory figures (%s)", rep.label, exc)
            return None

    def wait_ready(self, rep: Replica, deadline: float,
                   cancelled: Callable[[], bool] | None = None) -> tuple[float, float]:
        """Wait until `rep`'s server is ready (/health, then /v1/models names it, then a warm-up
        completion); (healthy_s, ready_s) since it was started. FleetError, in one first line naming
        the replica, what it waited for and its log, when it exits first or the deadline passes."""
        stage, last = "/health", "no answer yet"
        with requests.Session() as http:
            key = server_api_key(rep.argv, rep.env)   # a secured server answers /v1 only with its key
            if key:
                http.headers["Authorization"] = f"Bearer {key}"
            while True:
                if self.cancelled() or (cancelled is not None and cancelled()):
                    raise StartupCancelled(f"stopped while waiting for {rep.label}")
                code = ray.get(rep.actor.poll.remote())
                if code is not None:
                    raise FleetError(
                        f"replica {rep.label} exited with code {code} before it was ready; last lines of "
                        f"{rep.log_path}:\n{ray.get(rep.actor.log_tail.remote())}"
                    )
                if time.monotonic() > deadline:
                    raise FleetError(
                        f"replica {rep.label} not ready within {self.spec.startup_timeout_s:g} s (the fleet's "
                        f"startup_timeout_s): still waiting for {stage} at {rep.url} ({last}); its log: "
                        f"{rep.log_path}\nlast lines of its log:\n{ray.get(rep.actor.log_tail.remote())}"
                    )
                try:
                    if stage == "/health":
                        r = http.get(f"{rep.url}/health", timeout=2)
                        last = f"last answer: HTTP {r.status_code}"
                        if r.status_code == 200:
                            healthy_s = time.monotonic() - rep.started
                            stage, last = "/v1/models", "no answer yet"
                    if stage == "/v1/models":
                        r = http.get(f"{rep.url}/v1/models", timeout=5)
                        if r.status_code in (401, 403):
                            raise FleetError(
                                f"replica {rep.label} requires an API key{' other than the one' if key else ''} "
                                f"the fleet gives it (GET /v1/models answered HTTP {r.status_code}): set it as "
                                "VLLM_API_KEY in the fleet's env, or --api-key in its extra_args")
                        if r.status_code != 200:
                            last = f"last answer: HTTP {r.status_code}"
                            time.sleep(HEALTH_POLL_S)
                            continue
                        names = [m["id"] for m in r.json()["data"]]
                        if rep.served_model not in names:
                            raise FleetError(f"replica {rep.label} serves {names}, not {rep.served_model!r}")
                        stage = "warm-up completion"
                    if stage == "warm-up completion":
                        r = http.post(f"{rep.url}/v1/completions", timeout=60, json={
                            "model": rep.served_model, "prompt": "Hello, my name is", "max_tokens": 4})
                        if r.status_code == 200:
                            return healthy_s, time.monotonic() - rep.started
                        raise FleetError(f"replica {rep.label}: warm-up completion failed: "
                                         f"HTTP {r.status_code} {r.text[:200]}")
                except requests.RequestException as exc:
                    last = f"last try: {type(exc).__name__}"
                time.sleep(HEALTH_POLL_S)

    # ---- liveness and teardown ------------------------------------------------------------------
    def exit_code(self, rep: Replica) -> int | None:
        """The server's exit code if it has exited (crashed), else None."""
        try:
            return ray.get(rep.actor.poll.remote(), timeout=10)
        except Exception:  # the actor itself is gone
            return ACTOR_GONE

    def _teardown(self, rep: Replica) -> None:
        """Stop one replica's server (SIGTERM its group, SIGKILL after a grace period), kill its
        actors, remove its placement group."""
        with rep.lock:   # a restart under way has started its server, or will not start one
            rep.stopping = True
        if self.cluster_gone is not None:  # Ray's calls would block; its servers go with their nodes' raylets
            return
        if rep.actor is not None:
            try:
                ray.get(rep.actor.stop.remote(), timeout=STOP_GRACE_S + 10)
            except Exception as exc:  # the actor died: its child got SIGTERM via PDEATHSIG
                log.warning("replica %s: stop failed (%s)", rep.label, exc)
            for handle in [rep.actor, *rep.holders]:
                try:
                    ray.kill(handle)
                except Exception:
                    pass
        try:
            remove_placement_group(rep.pg)
        except Exception:
            pass
        rep.timing.stopped_at = utc_now()

    def stop(self) -> None:
        """Stop every replica, after the replicas still starting have noticed. Safe to call more
        than once and after partial starts."""
        self._closing = True
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.supervisor.stop()
        with self._lock:
            mine, self.replicas = self.replicas, []
        for rep in mine:
            self._teardown(rep)
        if mine and self.on_stopped is not None:
            self.on_stopped()
        if self._started_ray and ray.is_initialized():
            ray.shutdown()
            self._started_ray = False
