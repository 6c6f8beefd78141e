"""The Ray cluster watch on a real socket standing in for the GCS's port: a port that stops
answering is a cluster gone (told once), a short blip is not, and a command that does not end in
time after it is ended by the last resort. Short windows here; the run's are GONE_AFTER_S and
FINISH_WITHIN_S (cluster/ray_watch.py)."""

from __future__ import annotations

import socket
import threading
import time

from cluster.ray_watch import ClusterWatch, gcs_reachable


def listener(port: int = 0) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(16)
    return sock


def test_a_port_that_stops_answering_is_a_cluster_gone_then_the_last_resort_comes():
    sock = listener()
    address = f"127.0.0.1:{sock.getsockname()[1]}"
    assert gcs_reachable(address)
    gone, last = threading.Event(), threading.Event()
    told: list[float] = []
    watch = ClusterWatch(address, lambda s: (told.append(s), gone.set()), last.set,
                         gone_after_s=1.0, finish_within_s=1.0).start()
    try:
        time.sleep(1.5)
        assert not gone.is_set()  # answering: nothing said
        sock.close()
        t0 = time.monotonic()
        assert gone.wait(10), "the watch never noticed the port had gone"
        assert 1.0 <= told[0] and time.monotonic() - t0 >= 1.0  # not before it was gone that long
        assert not gcs_reachable(address)
        assert last.wait(10), "the command never ended and the last resort never came"
        assert len(told) == 1
    finally:
        watch.done()


def test_a_blip_shorter_than_the_window_is_not_a_cluster_gone_and_done_disarms():
    sock = listener()
    port = sock.getsockname()[1]
    gone, last = threading.Event(), threading.Event()
    watch = ClusterWatch(f"127.0.0.1:{port}", lambda _s: gone.set(), last.set,
                         gone_after_s=4.0, finish_within_s=3.0).start()
    try:
        sock.close()
        time.sleep(1.0)   # down for a second (a GCS restarting), then back on the same port
        sock = listener(port)
        time.sleep(5.0)
        assert not gone.is_set()
        sock.close()
        assert gone.wait(15)
        watch.done()      # the command ended in time: no last resort
        time.sleep(3.5)
        assert not last.is_set()
    finally:
        watch.done()
        sock.close()
