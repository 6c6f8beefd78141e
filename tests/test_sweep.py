"""`loadtest sweep` and `loadtest capacity` on the simulator fleet, as an SRE runs them: the
levels as run folders, the curves, saturation, the model beside the measurement, and the
capacity search's answer; and their bad input, refused in one line before anything starts."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from analysis.sweep import AGREE_WITHIN, agreement
from contract.manifest import Manifest
from tests.conftest import DATA, ROOT, cli
from tests.test_report_html import render

TINY = str(DATA / "tiny-mix.toml")


def _cells(level_dir) -> dict:
    """(mode, metric, statistic) -> value of the level's whole-run rows (tenant all)."""
    return {(r["mode"], r["metric"], r["statistic"]): r["value"]
            for r in pq.read_table(level_dir / "summary.parquet").to_pylist() if r["tenant"] == "all"}


def _speedup(sweep, level: str, mode: str) -> float:
    rows = sweep.filter(pc.and_(pc.and_(pc.equal(sweep["level"], level), pc.equal(sweep["mode"], mode)),
                                pc.and_(pc.equal(sweep["tenant"], "all"), pc.equal(sweep["metric"], "speedup_e2e"))))
    return next(r["value"] for r in rows.to_pylist() if r["statistic"] == "geomean")


@pytest.mark.e2e
@pytest.mark.serial   # the model against the measurement, within 10%: nothing may share a core with it
def test_a_sweep_of_two_modes_is_paired_plotted_and_agrees_with_the_model(tmp_path, world_fleet):
    """The one check that the simulator served over HTTP is what its model predicts in virtual time,
    open loop from a low load up (tests/test_calibration.py holds the model to the published figures)."""
    # 150 requests: at 60, eagle's TPOT p50 at scale-2 moved from 7.6 to 8.5 ms between identical
    # runs (its acceptance draws follow the arrival interleaving), against a plan of 8.9 ms: one in
    # three runs fell outside 10% on the noise alone (measured 2026-12-02, before and after that day's changes).
    # A level whose client fell behind names no ceiling (analysis.sweep.level_verdicts): run alone the send
    # lateness p99 was 1.5-3.4 ms, but beside the suite's other tests on 2 cores a level once passed the
    # default 10 ms limit and the decision was "not enough data" (CI's clean-clone run, 2026-12-06); a client
    # short of workers misses 250 ms by seconds
    out = cli("sweep", "--endpoints", str(world_fleet.state), "--modes", "baseline,eagle", "--scenario", TINY,
              "--lateness-limit", "250",
              "--requests", "150", "--rate-scale", "1,2,6", "--workers", "1", "--keep-going", "--out", str(tmp_path),
              "--run-id", "s")
    assert out.returncode == 0, out.stdout + out.stderr
    run = tmp_path / "s"
    levels = ["scale-1", "scale-2", "scale-6"]
    for level in levels:   # every level a run folder, every mode the same requests
        records = read_requests(run / "levels" / level)
        ids = {m: set(records.filter(pc.equal(records["mode"], m))["request_id"].to_pylist())
               for m in ("baseline", "eagle")}
        assert ids["baseline"] == ids["eagle"] and len(ids["eagle"]) == 150, level
        assert set(records["status"].to_pylist()) == {"ok"}, level
    again = cli("report", str(run / "levels" / "scale-2"))        # the same analysis reads a level
    assert again.returncode == 0 and "eagle" in again.stdout, again.stderr
    sweep = pq.read_table(run / "sweep.parquet")
    assert sorted(set(sweep["level"].to_pylist())) == sorted(levels)
    # the speedup falls as the load grows, as the model says
    assert _speedup(sweep, "scale-1", "eagle") > _speedup(sweep, "scale-6", "eagle") > 1.0
    # the model, run on the same levels and requests, within 10% of the measurement at every level
    rows = agreement(pq.read_table(run / "plan" / "sweep.parquet"), sweep)
    assert len(rows) == 6
    for r in rows:
        assert abs(r["throughput_diff"]) <= AGREE_WITHIN and abs(r["tpot_diff"]) <= AGREE_WITHIN, r
    # at the lowest load (a third of eagle's capacity) the first token too is where the model puts it
    planned, measured = (_cells(folder / "levels" / "scale-1") for folder in (run / "plan", run))
    for mode in ("baseline", "eagle"):
        assert planned[(mode, "ttft_ms", "p50")] == pytest.approx(measured[(mode, "ttft_ms", "p50")], rel=0.15), mode
    report = (run / "report.md").read_text()
    assert "## The model against the measurement" in report and "within 10% at every level" in report
    assert "## Where speculation stops paying" in report
    seen = render(run / "report.html", "sweep")     # as a person sees it: Chromium, offline
    assert not seen["errors"] and not seen["requests"], seen
    assert seen["plots"] == seen["drawn"] >= 7, seen
    for title in ("Output tokens/s per GPU", "TPOT p99 against throughput", "E2E speedup over the baseline",
                  "Draft acceptance"):
        assert any(t.startswith(title) for t in seen["titles"]), (title, seen["titles"])
    # the interactivity frontier first (issue 42): each mode's levels and its Pareto staircase drawn, output
    # tokens said on both axes, and under it in words where eagle moves it (tests/test_frontier.py: the maths)
    assert seen["titles"][0].startswith("Interactivity frontier"), seen["titles"]
    drawn = seen["traces"][0]
    for mode in ("baseline", "eagle"):   # its levels: those within their SLOs, those that missed one, or both
        assert f"{mode}: Pareto frontier" in drawn and any(t.startswith(f"{mode}: levels") for t in drawn), drawn
    assert len(seen["axes"][0]) == 2 and all("output tokens" in a for a in seen["axes"][0]), seen["axes"]
    words = html.unescape((run / "report.html").read_text().split('<div class="frontier-words">')[1].split("</div>")[0])
    assert re.search(r"<p>(At [\d.,]+\+ output tokens/s per user, eagle gives|eagle's frontier|eagle does not)",
                     words), words
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and [lv["name"] for lv in manifest["levels"]] == levels
    # the sweep's one decision: in the manifest, heading report.md, in the console's report
    assert manifest["decision"]["kind"] == "deploy" and manifest["decision"]["mode"] == "eagle"
    assert report.splitlines()[2].startswith("**SIMULATED: ")   # the held fleet is the simulator: said first
    assert report.splitlines()[4] == f"**Decision: {manifest['decision']['text']}**"
    assert f"Decision: {manifest['decision']['text']}" in " ".join(out.stdout.split())
    assert "**Decision" not in out.stdout and "|---" not in out.stdout   # drawn, not Markdown source
    # a plan made on its own, set beside the measured sweep by `loadtest report`
    plan = cli("plan", "--fleet", str(world_fleet.fleet_file), "--modes", "baseline,eagle", "--scenario", TINY,
               "--requests", "150", "--rate-scale", "1,2,6", "--out", str(tmp_path), "--run-id", "p")
    assert plan.returncode == 0, plan.stderr
    both = cli("report", str(tmp_path / "p"), str(run), "--out", str(tmp_path / "both"))
    assert both.returncode == 0, both.stdout + both.stderr
    assert "within 10% at every level" in (tmp_path / "both" / "report.md").read_text()
    (run / "report.md").unlink()
    redo = cli("report", str(run))       # a sweep's analysis again, from its folders
    assert redo.returncode == 0 and "within 10% at every level" in (run / "report.md").read_text(), redo.stderr
    mixed = cli("report", str(run), str(run / "levels" / "scale-2"))
    assert mixed.returncode == 2 and "not both" in mixed.stderr


