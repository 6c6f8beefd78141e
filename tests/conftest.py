"""Shared helpers and the session's rules.

- `cli(...)` runs `loadtest ARGS` in this process (`main(argv)`, output captured), for every
  command whose process is not the point; `loadtest(...)` runs it as a subprocess, as a user would,
  where the process is (signals, Ray, the entry point itself).
- `world`: the session's shared simulator fleet (tests/world.py), reached with `--endpoints`.
- After every test, tests/invariants.py's rules: no process left behind, the session's API key
  nowhere, exactly one record per scheduled request in every run folder, e2e marked where due.
"""

from __future__ import annotations

import io
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests import invariants, machine, priority, world

MACHINE = machine.prepare()   # before anything starts: Ray's token and folder, a clean environment

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("data")
MODEL = "meta-llama/Llama-3.3-70B-Instruct"

# One key for the session, in the environment of everything it starts: every command sends it
# (--api-key-env's default), the shared fleet requires it, and it must end up in no file or output.
API_KEY = f"sk-loadtest-session-{secrets.token_hex(12)}"
SESSION_TAG = f"session-{secrets.token_hex(6)}"
os.environ[invariants.KEY_ENV] = API_KEY
os.environ[invariants.TAG] = SESSION_TAG
PRINTED: list[str] = []   # what the helpers' commands printed during the current test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Ran:
    """A command's outcome, as subprocess.CompletedProcess has it."""

    returncode: int
    stdout: str
    stderr: str


def loadtest(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run the `loadtest` CLI as a user would, in a process of its own, capturing its output."""
    out = subprocess.run([sys.executable, "-m", "loadtest", *args], capture_output=True, text=True,
                         timeout=timeout, cwd=kw.pop("cwd", ROOT), **kw)
    PRINTED.extend([out.stdout, out.stderr])
    return out


@contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def _directory(cwd: Path | str | None) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(cwd or ROOT)
    try:
        yield
    finally:
        os.chdir(before)


class CommandTimeout(BaseException):
    """A command run by `cli` outlived its time (a BaseException: no `except Exception` keeps it)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expired(signum, frame) -> None:
        raise CommandTimeout(f"the command ran past {seconds:g} s")

    before = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


MEMORY_HEADROOM = 2 << 30   # what a command may map past what the test process already has: 2 GiB


@contextmanager
def memory_limit(headroom: int = MEMORY_HEADROOM) -> Iterator[None]:
    """This process's address space (RLIMIT_AS) held to what it maps now plus `headroom` for the
    block, then given back: an allocation past it fails here as a MemoryError (the command must
    turn it into its one line), never by taking the machine's memory. What the block starts
    inherits the limit."""
    from scenarios.limits import mapped_bytes

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    mapped = mapped_bytes()
    limit = mapped + headroom if hard == resource.RLIM_INFINITY else min(mapped + headroom, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None, timeout: float = 600) -> Ran:
    """`loadtest ARGS` in this process: `main(argv)` with stdout and stderr captured, `env` (if
    given) as the whole environment and `cwd` as the folder, for the command's length, stopped
    (CommandTimeout) past `timeout` seconds. Never for a command that starts Ray here (it would
    stay joined) or that a test signals."""
    from loadtest.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _environment(env), _directory(cwd), redirect_stdout(out), redirect_stderr(err), _time_limit(timeout):
        try:
            code = main(list(args))
        except SystemExit as exc:   # argparse's errors and --help; a message is printed, as the interpreter would
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    ran = Ran(code, out.getvalue(), err.getvalue())
    PRINTED.extend([ran.stdout, ran.stderr])
    return ran


@contextmanager
def loadtest_process(*args: str, env: dict | None = None) -> Iterator[subprocess.Popen]:
    """`loadtest ARGS` running in the background (its own process group, output captured as text,
    in `env` if given); killed with its group on the way out if the test did not end it."""
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)
    communicate = proc.communicate

    def read(*a, **kw):   # what it printed is held to the rules too (the key nowhere)
        out = communicate(*a, **kw)
        PRINTED.extend(text for text in out if text)
        return out

    proc.communicate = read
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def finished(proc: subprocess.Popen, limit_s: float = 120) -> tuple[str, str]:
    """What `proc` (started in a session of its own) printed, once it ended within `limit_s`;
    killed with its process group on the way out if it did not."""
    try:
        return proc.communicate(timeout=limit_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def unshare_problem() -> str | None:
    """Why a private mount namespace (for a tmpfs of the test's own) cannot be made here (None: it can)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no unshare(1) on this machine"
    probe = subprocess.run([unshare, "--user", "--map-root-user", "--mount", "--", "true"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare --user --map-root-user --mount fails here: {probe.stderr.strip()}"
    return None


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@contextmanager
def sim_server(*flags: str, model: str = MODEL, env: dict | None = None) -> Iterator[str]:
    """A `loadtest sim` process on a free loopback port; yields its base URL; kills its group."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "sim", model, "--port", str(port), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sim exited early: {proc.stdout.read().decode()}")
            try:
                if requests.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("sim did not become healthy")
            time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        proc.stdout.close()


@pytest.fixture
def sim_factory():
    return sim_server


@pytest.fixture(scope="session")
def world_fleet(tmp_path_factory) -> Iterator[world.World]:
    """The session's shared fleet (tests/world.py): every mode, held up until the session ends."""
    test_tag = os.environ[invariants.TAG]
    os.environ[invariants.TAG] = SESSION_TAG   # its processes belong to the session, not to the first test that asked
    try:
        held = world.start(tmp_path_factory.mktemp("world"), API_KEY)
    finally:
        os.environ[invariants.TAG] = test_tag
    try:
        yield held
    finally:
        world.stop(held)
    assert not pid_alive(held.supervisor_pid), "the world's supervisor outlived `cluster down`"
    # the last of the session: nothing it started may be left (its module fixtures ended before)
    left = invariants.left_behind(lambda: _PROCESSES.tagged(SESSION_TAG))
    assert not left, f"left running after the session: {left}"


