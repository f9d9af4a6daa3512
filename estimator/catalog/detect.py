"""Detect the machine this process runs on and turn it into a HardwareSpec (``--hardware auto``).

The detection core the harness also records (``harness.hwdetect`` builds its HostInfo on these functions):

* **NVIDIA GPUs** through NVML (``pynvml`` from nvidia-ml-py, imported only when asked): name, memory, driver,
  CUDA compute capability, clocks; the family from the compute capability (6.x nvidia-pascal, 7.0/7.2
  nvidia-volta, 7.5 nvidia-turing, 8.0/8.6 nvidia-ampere, 8.7 nvidia-ampere-embedded, 8.9 nvidia-ada, 9.x
  nvidia-hopper, 10.x/12.x nvidia-blackwell, 10.3 nvidia-blackwell-ultra).  Which NVML indices to read is the
  caller's (the harness passes its CUDA_VISIBLE_DEVICES rule); by default every GPU NVML sees.
* **Apple silicon** through ``sysctl``: the chip (``machdep.cpu.brand_string``, "Apple M3 Max"), the memory
  (``hw.memsize``) and the GPU memory limit when raised (``iogpu.wired_limit_mb``, 0 = macOS's default).
* **the CPU** through /proc/cpuinfo and psutil: model, cores, RAM, ISA features and the calibration family
  (cpu-x86-avx512 / -avx2 / -sse4, cpu-arm-neon, cpu-riscv, cpu-unknown), plus a bandwidth probe.

Bandwidth probe: a copy of a ``probe_bytes`` buffer (default 256 MiB, filled first so no page is the shared
zero page) into another on every logical CPU the process may use at once (``ctypes.memmove`` slices, one per
thread: the standard library, GIL released); one pass moves 2 x probe_bytes (read + write); best of
``repeats``; in GB/s = 10^9 B/s.  A measured lower bound of what a streaming kernel sees, not the datasheet
peak.  One thread's copy, the probe before 2026-12-05, stays far below the bandwidth of a many-core,
many-channel host (``bandwidth_probe_gbs``).

``detect_hardware()`` maps what it finds to the catalog (an NVML name through ``NVML_NAME_TO_ID`` or a slug of
it; an Apple chip through its name, with the machine's own memory and wired limit; a CPU model through
``cpu_catalog_candidates``) and otherwise builds a spec from the detected figures (a GPU outside the catalog
has no bandwidth or TFLOPS: the report says so and ``--bandwidth-gbs`` / ``--tflops`` give them).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache

from estimator.specs import GIB, HardwareSpec, SpecError

# NVML name (as nvidia-smi prints it) -> hardware catalog id.  Unlisted names fall back to a slug of the name.
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

PROBE_BYTES = 256 * 2**20  # bytes of each of the probe's two buffers
PROBE_REPEATS = 5


def probe_threads() -> int:
    """The threads the bandwidth probe copies on: every logical CPU this process may run on (its affinity
    mask where the OS has one, else ``os.cpu_count()``), as llama.cpp's CPU backend streams a decode step's
    weights on every core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def probe_description(threads: int | None = None) -> str:
    """How ``bandwidth_probe_gbs`` measured (stored with every detected record as ``bandwidth_probe``)."""
    n = threads or probe_threads()
    return (f"memmove copy on {n} thread{'s' if n != 1 else ''} at once, best of {PROBE_REPEATS}, "
            f"2 x {PROBE_BYTES // 2**20} MiB moved per pass, GB = 1e9 B")  # fmt: skip


