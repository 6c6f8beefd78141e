"""`loadtest run ... > log`: without a terminal the bars are drawn only at the end, so the log gets a
progress line per running mode at a steady interval while it runs (nohup, CI, a CronJob); and the
dataset it leaves is one file per mode."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
LINE = re.compile(r"^\d\d:\d\d:\d\d baseline: (\d+)/60 done · (\d+) sent.* in, ETA ")


def test_a_run_into_a_log_file_says_how_far_each_mode_is_while_it_runs(tmp_path, world_fleet):
    log = tmp_path / "run.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "loadtest", "run", "--endpoints", str(world_fleet.state),
                                 "--modes", "baseline", "--requests", "60", "--progress-every", "1",
                                 "--out", str(tmp_path / "results")],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            seen_running = None
            while proc.poll() is None:
                lines = [m for line in log.read_text().splitlines() if (m := LINE.match(line))]
                if lines and seen_running is None:
                    seen_running = lines[0]   # written while the run goes on, not at its end
                time.sleep(0.2)
            assert proc.wait(timeout=120) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert seen_running is not None, text
    assert 0 <= int(seen_running.group(1)) <= int(seen_running.group(2)) <= 60
    assert "TTFT p50" in text and "Traceback" not in text
    # and the mode's part files (one a second) were compacted into one when its replay ended
    (folder,) = (tmp_path / "results").glob("*/requests/mode=baseline")
    assert [p.name for p in folder.iterdir()] == ["part-compact-00000.parquet"]
