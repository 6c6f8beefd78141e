"""The sweep's and the capacity search's maths on fake fleets whose answers are known exactly:
the crossover of a known speedup curve and its interval, and the search's bracket."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.capacity import (
    Capacity,
    CapacityRow,
    Probe,
    capacity_table,
    decide_capacity,
    peak_choice,
    peak_fleets,
    peak_markdown,
    search_capacity,
)
from analysis.crossover import BEYOND, CROSSES, NEVER_PAYS, crossover
from analysis.stats import Ratio


def _curve(loads, at_one_load, slope=-0.25, half_width=0.05):
    """A speedup that falls as a power of the load, 1.0 at `at_one_load`; its interval a
    constant factor either side."""
    out = []
    for x in loads:
        v = (x / at_one_load) ** slope
        out.append(Ratio(v, v * math.exp(-half_width), v * math.exp(half_width), 500))
    return out


def test_the_crossover_of_a_known_power_law_is_found_exactly_with_its_interval():
    loads = [1, 4, 16, 64, 128, 256]
    got = crossover(loads, _curve(loads, at_one_load=40.0))
    assert got.verdict == CROSSES and got.load == pytest.approx(40.0)   # log-log is exact for a power law
    # the bounds are the curve scaled by e^-+0.05: they cross where (x/40)^-0.25 = e^+-0.05
    assert got.low == pytest.approx(40.0 * math.exp(-0.05 / 0.25))
    assert got.high == pytest.approx(40.0 * math.exp(0.05 / 0.25))
    assert got.low < got.load < got.high


def test_a_mode_slower_even_alone_never_pays_and_one_still_ahead_is_beyond_the_range():
    loads = [1, 4, 16, 64]
    assert crossover(loads, _curve(loads, at_one_load=0.5)).verdict == NEVER_PAYS     # draft on Rust/C++
    beyond = crossover(loads, _curve(loads, at_one_load=1000.0))
    assert beyond.verdict == BEYOND and beyond.text() == "beyond the range swept"


def test_an_interval_that_holds_1_at_the_top_leaves_the_crossover_open_above():
    loads = [1, 4, 16, 64]
    wide = _curve(loads, at_one_load=40.0, half_width=0.6)      # the high bound never falls below 1.0
    got = crossover(loads, wide)
    assert got.verdict == CROSSES and got.high is None and got.text().endswith("beyond the range]")


def test_crossover_refuses_loads_out_of_order():
    with pytest.raises(ValueError, match="increasing"):
        crossover([4, 1], _curve([4, 1], 2.0))


def test_the_search_brackets_a_capacity_known_exactly():
    for capacity in (3.7, 37.3, 512.0):
        probes = []

        def fleet(rate, probes=probes, capacity=capacity):
            probes.append(rate)
            return rate <= capacity

        got = search_capacity(fleet, start=1.0, max_rate=10_000.0, precision=0.05)
        assert got.rate <= capacity < got.failed_at and (got.failed_at - got.rate) / got.rate <= 0.05
        assert len(probes) == len(got.probes) < 40


def test_a_start_above_the_capacity_halves_down_to_it():
    for capacity in (0.3, 3.7):
        got = search_capacity(lambda rate, c=capacity: rate <= c, start=10.0, max_rate=80.0, precision=0.05,
                              min_rate=0.1)
        assert got.rate <= capacity < got.failed_at and (got.failed_at - got.rate) / got.rate <= 0.05
        assert got.probes[0].rate == 10.0 and got.probes[1].rate == 5.0 and not got.probes[0].passed
    below = search_capacity(lambda rate: rate <= 0.05, start=10.0, max_rate=80.0, precision=0.05, min_rate=0.1)
    assert below.rate is None and below.reason == "even 0.156 failed its SLOs"   # the lowest probed above 0.1


def test_majority_repeats_keep_a_noisy_boundary_from_flipping_the_answer():
    """Near its capacity the fake fleet's probe is wrong one time in five; far from it, never."""
    capacity = 50.0

    def noisy(seed):
        rng = np.random.default_rng(seed)

        def probe(rate):
            truth = rate <= capacity
            near = abs(rate / capacity - 1) < 0.15
            return (not truth) if near and rng.random() < 0.2 else truth
        return probe

    answers = [search_capacity(noisy(s), 1.0, 1000.0, precision=0.05, repeats=5).rate for s in range(30)]
    assert all(0.85 * capacity <= a <= 1.15 * capacity for a in answers), answers
    single = [search_capacity(noisy(s), 1.0, 1000.0, precision=0.05, repeats=1).rate for s in range(30)]
    worst = lambda xs: max(abs(a / capacity - 1) for a in xs)  # noqa: E731
    assert worst(answers) <= worst(single)


