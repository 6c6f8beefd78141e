"""`loadtest ui`: Locust's web UI, once for a run of several modes side by side, driven the way a
person drives it: in Debian's chromium (Playwright, no browser download) for the form, the
Comparison page and Stop; through the UI's own HTTP API for the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import requests

from analysis.reader import read_requests
from loadtest.replay.comparison_page import tab_rows
from tests.conftest import API_KEY, ROOT, cli, free_port, loadtest_process

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "tests" / "artifacts"
NGRAM = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":4}'
SIM = ("--tensor-parallel-size", "4", "--served-model-name", "m")
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _wait(predicate, timeout: float, proc: subprocess.Popen, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"loadtest ui exited early while waiting for {what}: {proc.stdout.read()}"
        try:
            value = predicate()
            if value:
                return value
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _up(web: str, proc: subprocess.Popen, **kw) -> None:
    _wait(lambda: requests.get(web, timeout=2, **kw).status_code == 200, 60, proc, "the web UI")


def _board(web: str) -> dict:
    return requests.get(f"{web}/comparison/data", timeout=5).json()


@pytest.mark.e2e
def test_a_person_starts_two_modes_from_the_form_watches_them_compared_and_stops(tmp_path, world_fleet):
    from playwright.sync_api import sync_playwright

    port = free_port()
    web = f"http://127.0.0.1:{port}"
    with loadtest_process("ui", "--endpoints", world_fleet.endpoints("baseline", "ngram"), "--scenario", "chat",
                          "--requests", "400", "--web-port", str(port), "--out", str(tmp_path), "--run-id",
                          "live") as proc:
        _up(web, proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
            try:
                errors: list[str] = []       # what the browser's console says went wrong, on either page
                locust = browser.new_page(viewport={"width": 1400, "height": 900})
                locust.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                locust.goto(web)
                assert "Start replays the modes chosen under Custom parameters" in locust.inner_text("#loadtest-replay")
                locust.get_by_role("button", name="Custom parameters").click()
                locust.fill("input[name=rateScale]", "2")
                locust.get_by_role("button", name="Start").click()

                page = browser.new_page(viewport={"width": 1400, "height": 1300})
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.goto(f"{web}/comparison")
                # live numbers for both modes in the table, and both modes' lines in the charts
                page.wait_for_function("""() => {
                    const rows = [...document.querySelectorAll('#comparison-table tbody tr')];
                    const live = rows.filter(r => r.cells.length > 4 && r.cells[4].textContent !== '-');
                    const chart = document.getElementById('chart-ttft_p99');
                    return live.length === 2 && chart.data && chart.data.length === 2
                        && chart.data.every(t => t.y.filter(v => v !== null).length >= 8);
                }""", timeout=90_000)
                rows = page.eval_on_selector_all("#comparison-table tbody tr",
                                                 "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
                assert [r[0] for r in rows] == ["baseline", "ngram"]
                assert all(float(r[4].replace(",", "")) > 0 for r in rows)   # TTFT p50, ms
                traces = page.evaluate("() => document.getElementById('chart-tokens_per_step').data.map(t => t.name)")
                assert traces == ["baseline", "ngram"]
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "ui-comparison.png"), full_page=True)
                # per tenant on demand
                page.select_option("#tenant", "assistant")
                assert page.locator("#comparison-table tbody tr").count() == 2

                locust.bring_to_front()
                # Locust's own statistics: no "Average size" (the bytes of a stream say nothing here)
                headers = locust.eval_on_selector_all("th", "hs => hs.map(h => h.textContent)")
                assert "Median (ms)" in headers and not any("Average size" in h for h in headers), headers
                # the Comparison tab's table fits the 1,400-px window
                locust.get_by_role("tab", name="Comparison").click()
                locust.wait_for_function("() => [...document.querySelectorAll('td')].some(c => c.textContent "
                                         "=== 'ngram')", timeout=30_000)
                width = locust.evaluate("() => Math.max(...[...document.querySelectorAll('table')].map("
                                        "t => t.getBoundingClientRect().right))")
                assert width <= 1400, width
                locust.screenshot(path=str(ARTIFACTS / "ui-comparison-tab.png"))
                locust.get_by_role("button", name="Stop").click()
                page.wait_for_function("() => document.getElementById('state').textContent.startsWith('finished')",
                                       timeout=60_000)
                state = page.inner_text("#state")
                assert not errors, errors      # no resource that failed to load (a 404), no script error
            finally:
                browser.close()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out   # stopped before the trace was done: interrupted
    assert "report:" in state and "live" in state
    run = tmp_path / "live"
    records = read_requests(run)
    for mode in ("baseline", "ngram"):   # every scheduled request is one record; Stop left some unsent
        statuses = records.filter(records["mode"].to_numpy(zero_copy_only=False) == mode)["status"].to_pylist()
        assert len(statuses) == 400 and "ok" in statuses and "not_sent" in statuses
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["scenario"]["rate_scale"] == 2.0
    assert sorted(manifest["mode_runs"]) == ["baseline", "ngram"] and "web UI" in manifest["mode_order"]
    assert (run / "report.md").is_file() and (run / "report.html").is_file() and (run / "summary.parquet").is_file()
    assert (run / "logs" / "locust-ui.log").is_file()


@pytest.mark.e2e
def test_a_run_started_from_the_ui_writes_what_loadtest_run_writes(tmp_path, world_fleet):
    port = free_port()
    web = f"http://127.0.0.1:{port}"
    with loadtest_process("ui", "--endpoints", world_fleet.endpoints("baseline", "ngram"), "--requests", "20",
                          "--web-port", str(port), "--out", str(tmp_path), "--run-id", "ui1") as proc:
        _up(web, proc)
        args = json.loads(requests.get(web, timeout=5).text.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert args["hide_common_options"] is True   # users and ramp-up: the trace sets the load
        extra = args["extra_options"]
        assert extra["modes"]["choices"] == ["baseline", "ngram"] and extra["modes"]["is_multiple"]
        assert extra["scenario"]["default_value"] == "saas-mix"
        # a page of another site cannot start a run, nor a DNS-rebinding one reach the UI
        form = {"scenario": "chat", "modes": ["ngram"], "rate_scale": ""}
        assert requests.post(f"{web}/swarm", data=form, headers={"Origin": "http://evil.example"},
                             timeout=10).status_code == 403
        assert requests.get(web, headers={"Host": f"evil.example:{port}"}, timeout=10).status_code == 403
        # bad values are refused in the form, with the field named
        for form, said in [({"scenario": "chat", "modes": [], "rate_scale": ""}, "modes:"),
                           ({"scenario": "chat", "modes": ["ngram"], "rate_scale": "-1"}, "rate scale:"),
                           ({"scenario": "chat", "modes": ["ngram"], "rate_scale": "inf"}, "rate scale:")]:
            r = requests.post(f"{web}/swarm", data=form, timeout=10).json()
            assert not r["success"] and said in r["message"]
        bad = {"scenario": "no-such", "modes": ["ngram"], "rate_scale": ""}
        assert requests.post(f"{web}/swarm", data=bad, timeout=10).json()["success"]
        failed = _wait(lambda: (b := _board(web))["state"] == "failed" and b, 30, proc, "the refusal")
        assert "no-such" in failed["message"]   # the command's own one line, shown in the UI
        _wait(lambda: requests.get(f"{web}/stats/requests", timeout=5).json()["state"] == "stopped", 30, proc,
              "the test to stop")
        r = requests.post(f"{web}/swarm", data={"scenario": "chat", "modes": ["baseline", "ngram"], "rate_scale": ""},
                          timeout=10).json()
        assert r["success"], r
        done = _wait(lambda: (b := _board(web))["state"] == "finished" and b, 120, proc, "the run")
        stats = _wait(lambda: (s := requests.get(f"{web}/stats/requests", timeout=5).json())["state"] == "stopped"
                      and s, 10, proc, "the web UI to say stopped")   # the board is polled once a second
        assert stats["current_rps"] == 0
        # what the UI shows holds no key (the replicas needed it: the shared fleet requires it)
        for shown in (json.dumps(done), requests.get(f"{web}/stats/requests", timeout=5).text,
                      requests.get(f"{web}/comparison/data", timeout=5).text):
            assert API_KEY not in shown
        tab = {row["mode"]: row for row in stats["extended_stats"][0]["data"]}
        assert tab["baseline"]["progress"] == tab["ngram"]["progress"] == "20 / 20"
        # Locust's own statistics: one row per mode, every request of the run
        _wait(lambda: {s["name"]: s["num_requests"] for s in requests.get(f"{web}/stats/requests", timeout=5).json()[
            "stats"]}.get("ngram") == 20, 10, proc, "Locust's statistics")
        again = requests.post(f"{web}/swarm", data={"scenario": "chat", "modes": ["ngram"], "rate_scale": ""},
                              timeout=10).json()
        assert not again["success"] and "replayed its run already" in again["message"]
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert done["table"]["ngram"]["all"]["tokens_per_step"] > 1.0   # ngram: several tokens a step
    assert done["table"]["ngram"]["all"]["acceptance"] > 0 and done["table"]["baseline"]["all"]["acceptance"] is None
    run = tmp_path / "ui1"
    records = read_requests(run)
    assert records.num_rows == 40 and set(records["status"].to_pylist()) == {"ok"}
    # the board's counts are the dataset's
    assert done["table"]["ngram"]["all"]["ok"] == 20 and done["table"]["baseline"]["all"]["done"] == 20
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gate"] == "passed"
    assert manifest["scenario"]["name"] == "chat" and manifest["mode_runs"]["ngram"]["records"] == 20
    assert manifest["mode_runs"]["ngram"]["server_metrics"] == "scraped" and manifest["metrics"].endswith("/metrics")
    assert (run / "report.md").is_file() and (run / "summary.parquet").is_file()
    # the live figures are the report's: tokens per step as summary.parquet has it, and each
    # percentile between the order statistics around its rank (within the board's 1% bins)
    summary = pq.read_table(run / "summary.parquet").to_pylist()
    for mode in ("baseline", "ngram"):
        row = done["table"][mode]["all"]
        said = next(r["value"] for r in summary if r["mode"] == mode and r["tenant"] == "all"
                    and r["metric"] == "tokens_per_step" and r["statistic"] == "mean")
        assert row["tokens_per_step"] == pytest.approx(said, abs=1e-3)
        mine = records.filter(records["mode"].to_numpy(zero_copy_only=False) == mode)
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            values = mine[metric].to_numpy(zero_copy_only=False)
            for q in (0.5, 0.9, 0.99):
                low, high = (np.quantile(values, q, method=m) for m in ("lower", "higher"))
                assert low * 0.99 <= row[f"{metric[:-3]}_p{round(q * 100)}"] <= high * 1.01, (mode, metric, q)


@pytest.mark.e2e
def test_a_web_ui_off_loopback_needs_a_login_and_every_route_is_behind_it(tmp_path, world_fleet):
    env = {k: v for k, v in os.environ.items() if k not in ("LOADTEST_WEB_USER", "LOADTEST_WEB_PASSWORD")}
    r = cli("ui", "--endpoints", "baseline=http://127.0.0.1:9", "--web-host", "0.0.0.0", "--out", str(tmp_path),
            env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "needs a login" in r.stderr and "LOADTEST_WEB_USER" in r.stderr
    assert not any(tmp_path.iterdir())   # refused before anything was made

    port = free_port()
    creds = {"LOADTEST_WEB_USER": "sre", "LOADTEST_WEB_PASSWORD": "s3cret-pw"}
    proc_env = {**env, **creds}
    with loadtest_process("ui", "--endpoints", world_fleet.endpoints("baseline"), "--web-host", "0.0.0.0",
                          "--web-port", str(port), "--out", str(tmp_path), "--no-metrics", env=proc_env) as proc:
        web = f"http://127.0.0.1:{port}"
        _up(web, proc, auth=("sre", "s3cret-pw"))
        routes = [("GET", "/"), ("GET", "/comparison"), ("GET", "/comparison/data"),
                  ("GET", "/comparison/plotly.min.js"), ("GET", "/stats/requests"), ("POST", "/swarm"),
                  ("GET", "/stop"), ("GET", "/stats/reset"), ("GET", "/assets/nothing.js"), ("GET", "/no-such")]
        for method, path in routes:
            for auth in (None, ("sre", "wrong"), ("other", "s3cret-pw")):
                resp = requests.request(method, web + path, auth=auth, timeout=10,
                                        data={"scenario": "chat", "modes": ["baseline"]})
                assert resp.status_code == 401, (method, path, auth, resp.status_code)
                assert resp.headers["WWW-Authenticate"].startswith("Basic")
        ok = requests.get(f"{web}/comparison/data", auth=("sre", "s3cret-pw"), timeout=10)
        assert ok.status_code == 200 and ok.json()["state"] == "waiting"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "s3cret-pw" not in out


def test_ui_errors_are_one_line(tmp_path):
    r = cli("ui", "--endpoints", "baseline=http://127.0.0.1:9", "--out", str(tmp_path))
    assert r.returncode == 2 and "GET /v1/models: connection refused" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("ui", "--endpoints", str(tmp_path / "none.json"))
    assert r.returncode == 2 and "no fleet is up" in r.stderr
    r = cli("ui", "--endpoints", "baseline=http://127.0.0.1:9", "--scenario", str(tmp_path / "none.toml"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_the_tab_rows_read_the_board_table():
    table = {"ngram": {"all": {"done": 7, "total": 9, "errors": 2, "client": 1, "ttft_p50": 10.0, "ttft_p99": 30.5,
                               "tpot_p50": 5.0, "tpot_p99": 6.0, "itl_p50": 4.0, "itl_p99": 9.0, "e2e_p50": 100.0,
                               "e2e_p99": 1234.5, "output_tok_s": 50.0, "goodput": 1.5, "tokens_per_step": 1.75,
                               "acceptance": 0.4}}}
    rows = tab_rows(table, ["baseline", "ngram"])
    assert rows[0] == {"mode": "baseline", "progress": "waiting"}
    assert rows[1]["progress"] == "7 / 9" and rows[1]["errors"] == "2 +1 client" and rows[1]["e2e"] == "100 / 1,234"
    assert rows[1]["tps"] == "1.75" and rows[1]["acceptance"] == "0.400"
    assert rows[1]["ttft"] == "10.0 / 30.5" and rows[1]["tok_s"] == "50"   # latencies as every table prints them


@pytest.mark.e2e
def test_a_trace_file_is_the_forms_default_and_no_other_file_is_read(tmp_path, world_fleet):
    trace = tmp_path / "t.parquet"
    assert cli("trace", "build", "--scenario", "chat", "--requests", "6", "--out", str(trace)).returncode == 0
    port = free_port()
    web = f"http://127.0.0.1:{port}"
    with loadtest_process("ui", "--endpoints", world_fleet.endpoints("baseline"), "--trace", str(trace),
                          "--web-port", str(port), "--out", str(tmp_path)) as proc:
        _up(web, proc)
        args = json.loads(requests.get(web, timeout=5).text.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert args["extra_options"]["scenario"]["default_value"] == str(trace)
        other = {"scenario": str(tmp_path / "elsewhere.toml"), "modes": ["baseline"], "rate_scale": ""}
        assert requests.post(f"{web}/swarm", data=other, timeout=10).json()["success"]
        failed = _wait(lambda: (b := _board(web))["state"] == "failed" and b, 30, proc, "the refusal")
        assert "is not a built-in scenario" in failed["message"] and not any(tmp_path.glob("*/manifest.json"))
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "nothing was replayed" in out, out
