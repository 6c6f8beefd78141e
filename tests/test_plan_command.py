"""`loadtest plan`: a sweep predicted from the simulator's model in virtual time, written as run
folders the analysis reads, with the curves, saturation and crossovers in its report."""

from __future__ import annotations

import math
import re

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, cli


def _cell(sweep, level, mode, metric, statistic, tenant="all"):
    rows = sweep.filter(pc.and_(pc.and_(pc.equal(sweep["level"], level), pc.equal(sweep["mode"], mode)),
                                pc.and_(pc.equal(sweep["tenant"], tenant), pc.and_(
                                    pc.equal(sweep["metric"], metric), pc.equal(sweep["statistic"], statistic)))))
    return rows.to_pylist()[0]["value"] if rows.num_rows else None


def test_a_plan_predicts_curves_saturation_and_crossovers_in_seconds(tmp_path):
    out = cli("plan", "--modes", "baseline,draft,eagle", "--rate-scale", "0.25,1,4", "--requests", "150",
              "--gpu-hour-cost", "2.5", "--out", str(tmp_path), "--run-id", "p")
    assert out.returncode == 0, out.stdout + out.stderr
    run = tmp_path / "p"
    sweep = pq.read_table(run / "sweep.parquet")
    assert set(sweep["level"].to_pylist()) == {"scale-0.25", "scale-1", "scale-4"}
    assert set(sweep["mode"].to_pylist()) == {"baseline", "draft", "eagle"}
    # speculation pays less as the load grows, as the model says
    for mode in ("draft", "eagle"):
        low, high = (_cell(sweep, lv, mode, "speedup_e2e", "geomean") for lv in ("scale-0.25", "scale-4"))
        assert low > high, (mode, low, high)
    # at 4x the scenario's rate the baseline's completions fall behind what is offered
    offered = sweep.filter(pc.equal(sweep["level"], "scale-4"))["offered_req_per_s"][0].as_py()
    assert _cell(sweep, "scale-4", "baseline", "req_per_s", "makespan") < 0.9 * offered
    report = (run / "report.md").read_text()
    assert "*saturated*" in report and "## Where speculation stops paying" in report
    assert "| code-agent |" in report and "never pays in the range" in report     # the draft model on code
    # what each mode costs: the power model's energy per output token at every level, and a price per
    # million output tokens from the throughput per GPU (4 GPUs a mode, 2.5 a GPU-hour)
    rows = [line for line in report.splitlines() if line.startswith("| scale-")]
    assert "J per output token (95% CI)" in report and "cost per M output tokens at 2.5 per GPU-hour" in report
    for mode in ("baseline", "eagle"):
        joules = _cell(sweep, "scale-0.25", mode, "energy_per_output_token_j", "steady")
        tokens = _cell(sweep, "scale-0.25", mode, "out_tok_per_s", "rate")
        assert 0.3 < joules < 20, (mode, joules)   # between ML.ENERGY's 0.42 J (batch 768) and 3.85 J (batch 8)
        section = report.split(f"## {mode}")[1]
        first = next(line for line in section.splitlines() if line.startswith("| scale-0.25"))
        assert first.rstrip(" |").endswith(f"{2.5 * 4 / (tokens * 3600) * 1e6:,.2f}") and f"{joules:#.3g}" in first
    assert len(rows) == 9 and (run / "levels" / "scale-1" / "gpu_metrics" / "mode=eagle").is_dir()
    # each level is a run folder like any other
    again = cli("report", str(run / "levels" / "scale-1"))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "predicted by the simulator's performance model in virtual time" in out.stdout