@pytest.fixture(scope="session")
def session_run(world_fleet, tmp_path_factory) -> tuple[Path, Ran]:
    """One small run (baseline and eagle, 24 requests of tiny-mix) against the shared fleet, made
    once for the tests that only read a run folder: the folder (copy it to change it) and what the
    command printed. Held to the rules the tests are (no key written or printed, one row each)."""
    out = tmp_path_factory.mktemp("session-run")
    ran = cli("run", "--endpoints", str(world_fleet.state), "--modes", "baseline,eagle", "--scenario",
              str(DATA / "tiny-mix.toml"), "--requests", "24", "--cooldown", "0", "--out", str(out), "--run-id", "h")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert API_KEY not in ran.stdout + ran.stderr and not invariants.leaked_key(out, API_KEY)
    assert not invariants.row_problems(out / "h")
    return out / "h", ran


# ---- the rules every test is held to (tests/invariants.py) ------------------------------------------
_PROCESSES = invariants.Processes()


@pytest.fixture(autouse=True)
def _invariants(request) -> Iterator[None]:
    folder = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    boost = _boost(request)
    tag = f"{SESSION_TAG}-{secrets.token_hex(4)}"
    os.environ[invariants.TAG] = tag
    PRINTED.clear()
    watch = invariants.Watch(_PROCESSES, tag, boost.raise_process if boost else None)
    try:
        yield
    finally:
        os.environ[invariants.TAG] = SESSION_TAG
        left = watch.stop()
        if boost is not None:
            boost.restore()
    problems = [f"left running after the test: pid {pid}: {cmd[:200]}" for pid, cmd in left.items()]
    if request.node.get_closest_marker("e2e") is None:
        problems += [f"started {kind} ({cmd[:120]}) but is not marked e2e" for kind, cmd in watch.kinds.items()]
        problems += [f"uses {name} (Ray, servers, Locust) but is not marked e2e"
                     for name in ("world_fleet", "session_run") if name in request.fixturenames]
    if folder is not None:
        problems += [f"the API key is in {path}" for path in invariants.leaked_key(folder, API_KEY)]
        if request.node.get_closest_marker("rows_may_be_lost") is None:
            for run in invariants.run_folders(folder):
                problems += invariants.row_problems(run)
    problems += [f"the API key was printed: {text[:200]!r}" for text in PRINTED if API_KEY in text]
    PRINTED.clear()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# ---- running in parallel (pytest-xdist, `make test`) ---------------------------------------------
# The tests that compare timings (`serial`) all go to one worker (`--dist loadgroup`), one after
# another, and while one runs, it and every process it uses run at a higher CPU priority than the
# tests beside it (tests/priority.py): the scheduler gives them a contended core first.
def _boost(request) -> priority.Boost | None:
    """For a serial test under xdist: its priority raised (this thread, whose children inherit it,
    and the shared fleet's replicas; the sessions its processes start, as the watch finds them)."""
    if request.node.get_closest_marker("serial") is None or not hasattr(request.config, "workerinput"):
        return None
    boost = priority.Boost()
    boost.raise_thread(threading.get_native_id())
    if "world_fleet" in request.fixturenames:
        for pid in request.getfixturevalue("world_fleet").replica_pids():
            boost.raise_process(pid)
    return boost


@pytest.hookimpl(trylast=True)   # after pytest-xdist's own
def pytest_collection_modifyitems(config, items) -> None:
    """The longest chain first (the serial tests: one group, so one worker, one at a time), then
    the e2e tests before the rest, so that parallel workers end together. pytest-xdist 3.8 groups by writing
    `item._nodeid`, which pytest 9 no longer reads (a node's id is `item._id`), so `--dist
    loadgroup` would silently spread a group over every worker: here each grouped test gets the
    `@group` suffix xdist means it to have."""
    for item in items:
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group("serial"))
    items.sort(key=lambda item: (item.get_closest_marker("serial") is None, item.get_closest_marker("e2e") is None))
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    for item in items:
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                         for m in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            _set_nodeid(item, f"{item.nodeid}@{'_'.join(groups)}")


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    try:
        from _pytest.nodeid import NodeId  # pytest 9: a node's id is `_id`
    except ImportError:                     # pytest 8 reads `_nodeid`
        item._nodeid = nodeid
        return
    item._id = NodeId.parse(nodeid)


def pytest_unconfigure(config) -> None:
    machine.remove(MACHINE)


@pytest.fixture(scope="session", autouse=True)
def _home_untouched() -> Iterator[None]:
    """No test reads or writes ~/.ray: every local Ray of the suite's takes the session's token
    (tests/machine.py), every cluster a test starts its own (tests/ray_nodes.py)."""
    token = Path.home() / ".ray" / "auth_token"
    before = token.exists()
    yield
    assert before or not token.exists(), f"the suite wrote {token}: a Ray of its own took no token of the suite's"


# With LOADTEST_TEST_TIMELINE=FILE, each test's worker, start and end go to FILE (where the time goes).
_TIMELINE = os.environ.get("LOADTEST_TEST_TIMELINE")


def pytest_runtest_logstart(nodeid, location) -> None:
    if _TIMELINE:
        with open(_TIMELINE, "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} start {time.time():.3f} {nodeid}\n")


def pytest_runtest_logfinish(nodeid, location) -> None:
    if _TIMELINE:
        with open(_TIMELINE, "a") as f:
            f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} end {time.time():.3f} {nodeid}\n")
