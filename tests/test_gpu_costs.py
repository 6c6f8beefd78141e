"""What each mode costs in energy, power and memory (issue 42): the simulator's power model and its
GPUs as dcgm-exporter serves them; the scraper reading a fake dcgm-exporter on loopback, each
fault of a real one (no answer, an answer late, not Prometheus text, a counter that went back, no
energy counter, an XID) as one line with nothing else lost, and NVML taking over where the
exporter fails; and a run's figures, printed and in summary.parquet, reproduced by DuckDB from
gpu_metrics/ and the records."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.cost import per_token
from analysis.gpu import gpu_rows, load_gpu_metrics
from analysis.long_summary import SummaryView
from cluster import gpu_scrape
from cluster.gpu_scrape import GpuSource
from cluster.gpu_telemetry import GpuSample, TelemetryError, parse_dcgm
from cluster.nvml_reader import NOT_AVAILABLE
from cluster.scrape import Scraper
from cluster.sim import perf_model
from cluster.sim.gpu import GpuMeter, dcgm_text, gpu_uuid
from cluster.sim.power import CONTEXT_POWER_W, POWER_LIMIT_W, PowerModel
from cluster.sim.profiles import HARDWARE, MODELS
from tests.conftest import DATA, cli
from tests.fake_dcgm import FOREIGN_W, fake_dcgm

H100 = HARDWARE["h100-sxm"]
LLAMA70 = MODELS["meta-llama/Llama-3.3-70B-Instruct"]


# ---- the power model and the simulated GPUs -------------------------------------------------------
def test_a_prefill_step_draws_the_board_limit_and_no_more():
    dep = perf_model.Deployment(H100, LLAMA70, 4)
    seconds = perf_model.step_s(dep, 0, 0, prefill_tokens=8192, prefill_kv_tokens=8192, n_prefill=4)
    work = perf_model.step_work(dep, 0, 0, prefill_tokens=8192, prefill_kv_tokens=8192, n_prefill=4)
    assert PowerModel.of(H100).step_watts(seconds, work) == POWER_LIMIT_W["h100-sxm"]


def test_speculation_adds_work_to_a_step_and_a_draft_model_draws_less_than_its_target():
    base = perf_model.Deployment(H100, LLAMA70, 4)
    from cluster.sim.calibration import deployment
    eagle, draft = deployment("eagle", 5), deployment("draft_model", 5)
    power = PowerModel.of(H100)
    watts = {name: power.step_watts(perf_model.step_s(d, 8, 8 * 500), perf_model.step_work(d, 8, 8 * 500))
             for name, d in (("base", base), ("eagle", eagle), ("draft", draft))}
    assert perf_model.step_work(eagle, 8, 4000).flops > perf_model.step_work(base, 8, 4000).flops
    assert watts["draft"] < watts["base"] < watts["eagle"] < POWER_LIMIT_W["h100-sxm"], watts


def test_an_idle_gpu_draws_its_static_power_and_a_step_is_spread_over_its_time():
    meter = GpuMeter(PowerModel.of(H100), started=100.0)
    assert meter.at(102.0)[0] == pytest.approx(2 * CONTEXT_POWER_W)
    assert meter.averages(100.5) == (pytest.approx(CONTEXT_POWER_W), 0.0)
    meter.stepped(end=103.0, seconds=0.5, joules=300.0)           # 600 W from 102.5 to 103.0
    energy, busy = meter.at(103.0)
    assert energy == pytest.approx(2.5 * CONTEXT_POWER_W + 300.0) and busy == 0.5
    watts, util = meter.averages(103.0)                            # the last second: half idle, half 600 W
    assert watts == pytest.approx((0.5 * CONTEXT_POWER_W + 300.0) / 1.0) and util == pytest.approx(50.0)
    slow = GpuMeter(PowerModel.of(H100), started=0.0, time_scale=10.0)   # 10 wall seconds per model second
    assert slow.at(10.0)[0] == pytest.approx(CONTEXT_POWER_W)


@pytest.mark.parametrize("host_label", ["hostname", "Hostname"])
def test_the_exporters_text_reads_back_with_either_host_label(host_label):
    samples = [GpuSample("n", 1.0, f"GPU-{i}", i, "node-1", "NVIDIA H100 80GB HBM3", 512.5 + i, 5e9 + i, 70000.0,
                         11559.0, 97.0, 0.0) for i in range(2)]
    text = dcgm_text(samples, host_label)
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text and "_total" not in text
    assert parse_dcgm(text, "n", 1.0) == samples


# ---- the scraper against a fake dcgm-exporter on loopback -------------------------------------------
OWN = frozenset({0, 1, 2, 3})


def scrape(run_dir: Path, sources: list[GpuSource], seconds: float = 0.9) -> Scraper:
    with Scraper(run_dir, interval_s=0.15) as scraper:
        scraper.watch("m", [], sources)
        time.sleep(seconds)
        scraper.unwatch("m")
    return scraper


def rows_of(run_dir: Path) -> dict[tuple[str, str], tuple[float, float | None, float | None]]:
    gpu = load_gpu_metrics(run_dir)
    assert gpu is not None
    t0, t1 = min(gpu["time_ns"].to_pylist()), max(gpu["time_ns"].to_pylist())
    done = np.array([t1], dtype=np.int64)
    found = gpu_rows(gpu, "m", (t0, t1), "makespan", done - 1, done, np.array([1000.0]))
    return {(metric, stat): (value, low, high) for metric, stat, value, low, high in found}


@pytest.mark.parametrize("fault", [None, "reset", "no-energy", "xid"])
def test_each_replica_keeps_only_its_own_gpus_and_its_energy_is_measured_through_a_faulty_counter(tmp_path, fault):
    with fake_dcgm(watts=(400.0,), fault=fault) as fake:
        scraper = scrape(tmp_path, [GpuSource("m-0", "127.0.0.1", "dcgm-exporter", f"{fake.url}/metrics", OWN)])
    assert scraper.gpu_problem("m") is None
    gpu = load_gpu_metrics(tmp_path).to_pylist()
    assert {r["gpu"] for r in gpu} == set(OWN) and {r["source"] for r in gpu} == {"dcgm-exporter"}   # never GPU 4
    rows = rows_of(tmp_path)
    method = "power" if fault == "no-energy" else "counter"
    assert ("gpu_samples", f"dcgm-exporter/{method}") in rows
    assert rows[("gpu_power_w", "mean")][0] == pytest.approx(400.0, rel=0.05), rows   # not 999 W's share
    assert rows[("gpu_power_w", "peak")][0] == 400.0
    assert rows[("gpus", "count")][0] == 4 and rows[("gpu_memory_used_mib", "peak")][0] == 70_003.0
    assert rows[("gpu_xid_errors", "gpus")][0] == (1.0 if fault == "xid" else 0.0)
    assert FOREIGN_W not in [r["power_w"] for r in gpu]


@pytest.mark.parametrize("fault,said", [("404", "answered HTTP 404"), ("garbage", "not Prometheus text"),
                                        ("hang", "did not answer (ReadTimeout)"), ("closed", "did not answer")])
def test_an_exporter_that_fails_is_one_line_naming_the_node_and_nothing_else_is_lost(tmp_path, fault, said,
                                                                                      monkeypatch):
    monkeypatch.setattr(gpu_scrape, "EXPORTER_TIMEOUT_S", 0.3)   # a late answer, sooner than the scraper's 2 s
    with fake_dcgm(fault=None if fault == "closed" else fault) as fake:
        url = f"{fake.url}/metrics" if fault != "closed" else "http://127.0.0.1:9/metrics"
        scraper = scrape(tmp_path, [GpuSource("m-0", "127.0.0.1", "dcgm-exporter", url, OWN)],
                         seconds=0.3 if fault == "hang" else 1.0)
    problem = scraper.gpu_problem("m")
    assert problem is not None and "\n" not in problem and "Traceback" not in problem
    assert problem.startswith("node 127.0.0.1 (replica m-0): the GPU exporter") and said in problem, problem
    assert load_gpu_metrics(tmp_path) is None   # nothing written that was not read


def test_nvml_takes_over_where_the_exporter_fails_and_says_both_when_it_cannot(tmp_path):
    def nvml() -> list[GpuSample]:
        return [GpuSample("127.0.0.1", time.time(), f"GPU-{i}", i, power_w=300.0, energy_mj=1e6 + time.time() * 3e5)
                for i in sorted(OWN)]

    asked: list[int] = []

    def no_nvml() -> list[GpuSample]:
        asked.append(1)
        raise TelemetryError(f"127.0.0.1: {NOT_AVAILABLE}")

    with fake_dcgm(fault="404") as fake:
        url = f"{fake.url}/metrics"
        taken = scrape(tmp_path / "a", [GpuSource("m-0", "127.0.0.1", "dcgm-exporter", url, OWN, nvml)])
        both = scrape(tmp_path / "b", [GpuSource("m-0", "127.0.0.1", "dcgm-exporter", url, OWN, no_nvml)], 0.3)
    assert taken.gpu_problem("m") is None
    assert {r["source"] for r in load_gpu_metrics(tmp_path / "a").to_pylist()} == {"nvml"}
    assert rows_of(tmp_path / "a")[("gpu_power_w", "mean")][0] == pytest.approx(300.0, rel=0.02)
    assert "answered HTTP 404; NVML: 127.0.0.1: NVML is not available" in both.gpu_problem("m")
    assert len(asked) == 1, "a node without NVML is not asked again every second"


# ---- a run's figures, reproduced from its files ------------------------------------------------------
def window_of(db: duckdb.DuckDBPyConnection, run_dir: Path, v: SummaryView, mode: str) -> tuple[int, int, float]:
    """The mode's window as analysis.steady draws it, and the output tokens completed in it, in SQL."""
    records = str(run_dir / "requests" / "*" / "*.parquet")
    first, last, done = db.execute(
        "select min(scheduled_ns) filter (sent_ns is not null), max(scheduled_ns) filter (sent_ns is not null), "
        "max(last_token_ns) filter (status = 'ok') from read_parquet(?, hive_partitioning=1) where mode = ?",
        [records, mode]).fetchone()
    if per_token(v, mode).window == "steady":
        start, end = first + int(v.get(mode, "e2e_ms", "p99") * 1e6), last
    else:
        start, end = first, done
    (tokens,) = db.execute("select sum(completion_tokens) from read_parquet(?, hive_partitioning=1) where mode = ? "
                           "and status = 'ok' and last_token_ns between ? and ?",
                           [records, mode, start, end]).fetchone()
    return start, end, float(tokens)


