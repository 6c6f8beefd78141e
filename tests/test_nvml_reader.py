"""GPU telemetry read through NVML (cluster/nvml_reader.py) against a mocked `pynvml` module put
into sys.modules: units converted (mW -> W, bytes -> MiB), only the GPUs asked for, a GPU without
the energy counter (its power integrated instead), and every failure one line naming the node;
then ops/nvml_check.py on the same mock. No GPU, no driver, no server.

The mock uses nvidia-ml-py's own names (checked against nvidia-ml-py 13.615.71's pynvml.py):
the functions below, NVMLError with its `value` and its per-code subclasses
(NVMLError_NotSupported = 3, _DriverNotLoaded = 9, _LibraryNotFound = 12, _FunctionNotFound = 13,
_GpuIsLost = 15), raised as the subclass, and their messages ("Not Supported", ...)."""

from __future__ import annotations

import importlib.util
import socket
import sys
import types
from dataclasses import dataclass, field

import pytest

from cluster import nvml_reader
from cluster.gpu_telemetry import NO_COUNTER, TelemetryError, energy_of
from cluster.nvml_reader import read_nvml
from tests.conftest import ROOT

MIB = 1 << 20
ERRORS = {2: ("InvalidArgument", "Invalid Argument"), 3: ("NotSupported", "Not Supported"),
          9: ("DriverNotLoaded", "Driver Not Loaded"), 12: ("LibraryNotFound", "NVML Shared Library Not Found"),
          13: ("FunctionNotFound", "Function Not Found"), 15: ("GpuIsLost", "GPU is lost")}


@dataclass
class Gpu:
    uuid: bytes | str
    name: bytes | str = "NVIDIA H100 80GB HBM3"
    power_mw: int = 527_400                  # nvmlDeviceGetPowerUsage: mW
    energy_mj: int | None = 81_234_567       # nvmlDeviceGetTotalEnergyConsumption: mJ; None: NotSupported
    energy_missing: str = "NotSupported"     # or FunctionNotFound (a driver without the symbol)
    used_bytes: int = 74_000 * MIB
    free_bytes: int = 5_000 * MIB
    util: int = 97
    energy_step_mj: int = 0                  # the counter's rise per read
    lost: bool = False                       # every read after the handle raises GpuIsLost


@dataclass
class FakeNvml:
    """A `pynvml` module over `gpus`, counting the calls made of it."""

    gpus: list[Gpu]
    init_error: int | None = None
    calls: list[tuple[str, object]] = field(default_factory=list)

    def module(self) -> types.ModuleType:
        m = types.ModuleType("pynvml")

        class NVMLError(Exception):
            def __init__(self, value: int):
                super().__init__(value)
                self.value = value

            def __str__(self) -> str:
                return ERRORS[self.value][1]

        m.NVMLError = NVMLError
        errors, by_code = {}, {}
        for code, (name, _) in ERRORS.items():
            init = lambda self, c=code: NVMLError.__init__(self, c)  # noqa: E731  (raised with no argument)
            cls = type(f"NVMLError_{name}", (NVMLError,), {"__init__": init})
            setattr(m, cls.__name__, cls)
            errors[name] = by_code[code] = cls

        def gpu(handle: int, call: str) -> Gpu:
            self.calls.append((call, handle))
            if self.gpus[handle].lost:
                raise errors["GpuIsLost"]()
            return self.gpus[handle]

        def init() -> None:
            self.calls.append(("nvmlInit", None))
            if self.init_error is not None:
                raise by_code[self.init_error]()

        def handle_by_index(index: int) -> int:
            self.calls.append(("nvmlDeviceGetHandleByIndex", index))
            if not 0 <= index < len(self.gpus):
                raise errors["InvalidArgument"]()
            return index

        def energy(h: int) -> int:
            g = gpu(h, "nvmlDeviceGetTotalEnergyConsumption")
            if g.energy_mj is None:
                raise errors[g.energy_missing]()
            g.energy_mj += g.energy_step_mj
            return g.energy_mj

        m.nvmlInit = init
        m.nvmlShutdown = lambda: None
        m.nvmlDeviceGetCount = lambda: len(self.gpus)
        m.nvmlDeviceGetHandleByIndex = handle_by_index
        m.nvmlDeviceGetUUID = lambda h: gpu(h, "nvmlDeviceGetUUID").uuid
        m.nvmlDeviceGetName = lambda h: gpu(h, "nvmlDeviceGetName").name
        m.nvmlDeviceGetPowerUsage = lambda h: gpu(h, "nvmlDeviceGetPowerUsage").power_mw
        m.nvmlDeviceGetTotalEnergyConsumption = energy
        m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
            total=gpu(h, "nvmlDeviceGetMemoryInfo").used_bytes + self.gpus[h].free_bytes,
            free=self.gpus[h].free_bytes, used=self.gpus[h].used_bytes)
        m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(
            gpu=gpu(h, "nvmlDeviceGetUtilizationRates").util, memory=40)
        return m

    def touched(self) -> set[int]:
        return {h for call, h in self.calls if call.startswith("nvmlDevice")}


