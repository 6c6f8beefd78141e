"""The run's summary in long format (DESIGN, "Analysis"): one row per run, mode, tenant, metric
and statistic, with a value and, for speedups and latency percentiles, the bounds of its 95%
interval (a percentile's is distribution-free, from its order statistics; NaN on a side its data
cannot bound: too few requests, analysis.stats.supported_count). Tenant `all` is the whole mode.
Every table, report and gate is a view of it.

Metrics (latencies in ms, over requests that succeeded unless said):
- `ttft_ms`, `tpot_ms`, `e2e_ms`; `ttft_sched_ms`, `e2e_sched_ms` (from the scheduled time, so a
  late send counts against the server's answer); `lateness_ms` (every sent request);
- `itl_chunk_ms` (gaps between text chunks: what a user sees) and `itl_token_ms` (each gap over
  the tokens its chunk carried); statistics p50, p90, p95, p99, max, and `count` (the values
  they are of);
- `requests` by `status` and `status/error_kind`, and by outcome (`failed`, `client`: the one
  definition of `contract.records.outcomes` that the gate counts by);
- `req_per_s`, `out_tok_per_s`, `goodput_req_per_s` (statistic `rate`: completions inside the
  mode's steady window per second, NaN when the replay was too short for one; see
  analysis.steady), `req_per_s` and `out_tok_per_s` `makespan` (completions and their tokens
  over the seconds from the first send to the last completion: the offered rate, less the
  warm-up, while the fleet keeps up; its capacity when it cannot), and the completions each rate
  is of (`req_per_s` `count` and `makespan_count`, `goodput_req_per_s` `count`; a view marks a
  rate of fewer than analysis.stats.MIN_RATE_COUNT, as it marks a percentile of too few),
  `steady_window_s` (`length`), `goodput_share` (of all scheduled); `in_flight` (`mid`, `end`:
  requests arrived and not done halfway through the arrivals and at the last one; `peak`: the
  most successful requests between send and last token at once), `arrival_span_s` (`length`:
  first to last scheduled time), `sent_span_s` (`length`: first to last send, shorter when the
  replay was stopped), `drain_req_per_s` (`rate`) and `drain_completions` (`count`): how fast the
  requests in flight at the last arrival ended, until half of them had (about the offered rate
  when the fleet keeps up, its capacity when it cannot), and `offered_req_per_s` (`trace`:
  scheduled requests over the arrival span), tenant `all`;
- `tokens_per_step` (client: completion tokens after the first chunk over chunks after the
  first), `tokens_per_chunk`; the server's `acceptance_rate`, `mean_acceptance_length`,
  `acceptance_at_position` (statistic `pos1`, `pos2`, ...) from /metrics counter increases
  (statistic `server`, tenant `all`), and `acceptance_rate`, `mean_acceptance_length` (statistic
  `requests`) and `request_acceptance_at_position` from each response's own counts (vLLM's
  per-request metrics, the `spec_*` columns), per tenant too;
- `weights_gb_per_gpu`, `proposer_weights_gb_per_gpu`, `kv_cache_gb_per_gpu`,
  `kv_capacity_tokens` (statistic `startup`, from the manifest); `client_limited` (`verdict`);
- `speedup_ttft`, `speedup_tpot`, `speedup_e2e`: paired geometric mean over the baseline with
  `ci_low`/`ci_high`, and statistic `pairs` for how many requests were paired.

The run's analysis (analysis.run_analysis) adds the rows its trace is needed for, joined by
request id: acceptance and speedup by the prompts' category (analysis.category) and the planned
lengths against the server's counts (analysis.tokens: `prompt_tokens_error`, `output_tokens_error`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.cells import ALL, WORKERS, Cells, cells_of, codes, finite_cell_stats, gather, rows_where
from analysis.gpu import gpu_rows
from analysis.server import SpecDecodeStats
from analysis.slo import has_slos, request_meets
from analysis.stats import (
    Ratio,
    count_column,
    floats,
    paired_speedups_ci,
    percentiles_of_own,
    percentiles_with_intervals,
    too_few_completions,
)
from analysis.steady import in_window, steady_window
from contract.records import CLIENT, FAILED, OK, REQUEST_SCHEMA, STATUSES, outcomes

LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms")
SPEEDUPS = {"speedup_ttft": "ttft_ms", "speedup_tpot": "tpot_ms", "speedup_e2e": "e2e_ms"}
LIST_COLUMNS = ("itl_ms", "chunk_tokens")
SCALAR_COLUMNS = [c for c in REQUEST_SCHEMA.names if c not in LIST_COLUMNS]   # a record's columns but the lists
SPEC_COLUMNS = ("spec_steps", "spec_draft_tokens", "spec_accepted_tokens", "spec_acceptance_histogram")
# The columns of the records the summary reads (the lists apart: `chunks_of` reads them a mode at
# a time), and all that a run's analysis reads (analysis.run_analysis: its SLO join, report.html,
# error check and the plan's token counts, analysis.tokens, read no other). The rest (the worker,
# the error's text...) it never reads: reading every scalar column took twice as long
# (bench/analysis.py, 10M rows).
SUMMARY_COLUMNS = ["mode", "tenant", "request_id", "status", "error_kind", "scheduled_ns", "sent_ns", "last_token_ns",
                   "offset_s", *LATENCIES, "lateness_ms", "n_chunks", "completion_tokens", "prompt_tokens",
                   *SPEC_COLUMNS]
# Of those, what the per-request figures read (`_request_rows`: counts, percentiles, times, rates;
# the SLO columns too where a table has them): not the ids (the paired speedups), the prompt's
# tokens (analysis.tokens) nor the per-request acceptance (SPEC_COLUMNS)
REQUEST_COLUMNS = [c for c in SUMMARY_COLUMNS if c not in ("request_id", "prompt_tokens") and c not in SPEC_COLUMNS]

LONG_SCHEMA = pa.schema([
    pa.field("run_id", pa.string()), pa.field("mode", pa.string()), pa.field("tenant", pa.string()),
    pa.field("metric", pa.string()), pa.field("statistic", pa.string()), pa.field("value", pa.float64()),
    pa.field("ci_low", pa.float64()), pa.field("ci_high", pa.float64()),
])

Cell = tuple[str, str]
Rows = dict[Cell, list[tuple[str, str, float, float | None, float | None]]]


def _add(rows: Rows, cell: Cell, metric: str, statistic: str, value: float | None,
         low: float | None = None, high: float | None = None) -> None:
    rows.setdefault(cell, []).append((metric, statistic, math.nan if value is None else float(value), low, high))


def _kind_groups(table: pa.Table) -> tuple[np.ndarray, list[str], pa.Table]:
    """Each row's group, in one pass: its status when it has no error kind (STATUSES, then any
    other status, which a run's records never hold: analysis.reader refuses it; -1 for none),
    else one of its `status/error_kind` after those (a few rows); those kinds' names, sorted; and
    one record (status, error_kind) of each group, in group order, so whatever is a function of
    a record's status and kind is computed once a group."""
    status, kind = table["status"], table["error_kind"]
    group = codes(status, list(STATUSES))      # our own array: a few rows are given kinds below
    odd = pc.unique(status.take(np.flatnonzero(group < 0))).to_pylist()
    statuses = [*STATUSES, *sorted(s for s in odd if s is not None)]
    if len(statuses) > len(STATUSES):
        group = codes(status, statuses)
    with_kind = np.flatnonzero(pc.is_valid(kind).to_numpy(zero_copy_only=False))
    kinds = pc.binary_join_element_wise(status.take(with_kind), kind.take(with_kind), "/")
    names = sorted(k for k in pc.unique(kinds).to_pylist() if k is not None)
    labels = codes(kinds, names)
    group[with_kind] = np.where(labels >= 0, len(statuses) + labels, -1)
    _, first = np.unique(labels, return_index=True)
    first = with_kind[first[len(first) - len(names):]]      # a row of each kind (a -1 sorts first)
    groups = pa.table({"status": pa.array([*statuses, *status.take(first).to_pylist()], pa.string()),
                       "error_kind": pa.array([None] * len(statuses) + kind.take(first).to_pylist(), pa.string())})
    return group, names, groups


