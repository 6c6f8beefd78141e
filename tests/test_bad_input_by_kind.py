"""The bad input a new user found on a fresh clone (6c643f3), each kind end to end: one line, the
exit code of the contract, nothing lost. Four kinds are here; the other three have their own
homes:

- a trace too big to build, and one of decades: here;
- a report over records that span decades: here;
- an imported trace of absurd times and lengths, and its replay by two workers: here;
- an output folder that cannot be written (a read-only file system): here;
- a full disk during a run, whose manifest ends `failed` with the reason:
  tests/test_disk_full.py::test_a_full_results_disk_stops_the_run_and_keeps_what_was_written;
- a byte that is not UTF-8, named by its line and column (after a BOM too):
  tests/test_trace_import.py::test_a_byte_that_is_not_utf8_is_one_line_naming_its_place;
- a file with several bad rows, said in one pass with a count of the rest, and a scenario's shares
  said with its fields: tests/test_bad_input_matrix.py (`several`) and
  tests/test_scenarios.py::test_a_file_with_several_problems_says_them_all_in_one_pass_the_shares_with_the_fields.

Every value of every kind, not these examples: tests/test_input_surface.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from tests.conftest import (
    DATA,
    ROOT,
    cli,
    finished,
    memory_limit,
    sim_server,
    unshare_problem,
)

DEAD = ("--endpoints", "baseline=http://127.0.0.1:9")
YEARS_42_NS = 42 * 365 * 86400 * 10**9


def _one_line(ran, code: int = 2) -> str:
    said = ran.stdout + ran.stderr
    assert ran.returncode == code and "Traceback" not in said, said[-2000:]
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    return lines[0]


def test_a_trace_too_big_to_build_is_one_line_before_anything_is_allocated(tmp_path):
    """`--requests 99999999999999` once died in numpy allocating 7.28 TiB; a scenario of 10^12
    requests too. Under a 2 GiB limit, each is refused before any allocation."""
    with memory_limit():
        flag = cli("run", "--requests", "99999999999999", *DEAD, "--out", str(tmp_path))
        huge = tmp_path / "huge.toml"
        huge.write_text((DATA / "tiny-mix.toml").read_text().replace("requests = 1000", "requests = 1000000000000"))
        scenario = cli("trace", "build", "--scenario", str(huge), "--out", str(tmp_path / "t.parquet"))   # its size
        dense = cli("run", "--requests", "99999999", "--rate-scale", "1e6", *DEAD, "--out", str(tmp_path))
    assert "--requests 99,999,999,999,999 at 5 requests/s (rate_scale 1) would last 634,195.8 years" in _one_line(flag)
    assert "--requests 1,000,000,000,000" in _one_line(scenario)
    assert "needs about" in _one_line(dense) and "this process may use" in _one_line(dense)
    assert not any(tmp_path.iterdir()) or [p.name for p in tmp_path.iterdir()] == ["huge.toml"]   # no run folder


@pytest.mark.e2e
def test_a_trace_of_decades_is_refused_and_a_report_over_decades_stays_small(tmp_path, session_run):
    """`--rate-scale 1e-9 --requests 10` was accepted (42 years of arrivals), and its report then
    grew to 23.4 GB. The trace is refused; a report over records that do span 42 years (the
    session's run, moved apart in time) is read in bounded memory and time bins."""
    refused = cli("run", *DEAD, "--rate-scale", "1e-9", "--requests", "10", "--out", str(tmp_path))
    assert "would last 63.4 years, past the 30.0 days a trace may span" in _one_line(refused)

    run = tmp_path / "decades"
    shutil.copytree(session_run[0], run)
    ids = pq.read_table(run / "trace.parquet", columns=["request_id"])["request_id"].to_pylist()
    step = YEARS_42_NS // len(ids)
    for part in sorted((run / "requests").rglob("*.parquet")):
        table = pq.read_table(part)
        shift = pa.array(np.array([ids.index(r) * step for r in table["request_id"].to_pylist()], dtype=np.int64))
        for column in ("scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns"):
            table = table.set_column(table.schema.get_field_index(column), column, pc.add(table[column], shift))
        pq.write_table(table, part)
    assert pc.max(read_requests(run)["scheduled_ns"]).as_py() - pc.min(read_requests(run)["scheduled_ns"]).as_py() \
        > YEARS_42_NS * 0.9
    with memory_limit():
        report = cli("report", str(run))
    assert report.returncode in (0, 1) and "Traceback" not in report.stdout + report.stderr, report.stderr
    assert (run / "report.html").stat().st_size < 20 * 2**20


@pytest.mark.e2e
def test_an_imported_trace_is_bounded_and_its_replay_by_two_workers_loses_no_row(tmp_path):
    """Timestamps of 1e12 s were imported with exit 0, and the replay's sink then died on them,
    losing rows without a word. They are refused; absurd lengths and a negative time are not
    absurd enough to refuse, and their replay by two workers records every request once."""
    rows = [{"prompt": "a", "max_tokens": 5, "timestamp": 0}, {"prompt": "b", "max_tokens": 5, "timestamp": 1e12},
            {"prompt": "c", "max_tokens": 5, "timestamp": -50}]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    refused = cli("trace", "import", str(jsonl), "--format", "jsonl", "--out", str(tmp_path / "t.parquet"))
    assert "would last 31,709.8 years, past the 30.0 days a trace may span" in _one_line(refused)

    rows[1] = {"prompt": "b", "max_tokens": 1_000_000_000, "timestamp": 2}
    rows += [{"prompt": "d", "max_tokens": 5, "timestamp": 3}, {"prompt": "e", "max_tokens": 7, "timestamp": 4}]
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = tmp_path / "t.parquet"
    assert cli("trace", "import", str(jsonl), "--format", "jsonl", "--out", str(trace)).returncode == 0
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m") as url:
        ran = cli("run", "--endpoints", f"baseline={url}", "--trace", str(trace), "--rate-scale", "10",
                  "--workers", "2", "--out", str(tmp_path), "--run-id", "r")
    said = ran.stdout + ran.stderr
    assert ran.returncode in (0, 1) and "Traceback" not in said and "have no record" not in said, said[-3000:]
    records = read_requests(tmp_path / "r")
    assert sorted(records["request_id"].to_pylist()) == sorted(pq.read_table(trace)["request_id"].to_pylist())
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["unrecorded"] == {}, manifest["status"]
    # the one that asks for a billion tokens is the server's to refuse: one row of its own kind
    asked = pq.read_table(trace, columns=["request_id", "max_tokens"]).to_pylist()
    billion = [r["request_id"] for r in asked if r["max_tokens"] == 1_000_000_000]
    huge = records.filter(pc.is_in(records["request_id"], pa.array(billion))).to_pylist()
    assert len(huge) == 1 and huge[0]["status"] == "error" and huge[0]["http_status"] == 400, huge


def test_an_output_folder_on_a_read_only_file_system_is_one_line_before_anything_starts(tmp_path):
    """`--out` on a read-only folder was a traceback (`OSError: [Errno 30]`, exit 1)."""
    problem = unshare_problem()
    if problem:
        pytest.skip(problem)
    disk = tmp_path / "ro"
    argv = [shutil.which("unshare"), "--user", "--map-root-user", "--mount", "--", sys.executable,
            str(ROOT / "tests" / "in_tmpfs.py"), "ro", str(disk), str(tmp_path / "copy"), "--",
            sys.executable, "-m", "loadtest", "run", "--out", str(disk), "--run-id", "x"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out, err = finished(proc)
    assert proc.returncode == 2 and "Traceback" not in out + err, out + err
    assert err.strip().splitlines() == [f"loadtest run: error: --out {disk}: cannot write {disk / 'x'} (Read-only file "
                                        "system)"], err
    assert "mount namespace" in out and "replica" not in out   # nothing started
    assert not Path(tmp_path / "copy").exists() or not any((tmp_path / "copy").iterdir())
