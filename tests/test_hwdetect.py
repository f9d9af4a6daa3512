"""Hardware detection: cpuinfo parsing, ISA families, catalog mapping, NVML (real on GPU boxes only)."""

from __future__ import annotations

import pytest

from estimator.catalog.resolve import resolve_hardware
from harness import hwdetect
from harness.hwdetect import (
    GpuInfo,
    cpu_catalog_candidates,
    cpu_family,
    detect_host,
    gpu_catalog_candidates,
    gpu_family_from_cc,
    hardware_spec_for,
    isa_features,
    parse_cpuinfo,
)

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16
"""
ARM = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes crc32 asimddp sve
CPU implementer\t: 0x41
"""


def test_parse_cpuinfo_and_isa_families():
    model, flags = parse_cpuinfo(X86)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    isa = isa_features(flags, "x86_64")
    assert {"avx2", "avx512", "avx512_bf16", "amx", "fma"} <= set(isa)
    assert cpu_family("x86_64", isa) == "cpu-x86-avx512"
    assert cpu_family("x86_64", ("avx2",)) == "cpu-x86-avx2"
    assert cpu_family("x86_64", ()) == "cpu-x86-sse4"
    _, arm_flags = parse_cpuinfo(ARM)
    arm = isa_features(arm_flags, "aarch64")
    assert {"neon", "sve", "dotprod"} <= set(arm)
    assert cpu_family("aarch64", arm) == "cpu-arm-neon"
    assert cpu_family("riscv64", ()) == "cpu-riscv"


def test_cpu_and_gpu_catalog_candidates_resolve():
    assert cpu_catalog_candidates("AMD EPYC 9654 96-Core Processor")[0] == "epyc-9654"
    assert "xeon-platinum-8480-plus" in cpu_catalog_candidates("Intel(R) Xeon(R) Platinum 8480+")
    assert "core-i9-13900k" in cpu_catalog_candidates("13th Gen Intel(R) Core(TM) i9-13900K")
    assert "ryzen-9-7950x" in cpu_catalog_candidates("AMD Ryzen 9 7950X 16-Core Processor")
    assert cpu_catalog_candidates("AMD EPYC") == []
    for name, expected in (("NVIDIA H200", "h200-141gb-sxm"), ("NVIDIA H100 80GB HBM3", "h100-80gb-sxm"),
                           ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("NVIDIA L40S", "l40s"),
                           ("NVIDIA GeForce RTX 4060 Laptop GPU", "rtx-4060-laptop"),
                           ("NVIDIA GeForce RTX 3060 Ti", "rtx-3060-ti")):  # fmt: skip
        assert resolve_hardware(gpu_catalog_candidates(name, 80 * 2**30)[0]).id == expected


def test_nvml_families_from_compute_capability():
    assert gpu_family_from_cc((9, 0)) == "nvidia-hopper"
    assert gpu_family_from_cc((8, 9)) == "nvidia-ada"
    assert gpu_family_from_cc((8, 6)) == "nvidia-ampere"
    assert gpu_family_from_cc((10, 0)) == "nvidia-blackwell"
    assert gpu_family_from_cc((12, 0)) == "nvidia-blackwell"
    assert gpu_family_from_cc((7, 5)) == "nvidia-turing"
    assert gpu_family_from_cc(None) == "nvidia-unknown"


def test_detected_gpu_maps_to_catalog(monkeypatch):
    fake = GpuInfo(
        0, "NVIDIA H200", "GPU-1234", 150_754_820_096, "570.1", (9, 0), 1980, 2619, "nvidia-hopper"
    )
    monkeypatch.setattr(hwdetect, "detect_gpus", lambda: (fake, fake))
    info = detect_host(probe_bandwidth=False)
    assert (info.hardware_id, info.hardware_family, info.backend, info.n_devices) == (
        "h200-141gb-sxm", "nvidia-hopper", "CUDA", 2,
    )  # fmt: skip
    assert info.detected["gpus"][0]["uuid"] == "GPU-1234"
    assert info.detected["gpus"][0]["compute_capability"] == "9.0"
    assert hardware_spec_for(info).id == "h200-141gb-sxm"


