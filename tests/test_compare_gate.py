"""`loadtest compare` has three answers and judges what the data supports: a run against a copy of
itself with every latency x1.3 fails the gate at 80 requests, where no p99 can be judged, on the
typical request's change (the paired per-request ratio, whose interval is [1.3, 1.3]); at 5
requests nothing can be judged and it says so with exit 3, never a pass; and a NEW run that was
interrupted is said. The run folders are written to the record contract directly (no server), so
the file runs in seconds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from contract.manifest import Manifest
from contract.records import REQUEST_SCHEMA, RequestRecord
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, write_trace
from tests.conftest import DATA, cli

LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms")


def run_folder(root: Path, name: str, requests: int) -> Path:
    """A completed run of `requests` requests of tiny-mix, one mode, every request ok."""
    run_dir = root / name
    trace = build_trace(load_scenario(str(DATA / "tiny-mix.toml"))[0], requests=requests, seed=7)
    write_trace(trace, run_dir / "trace.parquet", "tiny-mix", "0" * 64)
    rng = np.random.default_rng(3)
    rows = []
    for rid, tenant, offset, tokens in zip(*(trace[c].to_pylist() for c in ("request_id", "tenant", "offset_s",
                                                                              "max_tokens")), strict=True):
        e2e = rng.uniform(400.0, 1600.0)
        r = RequestRecord(run_id=name, mode="baseline", worker="w0", tenant=tenant, request_id=rid,
                          scheduled_ns=10**18 + int(offset * 1e9), offset_s=offset, status="ok")
        r.sent_ns, r.lateness_ms = r.scheduled_ns, 0.5
        r.ttft_ms, r.e2e_ms, r.completion_tokens = e2e * 0.2, e2e, tokens
        r.first_token_ns, r.last_token_ns = r.sent_ns + int(r.ttft_ms * 1e6), r.sent_ns + int(e2e * 1e6)
        rows.append(r.as_row())
    folder = run_dir / "requests" / "mode=baseline"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA), folder / "part-w0-00000.parquet")
    Manifest(run_id=name, scenario={"name": "tiny-mix"}, fleet={"name": "synthetic"}, modes=["baseline"], seed=7,
             requests=requests, status="completed").write(run_dir)
    return run_dir


def slower_copy(run_dir: Path, name: str, factor: float = 1.3) -> Path:
    """`run_dir` copied to `name` with every latency of every request multiplied by `factor`."""
    copy = run_dir.with_name(name)
    shutil.copytree(run_dir, copy)
    for part in (copy / "requests").rglob("*.parquet"):
        table = pq.read_table(part)
        for column in LATENCIES:
            i = table.schema.get_field_index(column)
            table = table.set_column(i, table.schema.field(i), pc.multiply(table[column], factor))
        pq.write_table(table.replace_schema_metadata(None).cast(REQUEST_SCHEMA), part)
    return copy


def test_a_run_against_itself_thirty_percent_slower_fails_on_the_typical_request(tmp_path):
    base = run_folder(tmp_path, "base", 80)
    new = slower_copy(base, "slower")
    assert ds.dataset(new / "requests").to_table()["e2e_ms"].to_pylist() == pytest.approx(
        [v * 1.3 for v in ds.dataset(base / "requests").to_table()["e2e_ms"].to_pylist()])
    out = cli("compare", str(base), str(new))
    said = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout + out.stderr
    # the p99s need 368 pairs: not judged; the typical request's change is, at exactly x1.3
    assert "gate failed: baseline/all the typical request's e2e_per_request regressed +30.0% (95% CI +30.0% to " \
           "+30.0%; --max-regression 5%)" in said
    assert "gate failed: baseline/all the typical request's ttft_per_request regressed +30.0%" in said
    assert "figures had too few requests in both runs to judge" in said and "no metric regressed" not in said
    lenient = cli("compare", str(base), str(new), "--max-regression", "50")
    assert lenient.returncode == 0 and "no metric regressed beyond 50% with significance" in lenient.stdout


def test_nothing_judged_is_not_a_pass(tmp_path):
    base = run_folder(tmp_path, "base", 5)   # fewer pairs than any figure needs (8 for the typical request)
    out = cli("compare", str(base), str(slower_copy(base, "slower")))
    said = " ".join(out.stdout.split())
    assert out.returncode == 3, out.stdout + out.stderr   # not judged: the check could not complete
    assert "gate not judged: none of the" in said and "nothing was passed or failed" in said
    assert "no metric regressed" not in said and "gate failed" not in said


def test_a_new_run_that_was_interrupted_is_said(tmp_path):
    base = run_folder(tmp_path, "base", 80)
    new = slower_copy(base, "cut", factor=1.0)
    manifest = json.loads((new / "manifest.json").read_text())
    manifest.update(status="interrupted", reason="stopped by signal")
    (new / "manifest.json").write_text(json.dumps(manifest))
    out = cli("compare", str(base), str(new))
    said = " ".join(out.stdout.split())
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"NEW ({new}) was interrupted (stopped by signal): only the requests that succeeded in both runs are " \
           "compared" in said
