"""The results disk fills mid-run: a real tmpfs too small for the run's records (tests/in_tmpfs.py
in a private mount namespace). The run stops with exit 3 and one line naming the records' folder
and the OS error, every part file already written stays readable, the records read are each a
distinct request of the trace, and no process is left."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from contract.manifest import RESERVE_BYTES, SPACE_RESERVE, Manifest, hold_reserve
from contract.records import REQUEST_SCHEMA, STATUSES, RequestRecord
from loadtest.replay import protocol
from loadtest.request.client_stats import ClientStats
from loadtest.request.sink import ParquetSink, RecordsNotWritten
from tests.conftest import DATA, ROOT, cli, finished, pid_alive, unshare_problem
from tests.test_coordinator import N, _coordinator

REQUESTS = 300        # at --rate-scale 3, about 9 s of tiny-mix
# the run's other files before the records (manifest, logs, targets: about 40 KiB here), and the room the run
# holds back for its manifest's last word
HEADROOM = 64 * 1024 + RESERVE_BYTES
# Measured here: a request's record is about 5x its trace row (timings, chunk lists), so a disk of
# 3x the trace plus HEADROOM holds the trace and the first half or so of the records, not the rest.
TRACE_FACTOR = 3


def _in_namespace(ns: str) -> list[int]:
    """The pids of processes still in mount namespace `ns` (`mnt:[...]`)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "mnt") == ns and pid_alive(int(entry.name)):
                    pids.append(int(entry.name))
            except OSError:  # gone meanwhile, or not ours to read
                pass
    return pids


