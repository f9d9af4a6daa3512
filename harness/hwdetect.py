"""Detect the machine a sweep runs on: NVIDIA GPUs through NVML (pynvml), else the CPU.

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

Bandwidth probe: numpy ``copyto`` of a float64 array of ``probe_bytes`` (default 256 MiB) into another;
one copy moves 2 x probe_bytes (read + write); best of ``repeats``; reported in GB/s = 10^9 B/s.
It is a measured lower bound of what a streaming kernel sees, not the datasheet peak.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from estimator.specs import GIB, HardwareSpec, SpecError

# NVML name (as nvidia-smi prints it) -> hardware catalog id.  Names are exact strings NVML reports;
# the catalog ids are those of reference/hardware.csv.  Unlisted names fall back to pattern matching below.
NVML_NAME_TO_ID: dict[str, str] = {
    "NVIDIA H200": "h200-141gb-sxm",
    "NVIDIA H100 80GB HBM3": "h100-80gb-sxm",
    "NVIDIA H100 PCIe": "h100-80gb-pcie",
    "NVIDIA H100 NVL": "h100-nvl-94gb",
    "NVIDIA A100-SXM4-80GB": "a100-80gb-sxm",
    "NVIDIA A100-SXM4-40GB": "a100-40gb-sxm",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA B200": "b200",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA H20": "h20-96gb",
}

_CC_FAMILY = {
    (6,): "nvidia-pascal",
    (7, 0): "nvidia-volta",
    (7, 2): "nvidia-volta",
    (7, 5): "nvidia-turing",
    (8, 0): "nvidia-ampere",
    (8, 6): "nvidia-ampere",
    (8, 7): "nvidia-ampere-embedded",
    (8, 9): "nvidia-ada",
    (9,): "nvidia-hopper",
    (10, 3): "nvidia-blackwell-ultra",
    (10,): "nvidia-blackwell",
    (12,): "nvidia-blackwell",
}


@dataclass(frozen=True)
class CpuInfo:
    model_name: str
    machine: str  # platform.machine(): x86_64, aarch64, ...
    physical_cores: int | None
    logical_cpus: int | None
    ram_bytes: int | None
    isa: tuple[str, ...]  # sorted subset of: amx, avx2, avx512, avx512_bf16, fma, f16c, neon, sve, ...
    family: str


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    memory_bytes: int | None
    driver: str
    compute_capability: tuple[int, int] | None
    max_sm_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    family: str


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


# --- CPU ------------------------------------------------------------------------------------------------
def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def parse_cpuinfo(text: str) -> tuple[str, set[str]]:
    """(model name, flag set) from /proc/cpuinfo text (x86 ``flags``, ARM ``Features``)."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if not model and key in ("model name", "hardware", "cpu model", "uarch"):
            model = value.strip()
        elif not flags and key in ("flags", "features", "isa"):
            flags = set(value.split())
    return model, flags


def isa_features(flags: set[str], machine: str) -> tuple[str, ...]:
    """Normalized ISA feature names from cpuinfo flags."""
    out = set()
    if "avx2" in flags:
        out.add("avx2")
    if "avx512f" in flags:
        out.add("avx512")
    if "avx512_bf16" in flags:
        out.add("avx512_bf16")
    if "avx512_vnni" in flags:
        out.add("avx512_vnni")
    if {"amx_tile", "amx_bf16"} & flags:
        out.add("amx")
    for f in ("fma", "f16c", "sse4_2", "sve", "sve2"):
        if f in flags:
            out.add(f)
    m = machine.lower()
    if m in ("aarch64", "arm64") or "asimd" in flags or "neon" in flags:
        out.add("neon")
    if "dotprod" in flags or "asimddp" in flags:
        out.add("dotprod")
    return tuple(sorted(out))


def cpu_family(machine: str, isa: tuple[str, ...] | set[str]) -> str:
    """Calibration family of a CPU from its architecture and ISA features."""
    m = machine.lower()
    if m in ("x86_64", "amd64", "i686", "i386", "x86"):
        if "avx512" in isa:
            return "cpu-x86-avx512"
        if "avx2" in isa:
            return "cpu-x86-avx2"
        return "cpu-x86-sse4"
    if m.startswith(("aarch64", "arm")):
        return "cpu-arm-neon" if "neon" in isa else "cpu-unknown"
    if m.startswith("riscv"):
        return "cpu-riscv"
    return "cpu-unknown"


