"""A sweep's curves: the long summaries of its levels side by side (sweep.parquet: the long
format plus `level` and `offered_req_per_s`), and the report's view of them, per mode against
offered load: throughput, TPOT and TTFT, the speedup over the baseline with its interval,
whether the level saturated, and per mode and tenant where the speedup falls to 1.0."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from analysis.cells import ALL
from analysis.crossover import crossover
from analysis.decision import BASELINE, DEPLOY, NONE_BETTER, RESOLUTION, TOO_FEW, Decision, resolved
from analysis.long_summary import LONG_SCHEMA
from analysis.stats import Ratio, too_few_completions
from analysis.summary import TOO_FEW as FEW_MARK  # the percentiles' mark (decision's TOO_FEW is a kind)
from analysis.summary import rate_rule
from common.times import ms_text

LEVEL_SCHEMA = pa.schema([*LONG_SCHEMA, pa.field("level", pa.string()), pa.field("offered_req_per_s", pa.float64()),
                          pa.field("concurrency", pa.int64())])   # closed loop: requests in flight (else null)
# A level saturated when its completions fall this far behind what was offered (over the steady
# window, or while the requests held at the last arrival end): the fleet no longer keeps up, and
# higher levels only grow the queue ...
SATURATED_BELOW = 0.9
# ... by more than this many square roots of the completions counted (a Poisson count's noise) ...
NOISE_SIGMAS = 3.0
# ... judged on at least this many completions (fewer: too few requests to judge).
MIN_BACKLOG = 5
# A closed-loop level saturated when its completions per second grew by less than a tenth of
# what its requests in flight grew by over the level below (4x as many in flight, under 30% more).
CLOSED_GAIN = 0.1


def with_level(long: pa.Table, level: str, offered_req_per_s: float, concurrency: int | None = None) -> pa.Table:
    n = long.num_rows
    return long.append_column("level", pa.array([level] * n, pa.string())).append_column(
        "offered_req_per_s", pa.array([offered_req_per_s] * n, pa.float64())).append_column(
        "concurrency", pa.array([concurrency] * n, pa.int64()))


def _cells(sweep: pa.Table) -> dict[tuple, dict]:
    return {(r["level"], r["mode"], r["tenant"], r["metric"], r["statistic"]): r for r in sweep.to_pylist()}


def _value(cells: dict, key: tuple) -> float | None:
    r = cells.get(key)
    return None if r is None or r["value"] is None or math.isnan(r["value"]) else r["value"]


def _ratio(cells: dict, level: str, mode: str, tenant: str) -> Ratio | None:
    r = cells.get((level, mode, tenant, "speedup_e2e", "geomean"))
    if r is None or r["ci_low"] is None:
        return None
    return Ratio(r["value"], r["ci_low"], r["ci_high"], int(_value(cells, (level, mode, tenant, "speedup_e2e",
                                                                            "pairs")) or 0))


def energy_text(cells: dict, level: str, mode: str) -> str:
    """A level's energy per output token (J, all the mode's GPUs, analysis.gpu) with its 95% interval,
    the makespan's said; `-` where its GPUs were not read."""
    for window in ("steady", "makespan"):
        r = cells.get((level, mode, ALL, "energy_per_output_token_j", window))
        if r is not None and r["value"] is not None and not math.isnan(r["value"]):
            low, high = r["ci_low"], r["ci_high"]
            interval = (f" [{low:#.3g}, {high:#.3g}]" if low is not None and high is not None
                        and not math.isnan(low) and not math.isnan(high) else "")
            return f"{r['value']:#.3g}{interval}" + (" (makespan)" if window == "makespan" else "")
    return "-"


