"""The API key travels only as a bearer token: every replaying and analysing command is run with a
known key against simulators that require it (each reading its own from $VLLM_API_KEY, as vLLM
does), then every file the commands wrote (Parquet decoded, since its pages are compressed) and
everything they printed is searched for it. A wrong key gives classified 401 errors, never the key."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.conftest import DATA, free_port, loadtest, loadtest_process, sim_server

TINY = str(DATA / "tiny-mix.toml")
SIM = ("--tensor-parallel-size", "4", "--served-model-name", "m")
NGRAM = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":4}'


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def where_it_leaked(folder: Path, key: str) -> list[str]:
    """Every file under `folder` that holds `key`: Parquet by its decoded values (and metadata),
    anything else by its bytes."""
    found = []
    for path in (p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            meta = table.schema.metadata or {}
            texts = [v.decode(errors="replace") for v in (*meta.keys(), *meta.values())]
            texts += _strings(table.to_pylist())
            if any(key in t for t in texts):
                found.append(str(path))
        elif key.encode() in path.read_bytes():
            found.append(str(path))
    return found


def test_where_it_leaked_finds_a_key_in_parquet_values_metadata_and_text(tmp_path):
    pq.write_table(pa.table({"error": ["x", "Bearer sk-hidden-1"]}), tmp_path / "a.parquet", compression="zstd")
    pq.write_table(pa.table({"x": [1]}).replace_schema_metadata({"k": "sk-hidden-1"}), tmp_path / "m.parquet")
    pq.write_table(pa.table({"x": [[{"a": "sk-hidden-1"}]]}), tmp_path / "nested.parquet")
    (tmp_path / "b.log").write_text("nothing")
    (tmp_path / "c.txt").write_text("key=sk-hidden-1")
    found = sorted(Path(p).name for p in where_it_leaked(tmp_path, "sk-hidden-1"))
    assert found == ["a.parquet", "c.txt", "m.parquet", "nested.parquet"]


@pytest.mark.e2e
def test_no_command_writes_or_prints_the_api_key(tmp_path):
    key = f"sk-loadtest-{secrets.token_hex(12)}"
    wrong = f"sk-wrong-{secrets.token_hex(12)}"
    out = tmp_path / "results"
    printed: list[str] = []
    env = {**os.environ, "LOADTEST_API_KEY": key}
    with sim_server(*SIM, env={"VLLM_API_KEY": key}) as base, \
            sim_server(*SIM, "--speculative-config", NGRAM, env={"VLLM_API_KEY": key}) as ngram:
        endpoints = f"baseline={base},ngram={ngram}"
        assert requests.get(f"{base}/v1/models", timeout=5).status_code == 401   # the key is required
        common = ("--endpoints", endpoints, "--scenario", TINY, "--out", str(out))
        for argv in (("run", *common, "--requests", "20", "--run-id", "r1"),
                     ("run", *common, "--requests", "20", "--run-id", "r2", "--workers", "2"),
                     ("sweep", *common, "--requests", "20", "--rate-scale", "1,2", "--run-id", "sw"),
                     ("capacity", *common, "--modes", "ngram", "--probe-duration", "2", "--repeats", "1",
                      "--precision", "60", "--slo", "ttft_p99_ms=400", "--run-id", "cap"),
                     ("soak", *common, "--duration", "12s", "--window", "6s", "--run-id", "soak"),
                     ("report", str(out / "r1")),
                     ("compare", str(out / "r1"), str(out / "r2"))):
            r = loadtest(*argv, env=env, timeout=600)
            printed += [r.stdout, r.stderr]
            assert r.returncode in (0, 1), (argv[0], r.stdout[-2000:], r.stderr[-2000:])   # ran (1: a gate)
        # the web UI: its form started over HTTP, as the browser test drives it
        port = free_port()
        with loadtest_process("ui", *common, "--requests", "15", "--web-port", str(port), "--run-id", "ui",
                              env=env) as proc:
            web = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if requests.get(web, timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    assert time.monotonic() < deadline
                time.sleep(0.3)
            form = {"scenario": TINY, "modes": ["baseline", "ngram"], "rate_scale": ""}
            assert requests.post(f"{web}/swarm", data=form, timeout=10).json()["success"]
            while requests.get(f"{web}/comparison/data", timeout=5).json()["state"] != "finished":
                assert time.monotonic() < deadline + 120 and proc.poll() is None
                time.sleep(0.5)
            printed.append(json.dumps(requests.get(f"{web}/comparison/data", timeout=5).json()))
            printed.append(requests.get(f"{web}/stats/requests", timeout=5).text)
            proc.send_signal(signal.SIGINT)
            printed.append(proc.communicate(timeout=60)[0])
        assert proc.returncode == 0, printed[-1][-2000:]
        # a wrong key: every request a classified error, the key nowhere either
        r = loadtest("run", *common, "--requests", "10", "--run-id", "bad", env={**env, "LOADTEST_API_KEY": wrong},
                     timeout=300)
        printed += [r.stdout, r.stderr]
    assert r.returncode == 2 and "401" in r.stderr and "API key" in r.stderr, r.stderr   # refused up front, said why
    assert len(list(out.iterdir())) >= 7
    for secret in (key, wrong):
        assert not where_it_leaked(out, secret), where_it_leaked(out, secret)
        assert not [i for i, text in enumerate(printed) if secret in text]