def test_the_search_says_when_the_range_holds_no_boundary():
    assert search_capacity(lambda r: True, 1.0, 64.0, 0.05).reason == "every rate up to 64 met the SLOs"
    none = search_capacity(lambda r: False, 1.0, 64.0, 0.05)
    assert none.rate is None and none.reason == "even 1 failed its SLOs"


def _rows(**rates: tuple[float | None, float | None]) -> list[CapacityRow]:
    """mode=(highest rate that passed, lowest that failed) -> capacity rows."""
    return [CapacityRow(m, Capacity(r, f, [Probe(r or f or 1.0, r is not None, 0, "bisect")])) for m, (r, f) in
            rates.items()]


def test_a_capacity_search_decides_like_a_run_with_ties_the_top_of_the_search_and_too_few_said():
    d = decide_capacity(_rows(baseline=(2.0, 2.2), eagle=(9.0, 9.9)))
    assert d.kind == "deploy" and d.mode == "eagle"
    assert d.text == ("deploy eagle up to 9.00 req/s offered: every tenant within its SLOs (it failed at 9.90); "
                      "baseline 2.00 req/s (failed at 2.20)")
    top = decide_capacity(_rows(baseline=(2.0, 2.2), eagle=(64.0, None)), "--max-rate")
    assert top.mode == "eagle" and "the top of its search: raise --max-rate to find its limit" in top.text
    assert decide_capacity(_rows(baseline=(9.0, 9.5), eagle=(4.0, 4.4))).kind == "none_better"
    tie = decide_capacity(_rows(medusa=(9.0, 9.9), eagle=(9.0, 9.9)))
    assert tie.kind == "too_few" and tie.text.startswith("no choice between medusa, eagle")
    assert decide_capacity(_rows(eagle=(9.0, 9.9))).text.startswith("no decision: eagle is the only mode searched")
    assert decide_capacity(_rows(baseline=(None, 1.0), eagle=(None, 1.0))).kind == "none_met"
    few = [CapacityRow("baseline", Capacity(2.0, 2.2, [Probe(2.0, True, 0, "bisect")] * 4), unjudged=3, fewest=21),
           CapacityRow("eagle", Capacity(9.0, 9.9, [Probe(9.0, True, 0, "bisect")] * 4), unjudged=2, fewest=40)]
    assert ("5 of 8 probes passed or failed on p99s their data cannot bound (a tenant's p99 of 21 requests at "
            "fewest; its interval closes from 368)") in decide_capacity(few).text