UUIDS = ("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", "GPU-00000000-0000-0000-0000-000000000001",
         "GPU-00000000-0000-0000-0000-000000000002")


@pytest.fixture
def nvml(monkeypatch):
    """Installs a FakeNvml as `pynvml` (three GPUs unless the test changes them) and forgets any
    earlier nvmlInit, so each test starts NVML afresh."""
    monkeypatch.setattr(nvml_reader, "_started", None)
    fake = FakeNvml([Gpu(uuid=u) for u in UUIDS])

    def install() -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", fake.module())
        return fake

    fake.install = install
    return fake


def test_each_field_in_the_samples_units(nvml):
    nvml.gpus[0] = Gpu(uuid=UUIDS[0].encode(), name=b"NVIDIA H100 80GB HBM3")   # pynvml before 11.5: bytes
    nvml.gpus[1] = Gpu(uuid=UUIDS[1], power_mw=612_345, energy_mj=5, used_bytes=1536 * MIB + MIB // 2,
                       free_bytes=80_000 * MIB, util=3)
    nvml.install()
    first, second, third = read_nvml("10.0.0.7", None, 12.5)
    assert first.uuid == UUIDS[0] and first.model == "NVIDIA H100 80GB HBM3"
    assert (first.node, first.at_s, first.index, first.host) == ("10.0.0.7", 12.5, 0, socket.gethostname())
    assert (first.power_w, first.energy_mj, first.fb_used_mib, first.fb_free_mib, first.util_pct) == (
        527.4, 81_234_567.0, 74_000.0, 5_000.0, 97.0)
    assert (second.power_w, second.energy_mj, second.fb_used_mib, second.fb_free_mib, second.util_pct) == (
        612.345, 5.0, 1536.5, 80_000.0, 3.0)
    assert (second.index, third.index) == (1, 2)
    assert all(s.xid is None for s in (first, second, third)), "NVML has no cheap XID poll: left to dcgm-exporter"


def test_only_the_gpus_asked_for_are_read(nvml):
    nvml.install()
    samples = read_nvml("node1", [2, 0], 0.0)
    assert [(s.index, s.uuid) for s in samples] == [(2, UUIDS[2]), (0, UUIDS[0])]
    assert nvml.touched() == {0, 2}, "GPU 1 is another replica's: never touched"
    assert read_nvml("node1", [], 0.0) == []


def test_nvml_starts_once_per_process(nvml):
    nvml.install()
    read_nvml("node1", [0], 0.0)
    read_nvml("node1", [1], 1.0)
    assert [c for c, _ in nvml.calls].count("nvmlInit") == 1


