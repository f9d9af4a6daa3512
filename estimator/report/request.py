"""What a user asks for, checked and completed: the one entry the command line and the local page share.

``ReportRequest`` holds a report request as typed (ids, numbers, flags); ``make_report`` validates it, applies
the engine's defaults (its profile's quant and split), resolves the model and the hardware (a catalog id or
``custom`` figures) and builds the report (``estimator.physics.limits.validate_workload`` refuses a workload
the model cannot take).  Every refusal is a one-line SpecError (the CLI exits 2 with it, the
page answers 400).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import ENGINES, get_engine
from estimator.specs import GIB, HardwareSpec, SpecError, Workload

DEFAULT_CTX = 8192
# Latency objective of the serving section (means): MLPerf Inference's Llama-2-70B server scenario allows a
# 2 s TTFT (p99); 100 ms per output token is 10 tokens/s per client, about twice reading speed (MLPerf's
# TPOT limit there is 200 ms p99).
DEFAULT_SLO_TTFT_MS = 2000.0
DEFAULT_SLO_TPOT_MS = 100.0


def make_workload(
    engine: str = "llama.cpp",
    kv_dtype: str = "f16",
    ctx: int = DEFAULT_CTX,
    devices: int = 1,
    split: str | None = None,
    gpu_memory_utilization: float | None = None,
    **extra,
) -> Workload:
    """A Workload from user options: KV dtype lower-cased; the engine profile's split and reserved memory
    fraction when none is given."""
    profile = get_engine(engine)
    fraction = profile.memory_fraction if gpu_memory_utilization is None else gpu_memory_utilization
    return Workload(
        n_ctx=ctx,
        kv_dtype=kv_dtype.lower(),
        engine=engine,
        n_devices=devices,
        split=split or profile.default_split,
        gpu_memory_utilization=fraction,
        **extra,
    )


def resolve_device(
    hardware: str,
    memory_gib: float | None = None,
    bandwidth_gbs: float | None = None,
    tflops: float | None = None,
    family: str | None = None,
) -> HardwareSpec:
    """A catalog device, or ``custom`` from the given figures (GiB, 10^9 B/s, 10^12 FLOP/s)."""
    from estimator.catalog.resolve import resolve_hardware

    return resolve_hardware(
        hardware, memory_gib=memory_gib, bandwidth_gbs=bandwidth_gbs, tflops=tflops, family=family
    )


@dataclass(frozen=True)
class ReportRequest:
    """A report request as the user typed it (``python -m estimator report`` options, the page's parameters).

    quant / split / gpu_memory_utilization: None = the engine's default (its profile's ``default_quant`` /
    ``default_split`` / ``memory_fraction``);
    offload_gib in GiB (2^30 B); the custom-hardware figures apply with ``hardware="custom"``.
    """

    model: str
    hardware: str
    quant: str | None = None
    engine: str = "llama.cpp"
    kv_dtype: str = "f16"
    ctx: int = DEFAULT_CTX
    devices: int = 1
    split: str | None = None
    concurrency: int = 1
    offload_gib: float = 0.0
    n_cpu_moe: int = 0
    gpu_memory_utilization: float | None = None
    memory_gib: float | None = None
    bandwidth_gbs: float | None = None
    tflops: float | None = None
    family: str | None = None
    usd_per_hour: float | None = None
    hours_per_day: float = 4.0
    kwh_price: float = 0.15
    purchase_usd: float | None = None
    ft_rank: int = 16
    ft_seq_len: int = 2048
    ft_micro_batch: int = 1
    allow_overlong: bool = False
    coefficients: str | None = None
    # serving section: request lengths (tokens) and the latency objective (ms) of its operating point
    isl: int = 1024
    osl: int = 1024
    slo_ttft_ms: float = DEFAULT_SLO_TTFT_MS
    slo_tpot_ms: float = DEFAULT_SLO_TPOT_MS

    def workload(self) -> Workload:
        """The Workload of the request; SpecError for what the engine cannot run (its profile's check)."""
        if self.offload_gib < 0:
            raise SpecError(f"--offload-gib must be >= 0, got {self.offload_gib}")
        if self.engine not in ENGINES:
            raise SpecError(f"unknown engine {self.engine!r}; one of {', '.join(ENGINES)}")
        wl = make_workload(
            self.engine,
            self.kv_dtype,
            self.ctx,
            self.devices,
            self.split,
            self.gpu_memory_utilization,
            concurrency=self.concurrency,
            offload_bytes=int(round(self.offload_gib * GIB)),
            moe_offload_layers=self.n_cpu_moe,
        )
        get_engine(self.engine).check(wl)  # refuse what the engine cannot run rather than size it
        return wl


def make_report(req: ReportRequest, table=None):
    """Validate, resolve and build the report of ``req`` (an ``estimator.report.document.Report``).

    ``table``: a loaded coefficient table (default: ``req.coefficients``, else results/coefficients.json, else
    the shipped prior).  Raises SpecError (one line) for bad input.
    """
    from estimator.catalog.data import all_hardware
    from estimator.catalog.rates import load_cloud_rates
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.finetune import FinetuneConfig
    from estimator.physics.quant import get_quant
    from estimator.report.document import build_report
    from estimator.report.units import ReportOptions

    wl = req.workload()
    for name, v in (("--isl", req.isl), ("--osl", req.osl), ("--slo-ttft-ms", req.slo_ttft_ms),
                    ("--slo-tpot-ms", req.slo_tpot_ms)):  # fmt: skip
        if not v > 0 or v != v or v == float("inf"):
            raise SpecError(f"{name} must be a positive number, got {v}")
    model = resolve_model(req.model)
    hw = resolve_device(req.hardware, req.memory_gib, req.bandwidth_gbs, req.tflops, req.family)
    profile = get_engine(req.engine)
    quant = profile.weight_format(get_quant(req.quant or profile.default_quant))
    options = ReportOptions(
        usd_per_hour=req.usd_per_hour,
        hours_per_day=req.hours_per_day,
        kwh_price_usd=req.kwh_price,
        purchase_usd=req.purchase_usd,
        allow_overlong=req.allow_overlong,
        finetune=FinetuneConfig(rank=req.ft_rank, seq_len=req.ft_seq_len, micro_batch=req.ft_micro_batch),
        hardware_catalog=tuple(all_hardware()),
        rates=load_cloud_rates(),
        serving_isl=int(req.isl),
        serving_osl=int(req.osl),
        slo_ttft_s=req.slo_ttft_ms / 1000.0,
        slo_tpot_s=req.slo_tpot_ms / 1000.0,
    )
    table = table if table is not None else load_coefficients(req.coefficients)
    return build_report(model, hw, quant, wl, table, options)
