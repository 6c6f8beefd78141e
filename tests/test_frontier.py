"""The interactivity frontier (InferenceMAX's: output tokens/s per GPU against output tokens/s per
user): analysis/frontier.py's maths without servers (the Pareto set, the staircase, where a mode
pays and stops paying, in words), and a plan's report.html drawing it: the levels that missed an
SLO judged as each level's own analysis judges them, and the page in headless Chromium."""

from __future__ import annotations

import html
import math
import re
from itertools import pairwise

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.frontier import Point, best_at, dominates, pareto_front, ratios, shift, stretches
from analysis.run_analysis import analyse_run
from analysis.slo import MISSED
from analysis.sweep_html import INTERACTIVITY, PER_GPU, frontier, frontier_points, level_slos, tenant_targets
from cluster.fleet import load_fleet
from contract.manifest import Manifest
from contract.records import SLO_COLUMNS
from tests.conftest import DATA, cli

# a small grid, so that ties in either figure and repeated points are common
_POINTS = st.lists(st.builds(lambda i, x, y: Point(f"l{i}", float(x), float(y)), st.integers(0, 99),
                             st.integers(1, 12), st.integers(1, 12)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_POINTS)
def test_the_pareto_set_is_non_dominated_and_every_other_point_is_dominated(points):
    front = pareto_front(points)
    for p in front:
        assert not any(dominates(q, p) for q in points), p
    for p in points:
        assert p in front or any(dominates(f, p) for f in front), p
    # from the least interactive up, the most output tokens/s per GPU first
    assert all(a.interactivity <= b.interactivity and a.per_gpu >= b.per_gpu for a, b in pairwise(front))
    assert bool(front) == bool(points)


@settings(max_examples=200, deadline=None)
@given(_POINTS, st.floats(0.5, 13.0))
def test_the_frontier_is_the_most_any_level_gave_at_that_interactivity_or_higher(points, x):
    front = pareto_front(points)
    brute = max((p.per_gpu for p in points if p.interactivity >= x), default=None)
    assert best_at(front, x) == brute
    if brute is not None:   # a staircase falling as the interactivity asked for grows
        assert best_at(front, x / 2) >= brute


@settings(max_examples=300, deadline=None)
@given(_POINTS.filter(bool), _POINTS.filter(bool))
def test_the_comparison_holds_at_every_interactivity_both_reach(base, mode):
    pairs = ratios(base, mode)
    top = min(max(p.interactivity for p in base), max(p.interactivity for p in mode))
    assert pairs and pairs[-1][0] == top
    for x, r in pairs:
        assert r == pytest.approx(max(p.per_gpu for p in mode if p.interactivity >= x)
                                  / max(p.per_gpu for p in base if p.interactivity >= x))
    # between two compared interactivities both staircases are flat: the ratio is the upper one's
    for (x0, _), (x1, r1) in pairwise(pairs):
        mid = (x0 + x1) / 2
        assert best_at(pareto_front(mode), mid) / best_at(pareto_front(base), mid) == pytest.approx(r1)
    parts = stretches(pairs)
    assert [r for s in parts for r in s.ratios] == pairs                     # every point once, in order
    assert all(a.pays != b.pays and b.above == a.upto for a, b in pairwise(parts))
    assert all((r > 1.0) == s.pays for s in parts for _, r in s.ratios)
    found = shift("eagle", mode, "baseline", base)
    if found.pays_above is not None:   # above it the mode pays at every interactivity both reach
        assert all(r > 1.0 for x, r in pairs if x > found.pays_above)
    if found.stops_paying_at is not None:
        assert dict(pairs)[found.stops_paying_at] <= 1.0
        assert found.pays_above in (None, found.stops_paying_at)
    assert found.text()   # said, whatever the shape


def _pts(*xy: tuple[float, float]) -> list[Point]:
    return [Point(f"l{i}", x, y) for i, (x, y) in enumerate(xy)]


BASE = _pts((10, 100), (20, 50), (40, 20))


def test_where_speculation_moves_the_frontier_and_where_it_stops_paying_in_words():
    # the baseline gives more at 10 tokens/s per user (100 against 70); above it eagle gives more
    found = shift("eagle", _pts((15, 70), (30, 60), (50, 40)), "baseline", BASE)
    assert found.pays_above == 10 and found.stops_paying_at == 10
    assert found.text() == (
        "At 30+ output tokens/s per user, eagle gives 3.00x the baseline's output tokens/s per GPU: its frontier is "
        "above the baseline's at every interactivity above 10 up to 40 output tokens/s per user (1.20x to 3.00x). "
        "It stops paying at 10 output tokens/s per user and below, where the baseline's frontier is as high or "
        "higher (eagle 0.70x). Only eagle reaches above 40 output tokens/s per user (up to 50).")


def test_a_frontier_above_or_below_everywhere_and_none_to_compare_are_said():
    above = shift("eagle", _pts((12, 120), (45, 60)), "baseline", BASE)
    assert above.pays_above == 0.0 and above.stops_paying_at is None
    assert above.text().startswith("eagle's frontier is above the baseline's at every interactivity both reach "
                                   "(up to 40 output tokens/s per user): 1.20x to 3.00x")
    assert "does not stop paying in the range measured" in above.text()
    below = shift("ngram", _pts((10, 90), (30, 10)), "baseline", BASE)
    assert below.pays_above is None and below.stops_paying_at == 30
    assert below.text() == ("ngram does not move the frontier: the baseline's is as high or higher at every "
                            "interactivity both reach (up to 30 output tokens/s per user), ngram giving 0.20x to "
                            "0.90x its output tokens/s per GPU. Only the baseline reaches above 30 output tokens/s "
                            "per user (up to 40).")
    assert shift("medusa", [], "baseline", BASE).text() == (
        "medusa: no frontier to compare (medusa has no level with both figures).")
    # the mode pays only lower down: it stops paying above the last interactivity it did
    low = shift("draft", _pts((10, 120), (40, 10)), "baseline", BASE)
    assert low.pays_above is None and low.stops_paying_at == 40
    assert "It stops paying above 10 output tokens/s per user" in low.text()


def test_a_point_needs_positive_finite_figures():
    for x, y in ((0.0, 1.0), (1.0, -2.0), (math.nan, 1.0), (1.0, math.inf)):
        with pytest.raises(ValueError):
            Point("l", x, y)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    """A plan in virtual time (about two seconds): baseline and eagle from one stream to 512 in
    flight, where the chat tenant's TTFT target (1 s p99) is missed."""
    out_dir = tmp_path_factory.mktemp("frontier")
    ran = cli("plan", "--modes", "baseline,eagle", "--scenario", str(DATA / "tiny-mix.toml"), "--requests", "500",
              "--concurrency", "1,16,128,512", "--out", str(out_dir), "--run-id", "p")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"plots: {out_dir / 'p' / 'report.html'}" in " ".join(ran.stdout.split())
    return out_dir / "p"


def test_the_levels_marked_are_those_each_levels_own_analysis_says_missed_an_slo(plan):
    sweep = pq.read_table(plan / "sweep.parquet")
    trace = pq.read_table(plan / "levels" / "concurrency-1" / "trace.parquet")
    targets = tenant_targets(trace)
    assert targets == {"chat": {"ttft_ms": 1000.0}}
    assert tenant_targets(trace.drop_columns(list(SLO_COLUMNS))) is None    # a trace that sets none
    marked = level_slos(sweep, targets)
    for folder in sorted((plan / "levels").iterdir()):   # the level as a run: records joined with their targets
        found = analyse_run(folder, ["baseline", "eagle"], Manifest.read(folder))
        for mode in ("baseline", "eagle"):
            own = {a.verdict for a in found.slos if a.mode == mode}
            assert marked[folder.name, mode][0] == (own.pop() if len(own) == 1 else "?"), (folder.name, mode)
    assert any(v == MISSED for v, _ in marked.values()), marked   # the plan reaches a level that misses
    # the figure draws them apart, named in the legend; without targets nothing is marked, and that is said
    fig, words = frontier(sweep, 4, targets)
    assert "eagle: levels that missed an SLO" in [t.name for t in fig.data]
    assert any(w.startswith("Missed an SLO (open x): ") for w in words)
    bare, said = frontier(sweep, 4, None)
    assert not any("missed" in t.name for t in bare.data)
    assert said[-1] == "The trace sets no SLO targets: no level is marked as missing one."


@pytest.mark.e2e
def test_a_plans_report_draws_the_frontier_offline_with_no_console_error(plan):
    from tests.test_report_html import render

    seen = render(plan / "report.html", "plan-frontier")
    assert not seen["errors"] and not seen["requests"], seen
    assert seen["plots"] == seen["drawn"] == seen["with_data"] >= 7, seen
    assert seen["titles"][0].startswith("Interactivity frontier: output tokens/s per GPU"), seen["titles"]
    assert seen["traces"][0][:2] == ["baseline: Pareto frontier", "baseline: levels"], seen["traces"][0]
    assert {"eagle: Pareto frontier", "eagle: levels that missed an SLO"} <= set(seen["traces"][0])
    assert "Frontier" in seen["headings"]
    assert seen["axes"][0] == [INTERACTIVITY, PER_GPU]   # output tokens, said in each axis title
    assert all("output tokens" in axis for axis in seen["axes"][0])
    page = (plan / "report.html").read_text()
    # the words under the chart: computed from the plan's own points
    said = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", page.split('<div class="frontier-words">')[1]
                                                 .split("</div>")[0])]
    sweep = pq.read_table(plan / "sweep.parquet")
    gpus = load_fleet("local-sim")[0].gpus_per_mode    # the plan's fleet
    points = frontier_points(sweep, gpus, level_slos(sweep, {"chat": {"ttft_ms": 1000.0}}))
    assert said[1] == shift("eagle", points["eagle"], "baseline", points["baseline"]).text()