@pytest.mark.e2e
def test_duckdb_over_gpu_metrics_reproduces_every_printed_figure(session_run):
    run_dir, ran = session_run
    v = SummaryView(pq.read_table(run_dir / "summary.parquet"))
    db = duckdb.connect()
    samples = str(run_dir / "gpu_metrics" / "*" / "*.parquet")
    shown = ran.stdout
    for mode in ("baseline", "eagle"):
        pt = per_token(v, mode)
        assert pt is not None, mode
        start, end, tokens = window_of(db, run_dir, v, mode)
        per_gpu = db.execute(
            """select (arg_max(energy_mj, time_ns) - arg_min(energy_mj, time_ns)) / 1e3
                      / ((max(time_ns) - min(time_ns)) / 1e9), max(power_w)
               from read_parquet(?, hive_partitioning=1) where mode = ? and time_ns between ? and ?
               group by replica, uuid""", [samples, mode, start, end]).fetchall()
        watts = sum(w for w, _ in per_gpu)
        assert pt.joules == pytest.approx(watts * (end - start) / 1e9 / tokens, rel=1e-9)
        assert v.get(mode, "gpu_power_w", "mean") == pytest.approx(watts / len(per_gpu), rel=1e-9)
        assert v.get(mode, "gpu_power_w", "peak") == max(peak for _, peak in per_gpu)
        used, free, gpus, source = db.execute(
            "select max(fb_used_mib), min(fb_free_mib), count(distinct uuid), any_value(source) "
            "from read_parquet(?, hive_partitioning=1) where mode = ?", [samples, mode]).fetchone()
        assert (v.get(mode, "gpu_memory_used_mib", "peak"), v.get(mode, "gpu_memory_free_mib", "min"),
                v.get(mode, "gpus", "count")) == (used, free, gpus) and source == "simulator"
        row = next(line for line in shown.splitlines() if line.startswith(f"│ {mode} ") and "simulator" in line)
        assert pt.text().split(" [")[0] in row and f"{used / 1024:.1f}" in row and f"{free / 1024:.1f}" in row, row
    # the ratio over one kind of window: the steady windows, or the makespans where one had none
    a, b = per_token(v, "eagle"), per_token(v, "baseline")
    over = "steady" if a.window == b.window == "steady" else "makespan"
    ratio = v.get("eagle", "energy_per_output_token_j", over) / v.get("baseline", "energy_per_output_token_j", over)
    decision = json.loads((run_dir / "manifest.json").read_text())["decision"]["text"]
    if decision.startswith("deploy"):
        assert f"{ratio:.2f}x the baseline's energy per output token" in decision, decision


