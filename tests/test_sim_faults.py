"""Each injected fault does what it says, seen from a client."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests

from cluster.sim.faults import FaultPlan, parse_faults
from loadtest.request.sse import StreamError, StreamMeasurement
from tests.conftest import MODEL, cli, free_port, sim_server

FAST = ("-tp", "4", "--time-scale", "0.1")


def _stream(url: str, tokens: int = 30, timeout: float = 30) -> tuple[int, list[tuple[float, bytes]]]:
    body = {"model": MODEL, "prompt": "Tell me a story about a lighthouse keeper.", "max_tokens": tokens,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    lines = []
    with requests.post(f"{url}/v1/completions", json=body, stream=True, timeout=timeout) as r:
        if r.status_code != 200:
            return r.status_code, [(time.monotonic(), r.content)]
        try:
            for line in r.iter_lines():
                if line:
                    lines.append((time.monotonic(), line))
        except requests.exceptions.ChunkedEncodingError:
            lines.append((time.monotonic(), b"<connection broken>"))
    return 200, lines


@pytest.mark.e2e
def test_http_error():
    with sim_server(*FAST, "--fault", "http-error=1:503") as url:
        status, lines = _stream(url)
        assert status == 503 and b'"code":503' in lines[0][1] and b"ServiceUnavailableError" in lines[0][1]


@pytest.mark.e2e
def test_malformed_chunk_is_caught_by_the_client_parser():
    with sim_server(*FAST, "--fault", "malformed=1") as url:
        _, lines = _stream(url)
        m = StreamMeasurement(sent=0.0)
        with pytest.raises(StreamError) as e:
            for t, line in lines:
                m.feed(line, t)
        assert e.value.kind == "malformed_stream"


@pytest.mark.e2e
def test_stall_pauses_the_stream():
    with sim_server(*FAST, "--fault", "stall=1:0.8") as url:
        _, lines = _stream(url)
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(lines)]
        assert max(gaps) >= 0.75 and lines[-1][1] == b"data: [DONE]"


@pytest.mark.e2e
def test_drop_resets_the_connection_mid_stream():
    with sim_server(*FAST, "--fault", "drop=1") as url:
        _, lines = _stream(url)
        assert lines[-1][1] != b"data: [DONE]" and any(b'"text"' in line for _, line in lines)


@pytest.mark.e2e
def test_no_done_ends_the_stream_cleanly_without_done():
    with sim_server(*FAST, "--fault", "no-done=1") as url:
        status, lines = _stream(url)
        assert status == 200 and b"[DONE]" not in b"".join(line for _, line in lines)
        assert b'"usage"' in lines[-1][1] and b"<connection broken>" not in lines[-1][1]   # closed, not reset


@pytest.mark.e2e
def test_slow_start_delays_health():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "sim", MODEL, *FAST, "--port", str(port),
                             "--fault", "slow-start=1.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        codes = []
        start = time.monotonic()
        while time.monotonic() - start < 6 and 200 not in codes:
            try:
                codes.append(requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code)
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        assert 503 in codes and codes[-1] == 200 and time.monotonic() - start >= 1.4
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.e2e
@pytest.mark.parametrize("fault", ["crash-after=2", "crash-at=1.5"])
def test_crash_exits_the_process(fault):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "sim", MODEL, *FAST, "--port", str(port),
                             "--fault", fault], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.05)
        if fault.startswith("crash-after"):
            for _ in range(2):
                assert _stream(url)[1][-1][1] == b"data: [DONE]"
            _, lines = _stream(url)
            assert lines[-1][1] != b"data: [DONE]"
        assert proc.wait(10) == 1
        assert b"injected fault" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_bad_fault_is_one_line_exit_2():
    out = cli("sim", MODEL, "-tp", "4", "--fault", "stall=2:1")
    assert out.returncode == 2 and "--fault stall: probability must be in [0, 1]" in out.stderr


@pytest.mark.e2e
def test_bursts_answer_every_request_in_their_window_with_retry_after():
    faults = parse_faults("burst=10:2:429,retry-after=3")
    assert faults.burst == (10.0, 2.0, 429) and faults.retry_after == 3.0
    plan = FaultPlan(faults, seed=0)
    codes = {t: plan.next_request(t).http_error for t in (0.0, 9.9, 10.0, 11.9, 12.0, 20.5, 25.0)}
    assert codes == {0.0: None, 9.9: None, 10.0: 429, 11.9: 429, 12.0: None, 20.5: 429, 25.0: None}
    with sim_server(*FAST, "--fault", "http-error=1:429,retry-after=2") as url:
        r = requests.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2}, timeout=10)
    assert r.status_code == 429 and r.headers["Retry-After"] == "2" and r.json()["type"] == "TooManyRequestsError"


@pytest.mark.e2e
def test_slow_headers_delay_the_answer_not_the_probes():
    with sim_server(*FAST, "--fault", "slow-headers=1:1.5") as url:
        start = time.monotonic()
        assert requests.get(f"{url}/health", timeout=5).status_code == 200
        assert time.monotonic() - start < 1.0
        status, lines = _stream(url, tokens=4)
        assert status == 200 and lines[0][0] - start >= 1.5


@pytest.mark.parametrize("text, message", [
    ("burst=2:3:429", "expected 0 < LEN < EVERY"), ("burst=5:1:404", "CODE must be one of"),
    ("slow-headers=1.5:2", "probability must be in [0, 1]"), ("retry-after=x", "could not convert"),
    ("no-done=2", "--fault no-done: probability must be in [0, 1]"),
])
def test_bad_burst_and_header_faults_name_the_item(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_faults(text)
