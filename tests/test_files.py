"""common/files.py: a result file is written whole or not at all, and nothing is left beside it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common import files


def test_a_write_that_fails_midway_keeps_the_file_before_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "report.md"
    files.write_text(path, "first\n")
    with pytest.raises(RuntimeError), files.replaced(path) as tmp:
        tmp.write_text("half of the sec")
        raise RuntimeError("the disk filled")
    assert path.read_text() == "first\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]
    files.write_text(path, "second\n")
    assert path.read_text() == "second\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]


def test_a_table_is_written_under_a_hidden_name_then_renamed(tmp_path):
    path = tmp_path / "summary.parquet"
    files.write_table(pa.table({"x": [1, 2, 3]}), path, compression="zstd")
    assert pq.read_table(path)["x"].to_pylist() == [1, 2, 3]
    assert files.temporary_beside(path).name == ".summary.parquet.tmp"   # pyarrow's datasets skip it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.parquet"]