def detect_cpu() -> CpuInfo:
    import psutil

    machine = platform.machine()
    model, flags = parse_cpuinfo(_read_text("/proc/cpuinfo"))
    if not model:
        model = _read_text("/proc/device-tree/model").strip("\x00\n ") or platform.processor() or machine
    isa = isa_features(flags, machine)
    return CpuInfo(
        model_name=model,
        machine=machine,
        physical_cores=psutil.cpu_count(logical=False),
        logical_cpus=psutil.cpu_count(logical=True),
        ram_bytes=int(psutil.virtual_memory().total),
        isa=isa,
        family=cpu_family(machine, isa),
    )


def bandwidth_probe_gbs(probe_bytes: int = 256 * 2**20, repeats: int = 5) -> float:
    """Host memory copy bandwidth in GB/s (10^9 B/s): best of ``repeats`` numpy copies of 2 x probe_bytes."""
    import numpy as np

    n = max(1, probe_bytes // 8)
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch both arrays once (page faults are not bandwidth)
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * n * 8 / best / 1e9


def cpu_catalog_candidates(model_name: str) -> list[str]:
    """Catalog id guesses from a CPU model string (checked against the catalog by the caller).

    "AMD EPYC 9654 96-Core Processor" -> epyc-9654;
    "Intel(R) Xeon(R) Platinum 8480+" -> xeon-platinum-8480-plus;
    "13th Gen Intel(R) Core(TM) i9-13900K" -> core-i9-13900k;
    "AMD Ryzen 9 7950X 16-Core Processor" -> ryzen-9-7950x.
    """
    s = re.sub(r"\((R|TM|tm|r)\)", "", model_name)
    out = []
    if m := re.search(r"EPYC\s+(\d{4}\w*)", s):
        out.append(f"epyc-{m.group(1).lower()}")
    if m := re.search(r"Xeon\s+(Platinum|Gold|Silver|Bronze|w\d?)\s*-?\s*(\d{4,5}\w*)(\+?)", s, re.I):
        out.append(f"xeon-{m.group(1).lower()}-{m.group(2).lower()}" + ("-plus" if m.group(3) else ""))
    if m := re.search(r"Core\s+i(\d)-(\d{4,5}\w*)", s):
        out.append(f"core-i{m.group(1)}-{m.group(2).lower()}")
    if m := re.search(r"Ryzen\s+(\d)\s+(\d{4}\w*)", s):
        out.append(f"ryzen-{m.group(1)}-{m.group(2).lower()}")
    if m := re.search(r"Threadripper\s+(PRO\s+)?(\d{4}\w*)", s, re.I):
        out.append("threadripper-" + ("pro-" if m.group(1) else "") + m.group(2).lower())
    if m := re.search(r"\bN(\d{3})\b", s):
        out.append(f"intel-n{m.group(1)}")
    if m := re.search(r"Raspberry Pi (\d+)", s):
        out.append(f"raspberry-pi-{m.group(1)}")
    return out


# --- GPU (NVML) -----------------------------------------------------------------------------------------
def gpu_family_from_cc(cc: tuple[int, int] | None) -> str:
    if cc is None:
        return "nvidia-unknown"
    return _CC_FAMILY.get(cc) or _CC_FAMILY.get((cc[0],)) or "nvidia-unknown"


def _nvml_str(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def detect_gpus() -> tuple[GpuInfo, ...]:
    """Every NVIDIA GPU NVML sees that CUDA_VISIBLE_DEVICES lets this process use (NVML / PCI order);
    () without pynvml or a driver.  Each field is guarded."""
    try:
        import pynvml
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound / DriverNotLoaded / ...: no NVIDIA GPU here
        return ()

    def guarded(fn: Callable[[], object]) -> object | None:
        try:
            return fn()
        except Exception:
            return None

    try:
        driver = _nvml_str(guarded(pynvml.nvmlSystemGetDriverVersion) or "")
        out = []
        from runners.memory import visible_nvml_indices

        for i in visible_nvml_indices(pynvml):
            h = guarded(lambda i=i: pynvml.nvmlDeviceGetHandleByIndex(i))
            if h is None:  # a GPU NVML cannot open is left out, detection goes on
                continue
            mem = guarded(lambda h=h: pynvml.nvmlDeviceGetMemoryInfo(h))
            cc = guarded(lambda h=h: pynvml.nvmlDeviceGetCudaComputeCapability(h))
            cc = (int(cc[0]), int(cc[1])) if cc else None
            out.append(
                GpuInfo(
                    index=i,
                    name=_nvml_str(guarded(lambda h=h: pynvml.nvmlDeviceGetName(h)) or "NVIDIA GPU"),
                    uuid=_nvml_str(guarded(lambda h=h: pynvml.nvmlDeviceGetUUID(h)) or ""),
                    memory_bytes=int(mem.total) if mem is not None else None,
                    driver=driver,
                    compute_capability=cc,
                    max_sm_clock_mhz=guarded(
                        lambda h=h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
                    ),
                    max_mem_clock_mhz=guarded(
                        lambda h=h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
                    ),
                    family=gpu_family_from_cc(cc),
                )
            )
        return tuple(out)
    finally:
        guarded(pynvml.nvmlShutdown)


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


def gpu_catalog_candidates(name: str, memory_bytes: int | None) -> list[str]:
    """Catalog id guesses for an NVML device name: the explicit table, then a slug of the name."""
    out = [NVML_NAME_TO_ID[name]] if name in NVML_NAME_TO_ID else []
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "").replace("geforce", "")).strip("-")
    if slug:
        out.append(slug)
        if memory_bytes:
            out.append(f"{slug}-{round(memory_bytes / GIB)}gb")
    return out