@pytest.mark.e2e
def test_a_saturated_mode_goes_no_higher_and_a_closed_loop_level_stops_sending_on_time(tmp_path, world_fleet):
    out = cli("sweep", "--endpoints", str(world_fleet.state), "--modes", "baseline,ngram", "--scenario", TINY,
              "--requests", "300", "--rates", "5,120,240", "--level-duration", "6", "--out", str(tmp_path),
              "--run-id", "sat")
    assert out.returncode == 0, out.stdout + out.stderr
    manifest = json.loads((tmp_path / "sat" / "manifest.json").read_text())
    by_name = {lv["name"]: lv for lv in manifest["levels"]}
    assert by_name["rate-5"]["saturated"] == []
    assert sorted(by_name["rate-120"]["saturated"]) == ["baseline", "ngram"], by_name
    assert "saturated at rate-120" in by_name["rate-240"]["skipped"]["ngram"]
    assert not (tmp_path / "sat" / "levels" / "rate-240" / "requests" / "mode=ngram").exists()
    assert "ngram: saturated at rate-120" in out.stdout and "its higher levels are skipped" in out.stdout
    # the baseline goes on: every other mode's speedup at a level needs it
    assert (tmp_path / "sat" / "levels" / "rate-240" / "requests" / "mode=baseline").is_dir()
    # --level-duration: the 5 req/s level stopped sending after 6 s and let its requests finish
    five = read_requests(tmp_path / "sat" / "levels" / "rate-5", filter=pc.field("mode") == "baseline")
    status = five["status"].to_pylist()
    assert set(status) == {"ok", "not_sent"} and 20 <= status.count("ok") <= 45, status.count("ok")
    assert "--level-duration" in next(r["error"] for r in five.to_pylist() if r["status"] == "not_sent")

    closed = cli("sweep", "--endpoints", str(world_fleet.state), "--modes", "baseline", "--scenario", TINY,
                 "--requests", "400", "--concurrency", "1,8", "--level-duration", "4", "--out", str(tmp_path),
                 "--run-id", "c")
    assert closed.returncode == 0, closed.stdout + closed.stderr
    done = {c: read_requests(tmp_path / "c" / "levels" / f"concurrency-{c}")["status"].to_pylist().count("ok")
            for c in (1, 8)}
    assert 2 <= done[1] < done[8], done      # more in flight, more completed in the same 4 s
    report = (tmp_path / "c" / "report.md").read_text()
    assert "| concurrency-8 | 8 |" in report and "## The model against the measurement" in report
    planned = read_requests(tmp_path / "c" / "plan" / "levels" / "concurrency-1")   # the model sent for 4 s too
    assert 2 <= planned["status"].to_pylist().count("ok") < 400


