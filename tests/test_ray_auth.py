"""Joining a Ray cluster that has token authentication, on a machine with no token anywhere: what a
user who followed the README's multi-node steps sees when the token did not come along (one line,
exit 2, the run refused before anything started, nothing written under HOME), and when the token is
the wrong one. Joining with the right token is what tests/test_ray_cluster.py and
tests/test_turns.py do on every run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.ray_access import access_problem, refused_for_token, token_source
from tests.conftest import DATA, ROOT, free_port, loadtest
from tests.ray_nodes import RayTestCluster, cpu_node, head_address, joined, ray_cluster, start_node

README = (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def head() -> Iterator[RayTestCluster]:
    with ray_cluster(cpu_node(2), []) as cluster:
        yield cluster


def bare_machine(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a new machine has it: no Ray variable (no token, no mode), an
    empty HOME (no ~/.ray/auth_token), plus `extra`."""
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), **extra}


def join(cluster: RayTestCluster, out: Path, env: dict[str, str]):
    return loadtest("run", "--address", cluster.address, "--scenario", str(DATA / "tiny-mix.toml"), "--fleet",
                    str(DATA / "fast-sim.toml"), "--modes", "baseline", "--requests", "5", "--out", str(out),
                    "--run-id", "joined", "--no-metrics", timeout=180, env=env)


@pytest.mark.e2e
@pytest.mark.xdist_group("ray-auth")   # one worker starts the head once
@pytest.mark.parametrize("extra, source, refused_by_gcs", [
    ({}, None, True),                                      # Ray's default: no token, so it does not even try
    ({"RAY_AUTH_MODE": "token"}, None, False),             # Ray itself says no token before it connects
    ({"RAY_AUTH_TOKEN": "0" * 64}, "RAY_AUTH_TOKEN", True),
], ids=["no-token", "mode-without-token", "wrong-token"])
def test_a_run_without_the_clusters_token_is_refused_in_one_line(head, tmp_path, extra, source, refused_by_gcs):
    home = tmp_path / "home"
    out = join(head, tmp_path / "results", bare_machine(home, **extra))
    assert out.returncode == 2, out.stdout + out.stderr   # bad input: the environment lacks the credential
    assert out.stderr.splitlines() == [f"loadtest run: error: {access_problem(head.address, source)}"], out.stderr
    assert "Traceback" not in out.stdout + out.stderr and "gcs_client" not in out.stderr
    run_dir = tmp_path / "results" / "joined"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "refused" and "token" in manifest["reason"]
    # Ray's own words (a warning a second for 10 s) are in ray.log, not on the console
    assert ("InvalidAuthToken" in (run_dir / "logs" / "ray.log").read_text()) == refused_by_gcs
    assert not list(home.rglob("*")), "joining wrote under HOME"   # no token made up on the driver's side


def test_where_the_token_comes_from_follows_rays_order(tmp_path):
    (tmp_path / ".ray").mkdir()
    assert token_source({}, tmp_path) is None
    (tmp_path / ".ray" / "auth_token").write_text("t")
    assert token_source({}, tmp_path) == str(tmp_path / ".ray" / "auth_token")
    assert token_source({"RAY_AUTH_TOKEN_PATH": "/k"}, tmp_path) == "RAY_AUTH_TOKEN_PATH (/k)"
    assert token_source({"RAY_AUTH_TOKEN": "x", "RAY_AUTH_TOKEN_PATH": "/k"}, tmp_path) == "RAY_AUTH_TOKEN"
    assert refused_for_token("W gcs_client.cc:210: ... Unauthenticated: RPC error: InvalidAuthToken: ...")
    assert not refused_for_token("Failed to connect to GCS at address 127.0.0.1:9: connection refused")


README_STEPS = re.search(r"```bash\n((?:\s*#\s*1\. on the head.*?\n)(?:.*?\n)*?)\s*```", README).group(1)
# What the README's steps leave to each machine, added here for a node on this one: a node in a
# process group of the test's (--block), of a small size, no dashboard, no usage report.
NODE_FLAGS = ["--block", "--num-cpus", "2", "--num-gpus", "0", "--disable-usage-stats"]
HEAD_FLAGS = [*NODE_FLAGS, "--include-dashboard", "false"]   # a head's own flag (a joining node refuses it)


