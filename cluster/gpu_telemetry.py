"""GPU telemetry as NVIDIA's dcgm-exporter serves it, read into typed samples, and the energy a
GPU used over a window: the first part of issue 42 (what each mode costs in energy and memory).
cluster/gpu_scrape.py reads exporters through it.

dcgm-exporter's default counters (etc/default-counters.csv, NVIDIA/dcgm-exporter, Apache-2.0;
docs/research/gpu-power-and-telemetry.md, section 4): power in W (a gauge), the energy used since
boot in mJ (a counter, Volta and newer), framebuffer used and free in MiB, utilisation in %, and
the last XID error's number. Each series is labelled by the GPU's index (`gpu`), its `UUID`, and
the host: `Hostname` in released images up to 4.5.3-4.8.2, `hostname` since #655 (both read).

Bad telemetry never costs a run: text that is not Prometheus exposition, or names no GPU, is one
`TelemetryError` line naming the node; a counter that goes back (the exporter or the driver
restarted) is summed over its rising stretches and said; a GPU without the energy counter has
its power integrated over the samples instead, and the figure says so."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# dcgm-exporter's metric names (etc/default-counters.csv) -> the sample's field
FIELDS = {
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_mj",
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
HOST_LABELS = ("hostname", "Hostname")   # since #655, and before it
COUNTER_WENT_BACK = "the energy counter went back (the exporter or the driver restarted)"
NO_COUNTER = "no energy counter (a GPU before Volta, or the exporter's counters leave it out): power integrated"


class TelemetryError(ValueError):
    """Telemetry that cannot be read: one line naming the node and what is wrong."""


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one scrape, as dcgm-exporter serves it (None: the exporter did not say)."""

    node: str               # where it was scraped from (the replica's node address)
    at_s: float             # when (seconds, the scraper's clock)
    uuid: str
    index: int
    host: str | None = None
    model: str | None = None
    power_w: float | None = None
    energy_mj: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    util_pct: float | None = None
    xid: float | None = None


def parse_dcgm(text: str, node: str, at_s: float) -> list[GpuSample]:
    """Every GPU dcgm-exporter's `text` names, one sample each (TelemetryError when `text` is
    not Prometheus exposition or names no GPU)."""
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:   # prometheus_client's parser raises ValueError and others on other text
        raise TelemetryError(f"{node}: the GPU exporter's answer is not Prometheus text ({exc})") from None
    gpus: dict[str, dict] = {}
    for family in families:
        field = FIELDS.get(family.name)
        if field is None:
            continue
        for s in family.samples:
            uuid = s.labels.get("UUID") or s.labels.get("uuid")
            if not uuid or not math.isfinite(s.value):
                continue
            index = s.labels.get("gpu", "-1")
            if not index.lstrip("-").isdigit():
                raise TelemetryError(f"{node}: the GPU exporter's {family.name} names GPU {index!r}, not an index")
            gpu = gpus.setdefault(uuid, {"uuid": uuid, "index": int(index),
                                         "host": next((s.labels[h] for h in HOST_LABELS if h in s.labels), None),
                                         "model": s.labels.get("modelName")})
            gpu[field] = float(s.value)
    if not gpus:
        raise TelemetryError(f"{node}: the GPU exporter names no GPU (no DCGM_FI_DEV_* series with a UUID)")
    return [GpuSample(node=node, at_s=at_s, **g) for g in sorted(gpus.values(), key=lambda g: g["index"])]


def only_gpus(samples: Sequence[GpuSample], uuids: set[str]) -> list[GpuSample]:
    """The samples of a replica's own GPUs (a node's exporter serves every GPU on it)."""
    return [s for s in samples if s.uuid in uuids]


@dataclass(frozen=True)
class Energy:
    """The energy one GPU used over a window, and how it was measured."""

    joules: float
    source: str                    # "counter", or "power" (integrated over the samples)
    samples: int
    notes: tuple[str, ...] = ()    # what a reader must know (a counter that went back, no counter)


def energy_of(samples: Sequence[GpuSample]) -> Energy | None:
    """One GPU's energy over its `samples` (in time order): the counter's rise, counted from zero
    again after it went back (as PromQL's increase() and analysis/gpu.py count it); else its
    power integrated (trapezoids) over the samples;
    None from fewer than two samples of either."""
    ordered = sorted(samples, key=lambda s: s.at_s)
    counted = [s for s in ordered if s.energy_mj is not None]
    if len(counted) >= 2:
        mj = [float(s.energy_mj or 0.0) for s in counted]
        # as PromQL's increase(): after a drop the counter started again from zero (the driver reloaded)
        rises = [b - a if b >= a else b for a, b in itertools.pairwise(mj)]
        return Energy(sum(rises) / 1e3, "counter", len(counted),
                      (COUNTER_WENT_BACK,) if any(b < a for a, b in itertools.pairwise(mj)) else ())
    powered = [(s.at_s, float(s.power_w)) for s in ordered if s.power_w is not None]
    if len(powered) < 2:
        return None
    joules = sum((pa + pb) / 2 * (tb - ta) for (ta, pa), (tb, pb) in itertools.pairwise(powered))
    return Energy(joules, "power", len(powered), (NO_COUNTER,))
