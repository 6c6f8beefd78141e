"""Goodput and SLO attainment: the records joined with their tenants' targets from the run's
trace (`slo_ttft_p99_ms`, `slo_tpot_p99_ms`, `slo_e2e_p99_ms`; the scenario's, per request).

Goodput is the rate of requests that succeeded within every target of their tenant (latencies
from the send, as vLLM's `bench serve --goodput` counts them); attainment is a tenant's p99
against its target (the long summary's p99 with its interval: analysis.summary.attainment).
A run whose trace carries no targets has no goodput, and says so rather
than printing zeros.

Attainment is judged on the p99's distribution-free 95% interval (analysis.stats), not on the
p99 alone: *met* when every interval lies within its target, *missed* when one lies above it
(or no request succeeded), and *too few* to judge otherwise: an interval that holds the target,
or one the data cannot close on the side that decides (a p99 is bounded above only from
`supported_count(0.99)`, 368, requests). The gate (--slo-gate) fails on *missed* only, and
passes on *met* only."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from analysis.cells import ALL, cells_of
from analysis.stats import floats, supported_count
from common.times import ms_text
from contract.records import OK, SLO_COLUMNS, meets_slos

MET, MISSED, UNJUDGED = "met", "missed", "too few to judge"   # Attainment.verdict
SLO_TOO_FEW_RULE = (f"too few requests to judge the p99 against its target: its 95% interval holds the target or "
                    f"is open above (a p99's interval closes from {supported_count(0.99)} requests)")
NO_BOUNDS = (math.nan, math.nan, 0)   # a check without its p99's interval: open on both sides, of no requests
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
    bounds: dict[str, tuple[float, float, int]] = field(default_factory=dict)   # metric -> the p99's interval, n

    @property
    def share(self) -> float:
        return self.met / self.requests if self.requests else math.nan

    @property
    def passed(self) -> bool:
        """Every p99 within its target, as measured (the point; `verdict` says whether the data
        supports it)."""
        return all(not math.isnan(p99) and p99 <= target for p99, target in self.checks.values())

    def _judged(self, metric: str) -> str:
        """One check's answer: MISSED (its p99's interval lies above the target, or no request
        succeeded), MET (within it; an open upper end is not), else UNJUDGED."""
        p99, target = self.checks[metric]
        low, high, _ = self.bounds.get(metric, NO_BOUNDS)
        return MISSED if math.isnan(p99) or low > target else MET if high <= target else UNJUDGED

    @property
    def verdict(self) -> str:
        """MISSED when a check is missed, MET when every check is met, UNJUDGED otherwise."""
        answers = {self._judged(m) for m in self.checks}
        return MISSED if MISSED in answers else UNJUDGED if UNJUDGED in answers else MET

    def unjudged(self) -> list[str]:
        """The p99s the data cannot judge against their targets: value, interval, count, target."""
        out = []
        for m, (p99, target) in self.checks.items():
            if self._judged(m) == UNJUDGED:
                low, high, n = self.bounds.get(m, NO_BOUNDS)
                ends = ", ".join("-" if math.isnan(b) else ms_text(b) for b in (low, high))
                out.append(f"{m} p99 {ms_text(p99)} [{ends}] of {n:,} against {ms_text(target)} ms")
        return out

    def missed(self) -> list[str]:
        return [f"{m} p99 {ms_text(p99)} > {ms_text(target)} ms" if not math.isnan(p99)
                else f"{m}: no request succeeded"
                for m, (p99, target) in self.checks.items() if math.isnan(p99) or p99 > target]


def judged(verdicts: list[Attainment]) -> bool:
    """Whether these tenants' SLOs decide pass or fail on p99s their data bounds: one missed, or
    every one met (a capacity probe's answer, measured or planned)."""
    answers = {a.verdict for a in verdicts}
    return MISSED in answers or answers <= {MET}


def targets_of(table: pa.Table, modes: list[str]) -> dict[tuple[str, str], dict[str, float]]:
    """Per mode of `modes` and tenant (sorted) of a table of `with_slos`, each latency its
    requests have a target for (`ttft_ms`, `tpot_ms`, `e2e_ms`) and the target (the highest they
    carry); a tenant without one is left out. The p99s they are judged against are the long
    summary's (analysis.summary.attainment)."""
    cells = cells_of(table, modes)
    columns = {slo: floats(table[slo])[cells.order] for slo in SLO_COLUMNS}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for mode, tenant, s in cells.cells():
        if tenant == ALL:
            continue
        targets = {METRIC_OF[slo]: float(np.nanmax(v[s])) for slo, v in columns.items() if not np.isnan(v[s]).all()}
        if targets:
            out[mode, tenant] = targets
    return out
