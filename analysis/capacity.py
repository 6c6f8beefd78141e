"""The highest offered rate at which every tenant meets its SLOs, found with as few probes as a
noisy boundary allows: bracket by doubling from a start rate until a probe fails, then bisect
between the last rate that passed and the first that failed until they are within `precision`
of each other. Every rate the bisection decides on (and both ends of the bracket) is probed
`repeats` times and decided by the majority, so one unlucky probe near the boundary cannot flip
the answer. A probe is any function of the rate that says whether the SLOs held: a replay in
production, a fake fleet in the tests, the offline simulator for a plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from analysis.decision import BASELINE, DEPLOY, NONE_BETTER, NONE_MET, TOO_FEW, Decision
from analysis.gate import ProbeVerdict
from analysis.stats import supported_count
from common import files

# capacity.parquet, one row per probe, measured (`loadtest capacity`) or predicted (`plan --capacity`)
J_PER_KWH = 3.6e6
PROBE_SCHEMA = pa.schema([
    pa.field("mode", pa.string()), pa.field("rate", pa.float64()), pa.field("attempt", pa.int32()),
    pa.field("phase", pa.string()), pa.field("passed", pa.bool_()), pa.field("binding", pa.string()),
    pa.field("requests", pa.int64()), pa.field("goodput_over_arrivals_req_per_s", pa.float64()),
    pa.field("error_share", pa.float64()),
    pa.field("folder", pa.string()),   # the probe's run folder (null: the model's, which keeps none)
    # whether its p99s bound the answer (analysis.slo: every tenant met or one missed, on intervals),
    # and its smallest tenant's requests
    pa.field("judged", pa.bool_()), pa.field("fewest_tenant_requests", pa.int64()),
    # the energy of the mode's GPUs per output token over the probe (analysis.gpu; null: not read)
    pa.field("energy_per_output_token_j", pa.float64()),
])


@dataclass(frozen=True)
class Probe:
    rate: float
    passed: bool
    attempt: int          # 0, 1, ... for the repeats at one rate
    phase: str            # "bracket", "confirm" or "bisect"


@dataclass
class Capacity:
    rate: float | None            # the highest rate that passed (None: even `start` failed)
    failed_at: float | None       # the lowest rate that failed (None: none failed up to max_rate)
    probes: list[Probe] = field(default_factory=list)
    reason: str = ""              # why the search stopped

    @property
    def precise(self) -> bool:
        return self.rate is not None and self.failed_at is not None


def _decide(probe: Callable[[float], bool], rate: float, repeats: int, phase: str, log: list[Probe]) -> bool:
    """The majority of `repeats` probes at `rate`, counting those already made there (stopping as
    soon as a majority is reached)."""
    before = [p for p in log if p.rate == rate]
    passed, failed = sum(p.passed for p in before), sum(not p.passed for p in before)
    need = repeats // 2 + 1
    attempt = len(before)
    while passed < need and failed < need:
        ok = bool(probe(rate))
        log.append(Probe(rate, ok, attempt, phase))
        passed, failed, attempt = passed + ok, failed + (not ok), attempt + 1
    return passed >= need


def search_capacity(probe: Callable[[float], bool], start: float, max_rate: float, precision: float,
                    repeats: int = 1, max_probes: int = 200, min_rate: float | None = None) -> Capacity:
    """Bracket by doubling from `start` up to `max_rate` (or, when `start` fails, by halving
    down to `min_rate`, default `start`), then bisect until the bracket is within `precision`
    (relative to its low end). `repeats` (odd) probes decide each rate near the boundary; the
    bracketing probes once per rate and then confirms both ends."""
    floor = start if min_rate is None else min_rate
    if not (0 < floor <= start <= max_rate and 0 < precision < 1 and repeats >= 1 and repeats % 2 == 1):
        raise ValueError("need 0 < min_rate <= start <= max_rate, 0 < precision < 1 and an odd number of repeats")
    log: list[Probe] = []
    low, high = None, None
    rate = start
    while True:                                   # climb (or descend): one probe per rate
        ok = bool(probe(rate))
        log.append(Probe(rate, ok, 0, "bracket"))
        if ok:
            low = rate
            if high is not None or rate >= max_rate:
                break
            rate = min(rate * 2, max_rate)
        else:
            high = rate
            if low is not None or rate / 2 < floor:
                break
            rate /= 2
    # confirm the bracket's ends by majority (a single lucky or unlucky probe must not set it):
    # a failure that the majority overturns becomes the low end, and the climb goes on
    while high is not None and _decide(probe, high, repeats, "confirm", log):
        low, high = high, (min(high * 2, max_rate) if high < max_rate else None)
    while low is not None and not _decide(probe, low, repeats, "confirm", log):
        high, low = low, (low / 2 if low / 2 >= floor else None)
    if low is None:
        return Capacity(None, high, log, f"even {high:.3g} failed its SLOs")
    if high is None:
        return Capacity(low, None, log, f"every rate up to {max_rate:g} met the SLOs")
    while (high - low) / low > precision:
        if len(log) >= max_probes:
            return Capacity(low, high, log, f"stopped after {max_probes} probes")
        mid = (low + high) / 2
        if _decide(probe, mid, repeats, "bisect", log):
            low = mid
        else:
            high = mid
    return Capacity(low, high, log, f"bracket within {precision:.0%}")


def decide_capacity(rows: list[CapacityRow], raise_with: str | None = None,
                    more_with: str = "a longer --probe-duration") -> Decision:
    """A capacity search's decision, from each mode's highest rate within every tenant's SLOs:
    deploy the mode that holds them up to the highest rate when that is above the baseline's (or
    no baseline was searched), with the bracket its search ended in; no mode better when the
    baseline's is the highest; no decision on a tie, on one mode, or when no mode met the SLOs at
    any rate. An answer at the top of the search says so (with `raise_with`, the option that
    searches higher); one reached on probes whose p99s too few requests support says how many
    (`CapacityRow.unjudged`), and what would give them more (`more_with`)."""
    found = {r.mode: r.found for r in rows if r.found is not None and r.found.rate is not None}
    if not found:
        return Decision(NONE_MET, "no mode met every tenant's SLOs at any rate probed (lower --start-rate, or "
                        "loosen the targets)" if raise_with else "no mode met every tenant's SLOs at any rate probed")
    best_rate = max(f.rate or 0.0 for f in found.values())
    best = [m for m, f in found.items() if f.rate == best_rate]
    caveat = _few(rows, more_with)

    def held(m: str) -> str:
        f = found[m]
        return (f"{m} {f.rate:,.2f} req/s" + (f" (failed at {f.failed_at:,.2f})" if f.failed_at is not None
                                              else " (the top of its search)"))
    others = ", ".join(held(m) for m in found if m not in best)
    if len(best) > 1:
        return Decision(TOO_FEW, f"no choice between {', '.join(best)}: they met every tenant's SLOs up to "
                        f"{best_rate:,.2f} req/s alike (a finer --precision or more --repeats may separate them)"
                        + caveat)
    mode = best[0]
    top = found[mode].failed_at is None
    higher = f": raise {raise_with} to find its limit" if raise_with else ""
    at_top = f", the top of its search{higher}" if top else f" (it failed at {found[mode].failed_at:,.2f})"
    if len(rows) == 1:
        return Decision(TOO_FEW, f"no decision: {mode} is the only mode searched (up to {best_rate:,.2f} req/s"
                        f"{at_top}); give --modes to choose between modes" + caveat)
    if mode == BASELINE:
        return Decision(NONE_BETTER, f"no mode is better than the baseline here: it met every tenant's SLOs up to "
                        f"{best_rate:,.2f} req/s offered{at_top}, " + (others or "no other mode at any rate")
                        + caveat)
    return Decision(DEPLOY, f"deploy {mode} up to {best_rate:,.2f} req/s offered: every tenant within its SLOs"
                    f"{at_top}; " + (others or "no other mode met them at any rate") + caveat, mode)


def _few(rows: list[CapacityRow], more_with: str) -> str:
    """The probes that decided on p99s too few requests support, said once (empty: none)."""
    unjudged = sum(r.unjudged for r in rows)
    probes = sum(len(r.found.probes) for r in rows if r.found is not None)
    fewest = min((r.fewest for r in rows if r.fewest is not None), default=None)
    if not unjudged or fewest is None:
        return ""
    return (f"; {unjudged} of {probes} probes passed or failed on p99s their data cannot bound (a tenant's p99 of "
            f"{fewest:,} requests at fewest; its interval closes from {supported_count(0.99)}), so these rates are "
            f"where the measured p99s held, not where they are known to ({more_with})")


@dataclass(frozen=True)
class CapacityRow:
    """One mode's line of a capacity table: its search (None: not searched or stopped before an
    answer, `why` says which), the goodput at the rate found (None where not measured) and
    what failed just above it."""

    mode: str
    found: Capacity | None
    binding: str = "-"
    goodput_over_arrivals_req_per_s: float | None = None   # requests within every target per second of arrivals
    why: str = "not searched"
    unjudged: int = 0                     # its probes decided on p99s their data cannot bound (analysis.slo)
    fewest: int | None = None             # the fewest requests of a tenant in any of its probes
    joules_per_token: float | None = None   # energy per output token at the rate found (its passing probes')


def capacity_table(rows: list[CapacityRow], gpus: int, with_goodput: bool,
                   raise_with: str | None = None, more_with: str = "a longer --probe-duration",
                   ) -> tuple[list[str], Decision]:
    """The capacity table's lines (header first) and the decision (`decide_capacity`): one
    rendering for the measured search (`loadtest capacity`) and the model's (`plan --capacity`).
    A rate found at the top of the search is shown as `>= rate`; per GPU is over the fleet's
    `gpus` a mode."""
    header = ["mode", "max req/s", "per GPU", *(["goodput req/s (over arrivals)"] if with_goodput else []),
              "binding SLOs", "search"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|" + ("---:|" if with_goodput else "") + "---|---|"]
    for r in rows:
        f = r.found
        if f is None:
            lines.append("| " + " | ".join([r.mode, "-", "-", *(["-"] if with_goodput else []), "-", r.why]) + " |")
            continue
        top = f.rate is not None and f.failed_at is None     # the search's top passed
        above = ">= " if top else ""
        rate = "-" if f.rate is None else f"{above}{f.rate:,.2f}"
        per_gpu = "-" if f.rate is None else f"{above}{f.rate / gpus:,.3f}"
        good = r.goodput_over_arrivals_req_per_s
        goodput = ["-" if good is None else f"{good:,.2f}"] if with_goodput else []
        lines.append("| " + " | ".join([r.mode, rate, per_gpu, *goodput, r.binding or "-",
                                         f"{f.reason} ({len(f.probes)} probes)"]) + " |")
    return lines, decide_capacity(rows, raise_with, more_with)


def probe_row(mode: str, rate: float, attempt: int, verdict: ProbeVerdict, folder: Path | None = None,
              energy: float | None = None) -> dict:
    """One probe as capacity.parquet keeps it (its phase is filled in once the search ends), with
    the energy per output token its GPUs used where they were read."""
    return {"mode": mode, "rate": rate, "attempt": attempt, "phase": "", "passed": verdict.passed,
            "binding": "; ".join(verdict.binding), "requests": verdict.requests,
            "goodput_over_arrivals_req_per_s": verdict.goodput_over_arrivals(rate),
            "error_share": verdict.error_share, "folder": None if folder is None else str(folder),
            "judged": verdict.judged, "fewest_tenant_requests": verdict.fewest, "energy_per_output_token_j": energy}


def with_phases(rows: list[dict], found: Capacity) -> None:
    """Each probe row's phase (bracket, confirm, bisect), in the order the search made them."""
    for row, p in zip(rows, found.probes, strict=False):
        row["phase"] = p.phase


