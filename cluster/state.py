"""Long-lived fleets: the state file `loadtest cluster up` writes, and the endpoints `loadtest run
--endpoints` and `loadtest ui` replay against without provisioning anything.

The state file is JSON, rewritten atomically at each stage (starting, ready, stopping) by the one
process that holds the fleet (the supervisor); it names that process, so `cluster down` stops the
fleet by signalling it, and `cluster status` can tell a live fleet from a stale file. It holds
URLs and process ids, never secrets.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import requests
from pydantic import ValidationError

from cluster import DEFAULT_STATE as _STATE_FILE
from cluster import FleetError
from cluster.fleet import FleetSpec
from cluster.gpu_scrape import GpuSource, gpu_sources
from common import files
from common.names import name_problem

DEFAULT_STATE = Path(_STATE_FILE)
PROBE_TIMEOUT_S = 3.0


@dataclass
class ReplicaState:
    mode: str
    index: int
    url: str
    served_model: str
    pid: int = 0
    log: str = ""
    exit_code: int | None = None    # set by the supervisor if the server died while the fleet was up

    @property
    def label(self) -> str:
        return f"{self.mode}-{self.index}"

    @property
    def log_path(self) -> str:
        return self.log


@dataclass
class ClusterState:
    fleet: str
    modes: list[str]
    supervisor_pid: int
    status: str = "starting"        # starting, ready, stopping
    fleet_spec: dict | None = None  # the validated fleet, as `loadtest run` records it in manifests
    ray_address: str | None = None
    logs_dir: str = ""
    started_at: str = ""
    replicas: list[ReplicaState] = field(default_factory=list)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> ClusterState:
        if not path.is_file():
            raise FleetError(f"no fleet is up: no state file at {path} (start one with `loadtest cluster up`)")
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            data["replicas"] = [ReplicaState(**r) for r in data.get("replicas", [])]
            return cls(**data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise FleetError(f"{path}: not a loadtest state file ({exc})") from None

    def supervisor_alive(self) -> bool:
        return pid_is_supervisor(self.supervisor_pid)

    def spec(self) -> FleetSpec | None:
        """The fleet, if the state file's copy still validates (a file from another version may not)."""
        try:
            return FleetSpec.model_validate(self.fleet_spec) if self.fleet_spec else None
        except ValidationError:
            return None


def pid_is_supervisor(pid: int) -> bool:
    """Whether `pid` is alive and is a `loadtest cluster up` process (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"loadtest" in b" ".join(cmdline) and b"cluster" in cmdline and b"up" in cmdline


def unreachable(exc: requests.RequestException) -> str:
    """Why a request got no answer, in words: refused, timed out, no such host."""
    if isinstance(exc, requests.Timeout):
        return "no answer (timed out)"
    text = str(exc)
    for needle, words in (("Connection refused", "connection refused: nothing listens there"),
                          ("Name or service not known", "no such host"), ("nodename nor servname", "no such host"),
                          ("No route to host", "no route to host"), ("Connection reset", "connection reset")):
        if needle in text:
            return words
    return f"not reachable ({type(exc).__name__})"


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None if the server at `url` answers /health with 200, else why not (one line)."""
    try:
        r = requests.get(f"{url}/health", timeout=timeout)
    except requests.RequestException as exc:
        return unreachable(exc)
    return None if r.status_code == 200 else f"/health answered HTTP {r.status_code}"


def key_refused(status: int, api_key_env: str, sent: bool) -> str:
    """Why a server answered 401 or 403 to the key in $`api_key_env` (`sent`: whether there was one)."""
    if not sent:
        return (f"GET /v1/models answered HTTP {status}: the server requires an API key and none was sent "
                f"({api_key_env} is not set; set it to the key, or name another variable with --api-key-env)")
    return (f"GET /v1/models answered HTTP {status}: the server refused the API key in {api_key_env} (it is not "
            "the server's key)")


