"""Goodput and SLO attainment: the records joined with their tenants' targets from the run's
trace (`slo_ttft_p99_ms`, `slo_tpot_p99_ms`, `slo_e2e_p99_ms`; the scenario's, per request).

Goodput is the rate of requests that succeeded within every target of their tenant (latencies
from the send, as vLLM's `bench serve --goodput` counts them); attainment is a tenant's p99
against its target, pass or fail. A run whose trace carries no targets has no goodput, and
says so rather than printing zeros."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from analysis.stats import floats, ms_text
from loadtest.records import OK, SLO_COLUMNS, meets_slos

METRIC_OF = {"slo_ttft_p99_ms": "ttft_ms", "slo_tpot_p99_ms": "tpot_ms", "slo_e2e_p99_ms": "e2e_ms"}


def has_slos(table: pa.Table | pa.Schema) -> bool:
    """Whether a table (or schema) carries the SLO columns (a trace, or records joined by with_slos)."""
    names = table.names if isinstance(table, pa.Schema) else table.column_names
    return all(c in names for c in SLO_COLUMNS)


def has_targets(trace: pa.Table) -> bool:
    """Whether a trace sets any target at all."""
    return has_slos(trace) and any(trace[c].null_count < trace.num_rows for c in SLO_COLUMNS)


def with_slos(records: pa.Table, run_dir: Path) -> pa.Table | None:
    """`records` with their requests' targets joined from the run's trace.parquet (or a soak's
    trace/ folder); None when the
    trace holds no target at all (an imported trace, a scenario without SLOs)."""
    path = Path(run_dir) / "trace.parquet"
    if path.is_file():
        if not has_slos(pq.read_schema(path)):
            return None
        return join_targets(records, pq.read_table(path, columns=["request_id", *SLO_COLUMNS]))
    folder = Path(run_dir) / "trace"   # a soak's trace, written a window part at a time
    if not folder.is_dir():
        return None
    parts = ds.dataset(folder, format="parquet")
    if not has_slos(parts.schema):
        return None
    return join_targets(records, parts.to_table(columns=["request_id", *SLO_COLUMNS]))


def join_targets(records: pa.Table, trace: pa.Table) -> pa.Table | None:
    """`records` with their requests' targets from `trace` (a trace table); None when it sets none."""
    if not has_targets(trace):
        return None
    index = pc.index_in(records["request_id"], value_set=trace["request_id"])  # records keep their order
    for c in SLO_COLUMNS:
        records = records.append_column(c, pc.take(trace[c], index))
    return records


def request_meets(table: pa.Table) -> np.ndarray:
    """Per row of a table from `with_slos`: succeeded within every target of its tenant."""
    ok = pc.equal(table["status"], OK).to_numpy(zero_copy_only=False)
    return meets_slos(floats(table["ttft_ms"]), floats(table["tpot_ms"]), floats(table["e2e_ms"]),
                      *(floats(table[c]) for c in SLO_COLUMNS), ok)


@dataclass(frozen=True)
class Attainment:
    """One tenant's SLOs in one mode: its p99 of each targeted latency against the target."""

    mode: str
    tenant: str
    requests: int
    met: int                                   # requests within every target
    checks: dict[str, tuple[float, float]]     # metric -> (p99 measured over ok requests, target)

    @property
    def share(self) -> float:
        return self.met / self.requests if self.requests else math.nan

    @property
    def passed(self) -> bool:
        return all(not math.isnan(p99) and p99 <= target for p99, target in self.checks.values())

    def missed(self) -> list[str]:
        return [f"{m} p99 {ms_text(p99)} > {ms_text(target)} ms" if not math.isnan(p99)
                else f"{m}: no request succeeded"
                for m, (p99, target) in self.checks.items() if math.isnan(p99) or p99 > target]


def attainment(table: pa.Table, modes: list[str]) -> list[Attainment]:
    """Per mode and tenant with targets, from a table of `with_slos`."""
    meets = request_meets(table)
    modes_col = table["mode"].to_numpy(zero_copy_only=False)
    tenants_col = table["tenant"].to_numpy(zero_copy_only=False)
    ok = pc.equal(table["status"], OK).to_numpy(zero_copy_only=False)
    out = []
    for mode in modes:
        for tenant in sorted(set(tenants_col[modes_col == mode])):
            rows = (modes_col == mode) & (tenants_col == tenant)
            checks = {}
            for slo in SLO_COLUMNS:
                targets = floats(table[slo])[rows]
                if np.isnan(targets).all():
                    continue
                values = floats(table[METRIC_OF[slo]])[rows & ok]
                values = values[np.isfinite(values)]
                p99 = float(np.percentile(values, 99)) if len(values) else math.nan
                checks[METRIC_OF[slo].removesuffix("_ms")] = (p99, float(np.nanmax(targets)))
            if checks:
                out.append(Attainment(mode, tenant, int(rows.sum()), int(meets[rows].sum()), checks))
    return out