def _in_group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def _left(ns: str, pgid: int, pids: list[int], wait_s: float = 20.0) -> list[int]:
    """What is still running of the run after `wait_s` (a killed process takes a moment to go)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = sorted(set(_in_namespace(ns) + _in_group(pgid) + [p for p in pids if pid_alive(p)]))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


@pytest.mark.e2e
@pytest.mark.rows_may_be_lost("the records that did not fit on the full disk; the test counts them itself")
@pytest.mark.parametrize(("workers", "fleet"), [(1, "own"), (2, "held")],
                         ids=["lone-locust-own-fleet", "master-and-workers-held-fleet"])
def test_a_full_results_disk_stops_the_run_and_keeps_what_was_written(tmp_path, workers, fleet, request):
    problem = unshare_problem()
    if problem:
        pytest.skip(problem)
    trace = tmp_path / "trace.parquet"
    built = cli("trace", "build", "--scenario", str(DATA / "tiny-mix.toml"), "--out", str(trace),
                "--requests", str(REQUESTS), "--rate-scale", "3")
    assert built.returncode == 0, built.stdout + built.stderr
    size_kib = (TRACE_FACTOR * trace.stat().st_size + HEADROOM) // 1024
    # a fleet of its own (started on a Ray inside the namespace, torn down with the run) or the shared one
    where = (["--fleet", str(DATA / "fast-sim.toml")] if fleet == "own"
             else ["--endpoints", str(request.getfixturevalue("world_fleet").state)])
    disk, copy = tmp_path / "disk", tmp_path / "copy"
    argv = [shutil.which("unshare"), "--user", "--map-root-user", "--mount", "--",
            sys.executable, str(ROOT / "tests" / "in_tmpfs.py"), f"{size_kib}k", str(disk), str(copy), "--",
            sys.executable, "-m", "loadtest", "run", "--trace", str(trace), *where,
            "--modes", "baseline", "--workers", str(workers), "--out", str(disk), "--run-id", "full", "--cooldown", "0"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output, _ = finished(proc, 240)
    ns = re.search(r"^mount namespace: (mnt:\[\d+\])$", output, re.M)
    assert ns, output

    assert proc.returncode == 3, output
    assert "Traceback" not in output, output
    folder = disk / "full" / "requests" / "mode=baseline"
    said = re.findall(rf"^loadtest run: error: could not write records to {re.escape(str(folder))}: \[Errno 28\] "
                      rf"No space left on device; (\d+) of {REQUESTS} scheduled requests were recorded, "
                      rf"the other (\d+) could not be written$", output, re.M)
    assert len(said) == 1, output
    recorded, unwritten = (int(n) for n in said[0])
    assert 0 < recorded < REQUESTS and recorded + unwritten == REQUESTS, output
    bar = [line for line in output.splitlines() if line.strip().startswith("baseline ")][-1]
    assert re.search(rf" \d[\d,]*/{REQUESTS} done", bar), bar   # what ended, never a negative count

    run_dir = copy / "full"
    parts = sorted((run_dir / "requests" / "mode=baseline").iterdir())
    assert parts and all(p.name.startswith("part-") and p.suffix == ".parquet" for p in parts), parts  # no .tmp
    assert sum(pq.read_table(p).num_rows for p in parts) == recorded   # every part reads, whole
    records = read_requests(run_dir)
    ids = records["request_id"].to_pylist()
    assert len(ids) == len(set(ids)) == recorded
    assert set(ids) <= set(pq.read_table(trace, columns=["request_id"])["request_id"].to_pylist())
    assert set(records["status"].to_pylist()) <= set(STATUSES)
    errors = records.filter(pc.equal(records["status"], "error"))
    assert errors["error_kind"].null_count == 0   # each error classified by its kind

    # its last word written in the room held back for it: failed, and why
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed", manifest["status"]
    assert f"{recorded:,} of {REQUESTS:,} scheduled requests were recorded" in manifest["reason"]
    assert manifest["mode_runs"]["baseline"]["end"] == "failed"
    assert not (run_dir / SPACE_RESERVE).exists()

    mr = manifest["mode_runs"]["baseline"]   # written once the replay started, before the records filled the disk
    assert len(mr["locust_pids"]) == (1 if workers == 1 else 1 + workers)   # a lone process, or a master and workers
    own = [r["pid"] for r in mr["replicas"]] if fleet == "own" else []   # the shared fleet's stay up
    assert _left(ns.group(1), proc.pid, mr["locust_pids"] + own) == []


def _row(i: int) -> dict:
    return RequestRecord(run_id="r", mode="m", worker="w0", tenant="t", request_id=f"r{i}", scheduled_ns=i,
                         offset_s=float(i), status="not_sent", error="x").as_row()


def test_a_write_error_stops_the_sink_and_keeps_the_parts_before_it(tmp_path):
    """A real ENOSPC (root ignores read-only permissions, so the second part's temporary name is
    made a link to /dev/full): the first part stays whole, the failed one leaves nothing behind,
    nothing more is written, and close() says how many rows are on disk and how many are not."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    (tmp_path / ".part-w0-00001.parquet.tmp").symlink_to("/dev/full")
    with ThreadPoolExecutor(1) as ex:
        sink = ParquetSink(tmp_path, "w0", REQUEST_SCHEMA, ex, flush_rows=2)
        for i in range(4):   # two parts: the second one fails
            sink.add(_row(i))
        for fut in list(sink._pending):
            fut.result()
        assert sink.failed and sink.error is not None
        for i in range(4, 7):   # after the failure: counted as lost, never written
            sink.add(_row(i))
        with pytest.raises(RecordsNotWritten) as failed:
            sink.close()
    assert str(failed.value) == f"could not write records to {tmp_path}: [Errno 28] No space left on device"
    assert (failed.value.written, failed.value.lost) == (2, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-w0-00000.parquet"]
    assert pq.read_table(tmp_path / "part-w0-00000.parquet")["request_id"].to_pylist() == ["r0", "r1"]


def test_a_master_says_what_its_workers_could_not_write(tmp_path):
    """A worker whose records could not be written is not filled in by the master (the same disk
    is full): the replay ends failed, saying the folder, the error and the rows on disk."""
    c, _loop, master, sink, said = _coordinator(tmp_path)
    c.start()
    full = protocol.UnwrittenRecords("/x/requests/mode=m", "[Errno 28] No space left on device", written=2, total=5)
    c.on_message("a", protocol.WorkerDone("failed", protocol.Counts(4, 4, 0), ClientStats().take(0.0),
                                          not_written=full))
    c.on_message("b", protocol.WorkerDone("completed", protocol.Counts(5, 5, 0), ClientStats().take(0.0)))
    c.tick()
    assert not any(isinstance(m, protocol.Abandon) for _, m in master.sent) and not sink.rows
    assert said[-2:] == [protocol.UnwrittenRecords(full.directory, full.error, 2 + 5, N),
                         protocol.Finished("failed", 7)]
    assert said[-2].message == ("could not write records to /x/requests/mode=m: [Errno 28] No space left on device; "
                                "7 of 10 scheduled requests were recorded, the other 3 could not be written")
    # the message crosses from the worker to the master and back, as Locust and stdout carry it
    kind, data = protocol.to_locust(protocol.WorkerDone("failed", protocol.Counts(), ClientStats().take(0.0),
                                                        not_written=full))
    assert protocol.from_locust(kind, data).not_written == full
    assert protocol.parse_line(protocol.encode_line(said[-2])) == said[-2]


def test_a_manifest_that_cannot_be_written_is_said_once_and_the_last_one_kept(tmp_path, capsys):
    """A real ENOSPC on the manifest's temporary file: write() says so in one line (once, however
    often it is tried), leaves the manifest last written whole, and tells the command."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    m = Manifest(run_id="r", scenario={}, fleet={}, modes=["m"], seed=1, requests=3)
    m.host["argv"] = ["run", "--out", str(tmp_path)]
    assert m.write(tmp_path) and m.unwritten is None
    (tmp_path / ".manifest.json.tmp").symlink_to("/dev/full")
    m.status = "failed"
    assert not m.write(tmp_path)
    (tmp_path / ".manifest.json.tmp").symlink_to("/dev/full")
    assert not m.write(tmp_path)   # still full: nothing more said
    said = capsys.readouterr().err.splitlines()
    assert said == [f"loadtest run: error: could not write {tmp_path / 'manifest.json'}: [Errno 28] "
                    "No space left on device"]
    assert m.unwritten and not (tmp_path / ".manifest.json.tmp").exists()
    assert Manifest.read(tmp_path).status == "running"   # the last one written, whole
    assert m.write(tmp_path) and m.unwritten is None and Manifest.read(tmp_path).status == "failed"


@pytest.mark.e2e
def test_summaries_that_cannot_be_written_are_one_line_and_the_last_ones_kept(tmp_path, session_run):
    """`loadtest report` on a disk that fills while it writes report.html (a real ENOSPC on its
    temporary name): one line and exit 3, no traceback; report.html still holds the last report
    whole, byte for byte, summary.parquet reads, and no temporary file is left beside them."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    run_dir = tmp_path / "r"
    shutil.copytree(session_run[0], run_dir)
    before = (run_dir / "report.html").read_bytes()
    (run_dir / ".report.html.tmp").symlink_to("/dev/full")
    again = cli("report", str(run_dir))
    assert again.returncode == 3, again.stdout + again.stderr
    assert "Traceback" not in again.stdout + again.stderr
    assert again.stderr.strip().splitlines() == [
        f"loadtest report: error: could not write the run's summaries to {run_dir}: [Errno 28] No space left on device"]
    assert (run_dir / "report.html").read_bytes() == before
    assert pq.read_table(run_dir / "summary.parquet").num_rows > 0
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_takes_the_manifests_last_word_in_the_room_held_back_for_it(tmp_path):
    """The run folder holds RESERVE_BYTES back (`guarded`); a manifest write that meets ENOSPC
    frees them and writes again, so a run on a full disk still ends `failed` with its reason."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    m = Manifest(run_id="r", scenario={}, fleet={}, modes=["m"], seed=1, requests=3)
    assert m.write(tmp_path)
    hold_reserve(tmp_path)
    assert (tmp_path / SPACE_RESERVE).stat().st_size == RESERVE_BYTES
    (tmp_path / ".manifest.json.tmp").symlink_to("/dev/full")     # the disk is full
    m.status, m.reason = "failed", "could not write records"
    assert m.write(tmp_path) and Manifest.read(tmp_path).status == "failed"
    assert not (tmp_path / SPACE_RESERVE).exists()