def served_models(url: str, api_key_env: str) -> list[str]:
    """The model names `url` serves (GET /v1/models, with the key in $`api_key_env` if set);
    FleetError saying why not: the status of a non-200 answer, and for 401 and 403 whether the
    key was missing or refused, naming the variable."""
    key = os.environ.get(api_key_env)
    try:
        r = requests.get(f"{url}/v1/models", timeout=PROBE_TIMEOUT_S,
                         headers={"Authorization": f"Bearer {key}"} if key else {})
    except requests.RequestException as exc:
        raise FleetError(f"GET /v1/models: {unreachable(exc)}") from None
    if r.status_code in (401, 403):
        raise FleetError(key_refused(r.status_code, api_key_env, bool(key)))
    if r.status_code != 200:
        raise FleetError(f"GET /v1/models answered HTTP {r.status_code}")
    try:
        return [m["id"] for m in r.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise FleetError(f"GET /v1/models answered 200 but not an OpenAI model list: {r.text[:80]!r}") from None


def parse_endpoint_list(text: str) -> dict[str, list[str]]:
    """`MODE=URL[|URL...],MODE=URL` as {mode: [urls]} (several replicas of a mode joined by |)."""
    out: dict[str, list[str]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        mode, eq, urls = item.partition("=")
        mode = mode.strip()
        if not eq or not mode or not urls:
            raise FleetError(f"--endpoints: expected a state file or MODE=URL[,MODE=URL...], got {item!r}")
        if mode in out:
            raise FleetError(f"--endpoints: mode {mode!r} given twice (join replicas with |)")
        if name_problem(mode):   # a mode names folders in the results (requests/mode=MODE/)
            raise FleetError(f"--endpoints: mode {name_problem(mode)}")
        out[mode] = []
        for url in urls.split("|"):
            url = url.strip().rstrip("/")
            if not url.startswith(("http://", "https://")):
                raise FleetError(f"--endpoints: {mode}: {url!r} is not an http:// or https:// URL")
            out[mode].append(url)
    if not out:
        raise FleetError("--endpoints is empty")
    return out


def load_endpoints(text: str, api_key_env: str) -> tuple[ClusterState, bool]:
    """The fleet behind `--endpoints`: a state file from `cluster up` (its supervisor must be up),
    or MODE=URL pairs of servers started elsewhere (each must list a model on /v1/models). Returns
    the state and whether it came from a file; check_health() the replicas of the modes you use."""
    path = Path(text)
    if path.suffix == ".json" or path.is_file():
        state = ClusterState.read(path)
        if not state.supervisor_alive():
            raise FleetError(f"{path}: the fleet's supervisor (pid {state.supervisor_pid}) is not running; "
                             "the state file is stale (`loadtest cluster down` removes it)")
        if state.status != "ready":
            raise FleetError(f"{path}: the fleet is {state.status}, not ready")
        from_file = True
    else:
        state = ClusterState(fleet="endpoints", modes=[], supervisor_pid=0, status="ready")
        for mode, urls in parse_endpoint_list(text).items():
            state.modes.append(mode)
            for i, url in enumerate(urls):
                try:
                    names = served_models(url, api_key_env)
                except FleetError as exc:
                    raise FleetError(f"--endpoints: {mode}={url}: {exc}; is a vLLM-compatible server running "
                                     "there?") from None
                if not names:
                    raise FleetError(f"--endpoints: {mode}={url}: /v1/models lists no model")
                state.replicas.append(ReplicaState(mode, i, url, names[0]))
        from_file = False
    return state, from_file


def check_health(replicas: list[ReplicaState], api_key_env: str) -> None:
    """Raise FleetError naming the first of `replicas` that does not answer /health, or does not
    list its model on /v1/models to the key in $`api_key_env` (a wrong or missing key is said
    before anything is sent, as for MODE=URL pairs)."""
    for rep in replicas:
        if (why := replica_problem(rep, api_key_env)) is not None:
            raise FleetError(f"--endpoints: replica {rep.label} at {rep.url}: {why}")


def replica_problem(rep: ReplicaState, api_key_env: str) -> str | None:
    """Why a run could not use `rep` (its /health, then its /v1/models to the key in
    $`api_key_env`: missing or refused, said apart), or None: what `cluster status` and a run's
    check of --endpoints both ask."""
    if (why := probe(rep.url)) is not None:
        return why
    try:
        names = served_models(rep.url, api_key_env)
    except FleetError as exc:
        return str(exc)
    return None if rep.served_model in names else f"serves {names}, not {rep.served_model!r}"


class ExistingFleet:
    """A fleet held by someone else (`cluster up`, or servers started by hand): the same interface
    `loadtest run` uses for a fleet it provisions, with nothing to start or stop."""

    def __init__(self, state: ClusterState, modes: list[str]) -> None:
        self.state = state
        self.replicas = [r for r in state.replicas if r.mode in modes]

    def __enter__(self) -> ExistingFleet:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def gpu_sources(self, replicas: list[ReplicaState]) -> list[GpuSource]:
        """Where a held fleet's replicas' GPUs are read: their exporter only (no actor of ours)."""
        spec = self.state.spec()
        return gpu_sources(spec, replicas) if spec is not None else []

    def endpoints(self, mode: str) -> list[ReplicaState]:
        return [r for r in self.replicas if r.mode == mode]

    def exit_code(self, rep: ReplicaState) -> int | None:
        """None while the replica answers /health; -1 once it does not (its exit code is not ours
        to know)."""
        return None if probe(rep.url) is None else -1
