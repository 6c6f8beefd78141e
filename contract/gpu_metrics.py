"""The rows of `gpu_metrics/mode=<mode>/part-<n>.parquet`: one per GPU of a replica per scrape, as
dcgm-exporter (or NVML, or the simulator) said it; cluster/scrape.py writes them, analysis/gpu.py
reads them. A reading a source does not give is null (no energy counter before Volta, no XID
through NVML)."""

from __future__ import annotations

import pyarrow as pa

FOLDER = "gpu_metrics"

GPU_SCHEMA = pa.schema([
    pa.field("time_ns", pa.int64(), nullable=False),    # when the scraper read it (wall clock)
    pa.field("mode", pa.string(), nullable=False),
    pa.field("replica", pa.string(), nullable=False),
    pa.field("node", pa.string(), nullable=False),      # the replica's node address
    pa.field("source", pa.string(), nullable=False),    # dcgm-exporter, nvml or simulator
    pa.field("uuid", pa.string(), nullable=False),
    pa.field("gpu", pa.int32(), nullable=False),        # the GPU's index on its node
    pa.field("power_w", pa.float64()),                  # W, the exporter's (about 1 s) average
    pa.field("energy_mj", pa.float64()),                # mJ since the driver loaded (a counter)
    pa.field("fb_used_mib", pa.float64()),
    pa.field("fb_free_mib", pa.float64()),
    pa.field("util_pct", pa.float64()),
    pa.field("xid", pa.float64()),                      # the last XID error (0: none)
])
