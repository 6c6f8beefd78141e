"""Run a command with a small tmpfs mounted on a folder: a results disk that fills, for real.

    unshare --user --map-root-user --mount -- python tests/in_tmpfs.py SIZE DIR COPY_TO -- CMD...

mounts a tmpfs of SIZE (as `mount -o size=` takes it: 160k, 1m; or `ro`, a read-only one) on DIR in this private mount
namespace, runs CMD as a child, waits for it, copies DIR to COPY_TO (the tmpfs vanishes with the
namespace) and exits with CMD's code. Before CMD starts it prints one line, `mount namespace:
<id>`, so a test can look for processes still in the namespace afterwards (they are left behind).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        print("usage: in_tmpfs.py SIZE DIR COPY_TO -- CMD...", file=sys.stderr)
        return 2
    size, folder, copy_to, cmd = argv[0], Path(argv[1]), Path(argv[2]), argv[4:]
    folder.mkdir(parents=True, exist_ok=True)
    options = "ro,size=64k" if size == "ro" else f"size={size}"   # "ro": a read-only file system
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], check=True)
    print(f"mount namespace: {os.readlink('/proc/self/ns/mnt')}", flush=True)
    child = subprocess.Popen(cmd)
    # a signal to this helper goes on to the command (a test's timeout, a Ctrl-C)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    code = child.wait()
    shutil.copytree(folder, copy_to, dirs_exist_ok=True)
    return code if code >= 0 else 128 - code  # killed by a signal: as a shell says it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
