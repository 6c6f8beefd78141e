"""Reads every GPU on this machine through NVML (cluster/nvml_reader.py) once a second for a
minute, then prints per GPU what issue 42's figures would say of it: the energy (from the
counter, or the power integrated where a GPU has none, as `energy_of` says), mean and peak power,
peak memory used, and mean utilisation. Run it on a GPU node, under load, to check the reader:

    pip install -e '.[nvml]'
    python ops/nvml_check.py [--seconds 60] [--interval 1]

Without NVML (no nvidia-ml-py, no driver) it prints one line and exits 3. A read that fails
later (a GPU lost) is printed and skipped; the figures come from the reads that worked."""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.gpu_telemetry import GpuSample, TelemetryError, energy_of
from cluster.nvml_reader import read_nvml
from common.exits import INCOMPLETE, print_error

PROG = "nvml_check"


def sample(seconds: float, interval: float) -> tuple[list[GpuSample], int]:
    """Every GPU read at 0, interval, 2·interval, ... up to `seconds` (at least twice), on the
    monotonic clock; the samples and the number of reads that failed. The first read failing
    raises its TelemetryError (NVML is not there at all)."""
    node, start = socket.gethostname(), time.monotonic()
    reads = max(2, int(seconds / interval + 1e-9) + 1)
    samples, failed = read_nvml(node, None, 0.0), 0
    for k in range(1, reads):
        time.sleep(max(0.0, start + k * interval - time.monotonic()))
        try:
            samples += read_nvml(node, None, time.monotonic() - start)
        except TelemetryError as exc:
            print_error(PROG, str(exc))
            failed += 1
    return samples, failed


def report(samples: list[GpuSample]) -> list[str]:
    """One line per GPU, in index order ("-": no read gave that figure)."""
    by_gpu: dict[tuple[int, str], list[GpuSample]] = defaultdict(list)
    for s in samples:
        by_gpu[(s.index, s.uuid)].append(s)
    lines = []
    for (index, uuid), own in sorted(by_gpu.items()):
        energy = energy_of(own)
        power = [s.power_w for s in own if s.power_w is not None]
        used = [s.fb_used_mib for s in own if s.fb_used_mib is not None]
        free = [s.fb_free_mib for s in own if s.fb_free_mib is not None]
        util = [s.util_pct for s in own if s.util_pct is not None]
        parts = [f"energy {energy.joules:,.1f} J ({energy.source}, {energy.samples} samples"
                 + "".join(f"; {n}" for n in energy.notes) + ")" if energy else "energy not measured",
                 f"power mean {statistics.fmean(power):.1f} W, peak {max(power):.1f} W" if power else "power -",
                 f"memory used peak {max(used):,.0f} MiB" if used else "memory used -",
                 f"least free {min(free):,.0f} MiB" if free else "free -",
                 f"utilisation mean {statistics.fmean(util):.0f}%" if util else "utilisation -"]
        lines.append(f"GPU {index} {own[0].model or '?'} {uuid}: " + "; ".join(parts))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to read (default 60)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between reads (default 1)")
    args = parser.parse_args(argv)
    if args.seconds < 0 or args.interval <= 0:
        parser.error("--seconds must be >= 0 and --interval > 0")
    try:
        samples, failed = sample(args.seconds, args.interval)
    except TelemetryError as exc:
        print_error(PROG, str(exc))
        return INCOMPLETE
    for line in report(samples):
        print(line)
    if failed:
        print(f"{failed} reads failed (above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
