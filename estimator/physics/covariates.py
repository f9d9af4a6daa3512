"""Device covariates of the speed model: what a device's speed coefficients are regressed on.

Calibration fits every free speed parameter (``estimator.physics.coefficients.PARAMS``) as one model across
devices, families and backends, in the parameter's transformed space (``coefficients.to_eta``)::

    eta(device) = offset(shipped prior of the device kind) + sum_c beta_c x_c(device, engine, backend)
                  + u_family + v_device

so a device nobody measured inherits from devices *like it* (same memory technology, backend, vendor, kind,
bandwidth class, die count), not only from its family mean; ``u`` / ``v`` are the family / device random
effects (zero for a family / device without data).  This module computes the x_c; the coefficients file
(schema 2) carries beta, u and v.  Each parameter regresses on the covariate *groups* its table row names
(``Param.covariates``).

Groups and the covariates they give (name: value; reference level in brackets has no covariate):

* ``engine``: ``engine=<e>@<cpu|accel>`` = 1 for an engine other than llama.cpp, per CPU / accelerator (an
  engine measured only on a CPU says nothing about its GPU efficiency);
* ``engine_vendor``: ``engine=<e>@<vendor>`` (vendor in lower case; ``engine=<e>@cpu`` on a CPU) = 1 for an
  engine other than llama.cpp: the serving rows' engine term.  An engine's accelerator builds differ by vendor
  (vLLM and SGLang run other attention and MoE kernels on ROCm than on CUDA), so SGLang measured on an
  MI300X says little about SGLang on a B200: one shared ``engine=sglang@accel`` term carried the MI300X
  rows' misfit to NVIDIA parts (docs/calibration.md "Serving at concurrency");
* ``backend``: ``backend=<b>`` = 1 for a llama.cpp backend other than [CUDA] (ROCm, Vulkan, Metal, CPU, SYCL,
  OpenCL): launch/sync overheads and kernel quality per backend;
* ``maturity``: ``maturity=<developing|experimental>`` = 1 for a llama.cpp backend other than [CUDA] whose
  support-table ``backend`` row (estimator/data/support.csv, per device family) is not ``mature``: what
  Vulkan, SYCL, CANN, OpenCL share, so a backend nobody measured inherits it (calibration.maturity measures
  that by leaving one backend out);
* ``vendor``: ``vendor=<v>`` = 1 for a vendor other than [NVIDIA];
* ``kind``: ``kind=<k>`` = 1 for unified / cpu / npu (reference [gpu]);
* ``mem``: memory technology from the catalog's ``memory_type`` (its source is the catalog row):
  ``mem=hbm`` (HBM*), ``mem=lpddr`` (LPDDR*, unified), ``mem=ddr`` (DDR*), reference [GDDR];
* ``ln_bw``: ln(bandwidth_gbs / 500): very fast memory is harder to saturate with one stream's kernels
  (datacenter HBM parts vs consumer GDDR; decode ``bw_eff``, and CPU prefill rates);
* ``cpu_size``: ``ln_cpu_size`` = ln(cores x GHz / 24) of a CPU whose core count is catalogued
  (tools/catalog/hardware_covariates.csv, with sources) or detected: what a CPU's GEMM rate scales with
  (a 2-core VM against a 32-core Threadripper); prior coefficient 1 (the rate in proportion to cores x
  clock);
* ``multi_die``: 1 when the device is several compute dies presented as one (``n_dies`` > 1: Apple Ultra,
  Blackwell, MI300-series; tools/catalog/hardware_covariates.csv with sources);
* ``bw_measured``: ln(bandwidth_measured_gbs / bandwidth_gbs / 0.85) where an achievable bandwidth is
  published, else 0 (0.85: the typical streaming fraction of shared/reference/hardware.md);
* ``year``: (release year - 2020) / 4 from the catalog (0 when unknown): llama.cpp's kernels are written for
  recent architectures (tensor cores, dp4a, int8 MMQ), so a 2014 Kepler reaches a smaller share of its
  datasheet than a 2022 Ada;
* ``power``: ``ln_w_per_tflops`` = ln(tdp_w / peak TFLOPS / 1.75) of a discrete GPU (kind gpu) whose board
  power is catalogued, peak = ``datasheet_tflops`` of the engine's backend: a datasheet rate is quoted at the
  boost clock, which a part with little power per TFLOPS (L40S 0.95 W, RTX 5000 Ada 0.96 W, against an RTX
  4090's 1.36 W at its FP16-accumulate rate) cannot hold through a long GEMM; unified chips (board power
  shared with the CPU) and CPUs take 0.
* ``cpu_fallback``: ``cpu_gemm_fallback`` = 1 on a CPU whose ISA family the engine profile lists in
  ``cpu_gemm_fallback`` (vLLM's BF16 GEMMs on an AVX2-only x86 CPU), on prefill ``flops_abs_tflops``;
* ``cpu_matrix``: ``cpu_matrix_gemm`` = 1 on a CPU with an ISA feature (``HardwareSpec.cpu_isa``) the engine
  profile lists in ``cpu_matrix_gemm`` (vLLM's oneDNN BF16 GEMMs and llama.cpp's AMX weight buffer on Intel
  AMX), on prefill ``flops_abs_tflops``; a llama.cpp record measured with ``--no-repack`` keeps it and takes
  the ``settings`` term too (its weights were not in the AMX buffer);
* ``build``: ``build=2024`` = 1 for a record of a llama.cpp build of 2024 (calibration.dataset.record_era),
  on prefill ``flops_eff`` and decode ``build_scale`` (a factor on the whole step): a covariate of the
  record, not of the device, which calibration sets (calibration.hierarchy.build_covariates) and this module
  never does: the estimator predicts current builds, the reference level.
* ``settings``: ``setting=<name>`` = 1 for a record measured with a non-default engine option that takes the
  engine off its default kernels (the engine profile's ``speed_settings``: llama.cpp's ``--no-repack``,
  ``setting=no_repack``), on decode ``build_scale`` and the CPU prefill rate ``flops_abs_tflops``: a record
  covariate like ``build``, set by calibration (calibration.dataset.record_settings), never by this module.

Units: GB/s = 10^9 B/s, TFLOPS = 10^12 FLOP/s.  Pure functions of the specs; no numpy.
"""

