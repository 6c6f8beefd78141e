"""Rows grouped into cells, one per (mode, tenant), by numpy on one sort of the rows: each mode's
tenants lie next to each other, so a mode as a whole (tenant `all`) is one slice too and no
statistic is computed over a copy per group. The engine that bench/analysis.py chose: at 10M
rows it matches DuckDB on the same exact percentiles (the figures are in the README)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ALL = "all"
# numpy's sort and partition release the GIL: percentiles of several columns run on every core
WORKERS = 4


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
        flat = np.where(labels >= 0, self.bins * n_labels + labels, (cells + 1) * n_labels)
        per = np.bincount(flat, minlength=(cells + 1) * n_labels + 1)[:cells * n_labels]
        return self.per_mode(per.reshape(cells, n_labels))


def codes(col: pa.ChunkedArray | pa.Array, values: list[str]) -> np.ndarray:
    """Each row's position in `values`, -1 for a value not in it."""
    return pc.fill_null(pc.index_in(col, value_set=pa.array(values, type=pa.string())), -1).to_numpy()


def cells_of(table: pa.Table, modes: list[str]) -> Cells:
    tenants = sorted(pc.unique(table["tenant"]).to_pylist())
    mode_code, tenant_code = codes(table["mode"], modes), codes(table["tenant"], tenants)
    key = np.where(mode_code >= 0, mode_code * len(tenants) + tenant_code, -1)
    small = key.astype(np.int16) if len(modes) * len(tenants) < 2 ** 15 else key
    order = np.argsort(small, kind="stable")            # a radix sort on 16-bit keys
    order = order[np.count_nonzero(key < 0):]           # the -1s sort first
    cells = len(modes) * len(tenants)
    bins = np.where(key >= 0, key, cells)
    counts = np.bincount(bins, minlength=cells + 1)[:cells]
    return Cells(modes, tenants, order, np.concatenate([[0], np.cumsum(counts)]), key, bins)


def rows_where(cells: Cells, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows where `mask` holds, in cell order, and their cells' bounds (cell k holds
    order[bounds[k]:bounds[k + 1]], as in `Cells`)."""
    order = cells.order[mask[cells.order]]
    n_cells = len(cells.bounds) - 1
    counts = np.bincount(cells.bins[mask], minlength=n_cells + 1)[:n_cells]
    return order, np.concatenate([[0], np.cumsum(counts)])


def finite_cell_stats(cells: Cells, column: np.ndarray, rows: tuple[np.ndarray, np.ndarray],
                      statistic: Callable[[np.ndarray], dict]) -> dict[tuple[str, str], dict]:
    """`statistic` of each cell's finite values of `column` among `rows` (`rows_where`), for every
    cell `Cells.cells` yields (one without such values gets the statistic of none). A mode's
    values are gathered once, in cell order, into an array of our own: `statistic` may reorder
    what it is given (partition in place), so each tenant's slice goes to it first, the whole
    mode's after (reordering within a slice keeps the mode's values)."""
    order, bounds = rows
    t, out = len(cells.tenants), {}
    for m, mode in enumerate(cells.modes):
        if cells.bounds[m * t + t] == cells.bounds[m * t]:
            continue
        values = column[order[bounds[m * t]:bounds[m * t + t]]]
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


def cell_stats(cells: Cells, columns: dict[str, tuple[Callable[[], np.ndarray], tuple[np.ndarray, np.ndarray]]],
               statistic: Callable[[np.ndarray], dict]) -> dict[str, dict[tuple[str, str], dict]]:
    """`finite_cell_stats` of each column (made by its function, in its thread, over its rows),
    the columns in threads (numpy's gathers and partitions release the GIL)."""
    def one(column: tuple[Callable[[], np.ndarray], tuple[np.ndarray, np.ndarray]]) -> dict:
        make, rows = column
        return finite_cell_stats(cells, make(), rows, statistic)

    with ThreadPoolExecutor(min(WORKERS, max(1, len(columns)))) as pool:
        return dict(zip(columns, pool.map(one, columns.values()), strict=True))
