"""What each mode costs, as every view shows it (the console, report.md and so report.html, and the
decision's clause): energy per output token with its interval and its ratio to the baseline's,
output tokens per joule, power and utilisation per GPU, memory, XID errors, and where each figure
came from; "not measured" where the GPUs were not read (analysis.gpu has the figures' rules).

The ratio of two modes' energy per token takes its interval from theirs, their relative
half-widths added in quadrature (the delta method for a ratio of independent means), where both
have one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from analysis.long_summary import SummaryView

BASELINE = "baseline"
NOT_MEASURED = "not measured"
MIB_PER_GIB = 1024


@dataclass(frozen=True)
class PerToken:
    """Joules per output token over a window (`steady` or `makespan`), with its 95% interval."""

    joules: float
    low: float | None
    high: float | None
    window: str

    def text(self) -> str:
        shown = f"{self.joules:#.3g}"
        if self.low is not None and self.high is not None:
            return f"{shown} [{self.low:#.3g}, {self.high:#.3g}]"
        return f"{shown} ({self.window})" if self.window != "steady" else shown


def energy_of_folder(run_dir: Path, mode: str) -> float | None:
    """The energy per output token a run (or level, or probe) folder's summary holds for `mode`."""
    path = run_dir / "summary.parquet"
    if not path.is_file():
        return None
    found = per_token(SummaryView(pq.read_table(path)), mode)
    return None if found is None else found.joules


def per_token(v: SummaryView, mode: str, windows: tuple[str, ...] = ("steady", "makespan")) -> PerToken | None:
    """A mode's energy per output token over the first of `windows` it has one for."""
    for window in windows:
        value = v.get(mode, "energy_per_output_token_j", window)
        if value is not None:
            low, high = v.interval(mode, "energy_per_output_token_j", window)
            ok = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
            return PerToken(value, low if ok else None, high if ok else None, window)
    return None


@dataclass(frozen=True)
class EnergyRatio:
    value: float
    low: float | None
    high: float | None
    window: str = "steady"

    def text(self) -> str:
        interval = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None and self.high is not None else ""
        over = "" if self.window == "steady" else f" (over the {self.window}s)"
        return f"{self.value:.2f}x the baseline's energy per output token{interval}{over}"


def energy_ratio(v: SummaryView, mode: str, base: str = BASELINE) -> EnergyRatio | None:
    """`mode`'s energy per output token over `base`'s, when both were measured over the same kind
    of window."""
    a, b = per_token(v, mode), per_token(v, base)
    if a is not None and b is not None and a.window != b.window:   # one had no steady window: both makespans
        a, b = per_token(v, mode, ("makespan",)), per_token(v, base, ("makespan",))
    if a is None or b is None or a.joules <= 0 or b.joules <= 0:
        return None
    value = a.joules / b.joules
    if None in (a.low, a.high, b.low, b.high):
        return EnergyRatio(value, None, None, a.window)
    rel = math.hypot((a.high - a.low) / 2 / a.joules, (b.high - b.low) / 2 / b.joules)
    return EnergyRatio(value, value * (1 - rel), value * (1 + rel), a.window)


def cost_clause(v: SummaryView, mode: str) -> str:
    """What deploying `mode` costs, for the decision: its energy per output token against the
    baseline's and the proposer's weights per GPU."""
    ratio = energy_ratio(v, mode)
    a, b = per_token(v, mode), per_token(v, BASELINE)
    if ratio is not None:
        said = ratio.text()
    elif a is not None and b is not None and a.window != b.window:
        said = f"energy per output token not comparable (over its {a.window} window, the baseline's {b.window})"
    else:
        said = "energy per output token not measured"
    proposer = v.get(mode, "proposer_weights_gb_per_gpu", "startup")
    weights, base = v.get(mode, "weights_gb_per_gpu", "startup"), v.get(BASELINE, "weights_gb_per_gpu", "startup")
    if proposer:
        said += f", +{proposer:.2f} GB of proposer weights per GPU"
    elif weights is not None and base is not None and weights > base:   # vLLM's logs: the weights, not apart
        said += f", +{weights - base:.2f} GB of weights per GPU"
    return said


def _gib(mib: float | None) -> str:
    return NOT_MEASURED if mib is None else f"{mib / MIB_PER_GIB:.1f}"


def _num(value: float | None, fmt: str) -> str:
    return NOT_MEASURED if value is None else format(value, fmt)


def cost_rows(v: SummaryView) -> tuple[list[str], list[list[str]]]:
    """The cost table: a header and a row per mode."""
    header = ["mode", "J per output token (95% CI)", "vs baseline", "output tokens per J", "W per GPU mean / peak",
              "util %", "GiB used peak", "GiB free least", "GPUs", "XID", "from (samples)"]
    rows = []
    for m in v.modes:
        pt, ratio = per_token(v, m), energy_ratio(v, m)
        source = next((s for (mode, _, metric, s) in v.cells if mode == m and metric == "gpu_samples"), None)
        xid = v.get(m, "gpu_xid_errors", "gpus")
        mean, peak = v.get(m, "gpu_power_w", "mean"), v.get(m, "gpu_power_w", "peak")
        rows.append([m, pt.text() if pt else NOT_MEASURED,
                     "-" if m == BASELINE else (f"{ratio.value:.2f}x" if ratio else NOT_MEASURED),
                     f"{1 / pt.joules:.3g}" if pt and pt.joules > 0 else NOT_MEASURED,
                     NOT_MEASURED if mean is None else f"{mean:.0f} / {_num(peak, '.0f')}",
                     _num(v.get(m, "gpu_util_pct", "mean"), ".0f"),
                     _gib(v.get(m, "gpu_memory_used_mib", "peak")), _gib(v.get(m, "gpu_memory_free_mib", "min")),
                     _num(v.get(m, "gpus", "count"), ".0f"),
                     "-" if xid is None else ("none" if xid == 0 else f"{xid:.0f} GPUs"),
                     "-" if source is None else f"{source} ({int(v.get(m, 'gpu_samples', source) or 0):,})"])
    return header, rows


def measured(v: SummaryView) -> bool:
    """Whether any mode's GPUs were read or were to be read (a run on vLLM's CPU build has none)."""
    return any(metric in ("gpus", "gpu_telemetry") for (_, _, metric, _) in v.cells)


def xid_findings(v: SummaryView) -> list[str]:
    """A line per mode whose GPUs reported an XID error: a finding, whatever the speed."""
    return [f"{m}: {v.get(m, 'gpu_xid_errors', 'gpus'):.0f} GPU(s) reported an XID error during the replay "
            "(see the gpu_metrics rows with xid > 0, and the node's kernel log)"
            for m in v.modes if (v.get(m, "gpu_xid_errors", "gpus") or 0) > 0]