def _by_group(per_group: np.ndarray, group_to: np.ndarray, n: int) -> np.ndarray:
    """Counts per group (one cell's) summed into `n` labels, `group_to` each group's (-1: none)."""
    keep = group_to >= 0
    return np.bincount(group_to[keep], weights=per_group[keep], minlength=n)


def _count_rows(table: pa.Table, cells: Cells) -> tuple[Rows, dict[Cell, np.ndarray]]:
    """Requests by status, by outcome (what the gate counts: contract.records.outcomes) and by
    `status/error_kind`, per cell, from one count of the rows by group (`_kind_groups`); and the
    counts by status, per cell."""
    rows: Rows = {}
    group, names, groups = _kind_groups(table)
    per_group = cells.counts(group, groups.num_rows)
    status_of = codes(groups["status"], list(STATUSES))
    outcome_of = codes(outcomes(groups), [FAILED, CLIENT])
    by_status = {cell: _by_group(n, status_of, len(STATUSES)) for cell, n in per_group.items()}
    for cell, n in by_status.items():
        for name, count in zip(STATUSES, n, strict=True):
            _add(rows, cell, "requests", name, count)
    for cell, n in per_group.items():
        failed, client = _by_group(n, outcome_of, 2)
        _add(rows, cell, "requests", FAILED, failed)
        _add(rows, cell, "requests", CLIENT, client)
    for cell, n in per_group.items():
        for name, count in zip(names, n[groups.num_rows - len(names):], strict=True):
            if count:
                _add(rows, cell, "requests", name, count)
    return rows, by_status