@dataclass(frozen=True)
class CpuInfo:
    model_name: str
    machine: str  # platform.machine(): x86_64, aarch64, ...
    physical_cores: int | None
    logical_cpus: int | None
    ram_bytes: int | None
    isa: tuple[str, ...]  # sorted subset of: amx, avx2, avx512, avx512_bf16, fma, f16c, neon, sve, ...
    family: str
    clock_ghz: float | None = None  # maximum core clock, 10^9 Hz (``cpu_clock``); None: not known
    clock_source: str = ""  # how clock_ghz was found (``cpu_clock``)


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
class AppleInfo:
    """An Apple silicon Mac: chip name ("Apple M3 Max"), memory (bytes), ``iogpu.wired_limit_mb`` (0 = the
    macOS default)."""

    chip: str
    memory_bytes: int
    wired_limit_mb: int


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
    clock, clock_source = cpu_clock()
    return CpuInfo(
        model_name=model,
        machine=machine,
        physical_cores=psutil.cpu_count(logical=False),
        logical_cpus=psutil.cpu_count(logical=True),
        ram_bytes=int(psutil.virtual_memory().total),
        isa=isa,
        family=cpu_family(machine, isa),
        clock_ghz=clock,
        clock_source=clock_source,
    )


CLOCK_CPUFREQ = "cpufreq maximum"
CLOCK_NOMINAL = "reported current frequency (a virtual machine's nominal clock, below its boost)"


def cpu_clock(measure: Callable[[], float | None] | None = None) -> tuple[float | None, str]:
    """(GHz, how it was found) of the CPU's maximum clock, 10^9 Hz, the figure the catalog's CPUs carry (their
    maximum boost): psutil's cpufreq maximum; else, where the OS gives no maximum (a virtual machine), the
    clock a busy core runs at, measured (``estimator.catalog.clockprobe``; ``measure`` replaces it in tests);
    else the current frequency the OS reports (a virtual machine's /proc/cpuinfo gives the host's nominal
    clock: the build VM says 2.596 GHz and runs at ~3.6); (None, "") when nothing is known."""
    import psutil

    from estimator.catalog.clockprobe import measure_clock_ghz, probe_description

    try:
        freq = psutil.cpu_freq()
    except (OSError, RuntimeError, NotImplementedError):
        freq = None
    if freq is not None and freq.max and freq.max > 0:
        return round(freq.max / 1e3, 3), CLOCK_CPUFREQ
    ghz = (measure or measure_clock_ghz)()
    if ghz:
        return ghz, f"measured: {probe_description()}"
    if freq is not None and freq.current and freq.current > 0:
        return round(freq.current / 1e3, 3), CLOCK_NOMINAL
    return None, ""


def bandwidth_probe_gbs(
    probe_bytes: int = PROBE_BYTES, repeats: int = PROBE_REPEATS, threads: int | None = None
) -> float:
    """Host memory copy bandwidth in GB/s (10^9 B/s): the best of ``repeats`` passes, each copying one buffer
    of ``probe_bytes`` into another on ``threads`` threads at once (default ``probe_threads()``: every
    logical CPU the process may use), each thread its own contiguous slice; one pass moves 2 x probe_bytes
    (read + write).

    All cores, because one core cannot draw a server's memory bandwidth: a one-thread copy on a many-channel
    DDR5 host reaches a small share of what llama.cpp's decode, which streams its weights on every core,
    reads.  ``ctypes.memmove`` releases the GIL, so the slices copy concurrently with the standard library
    only.  Each thread writes its own slices once before the timed passes (page faults are not bandwidth).

    Limits: the buffers are 2 x 256 MiB whatever the host, so a part whose last-level cache nears that size
    (AMD's stacked-cache server parts) reads partly from cache and the figure is high (``--bandwidth-gbs``
    gives the datasheet's), and with dozens of threads the dispatch of the slices is a few percent of a pass.
    Until 2026-12-05 the probe was one thread's copy; records keep the description of the probe they ran
    (``bandwidth_probe``), and a host's calibrated speed stays relative to the probe its own runs carried
    (``estimator.physics.coefficients.bandwidth_basis``)."""
    return _two_buffer_probe(ctypes.memmove, probe_bytes, repeats, threads)


