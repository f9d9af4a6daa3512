"""The sizing report: frozen sections assembled from the memory, speed, cost, fine-tuning, recommendation and
launch modules, and ``report_to_dict`` — the JSON format (``schema/report.schema.json``, documented in
docs/report.md) that every renderer (text, Markdown, HTML) renders from.

Units live in field names (``*_bytes``, ``*_s``, ``*_tok_s``, ``*_gbs``, ``*_usd``); renderers convert to GiB
(2^30 B) and GB (10^9 B) and label which.  Every speed figure carries the label of the coefficient set it came
from and whether that set is calibrated; memory figures are estimates from the estimator's formulas.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections import Counter
from typing import NamedTuple

from estimator.engines import ENGINES
from estimator.engines.base import LaunchCommand
from estimator.physics.cost import CostEstimate
from estimator.physics.finetune import FinetuneConfig
from estimator.report.recommend import Candidate, Recommendations
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

SCHEMA_VERSION = 1
FITBENCH_VERSION = "0.1.0"
CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)
KV_OPTIONS = ("f16", "q8_0", "fp8", "q4_0")
MEMORY_BASIS = (
    "estimated: architecture formulas (weights per tensor class, KV per layer kind, engine buffers)"
)


class ReportOptions(NamedTuple):
    """Everything a report needs beyond the specs: money, fine-tuning settings and the catalogs to search."""

    usd_per_hour: float | None = None
    hours_per_day: float = 4.0
    kwh_price_usd: float = 0.15
    purchase_usd: float | None = None
    allow_overlong: bool = False
    finetune: FinetuneConfig = FinetuneConfig()  # frozen: one shared default is safe
    hardware_catalog: tuple[HardwareSpec, ...] = ()
    rates: tuple = ()  # tuple[CloudRate, ...]
    contexts: tuple[int, ...] = CONTEXTS
    quants: tuple[str, ...] = ()  # quant-matrix rows; () = every known format


class ModelFacts(NamedTuple):
    id: str
    name: str
    hf_id: str | None
    architecture: str
    arch_class: str | None
    params_total: int
    params_active: int
    published_total_params: str | None
    published_active_params: str | None
    attention: str  # e.g. "MoE + GQA (8 KV heads)", "MLA", "hybrid: 12 full + 36 linear"
    layer_kinds: dict[str, int]
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    window: int | None
    max_context: int
    n_experts: int | None
    n_experts_used: int | None
    n_shared_experts: int | None
    license: str | None
    native_dtype: str
    source: str
    verified: bool
    from_gguf: bool
    notes: tuple[str, ...]


class HardwareFacts(NamedTuple):
    id: str
    name: str
    vendor: str
    family: str
    kind: str
    memory_bytes: int | None
    bandwidth_gbs: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    tdp_w: float | None
    price_usd: float | None
    interconnect_gbs: float | None
    host_bandwidth_gbs: float | None
    status: str
    source: str


class ConfigFacts(NamedTuple):
    engine: str
    quant: str
    quant_description: str
    kv_dtype: str
    n_ctx: int
    n_devices: int
    split: str
    concurrency: int
    offload_bytes: int
    moe_offload_layers: int
    gpu_memory_utilization: float
    flash_attn: bool


class DeviceRow(NamedTuple):
    index: int
    weights_bytes: int
    kv_bytes: int
    runtime_bytes: int
    overhead_bytes: int
    total_bytes: int
    usable_bytes: int
    headroom_bytes: int
    utilization: float


class MemorySection(NamedTuple):
    weights_bytes: int
    kv_bytes: int
    runtime_bytes: int
    overhead_bytes: int
    total_bytes: int
    physical_bytes: int  # n_devices x device memory
    usable_bytes: int
    headroom_bytes: int
    utilization: float
    verdict: str  # fits | fits with offload | does not fit
    host_bytes: int
    kv_capacity_tokens: int | None
    max_concurrency: int | None
    min_offload_bytes: int  # least host offload that would make it fit (0 when it fits)
    per_device: tuple[DeviceRow, ...]
    basis: str
    notes: tuple[str, ...]


class KVOption(NamedTuple):
    kv_dtype: str
    kv_bytes: int
    saving_bytes: int  # vs the chosen KV dtype (negative: costs more)
    total_bytes: int
    verdict: str
    engines: tuple[str, ...]


class KVSection(NamedTuple):
    kv_dtype: str
    n_ctx: int
    n_seq: int
    kv_bytes: int
    bytes_per_token: int
    state_bytes: int
    by_kind_bytes: dict[str, int]
    options: tuple[KVOption, ...]


class ContextRow(NamedTuple):
    n_ctx: int
    kv_bytes: int
    total_bytes: int
    headroom_bytes: int
    verdict: str
    above_max: bool


class SpeedFigure(NamedTuple):
    tok_s: float
    lo_tok_s: float
    hi_tok_s: float
    coefficients: str
    calibrated: bool
    n_points: int


class SpeedSection(NamedTuple):
    decode: SpeedFigure
    prefill: SpeedFigure
    prefill_prompt_tokens: int
    ttft_s: float
    ttft_lo_s: float
    ttft_hi_s: float
    ttft_prompt_tokens: int
    aggregate: SpeedFigure
    concurrency: int
    per_sequence_tok_s: float
    calibrated: bool
    basis: str
    notes: tuple[str, ...]


class QuantRow(NamedTuple):
    quant: str
    description: str
    engines: tuple[str, ...]
    weights_bytes: int | None
    kv_bytes: int | None
    total_bytes: int | None
    verdict: str | None
    decode: SpeedFigure | None
    cheapest_fit: Candidate | None
    selected: bool
    error: str | None = None


class ScalingRow(NamedTuple):
    n_devices: int
    split: str
    per_device_total_bytes: int
    total_bytes: int
    verdict: str
    decode_tok_s: float | None
    aggregate_tok_s: float | None


class OffloadSection(NamedTuple):
    offload_bytes: int
    moe_offload_layers: int
    host_bytes: int
    host_bandwidth_gbs: float | None
    decode_tok_s_all_on_device: float | None
    decode_tok_s_with_offload: float | None
    slowdown: float | None  # all-on-device tok/s / with-offload tok/s


class MultiDeviceSection(NamedTuple):
    split: str
    rows: tuple[ScalingRow, ...]
    offload: OffloadSection
    notes: tuple[str, ...]


class FinetuneRow(NamedTuple):
    method: str
    label: str
    weights_bytes: int
    adapter_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    trainable_params: int
    fits_selected: bool
    recommended: Candidate | None
    assumptions: tuple[str, ...]


class LaunchEntry(NamedTuple):
    engine: str
    argv: tuple[str, ...]
    text: str
    exact: bool
    notes: tuple[str, ...]


class HardwareOption(NamedTuple):
    """One configuration of ``chart_data.hardware_comparison`` (see estimator.report.chart_data)."""

    hardware_id: str
    hardware_name: str
    kind: str
    n_devices: int
    memory_bytes: int  # all devices together
    required_bytes: int  # estimated total over all devices
    headroom_bytes: int
    decode_tok_s: float | None  # single stream, estimated
    usd_per_hour: float | None
    rate_origin: str  # cloud rate | cloud rate, scaled per device | amortised purchase + power | none
    rate_provider: str | None
    purchase_usd: float | None
    power_w: float | None
    usd_per_1m_output_tokens: float | None  # at decode_tok_s
    selected: bool


class ChartData(NamedTuple):
    """Series for the HTML charts (docs/html.md); totals are bytes over all devices."""

    context_by_kv: dict[str, tuple[tuple[int, int], ...]]  # kv dtype -> ((n_ctx, total_bytes), ...)
    prefill_by_quant: dict[str, SpeedFigure]
    hardware_comparison: tuple[HardwareOption, ...]
    notes: tuple[str, ...]


class CoefficientsInfo(NamedTuple):
    path: str | None
    calibrated_file: bool
    created_utc: str | None
    input_hash: str | None


class Report(NamedTuple):
    schema_version: int
    fitbench_version: str
    generated_utc: str
    model: ModelFacts
    quant: str
    hardware: HardwareFacts
    workload: ConfigFacts
    memory: MemorySection
    kv: KVSection
    context_scaling: tuple[ContextRow, ...]
    quant_matrix: tuple[QuantRow, ...]
    speed: SpeedSection | None
    multi_device: MultiDeviceSection
    cost: CostEstimate
    finetune: tuple[FinetuneRow, ...]
    recommendations: Recommendations
    launch: tuple[LaunchEntry, ...]
    coefficients: CoefficientsInfo
    chart_data: ChartData
    warnings: tuple[str, ...]


def validate_workload(model: ModelSpec, workload: Workload, allow_overlong: bool = False) -> tuple[str, ...]:
    """SpecError for an impossible workload; warnings (tuple of lines) for an allowed but odd one."""
    warnings: list[str] = []
    if workload.n_ctx <= 0:
        raise SpecError(f"context must be a positive number of tokens, got {workload.n_ctx}")
    if workload.n_ctx > model.max_context:
        if not allow_overlong:
            raise SpecError(
                f"context {workload.n_ctx} is above {model.id}'s maximum of {model.max_context} tokens "
                "(pass --allow-overlong to size it anyway)"
            )
        warnings.append(
            f"context {workload.n_ctx} is above the model's maximum of {model.max_context} tokens"
        )
    for name in ("n_devices", "concurrency", "n_seq"):
        if getattr(workload, name) < 1:
            raise SpecError(f"{name.replace('_', ' ')} must be >= 1, got {getattr(workload, name)}")
    if workload.split not in ("tp", "pp"):
        raise SpecError(f"split must be tp or pp, got {workload.split!r}")
    if workload.engine not in ENGINES:
        raise SpecError(f"engine must be one of {', '.join(ENGINES)}, got {workload.engine!r}")
    if workload.offload_bytes < 0 or workload.moe_offload_layers < 0:
        raise SpecError("offload must be >= 0")
    if workload.moe_offload_layers and model.moe is None:
        raise SpecError(f"--n-cpu-moe needs a mixture-of-experts model; {model.id} is dense")
    if workload.moe_offload_layers > model.n_layers:
        raise SpecError(
            f"--n-cpu-moe {workload.moe_offload_layers} is above the model's {model.n_layers} layers"
        )
    if not 0 < workload.gpu_memory_utilization <= 1:
        raise SpecError(f"gpu memory utilization must be in (0, 1], got {workload.gpu_memory_utilization}")
    return tuple(warnings)


def attention_label(model: ModelSpec) -> str:
    """Human label of the attention design: MoE/dense + GQA/MHA/MQA/MLA + sliding/chunked/hybrid layers."""
    kinds = Counter(model.layer_types)
    if model.mla is not None:
        att = f"MLA (latent {model.mla.kv_lora_rank}+{model.mla.qk_rope_head_dim})"
    elif model.n_kv_heads == 1:
        att = "MQA"
    elif model.n_kv_heads < model.n_heads:
        att = f"GQA ({model.n_kv_heads} KV heads)"
    else:
        att = "MHA"
    parts = [("MoE" if model.moe else "dense") + " + " + att]
    if kinds.get("sliding"):
        parts.append(f"sliding window {model.window} on {kinds['sliding']} of {model.n_layers} layers")
    if kinds.get("chunked"):
        parts.append(f"chunked attention {model.window} on {kinds['chunked']} of {model.n_layers} layers")
    lin = kinds.get("linear", 0) + kinds.get("mamba", 0)
    if lin:
        parts.append(f"hybrid: {kinds.get('full', 0)} full-attention + {lin} linear/SSM layers")
    return "; ".join(parts)


def model_facts(model: ModelSpec, params_total: int, params_active: int) -> ModelFacts:
    moe = model.moe
    return ModelFacts(
        model.id,
        model.name,
        model.hf_id,
        model.architecture,
        model.arch_class,
        int(params_total),
        int(params_active),
        model.published_total_params,
        model.published_active_params,
        attention_label(model),
        dict(Counter(model.layer_types)),
        model.n_layers,
        model.hidden_size,
        model.n_heads,
        model.n_kv_heads,
        model.head_dim,
        model.window,
        model.max_context,
        moe.n_experts if moe else None,
        moe.n_experts_used if moe else None,
        moe.n_shared_experts if moe else None,
        model.license,
        model.native_dtype,
        model.source,
        model.verified,
        model.gguf_tensors is not None,
        tuple(model.notes),
    )


def hardware_facts(hw: HardwareSpec) -> HardwareFacts:
    return HardwareFacts(
        hw.id,
        hw.name,
        hw.vendor,
        hw.family,
        hw.kind,
        hw.memory_bytes,
        hw.bandwidth_gbs,
        hw.bf16_tflops,
        hw.fp8_tflops,
        hw.tdp_w,
        hw.price_usd,
        hw.interconnect_gbs,
        hw.host_bandwidth_gbs,
        hw.status,
        hw.source,
    )


def config_facts(quant: QuantSpec, w: Workload) -> ConfigFacts:
    return ConfigFacts(
        w.engine,
        quant.name,
        quant.description,
        w.kv_dtype,
        w.n_ctx,
        w.n_devices,
        w.split,
        w.concurrency,
        w.offload_bytes,
        w.moe_offload_layers,
        w.gpu_memory_utilization,
        w.flash_attn,
    )


def launch_entry(cmd: LaunchCommand) -> LaunchEntry:
    return LaunchEntry(cmd.engine, cmd.argv, cmd.text, cmd.exact, cmd.notes)


def build_report(
    model: ModelSpec,
    hardware: HardwareSpec,
    quant: QuantSpec,
    workload: Workload,
    table,
    options: ReportOptions | None = None,
) -> Report:
    """Assemble every section for one configuration (pure: no I/O beyond what ``options`` already holds)."""
    options = options or ReportOptions()
    warnings = list(validate_workload(model, workload, options.allow_overlong))
    from estimator.report.build import build_sections  # after the dataclasses it fills (no import cycle)

    parts = build_sections(model, hardware, quant, workload, table, options)
    warnings += parts.pop("warnings")
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
    return Report(
        schema_version=SCHEMA_VERSION,
        fitbench_version=FITBENCH_VERSION,
        generated_utc=now,
        quant=quant.name,
        hardware=hardware_facts(hardware),
        workload=config_facts(quant, workload),
        warnings=tuple(dict.fromkeys(warnings)),
        **parts,
    )


def _plain(value):
    """Records (NamedTuple sections, dataclasses) -> dicts, tuples -> lists, recursively; other values
    unchanged (JSON-ready)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {k: _plain(v) for k, v in zip(value._fields, value, strict=True)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def report_to_dict(report: Report) -> dict:
    """The JSON form of a report: every field of every section, names and units as in the dataclasses.

    Stable: documented by ``estimator/schema/report.schema.json`` (``schema_version`` 1).
    """
    return _plain(report)
