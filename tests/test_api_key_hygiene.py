"""The API key travels only as a bearer token. Every command the suite runs sends the session's
key (LOADTEST_API_KEY), the shared fleet requires it (its replicas read VLLM_API_KEY, as vLLM
does), and after every test the key is looked for in every file the test wrote (Parquet decoded,
since its pages are compressed) and in everything the commands printed (tests/invariants.py):
run, sweep, capacity, soak, report, compare and the web UI are each checked wherever a test runs
them. Here: the finder itself, and a wrong key, which is refused before anything is sent (exit 2,
naming the 401) and written nowhere."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from tests.conftest import API_KEY, DATA, cli
from tests.invariants import leaked_key


def test_the_finder_finds_a_key_in_parquet_values_metadata_and_text(tmp_path):
    pq.write_table(pa.table({"error": ["x", "Bearer sk-hidden-1"]}), tmp_path / "a.parquet", compression="zstd")
    pq.write_table(pa.table({"x": [1]}).replace_schema_metadata({"k": "sk-hidden-1"}), tmp_path / "m.parquet")
    pq.write_table(pa.table({"x": [[{"a": "sk-hidden-1"}]]}), tmp_path / "nested.parquet")
    (tmp_path / "b.log").write_text("nothing")
    (tmp_path / "c.txt").write_text("key=sk-hidden-1")
    found = sorted(Path(p).name for p in leaked_key(tmp_path, "sk-hidden-1"))
    assert found == ["a.parquet", "c.txt", "m.parquet", "nested.parquet"]


@pytest.mark.e2e
def test_the_shared_fleet_needs_the_key_and_a_wrong_one_is_refused_and_written_nowhere(tmp_path, world_fleet):
    url = world_fleet.replicas["baseline"]
    assert requests.get(f"{url}/v1/models", timeout=5).status_code == 401   # every passing run sent the key
    ok = requests.get(f"{url}/v1/models", timeout=5, headers={"Authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200
    wrong = f"sk-wrong-{secrets.token_hex(12)}"
    # given as the held fleet's state file, and as MODE=URL pairs: refused before anything is sent
    for endpoints in (str(world_fleet.state), world_fleet.endpoints("baseline")):
        r = cli("run", "--endpoints", endpoints, "--modes", "baseline", "--scenario", str(DATA / "tiny-mix.toml"),
                "--requests", "10", "--out", str(tmp_path), "--run-id", "bad",
                env={**os.environ, "LOADTEST_API_KEY": wrong})
        assert r.returncode == 2 and "401" in r.stderr and "API key" in r.stderr, r.stderr   # said why
        assert wrong not in r.stdout + r.stderr
    assert not leaked_key(tmp_path, wrong)