def write_probes(rows: list[dict], path: Path) -> None:
    """capacity.parquet: every probe of every mode, in PROBE_SCHEMA."""
    files.write_table(pa.Table.from_pylist(rows, schema=PROBE_SCHEMA), path)


@dataclass
class ModeCapacity:
    found: Capacity | None = None
    probes: list[dict] = field(default_factory=list)   # capacity.parquet's rows (probe_row), in the order probed


def capacity_rows(results: dict[str, ModeCapacity]) -> list[CapacityRow]:
    """Each mode's line of the measured capacity table: its search, the goodput at the rate found
    (the mean of its passing probes there) and what failed just above it."""
    rows = []
    for mode, r in results.items():
        f = r.found
        if f is None:
            why = f"stopped after {len(r.probes)} probes (interrupted?)" if r.probes else "not searched"
            rows.append(CapacityRow(mode, None, why=why))
            continue
        at = [p for p in r.probes if f.rate is not None and p["rate"] == f.rate and p["passed"]]
        above_it = [p for p in r.probes if f.failed_at is not None and p["rate"] == f.failed_at and not p["passed"]]
        rows.append(CapacityRow(mode, f, above_it[0]["binding"] if above_it else "-",
                                sum(p["goodput_over_arrivals_req_per_s"] for p in at) / len(at) if at else None,
                                unjudged=sum(not p["judged"] for p in r.probes),
                                fewest=min((p["fewest_tenant_requests"] for p in r.probes), default=None),
                                joules_per_token=energy_at(r.probes, f)))
    return rows


