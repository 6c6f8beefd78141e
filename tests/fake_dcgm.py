"""A fake NVIDIA dcgm-exporter on loopback for the tests: the exporter's own text (metric names,
TYPE lines, labels: cluster.sim.gpu.dcgm_text) for GPUs that draw a constant power, their energy
counters rising with it in real time, as a node's exporter serves every GPU on the node.

One server answers for any number of nodes, each at `/node/<id>/metrics` (a fleet's exporter
`http://127.0.0.1:PORT/node/{node_id}/metrics`) or at `/metrics` for one node: a node is made the
first time it is asked for, its GPUs drawing the next of `watts` and, past the GPUs a replica may
hold, one more GPU of another job drawing FOREIGN_W, which no replica's figures may include.

A fault makes it answer as a broken exporter does: 404, garbage (not Prometheus text), reset (the
energy counter starts again from 0 after the first RESET_AFTER reads), no-energy (no energy
counter, as a GPU before Volta), xid (XID 79 on GPU 0 once the first RESET_AFTER reads are past), or hang
(answers after the scraper gave up).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cluster.gpu_telemetry import GpuSample
from cluster.sim.gpu import dcgm_text, gpu_uuid

FOREIGN_W = 999.0
RESET_AFTER = 2
HANG_S = 1.0   # past the scraper's timeout, which the test that hangs it lowers (cluster/gpu_scrape.py)


@dataclass
class FakeNode:
    name: str
    gpus: int
    watts: float
    started: float = field(default_factory=time.monotonic)
    reads: int = 0
    reset_at: float | None = None   # fault reset: when the counter started again from 0
    last: float = 0.0               # the last read

    def samples(self, fault: str | None, host_label_value: str) -> list[GpuSample]:
        now = time.monotonic()
        self.reads += 1
        if fault == "reset" and self.reads > RESET_AFTER and self.reset_at is None:
            self.reset_at = self.last or now   # just after the read before: nothing lost between
        self.last = now
        out = []
        for i in range(self.gpus + 1):
            watts = FOREIGN_W if i == self.gpus else self.watts
            energy_mj = watts * (now - self.started) * 1000 + 5e9   # since an earlier boot
            if self.reset_at is not None:   # the driver reloaded between two reads: from 0 since then
                energy_mj = watts * (now - self.reset_at) * 1000
            out.append(GpuSample(node=self.name, at_s=now, uuid=gpu_uuid(self.name, 9400, i), index=i,
                                 host=host_label_value, model="NVIDIA H100 80GB HBM3", power_w=watts,
                                 energy_mj=None if fault == "no-energy" else round(energy_mj),
                                 fb_used_mib=70_000.0 + i, fb_free_mib=11_559.0 - i, util_pct=90.0,
                                 xid=79.0 if fault == "xid" and i == 0 and self.reads > RESET_AFTER else 0.0))
        return out


class _Quiet(ThreadingHTTPServer):
    """Joins its handlers when it closes (none outlives the test that started it) and says nothing
    of a client that went away before its answer (the scraper's timeout on a hanging exporter):
    what a handler thread prints lands in whatever test captures stderr next."""

    daemon_threads = False
    block_on_close = True

    def handle_error(self, request, client_address) -> None:
        pass


class FakeDcgm:
    def __init__(self, gpus: int = 4, watts: tuple[float, ...] = (400.0, 600.0, 500.0),
                 fault: str | None = None, host_label: str = "Hostname") -> None:
        self.gpus, self.watts, self.fault, self.host_label = gpus, watts, fault, host_label
        self.nodes: dict[str, FakeNode] = {}
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:   # http.server calls it by this name
                status, body = fake.answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = _Quiet(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def node(self, name: str) -> FakeNode:
        with self._lock:
            if name not in self.nodes:
                self.nodes[name] = FakeNode(name, self.gpus, self.watts[len(self.nodes) % len(self.watts)])
            return self.nodes[name]

    def answer(self, path: str) -> tuple[int, bytes]:
        parts = path.strip("/").split("/")
        if parts[-1] != "metrics" or self.fault == "404":
            return 404, b"404 page not found\n"
        if self.fault == "hang":
            time.sleep(HANG_S)
        if self.fault == "garbage":
            return 200, b"<html><body>Sign in to continue</body></html>\n"
        name = parts[1] if len(parts) == 3 and parts[0] == "node" else "node-a"
        node = self.node(name)
        return 200, dcgm_text(node.samples(self.fault, f"host-{name}"), self.host_label).encode()


@contextmanager
def fake_dcgm(**kwargs) -> Iterator[FakeDcgm]:
    fake = FakeDcgm(**kwargs)
    thread = threading.Thread(target=fake.server.serve_forever, name="fake-dcgm", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        thread.join(5)


