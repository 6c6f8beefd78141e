"""GPU telemetry read as dcgm-exporter serves it (cluster/gpu_telemetry.py): every GPU's fields
from its exposition text, a replica's own GPUs by UUID, and the energy over a window from the
counter, across a restart, or from the power where the counter is missing; bad text is one line
naming the node."""

from __future__ import annotations

import pytest

from cluster.gpu_telemetry import (
    COUNTER_WENT_BACK,
    NO_COUNTER,
    GpuSample,
    TelemetryError,
    energy_of,
    only_gpus,
    parse_dcgm,
)

UUIDS = ("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", "GPU-00000000-0000-0000-0000-000000000001")


def exposition(power: tuple[float, float], energy_mj: tuple[float, float] | None = None,
               host_label: str = "Hostname") -> str:
    """dcgm-exporter's text for two H100s, its labels in the exporter's order (gpu, UUID,
    pci_bus_id, device, modelName, the host), HELP and TYPE as etc/default-counters.csv has them."""
    def labels(i: int) -> str:
        return (f'gpu="{i}",UUID="{UUIDS[i]}",pci_bus_id="00000000:1{i}:00.0",device="nvidia{i}",'
                f'modelName="NVIDIA H100 80GB HBM3",{host_label}="node1",DCGM_FI_DRIVER_VERSION="550.90.07"')

    families = [("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", power),
                ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", (74_000.0, 71_500.0)),
                ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", (5_000.0, 7_500.0)),
                ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", (97.0, 95.0)),
                ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (0.0, 0.0)),
                ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (1980.0, 1980.0))]
    if energy_mj is not None:
        families.append(("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
                         "Total energy consumption since boot (in mJ).", energy_mj))
    lines = []
    for name, kind, about, values in families:
        lines += [f"# HELP {name} {about}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{{{labels(i)}}} {v!r}" for i, v in enumerate(values)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("host_label", ["Hostname", "hostname"])
def test_every_gpu_and_its_fields_are_read_whatever_the_host_label_is_spelled(host_label):
    samples = parse_dcgm(exposition((527.4, 611.0), (81_234_567.0, 90_000_000.0), host_label), "10.0.0.7", 12.5)
    assert [(s.index, s.uuid) for s in samples] == list(enumerate(UUIDS))
    first = samples[0]
    assert (first.node, first.at_s, first.host, first.model) == ("10.0.0.7", 12.5, "node1", "NVIDIA H100 80GB HBM3")
    assert (first.power_w, first.energy_mj, first.fb_used_mib, first.fb_free_mib, first.util_pct, first.xid) == (
        527.4, 81_234_567.0, 74_000.0, 5_000.0, 97.0, 0.0)
    assert samples[1].power_w == 611.0 and samples[1].energy_mj == 90_000_000.0


def test_a_replica_keeps_only_its_own_gpus():
    samples = parse_dcgm(exposition((500.0, 600.0), (1.0, 2.0)), "n", 0.0)
    assert [s.power_w for s in only_gpus(samples, {UUIDS[1]})] == [600.0]
    assert only_gpus(samples, {"GPU-elsewhere"}) == []


@pytest.mark.parametrize("text", ["<html>502 Bad Gateway</html>", "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\" 12\n"])
def test_an_answer_that_is_not_prometheus_text_is_one_line_naming_the_node(text):
    with pytest.raises(TelemetryError, match=r"^10\.0\.0\.9: the GPU exporter's answer is not Prometheus text"):
        parse_dcgm(text, "10.0.0.9", 0.0)


def test_an_exporter_that_names_no_gpu_is_one_line():
    with pytest.raises(TelemetryError, match=r"^n2: the GPU exporter names no GPU"):
        parse_dcgm("# TYPE up gauge\nup 1\n", "n2", 0.0)


def _gpu(at_s: float, energy_mj: float | None = None, power_w: float | None = None) -> GpuSample:
    return GpuSample("n", at_s, UUIDS[0], 0, energy_mj=energy_mj, power_w=power_w)


def test_energy_is_the_counters_rise():
    e = energy_of([_gpu(2.0, 1_500_000.0), _gpu(0.0, 1_000_000.0), _gpu(1.0, 1_200_000.0)])   # any order
    assert (e.joules, e.source, e.samples, e.notes) == (500.0, "counter", 3, ())


def test_a_counter_that_goes_back_is_summed_over_its_rises_and_said():
    e = energy_of([_gpu(0.0, 1_000_000.0), _gpu(1.0, 1_400_000.0), _gpu(2.0, 50_000.0), _gpu(3.0, 350_000.0)])
    assert e.joules == pytest.approx(750.0) and e.notes == (COUNTER_WENT_BACK,)   # 400 + 50 from zero + 300


def test_without_the_counter_the_power_is_integrated_and_said():
    e = energy_of([_gpu(0.0, power_w=400.0), _gpu(2.0, power_w=600.0), _gpu(3.0, power_w=600.0)])
    assert (e.joules, e.source, e.notes) == ((400.0 + 600.0) / 2 * 2 + 600.0 * 1, "power", (NO_COUNTER,))


def test_one_sample_is_no_energy():
    assert energy_of([_gpu(0.0, 1.0, 300.0)]) is None
    assert energy_of([]) is None
