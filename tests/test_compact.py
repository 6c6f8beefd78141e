"""A mode's part files compacted once its replay ended: the same rows in a few files, and a crash at
any step leaves a dataset that reads whole, with no row twice."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pyarrow.compute as pc

from analysis.reader import read_requests
from contract.parts import PREFIX, record_parts
from contract.records import REQUEST_SCHEMA, RequestRecord
from loadtest.request.compact import compact
from loadtest.request.sink import ParquetSink
from loadtest.request.tally import Tally, observe_batch, tally_of


def _records(run_dir, n: int = 300, workers: int = 3):
    """`n` records of one mode, flushed by `workers` sinks every 10 rows: n / 10 part files."""
    folder = run_dir / "requests" / "mode=baseline"
    with ThreadPoolExecutor(1) as ex:
        sinks = [ParquetSink(folder, f"w{k}", REQUEST_SCHEMA, ex, flush_rows=10) for k in range(workers)]
        for i in range(n):
            rec = RequestRecord(run_id="r", mode="baseline", worker=f"w{i % workers}", tenant="chat",
                                request_id=f"r{i:06d}", scheduled_ns=i, offset_s=i / 10, status="not_sent")
            sinks[i % workers].add(rec.as_row())
        for s in sinks:
            s.close()
    return folder


def test_parts_become_one_file_with_the_same_rows(tmp_path):
    folder = _records(tmp_path)
    before = read_requests(tmp_path).sort_by("request_id")
    assert len(list(folder.glob("part-*.parquet"))) == 30
    done = compact(folder)
    assert (done.parts, done.files, done.rows) == (30, 1, 300)
    assert [p.name for p in folder.iterdir()] == [f"{PREFIX}00000.parquet"]
    after = read_requests(tmp_path).sort_by("request_id")
    assert after.equals(before.select(after.column_names))
    assert tally_of(folder).total().recorded == 300
    assert compact(folder).files == 0   # nothing left to compact


def test_a_file_holds_at_most_file_rows_and_a_later_replay_adds_to_them(tmp_path):
    folder = _records(tmp_path)
    assert compact(folder, file_rows=100, row_group_rows=25).files == 3
    more = _records(tmp_path / "more", n=30)   # a resumed soak's parts, beside the compacted ones
    for p in more.glob("part-*.parquet"):
        shutil.copy(p, folder / p.name.replace("part-w", "part-x"))
    assert compact(folder).files == 1
    assert sorted(p.name for p in folder.iterdir()) == [f"{PREFIX}{k:05d}.parquet" for k in range(4)]
    assert read_requests(tmp_path).num_rows == 330


def test_a_crash_between_the_rename_and_the_deletes_counts_no_row_twice(tmp_path):
    folder = _records(tmp_path)
    kept = tmp_path / "kept"
    shutil.copytree(folder, kept)
    compact(folder)
    for p in kept.glob("part-*.parquet"):   # the parts it holds, not deleted yet
        shutil.copy(p, folder / p.name)
    (folder / ".compact-00001.parquet").write_bytes(b"half a file")   # and a compaction cut short
    assert [p.name for p in record_parts(folder)] == [f"{PREFIX}00000.parquet"]
    records = read_requests(tmp_path)
    assert records.num_rows == 300 and pc.count_distinct(records["request_id"]).as_py() == 300
    assert tally_of(folder).total().recorded == 300
    assert compact(folder).files == 0 and [p.name for p in folder.iterdir()] == [f"{PREFIX}00000.parquet"]


def test_the_recount_reads_the_records_once_beside_the_compaction(tmp_path):
    """The compaction hands every row it reads to `seen`; with the files it did not write (earlier
    compacted ones) tallied apart, the recount is the tally a fresh read gives, from one read."""
    folder = _records(tmp_path)
    assert compact(folder, file_rows=100).files == 3          # an earlier replay's rows, compacted
    more = _records(tmp_path / "more", n=30)
    for p in more.glob("part-*.parquet"):
        shutil.copy(p, folder / p.name.replace("part-w", "part-x"))
    tally, rows = Tally(), []
    done = compact(folder, seen=lambda batch: (rows.append(batch.num_rows), observe_batch(tally, batch)))
    assert sum(rows) == 30 and len(done.read) == 3 and done.written == (f"{PREFIX}00003.parquet",)
    tally_of(folder, skip=done.written, into=tally)           # the earlier files, read apart
    fresh = tally_of(folder)
    assert tally.total().recorded == fresh.total().recorded == 330
    assert tally.total().requests == fresh.total().requests
    # from a scheduled time on (a resumed replay's own rows): the same filter both ways
    since = Tally()
    again = compact(folder, seen=lambda batch: observe_batch(since, batch, 100))
    assert again.files == 0 and tally_of(folder, 100, skip=again.written, into=since).total().recorded == 200