CLOSED_LOOP_WITHIN = 0.20   # the bound tests/test_v1_curve.py held the HTTP-measured V1 curve to (removed in issue 27)


@pytest.mark.e2e
@pytest.mark.serial   # the model against the measurement: nothing may share a core with it
def test_closed_loop_from_a_few_streams_to_a_full_batch_is_what_the_model_predicts(tmp_path, world_fleet):
    """Under batch, served over HTTP, the engine's steps are the model's, for each way of drafting:
    at 4 and 32 in flight each mode's throughput over the baseline's (the V1 curve's quantity),
    its throughput and its TPOT p50 within 20% of the plan beside the sweep, and speculation
    paying less at 32 (the curve's shape). tests/test_calibration.py holds the model's curves to
    the published ones up to batch 128 in virtual time; bench/v1_curve.py measures them over HTTP.
    20%, not the open-loop check's 10%: with 24-token replies the spec modes' TTFT over HTTP is
    15 to 55 ms above the plan's (the baseline's 9), which costs eagle 11% of its throughput at 4
    in flight, and eagle's TPOT p50 at 32 came 10.0% under the plan (measured 2026-12-05).
    Not 1 in flight: 5 s of one stream completes 13 to 34 requests, so one completion more or less
    at the window's edge moves the throughput by 3 to 8% (measured); the single stream's step is
    held to the model by tests/test_sim_server.py::test_streamed_timing_follows_the_model."""
    modes = ("baseline", "eagle", "draft", "ngram")
    out = cli("sweep", "--endpoints", str(world_fleet.state), "--modes", ",".join(modes), "--scenario",
              str(DATA / "tiny-chat.toml"), "--requests", "400", "--concurrency", "4,32", "--level-duration", "5",
              "--keep-going", "--out", str(tmp_path), "--run-id", "batch")
    assert out.returncode == 0, out.stdout + out.stderr
    run = tmp_path / "batch"
    sweep = pq.read_table(run / "sweep.parquet")
    rows = agreement(pq.read_table(run / "plan" / "sweep.parquet"), sweep)
    assert len(rows) == 2 * len(modes)
    for r in rows:
        assert abs(r["throughput_diff"]) <= CLOSED_LOOP_WITHIN and abs(r["tpot_diff"]) <= CLOSED_LOOP_WITHIN, r
    by = {(r["mode"], r["level"]): r for r in rows}
    for (mode, level), r in by.items():
        base = by["baseline", level]
        plan = r["plan_throughput"] / base["plan_throughput"]
        measured = r["measured_throughput"] / base["measured_throughput"]
        assert abs(measured / plan - 1) <= CLOSED_LOOP_WITHIN, (mode, level, measured, plan)
    for mode in ("eagle", "draft"):
        assert _speedup(sweep, "concurrency-4", mode) > _speedup(sweep, "concurrency-32", mode), mode


