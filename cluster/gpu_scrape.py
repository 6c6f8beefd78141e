"""Reading each replica's GPUs once a scrape: its node's dcgm-exporter (the simulator's own for a
simulated fleet), else NVML inside the replica's Ray actor, kept to the replica's own GPUs and
turned into the rows of `gpu_metrics/mode=<mode>/` (cluster/scrape.py writes them).

An exporter serves every GPU on its node, so two replicas on one node share one read per scrape,
and each keeps only its GPUs (by the index Ray gave it; all of them where the exporter is the
replica's own). An exporter that does not answer, or answers what is not dcgm-exporter's text,
is one problem line naming the node and the replica; where the replica can read NVML, that read
takes over for the rest of the run, and the rows say so in their `source`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from cluster.fleet import FleetSpec
from cluster.gpu_telemetry import GpuSample, TelemetryError, only_gpus, parse_dcgm
from cluster.nvml_reader import NOT_AVAILABLE
from contract.gpu_metrics import GPU_SCHEMA

EXPORTER_TIMEOUT_S = 2.0

VALUES = tuple(GPU_SCHEMA.names[GPU_SCHEMA.get_field_index("power_w"):])   # a sample's readings

NvmlRead = Callable[[], list[GpuSample]]   # a replica's GPUs through NVML, in its actor (TelemetryError)


@dataclass(frozen=True)
class GpuSource:
    """Where one replica's GPUs are read."""

    replica: str                        # its label
    node: str                           # its node's address
    source: str                         # what the exporter's samples are: dcgm-exporter or simulator
    url: str | None                     # its exporter (None: NVML only)
    indices: frozenset[int] | None      # its GPUs' indices (None: every GPU the exporter serves) ...
    nvml: NvmlRead | None = None        # the fallback, where the replica can read NVML
    uuids: frozenset[str] | None = None  # ... or their UUIDs, where Ray gave it GPUs by UUID (MIG, KubeRay)


def gpu_sources(spec: FleetSpec, replicas: Sequence[Any],
                nvml_of: Callable[[Any], NvmlRead | None] | None = None) -> list[GpuSource]:
    """Where each of `replicas` (provisioned, or held: cluster.state) has its GPUs read; none for
    vLLM on CPU. A provisioned replica knows its node and the GPU indices Ray gave it; a held one
    only its URL, so its exporter's every GPU is taken as its own."""
    if spec.engine == "vllm" and spec.device == "cpu":
        return []
    out = []
    for rep in replicas:
        node = getattr(rep, "node_ip", "") or urlsplit(rep.url).hostname or "?"
        url = spec.gpu_exporter(rep.url, node, getattr(rep, "node_id", ""))
        cuda = [str(g) for g in getattr(rep, "cuda", None) or []] if spec.engine == "vllm" else []
        numbered = bool(cuda) and all(g.isdigit() for g in cuda)
        indices = frozenset(int(g) for g in cuda) if numbered else None
        uuids = frozenset(cuda) if cuda and not numbered else None
        nvml = nvml_of(rep) if nvml_of is not None and spec.gpu_telemetry.nvml else None
        if url is not None or nvml is not None:
            out.append(GpuSource(rep.label, node, spec.gpu_source, url, indices, nvml, uuids))
    return out


def _mine(samples: Sequence[GpuSample], src: GpuSource) -> list[GpuSample]:
    """A replica's own GPUs among those its node's exporter serves: by UUID where Ray named them
    so, else by index, else all (the exporter is the replica's own)."""
    if src.uuids is not None:
        return only_gpus(samples, set(src.uuids))
    return list(samples) if src.indices is None else [s for s in samples if s.index in src.indices]


class GpuReader:
    """Reads replicas' GPUs, remembering which fell back to NVML."""

    def __init__(self, http: requests.Session) -> None:
        self.http = http
        self.on_nvml: set[str] = set()      # replicas whose exporter failed and NVML answered
        self.no_nvml: set[str] = set()      # replicas whose node has no NVML to read (not asked again)

    def _exporter(self, url: str, node: str, replica: str) -> list[GpuSample]:
        where = f"node {node} (replica {replica})"
        try:
            resp = self.http.get(url, timeout=EXPORTER_TIMEOUT_S)
        except requests.RequestException as exc:
            raise TelemetryError(f"{where}: the GPU exporter {url} did not answer ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise TelemetryError(f"{where}: the GPU exporter {url} answered HTTP {resp.status_code}")
        try:
            return parse_dcgm(resp.text, where, time.time())
        except TelemetryError as exc:
            raise TelemetryError(f"{exc} at {url}") from None

    def read(self, mode: str, sources: Sequence[GpuSource]) -> tuple[list[dict], list[str]]:
        """One scrape of `sources`: the rows of their GPUs, and a line per replica not read."""
        rows: list[dict] = []
        problems: list[str] = []
        served: dict[str, list[GpuSample] | TelemetryError] = {}   # one read per exporter
        read_at: dict[str, int] = {}     # when each exporter answered (its samples are of then)
        for src in sources:
            now = time.time_ns()
            samples, kind = None, src.source
            if src.url is not None and src.replica not in self.on_nvml:
                if src.url not in served:
                    try:
                        served[src.url] = self._exporter(src.url, src.node, src.replica)
                    except TelemetryError as exc:
                        served[src.url] = exc
                    read_at[src.url] = time.time_ns()
                got, now = served[src.url], read_at[src.url]
                if isinstance(got, TelemetryError):
                    failed = str(got)
                else:
                    samples = _mine(got, src)
                    failed = None if samples else (f"node {src.node} (replica {src.replica}): the GPU exporter "
                                                   f"{src.url} serves none of its GPUs "
                                                   f"{sorted(src.uuids or src.indices or ())}")
            else:
                failed = f"node {src.node} (replica {src.replica}): no GPU exporter"
            if samples is None or not samples:
                samples = None
                if src.nvml is not None and src.replica not in self.no_nvml:
                    try:
                        samples, kind = src.nvml(), "nvml"
                        now = time.time_ns()
                        self.on_nvml.add(src.replica)
                    except TelemetryError as exc:
                        failed = f"{failed}; NVML: {exc}"
                        if NOT_AVAILABLE in str(exc):   # no nvidia-ml-py there: it will not appear mid-run
                            self.no_nvml.add(src.replica)
                if samples is None:
                    problems.append(str(failed))
                    continue
            rows += [{"time_ns": now, "mode": mode, "replica": src.replica, "node": src.node, "source": kind,
                      "uuid": s.uuid, "gpu": s.index, **{k: getattr(s, k) for k in VALUES}} for s in samples]
        return rows, problems
