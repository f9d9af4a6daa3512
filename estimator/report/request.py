"""What a user asks for, checked and completed: the one entry the command line and the local page share.

``ReportRequest`` holds a report request as typed (ids, numbers, flags); ``make_report`` validates it, applies
the engine's defaults (its profile's quant and split), resolves the model and the hardware (a catalog id or
``custom`` figures) and builds the report (``estimator.physics.limits.validate_workload`` refuses a workload
the model cannot take).  Every refusal is a one-line SpecError (the CLI exits 2 with it, the
page answers 400).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import ENGINES, get_engine
from estimator.specs import GIB, HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload, equal_lengths
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
    "cpu_cores": ("cpu_cores", "--cpu-cores"),
    "cpu_clock_ghz": ("cpu_clock_ghz", "--cpu-clock-ghz"),
    "usd_per_hour": ("usd_per_hour", "--usd-per-hour"),
    "hours_per_day": ("hours_per_day", "--hours-per-day"),
    "kwh_price": ("kwh_price", "--kwh-price"),
    "purchase_usd": ("purchase_usd", "--purchase-usd"),
    "ft_rank": ("ft_rank", "--ft-rank"),
    "ft_seq_len": ("ft_seq_len", "--ft-seq-len"),
    "ft_micro_batch": ("ft_micro_batch", "--ft-micro-batch"),
    "ubatch": ("n_ubatch", "--ubatch"),
    "kv_pad": ("kv_pad", "--kv-pad"),
    "isl": ("isl", "--isl"),
    "osl": ("osl", "--osl"),
    "slo_ttft_ms": ("slo_ttft_ms", "--slo-ttft-ms"),
    "slo_tpot_ms": ("slo_tpot_ms", "--slo-tpot-ms"),
}


def check_backend(engine: str, backend: str | None) -> str:
    """The backend name as the engine spells it ("" = its default); SpecError for one it does not know."""
    return get_engine(engine).backend_name(backend) if backend else ""
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
    if "backend" in extra:
        extra["backend"] = check_backend(engine, extra["backend"])
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
    wired_limit_mb: int | None = None,
    devices: int | None = None,
    kind: str | None = None,
    cpu_cores: int | None = None,
    cpu_clock_ghz: float | None = None,
) -> tuple[HardwareSpec, int]:
    """(device, count): a catalog device by id or by a name it is made of ("4090"), with the given figures
    overriding the catalog's; ``custom`` from them (GiB, 10^9 B/s, 10^12 FLOP/s; ``kind`` None: its family's
    kind; ``wired_limit_mb``: an Apple machine's ``iogpu.wired_limit_mb``); or ``auto``: this machine
    (``estimator.catalog.detect``), its GPUs counted when ``devices`` is None.  ``devices`` None means 1
    otherwise.  ``cpu_cores`` / ``cpu_clock_ghz`` (GHz) set a CPU's cores and clock (the ``cpu_size``
    covariate of its prefill rate); SpecError for a device that is not a CPU, or ``kind`` with a catalog
    device."""
    from estimator.catalog.resolve import override_hardware, resolve_hardware

    if kind is not None and str(hardware).strip().lower() != "custom":
        raise SpecError("--kind describes a custom device (--hardware custom); a catalog device has its own")
    if str(hardware).strip().lower() == "auto":
        from estimator.catalog.detect import detect_hardware, with_notes

        spec, found, notes = detect_hardware()
        spec = override_hardware(spec, memory_gib, bandwidth_gbs, tflops, family, wired_limit_mb)
        n = found if devices is None else devices
        if found > 1 and n != found:
            notes = (*notes, f"sized for {n} of the {found} GPUs found (--devices)")
        return with_notes(override_cpu(spec, cpu_cores, cpu_clock_ghz), notes), n
    spec = resolve_hardware(
        hardware,
        memory_gib=memory_gib,
        bandwidth_gbs=bandwidth_gbs,
        tflops=tflops,
        family=family,
        kind=kind,
        wired_limit_mb=wired_limit_mb,
        forgiving=True,
    )
    return override_cpu(spec, cpu_cores, cpu_clock_ghz), 1 if devices is None else devices


def override_cpu(spec: HardwareSpec, cpu_cores: int | None, cpu_clock_ghz: float | None) -> HardwareSpec:
    """``spec`` with the CPU cores / clock (GHz) the user gave, each change said in its notes; SpecError when
    the device is not a CPU (a GPU's rate does not follow them)."""
    given = {k: v for k, v in (("cpu_cores", cpu_cores), ("cpu_clock_ghz", cpu_clock_ghz)) if v is not None}
    if not given:
        return spec
    if spec.kind != "cpu":
        options = " and ".join("--" + k.replace("_", "-") for k in given)
        raise SpecError(
            f"{options}: figures of a CPU, and {spec.id} is a {spec.kind} (--kind cpu, or a CPU --family, "
            "makes a custom device a CPU)"
        )
    if "cpu_cores" in given:
        given["cpu_cores"] = int(given["cpu_cores"])
    elif not spec.cpu_cores:  # the covariate is cores x clock: a clock alone would change nothing
        raise SpecError(f"--cpu-clock-ghz needs --cpu-cores: {spec.id}'s core count is not known")
    unit = {"cpu_cores": " physical cores", "cpu_clock_ghz": " GHz maximum clock"}
    notes = [f"{v:g}{unit[k]} as given (the device's own figure: {getattr(spec, k) or 'unknown'})"
             for k, v in given.items()]  # fmt: skip
    return replace(spec, **given, notes=(*spec.notes, *notes))


@dataclass(frozen=True)
class ReportRequest:
    """A report request as the user typed it (``python -m estimator report`` options, the page's parameters).

    quant / split / gpu_memory_utilization: None = the engine's default (its profile's ``default_quant`` /
    ``default_split`` / ``memory_fraction``);
    offload_gib in GiB (2^30 B); memory_gib / bandwidth_gbs / tflops / family describe ``hardware="custom"``
    and override a catalog device's figures; wired_limit_mb: an Apple machine's ``iogpu.wired_limit_mb``.
    every number must be inside its ``estimator.validate.BOUNDS`` range (``check``).
    """

    model: str
    hardware: str
    quant: str | None = None
    engine: str = "llama.cpp"
    kv_dtype: str = "f16"
    ctx: int | None = None  # None: DEFAULT_CTX, or the model's maximum when that is smaller (with a note)
    devices: int | None = None  # None: 1, or every GPU found with hardware="auto"
    split: str | None = None
    concurrency: int = 1
    offload_gib: float = 0.0
    n_cpu_moe: int = 0
    gpu_memory_utilization: float | None = None
    memory_gib: float | None = None
    bandwidth_gbs: float | None = None
    tflops: float | None = None
    family: str | None = None
    kind: str | None = None  # custom: gpu | unified | cpu | npu (None: the family's kind, else gpu)
    # a CPU's physical cores and maximum clock, GHz (None: catalog / detected, else the cores x clock
    # covariate's reference, estimator.physics.covariates)
    cpu_cores: int | None = None
    cpu_clock_ghz: float | None = None
    wired_limit_mb: int | None = None
    usd_per_hour: float | None = None
    hours_per_day: float = 4.0
    kwh_price: float = 0.15
    purchase_usd: float | None = None
    ft_rank: int = 16
    ft_seq_len: int = 2048
    ft_micro_batch: int = 1
    allow_overlong: bool = False
    coefficients: str | None = None
    backend: str = ""  # the engine's backend; "" = the profile's default for the device
    flash_attn: str = "auto"  # on | off | auto: the engine profile's flash_attn_for decides what auto means
    ubatch: int = Workload.n_ubatch  # tokens per micro-batch (llama.cpp -ub)
    swa_full: bool = False  # llama.cpp --swa-full: sliding-window layers keep a full-size cache
    kv_unified: bool = Workload.kv_unified  # llama.cpp --kv-unified: the sequences share one KV buffer
    kv_pad: int = 0  # KV cell padding of an older llama.cpp build (0 = the current build's own rule)
    # serving section: request lengths (tokens) and the latency objective (ms) of its operating point
    isl: int = 1024
    osl: int = 1024
    # serving loads: "spread" lengths that vary (real traffic), or "fixed": every request exactly isl / osl
    lengths: str = "spread"
    slo_ttft_ms: float = DEFAULT_SLO_TTFT_MS
    slo_tpot_ms: float = DEFAULT_SLO_TPOT_MS

    def context(self, model: ModelSpec) -> tuple[int, tuple[str, ...]]:
        """(context tokens, notes): the requested context, or by default the larger of DEFAULT_CTX and one
        serving request (``isl`` + ``osl``: an engine's max_model_len must hold a whole request, so asking for
        8,192-token prompts sizes at least 8,192 + osl tokens, with a note), clamped to the model's maximum (a
        4K model, or a GGUF trained at 2,048 tokens, is sized at its maximum with a note, not refused); a
        context the user typed is never changed (above the maximum it is refused unless
        ``allow_overlong``)."""
        if self.ctx is not None:
            return self.ctx, ()
        request = int(self.isl) + int(self.osl)
        want, notes = DEFAULT_CTX, ()
        if request > DEFAULT_CTX:
            want = request
            notes = (
                f"context: sized at {request:,} tokens, one serving request of --isl {int(self.isl)} + "
                f"--osl {int(self.osl)} (the default {DEFAULT_CTX:,} tokens would not hold it; --ctx chooses "
                "another)",
            )
        if 0 < model.max_context < want:
            which = "one serving request" if want > DEFAULT_CTX else f"the default {DEFAULT_CTX:,} tokens"
            return model.max_context, (
                f"context: {which} is above {model.id}'s maximum, so it is sized at its maximum of "
                f"{model.max_context:,} tokens (--ctx chooses another)",
            )
        return want, notes

    def check(self) -> None:
        """SpecError naming the option for a number that is not finite or outside its range (the CLI's parser
        checks the same table; this serves the page and direct callers)."""
        for field_name, (rule, option) in _NUMBERS.items():
            value = getattr(self, field_name)
            if value is not None:
                check_number(value, rule, option)

    def equal_lengths(self) -> bool:
        """True for ``lengths`` "fixed", False for "spread" (``estimator.physics.serving.equal_lengths``);
        SpecError naming the option otherwise."""
        return equal_lengths(self.lengths, "--lengths")

    def workload(self, ctx: int | None = None, devices: int | None = None) -> Workload:
        """The Workload of the request at ``ctx`` tokens on ``devices`` devices (defaults: the request's own,
        else DEFAULT_CTX and 1); SpecError for a number out of range and for what the engine cannot run (its
        profile's check)."""
        self.check()
        if self.engine not in ENGINES:
            raise SpecError(f"unknown engine {self.engine!r}; one of {', '.join(ENGINES)}")
        wl = make_workload(
            self.engine,
            self.kv_dtype,
            next((c for c in (ctx, self.ctx) if c is not None), DEFAULT_CTX),
            next((n for n in (devices, self.devices) if n is not None), 1),
            self.split,
            self.gpu_memory_utilization,
            concurrency=self.concurrency,
            offload_bytes=int(round(self.offload_gib * GIB)),
            moe_offload_layers=self.n_cpu_moe,
            backend=check_backend(self.engine, self.backend),
            flash_attn=get_engine(self.engine).flash_attn_for(self.flash_attn),
            n_ubatch=self.ubatch,
            n_batch=max(Workload.n_batch, self.ubatch),
            swa_full=self.swa_full,
            kv_unified=self.kv_unified,
            kv_pad=self.kv_pad,
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
    from estimator.catalog.resolve import resolve_model_noted
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.finetune import FinetuneConfig
    from estimator.report.document import build_report
    from estimator.report.units import ReportOptions

    req.check()
    model, model_notes = resolve_model_noted(req.model)
    model, quant, quant_notes = request_quant(model, req.quant, req.engine)
    ctx, ctx_notes = req.context(model)
    hw, devices = resolve_device(
        req.hardware,
        req.memory_gib,
        req.bandwidth_gbs,
        req.tflops,
        req.family,
        req.wired_limit_mb,
        req.devices,
        kind=req.kind,
        cpu_cores=req.cpu_cores,
        cpu_clock_ghz=req.cpu_clock_ghz,
    )
    wl = req.workload(ctx, devices)
    options = ReportOptions(
        usd_per_hour=req.usd_per_hour,
        hours_per_day=req.hours_per_day,
        kwh_price_usd=req.kwh_price,
        purchase_usd=req.purchase_usd,
        allow_overlong=req.allow_overlong,
        finetune=FinetuneConfig(rank=req.ft_rank, seq_len=req.ft_seq_len, micro_batch=req.ft_micro_batch),
        hardware_catalog=tuple(all_hardware()),
        rates=load_cloud_rates(),
        notes=(*model_notes, *quant_notes, *ctx_notes),
        serving_isl=int(req.isl),
        serving_osl=int(req.osl),
        serving_equal_lengths=req.equal_lengths(),
        slo_ttft_s=req.slo_ttft_ms / 1000.0,
        slo_tpot_s=req.slo_tpot_ms / 1000.0,
    )
    table = table if table is not None else load_coefficients(req.coefficients)
    return build_report(model, hw, quant, wl, table, options)


def _default_format_note(model: ModelSpec, name: str, engine: str) -> str:
    """The note of a default weight format that is the model's own rather than the engine's usual one."""
    return (
        f"weights: {name}, the format {model.hf_id or model.id} is published in, as {engine} loads it by "
        "default; --quant NAME sizes another"
    )


def _fallback_notes(model: ModelSpec, quant: QuantSpec) -> tuple[str, ...]:
    """A note when 1 % or more of a llama.cpp recipe's weights have rows that are not whole blocks of its
    type, so llama-quantize stores them in the fallback type (``weights.block_fallback``)."""
    from estimator.physics.quant import fallback_type
    from estimator.physics.weights import block_fallback

    found = block_fallback(model, quant)
    if found is None or found[0] < 0.01:
        return ()
    share, widths = found
    t = quant.default_type
    return (
        f"{quant.name}: {share:.1%} of the weights have rows of {', '.join(f'{w:,}' for w in widths)} "
        f"elements, not whole {t} blocks; llama-quantize stores them in its fallback types ({t} -> "
        f"{fallback_type(t, widths[0])}), so the file is larger than the format's name suggests",
    )


def request_quant(
    model: ModelSpec, quant: str | None, engine: str
) -> tuple[ModelSpec, QuantSpec, tuple[str, ...]]:
    """(model, weight format, notes) to size.

    A GGUF file is sized from its own tensors and labelled with its own type (``file_quant``) when no format
    or ``gguf`` is asked for; naming another format re-sizes the file's architecture in that format (the
    model loses its tensor list, so every figure is the recipe's) and says so.  Other models take the named
    format, or the engine's default.
    """
    from estimator.physics.quant import file_quant, get_quant
    from estimator.report.units import recipe_model

    if model.gguf_tensors is None:
        if quant is not None and quant.strip().lower() == "gguf":
            raise SpecError(
                f"--quant gguf means a .gguf file's own tensors; {model.id} is not a GGUF file (name a "
                "format: python -m estimator list quants)"
            )
        profile = get_engine(engine)  # the layout the engine loads (vLLM / SGLang MXFP4 checkpoints)
        if quant is not None:
            q = get_quant(quant)
            return model, profile.weight_format(q), _fallback_notes(model, q)
        name = profile.default_quant_for(model)
        note = () if name == profile.default_quant else (_default_format_note(model, name, profile.label),)
        q = get_quant(name)
        return model, profile.weight_format(q), note + _fallback_notes(model, q)
    own = file_quant(model)
    if quant is None or quant.strip().lower() == "gguf":
        return (
            model,
            own,
            (
                f"weights: the GGUF file's own tensors ({model.native_dtype}, exact bytes); --quant NAME "
                "re-sizes its architecture in another format",
            ),
        )
    q = get_quant(quant)
    return (
        recipe_model(model),
        q,
        (
            f"weights: re-sized as {q.name} from the file's architecture (the file itself is "
            f"{model.native_dtype}; --quant gguf sizes its own tensors)",
        ),
    )
