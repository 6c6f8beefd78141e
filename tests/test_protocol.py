"""Every message between processes survives its channel: encode then parse gives it back, any
other line is Locust's own output, and a broken message is named, not guessed at."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loadtest.replay import protocol
from loadtest.replay.options import ReplayConfig, replay_config
from loadtest.request.client_stats import ClientLoad, ClientStats
from loadtest.request.tally import Tally

STATS = ClientStats().take(0.25)
_tally = Tally()
_tally.observe({"tenant": "chat", "status": "ok", "error_kind": None, "sent_ns": 1, "completion_tokens": 3,
                "n_chunks": 2, "itl_ms": [80.0, 12.5], "ttft_ms": 80.0, "tpot_ms": 12.5, "e2e_ms": 105.0,
                "lateness_ms": 0.4})
_tally.observe({"tenant": "sql", "status": "not_sent", "error_kind": None, "sent_ns": None})
TALLY = _tally.take()


@pytest.mark.parametrize("msg", [
    protocol.Progress(total=300, sent=88, done=80, not_sent=212),
    protocol.Observed(TALLY),
    protocol.LoadReport(ClientLoad(0.95, 0.41, None)),
    protocol.Finished("interrupted", 300),
])
def test_stdout_lines_round_trip(msg):
    line = protocol.encode_line(msg)
    assert line.startswith("@@") and "\n" not in line
    assert protocol.parse_line(line + "\n") == msg


@pytest.mark.parametrize("msg", [
    protocol.ShardAssignment(1, 3, "w1", 1_700_000_000.5),
    protocol.WorkerReport(protocol.Counts(10, 12, 2), STATS),
    protocol.WorkerDone("completed", protocol.Counts(40, 40, 0), STATS),
    protocol.WorkerReport(protocol.Counts(10, 12, 2), STATS, TALLY),
    protocol.Abandon(),
])
def test_master_worker_messages_round_trip(msg):
    kind, data = protocol.to_locust(msg)
    assert kind in protocol.WIRE_NAMES and isinstance(data, dict)
    assert protocol.from_locust(kind, data) == msg


def test_other_lines_are_not_messages_and_broken_ones_are_named():
    assert protocol.parse_line("Type     Name     # reqs\n") is None
    with pytest.raises(ValueError, match="unknown replay message 'gossip'"):
        protocol.parse_line("@@gossip {}")
    with pytest.raises(ValueError, match="malformed replay message"):
        protocol.parse_line('@@progress {"total": 3')
    assert protocol.Progress(10, 7, 4).in_flight == 3


@pytest.mark.parametrize("config", [
    ReplayConfig(Path("/runs/r/trace.parquet"), "eagle", ("http://127.0.0.1:8001", "http://127.0.0.1:8002"), "m",
                 "r", Path("/runs/r")),
    ReplayConfig(Path("/runs/r/trace.parquet"), "draft", ("http://127.0.0.1:8001",), "m", "r", Path("/runs/r"),
                 max_inflight=7, timeout_s=2.5, retry_after="honour", max_retries=0, deadline_s=90.0, drain=True,
                 api_key_env="MY_KEY", lateness_limit_ms=3.0, workers=4, ray_workers=True, flush_s=10.0,
                 first_row=13, resume_at_s=4.25),
])
def test_a_replay_config_crosses_to_its_locust_processes_whole(config):
    # what the command writes on a Locust process's command line, read back there
    argv = config.main_argv()
    parsed = argparse.Namespace(replay_config=argv[argv.index("--replay-config") + 1])
    assert replay_config(parsed) == config
    worker = config.worker_argv(1, "10.0.0.2", 5557)
    assert worker[worker.index("--replay-config") + 1] == parsed.replay_config


def test_a_replay_config_that_does_not_parse_is_named():
    with pytest.raises(ValueError, match="malformed ReplayConfig"):
        protocol.parse_config(ReplayConfig, '{"trace": ')
