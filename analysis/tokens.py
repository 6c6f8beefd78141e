"""Token counts checked, not assumed (issue 43): how far each request's planned lengths were from
what the server counted.

The plan is the run's trace (trace.parquet, joined to the records by request id): each request's
`prompt_tokens_est` (a tokenizer's exact count, or an estimate of 4 characters a token: its
metadata `loadtest.tokenizer` says which, `counted_by`) and `max_tokens`. The server's count is
each successful record's `usage`: `prompt_tokens` and `completion_tokens`. A request's relative
error is usage / plan - 1 (+10%: the server counted a tenth more than planned). A chat request's
prompt count holds its chat template's tokens, which the plan does not; an answer that ends
before its max_tokens (the model's end of sequence, where ignore_eos is false) counts below it.

Rows of the long summary, per mode and tenant (and the mode's `all`): `prompt_tokens_error` and
`output_tokens_error`, statistic `p50` (the median error, with its distribution-free 95%
interval), `abs_p99` (the p99 of the error's size, |usage / plan - 1|, with its interval: NaN on a
side the data cannot bound, so a view marks it too few under 368 requests, as every p99,
analysis.stats.supported_count) and `count` (the requests they are of).

The trace also says what its acceptance is measured on (`content_notes`): a trace of lengths
only (an imported Azure or BurstGPT trace, whose prompts are generated to the recorded lengths
and whose answers run to max_tokens, ignore_eos) has its acceptance measured on filler text; a
tenant of real prompts that sets ignore_eos has its answers run past their end.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.cells import ALL, cells_of
from analysis.long_summary import SummaryView
from analysis.stats import percentiles_with_intervals, supported_count
from analysis.summary import TOO_FEW
from contract.records import OK

META_TOKENIZER = b"loadtest.tokenizer"   # scenarios.trace's key (analysis imports no scenarios)
# What the plan's prompt lengths are where the trace does not say (a trace from before the key, or
# an imported one, whose lengths are its importer's estimate)
NOT_SAID = "as the trace gave them (its metadata does not say how they were counted)"
# The importers whose traces hold lengths only: their prompts are generated to the recorded lengths
# (scenarios/importers.py, `_lengths_only`; the trace's prompt_source is `import:FORMAT:FILE`)
LENGTHS_ONLY = ("azure", "burstgpt")
PLAN_COLUMNS = ["request_id", "tenant", "prompt_tokens_est", "max_tokens", "ignore_eos", "prompt_source"]
COUNTS = {"prompt_tokens_error": ("prompt_tokens_est", "prompt_tokens"),
          "output_tokens_error": ("max_tokens", "completion_tokens")}
Row = tuple[str, str, str, str, float, float | None, float | None]   # mode, tenant, metric, statistic, value, low, high


def relative_errors(planned: np.ndarray, counted: np.ndarray) -> np.ndarray:
    """usage / plan - 1 of each request whose plan and count are both known and the plan above 0."""
    planned, counted = np.asarray(planned, dtype=np.float64), np.asarray(counted, dtype=np.float64)
    keep = np.isfinite(planned) & np.isfinite(counted) & (planned > 0)
    return counted[keep] / planned[keep] - 1


def error_stats(errors: np.ndarray) -> dict[str, tuple[float, float | None, float | None]]:
    """The median relative error and the p99 of its size, each (value, low, high) with its 95%
    interval (NaN on a side too few requests cannot bound), and the count."""
    signed = percentiles_with_intervals(errors)
    size = percentiles_with_intervals(np.abs(errors))
    return {"p50": signed["p50"], "abs_p99": size["p99"], "count": signed["count"]}


def plan_of(run_dir: Path) -> pa.Table | None:
    """The run's trace's planned lengths by request id, and what it says of its prompts (None where
    the folder has no trace with them)."""
    path = Path(run_dir) / "trace.parquet"
    if not path.is_file() or not set(PLAN_COLUMNS) <= set(pq.read_schema(path).names):
        return None
    return pq.read_table(path, columns=PLAN_COLUMNS)


def counted_by(run_dir: Path) -> str:
    """How the trace's planned prompt lengths were counted, in words."""
    meta = pq.read_schema(Path(run_dir) / "trace.parquet").metadata or {}
    said = meta.get(META_TOKENIZER, b"").decode()
    name, _, digest = said.partition(" sha256 ")
    if not digest:
        return said or NOT_SAID
    return f"counted by the tokenizer {name} (sha256 {digest[:16]})"


