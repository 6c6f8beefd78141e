"""`loadtest report RUN1 RUN2 RUN3` on repeats of one trace (the same requests replayed on other
days, or after a redeploy): one summary with the spread between the runs beside each run's own
interval, checked against numpy on the raw rows, and a verdict that says when the runs disagree
more than one run's interval says. Runs of different traces stay side by side and say no spread
is computed; two runs are too few for an interval. The run folders are written to the record
contract directly (no fleet, no server), so the file runs in seconds."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.repeats import NOT_JUDGED, WIDER, WITHIN, t_quantile
from analysis.stats import paired_speedup_ci, percentiles_with_intervals
from common.times import ms_text
from contract.manifest import Manifest
from contract.records import REQUEST_SCHEMA, RequestRecord
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, write_trace
from tests.conftest import DATA, cli

REQUESTS = 200
MODES = ("baseline", "eagle", "draft")
# how many times faster than the baseline each mode serves a request, run by run: eagle's gain
# moves from boot to boot (the runs disagree), draft's holds (only sampling noise between runs)
FASTER = {"baseline": (1.0, 1.0, 1.0), "eagle": (2.0, 1.6, 2.4), "draft": (1.3, 1.3, 1.3)}
SLOWER = (1.0, 1.1, 0.9)       # each run's whole fleet a little slower or faster (its boot)
T_975 = {1: 12.706204736174698, 2: 4.302652729911275, 10: 2.2281388519649385}   # scipy.stats.t.ppf(0.975, df)
LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))


def _trace(seed: int = 7) -> pa.Table:
    return build_trace(load_scenario(str(DATA / "tiny-mix.toml"))[0], requests=REQUESTS, seed=seed)


def _run_folder(root: Path, run: int, trace: pa.Table, name: str | None = None, fleet: str = "synthetic") -> Path:
    """A finished run of `trace` in `root/name`, as `loadtest run` leaves it for `report`:
    manifest.json, trace.parquet and one record per request and mode, its latencies drawn for
    run `run` (FASTER, SLOWER, and a lognormal noise of its own per request)."""
    run_id = name or f"day{run + 1}"
    run_dir = root / run_id
    write_trace(trace, run_dir / "trace.parquet", "tiny-mix", "0" * 64)
    rng = np.random.default_rng(100 + run)
    work = np.random.default_rng(1).uniform(400.0, 1600.0, trace.num_rows)   # each request's own cost
    columns = zip(*(trace[c].to_pylist() for c in ("request_id", "tenant", "offset_s", "max_tokens")), strict=True)
    requests = list(columns)
    for mode in MODES:
        rows = []
        for i, (rid, tenant, offset, tokens) in enumerate(requests):
            e2e = work[i] * SLOWER[run] / FASTER[mode][run] * rng.lognormal(0.0, 0.1)
            ttft = e2e * rng.uniform(0.1, 0.2)
            r = RequestRecord(run_id=run_id, mode=mode, worker="w0", tenant=tenant, request_id=rid,
                              scheduled_ns=10**18 + int(offset * 1e9), offset_s=offset, status="ok")
            r.sent_ns, r.lateness_ms = r.scheduled_ns, 0.5
            r.ttft_ms, r.e2e_ms, r.completion_tokens = ttft, e2e, tokens
            r.first_token_ns, r.last_token_ns = r.sent_ns + int(ttft * 1e6), r.sent_ns + int(e2e * 1e6)
            r.itl_ms, r.chunk_tokens = [ttft, e2e - ttft], [1, tokens - 1]
            rows.append(r.as_row())
        folder = run_dir / "requests" / f"mode={mode}"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), folder / "part-w0-00000.parquet")
    Manifest(run_id=run_id, scenario={"name": "tiny-mix"}, fleet={"name": fleet}, modes=list(MODES), seed=7,
             requests=trace.num_rows, status="completed").write(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def days(tmp_path_factory) -> list[Path]:
    """Three runs of one trace (day1, day2, day3)."""
    root = tmp_path_factory.mktemp("repeats")
    trace = _trace()
    return [_run_folder(root, run, trace) for run in range(3)]


def _raw(run_dir: Path, mode: str) -> dict[str, np.ndarray]:
    """A mode's latencies straight off its record file, in request id order."""
    t = pq.read_table(run_dir / "requests" / f"mode={mode}" / "part-w0-00000.parquet").sort_by("request_id")
    return {c: t[c].to_numpy() for c, _ in LATENCIES}


