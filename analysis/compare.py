"""Two runs of the same requests, compared: per mode and tenant, how each gated latency percentile
moved from BASE to NEW, paired by request (only requests that succeeded in both count), with a
paired bootstrap 95% interval on the ratio NEW / BASE. A metric regressed when it got worse by
more than the threshold and the interval says it got worse at all (its low end is above 1). A
percentile over fewer pairs than it needs (analysis.stats.supported_count: a p99 368) is neither:
"too few to judge", which fails no gate.

Beside the percentiles, what far fewer pairs do support: for each latency compared, the typical
request's change, the geometric mean over requests of NEW / BASE with its paired bootstrap
interval (`<latency>_per_request`, judged from MIN_BOOTSTRAP_PAIRS pairs). The gate has three
answers (`analysis.gate.CompareGate`): failed when a judged figure regressed, passed when at least one was judged
and none regressed, not judged when no figure could be.

Requests pair only when both runs' traces hold the same request: the same id, tenant, API,
prompt or messages and max_tokens, sent at the same offset (`common_requests`). Every trace
numbers its requests from r000000, so ids alone would pair the prompts of unrelated scenarios."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from analysis.long_summary import ALL
from analysis.reader import read_requests
from analysis.stats import (
    MIN_BOOTSTRAP_PAIRS,
    Ratio,
    floats,
    paired_quantile_ratio_ci,
    paired_speedup_ci,
    supported_count,
)
from contract.manifest import Manifest
from contract.records import OK

COLUMNS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms", "ttft_sched": "ttft_sched_ms",
           "e2e_sched": "e2e_sched_ms"}
DEFAULT_METRICS = ("ttft_p99", "tpot_p99", "e2e_p99")
COMPARE_RESAMPLES = 1000
PER_REQUEST = "per_request"   # the figure name's suffix: the typical request's NEW / BASE


class CompareError(ValueError):
    """The runs cannot be compared (no common mode, no common request, an unknown metric)."""


def parse_metric(text: str) -> tuple[str, float]:
    """`e2e_p99` -> ("e2e_ms", 99.0)."""
    name, _, pct = text.rpartition("_p")
    if name not in COLUMNS or not pct.replace(".", "", 1).isdigit() or not 0 < float(pct) <= 100:
        raise CompareError(f"--metric {text!r}: expected LATENCY_pNN with LATENCY one of {', '.join(COLUMNS)} "
                           "and NN a percentile (e.g. e2e_p99, ttft_p50)")
    return COLUMNS[name], float(pct)


@dataclass(frozen=True)
class Change:
    mode: str
    tenant: str
    metric: str
    base: float
    new: float
    ratio: Ratio            # new / base, paired, with its interval
    needs: int = 0          # pairs the percentile needs to be judged at all (analysis.stats.supported_count)

    @property
    def too_few(self) -> bool:
        return self.ratio.pairs < self.needs

    @property
    def per_request(self) -> bool:
        return self.metric.endswith(PER_REQUEST)

    def verdict(self, max_regression: float) -> str:
        if self.too_few:   # neither a pass nor a fail: the data cannot bound this percentile
            return f"too few to judge ({self.ratio.pairs:,} pairs; needs {self.needs:,})"
        if not self.ratio.significant:
            return "no significant change"
        if self.ratio.low > 1:
            return "regressed" if self.ratio.value > 1 + max_regression else "worse (within threshold)"
        return "better"


# What makes two trace rows the same request (the body it sends and when), and when it is sent
CONTENT = ("tenant", "api", "prompt", "messages", "max_tokens")
SCHEDULE = ("offset_s",)


@dataclass(frozen=True)
class Common:
    """The requests both runs' traces hold, the same in both: their ids, and each trace's size."""

    ids: pa.Array
    base: int
    new: int

    def text(self) -> str:
        n = len(self.ids)
        if n == self.base == self.new:
            return f"paired by request: the same {n:,} requests in both"
        return f"paired by request: the {n:,} requests both traces hold (BASE has {self.base:,}, NEW {self.new:,})"


def read_trace(run_dir: Path) -> pa.Table:
    """A run's trace (a soak's trace/ folder of parts too), the columns that identify a request."""
    path, folder = Path(run_dir) / "trace.parquet", Path(run_dir) / "trace"
    source = path if path.is_file() else folder if folder.is_dir() else None
    if source is None:
        raise CompareError(f"{run_dir}: no trace.parquet, so nothing says which requests it replayed")
    return ds.dataset(source, format="parquet").to_table(columns=["request_id", *CONTENT, *SCHEDULE])


def _fingerprint(t: pa.Table, columns: tuple[str, ...]) -> pa.Array:
    """Per row, one string of `columns`' values (a null written apart from any text)."""
    parts = [pc.fill_null(t[c].cast(pa.string()), "\x00null") for c in columns]
    return pc.binary_join_element_wise(*parts, "\x1f").combine_chunks()


def common_requests(base: pa.Table, new: pa.Table, base_name: str = "BASE", new_name: str = "NEW") -> Common:
    """The requests both traces hold, the same in both (`read_trace`'s tables); CompareError when
    there is none, or when the same requests were sent on different schedules (another rate
    scale: their latencies were measured under different loads)."""
    def keyed(t: pa.Table) -> pa.Table:
        return pa.table({"request_id": t["request_id"], "content": _fingerprint(t, CONTENT),
                         "schedule": _fingerprint(t, SCHEDULE)})

    b, n = keyed(base), keyed(new)
    same = b.join(n.rename_columns(["request_id", "content", "new_schedule"]), ["request_id", "content"],
                  join_type="inner")
    if not same.num_rows:
        raise CompareError(f"{base_name} and {new_name} replayed different traces: no request is the same in both "
                           "(compare runs of the same scenario and seed, or of the same --trace file)")
    on_time = pc.equal(same["schedule"], same["new_schedule"])
    if not pc.all(on_time).as_py():
        raise CompareError(f"{base_name} and {new_name} sent the same requests on different schedules (another "
                           "--rate-scale or --requests): their latencies were measured under different loads")
    return Common(same.sort_by("request_id")["request_id"].combine_chunks(), base.num_rows, new.num_rows)