def saturated(cells: dict, level: str, mode: str, offered: float) -> bool | None:
    """Open loop: the fleet fell behind (`behind`): its completions over the steady window, or,
    where the arrivals were too short for one (or a growing queue left none), the requests it held
    at the last arrival ending, until half of them had, under SATURATED_BELOW of the offered rate
    by more than their count's noise. Without a steady window a level that did not fall behind,
    or had fewer than MIN_BACKLOG such completions, has too few requests to judge (None)."""
    done = _value(cells, (level, mode, ALL, "req_per_s", "rate"))
    window = _value(cells, (level, mode, ALL, "steady_window_s", "length"))
    if done is not None and window:   # against what was offered and could succeed: refusals are no backlog
        counts = {s: _value(cells, (level, mode, ALL, "requests", s)) or 0 for s in ("ok", "error", "timeout")}
        sent = sum(counts.values())
        return behind(done * window, window, offered * ((counts["ok"] + counts["timeout"]) / sent if sent else 1.0))
    drained = _value(cells, (level, mode, ALL, "drain_completions", "count"))
    rate = _value(cells, (level, mode, ALL, "drain_req_per_s", "rate"))
    if drained is None or rate is None or drained < MIN_BACKLOG:
        return None
    # a fleet that keeps up ends the requests it holds at the last arrival about as fast as they
    # came (each one a request's life after it was sent); a saturated one at its capacity. That
    # can show a fleet fell behind; that it kept up needs the steady window the level lacked.
    return True if behind(drained, drained / rate, offered) else None


def behind(completions: float, seconds: float, offered: float) -> bool:
    """`completions` in `seconds` fell short of SATURATED_BELOW of `offered` req/s, by more than
    their count's noise (a Poisson count: NOISE_SIGMAS square roots)."""
    return completions + NOISE_SIGMAS * math.sqrt(completions) < SATURATED_BELOW * offered * seconds


def steady_or_makespan(cells: dict, key: tuple[str, str, str, str]) -> tuple[float | None, str]:
    """(level, mode, tenant, metric)'s rate over the steady window (`rate`), or where the level
    had none over its makespan (`makespan`: first send to last completion); and which it is."""
    v = _value(cells, (*key, "rate"))
    return (v, "rate") if v is not None else (_value(cells, (*key, "makespan")), "makespan")


def completed_rate(cells: dict, level: str, mode: str) -> float | None:
    """Completions per second over the steady window, else over the level's makespan."""
    return steady_or_makespan(cells, (level, mode, ALL, "req_per_s"))[0]


def saturation(sweep: pa.Table) -> dict[tuple[str, str], bool | None]:
    """Per (level, mode): saturated or not (None: too few requests to judge). Open loop by
    `saturated`; closed loop (a level's
    `concurrency`) when its completions per second grew by under CLOSED_GAIN of the growth in
    flight over the level below: the fleet's throughput has stopped following its load."""
    cells = _cells(sweep)
    out = {}
    for mode in dict.fromkeys(sweep["mode"].to_pylist()):
        below: tuple[float, float] | None = None     # the level below: (in flight, done per second)
        for level, x, closed in levels_of(sweep):
            if not closed:
                out[level, mode] = saturated(cells, level, mode, x)
                continue
            done = completed_rate(cells, level, mode)
            out[level, mode] = (done is not None and below is not None
                                and done / below[1] - 1 < CLOSED_GAIN * (x / below[0] - 1))
            below = (x, done) if done is not None else below
    return out


def levels_of(sweep: pa.Table) -> list[tuple[str, float, bool]]:
    """(level, load, closed) from the lowest load up: the load is the offered req/s, or for a
    closed-loop level the requests kept in flight."""
    rows = sweep.select(["level", "offered_req_per_s", "concurrency"]).to_pylist()
    pairs = {(r["level"], float(r["concurrency"]) if r["concurrency"] is not None else r["offered_req_per_s"],
              r["concurrency"] is not None) for r in rows}
    return sorted(pairs, key=lambda p: p[1])


def load_unit(sweep: pa.Table) -> str:
    closed = any(c for _, _, c in levels_of(sweep))
    return "in flight" if closed else "req/s offered"