@pytest.mark.e2e
@pytest.mark.serial   # the model against the measurement: nothing may share a core with it
def test_the_plan_predicts_what_the_simulator_serves_at_a_low_load(tmp_path, world_fleet):
    """saas-mix's long prompts at a quarter of its rate: where the first token waits on prefill."""
    args = ("--modes", "baseline,eagle", "--scenario", "saas-mix", "--requests", "40", "--out", str(tmp_path))
    plan = cli("plan", "--fleet", str(world_fleet.fleet_file), *args, "--rate-scale", "0.25", "--run-id", "plan")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    live = cli("run", "--endpoints", str(world_fleet.state), *args, "--rate-scale", "0.25", "--run-id", "live",
               "--cooldown", "0")
    assert live.returncode == 0, live.stdout + live.stderr
    predicted = pq.read_table(tmp_path / "plan" / "levels" / "scale-0.25" / "summary.parquet").to_pylist()
    measured = pq.read_table(tmp_path / "live" / "summary.parquet").to_pylist()

    def value(rows, mode, metric, stat):
        return next(r["value"] for r in rows if (r["mode"], r["tenant"], r["metric"], r["statistic"])
                    == (mode, "all", metric, stat))

    for mode in ("baseline", "eagle"):
        assert value(predicted, mode, "tpot_ms", "p50") == pytest.approx(value(measured, mode, "tpot_ms", "p50"),
                                                                         rel=0.10), mode
        assert value(predicted, mode, "ttft_ms", "p50") == pytest.approx(value(measured, mode, "ttft_ms", "p50"),
                                                                         rel=0.15), mode


def test_plan_refuses_bad_levels_and_unknown_hardware_in_one_line(tmp_path):
    down = cli("plan", "--rate-scale", "4,2", "--out", str(tmp_path))
    assert down.returncode == 2 and "the levels must increase, got '4,2'" in down.stderr
    hw = cli("plan", "--hardware", "tpu-v9", "--out", str(tmp_path))
    assert hw.returncode == 2 and "--hardware 'tpu-v9': not a simulator profile" in hw.stderr
    assert "Traceback" not in down.stderr + hw.stderr


def test_the_planned_capacity_names_the_binding_tenant_and_repeats_exactly(tmp_path):
    answers = []
    for run_id in ("c1", "c2"):
        out = cli("plan", "--capacity", "--peak", "10", "--modes", "baseline,eagle", "--rate-scale", "1",
                  "--requests", "60", "--out", str(tmp_path), "--run-id", run_id)
        assert out.returncode == 0, out.stdout + out.stderr
        report = (tmp_path / run_id / "report.md").read_text()
        assert "## Capacity: the highest offered rate within every tenant's SLOs" in report
        # 60 requests: every probe's p99s are of a few requests a tenant, and the decision says so
        assert "**Capacity decision: " in report and "probes passed or failed on p99s their data cannot bound" in report
        probes = pq.read_table(tmp_path / run_id / "capacity.parquet")
        assert set(probes["mode"].to_pylist()) == {"baseline", "eagle"}
        # each mode's answer: the highest rate that passed, below the lowest that failed
        for mode in ("baseline", "eagle"):
            mine = [p for p in probes.to_pylist() if p["mode"] == mode]
            best = max((p["rate"] for p in mine if p["passed"]), default=None)
            worst = min((p["rate"] for p in mine if not p["passed"]), default=None)
            assert best is not None and (worst is None or best < worst), mine
            # --peak 10: the replicas are 10 req/s over the rate one replica held (local-sim: 1 replica
            # of TP4 a mode), rounded up, each on 4 GPUs, as the capacity table above says it
            held = re.search(rf"^\| {mode} \| (>= )?([\d,.]+) \|", report.split("## The fleet")[0], re.M)
            replicas = math.ceil(10 / float(held.group(2).replace(",", "")))
            bound = "<= " if held.group(1) else ""
            row = re.search(rf"^\| {mode} \| [^|]+ \| {bound}{replicas:,} \| {bound}{4 * replicas:,} \| ([\d.]+) \|$",
                            report, re.M)
            assert row, report
            # the energy there: the passing probes' at the rate found, in kWh per million output tokens
            joules = [p["energy_per_output_token_j"] for p in mine if p["rate"] == best and p["passed"]]
            assert row.group(1) == f"{sum(joules) / len(joules) * 1e6 / 3.6e6:,.3g}", (row.group(1), joules)
        assert "## The fleet for a peak of 10.00 req/s" in report and "at a peak of 10.00 req/s" in report
        answers.append(report.split("## Capacity")[1])
    assert answers[0] == answers[1]     # the model is deterministic for its seed


