"""Every benchmark in bench/ runs here at a tiny size and must exit 0, so none can rot (the real
sizes are `make bench`'s). A benchmark prints figures, which are not checked here: speed is shown
by the benchmarks' own ratios against a reference in the same run, never by a timed test."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import PRINTED, ROOT

BENCH = ROOT / "bench"
# Each script with a command line of its own: its tiny arguments ({state}: the shared fleet's
# state file, {tmp}: the test's folder), or the script that runs it.
TINY: dict[str, list[str] | str] = {
    "analysis.py": ["--rows", "5000", "--data", "{tmp}/data"],
    "calibrate.py": [],
    "domains.py": [],
    "fit_acceptance.py": [],
    "single_stream_corpora.py": ["--limit", "2", "--cells", "1"],
    "loadgen.py": ["--seconds", "0.5"],
    "replay_memory.py": ["--every", "1", "--out", "{tmp}", "--", "--endpoints", "{state}", "--modes", "baseline",
                         "--scenario", "tests/data/tiny-mix.toml", "--requests", "12", "--workers", "1"],
    "sim_throughput.py": ["--seconds", "0.5"],
    "soak_memory.py": ["--minutes", "0.25", "--every", "1", "--settle", "2", "--window", "10s", "--mode", "baseline",
                       "--out", "{tmp}", "--", "--endpoints", "{state}"],
    "trace_build.py": ["--requests", "2000", "--file-requests", "10000"],
    "v1_curve.py": ["--modes", "eagle", "--concurrency", "1", "--level-duration", "2", "--requests", "4"],
    "reference_client.py": "loadgen.py",   # the reference load generator it is measured against
    "stream_server.py": "loadgen.py",      # the fast server both clients stream from
}


def _scripts() -> list[str]:
    """The files of bench/ that run as programs (an `if __name__ == "__main__"` block)."""
    out = []
    for path in sorted(BENCH.glob("*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body):
            out.append(path.name)
    return out


def test_every_benchmark_has_a_tiny_size_here():
    assert _scripts() == sorted(TINY), "a bench/ script without a tiny run in tests/test_bench.py (or gone)"


@pytest.mark.e2e
@pytest.mark.parametrize("script", [s for s, how in TINY.items() if isinstance(how, list)])
def test_the_benchmark_runs_at_a_tiny_size(script, tmp_path, request):
    argv = TINY[script]
    state = str(request.getfixturevalue("world_fleet").state) if "{state}" in argv else ""
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{state}", state) for a in argv]
    out = subprocess.run([sys.executable, str(BENCH / script), *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    PRINTED.extend([out.stdout, out.stderr])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip(), "a benchmark that printed nothing"