def crossovers(sweep: pa.Table) -> dict[tuple[str, str], str]:
    """Per (mode, tenant): where its E2E speedup over the baseline falls to 1.0, against the
    load (offered req/s, or requests in flight), as text (analysis.crossover)."""
    cells = _cells(sweep)
    levels = levels_of(sweep)
    unit = " in flight" if load_unit(sweep) == "in flight" else " req/s"
    out = {}
    for mode in dict.fromkeys(sweep["mode"].to_pylist()):
        for tenant in dict.fromkeys(pc.unique(sweep["tenant"]).to_pylist()):
            ratios = [_ratio(cells, level, mode, tenant) for level, _, _ in levels]
            pairs = [(x, r) for (_, x, _), r in zip(levels, ratios, strict=True) if r is not None]
            if len(pairs) >= 2:
                out[mode, tenant] = crossover([p[0] for p in pairs], [p[1] for p in pairs]).text(unit)
    return out


def client_behind(cells: dict, level: str, mode: str) -> str | None:
    """Why `mode`'s client fell behind at `level` (its own verdict, analysis.long_summary's
    `client_limited`), or None where it kept up or was not judged."""
    if not _value(cells, (level, mode, ALL, "client_limited", "verdict")):
        return None
    late = _value(cells, (level, mode, ALL, "lateness_ms", "p99"))
    return f"{mode}'s client fell behind" + (f" (send lateness p99 {ms_text(late)} ms)" if late is not None else "")


@dataclass(frozen=True)
class LevelVerdict:
    """What one sweep level says of one mode against the baseline: whether it pays (its E2E
    speedup's interval above 1.0), whether the fleet kept up (`saturated`: None when the level had
    too few requests to judge), and why the level cannot hold a ceiling at all (`unjudged`: the
    saturation was not judged, or the client of the mode or of the baseline fell behind, so the
    level measured the client, not the fleet)."""

    level: str
    load: float
    speedup: Ratio | None
    saturated: bool | None
    unjudged: str | None

    @property
    def pays(self) -> bool:
        r = self.speedup
        return r is not None and not r.too_few and r.low > 1.0 and self.saturated is not True

    def why_not(self) -> str:
        """Why this level does not extend a ceiling, as its clause of the decision."""
        if self.saturated is True:
            return "it saturated"
        if self.speedup is None:
            return "it was not replayed"
        if not self.pays:
            return f"its speedup is {self.speedup.text()}"
        return f"not judged: {self.unjudged}"


def level_verdicts(sweep: pa.Table, modes: list[str]) -> dict[str, list[LevelVerdict]]:
    """Each of `modes`' verdicts at every level, from the lowest load up: the one reading of a
    sweep's levels that its decision, and a plan's, are made from."""
    cells, flags, levels = _cells(sweep), saturation(sweep), levels_of(sweep)
    out: dict[str, list[LevelVerdict]] = {}
    for mode in modes:
        for level, load, _ in levels:
            sat = flags.get((level, mode))
            behind_ = [w for m in (BASELINE, mode) if (w := client_behind(cells, level, m))]
            unjudged = ("; ".join(behind_) if behind_ else
                        "too few requests to judge whether the fleet kept up" if sat is None else None)
            out.setdefault(mode, []).append(LevelVerdict(level, load, _ratio(cells, level, mode, ALL), sat, unjudged))
    return out


def ceiling(verdicts: list[LevelVerdict]) -> tuple[LevelVerdict | None, LevelVerdict | None]:
    """The highest level up to which the mode pays at every level and every level was judged
    (None: not even the lowest), and the level above it that ended the climb (None: none did)."""
    top = None
    for v in verdicts:
        if not v.pays or v.unjudged:
            return top, v
        top = v
    return top, None