def read_bandwidth_probe_gbs(
    probe_bytes: int = PROBE_BYTES, repeats: int = PROBE_REPEATS, threads: int | None = None
) -> float | None:
    """Host memory *read* bandwidth in GB/s (10^9 B/s), recorded beside the copy probe and used by nothing
    yet: the C library's ``memcmp`` of two equal buffers of ``probe_bytes`` on ``threads`` threads, each its
    own slice, nothing written; one pass reads 2 x probe_bytes; best of ``repeats``.  None where the C
    library cannot be loaded.

    Why: a decode step's matrix-vector products only read, and the copy probe need not say what loads see.
    On the Xeon guest of 2026-12-07 it first read 18 GB/s against a 27 GB/s copy, then 26-27 GB/s in later
    runs (the first reading a one-off): that host's slow llama.cpp decode is its dot-product kernels, not its
    memory (docs/calibration.md "--no-repack as a record setting").  Whether the read figure says anything the
    copy does not is open until hosts of each kind have recorded it."""
    read = _memcmp()
    return None if read is None else _two_buffer_probe(read, probe_bytes, repeats, threads)


def _memcmp() -> Callable[[int, int, int], object] | None:
    """The C library's memcmp as (a, b, nbytes) -> int; None where no C library loads."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        memcmp = libc.memcmp
    except (OSError, AttributeError):
        return None
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    memcmp.restype = ctypes.c_int
    return memcmp


def _two_buffer_probe(
    op: Callable[[int, int, int], object], probe_bytes: int, repeats: int, threads: int | None
) -> float:
    """GB/s of ``op`` over two buffers of ``probe_bytes`` (2 x probe_bytes per pass), best of ``repeats``
    passes, each of ``threads`` threads on its own contiguous slice; both buffers hold the same bytes (a
    ``memcmp`` then reads them to the end).  ctypes calls release the GIL, so the slices run concurrently."""
    n = max(1, int(probe_bytes))
    t = max(1, min(int(threads or probe_threads()), n))
    src = (ctypes.c_char * n)()
    dst = (ctypes.c_char * n)()
    base_src, base_dst = ctypes.addressof(src), ctypes.addressof(dst)
    edges = [n * k // t for k in range(t + 1)]
    slices = [(edges[k], edges[k + 1] - edges[k]) for k in range(t)]

    def fill(piece: tuple[int, int]) -> None:  # written, so no page is the shared zero page
        ctypes.memset(base_src + piece[0], 1, piece[1])
        ctypes.memset(base_dst + piece[0], 1, piece[1])

    def run(piece: tuple[int, int]) -> None:
        op(base_dst + piece[0], base_src + piece[0], piece[1])

    best = float("inf")
    with ThreadPoolExecutor(max_workers=t) as pool:
        list(pool.map(fill, slices))
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            list(pool.map(run, slices))
            best = min(best, time.perf_counter() - t0)
    return 2 * n / best / 1e9


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


def detect_gpus(indices: Callable[[object], Iterable[int]] | None = None) -> tuple[GpuInfo, ...]:
    """Every NVIDIA GPU NVML sees (``indices(pynvml)`` picks which; default all, in NVML / PCI order); ()
    without pynvml or a driver.  Each field is guarded: a GPU NVML cannot open is left out, detection goes
    on."""
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
        count = int(guarded(pynvml.nvmlDeviceGetCount) or 0)
        which = indices(pynvml) if indices is not None else range(count)
        out = []
        for i in which:
            h = guarded(lambda i=i: pynvml.nvmlDeviceGetHandleByIndex(i))
            if h is None:
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


def gpu_catalog_candidates(name: str, memory_bytes: int | None) -> list[str]:
    """Catalog id guesses for an NVML device name: the explicit table, then a slug of the name (NVML's
    "... Laptop GPU" is the catalog's "-laptop": "NVIDIA GeForce RTX 4060 Laptop GPU" -> rtx-4060-laptop)."""
    out = [NVML_NAME_TO_ID[name]] if name in NVML_NAME_TO_ID else []
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "").replace("geforce", "")).strip("-")
    slug = re.sub(r"-laptop-gpu$", "-laptop", slug)
    if slug:
        out.append(slug)
        if memory_bytes:
            out.append(f"{slug}-{round(memory_bytes / GIB)}gb")
    return out