def test_one_table_renders_the_measured_search_and_the_models():
    found = Capacity(rate=4.0, failed_at=5.0, probes=[Probe(4.0, True, 0, "bisect")] * 3, reason="bisected to 5%")
    top = Capacity(rate=8.0, failed_at=None, probes=[Probe(8.0, True, 0, "bracket")], reason="passed at max_rate")
    rows = [CapacityRow("eagle", found, "chat (ttft p99 210 > 200 ms)", 3.9), CapacityRow("ngram", top),
            CapacityRow("draft", None, why="stopped after 2 probes (interrupted?)")]
    lines, decision = capacity_table(rows, gpus=4, with_goodput=True, raise_with="--max-rate")
    assert lines[0] == "| mode | max req/s | per GPU | goodput req/s (over arrivals) | binding SLOs | search |"
    assert lines[2] == "| eagle | 4.00 | 1.000 | 3.90 | chat (ttft p99 210 > 200 ms) | bisected to 5% (3 probes) |"
    assert lines[3] == "| ngram | >= 8.00 | >= 2.000 | - | - | passed at max_rate (1 probes) |"
    assert lines[4] == "| draft | - | - | - | - | stopped after 2 probes (interrupted?) |"
    assert decision.mode == "ngram" and "raise --max-rate" in decision.text
    model, _ = capacity_table(rows[:2], gpus=4, with_goodput=False)       # the plan's: no goodput column
    assert model[0] == "| mode | max req/s | per GPU | binding SLOs | search |"
    assert model[1] == "|---|---:|---:|---|---|"
    assert model[2] == "| eagle | 4.00 | 1.000 | chat (ttft p99 210 > 200 ms) | bisected to 5% (3 probes) |"


def _row(mode: str, rate: float | None, failed_at: float | None) -> CapacityRow:
    return CapacityRow(mode, Capacity(rate, failed_at, reason="bracket within 10%"))


def test_the_fleet_for_a_peak_is_the_peak_over_a_replicas_capacity_rounded_up():
    """A capacity found on 2 replicas a mode (TP4 each): per replica half of it; 20 req/s of peak
    over it, rounded up, in replicas, and 4 GPUs each; the fewest GPUs chosen; a capacity at the
    top of its search an upper bound; a mode that met no rate needs an unknown fleet."""
    rows = [_row("baseline", 4.0, 4.4), _row("eagle", 7.2, 7.9), _row("ngram", 6.0, None), _row("draft", None, 1.0)]
    fleets = peak_fleets(rows, 20.0, replicas=2, gpus_per_replica=4)
    assert [(f.mode, f.per_replica, f.replicas, f.gpus, f.at_most) for f in fleets] == [
        ("baseline", 2.0, 10, 40, False),     # 20 / 2.0 = 10 replicas exactly
        ("eagle", 3.6, 6, 24, False),         # 20 / 3.6 = 5.6 -> 6
        ("ngram", 3.0, 7, 28, True),          # 20 / 3.0 = 6.7 -> 7, at most: ngram never failed
        ("draft", None, None, None, False)]
    choice = peak_choice(fleets, 20.0)
    assert choice.startswith("at a peak of 20.00 req/s choose eagle: eagle 24 GPUs (6 replicas); baseline 40 GPUs "
                             "(10 replicas); ngram at most 28 GPUs (7 replicas)"), choice
    assert "ngram reached the top of its search: it may need fewer" in choice
    table = peak_markdown(fleets, 20.0, 2, 4)
    assert "| eagle | 3.60 | 6 | 24 | not measured |" in table and "| ngram | >= 3.00 | <= 7 | <= 28 |" in table
    assert "| draft | - | - | - |" in table


def test_a_tie_at_the_peak_is_not_decided_and_no_capacity_is_no_fleet():
    tie = peak_fleets([_row("eagle", 4.0, 5.0), _row("ngram", 4.0, 5.0)], 3.0, replicas=1, gpus_per_replica=1)
    assert peak_choice(tie, 3.0) == "at a peak of 3.00 req/s: no choice between eagle, ngram, 1 GPUs each"
    # eagle holds more per replica, but at this peak the replicas round to the baseline's count
    even = peak_fleets([_row("baseline", 4.16, 4.6), _row("eagle", 4.8, 5.3), _row("draft", 3.52, 3.9)], 20.0,
                       replicas=1, gpus_per_replica=4)
    assert peak_choice(even, 20.0) == ("at a peak of 20.00 req/s no mode needs fewer GPUs than the baseline: "
                                       "baseline 20 GPUs, as eagle; draft 24 GPUs (6 replicas)")
    none = peak_fleets([_row("baseline", None, 1.0)], 3.0, replicas=1, gpus_per_replica=1)
    assert "no mode met every tenant's SLOs at any rate probed" in peak_choice(none, 3.0)
