"""GPU telemetry read through NVML (`nvidia-ml-py`, module `pynvml`, the optional extra
`loadtest[nvml]`) into the same `GpuSample`s as dcgm-exporter's text: issue 42's fallback where no
exporter answers, run from inside each replica's Ray actor on the replica's own node.

Calls and units (docs/research/gpu-power-and-telemetry.md, section 5): nvmlDeviceGetPowerUsage
in mW (a 1 s average on Ampere and newer) -> W; nvmlDeviceGetTotalEnergyConsumption in mJ since
the driver loaded (Volta and newer; a GPU without it gives None, and `energy_of` then integrates
the power); nvmlDeviceGetMemoryInfo in bytes -> MiB used and free; nvmlDeviceGetUtilizationRates
`.gpu` in %. The XID is left None: NVML has no cheap poll for the last XID (only an event set to
register and wait on), so XIDs come from dcgm-exporter alone.

Indices are NVML's (PCI bus order, as nvidia-smi numbers them), which ignore CUDA_VISIBLE_DEVICES.
Every failure is one `TelemetryError` line naming the node, never a traceback."""

from __future__ import annotations

import importlib
import socket
from collections.abc import Sequence
from types import ModuleType

from cluster.gpu_telemetry import GpuSample, TelemetryError
from common.exits import one_line

MIB = 1 << 20
NOT_AVAILABLE = "NVML is not available (pip install 'loadtest[nvml]', which brings nvidia-ml-py)"
NO_ENERGY_COUNTER = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")   # a GPU before Volta

_started: ModuleType | None = None   # the pynvml module nvmlInit succeeded on (lazily, once)


def _nvml(node: str) -> ModuleType:
    """pynvml, initialised once per process (nvmlInit is reference-counted, so a second call from
    a racing thread is harmless); a failed start is retried on the next read."""
    global _started
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        raise TelemetryError(f"{node}: {NOT_AVAILABLE}") from None
    if _started is not nvml:
        try:
            nvml.nvmlInit()
        except Exception as exc:   # NVMLError (no driver, no libnvidia-ml.so.1), NVMLLibraryMismatchError
            raise TelemetryError(f"{node}: NVML did not start ({one_line(exc) or type(exc).__name__})") from None
        _started = nvml
    return nvml


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)   # pynvml before 11.5 gives bytes


def _energy_mj(nvml: ModuleType, handle: object) -> float | None:
    missing = tuple(getattr(nvml, name) for name in NO_ENERGY_COUNTER if hasattr(nvml, name))
    try:
        return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    except missing:
        return None


def read_nvml(node: str, indices: Sequence[int] | None, at_s: float) -> list[GpuSample]:
    """One sample of each GPU in `indices` (NVML's indices; None: every GPU on this machine),
    stamped `node` and `at_s`. TelemetryError: pynvml not installed, NVML not starting (no
    driver), or a GPU that cannot be read (named by its index)."""
    nvml = _nvml(node)
    try:
        wanted = list(range(nvml.nvmlDeviceGetCount())) if indices is None else list(indices)
    except Exception as exc:
        raise TelemetryError(f"{node}: NVML could not count the GPUs ({one_line(exc)})") from None
    host = socket.gethostname()
    samples = []
    for index in wanted:
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            samples.append(GpuSample(
                node=node, at_s=at_s, uuid=_text(nvml.nvmlDeviceGetUUID(handle)), index=index, host=host,
                model=_text(nvml.nvmlDeviceGetName(handle)),
                power_w=nvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                energy_mj=_energy_mj(nvml, handle),
                fb_used_mib=memory.used / MIB, fb_free_mib=memory.free / MIB,
                util_pct=float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)))
        except Exception as exc:   # NVMLError_GpuIsLost, _InvalidArgument (no such index), _NoPermission, ...
            raise TelemetryError(f"{node}: NVML could not read GPU {index} ({one_line(exc)})") from None
    return samples
