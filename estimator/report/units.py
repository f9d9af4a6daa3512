"""What a report section is (``Unit``) and what its builder gets (``Build``).

A section is one unit: the JSON key it fills, the type of that value (the JSON schema is generated from it),
a builder that computes it from the physics, and its renderings — ``text`` (one ``Block`` for the terminal and
Markdown) and ``html`` (a fragment).  Renderings read the report *dict* (the JSON form), so every format shows
the numbers the JSON holds.  A unit may be data only (no rendering: the configuration facts, the chart
series) or rendering only (no key: the summary at the top).

``Build`` holds the specs, the options, the memoised physics (``estimator.report.sizing.Sizing``) and the
sections built so far; ``Build.get(key)`` builds a section on first use, so a builder simply asks for the
sections it needs.  Physics results go into section records by keyword.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from estimator.engines import get_engine
from estimator.physics.finetune import FinetuneConfig
from estimator.physics.weights import weight_breakdown
from estimator.render.blocks import Block
from estimator.render.htmlkit import Ctx
from estimator.report.sizing import Sizing
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

# KV dtypes a user keeps by default (16 / 32 bit): a cheaper cache is what the report suggests first
FULL_KV_DTYPES = ("f16", "bf16", "f32", "auto")

CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)


def recipe_model(model: ModelSpec) -> ModelSpec:
    """A GGUF model's architecture without its file's tensors: what a catalog format (a recipe) sizes."""
    if model.gguf_tensors is None:
        return model
    return replace(model, gguf_tensors=None, gguf_path=None)


@dataclass(frozen=True)
class ReportOptions:
    """Everything a report needs beyond the specs: money, fine-tuning settings and the catalogs to search."""

    usd_per_hour: float | None = None
    hours_per_day: float = 4.0
    kwh_price_usd: float = 0.15
    purchase_usd: float | None = None
    allow_overlong: bool = False
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    hardware_catalog: tuple[HardwareSpec, ...] = ()
    rates: tuple = ()  # tuple[CloudRate, ...]
    contexts: tuple[int, ...] = CONTEXTS
    quants: tuple[str, ...] = ()  # quant-matrix rows; () = every known format
    # what the request did on the user's behalf (a clamped default context, a model name mapped to a catalog
    # entry, a GGUF sized from its own tensors, a detected device): the report's ``notes``
    notes: tuple[str, ...] = ()
    # serving section (estimator/report/sections/serving.py): request lengths and the latency objective
    serving_isl: int = 1024
    serving_osl: int = 1024
    # requests of exactly these lengths (a fixed-length benchmark) or, the default, lengths that vary
    serving_equal_lengths: bool = False
    slo_ttft_s: float = 2.0
    slo_tpot_s: float = 0.1


@dataclass(frozen=True)
class Unit:
    """One report section (see module doc).  ``key`` None: rendered only; ``build`` None: nothing to build
    (the value comes from ``Build`` directly)."""

    key: str | None
    type: Any = None
    build: Callable[[Build], Any] | None = None
    text: Callable[[dict], Block | None] | None = None
    html: Callable[[Ctx], str] | None = None


class Build:
    """The inputs of one report and the sections built so far (built on first ``get``)."""

    def __init__(
        self,
        model: ModelSpec,
        hardware: HardwareSpec,
        quant: QuantSpec,
        workload: Workload,
        table,
        options: ReportOptions,
        units: tuple[Unit, ...],
        request_warnings: tuple[str, ...] = (),
    ):
        self.model, self.hardware, self.quant, self.workload = model, hardware, quant, workload
        self.table, self.options = table, options
        self.request_warnings = request_warnings
        self.sizing = Sizing(model, table)
        self.speed_error: str | None = None  # why the speed section is empty, when it is
        self._units = {u.key: u for u in units if u.key is not None}
        self._built: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        """The value of section ``key``, built on first use."""
        if key not in self._built:
            self._built[key] = self._units[key].build(self)
        return self._built[key]

    @cached_property
    def recipe_sizing(self) -> Sizing:
        """Sizing of the model's architecture in catalog formats: for a GGUF model the file's tensors are one
        format (``QuantSpec.from_file``), so every other format is sized from the architecture alone."""
        if self.model.gguf_tensors is None:
            return self.sizing
        return Sizing(recipe_model(self.model), self.table)

    def sizing_for(self, quant: QuantSpec) -> Sizing:
        """The Sizing that sizes ``quant``: the file's own for its format, else the recipe sizing."""
        return self.sizing if quant.from_file else self.recipe_sizing

    @cached_property
    def weights(self):
        """Weight breakdown of the sized configuration (estimator.physics.weights.WeightBreakdown)."""
        return weight_breakdown(self.model, self.quant)

    @cached_property
    def memory(self):
        """MemoryEstimate of the sized configuration (KV for ``sizing.memory_sequences`` sequences)."""
        return self.sizing.memory(self.quant, self.hardware, self.workload)

    @cached_property
    def expert_offload(self):
        """(k, MemoryEstimate) for the fewest layers of routed experts in host RAM that make a configuration
        that does not fit fit (llama.cpp ``--n-cpu-moe k``: ``Sizing.min_moe_offload``), or None: it fits,
        the model has no routed experts, the user already set the offload, the engine keeps no experts in
        host RAM, or not even every layer's experts there make it fit."""
        wl = self.workload
        if (
            self.memory.verdict != "does not fit"
            or self.model.moe is None
            or wl.moe_offload_layers
            or not get_engine(wl.engine).moe_cpu_offload
        ):
            return None
        return self.sizing.min_moe_offload(self.quant, self.hardware, wl)

    @cached_property
    def kv_dtype_fit(self):
        """(KV dtype, MemoryEstimate) for the least lossy of the engine's cheaper KV dtypes
        (``EngineProfile.cheaper_kv_dtypes``: llama.cpp q8_0 then q4_0, vLLM / SGLang / TensorRT-LLM fp8) that
        makes a configuration that does not fit fit, the weights as asked; None when it fits, the cache is
        already quantized, the engine cannot run that cache here (llama.cpp's quantized V needs flash
        attention) or none fits."""
        wl = self.workload
        if self.memory.verdict != "does not fit" or wl.kv_dtype.lower() not in FULL_KV_DTYPES:
            return None
        profile = get_engine(wl.engine)
        for dt in profile.cheaper_kv_dtypes:
            try:
                profile.check_cache(dt, wl.flash_attn)
                got = self.sizing.memory(self.quant, self.hardware, replace(wl, kv_dtype=dt))
            except SpecError:
                continue
            if got.verdict == "fits":
                return dt, got
        return None

    @cached_property
    def attention_dp(self):
        """The MemoryEstimate under attention data parallelism (split ``dp``) of a tensor-parallel
        configuration of several devices that does not fit, when the engine has it and it fits there (each
        device holds its own sequences' KV: an MLA latent cache is no longer replicated N times); else
        None."""
        wl = self.workload
        if (
            self.memory.verdict != "does not fit"
            or wl.n_devices < 2
            or wl.split != "tp"
            or not get_engine(wl.engine).attention_dp_flags
        ):
            return None
        got = self.sizing.memory(self.quant, self.hardware, replace(wl, split="dp"))
        return got if got.verdict == "fits" else None

    @property
    def floor_bytes(self) -> int:
        """Weights + KV of the sized configuration: no configuration with less memory can hold it."""
        return int(self.memory.weights_bytes + self.memory.kv_bytes)