def decide_sweep(sweep: pa.Table) -> Decision:
    """A sweep's decision (and a plan's): the mode whose E2E speedup over the baseline lies above
    1.0 at every level from the lowest up, each level judged (the fleet kept up, and neither
    client fell behind: `level_verdicts`), deployed up to the highest such level, and what
    ended the climb above it; the mode paying up to the highest load wins, then the surest
    speedup there. A level that was not judged names no ceiling: where the lowest one pays but
    was not judged, there is not enough data to say. None paying at the lowest level: no mode is
    better, or, where an interval holding 1.0 is wider than +-RESOLUTION, not enough data
    (analysis.decision's rule)."""
    unit = load_unit(sweep)
    modes = [m for m in dict.fromkeys(sweep["mode"].to_pylist()) if m != BASELINE]
    if BASELINE not in set(sweep["mode"].to_pylist()):
        return Decision(TOO_FEW, "no decision: this sweep has no baseline mode to measure speculation against")
    climbs = {m: ceiling(verdicts) for m, verdicts in level_verdicts(sweep, modes).items()}
    pays = {m: top for m, (top, _) in climbs.items() if top is not None}
    if not pays:
        levels = levels_of(sweep)
        lowest = levels[0][0] if levels else ""
        firsts = [(m, stop) for m, (_, stop) in climbs.items() if stop is not None]
        unjudged = [f"{m} {v.speedup.text()}, but {v.unjudged}" for m, v in firsts if v.pays and v.unjudged]
        if unjudged:
            return Decision(TOO_FEW, f"not enough data to say: at the lowest level ({lowest}) "
                            f"{'; '.join(unjudged)} (--requests, --level-duration, or more Locust workers)")
        wide = [f"{m} {v.speedup.text()}" for m, v in firsts if v.speedup is not None
                and v.speedup.significant is False and not resolved(v.speedup)]
        if wide:
            return Decision(TOO_FEW, f"not enough data to say: at the lowest level ({lowest}) {', '.join(wide)} could "
                            f"be {RESOLUTION:.0%} better or worse than the baseline (--requests, --level-duration)")
        return Decision(NONE_BETTER, f"no mode is better than the baseline at any level swept (from {lowest})")
    mode = max(pays, key=lambda m: (pays[m].load, pays[m].speedup.low))
    top, stop = climbs[mode]
    r = top.speedup
    shown = f"{top.load:,.0f} in flight" if unit == "in flight" else f"{top.load:,.2f} req/s offered"
    text = (f"deploy {mode} up to {shown} ({top.level}: E2E {r.value:.2f}x faster than the baseline "
            f"[{r.low:.2f}, {r.high:.2f}])")
    text += (", the highest level swept: it may pay higher still" if stop is None
             else f"; at {stop.level} {stop.why_not()}")
    return Decision(DEPLOY, text, mode, r)


def cost_per_million(cells: dict, level: str, mode: str, gpus: int, gpu_hour_cost: float) -> str:
    """What a million output tokens cost at a level: `gpus` GPU-hours' price over the output tokens
    an hour of the level's throughput writes (steady window, else its makespan's, said)."""
    rate, over = steady_or_makespan(cells, (level, mode, ALL, "out_tok_per_s"))
    if not rate:
        return "-"
    cost = gpu_hour_cost * gpus / (rate * 3600) * 1e6
    return f"{cost:,.2f}" + (" (makespan)" if over != "rate" else "")


