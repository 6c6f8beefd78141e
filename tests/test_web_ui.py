"""`loadtest ui`: Locust's web UI replaying the trace against a running server, driven the way a
person drives it (Start, watch the Speculation tab, Ctrl-C), through the UI's own HTTP API."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import requests

from analysis.reader import read_requests
from loadtest.replay.webui import tab_rows
from loadtest.request.client_stats import ClientStats
from tests.conftest import free_port, loadtest_process, sim_server


def _wait(predicate, timeout: float, proc: subprocess.Popen, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"loadtest ui exited early while waiting for {what}"
        try:
            value = predicate()
            if value:
                return value
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_ui_replays_on_start_shows_the_tab_and_keeps_every_record(tmp_path):
    port = free_port()
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m", "--speculative-config",
                    '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":4}') as url:
        with loadtest_process("ui", "--endpoints", f"ngram={url}", "--scenario", "chat", "--requests", "15",
                              "--web-port", str(port), "--out", str(tmp_path), "--run-id", "ui1") as proc:
            web = f"http://127.0.0.1:{port}"
            _wait(lambda: requests.get(web, timeout=2).status_code == 200, 60, proc, "the web UI")
            page = requests.get(web, timeout=5).text
            assert "Speculation" in page  # the tab is announced to the UI
            # the start form says what Start replays; users and ramp-up are disabled (a shape sets the load)
            assert "Start replays <b>15 requests of chat against ngram (1 replica(s) of fleet endpoints)" in page
            args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
            assert args["hide_common_options"] is True
            r = requests.post(f"{web}/swarm", data={"user_count": 1, "spawn_rate": 1}, timeout=10)
            assert r.status_code == 200 and r.json()["success"], r.text

            def finished():
                stats = requests.get(f"{web}/stats/requests", timeout=5).json()
                rows = {row["metric"]: row for row in stats["extended_stats"][0]["data"]}
                return rows if rows["ngram: TTFT (ms)"]["count"] == "15" and stats["state"] == "stopped" else None

            rows = _wait(finished, 90, proc, "the replay to finish")
            assert float(rows["ngram: TPOT (ms)"]["p50"]) > 0
            stopped = requests.get(f"{web}/stats/requests", timeout=5).json()
            assert stopped["current_rps"] == 0 and stopped["current_fail_per_sec"] == 0  # not the last rate
            again = requests.post(f"{web}/swarm", data={"user_count": 1, "spawn_rate": 1}, timeout=10).json()
            assert not again["success"] and "replayed once already" in again["message"]  # shown in the form
            per_chunk = rows["ngram: tokens per chunk, mean (usage / text chunks)"]["p50"]
            assert float(per_chunk) > 1.0  # ngram: several tokens per chunk
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "replay completed: 15 records" in out
    records = read_requests(tmp_path / "ui1")
    assert records.num_rows == 15 and set(records["status"].to_pylist()) == {"ok"}
    manifest = json.loads((tmp_path / "ui1" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["mode_runs"]["ngram"]["records"] == 15
    client = manifest["mode_runs"]["ngram"]["client"]  # the client's verdict on itself, as `run` records it
    assert client["lateness_ms"]["count"] == 15 and client["client_limited"] in (True, False)
    assert manifest["gate"] == "passed" and manifest["mode_runs"]["ngram"]["server_metrics"] == "scraped"


def test_stop_in_the_ui_records_the_rest_as_not_sent(tmp_path):
    port = free_port()
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m") as url:
        with loadtest_process("ui", "--endpoints", f"baseline={url}", "--scenario", "saas-mix", "--requests",
                              "200", "--web-port", str(port), "--out", str(tmp_path), "--run-id", "ui2") as proc:
            web = f"http://127.0.0.1:{port}"
            _wait(lambda: requests.get(web, timeout=2).status_code == 200, 60, proc, "the web UI")
            requests.post(f"{web}/swarm", data={"user_count": 1, "spawn_rate": 1}, timeout=10)
            _wait(lambda: requests.get(f"{web}/stats/requests", timeout=5).json()["stats"][0]["num_requests"] >= 3,
                  60, proc, "a few requests")
            assert requests.post(f"{web}/stop", timeout=30).json()["success"]
            _wait(lambda: requests.get(f"{web}/stats/requests", timeout=5).json()["state"] == "stopped", 30, proc,
                  "the stop")
            time.sleep(1.0)
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    records = read_requests(tmp_path / "ui2")
    statuses = records["status"].to_pylist()
    assert records.num_rows == 200 and "not_sent" in statuses and "ok" in statuses
    manifest = json.loads((tmp_path / "ui2" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"


def test_ui_errors_are_one_line(tmp_path):
    from tests.conftest import loadtest

    r = loadtest("ui", "--endpoints", "baseline=http://127.0.0.1:9", "--out", str(tmp_path))
    assert r.returncode == 2 and "GET /v1/models: connection refused" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = loadtest("ui", "--endpoints", str(tmp_path / "none.json"))
    assert r.returncode == 2 and "no fleet is up" in r.stderr


def test_tab_rows_read_the_client_histograms():
    stats = ClientStats()
    for ttft in (10.0, 20.0, 30.0):
        stats.observe({"sent_ns": 1, "n_chunks": 4, "completion_tokens": 10, "ttft_ms": ttft, "tpot_ms": 5.0,
                       "e2e_ms": 100.0, "lateness_ms": 0.5, "itl_ms": [ttft, 5.0, 5.0, 5.0]})
    rows = {r["metric"]: r for r in tab_rows(stats, "eagle")}
    assert rows["eagle: TTFT (ms)"]["count"] == "3" and abs(float(rows["eagle: TTFT (ms)"]["p50"]) - 20.0) < 0.3
    assert rows["eagle: ITL per chunk (ms)"]["count"] == "9"
    assert rows["eagle: tokens per chunk, mean (usage / text chunks)"]["p50"] == "2.50"