def readme_machines() -> list[tuple[str, dict[str, str], list[list[str]]]]:
    """The README's steps, machine by machine: (heading, the variables it exports, its commands)."""
    machines: list[tuple[str, dict[str, str], list[list[str]]]] = []
    for line in (raw.strip() for raw in README_STEPS.splitlines() if raw.strip()):
        if re.match(r"# \d\. ", line):
            machines.append((line, {}, []))
        elif line.startswith("export "):
            machines[-1][1].update(dict(word.split("=", 1) for word in shlex.split(line)[1:]))
        else:
            machines[-1][2].append(shlex.split(line))
    return machines


@pytest.mark.e2e
def test_the_readme_multi_node_steps_work_on_new_machines(tmp_path):
    """The README's three steps as written, each machine with an empty HOME of its own and no Ray
    variable but those the steps export: the head makes the token with Ray's own command, the
    other node and the driver get a copy of the head's ~/.ray/auth_token (the step the README says
    in words), the node joins and a run on the driver completes through the cluster."""
    (head_at, head_vars, head_cmds), (node_at, node_vars, node_cmds), (driver_at, driver_vars, driver_cmds) = \
        readme_machines()
    assert "head" in head_at and "other node" in node_at and "loadtest" in driver_at
    assert [c[:2] for c in head_cmds] == [["ray", "get-auth-token"], ["ray", "start"]]
    assert [c[:2] for c in node_cmds] == [["ray", "start"]] and [c[:2] for c in driver_cmds] == [["loadtest", "run"]]
    port, ray_dir = str(free_port()), Path(tempfile.mkdtemp(prefix="ray"))   # short: Ray's socket paths
    ray = str(Path(sys.executable).with_name("ray"))

    def machine(name: str, variables: dict[str, str]) -> dict[str, str]:
        return bare_machine(tmp_path / name, **variables, RAY_TMPDIR=str(ray_dir))

    head_env, node_env, driver_env = machine("head", head_vars), machine("node", node_vars), machine("driver",
                                                                                                    driver_vars)
    made = subprocess.run([ray, *head_cmds[0][1:]], env=head_env, capture_output=True, text=True, timeout=60)
    token = Path(head_env["HOME"]) / ".ray" / "auth_token"
    assert made.returncode == 0 and token.is_file(), made.stderr
    for env in (node_env, driver_env):   # the copy the README asks for
        (Path(env["HOME"]) / ".ray").mkdir()
        shutil.copy(token, Path(env["HOME"]) / ".ray" / "auth_token")
    here = {"6379": port}   # the README's port, and the head's address once it is known
    nodes = [start_node([*(here.get(w, w) for w in head_cmds[1][2:]), *HEAD_FLAGS], head_env)]
    try:
        here["HEAD_IP:6379"] = head_address(nodes[0])
        assert here["HEAD_IP:6379"].endswith(f":{port}")
        nodes.append(start_node([*(here.get(w, w) for w in node_cmds[0][2:]), *NODE_FLAGS], node_env))
        joined(nodes[1])
        # the README's `loadtest run --address HEAD_IP:6379`, then a small run of the test's
        run_argv = [here.get(w, w) for w in driver_cmds[0][1:driver_cmds[0].index("--address") + 2]]
        out = loadtest(*run_argv, "--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "fast-sim.toml"),
                       "--modes", "baseline", "--requests", "5", "--cooldown", "0", "--no-metrics", "--out",
                       str(tmp_path / "results"), "--run-id", "readme", timeout=300, env=driver_env)
    finally:
        for node in reversed(nodes):
            node.ask_stop()
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert run_argv[0] == "run" and out.returncode == 0, out.stdout + out.stderr
    manifest = json.loads((tmp_path / "results" / "readme" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["mode_runs"]["baseline"]["records"] == 5
