"""What the suite takes from the machine outside the checkout, made here for each test process
(conftest calls `prepare` before anything starts), never assumed from what an earlier run left:

- **Ray's token** for the local Ray instances the product starts (`run`, `cluster up`): a token of
  the session's own, named by RAY_AUTH_TOKEN_PATH (Ray reads RAY_AUTH_TOKEN, then
  RAY_AUTH_TOKEN_PATH, then ~/.ray/auth_token, and a new local instance writes the last when it
  finds none), so nothing reads or writes ~/.ray. A Ray cluster a test starts brings a token of its
  own (tests/ray_nodes.py), and the one test of a machine with no token anywhere clears these.
- **Ray's temporary folder** (RAY_TMPDIR: sessions, sockets, logs, `ray_current_cluster`), the
  session's own and removed with it, rather than /tmp/ray, which outlives every run.
- **Variables a developer's shell may hold** that the product, Ray, Locust, vLLM or the openai
  client would read (RAY_*, LOCUST_*, LOADTEST_*, VLLM_*, OPENAI_*; not the suite's own
  LOADTEST_TEST_*): removed, so every test sees the defaults a new machine has; conftest then sets
  the ones the suite means (LOADTEST_API_KEY).
- **Hypothesis**: no example database (it would live in `.hypothesis/` and replay what an earlier
  run found) and derandomised examples, so a run here draws what a run anywhere draws.

The rest is made by the Makefile (the virtual environment; Debian's chromium, prometheus and
systemd) or by each test in its own tmp_path (run folders, servers on free ports of 127.0.0.1).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings

CLEARED_PREFIXES = ("RAY_", "LOCUST_", "LOADTEST_", "VLLM_", "OPENAI_")
KEPT_PREFIX = "LOADTEST_TEST_"   # the suite's own settings (LOADTEST_TEST_TIMELINE) and tags
TOKEN_NAME = "ray-auth-token"
PREPARED: list[str] = []   # the variables of those prefixes left once `prepare` is done (its own)


def new_ray_token(path: Path) -> Path:
    """A random token at `path`, readable by its owner only (what `ray get-auth-token --generate`
    writes: a random hex string)."""
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return path


def prepare() -> Path:
    """This test process's machine state, in a folder of its own under the temporary folder (short:
    Ray's socket paths in it must fit 107 bytes); returns the folder, for `remove`."""
    folder = Path(tempfile.mkdtemp(prefix="lt"))
    for name in [n for n in os.environ if n.startswith(CLEARED_PREFIXES) and not n.startswith(KEPT_PREFIX)]:
        del os.environ[name]
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(new_ray_token(folder / TOKEN_NAME))
    os.environ["RAY_TMPDIR"] = str(folder)
    settings.register_profile("suite", database=None, derandomize=True)
    settings.load_profile("suite")
    PREPARED.extend(sorted(n for n in os.environ if n.startswith(CLEARED_PREFIXES)))
    atexit.register(remove, folder)   # also when imported outside pytest (a script reusing the helpers)
    return folder


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
