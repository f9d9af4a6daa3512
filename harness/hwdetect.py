"""Detect the machine a sweep runs on: NVIDIA GPUs through NVML (pynvml), else the CPU.

The detection core (CPU, NVML, families, the bandwidth probe, catalog candidates) is the estimator's
(``estimator.catalog.detect``, which ``python -m estimator report --hardware auto`` also uses); this module
adds what a sweep records: HostInfo, the CUDA_VISIBLE_DEVICES rule for which GPUs count, and specs for
hosts the catalog lacks.

What a record gets from here: device name, count, driver, backend, the calibration family and the hardware
catalog id when one matches.  A CPU that is not in the catalog gets hardware_id "" and a detected spec
(bandwidth probe, cores, ISA, RAM) that the sweep stores in each record's ``extra["detected"]``.

Families (the ``family`` column of the hardware catalog, reference/hardware_extra.csv):
  CPUs: cpu-x86-avx512 (avx512f), cpu-x86-avx2, cpu-x86-sse4, cpu-arm-neon (aarch64 / armv7 with neon),
        cpu-riscv, cpu-unknown.  AMX (amx_tile) and avx512_bf16 are recorded as ISA features, not families.
  NVIDIA GPUs, by CUDA compute capability: 6.x nvidia-pascal, 7.0/7.2 nvidia-volta, 7.5 nvidia-turing,
        8.0/8.6 nvidia-ampere, 8.7 nvidia-ampere-embedded, 8.9 nvidia-ada, 9.x nvidia-hopper,
        10.x/12.x nvidia-blackwell (10.3 nvidia-blackwell-ultra).
A catalog match overrides the computed family for GPUs (the catalog is the calibration's grouping).

Bandwidth probe (``estimator.catalog.detect.bandwidth_probe_gbs``): a copy of a 256 MiB buffer into another on
every logical CPU the process may use at once, each thread its own slice; one pass moves 2 x 256 MiB (read +
write); best of 5; GB/s = 10^9 B/s.  It is a measured lower bound of what a streaming kernel sees, not the
datasheet peak.  Records store how it was measured (``bandwidth_probe``, ``bandwidth_probe_threads``): before
2026-12-05 it was one thread's copy.  Since 2026-12-07 records also carry ``host_read_probe_gbs``, the same
buffers read without writing (``read_bandwidth_probe_gbs``), which nothing uses yet.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from estimator.catalog.detect import (  # noqa: F401 - the detection core, re-exported for the harness
    NVML_NAME_TO_ID,
    CpuInfo,
    GpuInfo,
    bandwidth_probe_gbs,
    cpu_catalog_candidates,
    cpu_family,
    detect_cpu,
    detected_cpu_spec,
    detected_gpu_spec,
    gpu_catalog_candidates,
    gpu_family_from_cc,
    host_device_key,
    isa_features,
    parse_cpuinfo,
    probe_description,
    probe_threads,
    read_bandwidth_probe_gbs,
)
from estimator.catalog.detect import detect_gpus as _detect_gpus
from estimator.specs import HardwareSpec, SpecError


@dataclass(frozen=True)
class HostInfo:
    """What the records of one sweep say about the machine (see module docstring)."""

    host: str
    backend: str  # CUDA | CPU
    device_name: str
    n_devices: int
    driver: str
    hardware_id: str
    hardware_family: str
    cpu: CpuInfo
    gpus: tuple[GpuInfo, ...] = ()
    bandwidth_gbs: float | None = None  # host RAM copy probe, 10^9 B/s
    detected: dict = field(default_factory=dict)  # spec stored in RunRecord.extra["detected"]


def detect_gpus() -> tuple[GpuInfo, ...]:
    """Every NVIDIA GPU NVML sees that CUDA_VISIBLE_DEVICES lets this process use (NVML / PCI order); ()
    without pynvml or a driver (``estimator.catalog.detect.detect_gpus`` with the runners' visibility
    rule)."""
    from runners.memory import visible_nvml_indices

    return _detect_gpus(visible_nvml_indices)


# --- catalog mapping ------------------------------------------------------------------------------------
HardwareResolver = Callable[[str], HardwareSpec]


def default_hardware_resolver() -> HardwareResolver | None:
    """``estimator.catalog.resolve.resolve_hardware`` when the estimator catalog is installed, else None."""
    try:
        from estimator.catalog.resolve import resolve_hardware
    except ImportError:
        return None
    return resolve_hardware


def _try_resolve(resolver: HardwareResolver | None, ids: list[str]) -> HardwareSpec | None:
    if resolver is None:
        return None
    for hid in ids:
        try:
            return resolver(hid)
        except (SpecError, KeyError, ValueError):
            continue
    return None


def detect_host(
    probe_bandwidth: bool = True,
    resolver: HardwareResolver | None = None,
    use_gpus: bool = True,
) -> HostInfo:
    """Detect this machine.  ``resolver`` maps catalog ids to HardwareSpec (default: estimator catalog)."""
    resolver = resolver if resolver is not None else default_hardware_resolver()
    cpu = detect_cpu()
    gpus = detect_gpus() if use_gpus else ()
    threads = probe_threads()
    bw = bandwidth_probe_gbs(threads=threads) if probe_bandwidth else None
    read_bw = read_bandwidth_probe_gbs(threads=threads) if probe_bandwidth else None
    host = socket.gethostname()
    detected = {
        "cpu_model": cpu.model_name,
        "machine": cpu.machine,
        "physical_cores": cpu.physical_cores,
        "cpu_clock_ghz": cpu.clock_ghz,
        "cpu_clock_source": cpu.clock_source,
        "logical_cpus": cpu.logical_cpus,
        "ram_bytes": cpu.ram_bytes,
        "isa": list(cpu.isa),
        "cpu_family": cpu.family,
        "host_bandwidth_probe_gbs": round(bw, 2) if bw else None,
        "bandwidth_probe": probe_description(threads),
        "bandwidth_probe_threads": threads,
        "host_read_probe_gbs": round(read_bw, 2) if read_bw else None,  # recorded, not used (detect.py)
        "os": platform.platform(),
    }
    if gpus:
        g0 = gpus[0]
        spec = _try_resolve(resolver, gpu_catalog_candidates(g0.name, g0.memory_bytes))
        detected["gpus"] = [
            {
                "index": g.index,
                "name": g.name,
                "uuid": g.uuid,
                "memory_bytes": g.memory_bytes,
                "compute_capability": (
                    ".".join(map(str, g.compute_capability)) if g.compute_capability else None
                ),
                "max_sm_clock_mhz": g.max_sm_clock_mhz,
                "max_mem_clock_mhz": g.max_mem_clock_mhz,
            }
            for g in gpus
        ]
        if len({g.name for g in gpus}) > 1:
            detected["mixed_gpus"] = True
        return HostInfo(
            host=host,
            backend="CUDA",
            device_name=g0.name,
            n_devices=len(gpus),
            driver=g0.driver,
            hardware_id=spec.id if spec else "",
            hardware_family=spec.family if spec and spec.family else g0.family,
            cpu=cpu,
            gpus=gpus,
            bandwidth_gbs=bw,
            detected=detected,
        )
    spec = _try_resolve(resolver, cpu_catalog_candidates(cpu.model_name))
    if spec is not None:
        detected["catalog_family"] = spec.family
    return HostInfo(
        host=host,
        backend="CPU",
        device_name=cpu.model_name,
        n_devices=1,
        driver="",
        hardware_id=spec.id if spec else "",
        hardware_family=cpu.family,
        cpu=cpu,
        gpus=(),
        bandwidth_gbs=bw,
        detected=detected,
    )


def hardware_spec_for(info: HostInfo, resolver: HardwareResolver | None = None) -> HardwareSpec:
    """HardwareSpec of a detected host: the catalog entry when one matched, else one built from detection.

    A detected CPU spec has memory = RAM, bandwidth = the probe (measured, GB/s), no TFLOPS (unknown), and
    status "unverified" with a source line saying it was detected.
    """
    resolver = resolver if resolver is not None else default_hardware_resolver()
    if info.hardware_id:
        spec = _try_resolve(resolver, [info.hardware_id])
        if spec is not None:
            return spec
    probe = info.detected.get("bandwidth_probe") or probe_description()
    source = f"detected on {info.host} by fitbench harness.hwdetect (bandwidth = {probe})"
    own = host_device_key(info.host, info.device_name, info.hardware_family)  # its records carry (device_key)
    if info.gpus:
        return detected_gpu_spec(
            info.gpus[0], info.hardware_family, info.bandwidth_gbs, source=source, measured_as=own
        )
    return detected_cpu_spec(
        info.cpu, info.bandwidth_gbs, info.hardware_family, source=source, measured_as=own
    )


def detected_hardware_spec(probe_bandwidth: bool = True) -> HardwareSpec:
    """HardwareSpec of the local machine (GPU 0 when NVML sees one, else the CPU)."""
    return hardware_spec_for(detect_host(probe_bandwidth=probe_bandwidth))


def env_threads() -> int | None:
    """Threads a CPU run should use by default: physical cores (llama-bench's choice), else os.cpu_count()."""
    try:
        import psutil

        return psutil.cpu_count(logical=False) or os.cpu_count()
    except ImportError:
        return os.cpu_count()
