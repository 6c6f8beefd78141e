"""The command's own /metrics: the client's view (loadtest.request.exporter) served over HTTP
while a run, sweep, capacity search, soak or web UI goes on, and a Prometheus file_sd targets file
beside the run's folder (<out>/prometheus-targets/<run_id>.json) naming it and every replica it
replays against, labelled by mode; the file goes when the command ends.

Loopback by default. Any other address needs credentials in the environment (LOADTEST_WEB_USER,
LOADTEST_WEB_PASSWORD) and is then behind HTTP basic auth (Prometheus's `basic_auth`); without
them the command refuses to start. The credentials are never written anywhere.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import CollectorRegistry
from rich.console import Console

from common import files
from common.login import CHALLENGE, authorized, bind_error, credentials, is_loopback, login_problem
from loadtest.engine.events import CannotObserve, Observer
from loadtest.options.replaying import MetricsOptions
from loadtest.request.exporter import ClientMetrics
from loadtest.request.tally import LiveTallies

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]
log = logging.getLogger("loadtest")
TARGETS_DIR = "prometheus-targets"   # <out>/prometheus-targets/<run_id>.json: Prometheus globs only file names


class MetricsError(CannotObserve, ValueError):
    """A /metrics address that cannot be served (in use, or open without credentials)."""


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def basic_auth(app: WSGIApp, user: str, password: str) -> WSGIApp:
    """`app` behind HTTP basic auth: 401 without the credentials, compared in constant time."""
    def guarded(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if authorized(environ.get("HTTP_AUTHORIZATION"), user, password):
            return app(environ, start_response)
        start_response("401 Unauthorized", [*CHALLENGE.items(),
                                            ("Content-Type", "text/plain")])
        return [b"login required\n"]

    return guarded


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # no line per scrape on the console
        pass


class MetricsServer(Observer):
    """/metrics on host:port (port 0: a free one) while the command runs; `watch` adds a mode's
    replicas to the targets file; on leaving, `linger_s` more seconds for a last scrape. As the
    engine's observer: opened with the run (its folder, its tally), each mode's replicas watched
    while the mode replays, closed with the run; its address said on `console`."""

    def __init__(self, host: str, port: int, run_dir: Path | None, linger_s: float = 0.0,
                 enabled: bool = True, console: Console | None = None) -> None:
        self.host, self.port, self.run_dir, self.linger_s, self.enabled = host, port, run_dir, linger_s, enabled
        self.console = console
        self.live = LiveTallies()   # every replay's tally: what /metrics serves, the bars and the board show
        self.metrics = ClientMetrics(self.live)
        self.replicas: dict[str, list[tuple[str, str]]] = {}
        self.gpus: dict[str, list[tuple[str, str]]] = {}      # mode -> its replicas' GPU exporters
        self._server: WSGIServer | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, args: MetricsOptions, console: Console | None = None) -> MetricsServer:
        """The server the command's --metrics-* options ask for (`--no-metrics`: one that serves nothing)."""
        return cls(args.metrics_host, args.metrics_port, None, args.metrics_linger, not args.no_metrics, console)

    def open(self, run_dir: Path, live: LiveTallies) -> str | None:
        """Serving `live` for the run in `run_dir` (MetricsError when it cannot listen after all);
        its address, said on the console and kept in the manifest."""
        self.run_dir, self.live = run_dir, live
        self.metrics = ClientMetrics(live)
        self.__enter__()
        if self.url and self.console is not None:
            self.console.print(f"client metrics: {self.url} (Prometheus file_sd targets: {self.targets_path})",
                               soft_wrap=True, highlight=False)
        return self.url

    def close(self) -> None:
        self.__exit__(None, None, None)

    def mode_started(self, mode: str, replicas: list[tuple[str, str]], gpus: list[tuple[str, str]]) -> None:
        self.watch(mode, replicas, gpus)

    def mode_ended(self, mode: str) -> None:
        self.unwatch(mode)

    def check(self) -> None:
        """MetricsError now, before anything starts, when /metrics could not be served."""
        if not self.enabled:
            return
        problem = login_problem(self.host, "/metrics")
        if problem:
            raise MetricsError(problem)
        exc = bind_error(self.host, self.port)
        if exc is not None:
            raise MetricsError(f"cannot serve /metrics on {self.host}:{self.port} ({exc.strerror or exc}); "
                               "check --metrics-host, or pick another --metrics-port (0 picks a free one)")

    @property
    def targets_path(self) -> Path | None:
        return self.run_dir.parent / TARGETS_DIR / f"{self.run_dir.name}.json" if self.run_dir is not None else None

    @property
    def url(self) -> str | None:
        return f"http://{hostport(self.host, self.port)}/metrics" if self._server is not None else None

    def __enter__(self) -> MetricsServer:
        if not self.enabled:
            return self
        self.check()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.metrics)
        app = make_wsgi_app(registry)
        creds = None if is_loopback(self.host) else credentials()
        if creds:
            app = basic_auth(app, *creds)

        class Server(ThreadingWSGIServer):   # IPv6 too (prometheus_client's own picks IPv4)
            address_family = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0][0]

        try:
            self._server = make_server(self.host, self.port, app, Server, handler_class=Quiet)
        except OSError as exc:
            raise MetricsError(f"cannot serve /metrics on {self.host}:{self.port} ({exc.strerror or exc}); "
                               "pick another --metrics-port (0 picks a free one)") from None
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, daemon=True, name="loadtest-metrics").start()
        self._write_targets()
        return self

    def watch(self, mode: str, replicas: list[tuple[str, str]], gpus: list[tuple[str, str]] | None = None) -> None:
        """`mode`'s replicas, (label, base URL), and their GPU exporters, (label, URL), join the
        targets file."""
        with self._lock:
            self.replicas[mode] = list(replicas)
            self.gpus[mode] = list(gpus or [])
            if self._server is not None:
                self._write_targets()

    def unwatch(self, mode: str) -> None:
        """`mode`'s replicas are done (or down): out of the targets file."""
        with self._lock:
            self.gpus.pop(mode, None)
            if self.replicas.pop(mode, None) is not None and self._server is not None:
                self._write_targets()

    def _write_targets(self) -> None:
        """Prometheus's file_sd format: this command (the client's metrics; its series carry their
        own run and mode labels), each replica (vLLM's metrics, labelled here by mode and run) and
        each replica's GPU exporter (`loadtest_role` gpu, the same labels: dcgm-exporter's series of
        every GPU it serves, the simulator's of the replica's own)."""
        path = self.targets_path
        if path is None:
            return
        host = socket.gethostname() if self.host in ("0.0.0.0", "::") else self.host
        groups = [{"targets": [hostport(host, self.port)], "labels": {"loadtest_role": "client"}}]

        def group(role: str, mode: str, label: str, url: str, path: str) -> dict:
            u = urlsplit(url)   # host and port only: never a user:password@ a URL may carry
            return {"targets": [hostport(u.hostname or "127.0.0.1", u.port or 80)],
                    "labels": {"loadtest_role": role, "mode": mode, "replica": label, "run": self.run_dir.name,
                               "__scheme__": u.scheme or "http", "__metrics_path__": path}}
        groups += [group("server", mode, label, url, f"{urlsplit(url).path.rstrip('/')}/metrics")
                   for mode, reps in self.replicas.items() for label, url in reps]
        groups += [group("gpu", mode, label, url, urlsplit(url).path or "/metrics")
                   for mode, exporters in self.gpus.items() for label, url in exporters]
        try:
            path.parent.mkdir(exist_ok=True)
            files.write_text(path, json.dumps(groups, indent=1) + "\n")   # Prometheus never reads half a file
        except OSError as exc:  # a full disk: Prometheus keeps the last file; the run goes on
            log.error("could not write the Prometheus targets file %s: %s", path, exc)

    def __exit__(self, *exc: object) -> None:
        if self._server is None:
            return
        try:
            if self.linger_s > 0 and exc[0] is None:
                print(f"/metrics stays up {self.linger_s:g} s more for a last scrape (--metrics-linger; "
                      "Ctrl-C ends it)", flush=True)
                time.sleep(self.linger_s)
        except KeyboardInterrupt:
            pass
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            if self.targets_path is not None:  # the run is over: Prometheus stops scraping it
                self.targets_path.unlink(missing_ok=True)
