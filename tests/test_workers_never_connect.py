"""A Locust master whose workers never connect gives up after --connect-wait and still accounts
for every scheduled request (all not_sent, with the reason), instead of waiting forever."""

from __future__ import annotations

import subprocess

import pytest

from analysis.reader import read_requests
from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, write_trace


@pytest.mark.e2e
def test_master_without_workers_records_every_row_as_not_sent(tmp_path):
    (tmp_path / "logs").mkdir()
    scenario, _ = load_scenario("chat")
    write_trace(build_trace(scenario, requests=7, seed=1), tmp_path / "trace.parquet", "chat", "0" * 64)
    argv = ReplayConfig(tmp_path / "trace.parquet", "m", ("http://127.0.0.1:9",), "m", "r", tmp_path, workers=2,
                        connect_wait_s=2).main_argv()
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finished = protocol.encode_line(protocol.Finished("failed", 7))
    assert run.returncode == 1 and finished in run.stdout.splitlines(), run.stdout + run.stderr
    records = read_requests(tmp_path)
    assert records.num_rows == 7 and set(records["status"].to_pylist()) == {"not_sent"}
    assert "never started" in records["error"][0].as_py()
