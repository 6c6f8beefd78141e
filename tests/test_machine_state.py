"""What a machine holds outside the checkout never changes a run: Locust's own configuration (a
`locust.conf` where the user stands, a `~/.locust.conf`, LOCUST_* variables), which Locust would
read under every replay, is kept from the Locust processes a run starts (common.process.child_env);
and the suite itself starts from the state tests/machine.py makes, not from what an earlier run
left."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.compute as pc
import pytest

from analysis.reader import read_requests
from tests import machine
from tests.conftest import DATA, ROOT, cli

# What each of Locust's configuration sources would do to a replay: stop it after a second.
CUT_SHORT = "run-time = 1s\n"


@pytest.mark.e2e
def test_locust_configuration_on_the_machine_does_not_reach_the_replay(world_fleet, tmp_path):
    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir()
    here.mkdir()
    (home / ".locust.conf").write_text(CUT_SHORT)
    (here / "locust.conf").write_text(CUT_SHORT)
    (here / "pyproject.toml").write_text('[tool.locust]\nrun-time = "1s"\n')
    env = {**os.environ, "HOME": str(home), "LOCUST_RUN_TIME": "1s", "LOCUST_LOGLEVEL": "CRITICAL"}
    out = cli("run", "--endpoints", world_fleet.endpoints("baseline"), "--modes", "baseline", "--scenario",
              str(DATA / "tiny-mix.toml"), "--requests", "30", "--rate-scale", "0.2", "--cooldown", "0", "--workers",
              "2", "--out", str(tmp_path / "results"), "--run-id", "conf", env=env, cwd=here)
    assert out.returncode == 0, out.stdout + out.stderr
    records = read_requests(tmp_path / "results" / "conf")
    offsets = records["offset_s"].to_pylist()
    assert max(offsets) > 3, "the trace must outlast the run-time the files ask for"
    assert pc.all(pc.equal(records["status"], "ok")).as_py() and records.num_rows == 30, records["status"]


def test_the_suite_starts_from_the_state_it_makes(tmp_path):
    """tests/machine.py: Ray's token and folder are the session's own, and no variable of a
    developer's shell that the product, Ray, Locust, vLLM or the openai client reads is left."""
    assert os.environ["RAY_AUTH_TOKEN_PATH"].startswith(os.environ["RAY_TMPDIR"])
    assert len(open(os.environ["RAY_AUTH_TOKEN_PATH"]).read()) == 64
    left = [n for n in machine.PREPARED if not n.startswith(machine.KEPT_PREFIX)]   # as prepare left it
    assert left == ["RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR"], left
    from hypothesis import settings
    assert settings.default.database is None and settings.default.derandomize


def test_prepare_clears_what_a_developers_shell_would_hand_the_suite():
    shell = {**os.environ, "RAY_ADDRESS": "10.0.0.1:6379", "RAY_AUTH_TOKEN": "theirs", "LOCUST_RUN_TIME": "1s",
             "LOADTEST_WEB_USER": "me", "VLLM_API_KEY": "k", "OPENAI_BASE_URL": "http://example.invalid",
             "LOADTEST_TEST_TIMELINE": "/dev/null"}
    code = ("import json, os; from tests import machine; machine.prepare(); "
            "print(json.dumps(sorted(n for n in os.environ if n.startswith(machine.CLEARED_PREFIXES))))")
    out = subprocess.run([sys.executable, "-c", code], env=shell, cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    left = [n for n in json.loads(out.stdout) if n != "LOADTEST_TEST_TAG"]   # the suite's own tag, which each test sets
    assert left == ["LOADTEST_TEST_TIMELINE", "RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR"], out.stdout