def _capacity(tmp_path, run_id: str, state) -> tuple[list[dict], str]:
    # 165 ms keeps the boundary between two of the search's probe rates: at 150 ms the V1 model
    # put eagle's TTFT p99 at 150-151 ms right on a probe (measured: one search in three flipped)
    # one Locust process and no pause between probes: each probe waits for its last request anyway
    out = cli("capacity", "--endpoints", str(state), "--modes", "eagle", "--scenario", TINY, "--probe-duration", "4",
              "--slo", "ttft_p99_ms=165", "--precision", "25", "--workers", "1", "--cooldown", "0", "--peak", "12",
              "--out", str(tmp_path), "--run-id", run_id)
    assert out.returncode == 0, out.stdout + out.stderr
    report = (tmp_path / run_id / "report.md").read_text()
    return pq.read_table(tmp_path / run_id / "capacity.parquet").to_pylist(), report


@pytest.mark.e2e
@pytest.mark.serial   # TTFT p99 against its SLO decides every probe: nothing may share a core with it
def test_capacity_finds_the_highest_rate_within_the_slos_and_the_same_one_twice(tmp_path, world_fleet):
    # two searches, not three: each costs a minute of the suite's serial chain, and a second already
    # shows the answer is the search's, not the noise's (each end decided by a majority of 3 probes)
    runs = [_capacity(tmp_path, f"cap{i}", world_fleet.state) for i in range(2)]
    rows = [next(line for line in report.splitlines() if line.startswith("| eagle |")) for _, report in runs]
    assert rows[0].split("|")[2] == rows[1].split("|")[2], rows   # the same answer
    probes, report = runs[0]
    passed = [p["rate"] for p in probes if p["passed"]]
    failed = [p["rate"] for p in probes if not p["passed"]]
    assert passed and failed
    found = float(rows[0].split("|")[2].replace(",", ""))
    found = next(r for r in passed if abs(r - found) < 0.006)      # the report rounds it
    above = min(r for r in failed if r > found)
    assert (above - found) / found <= 0.25 and "ttft p99" in rows[0]
    # the answer is decided by the majority of 3 probes at each end of the final bracket
    assert sum(1 for p in probes if p["rate"] == found and p["passed"]) >= 2
    assert sum(1 for p in probes if p["rate"] == above and not p["passed"]) >= 2
    assert "eagle is the only mode searched" in report
    # --peak 12: the replicas are 12 req/s over what one replica held (the rate found over the
    # fleet's replicas a mode), rounded up, and their GPUs the fleet's per replica
    replicas = len(Manifest.read(tmp_path / "cap0").mode_runs["eagle"].replicas)
    per_replica = found / replicas
    needed = math.ceil(12 / per_replica)
    peak_row = next(line for line in report.split("## The fleet")[1].splitlines() if line.startswith("| eagle |"))
    cells = [c.strip() for c in peak_row.strip("|").split("|")]
    assert float(cells[1].replace(",", "")) == pytest.approx(per_replica, abs=0.006) and int(cells[2]) == needed
    gpus = int(cells[3])
    assert gpus % needed == 0 and f"choose eagle: eagle {gpus:,} GPUs ({needed:,} replicas)" in report, report
    for n, p in enumerate(probes, 1):   # every probe a run folder of its own: 4 s of arrivals at its rate
        assert read_requests(p["folder"]).num_rows == p["requests"] == pytest.approx(4 * p["rate"], rel=0.3)
        assert Path(p["folder"]).name == f"probe-{n:02d}-{p['rate']:.3g}rps", p["folder"]   # in the order probed
    # A sweep over the same fleet, with the same target, a level either side of the bracket (each by
    # the search's precision, 25%): the level below met every tenant's SLOs, the one above missed
    # them, as the run's own SLO verdict judges each level (the capacity agrees with the sweep)
    held = tmp_path / "held-165.toml"
    held.write_text(Path(TINY).read_text().replace("ttft_p99_ms = 1000", "ttft_p99_ms = 165")
                    + "slo = { ttft_p99_ms = 165 }\n")     # its last tenant (rust) too, as --slo holds both
    below, high = found / 1.25, above * 1.25
    # like with like: 4 s of arrivals a level, as a probe (enough requests for the higher, cut at 4 s)
    out = cli("sweep", "--endpoints", str(world_fleet.state), "--modes", "eagle", "--scenario", str(held),
              "--rates", f"{below:.3f},{high:.3f}", "--requests", str(int(high * 4) + 1), "--level-duration", "4",
              "--keep-going", "--workers", "1",
              "--cooldown", "0", "--out", str(tmp_path), "--run-id", "beside")
    assert out.returncode in (0, 1), out.stdout + out.stderr     # 1: a level failed its gate
    levels = json.loads((tmp_path / "beside" / "manifest.json").read_text())["levels"]
    verdicts = []
    for level in levels:
        slos = json.loads((Path(level["folder"]) / "manifest.json").read_text())["slos"]
        eagle = [s for s in slos if s["mode"] == "eagle"]
        assert len(eagle) == 2, slos            # both tenants judged, in the level's own manifest
        verdicts.append(all(s["passed"] for s in eagle))
    assert verdicts == [True, False], (found, above, levels, verdicts)