@pytest.mark.parametrize("missing", ["NotSupported", "FunctionNotFound"])
def test_a_gpu_without_the_energy_counter_has_its_power_integrated(nvml, missing):
    """A GPU before Volta (NotSupported), or a driver without the call (FunctionNotFound): energy
    None in every sample, not an error; `energy_of` then integrates the power over the samples
    (trapezoids) and says so."""
    nvml.gpus[1] = Gpu(uuid=UUIDS[1], energy_mj=None, energy_missing=missing, power_mw=500_000)
    nvml.install()
    early = read_nvml("node1", [1], 10.0)
    nvml.gpus[1].power_mw = 700_000
    late = read_nvml("node1", [1], 12.0)
    assert early[0].energy_mj is None and late[0].energy_mj is None
    energy = energy_of(early + late)
    assert (energy.joules, energy.source, energy.samples, energy.notes) == (1200.0, "power", 2, (NO_COUNTER,))


def test_without_pynvml_one_line_says_what_to_install(nvml, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # `import pynvml` raises ImportError
    with pytest.raises(TelemetryError) as caught:
        read_nvml("10.0.0.7", None, 0.0)
    assert str(caught.value) == f"10.0.0.7: {nvml_reader.NOT_AVAILABLE}"
    assert "\n" not in str(caught.value) and "pip install 'loadtest[nvml]'" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


@pytest.mark.parametrize(("code", "said"), [(9, "Driver Not Loaded"), (12, "NVML Shared Library Not Found")])
def test_nvml_that_does_not_start_is_one_line_naming_the_node(nvml, code, said):
    nvml.init_error = code
    nvml.install()
    with pytest.raises(TelemetryError) as caught:
        read_nvml("10.0.0.7", None, 0.0)
    assert str(caught.value) == f"10.0.0.7: NVML did not start ({said})"
    assert caught.value.__suppress_context__
    nvml.init_error = None   # the driver back: the next read starts NVML rather than failing for good
    assert len(read_nvml("10.0.0.7", None, 1.0)) == 3


def test_a_gpu_that_cannot_be_read_is_one_line_naming_it(nvml):
    nvml.gpus[1].lost = True
    nvml.install()
    with pytest.raises(TelemetryError) as caught:
        read_nvml("10.0.0.7", None, 0.0)
    assert str(caught.value) == "10.0.0.7: NVML could not read GPU 1 (GPU is lost)"
    with pytest.raises(TelemetryError, match=r"^node1: NVML could not read GPU 7 \(Invalid Argument\)$"):
        read_nvml("node1", [0, 7], 0.0)   # no such index


def _nvml_check():
    spec = importlib.util.spec_from_file_location("nvml_check", ROOT / "ops" / "nvml_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nvml_check_prints_each_gpus_figures(nvml, capsys):
    """ops/nvml_check.py for two reads 10 ms apart: the counter's rise as the energy, the power,
    memory and utilisation of each GPU; GPU 2 has no counter, so its power is integrated."""
    for g in nvml.gpus:
        g.energy_step_mj = 1_500
    nvml.gpus[2].energy_mj = None
    nvml.gpus[2].util = 40
    nvml.install()
    assert _nvml_check().main(["--seconds", "0.01", "--interval", "0.01"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 3 and out.err == "", out
    assert lines[0] == (f"GPU 0 NVIDIA H100 80GB HBM3 {UUIDS[0]}: energy 1.5 J (counter, 2 samples); "
                        "power mean 527.4 W, peak 527.4 W; memory used peak 74,000 MiB; least free 5,000 MiB; "
                        "utilisation mean 97%")
    assert lines[2].startswith(f"GPU 2 NVIDIA H100 80GB HBM3 {UUIDS[2]}: energy ")
    assert f"(power, 2 samples; {NO_COUNTER})" in lines[2] and lines[2].endswith("utilisation mean 40%")
    assert [c for c, _ in nvml.calls].count("nvmlDeviceGetTotalEnergyConsumption") == 6


def test_nvml_check_without_nvml_prints_one_line_and_exits_3(nvml, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert _nvml_check().main(["--seconds", "0.01", "--interval", "0.01"]) == 3
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith(f"nvml_check: error: {socket.gethostname()}: NVML is not available")