# --- Apple ----------------------------------------------------------------------------------------------
def _sysctl(name: str) -> str | None:
    """``sysctl -n name`` (None when the key or the command is missing)."""
    try:
        p = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def detect_apple(sysctl: Callable[[str], str | None] = _sysctl) -> AppleInfo | None:
    """The Apple silicon chip, memory and GPU wired limit of this Mac; None elsewhere."""
    if platform.system() != "Darwin" and sysctl is _sysctl:
        return None
    chip = sysctl("machdep.cpu.brand_string") or ""
    mem = sysctl("hw.memsize")
    if not chip.startswith("Apple") or not (mem or "").isdigit():
        return None
    wired = sysctl("iogpu.wired_limit_mb") or "0"
    return AppleInfo(chip=chip, memory_bytes=int(mem), wired_limit_mb=int(wired) if wired.isdigit() else 0)


# --- catalog mapping ------------------------------------------------------------------------------------
def _catalog(ids: Iterable[str]) -> HardwareSpec | None:
    from estimator.catalog.data import get_hardware

    for hid in ids:
        try:
            return get_hardware(hid)
        except SpecError:
            continue
    return None


def apple_spec(info: AppleInfo) -> tuple[HardwareSpec, tuple[str, ...]]:
    """The catalog entry of an Apple chip with the machine's own memory and wired limit."""
    from estimator.catalog.data import find_hardware
    from estimator.catalog.resolve import override_hardware

    slug = re.sub(r"[^a-z0-9]+", "-", info.chip.lower()).strip("-")  # "apple-m3-max"
    spec = _catalog([slug])
    if spec is None:
        try:
            spec = _catalog([find_hardware(info.chip)[0]["id"]])
        except SpecError:
            spec = None
    if spec is None:
        raise SpecError(
            f"detected {info.chip}, which the hardware catalog does not list; use --hardware custom"
        )
    mem_gib = info.memory_bytes / GIB
    spec = override_hardware(spec, memory_gib=mem_gib, wired_limit_mb=info.wired_limit_mb or None)
    return spec, (f"detected {info.chip} with {mem_gib:g} GiB (catalog {spec.id})",)


def detected_gpu_spec(
    g: GpuInfo,
    family: str,
    host_bandwidth_gbs: float | None = None,
    status: str = "unverified",
    source: str = "",
    measured_as: str = "",
) -> HardwareSpec:
    """A spec of a GPU outside the catalog, from what NVML says: its memory; no bandwidth or TFLOPS.
    ``measured_as``: the device key of this host's own runs (``host_device_key``)."""
    return HardwareSpec(
        id=f"detected-{re.sub(r'[^a-z0-9]+', '-', g.name.lower()).strip('-')}",
        name=g.name,
        vendor="NVIDIA",
        family=family,
        kind="gpu",
        memory_bytes=g.memory_bytes,
        bandwidth_gbs=None,
        bf16_tflops=None,
        host_bandwidth_gbs=host_bandwidth_gbs,
        measured_as=measured_as,
        status=status,
        source=source,
    )


def host_device_key(host: str, device_name: str, family: str = "") -> str:
    """The device key of a host outside the catalog, as its run records carry it (``"<host>:<device name>
    [<family>]"``; calibration.dataset.device_key): what ``HardwareSpec.measured_as`` matches against the fit.

    The family is part of the key because neither the host name nor a virtual machine's CPU name tells two
    machines apart: cloud VMs are called "vm" and report their CPU as "AMD EPYC" whether it is a Zen 3
    part with AVX2 or a Zen 4 part with AVX-512 (the ISA family, ``CpuInfo.family``, differs)."""
    key = f"{host}:{device_name}" if host else device_name
    return f"{key} [{family}]" if family else key


