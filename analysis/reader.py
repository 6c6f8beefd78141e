"""The one reader of result datasets: `requests/` of one run (hive-partitioned by mode), read with
pyarrow.dataset, columns projected and filters pushed down, and checked against the record
contract of `contract.records`: a dataset that lacks a column or holds an unknown status is
refused with one line naming it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from contract.parts import record_parts
from contract.records import ADDED_COLUMNS, REQUEST_SCHEMA, STATUSES


class ContractError(ValueError):
    """A dataset that is not a loadtest result: the message names the folder and the column."""


def requests_dataset(run_dir: Path) -> ds.Dataset:
    folder = Path(run_dir) / "requests"
    if not folder.is_dir():
        raise ContractError(f"{folder}: no request records (not a loadtest run folder?)")
    # the record files of every mode, less the parts a compacted file already holds
    paths = [str(p) for mode_dir in sorted(folder.glob("mode=*")) for p in record_parts(mode_dir)]
    if not paths:
        if not any(folder.rglob("*.parquet")):   # nothing recorded (killed before a flush): no rows
            return ds.dataset(REQUEST_SCHEMA.empty_table())
        return ds.dataset(folder, format="parquet", partitioning="hive")
    return ds.dataset(paths, format="parquet", partitioning="hive", partition_base_dir=str(folder))


def read_requests(run_dir: Path, columns: list[str] | None = None, filter: pc.Expression | None = None) -> pa.Table:
    """The request records of a run (all modes, all workers): only `columns` (default all), only
    the rows `filter` keeps; ContractError if the records break the contract."""
    dataset = requests_dataset(run_dir)
    names = set(dataset.schema.names)
    for f in REQUEST_SCHEMA:
        if f.name not in names and f.name not in ADDED_COLUMNS:
            raise ContractError(f"{run_dir}/requests: column {f.name!r} is missing (the record contract is "
                                "contract.records.REQUEST_SCHEMA)")
    wanted = list(columns) if columns is not None else [*dataset.schema.names,
                                                        *(c for c in ADDED_COLUMNS if c not in names)]
    table = dataset.to_table(columns=[c for c in wanted if c in names], filter=filter)
    for c in wanted:    # a dataset from before a column was added: nulls there
        if c not in names:
            table = table.append_column(REQUEST_SCHEMA.field(c), pa.nulls(table.num_rows, REQUEST_SCHEMA.field(c).type))
    table = table.select(wanted)
    if "status" in table.column_names and table.num_rows:
        unknown = set(pc.unique(table["status"]).to_pylist()) - set(STATUSES)
        if unknown:
            raise ContractError(f"{run_dir}/requests: column 'status' holds {sorted(map(str, unknown))[0]!r}, "
                                f"which is not a status ({', '.join(STATUSES)})")
    return table
