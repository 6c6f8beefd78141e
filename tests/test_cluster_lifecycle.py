"""A fleet held up across runs: `loadtest cluster up|status|down`, and runs against it with
`--endpoints` (its state file, or MODE=URL pairs). Real processes throughout: the supervisor,
Ray, the simulator replicas and Locust."""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from analysis.reader import read_requests
from cluster import FleetError
from cluster.state import parse_endpoint_list
from tests.conftest import cli, loadtest, loadtest_process, pid_alive


def _pids(state_file) -> tuple[int, list[int]]:
    state = json.loads(state_file.read_text())
    return state["supervisor_pid"], [r["pid"] for r in state["replicas"]]


@pytest.mark.e2e
def test_up_status_run_down(tmp_path):
    state = tmp_path / "fleet.json"
    up = loadtest("cluster", "up", "--fleet", "local-sim", "--modes", "baseline,ngram", "--detach",
                  "--state", str(state), "--logs", str(tmp_path / "logs"), timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr
    supervisor, servers = _pids(state)
    try:
        assert "baseline-0" in up.stdout and "ngram-0" in up.stdout
        status = cli("cluster", "status", "--state", str(state))
        assert status.returncode == 0 and "2/2 replicas healthy" in status.stdout, status.stdout

        again = cli("cluster", "up", "--modes", "baseline", "--state", str(state))
        assert again.returncode == 2 and "already up" in again.stderr and len(again.stderr.splitlines()) == 1

        run = cli("run", "--endpoints", str(state), "--scenario", "chat", "--requests", "12",
                  "--out", str(tmp_path / "results"), "--run-id", "r1")
        assert run.returncode == 0, run.stdout + run.stderr
        rows = read_requests(tmp_path / "results" / "r1")
        assert rows.num_rows == 24 and set(rows["status"].to_pylist()) == {"ok"}
        assert len(set(zip(rows["mode"].to_pylist(), rows["request_id"].to_pylist(), strict=True))) == 24
        manifest = json.loads((tmp_path / "results" / "r1" / "manifest.json").read_text())
        assert manifest["fleet"]["name"] == "local-sim" and manifest["fleet"]["source"] == str(state)
        assert manifest["modes"] == ["baseline", "ngram"]
        assert all(pid_alive(p) for p in servers), "a run against a held fleet must not stop it"

        url = json.loads(state.read_text())["replicas"][0]["url"]
        by_url = cli("run", "--endpoints", f"baseline={url}", "--scenario", "chat", "--requests", "5",
                     "--out", str(tmp_path / "results"), "--run-id", "r2")
        assert by_url.returncode == 0, by_url.stdout + by_url.stderr
        assert read_requests(tmp_path / "results" / "r2").num_rows == 5

        os.kill(servers[1], signal.SIGKILL)  # a replica dies (ours: this test started the fleet)
        deadline = time.monotonic() + 30
        while pid_alive(servers[1]) and time.monotonic() < deadline:
            time.sleep(0.1)
        status = cli("cluster", "status", "--state", str(state))
        assert status.returncode == 1, status.stdout
        assert "fleet local-sim (degraded: 1 of 2 replicas unhealthy)" in status.stdout, status.stdout
        assert "(ready)" not in status.stdout and "1/2 replicas healthy" in status.stdout
    finally:
        down = cli("cluster", "down", "--state", str(state))
    assert down.returncode == 0 and "is down" in down.stdout, down.stdout + down.stderr
    assert not state.exists()
    for pid in [supervisor, *servers]:
        assert not pid_alive(pid), f"process {pid} outlived `cluster down`"
    gone = cli("cluster", "status", "--state", str(state))   # the check failed (exit 1); nothing was bad input
    assert gone.returncode == 1 and "no fleet is up: no state file at" in gone.stdout, gone.stdout + gone.stderr
    assert cli("cluster", "down", "--state", str(state)).returncode == 0  # nothing up: not an error


@pytest.mark.e2e
def test_foreground_up_stops_on_ctrl_c(tmp_path):
    state = tmp_path / "fleet.json"
    with loadtest_process("cluster", "up", "--modes", "baseline", "--state", str(state), "--logs",
                          str(tmp_path / "logs")) as proc:
        deadline = time.monotonic() + 120
        while not (state.exists() and json.loads(state.read_text())["status"] == "ready"):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "fleet not ready in time"
            time.sleep(0.3)
        _, servers = _pids(state)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "fleet local-sim is down" in out and not state.exists()
    assert servers and not any(pid_alive(p) for p in servers)


def test_a_stale_state_file_is_reported_and_cleaned(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    state = tmp_path / "fleet.json"
    state.write_text(json.dumps({"fleet": "local-sim", "modes": ["baseline"], "supervisor_pid": dead.pid,
                                 "status": "ready", "replicas": [{"mode": "baseline", "index": 0,
                                 "url": "http://127.0.0.1:9", "served_model": "m"}]}))
    status = cli("cluster", "status", "--state", str(state))
    assert status.returncode == 1 and "stale state file" in status.stdout
    run = cli("run", "--endpoints", str(state), "--requests", "3", "--out", str(tmp_path / "r"))
    assert run.returncode == 2 and "stale" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    down = cli("cluster", "down", "--state", str(state))
    assert down.returncode == 0 and "stale" in down.stdout and not state.exists()


def test_endpoints_errors_are_one_line(tmp_path):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:   # in this process: not on the command's captured stderr
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path))
    not_vllm = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # a web server, not vLLM
    threading.Thread(target=not_vllm.serve_forever, daemon=True).start()
    web = f"http://127.0.0.1:{not_vllm.server_address[1]}"
    try:
        r = cli("run", "--endpoints", f"baseline={web}", "--requests", "3", "--out", str(tmp_path))
    finally:
        not_vllm.shutdown()
        not_vllm.server_close()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"--endpoints: baseline={web}: GET /v1/models answered HTTP 404" in r.stderr
    for arg, words in [("baseline=http://127.0.0.1:9", "GET /v1/models: connection refused"),
                       ("baseline", "expected a state file or MODE=URL"),
                       ("missing.json", "no state file")]:
        r = cli("run", "--endpoints", arg, "--requests", "3", "--out", str(tmp_path))
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    both = cli("run", "--endpoints", "baseline=http://127.0.0.1:9", "--fleet", "local-sim")
    assert both.returncode == 2 and "not both" in both.stderr


def test_options_are_never_abbreviated(tmp_path):
    # `--det` must not pass for `--detach`: the detached supervisor is the same command without it.
    r = cli("cluster", "up", "--det", "--state", str(tmp_path / "s.json"))
    assert r.returncode == 2 and "unrecognized arguments: --det" in r.stderr
    assert not (tmp_path / "s.json").exists()


def test_endpoint_lists_parse():
    assert parse_endpoint_list("baseline=http://a:1|http://b:2/, ngram=https://c") == {
        "baseline": ["http://a:1", "http://b:2"], "ngram": ["https://c"]}
    for bad in ("baseline=a:1", "=http://a", "baseline=http://a,baseline=http://b", " , "):
        with pytest.raises(FleetError):
            parse_endpoint_list(bad)