from __future__ import annotations

import math

from estimator.engines import ENGINES, get_engine
from estimator.specs import HardwareSpec

GROUPS = (
    "engine",
    "engine_vendor",
    "backend",
    "maturity",
    "vendor",
    "kind",
    "mem",
    "ln_bw",
    "cpu_size",
    "multi_die",
    "bw_measured",
    "year",
    "power",
    "build",
    "settings",
    "cpu_fallback",
    "cpu_matrix",
)
REFERENCE_ENGINE = "llama.cpp"
REFERENCE_BACKEND = "CUDA"
REFERENCE_VENDOR = "nvidia"
TYPICAL_STREAM_FRACTION = 0.85
BW_SCALE_GBS = 500.0
YEAR_CENTRE, YEAR_SCALE = 2020, 4.0
# W of board power per dense TFLOPS at which ``ln_w_per_tflops`` = 0: about the median of the catalogued
# discrete GPUs at llama.cpp's GEMM rate (98 of them, 2026-12-06), so a GPU of unknown board power sits there
POWER_SCALE_W_PER_TFLOPS = 1.75
MATURE = "mature"

# Backend names as records spell them -> one name per backend.
_BACKEND_NAMES = {"hip": "ROCm", "rocm": "ROCm", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal",
                  "cpu": "CPU", "sycl": "SYCL", "opencl": "OpenCL"}  # fmt: skip


def normalise_backend(backend: str | None) -> str:
    """One spelling per backend ('HIP' and 'rocm' -> 'ROCm'); '' stays ''; unknown names kept as given."""
    b = (backend or "").strip()
    return _BACKEND_NAMES.get(b.lower(), b)


def default_backend(hardware: HardwareSpec, engine: str) -> str:
    """The backend a report assumes when the user names none: the engine profile's choice for the device."""
    if engine in ENGINES:
        return get_engine(engine).backend_for(hardware)
    return ""