def token_rows(records: pa.Table, plan: pa.Table, modes: list[str]) -> list[Row]:
    """The relative errors of each (mode, tenant) cell's successful records (`records` with mode,
    tenant, request_id, status, prompt_tokens and completion_tokens) against `plan` (plan_of)."""
    index = pc.index_in(records["request_id"], value_set=plan["request_id"])
    found = pc.is_valid(index).to_numpy(zero_copy_only=False)
    ok = pc.equal(records["status"], OK).to_numpy(zero_copy_only=False) & found
    cells = cells_of(records, modes)
    planned = {name: pc.take(plan[column], index).to_numpy(zero_copy_only=False).astype(np.float64)
               for name, (column, _) in COUNTS.items()}
    counted = {name: pc.fill_null(records[column], -1).to_numpy(zero_copy_only=False).astype(np.float64)
               for name, (_, column) in COUNTS.items()}
    rows: list[Row] = []
    for mode, tenant, part in cells.cells():
        mine = cells.order[part]
        mine = mine[ok[mine]]
        for name in COUNTS:
            got = counted[name][mine]
            errors = relative_errors(planned[name][mine][got >= 0], got[got >= 0])
            if len(errors):
                rows += [(mode, tenant, name, stat, *figure) for stat, figure in error_stats(errors).items()]
    return rows


def content_notes(plan: pa.Table) -> list[str]:
    """What a tenant's acceptance is measured on, where it is not its prompts' own answers: a line
    for each tenant of a lengths-only import, and for each of real prompts that sets ignore_eos."""
    seen: dict[str, tuple[str, bool]] = {}
    for who, source, eos in zip(plan["tenant"].to_pylist(), plan["prompt_source"].to_pylist(),
                                plan["ignore_eos"].to_pylist(), strict=True):
        seen.setdefault(who, (source or "", bool(eos)))
    notes = []
    for who, (source, eos) in sorted(seen.items()):
        kind = source.split(":")[1] if source.startswith("import:") else None
        if kind in LENGTHS_ONLY:
            notes.append(f"{who}: acceptance not content-valid: its trace ({source.split(':', 2)[-1]}, {kind}) "
                         "holds lengths only, so its prompts were generated to them (the project's own chat text) "
                         "and its answers run to max_tokens (ignore_eos): its acceptance and speedup are measured "
                         "on filler text, not on the requests' content")
        elif eos and source and source != "builtin":
            notes.append(f"{who}: ignore_eos with real prompts ({source}): its answers run past where the model "
                         "would stop, so its acceptance is partly measured on text after the answer's end")
    return notes


def _cell(view: SummaryView, mode: str, tenant: str, metric: str, stat: str) -> str:
    """A relative error as the tables print it (the median signed, the p99 of its size), marked too
    few where its interval runs past the data."""
    value = view.get(mode, metric, stat, tenant)
    if value is None:
        return "-"
    text = f"{value:+.1%}" if stat == "p50" else f"{value:.1%}"
    return text + (f"{TOO_FEW} too few" if view.too_few(mode, metric, stat, tenant) else "")


def check_rows(view: SummaryView) -> tuple[list[str], list[list[str]]]:
    """The plan against the server's counts as the console and report.md show it: a row per tenant
    and mode (and the mode's `all` where it has several tenants); none where nothing was checked.
    Where every mode of a tenant shows the same figures (one model's tokenizer behind every mode,
    the same requests), one row says so (mode `every mode`)."""
    header = ["tenant", "mode", "prompt: median", "prompt: p99 of size", "n", "output: median",
              "output: p99 of size", "n"]
    rows = []
    for tenant in [*view.tenants, *([ALL] if len(view.tenants) != 1 else [])]:
        mine = []
        for mode in view.modes:
            counts = [view.get(mode, metric, "count", tenant) for metric in COUNTS]
            if all(n is None for n in counts):
                continue
            row = [tenant, mode]
            for metric, n in zip(COUNTS, counts, strict=True):
                row += [_cell(view, mode, tenant, metric, "p50"), _cell(view, mode, tenant, metric, "abs_p99"),
                        f"{int(n or 0):,}"]
            mine.append(row)
        if len(mine) > 1 and len({tuple(r[2:]) for r in mine}) == 1:
            mine = [[tenant, "every mode", *mine[0][2:]]]
        rows += mine
    return header, rows


def check_text(counted: str | None) -> str:
    """What report.md says above the table."""
    return ("Per tenant and mode, over the requests that succeeded: the server's count (`usage`) against the "
            "plan (the trace), as usage / plan - 1 (+10%: the server counted a tenth more): its median, and the "
            "p99 of its size, with the requests they are of. Prompts: the planned length (`prompt_tokens_est`), "
            f"{counted or NOT_SAID}, against `usage.prompt_tokens`; a chat request's count by the server includes "
            "its chat template's tokens (the role headers and the tokens around each message), which the plan "
            "does not, so a chat tenant's prompts count above the plan even with the model's own tokenizer "
            "(`--tokenizer`). Outputs: the planned `max_tokens` against `usage.completion_tokens`; an answer "
            "that ends before it (the model's end of sequence, where `ignore_eos` is false, or a stop) counts "
            f"below it. {TOO_FEW} too few requests for the figure (a p99 needs {supported_count(0.99)}, a median "
            f"{supported_count(0.5)}): its 95% interval runs past the data (`summary.parquet` holds it).")
