"""Scraping vLLM's /metrics (or the simulator's) into Parquet, once a second, off the hot path.

One thread per run; samples of every `vllm:` family are kept as long rows (time, replica, metric,
labels, value), so any counter's delta over a mode can be computed later (analysis/server.py).
A replica whose /metrics is missing or is not Prometheus text costs only the server-side view of
its mode: the first problem per mode is kept in `problems`, `problem(mode)` says it (for the
console and the manifest) unless every replica was scraped at least once, and the run goes on.

The same thread reads each replica's GPUs (cluster/gpu_scrape.py) into
`<run_dir>/gpu_metrics/mode=<mode>/`, with the same rule for its problems (`gpu_problem`).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import orjson
import pyarrow as pa
import requests
from prometheus_client.parser import text_string_to_metric_families

from cluster.gpu_scrape import GpuReader, GpuSource
from common import files
from contract.gpu_metrics import FOLDER as GPU_FOLDER
from contract.gpu_metrics import GPU_SCHEMA

log = logging.getLogger(__name__)
SCRAPE_INTERVAL_S = 1.0
FLUSH_EVERY_S = 10.0
PREFIX = "vllm:"

METRICS_SCHEMA = pa.schema([
    pa.field("time_ns", pa.int64(), nullable=False),
    pa.field("mode", pa.string(), nullable=False),
    pa.field("replica", pa.string(), nullable=False),
    pa.field("metric", pa.string(), nullable=False),   # sample name, e.g. vllm:spec_decode_num_drafts_total
    pa.field("labels", pa.string(), nullable=False),   # JSON object of the sample's labels, keys sorted
    pa.field("value", pa.float64(), nullable=False),
])


def parse_metrics(text: str) -> list[tuple[str, str, float]]:
    """(sample name, labels as sorted JSON, value) for every sample of a `vllm:` family."""
    out = []
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith(PREFIX):
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out.append((s.name, orjson.dumps(s.labels, option=orjson.OPT_SORT_KEYS).decode(), float(s.value)))
    return out


class Scraper:
    """Scrapes the replicas of the mode under test every SCRAPE_INTERVAL_S into
    `<run_dir>/server_metrics/mode=<mode>/part-<n>.parquet`, and their GPUs into
    `<run_dir>/gpu_metrics/mode=<mode>/part-<n>.parquet`."""

    def __init__(self, run_dir: Path, interval_s: float = SCRAPE_INTERVAL_S) -> None:
        self.run_dir = run_dir
        self.interval_s = interval_s
        self._targets: dict[str, list[tuple[str, str]]] = {}  # mode -> [(label, url)]
        self._rows: dict[tuple[str, str], list[dict]] = {}   # (folder, mode) -> rows not yet written
        self._gpus: dict[str, list[GpuSource]] = {}           # mode -> where its replicas' GPUs are read
        self._seq = 0
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._scrape_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-scraper", daemon=True)
        self._http = requests.Session()
        self.errors = 0
        self.problems: dict[str, str] = {}   # mode -> the first scrape problem of its replicas
        self._scraped: set[tuple[str, str]] = set()       # (mode, replica) scraped at least once
        self._labels: dict[str, set[str]] = {}            # mode -> every replica it was scraped as
        self.latest: dict[str, dict[str, dict[str, float]]] = {}   # mode -> replica -> sample name -> sum
        self._gpu_reader = GpuReader(self._http)
        self.gpu_problems: dict[str, str] = {}             # mode -> the first problem reading its GPUs
        self._gpu_read: set[tuple[str, str]] = set()       # (mode, replica) whose GPUs were read at least once

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            self.flush()
        except OSError as exc:  # a full disk: never in place of what ended the run
            log.error("could not write server metrics: %s", exc)

    def watch(self, mode: str, replicas: list[tuple[str, str]], gpus: list[GpuSource] | None = None) -> None:
        """Scrape these (label, base URL) replicas, and read their `gpus`, as `mode` from now on;
        one scrape at once, so the mode's deltas start before its first request."""
        with self._lock:
            self._targets[mode] = replicas
            self._gpus[mode] = list(gpus or [])
            self._labels.setdefault(mode, set()).update(label for label, _ in replicas)
        self.scrape_once(mode)

    def problem(self, mode: str) -> str | None:
        """Why `mode` has no server-side view: the first scrape problem of its replicas, unless each
        was scraped at least once (a failure during a passing outage, a restart, costs nothing:
        the counters' resets are counted in analysis/server.py)."""
        with self._lock:
            if mode not in self.problems or all((mode, r) in self._scraped for r in self._labels.get(mode, ())):
                return None
            return self.problems[mode]

    def gpu_sources(self, mode: str) -> list[GpuSource]:
        with self._lock:
            return list(self._gpus.get(mode, []))

    def gpu_problem(self, mode: str) -> str | None:
        """Why `mode` has no GPU figures (its first problem), unless each replica's GPUs were read
        at least once; None when its GPUs were never asked for."""
        with self._lock:
            sources = self._gpus.get(mode, [])
            if mode not in self.gpu_problems or (sources and all((mode, g.replica) in self._gpu_read
                                                                 for g in sources)):
                return None
            return self.gpu_problems[mode]

    def latest_sums(self) -> dict[str, dict[str, dict[str, float]]]:
        """A copy of `latest`: mode -> replica -> sample name -> its samples' sum, last scrape."""
        with self._lock:
            return {m: {r: dict(s) for r, s in reps.items()} for m, reps in self.latest.items()}

    def unwatch(self, mode: str) -> None:
        """One last scrape of `mode` (its final counters), then stop scraping it."""
        self.scrape_once(mode)
        with self._lock:
            self._targets.pop(mode, None)

    def scrape_once(self, only: str | None = None) -> None:
        with self._scrape_lock:   # one scrape at a time: a mode's samples stay in time order
            self._scrape_all(only)

    def _scrape_all(self, only: str | None) -> None:
        with self._lock:
            targets = [(m, r) for m, r in self._targets.items() if only is None or m == only]
        for mode, replicas in targets:
            self._scrape(mode, replicas)
            with self._lock:
                gpus = list(self._gpus.get(mode, []))
            if gpus:
                self._read_gpus(mode, gpus)

    def _read_gpus(self, mode: str, sources: list[GpuSource]) -> None:
        try:
            rows, problems = self._gpu_reader.read(mode, sources)
        except Exception as exc:   # never the scraper thread (and /metrics with it) for a GPU read
            rows, problems = [], [f"the GPU read failed ({type(exc).__name__}: {str(exc)[:120]})"]
        with self._lock:
            self._rows.setdefault((GPU_FOLDER, mode), []).extend(rows)
            self._gpu_read.update((mode, r["replica"]) for r in rows)
            first = bool(problems) and mode not in self.gpu_problems
            if problems:
                self.gpu_problems.setdefault(mode, problems[0])
        if first:
            log.warning("a read of %s's GPU telemetry failed: %s", mode, problems[0])

    def _scrape(self, mode: str, replicas: list[tuple[str, str]]) -> None:
        for label, url in replicas:
            now = time.time_ns()
            try:
                resp = self._http.get(f"{url}/metrics", timeout=2)
            except requests.RequestException as exc:
                self._problem(mode, label, f"GET /metrics failed ({type(exc).__name__})")
                continue
            if resp.status_code != 200:
                self._problem(mode, label, f"GET /metrics answered HTTP {resp.status_code}")
                continue
            try:
                samples = parse_metrics(resp.text)
            except Exception as exc:  # prometheus_client's parser raises ValueError and others on non-metrics text
                self._problem(mode, label, f"/metrics is not Prometheus text ({str(exc)[:80]})")
                continue
            rows = [{"time_ns": now, "mode": mode, "replica": label, "metric": m, "labels": lab, "value": v}
                    for m, lab, v in samples]
            sums: dict[str, float] = {}
            for m, _, v in samples:   # a counter's samples summed over its labels (the live board's view)
                sums[m] = sums.get(m, 0.0) + v
            with self._lock:
                self._rows.setdefault(("server_metrics", mode), []).extend(rows)
                self.latest.setdefault(mode, {})[label] = sums
                self._scraped.add((mode, label))

    def _problem(self, mode: str, label: str, what: str) -> None:
        self.errors += 1
        with self._lock:
            first = mode not in self.problems
            self.problems.setdefault(mode, f"replica {label}: {what}")
        if first:
            log.warning("a scrape of %s's server-side metrics failed: replica %s: %s", mode, label, what)

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stop.wait(self.interval_s):
            self.scrape_once()
            if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                try:
                    self.flush()
                except OSError as exc:  # a full disk: the rows stay in memory for the next flush
                    log.error("could not write server metrics: %s", exc)
                last_flush = time.monotonic()

    def flush(self) -> None:
        with self._flush_lock:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            batches, self._rows = self._rows, {}
        failed: OSError | None = None
        for (kind, mode), rows in batches.items():
            if not rows:
                continue
            folder = self.run_dir / kind / f"mode={mode}"
            while (folder / f"part-{self._seq:05d}.parquet").exists():   # a resumed soak's folder: never overwrite
                self._seq += 1
            path = folder / f"part-{self._seq:05d}.parquet"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                schema = GPU_SCHEMA if kind == GPU_FOLDER else METRICS_SCHEMA
                files.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
            except OSError as exc:
                with self._lock:  # kept for the next flush
                    self._rows[(kind, mode)] = rows + self._rows.get((kind, mode), [])
                failed = exc
                continue
            self._seq += 1
        if failed is not None:
            raise failed
