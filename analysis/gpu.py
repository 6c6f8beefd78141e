"""What a mode cost in energy, power and memory, from its GPUs' samples (contract.gpu_metrics),
over the same window as its throughput: the steady window where the replay had one that holds two
samples of each GPU, else its makespan (the first sent request's scheduled time to the last
token), said in the statistic.

Per GPU, the energy over the window is its counter's increase across the window's samples (as
PromQL's increase(): a counter that went back restarted from zero), or where a GPU has no counter,
its power integrated over them (trapezoids); over the span its samples cover, that is a mean
power, and the mode's energy is the sum over its GPUs times the window's length. Energy per output
token is that over the output tokens completed in the window, so J/token = summed mean power /
output tokens per second, the same tokens as `out_tok_per_s`. Its 95% interval comes from batch
means over BATCHES equal slices of the window (each slice's energy over the tokens written in it,
a request's tokens spread evenly from its first token to its last; Student's t on the slices'
spread, about the whole window's figure), given only where every slice has at least two samples
per GPU and MIN_BATCH_TOKENS tokens, and only over a steady window (a makespan's slices include
the warm-up and the drain, which differ by more than noise). Memory (peak used, least free) and
XID errors are over every sample of the mode.

Rows (tenant `all`; WINDOW is `steady` or `makespan`): `gpu_energy_j` WINDOW,
`energy_per_output_token_j` WINDOW (with its interval), `gpu_power_w` `mean` (per GPU, from the
energy) and `peak` (the highest sample), `gpu_util_pct` `mean`, `gpu_memory_used_mib` `peak`,
`gpu_memory_free_mib` `min`, `gpu_xid_errors` `gpus` (GPUs whose XID reading changed to a non-zero
one while read), `gpu_counter_resets` `count` (where an energy counter started again from zero),
`gpus` `count` (by UUID), and
`gpu_samples` `SOURCE/METHOD` (how many samples, from which reader: dcgm-exporter, nvml or
simulator; by the energy counter or by power).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from contract.gpu_metrics import FOLDER

BATCHES = 5            # slices of the window for the J/token interval
T_975_DF4 = 2.7764     # Student's t, 97.5th percentile, BATCHES - 1 = 4 degrees of freedom (any t table)
MIN_BATCH_TOKENS = 50  # output tokens a slice needs for its own J/token
Row = tuple[str, str, float, float | None, float | None]
NOT_READ = "not_read"   # metric gpu_telemetry: a mode whose GPUs were to be read and were not (the manifest says why)


def gpu_unread(state: str | None) -> bool:
    """Whether a mode's manifest entry `gpu_metrics` says its GPUs were to be read and were not
    ("read": they were; "no GPUs ...": there were none to read; None: a run from before)."""
    return state is not None and state != "read" and not state.startswith("no GPUs")


def load_gpu_metrics(run_dir: Path) -> pa.Table | None:
    path = run_dir / FOLDER
    if not path.exists():
        return None
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    return table if table.num_rows else None


@dataclass(frozen=True)
class GpuWatts:
    """One GPU's mean power over a span, and how it was measured."""

    watts: float
    method: str        # counter or power
    resets: int = 0    # times its energy counter started again from zero (the driver reloaded)


def energy_rise(mj: np.ndarray) -> tuple[float, int]:
    """A GPU's energy counter's rise over consecutive readings (mJ), and how many times it started
    again from zero: a reading under half the highest before is a reset (NVML counts from the
    driver's load, so only a reload sends it back), and the reading is its rise since; a smaller
    drop is a reading out of order, which is passed over (counting it as a reset would add the
    whole counter, and rising from it would count a stretch twice)."""
    total, resets, top = 0.0, 0, float(mj[0])
    for value in mj[1:].tolist():
        if value >= top:
            total, top = total + value - top, value
        elif value < top / 2:
            total, top, resets = total + value, value, resets + 1
    return total, resets