def energy_at(probes: list[dict], found: Capacity) -> float | None:
    """The energy per output token of the passing probes at the rate found (their mean), None where
    their GPUs were not read."""
    at = [p.get("energy_per_output_token_j") for p in probes
          if found.rate is not None and p["rate"] == found.rate and p["passed"]]
    known = [e for e in at if e is not None and math.isfinite(e)]
    return sum(known) / len(known) if known else None


def capacity_markdown(rows: list[CapacityRow], gpus: int, precision: float, repeats: int,
           probe_s: float, simulated: str | None = None) -> tuple[str, Decision]:
    """report.md's text, headed by where its numbers come from when that is the simulator
    (`simulated`) and by the search's decision, and the decision."""
    table, decision = capacity_table(rows, gpus, with_goodput=True, raise_with="--max-rate")
    return "\n".join([
        "# Capacity: the highest offered rate within every tenant's SLOs (measured)", "",
        *([f"**{simulated}.**", ""] if simulated else []), f"**Decision: {decision.text}**", "",
        f"Bracketed by doubling, then bisected to {precision:.0%}; each rate near the boundary decided by the "
        f"majority of {repeats} probe(s). Per GPU over the fleet's {gpus} GPUs a mode (a draft model shares the "
        "target's). Goodput: requests within every target per second of the probe's arrivals (its rate times the "
        "share within target; a run's goodput is over its steady window), at the rate found. Binding: what failed "
        "just above it.", "", *table, "",
        f"Each probe here is {probe_s:g} s of arrivals at its rate (rate x {probe_s:g} requests); `loadtest plan "
        "--capacity` probes its trace's `--requests` whatever the rate, so its p99s are of other sample sizes and "
        f"of a longer or shorter burst, and its figure can differ: plan with `--requests` near the rate found x "
        f"{probe_s:g} for like with like.", ""]), decision


