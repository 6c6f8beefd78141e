"""The answer a run gives, decided once from its long summary: which speculation mode to deploy for
this traffic on this fleet at this load, with its interval and the tenants it does not suit; or
that no mode beats the baseline here; or that the run has too few requests to say, and how many
would. The console, report.md (and so report.html), summary.parquet and the manifest all show this
one `Decision`.

The rule, on the paired E2E speedup over the baseline (geometric mean over the same requests,
with its 95% bootstrap interval; analysis.stats):
- a mode is *better* when its interval lies above 1, *worse* when below, and otherwise *no
  different* when its interval is narrower than +-RESOLUTION, else *unresolved*; a speedup over
  fewer than MIN_BOOTSTRAP_PAIRS pairs has no interval to read, so it is unresolved too (and a
  tenant's keeps no one from the mode);
- a mode whose failed share (analysis.gate's outcomes) is over the baseline's by more than
  MAX_EXTRA_FAILED is left out, whatever its latency;
- deploy the better mode with the highest lower bound (the speedup it is surest of); where a
  tenant's own interval says that mode is worse for it, keep the baseline for that tenant;
- no mode better and one unresolved: not enough data (with the requests that would resolve it,
  the interval narrowing as one over the square root of the pairs); else no mode is better;
- a run whose baseline had no steady window (analysis.steady) says its answer holds for the
  burst it measured, not a sustained load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyarrow as pa

from analysis.cost import cost_clause, measured
from analysis.long_summary import SummaryView
from analysis.stats import MIN_BOOTSTRAP_PAIRS, Ratio
from contract.records import FAILED, OK

BASELINE = "baseline"
RESOLUTION = 0.10          # a speedup interval narrower than +-10% resolves "no different"
MAX_EXTRA_FAILED = 0.01    # a mode failing 1 point more of its requests than the baseline is not deployed
DEPLOY, NONE_BETTER, TOO_FEW = "deploy", "none_better", "too_few"
NONE_MET = "none_met"      # a capacity search: no mode met the SLOs at any rate


@dataclass(frozen=True)
class Decision:
    kind: str                                   # DEPLOY, NONE_BETTER, TOO_FEW (or a capacity's NONE_MET)
    text: str                                   # the one line every view shows
    mode: str | None = None                     # the mode to deploy (DEPLOY)
    speedup: Ratio | None = None                # its E2E speedup over the baseline
    baseline_for: list[str] = field(default_factory=list)   # tenants that keep the baseline

    def record(self) -> dict:
        """As the manifest keeps it."""
        r = self.speedup
        return {"kind": self.kind, "text": self.text, "mode": self.mode, "baseline_for": list(self.baseline_for),
                "speedup": None if r is None else {"value": r.value, "low": r.low, "high": r.high, "pairs": r.pairs}}

    def rows(self, run_id: str) -> list[dict]:
        """As summary.parquet keeps it: metric `decision`, statistic its kind, the speedup as value."""
        r = self.speedup
        return [{"run_id": run_id, "mode": self.mode or BASELINE, "tenant": "all", "metric": "decision",
                 "statistic": self.kind, "value": math.nan if r is None else r.value,
                 "ci_low": None if r is None else r.low, "ci_high": None if r is None else r.high}]


def _failed_share(v: SummaryView, mode: str) -> float:
    ok, failed = v.get(mode, "requests", OK) or 0.0, v.get(mode, "requests", FAILED) or 0.0
    return failed / (ok + failed) if ok + failed else 0.0


def resolved(r: Ratio) -> bool:
    """An interval narrow enough to say "no different" (+-RESOLUTION), drawn from enough pairs."""
    return not r.too_few and (r.high - r.low) / 2 <= RESOLUTION * r.value


def _needed(r: Ratio) -> int:
    """Pairs that would narrow `r`'s interval to +-RESOLUTION (its width falls as 1/sqrt(pairs)),
    and at least the MIN_BOOTSTRAP_PAIRS an interval needs at all."""
    half = (r.high - r.low) / 2
    return max(r.pairs + 1, MIN_BOOTSTRAP_PAIRS, math.ceil(r.pairs * (half / (RESOLUTION * r.value)) ** 2))


def decide_run(summary: pa.Table, offered: float | None = None, stopped: bool = False) -> Decision:
    """The decision of one run (its long summary); `offered`: the load it was run at (req/s);
    `stopped`: it was stopped before its trace ended (then more data is the rest of the run)."""
    v = SummaryView(summary)
    more = "run it to its end" if stopped else "replay more requests: --requests"
    at = f" at {offered:,.2f} req/s offered" if offered and math.isfinite(offered) else ""
    if BASELINE not in v.modes:
        return Decision(TOO_FEW, "no decision: this run has no baseline mode to measure speculation against "
                        "(add --modes baseline,...)")
    if v.modes == [BASELINE]:
        return Decision(TOO_FEW, "no decision: this run replayed only the baseline, so there is no speculation to "
                        "measure (--modes baseline,eagle,...)")
    ratios = {m: r for m in v.modes if m != BASELINE and (r := v.ratio(m, "speedup_e2e")) is not None}
    if not ratios:
        return Decision(TOO_FEW, "not enough data to say: no speculative mode has a request in common with the "
                        f"baseline that succeeded in both ({more})")
    burst = ("" if v.get(BASELINE, "steady_window_s", "length") is not None else
             f"; measured on a burst too short for a steady state, so it holds for that burst, not a sustained load "
             f"({more})")
    base_failed = _failed_share(v, BASELINE)
    failing = [m for m in ratios if _failed_share(v, m) > base_failed + MAX_EXTRA_FAILED]
    judged = {m: r for m, r in ratios.items() if m not in failing}
    left_out = (f"; left out for failing more requests than the baseline: {', '.join(failing)}" if failing else "")
    better = {m: r for m, r in judged.items() if not r.too_few and r.low > 1.0}
    if better:
        mode = max(better, key=lambda m: better[m].low)
        r = better[mode]
        keep = [t for t in v.tenants if (tr := v.ratio(mode, "speedup_e2e", t)) is not None and not tr.too_few
                and tr.high < 1.0]
        text = (f"deploy {mode}{at}: E2E {r.value:.2f}x faster than the baseline [{r.low:.2f}, {r.high:.2f}], "
                f"{r.pairs:,} requests paired")
        if measured(v):
            text += f", {cost_clause(v, mode)}"
        if keep:
            text += "; keep the baseline for " + ", ".join(
                f"{t} ({v.ratio(mode, 'speedup_e2e', t).text()})" for t in keep)
        return Decision(DEPLOY, text + left_out + burst, mode, r, keep)
    unresolved = {m: r for m, r in judged.items() if r.significant is False and not resolved(r)}
    if unresolved:
        needed = max(_needed(r) for r in unresolved.values())
        wide = ", ".join(f"{m} {r.value:.2f}x [{r.low:.2f}, {r.high:.2f}]" for m, r in unresolved.items()
                         if not r.too_few)
        few = ", ".join(f"{m} {r.value:.2f}x of {r.pairs} paired requests" for m, r in unresolved.items() if r.too_few)
        said = "; ".join([*([f"{wide} could be {RESOLUTION:.0%} better or worse than the baseline"] if wide else []),
                          *([f"{few}, too few for an interval (it needs {MIN_BOOTSTRAP_PAIRS})"] if few else [])])
        return Decision(TOO_FEW, f"not enough data to say{at}: {said}; about {needed:,} requests per mode would tell "
                        f"({'run it to its end' if stopped else '--requests'}){left_out}")
    shown = ", ".join(f"{m} {r.text()}" for m, r in judged.items()) or "none judged"
    return Decision(NONE_BETTER, f"no mode is better than the baseline here{at}: {shown}{left_out}{burst}")