def _rows(text: str, sep: str) -> dict[tuple[str, str], list[str]]:
    """The repeats table's rows by (mode, figure), from a markdown (|) or console (│) table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip(sep).split(sep)]
        if line.strip().startswith(sep) and len(cells) > 3 and cells[0] in MODES:
            out[cells[0], cells[1]] = cells
    return out


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _interval(per_run: np.ndarray) -> tuple[float, float]:
    half = T_975[len(per_run) - 1] * per_run.std(ddof=1) / math.sqrt(len(per_run))
    return max(0.0, per_run.mean() - half), per_run.mean() + half


def test_three_repeats_of_one_trace_give_each_runs_figure_and_the_spread_between_them(days, tmp_path):
    ran = cli("report", *map(str, days), "--out", str(tmp_path / "all"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = (tmp_path / "all" / "report.md").read_text()
    assert "# Runs side by side" in report       # the side-by-side table stays
    assert all(f"report: {d / 'report.md'}" in ran.stdout for d in days)    # and each run's own tables
    md = _rows(report.split("## Between runs: repeats of one trace")[1], "|")
    console = _rows(ran.stdout.split("3 runs of one trace: the spread between them")[1], "│")
    assert set(md) == set(console) and len(md) == 3 * 6 + 2     # six percentiles a mode, a speedup a mode but one
    raw = {mode: [_raw(d, mode) for d in days] for mode in MODES}
    for mode in MODES:
        for column, name in LATENCIES:
            for q in (50, 99):
                per_run = np.array([np.percentile(r[column], q) for r in raw[mode]])
                low, high = _interval(per_run)
                within = [percentiles_with_intervals(r[column])[f"p{q}"] for r in raw[mode]]
                widest = max(h - lo for _, lo, h in within)         # NaN when a run cannot bound its p99
                limit = widest * 3.314 / 3.92     # what 3 runs span by sampling alone, 95% of the time
                judged = NOT_JUDGED if math.isnan(widest) else WIDER if np.ptp(per_run) > limit else WITHIN
                want = [name + f" p{q}", *[ms_text(v) + ("†" if q == 99 else "") for v in per_run],
                        f"{ms_text(per_run.min())}..{ms_text(per_run.max())}", ms_text(per_run.std(ddof=1)),
                        f"{ms_text(per_run.mean())} [{ms_text(low)}, {ms_text(high)}]",
                        "-" if math.isnan(widest) else ms_text(widest), judged]
                assert console[mode, f"{name} p{q}"][1:] == want
                assert md[mode, f"{name} p{q}"][1:] == [*want[:-1], f"**{judged}**" if judged == WIDER else judged]

    said, report_line = _one_line(ran.stdout), _one_line(report)
    for mode in ("eagle", "draft"):
        pairs = [(b["e2e_ms"], m["e2e_ms"]) for b, m in zip(raw["baseline"], raw[mode], strict=True)]
        speedups = np.array([np.exp(np.log(b / m).mean()) for b, m in pairs])
        run_ci = [paired_speedup_ci(b, m) for b, m in pairs]        # each run's own paired bootstrap
        widest = max(r.high - r.low for r in run_ci)
        low, high = _interval(speedups)
        want = ["E2E speedup", *[f"{s:.2f}x [{r.low:.2f}-{r.high:.2f}]" for s, r in zip(speedups, run_ci, strict=True)],
                f"{speedups.min():.2f}..{speedups.max():.2f}", f"{speedups.std(ddof=1):.2f}",
                f"{speedups.mean():.2f} [{low:.2f}, {high:.2f}]", f"{widest:.2f}"]
        assert console[mode, "E2E speedup"][1:-1] == want and md[mode, "E2E speedup"][1:-1] == want
        span = f"{speedups.min():.2f}x..{speedups.max():.2f}x"
        # three runs differing by sampling alone span at most 3.314 standard errors 95% of the time
        # (the range of 3 normals, Harter 1960), and a run's 95% interval is 3.92 of them wide
        limit = widest * 3.314 / 3.92
        sampling = (f"3 runs that differ by sampling alone span up to {limit:.2f} 95% of the time, from their "
                    f"widest 95% interval, {widest:.2f} wide")
        if mode == "eagle":      # 2.0x, 1.6x, 2.4x: far apart, each run's interval narrow
            assert np.ptp(speedups) > limit and console[mode, "E2E speedup"][-1] == WIDER
            verdict = (f"eagle E2E speedup: the runs disagree more than sampling explains (they span {span}; "
                       f"{sampling}): read it as {low:.2f}x..{high:.2f}x (the 95% t-interval of the mean of 3 runs)")
        else:                    # the same gain each run: only sampling noise between them
            assert np.ptp(speedups) < limit and console[mode, "E2E speedup"][-1] == WITHIN
            low, high = min(low, *(r.low for r in run_ci)), max(high, *(r.high for r in run_ci))
            verdict = (f"draft E2E speedup: the runs agree within sampling (they span {span}; {sampling}): no "
                       f"boot-to-boot difference shows in 3 runs: read it as {low:.2f}x..{high:.2f}x (the 95% "
                       "t-interval of the mean of 3 runs, widened to the runs' own 95% intervals)")
        assert f"between runs: {verdict}" in said and f"- {verdict}" in report_line
    assert "no between-run spread" not in said


def test_two_repeats_are_too_few_for_an_interval_and_show_the_range(days, tmp_path):
    ran = cli("report", str(days[0]), str(days[1]), "--out", str(tmp_path / "two"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    md = _rows((tmp_path / "two" / "report.md").read_text().split("## Between runs")[1], "|")
    ttft = np.array([np.percentile(_raw(d, "baseline")["ttft_ms"], 50) for d in days[:2]])
    assert md["baseline", "TTFT p50"][2:7] == [*map(ms_text, ttft), f"{ms_text(ttft.min())}..{ms_text(ttft.max())}",
                                              ms_text(ttft.std(ddof=1)), "too few runs"]
    said = _one_line(ran.stdout)
    # eagle: 2.0x then 1.6x, each run's interval a few hundredths wide
    assert "between runs: eagle E2E speedup: the runs disagree more than sampling explains" in said
    eagle = said.split("between runs: eagle E2E speedup:")[1].split("between runs:")[0]
    assert "too few runs for an interval (2; it takes 3): their own intervals together span" in eagle
    assert "repeat the run to bound it" in eagle and "read it as" not in eagle and "t-interval" not in eagle


def test_runs_of_different_traces_stay_side_by_side_with_no_spread(days, tmp_path):
    other = _run_folder(tmp_path, 0, _trace(seed=8), name="other")    # another draw of the scenario
    ran = cli("report", str(days[0]), str(other), "--out", str(tmp_path / "mixed"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = _one_line(ran.stdout)
    assert ("no between-run spread is computed: the runs replayed 2 different traces (day1; other): their requests "
            "or send times differ") in said
    assert "between runs:" not in said and "runs of one trace" not in said
    report = (tmp_path / "mixed" / "report.md").read_text()
    assert "No between-run spread is computed: the runs replayed 2 different traces" in report
    side = report.split("## Between runs")[0]
    assert "| day1 | eagle |" in side and "| other | eagle |" in side
    refit = _run_folder(tmp_path, 1, _trace(), name="refit", fleet="h100-70b")   # the same trace, another fleet
    fleets = cli("report", str(days[0]), str(refit))
    assert fleets.returncode == 0, fleets.stdout + fleets.stderr
    assert ("no between-run spread is computed: the runs replayed one trace against 2 different fleets (day1: "
            "synthetic; refit: h100-70b)") in _one_line(fleets.stdout)
    itself = cli("report", str(days[0]), str(days[0]))     # one folder twice is no repeat
    assert itself.returncode == 0 and "is given more than once: a run is no repeat of itself" in _one_line(
        itself.stdout)


def test_the_t_quantile_is_students():
    for df, want in T_975.items():
        assert t_quantile(df) == pytest.approx(want, rel=1e-9)
    assert t_quantile(9, confidence=0.99) == pytest.approx(3.2498355415921263, rel=1e-9)


def test_the_sampling_range_is_the_published_range_of_normals_and_holds_its_false_alarms_at_5_percent():
    from analysis.repeats import range_quantile

    # the 95% studentized range with infinite degrees of freedom (Harter 1960, as in every table)
    assert [round(range_quantile(n), 3) for n in (2, 3, 4, 5, 10)] == [2.772, 3.314, 3.633, 3.858, 4.474]
    rng = np.random.default_rng(7)
    for n in (2, 3, 10):   # runs that differ by sampling alone trip the rule 5% of the time, any n
        alarms = np.ptp(rng.standard_normal((40_000, n)), axis=1) > range_quantile(n)
        assert abs(alarms.mean() - 0.05) < 0.005, (n, alarms.mean())
