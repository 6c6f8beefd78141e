"""The simulated GPUs of one replica, and the dcgm-exporter text they are read through.

The engine meters every step's energy through the power model (cluster/sim/power.py) in a
`GpuMeter`; `SimGpus` shows the replica's `tp` GPUs as NVIDIA's dcgm-exporter would, on the
simulator's `/dcgm/metrics`, so a simulated run's GPU figures travel the path a real fleet's do
(scraped, kept by UUID, written to gpu_metrics/, analysed). Every TP rank does the same work in
the model, so the replica's GPUs read alike; each has its own UUID.

`dcgm_text` writes dcgm-exporter's exposition (its metric names, TYPE lines and label set, from
etc/default-counters.csv and internal/pkg/rendermetrics at NVIDIA/dcgm-exporter d5e5f51,
Apache-2.0; docs/research/gpu-power-and-telemetry.md, section 4). prometheus_client cannot write
it: its counters gain a `_total` the exporter's do not have. Only what the model has is served:
power, the energy counter, framebuffer used and free, utilisation and the last XID (0: none).
"""

from __future__ import annotations

import bisect
import socket
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from cluster.gpu_telemetry import GpuSample
from cluster.sim.power import PowerModel

MIB = 2**20
WINDOW_S = 1.0          # power and utilisation: averages over the last second of the clock, as NVML's on H100
HISTORY = 4096          # step ends kept for those averages
DRIVER_VERSION = "550.90.07"   # the label every series carries (a released data-centre driver)
MODEL_NAMES = {"h100-sxm": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "a100-80gb": "NVIDIA A100-SXM4-80GB"}

# (metric, Prometheus type, help) in the order dcgm-exporter's default counters list them.
FAMILIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "util_pct"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer memory free (in MB).", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer memory used (in MB).", "fb_used_mib"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ).", "energy_mj"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "xid"),
)


