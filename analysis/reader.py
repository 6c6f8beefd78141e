"""The one reader of result datasets: `requests/` of one run (hive-partitioned by mode), read with
pyarrow.dataset, columns projected and filters pushed down, and checked against the record
contract of `loadtest.records`: a dataset that lacks a column or holds an unknown status is
refused with one line naming it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from loadtest.records import REQUEST_SCHEMA, STATUSES


class ContractError(ValueError):
    """A dataset that is not a loadtest result: the message names the folder and the column."""


def requests_dataset(run_dir: Path) -> ds.Dataset:
    folder = Path(run_dir) / "requests"
    if not folder.is_dir():
        raise ContractError(f"{folder}: no request records (not a loadtest run folder?)")
    return ds.dataset(folder, format="parquet", partitioning="hive")


def read_requests(run_dir: Path, columns: list[str] | None = None, filter: pc.Expression | None = None) -> pa.Table:
    """The request records of a run (all modes, all workers): only `columns` (default all), only
    the rows `filter` keeps; ContractError if the records break the contract."""
    dataset = requests_dataset(run_dir)
    names = set(dataset.schema.names)
    for f in REQUEST_SCHEMA:
        if f.name not in names:
            raise ContractError(f"{run_dir}/requests: column {f.name!r} is missing (the record contract is "
                                "loadtest.records.REQUEST_SCHEMA)")
    table = dataset.to_table(columns=columns, filter=filter)
    if "status" in table.column_names and table.num_rows:
        unknown = set(pc.unique(table["status"]).to_pylist()) - set(STATUSES)
        if unknown:
            raise ContractError(f"{run_dir}/requests: column 'status' holds {sorted(map(str, unknown))[0]!r}, "
                                f"which is not a status ({', '.join(STATUSES)})")
    return table