# How `gather` makes numpy of a stretch of a column: as it is, a null as 0 (epoch ns), or which rows hold a value
def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    return col.to_numpy()


def _zero_if_null(col: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(col, 0).to_numpy()


def _valid(col: pa.ChunkedArray) -> np.ndarray:
    return pc.is_valid(col).to_numpy(zero_copy_only=False)


def _time_rows(table: pa.Table, cells: Cells, ok: np.ndarray) -> tuple[Rows, dict[str, tuple[int, int] | None],
                                                                      dict[Cell, float]]:
    """What the times of the records say, apart from any percentile: each mode's in-flight
    counts, spans, offered rate and drain (rows of tenant `all`, in order), its first and last
    send (None: nothing sent), and each cell's makespan in seconds. A mode's rows are gathered
    at a time, in cell order: its tenants' are slices of them."""
    rows: Rows = {}
    sends, makespan = {}, {}
    for mode, tenant, s in cells.cells():
        if tenant == ALL:       # the mode's rows, gathered once: its tenants' are slices of them
            mine, start = cells.order[s], s.start
            ok_m, sent_m = ok[mine], gather(table["sent_ns"], mine, _valid)   # a never-sent row is no arrival
            arrivals_m = gather(table["scheduled_ns"], mine, _numpy)
            last_m = gather(table["last_token_ns"], mine, _zero_if_null)
            done = np.where(ok_m, last_m, -1)
        cut = slice(s.start - start, s.stop - start)
        # seconds from the first send to the last completion: completions over it follow the
        # arrivals while the fleet keeps up, and come at its capacity when it cannot (saturated)
        done_s, sent_at = done[cut], arrivals_m[cut][sent_m[cut]]
        last_done = int(done_s.max()) if len(done_s) else -1     # -1: none (a row not ok is -1)
        makespan[mode, tenant] = ((last_done - int(sent_at.min())) / 1e9 if last_done >= 0 and len(sent_at)
                                  else math.nan)
        if tenant != ALL:
            continue
        # requests that succeeded only: a refused or failed one is no backlog
        both = sent_m & ok_m
        ends, starts = done[both], arrivals_m[both]
        for stat, count in in_flight(starts, done[done >= 0]).items():
            _add(rows, (mode, ALL), "in_flight", stat, count)
        _add(rows, (mode, ALL), "in_flight", "peak",
             peak_in_flight(gather(table["sent_ns"], mine[ok_m], _zero_if_null), last_m[ok_m]))
        offsets_m = gather(table["offset_s"], mine, _numpy)
        span = float(offsets_m.max() - offsets_m.min()) if len(offsets_m) else 0.0
        _add(rows, (mode, ALL), "arrival_span_s", "length", span)
        _add(rows, (mode, ALL), "offered_req_per_s", "trace", len(offsets_m) / span if span > 0 else math.nan)
        sends[mode] = (int(sent_at.min()), int(sent_at.max())) if len(sent_at) else None
        if len(sent_at):
            # the drain: how fast the requests in flight at the last arrival ended, until half of them
            # had (a fleet that keeps up ends them about as fast as they came; a saturated one at its
            # capacity)
            last = int(sent_at.max())
            waiting = np.sort(ends[(starts <= last) & (ends > last)])
            half = (len(waiting) + 1) // 2
            took = (int(waiting[half - 1]) - last) / 1e9 if half else 0.0
            _add(rows, (mode, ALL), "drain_req_per_s", "rate", half / took if took > 0 else math.nan)
            _add(rows, (mode, ALL), "drain_completions", "count", half)
        _add(rows, (mode, ALL), "sent_span_s", "length", (int(sent_at.max()) - int(sent_at.min())) / 1e9
             if len(sent_at) else 0.0)
    return rows, sends, makespan


def _request_rows(rows: Rows, table: pa.Table, cells: Cells, ok: np.ndarray) -> dict[str, tuple[int, int] | None]:
    """Counts, latency percentiles, rates and goodput. The counts, the times' figures
    (`_time_rows`) and each column's percentiles (its values gathered a mode at a time, in cell
    order: the latencies' of the requests that succeeded only) in threads: numpy's gathers and
    partitions release the GIL."""
    ok_rows, all_rows = rows_where(cells, ok), (cells.order, cells.bounds)
    columns = {**{m: ok_rows for m in LATENCIES}, "lateness_ms": all_rows}

    def percentiles(metric: str) -> dict[Cell, dict[str, tuple]]:
        return finite_cell_stats(cells, lambda rows: gather(table[metric], rows, floats), columns[metric],
                                 percentiles_of_own)

    with ThreadPoolExecutor(WORKERS) as pool:
        times = pool.submit(_time_rows, table, cells, ok)        # the longest first
        counted = pool.submit(_count_rows, table, cells)
        by_metric = {metric: pool.submit(percentiles, metric) for metric in columns}
        count_rows, by_status = counted.result()
        for cell, items in count_rows.items():
            rows.setdefault(cell, []).extend(items)
        for metric, by_cell in by_metric.items():
            for cell, stats in by_cell.result().items():
                for stat, (value, low, high) in stats.items():
                    _add(rows, cell, metric, stat, value, low, high)
        time_rows, sends, makespan = times.result()
    for cell, items in time_rows.items():
        rows.setdefault(cell, []).extend(items)
    meets = request_meets(table) if has_slos(table) else None
    met = cells.sums(meets.astype(np.float64)) if meets is not None else None
    scheduled = {cell: float(n.sum()) for cell, n in by_status.items()}
    # rates over each mode's steady window (analysis.steady): completions inside it, per second
    windows = {}
    for mode, tenant, _ in cells.cells():
        if tenant == ALL:
            e2e_p99 = next((v for metric, stat, v, _, _ in rows[(mode, ALL)] if (metric, stat) == ("e2e_ms", "p99")),
                           math.nan)
            windows[mode] = steady_window(*sends[mode], e2e_p99) if sends[mode] else None
    done = _done_sums(table, cells, ok, ok_rows, windows, meets)
    tokens, chunks, steady_done, steady_tokens = (done[k] for k in ("tokens", "chunks", "steady", "steady_tokens"))
    steady_met, all_tokens = done.get("steady_met"), tokens
    all_done = {cell: float(n) for cell, n in cells.per_mode(np.diff(ok_rows[1]).astype(np.float64)).items()}
    for mode, tenant, _ in cells.cells():
        cell, window = (mode, tenant), windows[mode]
        length = (window[1] - window[0]) / 1e9 if window else math.nan
        if tenant == ALL:
            _add(rows, cell, "steady_window_s", "length", length)
        _add(rows, cell, "tokens_per_chunk", "mean", tokens[cell] / chunks[cell] if chunks[cell] else math.nan)
        _add(rows, cell, "req_per_s", "rate", steady_done[cell] / length)
        _add(rows, cell, "req_per_s", "count", steady_done[cell] if window else math.nan)   # what the rates are of
        _add(rows, cell, "out_tok_per_s", "rate", steady_tokens[cell] / length)
        span = makespan[cell]
        _add(rows, cell, "req_per_s", "makespan", all_done[cell] / span if span > 0 else math.nan)
        _add(rows, cell, "req_per_s", "makespan_count", all_done[cell])
        _add(rows, cell, "out_tok_per_s", "makespan", all_tokens[cell] / span if span > 0 else math.nan)
        if met is not None:
            _add(rows, cell, "goodput_req_per_s", "rate", steady_met[cell] / length)
            _add(rows, cell, "goodput_req_per_s", "count", steady_met[cell] if window else math.nan)
            _add(rows, cell, "goodput_share", "share", met[cell] / scheduled[cell] if scheduled[cell] else math.nan)
    return windows


def _done_sums(table: pa.Table, cells: Cells, ok: np.ndarray, ok_rows: tuple[np.ndarray, np.ndarray],
               windows: dict[str, tuple[int, int] | None], meets: np.ndarray | None) -> dict[str, dict[Cell, float]]:
    """Per cell and per mode, over the requests that succeeded (`ok_rows`, analysis.cells.rows_where):
    their completion tokens and chunks (`tokens`, `chunks`), how many of them completed inside
    their mode's steady window (`steady`), their tokens (`steady_tokens`) and, given `meets`, how
    many of those met their SLOs (`steady_met`). A mode's successes at a time; counts are
    integers, summed exactly (a column of floats: numpy's sum of each cell's)."""
    order, bounds = ok_rows
    t, n_cells = len(cells.tenants), len(bounds) - 1
    names = ["tokens", "chunks", "steady", "steady_tokens", *(["steady_met"] if meets is not None else [])]
    per = {name: np.zeros(n_cells) for name in names}
    for m, mode in enumerate(cells.modes):
        cut = slice(m * t, m * t + t)
        mine, ends = order[bounds[m * t]:bounds[m * t + t]], bounds[m * t:m * t + t + 1] - bounds[m * t]
        tokens = gather(table["completion_tokens"], mine, count_column)   # a reply without usage counts no tokens
        steady = in_window(gather(table["last_token_ns"], mine, _zero_if_null), ok[mine], windows.get(mode))
        values = {"tokens": tokens, "chunks": gather(table["n_chunks"], mine, count_column), "steady": steady,
                  "steady_tokens": np.where(steady, tokens, 0)}
        if meets is not None:
            values["steady_met"] = meets[mine] & steady
        for name, v in values.items():
            per[name][cut] = [v[a:b].sum() for a, b in itertools.pairwise(ends)]
    return {name: {cell: float(v) for cell, v in cells.per_mode(p).items()} for name, p in per.items()}


# peak_in_flight counts the intervals into buckets of time, about one per this many intervals: wider
# ones bound the peak more loosely (more buckets counted exactly, past 16 most of them on
# bench/analysis.py's 2M requests a mode), narrower ones make longer passes
INTERVALS_PER_BUCKET = 4


def peak_in_flight(sent_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """The most intervals [sent, end) open at once (an end and a send at the same instant: the
    end first), without sorting them all: the sends and ends are counted into buckets of time
    (INTERVALS_PER_BUCKET); the count after each bucket's events is reached (after its last
    send), and no count inside a bucket passes the count before it plus its sends. Only the
    buckets whose bound passes the highest count reached are counted exactly, their events
    sorted (a few, unless most intervals start in a few buckets)."""
    if len(sent_ns) == 0:
        return 0
    sent_ns, end_ns = np.asarray(sent_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64)
    origin = int(min(sent_ns.min(), end_ns.min()))
    span = int(max(sent_ns.max(), end_ns.max())) - origin
    shift = (span * INTERVALS_PER_BUCKET // len(sent_ns)).bit_length()     # buckets 2**shift ns wide
    n_buckets = (span >> shift) + 1
    send_bucket, end_bucket = sent_ns - origin, end_ns - origin
    send_bucket >>= shift
    end_bucket >>= shift
    sends, ends = np.bincount(send_bucket, minlength=n_buckets), np.bincount(end_bucket, minlength=n_buckets)
    after = np.cumsum(sends - ends)
    before = after - sends
    before += ends
    has_sends = sends > 0
    reached = int(after[has_sends].max())
    open_buckets = has_sends & (before + sends > reached)
    if not open_buckets.any():
        return reached
    # those buckets' events in time order: a send's count is the count before its bucket plus the
    # bucket's sends up to it, less the bucket's ends up to it
    sends_in, ends_in = np.sort(sent_ns[open_buckets[send_bucket]]), np.sort(end_ns[open_buckets[end_bucket]])
    bucket = (sends_in - origin) >> shift
    start = origin + (bucket << shift)
    within = (np.searchsorted(sends_in, sends_in, "right") - np.searchsorted(sends_in, start, "left")
              - np.searchsorted(ends_in, sends_in, "right") + np.searchsorted(ends_in, start, "left"))
    return max(reached, int((before[bucket] + within).max()))


def in_flight(arrivals_ns: np.ndarray, done_ns: np.ndarray) -> dict[str, float]:
    """Requests arrived and not yet done halfway through the arrivals (`mid`) and at the last
    arrival (`end`): about equal while the fleet keeps up (once past warm-up), about double when
    its queue grows all run."""
    if not len(arrivals_ns):
        return {}
    first, last = int(arrivals_ns.min()), int(arrivals_ns.max())

    def at(t: int) -> float:      # counted, not sorted: a pass over each
        return float(np.count_nonzero(arrivals_ns <= t) - np.count_nonzero(done_ns <= t))
    return {"mid": at((first + last) // 2), "end": at(last)}


def _request_acceptance_rows(rows: Rows, table: pa.Table, cells: Cells, ok: np.ndarray) -> None:
    """The server's acceptance as each response reported it (`spec_*`, vLLM's per-request
    metrics), summed per cell over the requests that succeeded and carry it: statistic
    `requests` beside the /metrics view's `server`, and per draft position (steps that accepted
    at least i drafts over all steps) as `request_acceptance_at_position`."""
    steps_col = table["spec_steps"]
    if steps_col.null_count == len(steps_col):
        return
    has = ok.copy()      # every count present (the client nulls a malformed field on its own)
    for c in SPEC_COLUMNS:
        has &= pc.is_valid(table[c]).to_numpy(zero_copy_only=False)
    steps = cells.sums(np.where(has, floats(steps_col), 0.0))
    drafts = cells.sums(np.where(has, floats(table["spec_draft_tokens"]), 0.0))
    accepted = cells.sums(np.where(has, floats(table["spec_accepted_tokens"]), 0.0))
    hist = table["spec_acceptance_histogram"].combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(hist), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.where(has, lengths, 0)
    width = int(lengths.max()) if len(lengths) else 0
    by_position = None
    if width > 1:
        values = pc.list_flatten(hist).to_numpy(zero_copy_only=False).astype(np.float64)
        all_lengths = pc.fill_null(pc.list_value_length(hist), 0).to_numpy(zero_copy_only=False)
        row_of = np.repeat(np.arange(len(all_lengths)), all_lengths)
        position = np.arange(len(values)) - np.repeat(np.cumsum(all_lengths) - all_lengths, all_lengths)
        keep = has[row_of]
        n_cells = len(cells.bounds) - 1
        per = np.bincount(cells.bins[row_of[keep]] * width + position[keep], weights=values[keep],
                          minlength=(n_cells + 1) * width)[:n_cells * width]
        # steps that accepted at least i drafts: the histogram's tail from i (its 0th: all its steps)
        by_position = cells.per_mode(np.cumsum(per.reshape(n_cells, width)[:, ::-1], axis=1)[:, ::-1])
    for cell in steps:
        if not steps[cell]:
            continue
        _add(rows, cell, "acceptance_rate", "requests", accepted[cell] / drafts[cell] if drafts[cell] else math.nan)
        _add(rows, cell, "mean_acceptance_length", "requests", 1 + accepted[cell] / steps[cell])
        if by_position is not None and by_position[cell][0]:
            for i in range(1, width):
                _add(rows, cell, "request_acceptance_at_position", f"pos{i}",
                     by_position[cell][i] / by_position[cell][0])


def _flat_after_first(lists: pa.Array, keep_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values of each kept row's list after its first (the prefill chunk), in row order, and
    how many each row gave."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    keep = np.repeat(keep_rows, lengths)
    keep[np.cumsum(lengths)[(lengths > 0)] - lengths[lengths > 0]] = False      # each list's first
    return values[keep], np.where(keep_rows, np.maximum(lengths - 1, 0), 0)


def _split(mode: str, tenants: list[str], bounds: np.ndarray, values: np.ndarray,
           per_row: np.ndarray) -> list[tuple[Cell, np.ndarray]]:
    """One mode's flattened values (its rows in cell order gave `per_row` each; its tenant k's
    rows are bounds[k]:bounds[k + 1]) as the mode's and each tenant's."""
    ends = np.concatenate([[0], np.cumsum(per_row)])[bounds]
    cuts = [(ALL, slice(ends[0], ends[-1]))]
    cuts += [(tenant, slice(ends[j], ends[j + 1])) for j, tenant in enumerate(tenants) if bounds[j + 1] > bounds[j]]
    return [((mode, tenant), values[s]) for tenant, s in cuts]


def _chunk_rows(rows: Rows, table: pa.Table, cells: Cells, ok: np.ndarray) -> None:
    """ITL per chunk and per token and tokens per step, one mode at a time (its lists flattened
    in cell order), so memory holds one mode's chunks."""
    t = len(cells.tenants)
    for m, mode in enumerate(cells.modes):
        order = cells.order[cells.bounds[m * t]:cells.bounds[m * t + t]]
        if not len(order):
            continue
        bounds = cells.bounds[m * t:m * t + t + 1] - cells.bounds[m * t]
        idx = pa.array(order)
        itl = table["itl_ms"].take(idx).combine_chunks()
        tokens = table["chunk_tokens"].take(idx).combine_chunks()
        mine_ok = ok[order]
        same = pc.fill_null(pc.equal(pc.list_value_length(itl), pc.list_value_length(tokens)), False)
        both = mine_ok & same.to_numpy(zero_copy_only=False)
        gaps, gap_rows = _flat_after_first(itl, mine_ok)
        step_tokens, token_rows = _flat_after_first(tokens, mine_ok)
        if (both == mine_ok).all():          # the usual case: every record has a count per chunk
            paired_gaps, pair_rows, paired_tokens = gaps, gap_rows, step_tokens
        else:
            paired_gaps, pair_rows = _flat_after_first(itl, both)
            paired_tokens, _ = _flat_after_first(tokens, both)
        per_token_ok = paired_tokens > 0
        if per_token_ok.all():
            per_token = paired_gaps / paired_tokens
        else:
            per_token = paired_gaps[per_token_ok] / paired_tokens[per_token_ok]
            pair_rows = np.bincount(np.repeat(np.arange(len(order)), pair_rows)[per_token_ok], minlength=len(order))
        jobs = [(name, cell, part) for name, values, per_row in (("itl_chunk_ms", gaps, gap_rows),
                                                                ("itl_token_ms", per_token, pair_rows))
                for cell, part in _split(mode, cells.tenants, bounds, values, per_row)]
        with ThreadPoolExecutor(WORKERS) as pool:     # numpy's partition releases the GIL
            for (name, cell, _), stats in zip(jobs, pool.map(lambda job: percentiles_with_intervals(job[2]), jobs),
                                              strict=True):
                for stat, (value, low, high) in stats.items():
                    _add(rows, cell, name, stat, value, low, high)
        for cell, part in _split(mode, cells.tenants, bounds, step_tokens, token_rows):
            _add(rows, cell, "tokens_per_step", "mean", part.mean(dtype=np.float64) if len(part) else math.nan)


def _speedup_rows(rows: Rows, table: pa.Table, cells: Cells, ok: np.ndarray, baseline: str) -> None:
    """Paired speedups over the baseline, the pairs found by request_id (the same request in both)."""
    if baseline not in cells.modes:
        return
    t = len(cells.tenants)
    ids = pc.dictionary_encode(table["request_id"].combine_chunks())      # one dictionary: ids as integers
    id_code = ids.indices.to_numpy(zero_copy_only=False)
    mode_code = np.where(cells.key >= 0, cells.key // t, -1)
    tenant_code = cells.key % t
    base_rows = np.flatnonzero(ok & (mode_code == cells.modes.index(baseline)))
    if not len(base_rows):
        return
    base_at = np.full(len(ids.dictionary), -1, dtype=np.int64)
    base_at[id_code[base_rows]] = base_rows
    values = {c: floats(table[c]) for c in SPEEDUPS.values()}
    for m, mode in enumerate(cells.modes):
        if mode == baseline:
            continue
        mine = np.flatnonzero(ok & (mode_code == m))
        at = base_at[id_code[mine]]
        mine, at = mine[at >= 0], at[at >= 0]
        groups = [(ALL, slice(None))] + [(name, tenant_code[mine] == j) for j, name in enumerate(cells.tenants)]
        pairs = {name: (values[column][at], values[column][mine]) for name, column in SPEEDUPS.items()}
        for tenant_name, rows_in in groups:
            ratios = paired_speedups_ci([(old[rows_in], new[rows_in]) for old, new in pairs.values()])
            for name, r in zip(pairs, ratios, strict=True):
                if r is not None:
                    _add(rows, (mode, tenant_name), name, "geomean", r.value, r.low, r.high)
                    _add(rows, (mode, tenant_name), name, "pairs", r.pairs)


def _gpu_rows(rows: Rows, table: pa.Table, cells: Cells, ok: np.ndarray, gpu: pa.Table,
              windows: dict[str, tuple[int, int] | None]) -> None:
    """Each mode's GPU rows over the window its output tokens per second are of: its steady
    window where it has one long enough for two samples of each GPU, else its makespan (from the
    first sent request's scheduled time to the last token, as `_time_rows` has it)."""
    t = len(cells.tenants)
    done_all, sent_all = table["last_token_ns"], table["sent_ns"]
    for m, mode in enumerate(cells.modes):
        mine = cells.order[cells.bounds[m * t]:cells.bounds[m * t + t]]
        if not len(mine):
            continue
        done = gather(done_all, mine, lambda c: pc.fill_null(c, -1).to_numpy()).astype(np.int64)
        sent = gather(sent_all, mine, lambda c: pc.fill_null(c, -1).to_numpy()).astype(np.int64)
        scheduled = gather(table["scheduled_ns"], mine, lambda c: c.to_numpy()).astype(np.int64)
        tokens = gather(table["completion_tokens"], mine, lambda c: pc.fill_null(c, 0).to_numpy()).astype(np.float64)
        ttft = gather(table["ttft_ms"], mine, lambda c: pc.fill_null(c, 0).to_numpy()).astype(np.float64)
        first = sent + (ttft * 1e6).astype(np.int64)
        good = ok[mine] & (done > 0)
        if not good.any() or not (sent > 0).any():
            continue
        makespan = (int(scheduled[sent > 0].min()), int(done[good].max()))   # as `_time_rows` has it
        found: list = []
        for window, kind in ((windows.get(mode), "steady"), (makespan, "makespan")):
            if window is not None:   # a steady window too short for two samples of each GPU: the makespan
                found = gpu_rows(gpu, mode, window, kind, first[good], done[good], tokens[good])
                if any(metric == "gpu_energy_j" for metric, *_ in found):
                    break
        if any(metric == "energy_per_output_token_j" and stat == "steady" for metric, stat, *_ in found):
            # the makespan's figure too, so a mode can be held against one that had no steady window
            found += [r for r in gpu_rows(gpu, mode, makespan, "makespan", first[good], done[good], tokens[good])
                      if r[0] == "energy_per_output_token_j"]
        for metric, statistic, value, low, high in found:
            _add(rows, (mode, ALL), metric, statistic, value, low, high)


MEMORY = ("weights_gb_per_gpu", "proposer_weights_gb_per_gpu", "kv_cache_gb_per_gpu", "kv_capacity_tokens")


def long_summary(table: pa.Table, run_id: str, modes: list[str], baseline: str = "baseline",
                 server: dict[str, SpecDecodeStats | None] | None = None,
                 memory: dict[str, dict | None] | None = None,
                 client_limited: dict[str, bool | None] | None = None,
                 chunks_of: Callable[[str], pa.Table] | None = None,
                 gpu: pa.Table | None = None) -> pa.Table:
    """The summary of one run's records (joined with their SLO targets when it has them). The
    per-chunk statistics need the list columns; a table read without them has none. `memory`:
    per mode, its first replica's memory as the manifest holds it (cluster.memory, statistic
    `startup`); `client_limited`: per mode, the client's verdict on itself (1 when its own delay
    is in the latencies, statistic `verdict`). `chunks_of(mode)`: that mode's list columns (with
    mode, tenant, status), read when the table was read without them, so memory holds one mode's
    chunks at a time."""
    cells = cells_of(table, modes)
    ok = pc.equal(table["status"], OK).to_numpy(zero_copy_only=False)
    rows: Rows = {}
    windows = _request_rows(rows, table, cells, ok)
    if "spec_steps" in table.column_names:
        _request_acceptance_rows(rows, table, cells, ok)
    if all(c in table.column_names for c in LIST_COLUMNS):
        _chunk_rows(rows, table, cells, ok)
    elif chunks_of is not None:
        for mode in modes:
            mine = chunks_of(mode)
            if mine.num_rows:
                _chunk_rows(rows, mine, cells_of(mine, [mode]), pc.equal(mine["status"], OK).to_numpy(
                    zero_copy_only=False))
    _speedup_rows(rows, table, cells, ok, baseline)
    if gpu is not None:
        _gpu_rows(rows, table, cells, ok, gpu, windows)
    for mode in modes:
        spec = (server or {}).get(mode)
        if spec is not None:
            _add(rows, (mode, ALL), "acceptance_rate", "server", spec.acceptance_rate)
            _add(rows, (mode, ALL), "mean_acceptance_length", "server", spec.mean_acceptance_length)
            for i, share in enumerate(spec.per_position):
                _add(rows, (mode, ALL), "acceptance_at_position", f"pos{i + 1}", share)
        limited = (client_limited or {}).get(mode)
        if limited is not None:
            _add(rows, (mode, ALL), "client_limited", "verdict", float(limited))
        held = (memory or {}).get(mode)
        if held:
            for name in MEMORY:
                if held.get(name) is not None:
                    _add(rows, (mode, ALL), name, "startup", held[name])
    out = {f.name: [] for f in LONG_SCHEMA}
    for mode, tenant, _ in cells.cells():
        for metric, statistic, value, low, high in rows.get((mode, tenant), []):
            for name, v in zip(out, (run_id, mode, tenant, metric, statistic, value, low, high), strict=True):
                out[name].append(v)
    return pa.table(out, schema=LONG_SCHEMA)


class SummaryView:
    """Look-ups into a long summary: the one way its views (the console table, report.md) read it."""

    def __init__(self, summary: pa.Table) -> None:
        self.cells: dict[tuple[str, str, str, str], tuple[float, float | None, float | None]] = {}
        for r in summary.to_pylist():
            self.cells[(r["mode"], r["tenant"], r["metric"], r["statistic"])] = (r["value"], r["ci_low"], r["ci_high"])
        self.modes = list(dict.fromkeys(summary["mode"].to_pylist()))
        self.tenants = sorted(set(pc.unique(summary["tenant"]).to_pylist()) - {ALL})

    def get(self, mode: str, metric: str, stat: str, tenant: str = ALL) -> float | None:
        cell = self.cells.get((mode, tenant, metric, stat))
        return None if cell is None or cell[0] is None or math.isnan(cell[0]) else cell[0]

    def too_few(self, mode: str, metric: str, stat: str, tenant: str = ALL) -> bool:
        """A percentile shown without the data to support it: its interval runs past the data on a
        side (NaN there; a summary from before intervals has none and is not marked)."""
        cell = self.cells.get((mode, tenant, metric, stat))
        if cell is None or cell[0] is None or math.isnan(cell[0]):
            return False
        return any(b is not None and math.isnan(b) for b in cell[1:])

    def rate_count(self, mode: str, metric: str, stat: str = "rate", tenant: str = ALL) -> float | None:
        """The completions a rate is of: over the steady window (`rate`) or the makespan; a
        goodput's, those within target; tokens per second share the requests' count."""
        counted = "goodput_req_per_s" if metric == "goodput_req_per_s" else "req_per_s"
        return self.get(mode, counted, "count" if stat == "rate" else "makespan_count", tenant)

    def rate_too_few(self, mode: str, metric: str, stat: str = "rate", tenant: str = ALL) -> bool:
        """A rate shown without the data to support it: of fewer than MIN_RATE_COUNT completions,
        so its 95% interval is wider than +-RATE_RESOLUTION (a summary from before the counts has
        none and is not marked)."""
        return (self.get(mode, metric, stat, tenant) is not None
                and too_few_completions(self.rate_count(mode, metric, stat, tenant)))

    def interval(self, mode: str, metric: str, stat: str, tenant: str = ALL) -> tuple[float | None, float | None]:
        """A statistic's interval, None on a side it does not have (NaN: the data cannot bound it)."""
        cell = self.cells.get((mode, tenant, metric, stat))
        return (None, None) if cell is None else (cell[1], cell[2])

    def ratio(self, mode: str, metric: str, tenant: str = ALL) -> Ratio | None:
        cell = self.cells.get((mode, tenant, metric, "geomean"))
        if cell is None or cell[1] is None:
            return None
        return Ratio(cell[0], cell[1], cell[2], int(self.get(mode, metric, "pairs", tenant) or 0))