def detected_cpu_spec(
    cpu: CpuInfo,
    bandwidth_gbs: float | None,
    family: str,
    status: str = "unverified",
    source: str = "",
    measured_as: str = "",
) -> HardwareSpec:
    """A spec of a CPU outside the catalog: memory = RAM, bandwidth = the copy probe (GB/s; also its
    ``bandwidth_measured_gbs``: an achieved figure, not a datasheet peak), no TFLOPS: cores and clock give
    the ``cpu_size`` covariate of its GEMM rate (estimator.physics.covariates).  ``measured_as``: the device
    key of this host's own runs (``host_device_key``), so the host's calibrated effects answer when the
    coefficients hold them."""
    name = cpu.model_name
    return HardwareSpec(
        id="detected-cpu",
        name=name,
        vendor="AMD" if "AMD" in name else "Intel" if "Intel" in name else "",
        family=family,
        kind="cpu",
        memory_bytes=cpu.ram_bytes,
        bandwidth_gbs=bandwidth_gbs,
        bf16_tflops=None,
        host_bandwidth_gbs=bandwidth_gbs,
        bandwidth_measured_gbs=bandwidth_gbs,  # the probe is an achieved bandwidth (covariate bw_measured)
        cpu_cores=cpu.physical_cores or None,
        cpu_clock_ghz=cpu.clock_ghz,
        cpu_isa=tuple(cpu.isa),
        measured_as=measured_as,
        status=status,
        source=source,
    )


def gpu_spec(gpus: tuple[GpuInfo, ...]) -> tuple[HardwareSpec, tuple[str, ...]]:
    """The catalog entry of GPU 0, else a spec of what NVML says (no bandwidth or TFLOPS)."""
    g = gpus[0]
    names = sorted({x.name for x in gpus})
    what = f"{len(gpus)} x {g.name}" if len(names) == 1 else f"{len(gpus)} GPUs ({', '.join(names)})"
    spec = _catalog(gpu_catalog_candidates(g.name, g.memory_bytes))
    if spec is not None:
        return spec, (f"detected {what} (catalog {spec.id}); driver {g.driver}",)
    spec = detected_gpu_spec(
        g,
        g.family,
        status="detected",
        source="detected by fitbench (NVML)",
        measured_as=host_device_key(socket.gethostname(), g.name, g.family),
    )
    return spec, (
        f"detected {what}, not in the hardware catalog: memory from NVML; no bandwidth or TFLOPS figure "
        "(--bandwidth-gbs and --tflops give them)",
    )


def cpu_spec(cpu: CpuInfo, bandwidth_gbs: float | None) -> tuple[HardwareSpec, tuple[str, ...]]:
    """The catalog entry of this CPU, else a spec from detection: memory = RAM, bandwidth = the probe."""
    spec = _catalog(cpu_catalog_candidates(cpu.model_name))
    probe = f"{bandwidth_gbs:.1f} GB/s measured ({probe_description()})" if bandwidth_gbs else "not measured"
    if spec is not None:
        return spec, (f"detected CPU {cpu.model_name} (catalog {spec.id}); copy bandwidth {probe}",)
    ram = (cpu.ram_bytes or 0) / GIB
    spec = detected_cpu_spec(
        cpu,
        bandwidth_gbs,
        cpu.family,
        "detected",
        "detected by fitbench (/proc/cpuinfo, psutil, copy probe)",
        measured_as=host_device_key(socket.gethostname(), cpu.model_name, cpu.family),
    )
    clock = f"{cpu.clock_ghz:.2f} GHz ({cpu.clock_source})" if cpu.clock_ghz else "not known"
    return spec, (
        f"detected CPU {cpu.model_name} ({cpu.family}, {ram:.1f} GiB RAM), not in the hardware catalog; "
        f"bandwidth {probe}; clock {clock}",
    )


@lru_cache(maxsize=1)
def detect_hardware(probe_bandwidth: bool = True) -> tuple[HardwareSpec, int, tuple[str, ...]]:
    """(spec, devices found, notes) of this machine: NVIDIA GPUs, else an Apple chip, else the CPU."""
    gpus = detect_gpus()
    if gpus:
        spec, notes = gpu_spec(gpus)
        return spec, len(gpus), notes
    apple = detect_apple()
    if apple is not None:
        spec, notes = apple_spec(apple)
        return spec, 1, notes
    cpu = detect_cpu()
    spec, notes = cpu_spec(cpu, bandwidth_probe_gbs() if probe_bandwidth else None)
    return spec, 1, notes


def with_notes(spec: HardwareSpec, notes: Iterable[str]) -> HardwareSpec:
    """``spec`` with ``notes`` before its own."""
    return replace(spec, notes=(*notes, *spec.notes))
