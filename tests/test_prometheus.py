"""The client's /metrics, as an SRE uses it: a real Prometheus (Debian's `prometheus`, installed by
`make test`) scrapes a `loadtest run` through the run folder's file_sd targets and ops/prometheus.yml,
its counts agree with the Parquet rows, every query of the Grafana dashboard names a metric
Prometheus holds and Prometheus answers it (the GPU row's for every mode, from the simulator's
dcgm-exporter text); promtool parses every query and turns a run's targets file into the replicas'
GPU targets. Beside it, the tally against numpy on raw rows, and the login rules."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import requests
import yaml

from analysis.reader import read_requests
from cluster.sim.gpu import FAMILIES
from loadtest.live.metrics_server import MetricsServer
from loadtest.request.exporter import NAMES
from loadtest.request.tally import HISTOGRAMS, Tally
from tests.conftest import DATA, ROOT, cli, free_port

PROMETHEUS = Path(os.environ.get("PROMETHEUS", shutil.which("prometheus") or "/usr/bin/prometheus"))
PROMTOOL = PROMETHEUS.with_name("promtool")   # Debian's prometheus package ships both
DASHBOARD = ROOT / "ops" / "grafana" / "loadtest-dashboard.json"
SELECTOR = re.compile(r"(?<![\w:$\"])([a-zA-Z_:][\w:]*)\s*\{")   # a metric name with its label matchers
GPU_ROW = "GPUs: what each mode costs"
# Grafana's variables as one run, one mode of the repeated row (all of them in the GPU row's regex)
VARIABLES = {"$__rate_interval": "10s", "$__range": "10m", "$run": "p1", '=~"$mode"': '=~"baseline|ngram"',
             '"$mode"': '"baseline"'}   # in this order


def _rows(n: int, seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        status = ["ok", "ok", "ok", "error", "not_sent"][i % 5]
        sent = status != "not_sent"
        itl = rng.lognormal(-4.5, 0.6, size=int(rng.integers(1, 12))).tolist() if status == "ok" else []
        rows.append({"tenant": f"t{i % 3}", "status": status, "error_kind": "http" if status == "error" else None,
                     "sent_ns": 1 if sent else None, "completion_tokens": len(itl) * 2 if status == "ok" else None,
                     "n_chunks": len(itl) if sent else None, "itl_ms": [x * 1000 for x in itl] or None,
                     "ttft_ms": itl[0] * 1000 if itl else None,
                     "tpot_ms": float(rng.lognormal(2, 0.5)) if itl else None,
                     "e2e_ms": float(rng.lognormal(7, 1)) if sent else None,
                     "lateness_ms": float(rng.exponential(2)) if sent else None})
    return rows


def test_the_tally_counts_buckets_as_numpy_does_on_the_raw_rows():
    rows = _rows(400)
    whole, part, merged = Tally(), Tally(), Tally()
    for i, row in enumerate(rows):
        whole.observe(row)
        part.observe(row)
        if i % 7 == 0:
            merged.merge(part.take())   # shipped in pieces, as a Locust process does, and added up
    merged.merge(part.take())
    for metric, (column, bounds) in HISTOGRAMS.items():
        for tenant in ("t0", "t1", "t2"):
            # the latencies of the requests that succeeded (as the report counts them), the lateness of every one sent
            mine = [r for r in rows if r["tenant"] == tenant and r["sent_ns"] is not None
                    and (metric == "lateness" or r["status"] == "ok")]
            values = [v / 1000 for r in mine for v in ((r[column] or [])[1:] if metric == "itl"
                                                       else [r[column]] if r[column] is not None else [])]
            h = whole.tenants[tenant].hists[metric]
            expected = [int(np.sum(np.asarray(values) <= b)) for b in bounds] + [len(values)]
            assert [c for _, c in h.cumulative(metric)] == expected, (metric, tenant)
            assert h.sum == pytest.approx(sum(values))
            assert merged.tenants[tenant].hists[metric].counts.tolist() == h.counts.tolist()
            assert merged.tenants[tenant].count(metric) == len(values)   # the percentiles' histogram holds the same
    statuses = {(t, s, k): n for t, tally in whole.tenants.items() for (s, k), n in tally.requests.items()}
    assert sum(statuses.values()) == len(rows)
    assert statuses[("t0", "error", "http")] == sum(1 for r in rows if r["tenant"] == "t0" and r["status"] == "error")
    assert whole.tenants["t1"].tokens == sum(r["completion_tokens"] or 0 for r in rows if r["tenant"] == "t1")


def test_metrics_beyond_loopback_need_a_login_and_every_request_without_it_gets_401(tmp_path, monkeypatch):
    monkeypatch.delenv("LOADTEST_WEB_USER", raising=False)
    monkeypatch.delenv("LOADTEST_WEB_PASSWORD", raising=False)
    out = cli("run", "--metrics-host", "0.0.0.0", "--requests", "5", "--out", str(tmp_path))
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and "LOADTEST_WEB_USER" in line and "Traceback" not in line
    assert not list(tmp_path.iterdir()), "refused before the run folder was made"

    monkeypatch.setenv("LOADTEST_WEB_USER", "sre")
    monkeypatch.setenv("LOADTEST_WEB_PASSWORD", "s3cret-pass")
    with MetricsServer("0.0.0.0", 0, tmp_path / "run") as server:
        url = f"http://127.0.0.1:{server.port}/metrics"
        assert requests.get(url, timeout=5).status_code == 401
        assert requests.get(url, auth=("sre", "wrong"), timeout=5).status_code == 401
        assert requests.get(url.replace("/metrics", "/"), timeout=5).status_code == 401
        ok = requests.get(url, auth=("sre", "s3cret-pass"), timeout=5)
        assert ok.status_code == 200 and "loadtest_requests_total" in ok.text
        assert "s3cret" not in server.targets_path.read_text()


def _prometheus_config(tmp_path: Path) -> Path:
    """ops/prometheus.yml as shipped, beside a results/ folder, scraping every second."""
    (tmp_path / "ops").mkdir()
    config = yaml.safe_load((ROOT / "ops" / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = config["global"]["evaluation_interval"] = "1s"
    for job in config["scrape_configs"]:
        job["file_sd_configs"][0]["refresh_interval"] = "1s"
    path = tmp_path / "ops" / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _query(api: str, promql: str) -> list[dict]:
    body = requests.get(f"{api}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.e2e
def test_a_real_prometheus_scrapes_a_run_and_agrees_with_its_parquet(tmp_path, world_fleet):
    assert PROMETHEUS.exists(), f"{PROMETHEUS} is missing: `make ops-tools` (part of `make test`) installs it"
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    prom = subprocess.Popen([str(PROMETHEUS), f"--config.file={_prometheus_config(tmp_path)}",
                             f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            try:
                if requests.get(f"{api}/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "prometheus never became ready"
            time.sleep(0.2)
        began = time.time()
        out = cli("run", "--scenario", str(DATA / "tiny-mix.toml"), "--endpoints", str(world_fleet.state),
                  "--modes", "baseline,ngram", "--requests", "80", "--mode-order", "parallel", "--workers", "2",
                  "--metrics-linger", "4", "--out", str(tmp_path / "results"), "--run-id", "p1")
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert "client metrics: http://127.0.0.1:" in out.stdout
        run_dir = tmp_path / "results" / "p1"
        assert not list((tmp_path / "results" / "prometheus-targets").iterdir()), "the run is over: targets gone"
        assert json.loads((run_dir / "manifest.json").read_text())["metrics"].startswith("http://127.0.0.1:")

        records = read_requests(run_dir, columns=["mode", "tenant", "status", "ttft_ms"])
        by_status = _query(api, "sum by (mode, tenant, status) "
                           '(last_over_time(loadtest_requests_total{run="p1"}[10m]))')
        seen = {(r["metric"]["mode"], r["metric"]["tenant"], r["metric"]["status"]): int(float(r["value"][1]))
                for r in by_status if float(r["value"][1])}   # every outcome's counter starts at 0
        expected = {}
        for mode, tenant, status in zip(*(records[c].to_pylist() for c in ("mode", "tenant", "status")), strict=True):
            expected[(mode, tenant, status)] = expected.get((mode, tenant, status), 0) + 1
        assert seen == expected, "Prometheus's request counts are the Parquet rows"
        assert sum(seen.values()) == 160
        ttft = _query(api, 'sum by (mode) (last_over_time(loadtest_ttft_seconds_count{run="p1"}[10m]))')
        ttft_rows = pc.is_valid(records["ttft_ms"])
        assert {r["metric"]["mode"] for r in ttft} == {"baseline", "ngram"}
        for r in ttft:
            mode = r["metric"]["mode"]
            mine = pc.and_(ttft_rows, pc.equal(records["mode"], mode))
            assert int(float(r["value"][1])) == pc.sum(mine.cast("int64")).as_py(), mode
        server = _query(api, 'count by (mode) (last_over_time(vllm:num_requests_running{run="p1"}[10m]))')
        assert {r["metric"]["mode"] for r in server} == {"baseline", "ngram"}, "the replicas, labelled by mode"

        names = set(requests.get(f"{api}/api/v1/label/__name__/values", timeout=10).json()["data"])
        assert set(NAMES) - {"loadtest_requests_in_flight", "loadtest_requests_scheduled"} <= {
            re.sub(r"_(bucket|count|sum)$", "", n) for n in names}
        assert {"loadtest_requests_in_flight", "loadtest_requests_scheduled"} <= names
        used = _dashboard_metrics()
        assert used - names == set(), "every dashboard query names a metric Prometheus holds"
        assert {n for n in used if n.startswith("vllm:")} and {n for n in used if n.startswith("loadtest_")}
        summary = pq.read_table(run_dir / "summary.parquet").to_pylist()
        j_per_token = {r["mode"]: r["value"] for r in summary
                       if r["metric"] == "energy_per_output_token_j" and r["tenant"] == "all"}
        _every_dashboard_query_answers(api, began, time.time(), j_per_token)
    finally:
        if prom.poll() is None:
            os.killpg(prom.pid, signal.SIGTERM)
        try:
            prom.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(prom.pid, signal.SIGKILL)
            prom.wait()


def _every_dashboard_query_answers(api: str, start: float, end: float, j_per_token: dict[str, float]) -> None:
    """Every query of the board, its variables set to the run, evaluated by Prometheus over the run
    (a query that does not parse, or a join that matches many to one, is an error); the GPU row's
    answer for every mode, each a finite figure, its J per output token near summary.parquet's
    (`j_per_token`, over the steady window; the board's is over a minute, idle edges and all)."""
    for row, panel, target in _targets():
        expr = _filled(target["expr"])
        body = requests.get(f"{api}/api/v1/query_range", timeout=10,
                            params={"query": expr, "start": start, "end": end + 1, "step": "1s"}).json()
        assert body["status"] == "success", (panel["title"], expr, body)
        if row != GPU_ROW:
            continue
        series = body["data"]["result"]
        assert {r["metric"].get("mode") for r in series} == {"baseline", "ngram"}, (panel["title"], expr, series)
        for r in series:
            values = [float(v) for _, v in r["values"]]
            assert values and all(np.isfinite(values)) and min(values) >= 0, (panel["title"], expr, r)
            if panel["type"] == "stat":
                assert max(values) == 0, "the simulator's GPUs raise no XID unless told to"
            elif "Energy per output token" in panel["title"]:
                report = j_per_token[r["metric"]["mode"]]
                assert 0.5 < float(np.median(values)) / report < 2, f"J per output token as the report's {report}: {r}"


def _targets() -> list[tuple[str, dict, dict]]:
    """(the row's title, the panel, the target) for every query of the board, in order."""
    dash = json.loads(DASHBOARD.read_text())
    out, row = [], None
    for panel in dash["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        for target in panel.get("targets", []):
            out.append((row, panel, target))
    return out


def _filled(expr: str) -> str:
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


def _dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's queries select, and a check of its shape: one row per mode,
    repeated over $mode, then one row comparing the modes' GPUs, each query by mode."""
    dash = json.loads(DASHBOARD.read_text())
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    assert [r.get("repeat") for r in rows] == ["mode", None], "one row per mode, repeated over $mode, then the GPUs"
    assert rows[1]["title"] == GPU_ROW
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource", "run", "mode"}
    names = set()
    for row, panel, target in _targets():
        expr = target["expr"]
        found = set(SELECTOR.findall(expr))
        assert found, f"{panel['title']}: {expr} selects no metric"
        names |= found
        selectors = re.findall(r"\{([^}]*)\}", expr)
        if row == GPU_ROW:   # every mode chosen, side by side: each selector takes them all, each figure per mode
            assert all('mode=~"$mode"' in sel for sel in selectors), expr
            assert set(re.findall(r"\b(by|on|ignoring|without|group_left|group_right)\s*\(([^)]*)\)", expr)) <= {
                ("by", "mode"), ("on", "mode")}, expr
            assert re.match(r"(sum|avg|max|min) by \(mode\)", expr) and target["legendFormat"].startswith("{{mode}}")
        else:
            assert all('mode="$mode"' in sel for sel in selectors), expr
    return names


def test_the_dashboard_is_valid_json_with_a_query_on_every_panel():
    spec = importlib.util.spec_from_file_location("dashboard", ROOT / "ops" / "grafana" / "dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text() == module.render(), "loadtest-dashboard.json is what ops/grafana/dashboard.py writes"
    dash = json.loads(DASHBOARD.read_text())
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
    names = _dashboard_metrics()
    sim = set(re.findall(r'"(vllm:[a-z0-9_:]+)"', (ROOT / "cluster" / "sim" / "metrics.py").read_text()))
    served = sim | {f"{n}_total" for n in sim} | {f"{n}_bucket" for n in sim}
    assert {n for n in names if n.startswith("vllm:")} <= served, "the simulator serves every vllm:* name it uses"
    dcgm = {n for n in names if n.startswith("DCGM_")}
    assert dcgm == {name for name, *_ in FAMILIES}, "the GPU row reads every DCGM field the simulator serves"
    stats = [p for p in dash["panels"] if p["type"] == "stat"]
    assert [p["fieldConfig"]["defaults"]["thresholds"]["steps"] for p in stats] == [
        [{"color": "green", "value": None}, {"color": "red", "value": 1}]], "XID errors: red from the first"


def test_promtool_parses_every_query_and_turns_each_replica_into_its_gpu_target(tmp_path):
    """Cheap, no server: promtool parses ops/prometheus.yml and every dashboard query (as recording
    rules), and runs the GPU job's relabelling on the targets file a run writes: each replica's GPU
    exporter, the simulator's own <base>/dcgm/metrics or a node's dcgm-exporter at :9400, labelled
    as the replica is."""
    assert PROMTOOL.exists(), f"{PROMTOOL} is missing: `make ops-tools` (part of `make test`) installs prometheus"
    rules = [{"record": f"dashboard:query_{i}", "expr": _filled(t["expr"])} for i, (_, _, t) in enumerate(_targets())]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = subprocess.run([str(PROMTOOL), "check", "rules", str(tmp_path / "rules.yml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and f"SUCCESS: {len(rules)} rules found" in out.stdout, out.stdout + out.stderr

    (tmp_path / "ops").mkdir()
    # promtool serves nothing: no "prometheus" in its command line (tests/invariants.py would take it for the server)
    path = tmp_path / "ops" / "scrape.yml"
    path.write_text((ROOT / "ops" / "prometheus.yml").read_text())
    (tmp_path / "results" / "r1").mkdir(parents=True)   # the run's folder, as the command makes it
    with MetricsServer("127.0.0.1", 0, tmp_path / "results" / "r1") as server:
        server.watch("eagle", [("eagle-0", "http://127.0.0.1:8001"), ("eagle-1", "http://10.0.0.7:8001/proxy/e1")],
                     [("eagle-0", "http://127.0.0.1:8001/dcgm/metrics"), ("eagle-1", "http://10.0.0.7:9400/metrics")])
        server.watch("baseline", [("baseline-0", "http://[fd00::5]:8002")],
                     [("baseline-0", "http://[fd00::5]:9400/metrics")])
        out = subprocess.run([str(PROMTOOL), "check", "config", str(path)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "SUCCESS" in out.stdout and "WARNING" not in out.stdout + out.stderr, out
        run = subprocess.run([str(PROMTOOL), "check", "service-discovery", "--timeout=1s", str(path), "dcgm"],
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    found = sorted(((t["labels"]["__address__"], t["labels"]["__metrics_path__"], t["labels"]["mode"],
                     t["labels"].get("replica"), t["labels"]["run"])
                    for t in json.loads(run.stdout) if t["labels"]), key=str)
    assert found == [("10.0.0.7:9400", "/metrics", "eagle", "eagle-1", "r1"),
                     ("127.0.0.1:8001", "/dcgm/metrics", "eagle", "eagle-0", "r1"),
                     ("[fd00::5]:9400", "/metrics", "baseline", "baseline-0", "r1")], \
        "each replica's own exporter, labelled as the replica; the client's and the servers' targets dropped"