@pytest.mark.e2e
def test_a_run_whose_gpu_exporter_answers_garbage_completes_and_says_not_measured(world_fleet, tmp_path):
    """The world's replicas, their GPUs read from a broken exporter (a copy of the state file whose
    fleet names it): the run completes, one line per mode names the node, every record is there,
    and the report's cost table says not measured."""
    state = json.loads(world_fleet.state.read_text())
    with fake_dcgm(fault="garbage") as fake:
        state["fleet_spec"]["gpu_telemetry"] = {"exporter": f"{fake.url}/metrics", "exporters": {}, "nvml": False}
        copy = tmp_path / "state.json"
        copy.write_text(json.dumps(state))
        ran = cli("run", "--endpoints", str(copy), "--modes", "baseline,eagle", "--scenario",
                  str(DATA / "tiny-mix.toml"), "--requests", "12", "--cooldown", "0", "--out", str(tmp_path / "out"),
                  "--run-id", "g")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = [line for line in ran.stdout.splitlines() if "GPU telemetry not measured" in line]
    assert len(lines) == 2 and all("not Prometheus text" in line for line in lines), ran.stdout
    run_dir = tmp_path / "out" / "g"
    records = f"{run_dir}/requests/*/*.parquet"
    assert duckdb.connect().execute(f"select count(*) from read_parquet('{records}')").fetchone() == (24,)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert all("not Prometheus text" in manifest["mode_runs"][m]["gpu_metrics"] for m in ("baseline", "eagle"))
    report = (run_dir / "report.md").read_text()
    assert "| baseline | not measured |" in report and "GPU telemetry not measured" in report