def test_unknown_gpu_keeps_cc_family(monkeypatch):
    fake = GpuInfo(0, "NVIDIA Future X", "GPU-9", 10**11, "600.0", (9, 0), None, None, "nvidia-hopper")
    monkeypatch.setattr(hwdetect, "detect_gpus", lambda: (fake,))
    info = detect_host(probe_bandwidth=False)
    assert info.hardware_id == "" and info.hardware_family == "nvidia-hopper"
    spec = hardware_spec_for(info)
    assert spec.kind == "gpu" and spec.memory_bytes == 10**11 and "detected" in spec.source


def test_local_cpu_detection_and_detected_spec(monkeypatch):
    monkeypatch.setattr(hwdetect, "detect_gpus", lambda: ())
    monkeypatch.setattr(hwdetect, "bandwidth_probe_gbs", lambda **_: 12.5)
    monkeypatch.setattr(hwdetect, "read_bandwidth_probe_gbs", lambda **_: 9.25)
    info = detect_host()
    assert info.backend == "CPU" and info.hardware_family.startswith("cpu-")
    assert info.detected["host_bandwidth_probe_gbs"] == 12.5
    assert info.detected["host_read_probe_gbs"] == 9.25  # recorded beside the copy probe
    threads = info.detected["bandwidth_probe_threads"]
    assert threads >= 1 and f"on {threads} thread" in info.detected["bandwidth_probe"]
    assert info.detected["ram_bytes"] > 0 and info.detected["isa"] == list(info.cpu.isa)
    # the clock and how it was found (cpufreq, the probe on a VM, or the reported nominal clock)
    assert info.detected["cpu_clock_ghz"] == info.cpu.clock_ghz
    assert info.detected["cpu_clock_source"] == info.cpu.clock_source
    assert (info.cpu.clock_ghz is None) == (info.cpu.clock_source == "")
    spec = hardware_spec_for(info)
    assert spec.kind == "cpu" if not info.hardware_id else spec.id == info.hardware_id
    if not info.hardware_id:
        assert spec.bandwidth_gbs == 12.5 and spec.family == info.hardware_family
        # the key of this host's own records: host, CPU name and ISA family (calibration.dataset.device_key)
        assert spec.measured_as == f"{info.host}:{info.device_name} [{info.hardware_family}]"


def test_two_vms_of_one_name_are_two_devices():
    """Cloud VMs are all called "vm" and a VM's CPU may call itself "AMD EPYC" on a Zen 3 (AVX2) and on a
    Zen 4 (AVX-512) host: the device key carries the ISA family, so calibration keeps them apart."""
    from types import SimpleNamespace

    from calibration.dataset import device_key
    from estimator.catalog.detect import host_device_key

    def rec(family):
        return SimpleNamespace(hardware_id="", host="vm", device_name="AMD EPYC", hardware_family=family)

    assert device_key(rec("cpu-x86-avx2")) == "vm:AMD EPYC [cpu-x86-avx2]"
    assert device_key(rec("cpu-x86-avx2")) != device_key(rec("cpu-x86-avx512"))
    assert host_device_key("vm", "AMD EPYC") == "vm:AMD EPYC" and host_device_key("", "X", "f") == "X [f]"
    assert device_key(SimpleNamespace(hardware_id="rtx-4090", host="vm", device_name="x")) == "rtx-4090"


def test_bandwidth_probe_measures_something():
    gbs = hwdetect.bandwidth_probe_gbs(probe_bytes=16 * 2**20, repeats=2)
    assert 0.1 < gbs < 10_000


@pytest.mark.gpu
def test_real_nvml():
    gpus = hwdetect.detect_gpus()
    if not gpus:
        pytest.skip("no NVIDIA GPU visible to NVML")
    g = gpus[0]
    assert g.name and g.memory_bytes and g.memory_bytes > 2**30 and g.compute_capability
    info = detect_host(probe_bandwidth=False)
    assert info.backend == "CUDA" and info.hardware_family.startswith("nvidia-")
