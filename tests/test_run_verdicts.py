"""What `loadtest run` concludes from a run against servers that misbehave: the error gate and its
exit code, a body that is not SSE named as such, a broken /metrics that costs only the server-side
view. Each replays against `loadtest sim` processes with injected faults, through --endpoints."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.long_summary import SummaryView
from analysis.reader import read_requests
from tests.conftest import DATA, cli, sim_server

pytestmark = pytest.mark.e2e
TP4 = ("--tensor-parallel-size", "4", "--served-model-name", "m")


def _run(url: str, tmp_path, run_id: str, *extra: str):
    return cli("run", "--endpoints", f"baseline={url}", "--scenario", str(DATA / "tiny-mix.toml"),
               "--requests", "40", "--out", str(tmp_path), "--run-id", run_id, *extra)


def test_a_run_whose_every_request_failed_exits_1_and_says_why(tmp_path):
    with sim_server(*TP4, "--fault", "html=1") as url:  # 200 with an HTML page, as a login page would
        out = _run(url, tmp_path, "html")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "gate failed: baseline: no request succeeded (40 of 40 sent failed: error/not_sse 40)" in out.stdout
    records = read_requests(tmp_path / "html")
    assert records.num_rows == 40 and set(records["error_kind"].to_pylist()) == {"not_sse"}
    assert "not an SSE stream" in records["error"][0].as_py() and "text/html" in records["error"][0].as_py()
    manifest = json.loads((tmp_path / "html" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gate"] == "failed"
    assert manifest["checks"][0]["kinds"] == {"error/not_sse": 40} and not manifest["checks"][0]["passed"]


def test_errors_past_max_errors_fail_the_run_and_below_it_pass(tmp_path):
    with sim_server(*TP4, "--fault", "http-error=0.3:500", "--seed", "3") as url:
        failing = _run(url, tmp_path, "strict")
        lenient = _run(url, tmp_path, "lenient", "--max-errors", "60%")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "more than --max-errors 10%: error/http" in failing.stdout
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    check = json.loads((tmp_path / "lenient" / "manifest.json").read_text())["checks"][0]
    records = read_requests(tmp_path / "lenient")
    errors = records.filter(pc.equal(records["status"], "error")).num_rows
    assert check["passed"] and check["failed"] == errors > 0 and check["sent"] == 40
    assert f"baseline: {errors} of 40 sent failed: error/http {errors}" in lenient.stdout


def test_a_metrics_page_that_is_not_prometheus_costs_only_the_server_view(tmp_path):
    with sim_server(*TP4, "--fault", "metrics=html") as url:
        out = _run(url, tmp_path, "nometrics")
    assert out.returncode == 0, out.stdout + out.stderr
    notes = [line for line in out.stdout.splitlines() if "no server-side metrics" in line]
    assert len(notes) == 1 and "/metrics is not Prometheus text" in notes[0], out.stdout
    manifest = json.loads((tmp_path / "nometrics" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert "not Prometheus text" in manifest["mode_runs"]["baseline"]["server_metrics"]
    records = read_requests(tmp_path / "nometrics")
    assert set(records["status"].to_pylist()) == {"ok"} and records.num_rows == 40
    with sim_server(*TP4, "--fault", "metrics=404") as url:
        missing = _run(url, tmp_path, "missing")
    assert missing.returncode == 0 and "GET /metrics answered HTTP 404" in missing.stdout, missing.stdout


def test_errors_and_not_sent_are_counted_apart(tmp_path):
    with sim_server(*TP4) as url:
        out = _run(url, tmp_path, "deadline", "--deadline", "1.5")
    assert out.returncode == 0, out.stdout + out.stderr
    view = SummaryView(pq.read_table(tmp_path / "deadline" / "summary.parquet"))
    records = read_requests(tmp_path / "deadline")
    not_sent = records.filter(pc.equal(records["status"], "not_sent")).num_rows
    assert not_sent > 0 and view.get("baseline", "requests", "not_sent") == not_sent
    # the requests its --deadline cut are the client's ends, not the server's errors (as the gate counts)
    cut = records.filter(pc.equal(records["error_kind"], "deadline")).num_rows
    assert cut > 0 and (view.get("baseline", "requests", "failed"), view.get("baseline", "requests", "client")) == (
        0, cut)
    row = next(line for line in out.stdout.splitlines() if line.startswith("│ baseline"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[-2:] == [f"0 +{cut} client", str(not_sent)], row  # errors, then not sent


def test_slo_attainment_is_shown_and_gated_with_slo_gate(tmp_path):
    strict = tmp_path / "strict-mix.toml"
    text = (DATA / "tiny-mix.toml").read_text().replace("ttft_p99_ms = 1000", "ttft_p99_ms = 60000")
    strict.write_text(text + "slo = { e2e_p99_ms = 1 }\n")   # the last tenant, rust: a target no request meets
    with sim_server(*TP4) as url:
        shown = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(strict), "--requests", "20",
                    "--out", str(tmp_path), "--run-id", "shown")
        gated = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(strict), "--requests", "20",
                    "--out", str(tmp_path), "--run-id", "gated", "--slo-gate")
        # every target met as measured, but by 20 requests: a p99 the gate does not judge (exit 3)
        few = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(DATA / "tiny-mix.toml"), "--requests",
                  "20", "--out", str(tmp_path), "--run-id", "few", "--slo-gate")
    assert few.returncode == 3, few.stdout + few.stderr
    said = " ".join(few.stdout.split())
    assert "gate failed" not in said and "gate not judged: baseline: chat: ttft p99 " in said
    assert "too few requests to judge the p99 against its target" in said and "closes from 368 requests" in said
    assert json.loads((tmp_path / "few" / "manifest.json").read_text())["gate"] == "not judged"
    assert "not judged† (100% within)" in few.stdout   # neither met nor missed: said as such
    assert shown.returncode == 0, shown.stdout + shown.stderr   # shown, not gated
    assert "SLOs by tenant" in shown.stdout and "missed" in shown.stdout
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "gate failed: baseline: rust missed its SLO (--slo-gate)" in gated.stdout
    assert "baseline: rust missed its SLO: e2e p99" in gated.stdout and "> 1.0 ms" in gated.stdout
    slos = {s["tenant"]: s for s in json.loads((tmp_path / "gated" / "manifest.json").read_text())["slos"]}
    assert slos["chat"]["passed"] and slos["chat"]["met_share"] == 1.0 and slos["chat"]["verdict"] == "too few to judge"
    assert not slos["rust"]["passed"] and slos["rust"]["met_share"] == 0.0 and slos["rust"]["verdict"] == "missed"
    assert slos["rust"]["checks"]["e2e"]["target_ms"] == 1.0
    # The same answer from the folder alone, again: `loadtest report`.
    again = cli("report", str(tmp_path / "gated"), str(tmp_path / "shown"), "--slo-gate")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "gate failed: gated: baseline: rust missed its SLO (--slo-gate)" in again.stdout
    report = (tmp_path / "gated" / "report.md").read_text()
    assert "| rust | **missed** (0%): e2e p99" in report and "| chat | not judged† (100% within) |" in report
    long = pq.read_table(tmp_path / "gated" / "summary.parquet")
    assert long.schema.names == ["run_id", "mode", "tenant", "metric", "statistic", "value", "ci_low", "ci_high"]
    rows = {(r["tenant"], r["metric"], r["statistic"]): r["value"] for r in long.to_pylist()}
    assert rows[("all", "requests", "ok")] == 20 and rows[("rust", "goodput_share", "share")] == 0.0
    missing = cli("report", str(tmp_path / "no-such-run"))
    assert missing.returncode == 2 and missing.stderr.strip().endswith("no-such-run: no such run folder")


def test_slo_gate_on_a_trace_without_targets_is_refused_before_anything_starts(tmp_path):
    plain = tmp_path / "no-slo.toml"
    plain.write_text((DATA / "tiny-mix.toml").read_text().replace("slo = { ttft_p99_ms = 1000 }\n", ""))
    out = cli("run", "--endpoints", "baseline=http://127.0.0.1:9", "--scenario", str(plain), "--slo-gate",
              "--out", str(tmp_path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.startswith("loadtest run: error: --slo-gate: the trace tiny-mix sets no SLO target")