# ---- what a real exporter does that the figures must survive ------------------------------------------
def test_a_counter_that_went_back_a_little_adds_nothing_and_one_that_restarted_counts_from_zero():
    from analysis.gpu import energy_rise

    assert energy_rise(np.array([5e9, 5e9 + 1e6, 5e9 + 9e5, 5e9 + 2e6])) == (2e6, 0)   # out of order: no 5e9
    assert energy_rise(np.array([5e9, 5e9 + 1e6, 3e5, 8e5])) == (1e6 + 3e5 + 5e5, 1)   # a driver reload


def test_an_exporter_that_refreshes_every_few_scrapes_measures_the_power_between_its_changes():
    """dcgm-exporter refreshes every 30 s by default: scraped each second, it repeats a reading."""
    from analysis.gpu import _watts

    t = np.arange(0, 20) * 1_000_000_000
    counter = 1e9 + 400.0 * 1e3 * (t // 5_000_000_000) * 5   # 400 W, a new reading every 5 s
    assert _watts(t, counter.astype(np.float64), np.full(20, np.nan)).watts == pytest.approx(400.0)


def test_gpus_named_by_uuid_and_gpus_two_replicas_share_count_once(tmp_path):
    with fake_dcgm(watts=(400.0,)) as fake:
        uuids = frozenset({gpu_uuid("node-a", 9400, i) for i in (1, 2)})
        url = f"{fake.url}/metrics"
        scrape(tmp_path, [GpuSource("m-0", "127.0.0.1", "dcgm-exporter", url, None, uuids=uuids),
                          GpuSource("m-1", "127.0.0.1", "dcgm-exporter", url, None, uuids=uuids)])
    gpu = load_gpu_metrics(tmp_path).to_pylist()
    assert {r["gpu"] for r in gpu} == {1, 2} and {r["replica"] for r in gpu} == {"m-0", "m-1"}
    rows = rows_of(tmp_path)
    assert rows[("gpus", "count")][0] == 2 and rows[("gpu_power_w", "mean")][0] == pytest.approx(400.0, rel=0.05)


def test_an_exporter_naming_a_gpu_by_anything_but_its_index_is_one_line():
    text = dcgm_text([GpuSample("n", 1.0, "GPU-0", 0, power_w=300.0)]).replace('gpu="0"', 'gpu="nvidia0"')
    with pytest.raises(TelemetryError, match="names GPU 'nvidia0', not an index"):
        parse_dcgm(text, "node-b", 1.0)


def test_an_energy_of_zero_is_no_ratio_and_different_windows_are_not_compared():
    from analysis.cost import cost_clause, energy_ratio
    from analysis.long_summary import LONG_SCHEMA

    def summary(rows):
        return SummaryView(pa.Table.from_pylist([{"run_id": "r", "mode": m, "tenant": "all", "metric": metric,
                                                 "statistic": stat, "value": v, "ci_low": None, "ci_high": None}
                                                for m, metric, stat, v in rows], schema=LONG_SCHEMA))

    zero = summary([("baseline", "energy_per_output_token_j", "steady", 0.0),
                    ("eagle", "energy_per_output_token_j", "steady", 2.0)])
    assert energy_ratio(zero, "eagle") is None
    apart = summary([("baseline", "energy_per_output_token_j", "makespan", 2.0),
                     ("eagle", "energy_per_output_token_j", "steady", 2.0)])
    assert cost_clause(apart, "eagle").startswith("energy per output token not comparable (over its steady window, "
                                                  "the baseline's makespan)")
    both = summary([("baseline", "energy_per_output_token_j", "makespan", 2.0),
                    ("eagle", "energy_per_output_token_j", "steady", 2.0),
                    ("eagle", "energy_per_output_token_j", "makespan", 1.5)])
    assert cost_clause(both, "eagle") == "0.75x the baseline's energy per output token (over the makespans)"
