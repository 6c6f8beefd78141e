"""Joining a Ray cluster that has token authentication, and saying in one line why a join failed.

Ray 2.60 reads a process's token from RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names, else
~/.ray/auth_token, and turns token authentication on for a process that has one (or has
RAY_AUTH_MODE=token); a local instance started without one writes ~/.ray/auth_token
(https://docs.ray.io/en/latest/ray-security/token-auth.html). A driver without the cluster's token
is refused by the GCS: Ray's C++ client then writes a warning a second to the process's stderr for
about 10 s and raises a ConnectionError that does not say why. Here those warnings go to the run's
ray.log instead, and are read back to tell a refused token from a cluster that is not there.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
DEFAULT_TOKEN = "~/.ray/auth_token"
# What Ray's GCS client says of a missing or wrong token (gcs_client.cc; ray.exceptions.AuthenticationError).
REFUSED_WORDS = ("InvalidAuthToken", "Unauthenticated", "no authentication token was found")
HOW = (f"run `ray get-auth-token` on the cluster's head and give what it prints as {TOKEN_ENV}, or copy the "
       f"head's {DEFAULT_TOKEN} to this machine ({TOKEN_PATH_ENV} names another file)")


def token_source(env: dict[str, str] | None = None, home: Path | None = None) -> str | None:
    """Where Ray takes this process's token from, in Ray's order; None when it has none."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return TOKEN_ENV
    if env.get(TOKEN_PATH_ENV):
        return f"{TOKEN_PATH_ENV} ({env[TOKEN_PATH_ENV]})"
    default = (home or Path.home()) / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def refused_for_token(said: str) -> bool:
    """Whether what Ray said while joining was the cluster refusing this process's token (or its lack)."""
    return any(word in said for word in REFUSED_WORDS)


def access_problem(address: str, source: str | None) -> str:
    """One line: the cluster at `address` refused this process, which had the token from `source`
    (None: it had none)."""
    if source is None:
        return (f"the Ray cluster at {address} has token authentication and this process has no token "
                f"({TOKEN_ENV}, {TOKEN_PATH_ENV} and {DEFAULT_TOKEN} are all unset or missing): {HOW}")
    return f"the Ray cluster at {address} refused the token from {source}, which is not the cluster's: {HOW}"


@contextmanager
def stderr_into(log_file: Path | None) -> Iterator[list[str]]:
    """What this process writes to its stderr (file descriptor 2, where Ray's C++ logs go) for the
    block goes to `log_file` (appended; a temporary file if None) rather than the console; the list
    yielded holds that text once the block ends."""
    said: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with (open(log_file, "a+b") if log_file is not None else tempfile.TemporaryFile()) as sink:
        start = sink.seek(0, os.SEEK_END)
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(start)
            said.append(sink.read().decode(errors="replace"))
