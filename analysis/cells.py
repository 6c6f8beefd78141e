"""Rows grouped into cells, one per (mode, tenant), by numpy on one sort of the rows: each mode's
tenants lie next to each other, so a mode as a whole (tenant `all`) is one slice too and no
statistic is computed over a copy per group. The engine that bench/analysis.py chose: at 10M
rows it matches DuckDB on the same exact percentiles (the figures are in the README)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ALL = "all"
# numpy's sort and partition release the GIL: percentiles of several columns run on every core
# this process may use, up to 4 (more threads than cores only hold more columns in memory at once)
WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
COUNT_BLOCK = 1 << 20     # rows Cells.counts labels at once (8 MB of codes)


@dataclass(frozen=True)
class Cells:
    modes: list[str]
    tenants: list[str]
    order: np.ndarray      # row indices, by mode then tenant (rows of other modes left out)
    bounds: np.ndarray     # cell k = mode k // T, tenant k % T holds order[bounds[k]:bounds[k + 1]]
    key: np.ndarray        # each row's cell (-1: a mode not asked for)
    bins: np.ndarray       # the same, -1 as the number of cells (rows of other modes in one bin past the last)

    def cells(self) -> Iterator[tuple[str, str, slice]]:
        """(mode, tenant, slice of `order`), the mode as a whole (`all`) first, then its tenants
        that have rows."""
        t = len(self.tenants)
        for m, mode in enumerate(self.modes):
            if self.bounds[m * t + t] > self.bounds[m * t]:
                yield mode, ALL, slice(self.bounds[m * t], self.bounds[m * t + t])
            for j, tenant in enumerate(self.tenants):
                k = m * t + j
                if self.bounds[k + 1] > self.bounds[k]:
                    yield mode, tenant, slice(self.bounds[k], self.bounds[k + 1])

    def per_mode(self, per: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
        """Per-cell rows of `per` (one row per cell), and each mode's as their sum."""
        t = len(self.tenants)
        out = {}
        for m, mode in enumerate(self.modes):
            out[mode, ALL] = per[m * t:(m + 1) * t].sum(axis=0)
            for j, tenant in enumerate(self.tenants):
                out[mode, tenant] = per[m * t + j]
        return out

    def sums(self, weights: np.ndarray) -> dict[tuple[str, str], float]:
        """Sum of `weights` (one per row) per cell and per mode."""
        cells = len(self.bounds) - 1
        per = np.bincount(self.bins, weights=weights, minlength=cells + 1)[:cells]
        return {cell: float(v) for cell, v in self.per_mode(per).items()}

    def counts(self, labels: np.ndarray, n_labels: int) -> dict[tuple[str, str], np.ndarray]:
        """How many rows hold each label (0 .. n_labels - 1; -1 for none), per cell and per mode,
        in one pass."""
        cells = len(self.bounds) - 1
        per = np.zeros((cells + 1) * n_labels + 1, dtype=np.intp)
        for start in range(0, len(labels), COUNT_BLOCK):   # a block of rows at a time: no column-long temporaries
            block = slice(start, start + COUNT_BLOCK)
            flat = self.bins[block] * n_labels
            flat += labels[block]
            flat[labels[block] < 0] = (cells + 1) * n_labels
            per += np.bincount(flat, minlength=len(per))
        return self.per_mode(per[:cells * n_labels].reshape(cells, n_labels))


def codes(col: pa.ChunkedArray | pa.Array, values: list[str]) -> np.ndarray:
    """Each row's position in `values`, -1 for a value not in it, as int32 numpy of our own: a
    chunk at a time, so Arrow's intermediates are a chunk's, not a column's."""
    value_set = pa.array(values, type=pa.string())
    out = np.empty(len(col), dtype=np.int32)
    at = 0
    for chunk in col.chunks if isinstance(col, pa.ChunkedArray) else [col]:
        out[at:at + len(chunk)] = pc.fill_null(pc.index_in(chunk, value_set=value_set), -1).to_numpy(
            zero_copy_only=False)
        at += len(chunk)
    return out