def test_capacity_needs_slo_targets(tmp_path):
    no_slo = tmp_path / "no-slo.toml"
    no_slo.write_text("\n".join(line for line in (ROOT / "scenarios" / "builtin" / "chat.toml").read_text().splitlines()
                                if not line.startswith("slo")))
    out = cli("plan", "--capacity", "--scenario", str(no_slo), "--out", str(tmp_path))
    assert out.returncode == 2 and "--capacity: the scenario chat sets no SLO targets" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == [no_slo] and "Traceback" not in out.stderr   # nothing written


def test_the_planned_replica_is_the_live_one_with_its_extra_flags_and_replicas(tmp_path):
    from cluster.fleet import FleetSpec
    from loadtest.engine.plan import predicted_records, simulator_of
    from scenarios.spec import load_scenario
    from scenarios.trace import build_trace

    fleet = FleetSpec.model_validate({"name": "f", "engine": "sim", "model": "meta-llama/Llama-3.3-70B-Instruct",
                                      "tensor_parallel_size": 4, "replicas": 2, "max_model_len": 2048,
                                      "modes": {"eagle": {"method": "eagle", "num_speculative_tokens": 5,
                                                          "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B"}}})
    server = simulator_of(fleet, "eagle", None)
    assert server.cfg.max_model_len == 2048               # the fleet's field, as a replica gets it (--max-model-len)
    scenario, _ = load_scenario("saas-mix")
    trace = build_trace(scenario, requests=40, seed=scenario.seed)
    records = predicted_records(trace, server, "eagle", "r", replicas=2)
    assert records.num_rows == 40 and set(records["replica"].to_pylist()) == {"eagle-0", "eagle-1"}
    refused = [r for r in records.to_pylist() if r["status"] == "error"]
    assert all(r["http_status"] == 400 and "maximum context length is 2048" in r["error"] for r in refused)
    assert {r["request_id"] for r in records.to_pylist()} == set(trace["request_id"].to_pylist())


def test_failed_requests_are_not_a_backlog(tmp_path):
    from analysis.sweep import saturated

    cells = {("L", "m", "all", "req_per_s", "rate"): {"value": 8.0},      # 8 done a second of 10 offered ...
             ("L", "m", "all", "requests", "ok"): {"value": 80.0},
             ("L", "m", "all", "requests", "error"): {"value": 20.0},     # ... because 20% were refused
             ("L", "m", "all", "steady_window_s", "length"): {"value": 20.0}}
    assert saturated(cells, "L", "m", 10.0) is False
    cells[("L", "m", "all", "req_per_s", "rate")] = {"value": 5.0}
    assert saturated(cells, "L", "m", 10.0) is True


def test_a_closed_loop_scenario_is_refused_before_anything_is_written(tmp_path):
    closed = tmp_path / "closed.toml"
    closed.write_text((ROOT / "scenarios" / "builtin" / "chat.toml").read_text().replace(
        'process = "poisson"\nrate = 4.0', 'process = "closed"\nconcurrency = 4\n#'))
    out = cli("plan", "--scenario", str(closed), "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and "closed loop" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (tmp_path / "o").exists()


def test_the_offline_engine_keeps_a_closed_loop_full_and_stops_sending_at_a_deadline():
    from cluster.sim.calibration import deployment
    from cluster.sim.offline import SimRequest, simulate

    requests = [SimRequest(i * 0.5, 200, 100) for i in range(40)]
    closed = simulate(deployment(None), requests, concurrency=2)
    starts = sorted(r.arrival_s for r in closed)
    ends = sorted(r.arrival_s + r.e2e_s for r in closed)
    assert starts[:2] == [0.0, 0.0]          # two in flight from the start, each next one as one ends
    assert all(any(abs(s - e) < 1e-9 for e in ends) for s in starts[2:])
    stopped = simulate(deployment(None), requests, stop_s=5.0)           # open loop: arrivals before 5 s
    assert [r is not None for r in stopped] == [i * 0.5 < 5.0 for i in range(40)]
    cut = simulate(deployment(None), requests, concurrency=2, stop_s=10.0)
    sent = [r for r in cut if r is not None]
    assert 2 < len(sent) < 40 and all(r.arrival_s < 10.0 for r in sent)
    assert all(r is None for r in cut[len(sent):])                       # in order: a prefix was sent