def detect_host(
    probe_bandwidth: bool = True,
    resolver: HardwareResolver | None = None,
    use_gpus: bool = True,
) -> HostInfo:
    """Detect this machine.  ``resolver`` maps catalog ids to HardwareSpec (default: estimator catalog)."""
    resolver = resolver if resolver is not None else default_hardware_resolver()
    cpu = detect_cpu()
    gpus = detect_gpus() if use_gpus else ()
    bw = bandwidth_probe_gbs() if probe_bandwidth else None
    host = socket.gethostname()
    detected = {
        "cpu_model": cpu.model_name,
        "machine": cpu.machine,
        "physical_cores": cpu.physical_cores,
        "logical_cpus": cpu.logical_cpus,
        "ram_bytes": cpu.ram_bytes,
        "isa": list(cpu.isa),
        "cpu_family": cpu.family,
        "host_bandwidth_probe_gbs": round(bw, 2) if bw else None,
        "bandwidth_probe": "numpy float64 copy, best of 5, 2 x 256 MiB moved per copy, GB = 1e9 B",
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
    source = f"detected on {info.host} by fitbench harness.hwdetect (bandwidth = numpy copy probe)"
    if info.gpus:
        g = info.gpus[0]
        return HardwareSpec(
            id=f"detected-{re.sub(r'[^a-z0-9]+', '-', g.name.lower()).strip('-')}",
            name=g.name,
            vendor="NVIDIA",
            family=info.hardware_family,
            kind="gpu",
            memory_bytes=g.memory_bytes,
            bandwidth_gbs=None,
            bf16_tflops=None,
            host_bandwidth_gbs=info.bandwidth_gbs,
            source=source,
        )
    vendor = "AMD" if "AMD" in info.cpu.model_name else "Intel" if "Intel" in info.cpu.model_name else ""
    return HardwareSpec(
        id="detected-cpu",
        name=info.cpu.model_name,
        vendor=vendor,
        family=info.hardware_family,
        kind="cpu",
        memory_bytes=info.cpu.ram_bytes,
        bandwidth_gbs=info.bandwidth_gbs,
        bf16_tflops=None,
        host_bandwidth_gbs=info.bandwidth_gbs,
        source=source,
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