def _changes(t_ns: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The readings at which a counter changed (the first of each run of equal values): an exporter
    that refreshes less often than it is scraped (dcgm-exporter's default, every 30 s) serves the
    same reading several times, and only its changes say when energy was used."""
    keep = np.r_[True, np.diff(values) != 0]
    return t_ns[keep], values[keep]


def _watts(t_ns: np.ndarray, energy_mj: np.ndarray, power_w: np.ndarray) -> GpuWatts | None:
    """Mean power of one GPU over its readings (time order): the energy counter's rise between its
    first and last change over the time between them; else its power integrated over the
    readings; None from fewer than two changes (or two power readings)."""
    counted = ~np.isnan(energy_mj)
    if counted.sum() >= 2:
        t, e = _changes(t_ns[counted], energy_mj[counted])
        span = (t[-1] - t[0]) / 1e9 if len(t) >= 2 else 0.0
        if span <= 0:
            return None
        joules_mj, resets = energy_rise(e)
        return GpuWatts(joules_mj / 1e3 / span, "counter", resets)
    powered = ~np.isnan(power_w)
    if powered.sum() >= 2:
        t, p = t_ns[powered] / 1e9, power_w[powered]
        span = t[-1] - t[0]
        return GpuWatts(float(np.sum((p[1:] + p[:-1]) / 2 * np.diff(t))) / span, "power") if span > 0 else None
    return None


def _column(t: pa.Table, name: str) -> np.ndarray:
    return t[name].to_numpy(zero_copy_only=False).astype(np.float64)


@dataclass(frozen=True)
class ModeGpus:
    """A mode's GPU readings as arrays, in (GPU, time) order, each GPU (its UUID: two replicas of a
    held fleet on one node read the same GPUs, which count once) a slice: read once, so the
    window and its slices cost no more passes over the table."""

    t: np.ndarray
    energy: np.ndarray
    power: np.ndarray
    util: np.ndarray
    xid: np.ndarray
    slices: tuple[slice, ...]

    @classmethod
    def of(cls, gpu: pa.Table) -> ModeGpus:
        order = pc.sort_indices(gpu, [("uuid", "ascending"), ("time_ns", "ascending")])
        g = gpu.take(order)
        uuids = g["uuid"].to_numpy(zero_copy_only=False)
        cuts = [0, *(np.flatnonzero(uuids[1:] != uuids[:-1]) + 1).tolist(), len(uuids)]
        return cls(g["time_ns"].to_numpy(), _column(g, "energy_mj"), _column(g, "power_w"), _column(g, "util_pct"),
                   _column(g, "xid"), tuple(slice(a, b) for a, b in itertools.pairwise(cuts)))

    def watts(self, start: int, end: int) -> tuple[float, list[str], int, int] | None:
        """(summed mean power of every GPU over [start, end], each GPU's method, readings, counter
        resets) or None when some GPU has too few readings there."""
        total, methods, samples, resets = 0.0, [], 0, 0
        for one in self.slices:
            t = self.t[one]
            inside = slice(one.start + int(np.searchsorted(t, start, "left")),
                           one.start + int(np.searchsorted(t, end, "right")))
            w = _watts(self.t[inside], self.energy[inside], self.power[inside])
            if w is None:
                return None
            total, resets = total + w.watts, resets + w.resets
            methods.append(w.method)
            samples += inside.stop - inside.start
        return total, methods, samples, resets

    def xid_gpus(self) -> int:
        """GPUs that raised an XID error while they were read: dcgm-exporter's XID reading is the
        last XID the GPU raised, whenever that was, so a GPU counts when its reading changed to a
        non-zero one during the mode (one raised before the run and unchanged is not this run's)."""
        count = 0
        for one in self.slices:
            xid = self.xid[one]
            xid = xid[~np.isnan(xid)]
            count += bool(len(xid)) and bool(((xid != xid[0]) & (xid > 0)).any())
        return count


def gpu_rows(gpu: pa.Table, mode: str, window: tuple[int, int], kind: str,
             first_ns: np.ndarray, done_ns: np.ndarray, tokens: np.ndarray) -> list[Row]:
    """The mode's GPU rows over `window` (epoch ns; `kind` steady or makespan), given its
    successful requests' first- and last-token times and output tokens. No energy row when some
    GPU has too few readings in the window (too short: the figures say not measured)."""
    mine = gpu.filter(pc.equal(gpu["mode"], mode))
    if not mine.num_rows:
        return []
    g = ModeGpus.of(mine)
    rows: list[Row] = []
    nan = math.nan
    gpus = len(g.slices)
    rows.append(("gpus", "count", float(gpus), None, None))
    used, free = _column(mine, "fb_used_mib"), _column(mine, "fb_free_mib")
    if not np.isnan(used).all():
        rows.append(("gpu_memory_used_mib", "peak", float(np.nanmax(used)), None, None))
    if not np.isnan(free).all():
        rows.append(("gpu_memory_free_mib", "min", float(np.nanmin(free)), None, None))
    if not np.isnan(g.xid).all():
        rows.append(("gpu_xid_errors", "gpus", float(g.xid_gpus()), None, None))
    start, end = window
    whole = g.watts(start, end)
    if whole is None:
        return rows
    watts, methods, samples, resets = whole
    if resets:
        rows.append(("gpu_counter_resets", "count", float(resets), None, None))
    sources = "+".join(sorted(set(mine["source"].to_pylist())))
    method = "counter" if all(m == "counter" for m in methods) else "power" if all(m == "power" for m in methods) \
        else "counter+power"
    rows.append(("gpu_samples", f"{sources}/{method}", float(samples), None, None))
    seconds = (end - start) / 1e9
    rows.append(("gpu_energy_j", kind, watts * seconds, None, None))
    rows.append(("gpu_power_w", "mean", watts / gpus, None, None))
    inside = (g.t >= start) & (g.t <= end)
    power, util = g.power[inside], g.util[inside]
    if len(power) and not np.isnan(power).all():
        rows.append(("gpu_power_w", "peak", float(np.nanmax(power)), None, None))
    if len(util) and not np.isnan(util).all():
        rows.append(("gpu_util_pct", "mean", float(np.nanmean(util)), None, None))
    done = (done_ns >= start) & (done_ns <= end)
    out_tokens = float(tokens[done].sum())
    if out_tokens > 0:   # a makespan holds the warm-up and the drain: its slices differ by more than noise
        point = watts * seconds / out_tokens
        low, high = (_batch_interval(g, start, end, first_ns, done_ns, tokens, point) if kind == "steady"
                     else (None, None))
        rows.append(("energy_per_output_token_j", kind, point,
                     nan if low is None else low, nan if high is None else high))
    return rows


def written_in(a: int, b: int, first_ns: np.ndarray, done_ns: np.ndarray, tokens: np.ndarray) -> float:
    """Output tokens written in [a, b): each request's spread evenly from its first to its last
    (all at once where they are the same instant)."""
    span = (done_ns - first_ns).astype(np.float64)
    overlap = np.clip(np.minimum(done_ns, b) - np.maximum(first_ns, a), 0, None)
    point = span <= 0
    share = np.where(point, (done_ns >= a) & (done_ns < b), overlap / np.where(point, 1.0, span))
    return float(np.sum(tokens * share))


def _batch_interval(gpu: ModeGpus, start: int, end: int, first_ns: np.ndarray, done_ns: np.ndarray,
                    tokens: np.ndarray, point: float) -> tuple[float | None, float | None]:
    """The 95% interval of J per output token from BATCHES slices of the window (None, None where
    a slice has too few samples or tokens)."""
    edges = np.linspace(start, end, BATCHES + 1).astype(np.int64)
    per_slice = []
    for a, b in itertools.pairwise(edges):
        got = gpu.watts(int(a), int(b))
        n = written_in(int(a), int(b), first_ns, done_ns, tokens)
        if got is None or n < MIN_BATCH_TOKENS:
            return None, None
        per_slice.append(got[0] * (b - a) / 1e9 / n)
    half = T_975_DF4 * float(np.std(per_slice, ddof=1)) / math.sqrt(BATCHES)
    return point - half, point + half
