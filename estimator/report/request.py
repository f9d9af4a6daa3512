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
from estimator.specs import GIB, HardwareSpec, ModelSpec, SpecError, Workload
from estimator.validate import check_number

DEFAULT_CTX = 8192
# ReportRequest fields that are numbers -> (their bound in estimator.validate.BOUNDS, the option naming them)
_NUMBERS = {
    "ctx": ("ctx", "--ctx"),
    "devices": ("devices", "--devices"),
    "concurrency": ("concurrency", "--concurrency"),
    "offload_gib": ("offload_gib", "--offload-gib"),
    "n_cpu_moe": ("n_cpu_moe", "--n-cpu-moe"),
    "gpu_memory_utilization": ("gpu_memory_utilization", "--gpu-memory-utilization"),
    "memory_gib": ("memory_gib", "--memory-gib"),
    "bandwidth_gbs": ("bandwidth_gbs", "--bandwidth-gbs"),
    "tflops": ("tflops", "--tflops"),
    "usd_per_hour": ("usd_per_hour", "--usd-per-hour"),
    "hours_per_day": ("hours_per_day", "--hours-per-day"),
    "kwh_price": ("kwh_price", "--kwh-price"),
    "purchase_usd": ("purchase_usd", "--purchase-usd"),
    "ft_rank": ("ft_rank", "--ft-rank"),
    "ft_seq_len": ("ft_seq_len", "--ft-seq-len"),
    "ft_micro_batch": ("ft_micro_batch", "--ft-micro-batch"),
}


def default_context(model: ModelSpec) -> tuple[int, str | None]:
    """The context a report sizes when the user gives none: DEFAULT_CTX, or the model's own maximum when that
    is smaller (a GGUF trained at 2,048 tokens is sized at 2,048, not refused), with the note saying so."""
    if 0 < model.max_context < DEFAULT_CTX:
        return model.max_context, (
            f"context: sized at the model's maximum of {model.max_context:,} tokens (the default "
            f"{DEFAULT_CTX:,} is above it; choose another with --ctx)"
        )
    return DEFAULT_CTX, None


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
    ``default_split`` / ``memory_fraction``); ctx None = ``default_context`` of the model;
    every number must be inside its ``estimator.validate.BOUNDS`` range (``check``);
    offload_gib in GiB (2^30 B); the custom-hardware figures apply with ``hardware="custom"``.
    """

    model: str
    hardware: str
    quant: str | None = None
    engine: str = "llama.cpp"
    kv_dtype: str = "f16"
    ctx: int | None = None  # None: default_context(model)
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

    def check(self) -> None:
        """SpecError naming the option for a number that is not finite or outside its range (the CLI's parser
        checks the same table; this serves the page and direct callers)."""
        for field_name, (rule, option) in _NUMBERS.items():
            value = getattr(self, field_name)
            if value is not None:
                check_number(value, rule, option)

    def workload(self, ctx: int | None = None) -> Workload:
        """The Workload of the request (``ctx`` when the request leaves it to the model); SpecError for a
        number out of range and for what the engine cannot run (its profile's check)."""
        self.check()
        if self.engine not in ENGINES:
            raise SpecError(f"unknown engine {self.engine!r}; one of {', '.join(ENGINES)}")
        wl = make_workload(
            self.engine,
            self.kv_dtype,
            self.ctx if self.ctx is not None else (ctx or DEFAULT_CTX),
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

    req.check()
    model = resolve_model(req.model)
    ctx, ctx_note = (req.ctx, None) if req.ctx is not None else default_context(model)
    wl = req.workload(ctx)
    hw = resolve_device(req.hardware, req.memory_gib, req.bandwidth_gbs, req.tflops, req.family)
    quant = get_quant(req.quant or get_engine(req.engine).default_quant)
    options = ReportOptions(
        usd_per_hour=req.usd_per_hour,
        hours_per_day=req.hours_per_day,
        kwh_price_usd=req.kwh_price,
        purchase_usd=req.purchase_usd,
        allow_overlong=req.allow_overlong,
        finetune=FinetuneConfig(rank=req.ft_rank, seq_len=req.ft_seq_len, micro_batch=req.ft_micro_batch),
        hardware_catalog=tuple(all_hardware()),
        rates=load_cloud_rates(),
        request_notes=(ctx_note,) if ctx_note else (),
    )
    table = table if table is not None else load_coefficients(req.coefficients)
    return build_report(model, hw, quant, wl, table, options)
