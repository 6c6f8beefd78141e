"""The client's /metrics, as an SRE uses it: a real Prometheus (Debian's `prometheus`, installed by
`make test`) scrapes a `loadtest run` through the run folder's file_sd targets and ops/prometheus.yml,
its counts agree with the Parquet rows, and every query of the Grafana dashboard names a metric
Prometheus holds. Beside it, the tally against numpy on raw rows, and the login rules."""

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
import pytest
import requests
import yaml

from analysis.reader import read_requests
from loadtest.live.metrics_server import MetricsServer
from loadtest.request.exporter import NAMES
from loadtest.request.tally import HISTOGRAMS, Tally
from tests.conftest import DATA, ROOT, cli, free_port

PROMETHEUS = Path(os.environ.get("PROMETHEUS", shutil.which("prometheus") or "/usr/bin/prometheus"))
DASHBOARD = ROOT / "ops" / "grafana" / "loadtest-dashboard.json"
SELECTOR = re.compile(r"(?<![\w:$\"])([a-zA-Z_:][\w:]*)\s*\{")   # a metric name with its label matchers


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
    config["scrape_configs"][0]["file_sd_configs"][0]["refresh_interval"] = "1s"
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
    finally:
        if prom.poll() is None:
            os.killpg(prom.pid, signal.SIGTERM)
        try:
            prom.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(prom.pid, signal.SIGKILL)
            prom.wait()


def _dashboard_metrics() -> set[str]:
    """Every metric name the dashboard's queries select, and a check of its one-row-per-mode shape."""
    dash = json.loads(DASHBOARD.read_text())
    rows = [p for p in dash["panels"] if p["type"] == "row"]
    assert len(rows) == 1 and rows[0]["repeat"] == "mode", "one row per mode, repeated over $mode"
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource", "run", "mode"}
    names = set()
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            found = set(SELECTOR.findall(target["expr"]))
            assert found, f"{panel['title']}: {target['expr']} selects no metric"
            names |= found
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
