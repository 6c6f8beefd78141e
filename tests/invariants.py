"""What every test is held to after it ends, whatever it checked itself (conftest's autouse fixture
calls `check`):

- **no process left behind**: every process a test starts, directly or through the commands it
  runs, inherits TAG=<that test's tag> in its environment (an exec'd process keeps the environment
  it started with, reparented or not), so whatever still carries the tag after the test is a
  process it left behind;
- **the API key nowhere**: the session's key (`LOADTEST_API_KEY`, which every run sends and the
  shared fleet requires) is in no file under the test's tmp_path (Parquet by its decoded values and
  metadata) and in nothing a command printed through the helpers;
- **exactly one record per scheduled request**: each run folder the test made (a manifest beside a
  trace) holds, for every mode it recorded, each request of its trace once, unless the test is
  marked `rows_may_be_lost` with the reason;
- **markers that mean something**: a test that started Ray, a server or Locust is marked `e2e`
  (`make test-quick` leaves those out), seen by sampling the tagged processes while it runs.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq

TAG = "LOADTEST_TEST_TAG"
KEY_ENV = "LOADTEST_API_KEY"
LEAVE_S = 30.0        # a process that was told to stop may take a while on a loaded machine (Ray's daemons)
SAMPLE_S = 0.25       # how often a running test's processes are looked at

# What kind of process a command line is, for the e2e marker (checked in this order).
KINDS = (("Ray", ("raylet", "gcs_server", "ray::", "ray/_private", "default_worker.py")),
         ("Locust", ("-m locust", "locustfile.py")),
         ("a server", ("-m loadtest sim", "-m cluster.sim", "vllm", "prometheus")))


def kind_of(cmdline: str) -> str | None:
    for kind, needles in KINDS:
        if any(n in cmdline for n in needles):
            return kind
    return None


class Processes:
    """The live processes that carry a tag, read from /proc. A process's environment is fixed at
    exec, so each pid is read once (keyed with its start time, in case the pid is reused)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, str], bytes | None] = {}   # (pid, start time) -> its tag, if any

    def tagged(self, tag: str) -> dict[int, str]:
        """pid -> command line of every live (not zombie) process whose environment holds TAG=tag."""
        want, out = tag.encode(), {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b") ", 1)[1].split()
                if fields[0] == b"Z":
                    continue
                key = (pid, fields[19].decode())
                found = self._seen[key] if key in self._seen else _tag_of(pid)
                # A child of this process caught between fork and exec still shows this process's
                # first environment, without the test's tag: read it again until it has exec'd.
                if found is not None or int(fields[1]) != os.getpid():
                    self._seen[key] = found
                if found != want:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out[pid] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except (OSError, IndexError):
                continue
        return out


def _tag_of(pid: int) -> bytes | None:
    prefix = f"{TAG}=".encode()
    with open(f"/proc/{pid}/environ", "rb") as f:
        for item in f.read().split(b"\0"):
            if item.startswith(prefix):
                return item[len(prefix):]
    return None


class Watch:
    """Samples the processes of one test while it runs: the kinds it started (and, to each process
    first seen, `on_new`)."""

    def __init__(self, procs: Processes, tag: str, on_new: Callable[[int], None] | None = None) -> None:
        self.procs, self.tag, self.on_new = procs, tag, on_new
        self.kinds: dict[str, str] = {}   # kind -> one command line of it
        self._known: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="test-process-watch")
        self._thread.start()

    def _look(self) -> dict[int, str]:
        found = self.procs.tagged(self.tag)
        for pid, cmd in found.items():
            kind = kind_of(cmd)
            if kind is not None:
                self.kinds.setdefault(kind, cmd)
            if pid not in self._known:
                self._known.add(pid)
                if self.on_new is not None:
                    self.on_new(pid)
        return found

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._look()

    def stop(self) -> dict[int, str]:
        """Stop sampling; what is still running, once the stragglers had LEAVE_S to go."""
        self._stop.set()
        self._thread.join()
        return left_behind(self._look)


def left_behind(look: Callable[[], dict[int, str]]) -> dict[int, str]:
    """What `look` still finds once the stragglers had LEAVE_S to go; those are killed, so that
    the next tests do not pay for them."""
    deadline = time.monotonic() + LEAVE_S
    while (left := look()) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def leaked_key(folder: Path, key: str) -> list[str]:
    """Every file under `folder` that holds `key`: Parquet by its decoded values (and metadata),
    anything else by its bytes."""
    found = []
    for path in (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.suffix == ".parquet":
            try:
                table = pq.read_table(path)
            except Exception:   # not Parquet after all (a test's bad file): its bytes
                if key.encode() in path.read_bytes():
                    found.append(str(path))
                continue
            meta = table.schema.metadata or {}
            texts = [v.decode(errors="replace") for v in (*meta.keys(), *meta.values())]
            texts += _strings(table.to_pylist())
            if any(key in t for t in texts):
                found.append(str(path))
        elif key.encode() in path.read_bytes():
            found.append(str(path))
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def run_folders(folder: Path) -> list[Path]:
    """The run folders under `folder`: a manifest beside a trace (a file, or a soak's parts)."""
    return sorted(m.parent for m in folder.rglob("manifest.json")
                  if (m.parent / "trace.parquet").is_file() or (m.parent / "trace" / "_index.parquet").is_file())


def _ids(path: Path) -> list[str]:
    return ds.dataset(path, format="parquet").to_table(columns=["request_id"])["request_id"].to_pylist()


def row_problems(run: Path) -> list[str]:
    """Each mode's records against the run's trace: every scheduled request exactly once."""
    index = run / "trace" / "_index.parquet"
    scheduled = Counter(_ids(index if index.is_file() else run / "trace.parquet"))
    problems = []
    for mode_dir in sorted((run / "requests").glob("mode=*")):
        parts = [p for p in mode_dir.glob("*.parquet") if not p.name.startswith(".")]
        recorded = Counter(_ids(mode_dir)) if parts else Counter()
        twice = [i for i, n in recorded.items() if n > 1]
        missing = [i for i in scheduled if i not in recorded]
        stray = [i for i in recorded if i not in scheduled]
        if twice or missing or stray:
            problems.append(f"{mode_dir}: {len(scheduled)} scheduled, {sum(recorded.values())} recorded "
                            f"({len(twice)} twice, {len(missing)} missing, {len(stray)} not in the trace; "
                            f"e.g. {(twice + missing + stray)[:3]})")
    return problems