def sweep_markdown(sweep: pa.Table, title: str, source: str | None = None, gpus: int = 1,
                   gpu_hour_cost: float | None = None) -> str:
    """report.md of a sweep or a plan, headed by where its numbers come from when that is the
    simulator or the model (`source`), then its decision; with `gpu_hour_cost`, each level's cost
    per million output tokens on the mode's `gpus` GPUs."""
    cells = _cells(sweep)
    levels = levels_of(sweep)
    flags = saturation(sweep)
    modes = list(dict.fromkeys(sweep["mode"].to_pylist()))
    out = [f"# {title}", "", *([f"**{source}.**", ""] if source else []),
           f"**Decision: {decide_sweep(sweep).text}**", "",
           "Per level (offered load), over each mode's steady window: done req/s and output tok/s; latencies "
           "in ms from the send; the E2E speedup over the baseline, paired by request, with its 95% interval. "
           f"*saturated*: completions under {SATURATED_BELOW:.0%} of the offered rate, by more than "
           f"{NOISE_SIGMAS:g} square roots of their count, over the steady window or, where the level had none, "
           "while the requests in flight at the last arrival ended (until half of them had: a fleet that keeps up "
           "ends them about as fast as they came); *too few to judge*: no steady window, and not behind (or fewer "
           f"than {MIN_BACKLOG} such completions): the arrivals were too short to show the fleet keeping up; "
           "closed loop (requests in flight), completions per second growing by under "
           f"{CLOSED_GAIN:.0%} of the growth in flight over the level below; *client behind*: the mode's client "
           "fell behind its schedule there (its own verdict: send lateness or CPU over the limit), so the level "
           "measured the client and names no ceiling; in brackets, where a level had no "
           "steady window, completions per second from the first send to the last completion; "
           f"{FEW_MARK} {rate_rule()}. J per output token: the energy of the mode's GPUs over the same window "
           "over the output tokens completed in it, with its 95% interval (five slices of a steady window); "
           "`(makespan)`: a level without a steady window long enough, over its makespan, with none; `-`: its "
           "GPUs were not read.", ""]
    for mode in modes:
        rows = []
        for level, load, closed in levels:
            done = _value(cells, (level, mode, ALL, "req_per_s", "rate"))
            departing = _value(cells, (level, mode, ALL, "req_per_s", "makespan"))
            r = _ratio(cells, level, mode, ALL)
            speed = "-" if r is None else r.text()
            flag = {True: " *saturated*", None: " *too few to judge*"}.get(flags.get((level, mode), False), "")
            flag += " *client behind*" if client_behind(cells, level, mode) else ""
            counted = _value(cells, (level, mode, ALL, "req_per_s", "count" if done is not None else "makespan_count"))
            few = FEW_MARK if too_few_completions(counted) else ""
            shown = (f"{done:,.2f}{few}" if done is not None else "-" if departing is None
                     else f"({departing:,.2f}{few})")
            rows.append([level, f"{load:,.0f}" if closed else f"{load:,.2f}", shown + flag,
                         "-" if (t := _value(cells, (level, mode, ALL, "out_tok_per_s", "rate"))) is None
                         else f"{t:,.0f}",
                         ms_text(_value(cells, (level, mode, ALL, "tpot_ms", "p50"))),
                         ms_text(_value(cells, (level, mode, ALL, "tpot_ms", "p99"))),
                         ms_text(_value(cells, (level, mode, ALL, "ttft_ms", "p99"))), speed,
                         energy_text(cells, level, mode),
                         *([cost_per_million(cells, level, mode, gpus, gpu_hour_cost)] if gpu_hour_cost else [])])
        header = ["level", load_unit(sweep), "done req/s", "out tok/s", "TPOT p50", "TPOT p99", "TTFT p99",
                  "speedup E2E (95% CI)", "J per output token (95% CI)",
                  *([f"cost per M output tokens at {gpu_hour_cost:g} per GPU-hour"] if gpu_hour_cost else [])]
        out += [f"## {mode}", "", "| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        out.append("")
    found = crossovers(sweep)
    if found:
        tenants = [*sorted({t for _, t in found} - {ALL}), ALL]
        shown = [m for m in modes if any((m, t) in found for t in tenants)]
        out += ["## Where speculation stops paying", "",
                f"The load ({load_unit(sweep)}) at which the E2E speedup over the baseline falls to 1.0, "
                "interpolated between the levels around it (log-log), with the range its 95% interval allows.", "",
                "| tenant | " + " | ".join(shown) + " |", "|---" + "|---" * len(shown) + "|"]
        out += ["| " + " | ".join([t, *(found.get((m, t), "-") for m in shown)]) + " |" for t in tenants]
        out.append("")
    return "\n".join(out)


AGREE_WITHIN = 0.10   # the issue's bar for the model against a measured sweep: 10% on throughput and TPOT p50


def throughput(cells: dict, level: str, mode: str, over: str = "rate") -> tuple[float | None, str]:
    """Output tokens per second over the steady window (`rate`) or, without one (or when `over`
    says so), from the first send to the last completion (`makespan`); and which of the two."""
    if over == "makespan":
        return _value(cells, (level, mode, ALL, "out_tok_per_s", "makespan")), over
    return steady_or_makespan(cells, (level, mode, ALL, "out_tok_per_s"))


def agreement(predicted: pa.Table, measured: pa.Table) -> list[dict]:
    """Per mode and level both have: the model's throughput and TPOT p50 against the measured,
    and their relative differences ((plan - measured) / measured)."""
    plan_cells, got_cells = _cells(predicted), _cells(measured)
    out = []
    for mode in dict.fromkeys(measured["mode"].to_pylist()):
        for level, _, _ in levels_of(measured):
            (p_thr, unit), (m_thr, m_unit) = throughput(plan_cells, level, mode), throughput(got_cells, level, mode)
            if unit != m_unit:   # one had a steady window, the other not: both over their makespan
                (p_thr, unit), (m_thr, _) = (throughput(c, level, mode, "makespan") for c in (plan_cells, got_cells))
            p_tpot, m_tpot = (_value(c, (level, mode, ALL, "tpot_ms", "p50")) for c in (plan_cells, got_cells))
            if m_thr is None and m_tpot is None:
                continue

            def diff(p: float | None, m: float | None) -> float | None:
                return None if p is None or m is None or m == 0 else (p - m) / m

            out.append({"mode": mode, "level": level, "unit": unit, "plan_throughput": p_thr,
                        "measured_throughput": m_thr, "throughput_diff": diff(p_thr, m_thr), "plan_tpot_p50": p_tpot,
                        "measured_tpot_p50": m_tpot, "tpot_diff": diff(p_tpot, m_tpot)})
    return out


def plan_vs_measured(predicted: pa.Table, measured: pa.Table) -> str:
    rows = agreement(predicted, measured)

    def pct(d: float | None) -> str:
        if d is None:
            return "-"
        return f"{d:+.1%}" + ("" if abs(d) <= AGREE_WITHIN else " **off**")

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    worst = [abs(d) for r in rows for d in (r["throughput_diff"], r["tpot_diff"]) if d is not None]
    verdict = ("no level to compare" if not worst else
               f"the model is within {AGREE_WITHIN:.0%} at every level (worst {max(worst):.1%})"
               if max(worst) <= AGREE_WITHIN else
               f"the model is off by more than {AGREE_WITHIN:.0%} at {sum(d > AGREE_WITHIN for d in worst)} of "
               f"{len(worst)} points (worst {max(worst):.1%})")
    out = ["## The model against the measurement", "",
           "The simulator's performance model run on the same levels and requests in virtual time (plan/), beside "
           "what this sweep measured: throughput (output tok/s over the steady window, `rate`, or where a level "
           "had none from the first send to the last completion, `makespan`) and TPOT p50; the difference is "
           "(plan - measured) / measured. "
           f"In short: {verdict}.", "",
           "| mode | level | out tok/s plan | measured | diff | TPOT p50 plan (ms) | measured | diff |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {r['mode']} | {r['level']} | {num(r['plan_throughput'])} ({r['unit']}) "
            f"| {num(r['measured_throughput'])} | {pct(r['throughput_diff'])} | {num(r['plan_tpot_p50'])} "
            f"| {num(r['measured_tpot_p50'])} "
            f"| {pct(r['tpot_diff'])} |" for r in rows]
    out.append("")
    return "\n".join(out)