def plan_capacity_markdown(rows: list[CapacityRow], gpus: int, precision: float, requests: int,
                           probe_s: float) -> str:
    """`loadtest plan --capacity`'s section of report.md: each mode's highest rate within every
    tenant's SLOs in the model, headed by its decision, and why `loadtest capacity` (which probes
    `probe_s` s of arrivals) can find another figure."""
    table, decision = capacity_table(rows, gpus, with_goodput=False, more_with="more --requests")
    return "\n".join([
        "## Capacity: the highest offered rate within every tenant's SLOs", "",
        f"**Capacity decision: {decision.text}**", "",
        f"Bracketed by doubling from 1/16 of the scenario's rate, then bisected to {precision:.0%}; "
        f"per GPU over the fleet's {gpus} GPUs a mode (a draft model shares the target's). Binding: the tenants "
        "that missed just above it.", "", *table, "",
        f"Each probe here is this trace's {requests:,} requests at the probed rate, however long that lasts; "
        f"`loadtest capacity` probes {probe_s:g} s of arrivals instead (rate x {probe_s:g} requests), so at "
        "another rate its p99s are of other sample sizes and of a longer or shorter burst, and its figure can "
        f"differ: for like with like, plan with `--requests` near the rate found x {probe_s:g}.", ""])


@dataclass(frozen=True)
class PeakFleet:
    """What one mode needs to serve a peak load within every SLO, from the capacity its search
    found on a fleet of `replicas` replicas (each on `gpus_per_replica` GPUs), taken to add up
    replica by replica (a balancer spreading the load evenly)."""

    mode: str
    per_replica: float | None    # req/s one replica held (None: no rate met the SLOs)
    replicas: int | None         # replicas the peak needs (None: unknown)
    gpus: int | None
    at_most: bool = False        # the capacity was the top of its search: the peak needs at most this many
    joules_per_token: float | None = None   # at the capacity found (CapacityRow.joules_per_token)

    @property
    def kwh_per_million_tokens(self) -> float | None:
        return None if self.joules_per_token is None else self.joules_per_token * 1e6 / J_PER_KWH