def effective_backend(hardware: HardwareSpec, engine: str, backend: str | None) -> str:
    """The backend a (device, engine, backend) unit runs: ``backend`` in one spelling, or the engine
    profile's default for the device when none is given."""
    return normalise_backend(backend) or default_backend(hardware, engine)


def less_mature(hardware: HardwareSpec, engine: str, backend: str | None) -> str:
    """'developing' | 'experimental' for a llama.cpp backend other than the reference whose support-table
    maturity is not mature ('' otherwise): the ``maturity`` covariate's level."""
    backend = effective_backend(hardware, engine, backend)
    if engine != REFERENCE_ENGINE or not backend or backend == REFERENCE_BACKEND:
        return ""
    maturity = backend_maturity(hardware, engine, backend)
    return "" if maturity in (MATURE, "") else maturity


def backend_maturity(hardware: HardwareSpec, engine: str, backend: str) -> str:
    """The support table's maturity of the engine's backend on the device's family (``backend`` rows:
    mature | developing | experimental), '' when the table does not list it."""
    from estimator.catalog import support as table

    fact = table.find(engine, backend, hardware.family, "backend")
    return fact.maturity if fact is not None else ""


def memory_class(hardware: HardwareSpec) -> str:
    """hbm | gddr | lpddr | ddr | unknown from the catalog's memory_type text (HBM2e, GDDR6X, LPDDR5X ...)."""
    t = (hardware.memory_type or "").lower()
    for cls in ("hbm", "gddr", "lpddr", "ddr"):
        if t.startswith(cls) or f" {cls}" in t:
            return cls
    return "unknown"


def covariates(hardware: HardwareSpec, engine: str, backend: str | None, groups) -> dict[str, float]:
    """The non-zero covariates of the requested groups for one device, engine and backend (see the module
    doc).  ``backend`` None or '' -> the engine profile's default for the device."""
    kind = hardware.kind or "gpu"
    maturity = less_mature(hardware, engine, backend) if "maturity" in groups else ""
    backend = effective_backend(hardware, engine, backend)
    x: dict[str, float] = {}
    for g in groups:
        if g == "engine" and engine != REFERENCE_ENGINE:
            x[f"engine={engine}@{'cpu' if kind == 'cpu' else 'accel'}"] = 1.0
        elif g == "engine_vendor" and engine != REFERENCE_ENGINE:
            where = "cpu" if kind == "cpu" else (hardware.vendor or REFERENCE_VENDOR).lower()
            x[f"engine={engine}@{where}"] = 1.0
        elif g == "backend" and engine == REFERENCE_ENGINE and backend and backend != REFERENCE_BACKEND:
            x[f"backend={backend}"] = 1.0
        elif g == "maturity" and maturity:
            x[f"maturity={maturity}"] = 1.0
        elif g == "vendor" and (hardware.vendor or "").lower() not in (REFERENCE_VENDOR, ""):
            x[f"vendor={hardware.vendor}"] = 1.0
        elif g == "kind" and kind != "gpu":
            x[f"kind={kind}"] = 1.0
        elif g == "mem":
            cls = memory_class(hardware)
            if cls not in ("gddr", "unknown"):
                x[f"mem={cls}"] = 1.0
        elif g == "ln_bw" and hardware.bandwidth_gbs:
            x["ln_bw"] = math.log(float(hardware.bandwidth_gbs) / BW_SCALE_GBS)
        elif g == "cpu_size" and cpu_core_ghz(hardware):
            x["ln_cpu_size"] = math.log(cpu_core_ghz(hardware) / CPU_SIZE_SCALE)
        elif g == "multi_die" and (hardware.n_dies or 1) > 1:
            x["multi_die"] = 1.0
        elif g == "bw_measured" and hardware.bandwidth_measured_gbs and hardware.bandwidth_gbs:
            frac = float(hardware.bandwidth_measured_gbs) / float(hardware.bandwidth_gbs)
            x["bw_measured"] = math.log(frac / TYPICAL_STREAM_FRACTION)
        elif g == "power" and kind == "gpu" and hardware.tdp_w:
            peak = datasheet_tflops(hardware, False, engine, backend)
            if peak:
                x["ln_w_per_tflops"] = math.log(float(hardware.tdp_w) / peak / POWER_SCALE_W_PER_TFLOPS)
        elif g == "cpu_fallback" and kind == "cpu" and engine in ENGINES:
            if get_engine(engine).cpu_gemm_fallback_reason(hardware.family):
                x["cpu_gemm_fallback"] = 1.0
        elif g == "cpu_matrix" and kind == "cpu" and engine in ENGINES:
            if get_engine(engine).cpu_matrix_gemm_reason(hardware.cpu_isa):
                x["cpu_matrix_gemm"] = 1.0
        elif g == "year" and hardware.year:
            x["year"] = (int(hardware.year) - YEAR_CENTRE) / YEAR_SCALE
    return x