def cells_of(table: pa.Table, modes: list[str]) -> Cells:
    with ThreadPoolExecutor(1) as beside:               # Arrow's kernels release the GIL
        mode_codes = beside.submit(codes, table["mode"], modes)
        tenants = sorted(pc.unique(table["tenant"]).to_pylist())
        tenant_codes = codes(table["tenant"], tenants)
        key = mode_codes.result()                       # our own array, made into the key in place
    other = key < 0
    key *= len(tenants)
    key += tenant_codes
    key[other] = -1
    cells = len(modes) * len(tenants)
    small = key.astype(np.int16) if cells < 2 ** 15 else key
    # a stable sort of small integers: Arrow's counts them (numpy's radix sort takes a column-long buffer
    # of fresh memory besides, twice the time at 10M rows); the indices as intp
    order = pc.sort_indices(pa.array(small)).to_numpy().view(np.intp)
    order = order[np.count_nonzero(other):]             # the -1s sort first
    bins = key.astype(np.intp)                          # what np.bincount counts by, without a cast each time
    bins[other] = cells
    counts = np.bincount(bins, minlength=cells + 1)[:cells]
    return Cells(modes, tenants, order, np.concatenate([[0], np.cumsum(counts)]), key, bins)


def rows_where(cells: Cells, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows where `mask` holds, in cell order, and their cells' bounds (cell k holds
    order[bounds[k]:bounds[k + 1]], as in `Cells`)."""
    order = cells.order[mask[cells.order]]
    n_cells = len(cells.bounds) - 1
    counts = np.bincount(cells.bins[mask], minlength=n_cells + 1)[:n_cells]
    return order, np.concatenate([[0], np.cumsum(counts)])


def gather(column: pa.ChunkedArray, rows: np.ndarray, to_numpy: Callable[[pa.ChunkedArray], np.ndarray]) -> np.ndarray:
    """to_numpy(column)[rows], converting only the stretch of the column from its first to its last
    row: a mode's rows, in a dataset read by mode, lie together (a fifth of the column, not all)."""
    if not len(rows):
        return to_numpy(column.slice(0, 0))[rows]
    first, last = int(rows.min()), int(rows.max())
    return to_numpy(column.slice(first, last - first + 1))[rows - first]


def finite_cell_stats(cells: Cells, values_at: Callable[[np.ndarray], np.ndarray], rows: tuple[np.ndarray, np.ndarray],
                      statistic: Callable[[np.ndarray], dict]) -> dict[tuple[str, str], dict]:
    """`statistic` of each cell's finite values among `rows` (`rows_where`; `values_at(rows)`: a
    column's float values at those rows), for every cell `Cells.cells` yields (one without such
    values gets the statistic of none). A mode's values are gathered once, in cell order, into an
    array of our own: `statistic` may reorder what it is given (partition in place), so each
    tenant's slice goes to it first, the whole mode's after (reordering within a slice keeps the
    mode's values)."""
    order, bounds = rows
    t, out = len(cells.tenants), {}
    for m, mode in enumerate(cells.modes):
        if cells.bounds[m * t + t] == cells.bounds[m * t]:
            continue
        values = values_at(order[bounds[m * t]:bounds[m * t + t]])
        finite = np.isfinite(values)
        ends = bounds[m * t:m * t + t + 1] - bounds[m * t]
        if not finite.all():
            ends = np.concatenate([[0], np.cumsum(finite)])[ends]
            values = values[finite]
        for j, tenant in enumerate(cells.tenants):
            if cells.bounds[m * t + j + 1] > cells.bounds[m * t + j]:
                out[mode, tenant] = statistic(values[ends[j]:ends[j + 1]])
        out[mode, ALL] = statistic(values)
    return out