def peak_fleets(rows: list[CapacityRow], peak: float, replicas: int, gpus_per_replica: int) -> list[PeakFleet]:
    """Per mode, the replicas and GPUs that serve `peak` req/s: the peak over the rate one replica
    held (its search's rate over the `replicas` it ran on), rounded up."""
    out = []
    for r in rows:
        f = r.found
        if f is None or f.rate is None or f.rate <= 0:
            out.append(PeakFleet(r.mode, None, None, None))
            continue
        per_replica = f.rate / replicas
        if not math.isfinite(peak / per_replica):   # a replica that held next to nothing: no count to give
            out.append(PeakFleet(r.mode, per_replica, None, None))
            continue
        needed = max(1, math.ceil(peak / per_replica - 1e-9))
        out.append(PeakFleet(r.mode, per_replica, needed, needed * gpus_per_replica, at_most=f.failed_at is None,
                             joules_per_token=r.joules_per_token))
    return out


def peak_choice(fleets: list[PeakFleet], peak: float) -> str:
    """The mode to choose at the peak, first: the fewest GPUs that hold every SLO, then what each
    other mode needs; a tie or an upper bound in the way is said, not decided."""
    known = [f for f in fleets if f.gpus is not None]
    if not known:
        return (f"at a peak of {peak:,.2f} req/s: no mode met every tenant's SLOs at any rate probed, so no fleet "
                "holds it")

    def needs(f: PeakFleet) -> str:
        return f"{f.mode} {'at most ' if f.at_most else ''}{f.gpus:,} GPUs ({f.replicas:,} replicas)"

    fewest = min(f.gpus for f in known if f.gpus is not None)
    best = [f for f in known if f.gpus == fewest]
    others = "; ".join(needs(f) for f in known if f not in best)
    rest = f"; {others}" if others else ""
    if any(f.mode == BASELINE for f in best):   # no mode saves a GPU over the baseline at this peak
        tied = [f.mode for f in best if f.mode != BASELINE]
        return (f"at a peak of {peak:,.2f} req/s no mode needs fewer GPUs than the baseline: {BASELINE} "
                f"{fewest:,} GPUs" + (f", as {', '.join(tied)}" if tied else "") + rest)
    if len(best) > 1:
        return (f"at a peak of {peak:,.2f} req/s: no choice between {', '.join(f.mode for f in best)}, "
                f"{fewest:,} GPUs each{rest}")
    f = best[0]
    beaten = [o for o in known if o is not f and o.at_most]   # another mode's count is only an upper bound
    caveat = (f" ({', '.join(o.mode for o in beaten)} reached the top of its search: it may need fewer; raise the "
              "search's top)") if beaten else ""
    return f"at a peak of {peak:,.2f} req/s choose {f.mode}: {needs(f)}{rest}{caveat}"


def peak_markdown(fleets: list[PeakFleet], peak: float, replicas: int, gpus_per_replica: int) -> str:
    """report.md's section: the fleet each mode needs at the peak, headed by the choice."""
    lines = [f"## The fleet for a peak of {peak:,.2f} req/s", "", f"**{peak_choice(fleets, peak)}.**", "",
             f"Per mode: the rate one replica held within every SLO (the capacity found on {replicas} replica(s) a "
             f"mode, over {replicas}), the replicas the peak needs (the peak over it, rounded up) and their GPUs "
             f"({gpus_per_replica} a replica). Replicas are taken to add up evenly behind a balancer; a capacity at "
             "the top of its search makes the count an upper bound (`at most`). Energy: the mode's GPUs per "
             "million output tokens at the rate found (its passing probes' energy per output token); at the peak "
             "each replica runs at or under that rate, its GPUs idle a little more, so the figure there is at "
             "least this; `not measured` where the GPUs were not read.", "",
             "| mode | req/s per replica | replicas | GPUs | kWh per million output tokens |",
             "|---|---:|---:|---:|---:|"]
    for f in fleets:
        kwh = f.kwh_per_million_tokens
        energy = "not measured" if kwh is None else f"{kwh:,.3g}"
        if f.per_replica is None or f.replicas is None or f.gpus is None:
            held = "-" if f.per_replica is None else f"{f.per_replica:,.2f}"
            lines.append(f"| {f.mode} | {held} | - | - | {energy} |")
            continue
        bound = "<= " if f.at_most else ""
        lines.append(f"| {f.mode} | {'>= ' if f.at_most else ''}{f.per_replica:,.2f} | {bound}{f.replicas:,} | "
                     f"{bound}{f.gpus:,} | {energy} |")
    return "\n".join(lines) + "\n"