def shader_gemm_reason(hardware: HardwareSpec, engine: str, backend: str | None = "") -> str:
    """Why the engine's backend (any spelling; '' or None: the profile's default for the device) runs its
    GEMMs on this device's shader ALUs (the profile's ``vector_gemm``), "" when it uses the matrix engines."""
    if engine not in ENGINES:
        return ""
    used = effective_backend(hardware, engine, backend)
    return get_engine(engine).vector_gemm_reason(used, hardware.family)


def datasheet_tflops(
    hardware: HardwareSpec, fp8: bool = False, engine: str = "", backend: str | None = ""
) -> float | None:
    """Dense TFLOPS the engine's GEMMs run at on this device (10^12 FLOP/s), None when not catalogued.

    * a backend that does not issue the device's matrix instructions (the engine profile's ``vector_gemm``:
      llama.cpp's Vulkan on Intel Arc A-series) with a catalogued shader rate: ``vector_fp16_tflops``
      (``backend`` '' or None: the engine profile's default for the device);
    * FP8 weights: the FP8 rate where the device has one.
    * an engine whose quantized GEMMs run on the int8 / fp16-accumulate path (profile ``int8_gemm``:
      llama.cpp) on NVIDIA with a catalogued INT8 rate: int8_tops / 2.  llama.cpp's CUDA GEMMs are cuBLAS with
      CUBLAS_COMPUTE_16F (F16 weights, and quants dequantized to F16) or int8 MMQ; on Turing and later every
      SKU's dense INT8 rate is twice its FP16-accumulate rate.  The bf16 column is the FP32-accumulate rate,
      which GeForce parts run at half speed (shared/reference/hardware.md), so it would understate GeForce
      cards 2x; on data-centre / workstation parts int8 / 2 equals the bf16 column.
    * otherwise the datasheet BF16 rate.
    """
    if hardware.vector_fp16_tflops and shader_gemm_reason(hardware, engine, backend):
        return float(hardware.vector_fp16_tflops)
    if fp8 and hardware.fp8_tflops:
        return float(hardware.fp8_tflops)
    nvidia = (hardware.vendor or "").lower() == "nvidia"
    if engine and get_engine(engine).int8_gemm and nvidia and hardware.int8_tops:
        return float(hardware.int8_tops) / 2.0
    if hardware.bf16_tflops:
        return float(hardware.bf16_tflops)
    return None


# the clock a CPU with a known core count but no clock figure is taken at, 10^9 Hz
CPU_DEFAULT_CLOCK_GHZ = 3.0
# core-GHz of the covariate's reference CPU (``ln_cpu_size`` = 0): 8 cores at 3 GHz
CPU_SIZE_SCALE = 24.0
# its core count: where a CPU of unknown cores stands (what the report / page options default to)
CPU_REFERENCE_CORES = int(CPU_SIZE_SCALE / CPU_DEFAULT_CLOCK_GHZ)


def cpu_core_ghz(hardware: HardwareSpec) -> float | None:
    """cpu_cores x cpu_clock_ghz (CPU_DEFAULT_CLOCK_GHZ when the clock is unknown) of a CPU, 10^9 core-cycles
    per second; None for other kinds and for a CPU of unknown core count."""
    if hardware.kind != "cpu" or not hardware.cpu_cores:
        return None
    return hardware.cpu_cores * (hardware.cpu_clock_ghz or CPU_DEFAULT_CLOCK_GHZ)