COMPARED = ["mode", "tenant", "request_id", "status", "ttft_ms", "tpot_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms"]


def read_compared(base_dir: Path, new_dir: Path) -> tuple[Common, pa.Table, pa.Table]:
    """Two run folders' records of the requests both replayed, the same in both (`common_requests`)."""
    for folder in (base_dir, new_dir):
        if not (folder / "requests").is_dir():
            raise CompareError(f"{folder}: not a run folder (no requests/)")
    common = common_requests(read_trace(base_dir), read_trace(new_dir), str(base_dir), str(new_dir))
    keep = pc.field("request_id").isin(common.ids)
    base, new = (read_requests(folder, columns=COMPARED, filter=keep) for folder in (base_dir, new_dir))
    return common, base, new


def _ok(t: pa.Table, mode: str) -> pa.Table:
    return t.filter(pc.and_(pc.equal(t["mode"], mode), pc.equal(t["status"], OK)))


def compare_runs(base: pa.Table, new: pa.Table, metrics: list[str], resamples: int = COMPARE_RESAMPLES) -> list[Change]:
    """Every (mode, tenant, metric) change between the runs' common modes and requests."""
    parsed = [(m, *parse_metric(m)) for m in metrics]
    modes = [m for m in dict.fromkeys(base["mode"].to_pylist()) if m in set(new["mode"].to_pylist())]
    if not modes:
        raise CompareError(f"the runs have no mode in common (BASE: {', '.join(sorted(set(base['mode'].to_pylist())))};"
                           f" NEW: {', '.join(sorted(set(new['mode'].to_pylist())))})")
    out: list[Change] = []
    for mode in modes:
        b, n = _ok(base, mode), _ok(new, mode)
        cols = sorted({c for _, c, _ in parsed})
        joined = b.select(["request_id", "tenant", *cols]).join(
            n.select(["request_id", *cols]).rename_columns(["request_id", *[f"new_{c}" for c in cols]]), "request_id")
        if not joined.num_rows:
            continue
        tenants = joined["tenant"].to_numpy(zero_copy_only=False)
        for tenant in [ALL, *sorted(set(tenants))]:
            rows = np.ones(len(tenants), bool) if tenant == ALL else tenants == tenant
            for latency, col in dict.fromkeys((name.rpartition("_p")[0], col) for name, col, _ in parsed):
                bv, nv = floats(joined[col])[rows], floats(joined[f"new_{col}"])[rows]
                if (typical := per_request_change(mode, tenant, latency, bv, nv, resamples)) is not None:
                    out.append(typical)
            for name, col, q in parsed:
                bv, nv = floats(joined[col])[rows], floats(joined[f"new_{col}"])[rows]
                r = paired_quantile_ratio_ci(bv, nv, q, resamples=resamples)
                if r is not None:
                    keep = np.isfinite(bv) & np.isfinite(nv)
                    out.append(Change(mode, tenant, name, float(np.percentile(bv[keep], q)),
                                      float(np.percentile(nv[keep], q)), r, supported_count(q / 100)))
    if not out:
        raise CompareError("the runs have no request in common that succeeded in both (compare runs of the same "
                           "trace: the same scenario and seed, or the same --trace file)")
    return out


def per_request_change(mode: str, tenant: str, latency: str, base: np.ndarray, new: np.ndarray,
                       resamples: int = COMPARE_RESAMPLES) -> Change | None:
    """The typical request's change in `latency`: the geometric mean over pairs of NEW / BASE, with
    its paired bootstrap interval, and each run's geometric mean (base, new); None with no pair of
    positive values."""
    ratio = paired_speedup_ci(new, base, resamples=resamples)   # its geometric mean of new / base
    if ratio is None:
        return None
    keep = np.isfinite(base) & np.isfinite(new) & (base > 0) & (new > 0)
    return Change(mode, tenant, f"{latency}_{PER_REQUEST}", float(np.exp(np.log(base[keep]).mean())),
                  float(np.exp(np.log(new[keep]).mean())), ratio, MIN_BOOTSTRAP_PAIRS)


def caveats(run_dir: Path, label: str) -> list[str]:
    """What a reader of a comparison must know about one of its runs: that it did not complete
    (interrupted, failed: its records stop short), or that a mode's client was the limit (its
    latencies hold the client's own delay)."""
    try:
        manifest = Manifest.read(run_dir)
    except ValueError:
        return [f"{label} ({run_dir}) has no readable manifest: how it ended is unknown"]
    out = []
    if manifest.status != "completed":
        unsent = {m: n for m, n in manifest.unrecorded.items() if n}
        out.append(f"{label} ({run_dir}) was {manifest.status}" + (f" ({manifest.reason})" if manifest.reason else "")
                   + ": only the requests that succeeded in both runs are compared"
                   + (f"; requests with no record: {unsent}" if unsent else ""))
    for mode, mr in manifest.mode_runs.items():
        if mr.client and mr.client.get("client_limited"):
            out.append(f"{label} {mode} was client-limited ({'; '.join(mr.client.get('reasons') or [])}): its "
                       "latencies include the client's own delay")
    return out