@pytest.mark.parametrize("argv, says", [
    (["sweep", "--concurrency", "4,2"], "the levels must increase"),
    (["sweep", "--rates", "1", "--concurrency", "2"], "not allowed with argument"),
    (["capacity", "--repeats", "2"], "odd number"),
    (["capacity", "--slo", "p99=3"], "KEY=MS"),
    (["capacity", "--scenario", str(ROOT / "scenarios" / "builtin" / "burst.toml"), "--slo", "tpot_p99_ms=0"],
     "expected a positive number"),
])
def test_bad_sweep_and_capacity_input_is_one_line_and_exit_2(tmp_path, argv, says):
    out = cli(*argv, "--out", str(tmp_path))
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


def test_a_scenario_without_targets_is_refused_by_capacity_before_anything_starts(tmp_path):
    no_slo = tmp_path / "no-slo.toml"
    no_slo.write_text((DATA / "tiny-mix.toml").read_text().replace("slo = { ttft_p99_ms = 1000 }\n", ""))
    out = cli("capacity", "--scenario", str(no_slo), "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "sets no SLO targets" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "o").exists()
    closed = tmp_path / "closed.toml"
    closed.write_text((DATA / "tiny-mix.toml").read_text().replace('process = "poisson"\nrate = 12.0',
                                                                   'process = "closed"\nconcurrency = 4'))
    out = cli("sweep", "--scenario", str(closed), "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "--concurrency" in out.stderr and not (tmp_path / "o").exists()