@dataclass
class GpuMeter:
    """One GPU's energy and busy time since `started` (the engine's clock), metered step by step in
    the model's seconds (a wall second is 1/time_scale of them); between steps it draws the static
    power."""

    power: PowerModel
    started: float
    time_scale: float = 1.0
    energy_j: float = 0.0
    busy_s: float = 0.0
    history: int | None = HISTORY   # marks kept (None: all, for a replay in virtual time read after)
    _ends: deque[tuple[float, float, float]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self._ends = deque(maxlen=self.history)
        self._ends.append((self.started, 0.0, 0.0))   # (clock, energy, busy) at each step's start and end

    def _idle_j(self, since: float, until: float) -> float:
        return self.power.context_w * max(0.0, until - since) / self.time_scale

    def stepped(self, end: float, seconds: float, joules: float) -> None:
        """A step of `seconds` (model time) ended at `end`, using `joules`: its energy spread
        evenly over it, so an average over any window is what the GPU drew in it."""
        last, _, _ = self._ends[-1]
        begin = max(last, end - seconds * self.time_scale)
        self.energy_j += self._idle_j(last, begin)
        self._ends.append((begin, self.energy_j, self.busy_s))
        self.energy_j += joules
        self.busy_s += seconds
        self._ends.append((max(end, begin), self.energy_j, self.busy_s))

    def _at(self, when: float) -> tuple[float, float]:
        """(energy in J, busy seconds) at `when`: between two marks, their straight line; after the
        last, idle at the static power."""
        ends = self._ends
        if when <= ends[0][0]:   # before the oldest mark kept: its values, never a line drawn backwards
            return ends[0][1], ends[0][2]
        i = bisect.bisect_right(ends, when, key=lambda e: e[0]) - 1
        t0, e0, b0 = ends[i]
        if i + 1 == len(ends):
            return e0 + self._idle_j(t0, when), b0
        t1, e1, b1 = ends[i + 1]
        share = (when - t0) / (t1 - t0) if t1 > t0 else 1.0
        return e0 + (e1 - e0) * share, b0 + (b1 - b0) * share

    def at(self, now: float) -> tuple[float, float]:
        return self._at(now)

    def averages(self, now: float) -> tuple[float, float]:
        """(mean power in W, utilisation in %) over the last WINDOW_S of the clock, or since the
        start when it is younger. Power is the energy counter's rise per second of the clock, so
        the two readings agree: a simulator run `time_scale` times slower than real time draws its
        model's power over time_scale (energy per token is the model's either way)."""
        then = max(now - WINDOW_S, self._ends[0][0])
        span = now - then
        if span <= 0:
            return self.power.context_w / self.time_scale, 0.0
        (e1, b1), (e0, b0) = self._at(now), self._at(then)
        return (e1 - e0) / span, min(100.0, 100.0 * (b1 - b0) * self.time_scale / span)


def gpu_uuid(host: str, port: int, index: int) -> str:
    """A simulated GPU's UUID, in NVIDIA's form, the same for the same replica and rank."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'loadtest-sim://{host}:{port}/{index}')}"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def dcgm_text(samples: Sequence[GpuSample], host_label: str = "hostname") -> str:
    """`samples` as dcgm-exporter serves them: one family per field, one series per GPU, each
    labelled gpu, UUID, pci_bus_id, device, modelName, the host (`hostname` since the exporter's
    #655, `Hostname` before) and the driver; a field a sample lacks (None) is left out, as the
    exporter leaves out a field the GPU does not support."""
    lines: list[str] = []
    for name, kind, help_text, attr in FAMILIES:
        series = [(s, getattr(s, attr)) for s in samples if getattr(s, attr) is not None]
        if not series:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for s, value in series:
            labels = (f'gpu="{s.index}",UUID="{_label(s.uuid)}",pci_bus_id="00000000:{0x18 + s.index:02X}:00.0",'
                      f'device="nvidia{s.index}",modelName="{_label(s.model or "")}",'
                      f'{host_label}="{_label(s.host or "")}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"')
            lines.append(f"{name}{{{labels}}} {value:.6g}" if kind == "gauge" else f"{name}{{{labels}}} {value:.0f}")
    return "\n".join(lines) + "\n"


@dataclass
class SimGpus:
    """A replica's `tp` simulated GPUs, read from its engine's meter."""

    meter: GpuMeter
    tp: int
    hbm_bytes: float
    gpu_memory_utilization: float
    hardware: str
    port: int
    clock: Callable[[], float]
    host: str = field(default_factory=socket.gethostname)

    def every(self, seconds: float, until: float) -> list[list[GpuSample]]:
        """The GPUs' samples each `seconds` of the clock from its start to `until`, read after the
        fact (a replay in virtual time)."""
        out, now = [], self.meter.started
        while now <= until + seconds:
            out.append(self.samples(now))
            now += seconds
        return out

    @cached_property
    def uuids(self) -> list[str]:
        return [gpu_uuid(self.host, self.port, i) for i in range(self.tp)]

    def samples(self, now: float | None = None) -> list[GpuSample]:
        """Each GPU at `now` (default: the clock's now). Memory: vLLM takes gpu_memory_utilization of
        each GPU at start (weights, activations, then the KV cache fills the rest), so what is used
        stays there under any load."""
        now = self.clock() if now is None else now
        energy, _ = self.meter.at(now)
        watts, util = self.meter.averages(now)
        total = self.hbm_bytes / MIB
        used = round(total * self.gpu_memory_utilization)
        return [GpuSample(node=self.host, at_s=now, uuid=u, index=i, host=self.host,
                          model=MODEL_NAMES.get(self.hardware, self.hardware), power_w=round(watts, 3),
                          energy_mj=round(energy * 1000), fb_used_mib=used, fb_free_mib=round(total) - used,
                          util_pct=round(util), xid=0.0)
                for i, u in enumerate(self.uuids)]
