"""Engine runtime buffers and device context overhead (bytes), with a few free coefficients.

The default coefficients below are an UNCALIBRATED PRIOR (llama.cpp's compute-buffer factors read off its own
CPU buffers, the rest engineering estimates; not fits); calibration replaces them from measured buffers
through ``results/coefficients.json`` -> ``"memory"`` -> engine (a flat dict of floats, the fields of
``MemoryCoefficients``).

Two runtime models; an engine profile names its own (``EngineProfile.runtime_model``).

"ggml" — ggml's graph allocator (llama.cpp; per device holding layers).  Where the engine's profile replays
its own graph through the allocator (``EngineProfile.replayed_compute_bytes``: llama.cpp's graphs on a CPU,
for the architectures estimator.engines.llama_cpp_graph builds) that figure is the compute buffer, exact to
the log's rounding on every measured configuration; everywhere else the formula below applies.  The buffer
holds the live tensors of the worst-case graph at its fullest moment, which is the output head or one layer
(the allocator reuses memory between layers); the attention mask is a graph input that lives through every
layer:

    u      = min(n_ubatch, n_batch, T)        tokens per micro-batch (T: cells of the context, all sequences)
    K      = KV cells one stream holds for each attention kind the model runs (full, sliding/chunked), from
             the engine profile's ``kv_layout`` with the workload's --swa-full / --kv-unified / padding
    mask   = mask_factor * (2 if flash attention else 4) * u * sum(K)      (F16 / F32 KQ masks, one per kind)
    logits = 4 * u * (logits_factor * n_vocab + (out_hidden_factor - s) * hidden)  (F32 logits + final norm;
             s = 1 on a discrete device whose engine keeps the token embedding in host RAM (llama.cpp): the
             input embeddings are looked up and staged on the host, and the device's head moment holds one
             F32 hidden row per token less than the CPU graph's.  llama.cpp's memory-fit pass on an H200
             with flash attention: 4 u hidden below the CPU-fitted head on all 11 dense models, 4K-32K
             cells, results/runs/gpu-lease--nvidia-hopper--vm.jsonl; s = 0 elsewhere)
           + 4 * u * head_residue_factor * hidden   (an architecture of EngineProfile.head_keeps_hidden_archs,
             when R below is 0: the gathered output rows beside the final hidden state the graph keeps, three
             hidden rows under the logits, not two; which graphs and the evidence: that attribute in
             estimator/engines/llama_cpp.py, docs/memory-model.md §3.  A MoE graph with R > 0 already
             counts the layer's output among R's rows)
    attn   = mask + 4 * u * attn_hidden_factor * hidden
             + (no flash attention) kq_factor * 4 * u * n_heads * max(K)   (F32 KQ scores of one layer; the
                                                                           softmax runs in place)
    MLA (DeepSeek-2/3, Kimi, GLM-5: llama.cpp's absorbed form, a K cache of r + rope per cell shared by all
    heads, V a view of its first r elements):
    attn   = mask + 4 * u * mla_attn_factor * n_heads * (3 r + rope)      (absorbed query r, query with rope
                                                                           r + rope, attention output r, per
                                                                           head; replaces the hidden term)
             + (no flash attention) KQ scores as above
             + (no flash attention) r * max(K) * kv element bytes         (the V view copied transposed:
                                                                           ggml_cont, once per layer, any u)
    attn  += (DSA: DeepSeek-V3.2, GLM-5) 4 * u * dsa_factor * (min(top_k, K) * n_layers + 1.5 * max(K))
             (each layer's top-k indices stay allocated until the last layer's attention; the indexer's F32
             scores and the F16 mask it rebuilds from the top-k: llama.cpp's memory-fit pass on V3.2-shaped
             variants moves by exactly top_k floats per layer and per halving of top_k, not with the
             indexer's heads or width; flash attention on and off)
    logits += 4 * u * head_residue_factor * (R + R_qkv)   (module notes below: hidden rows the allocator's
             layout leaves under the logits; R for gated MoE with shared experts, R_qkv for a fused attn_qkv)
    ffn    = mask + 4 * u * (act_hidden_factor * hidden + act_ff_factor * ff_max)   (mask only when the model
             has more than one layer: it is freed after the last layer's attention)
           + (gated MoE, hidden > 2 expert_ff) 4 * u * n_experts_used * hidden   (the experts' down output
             does not fit the hole their gate and up outputs leave, so it lies above their product)
    compute = compute_base_bytes + max(logits, attn, ffn)
    output  = 4 * n_vocab * n_seq                (llama_context output buffer; host RAM)
    host_compute = 2 * 4 * u * hidden + mask   on discrete devices (the CUDA_Host compute buffer: the input
             embeddings, read on the host where the token embedding stays, and the KQ masks, graph inputs
             built on the host and copied to the device.  llama.cpp's memory-fit pass on an H200, 14
             full-depth models at 4,096 and 32,768 cells with flash attention: this, to 0.02 MiB (a few KiB of
             positions and output ids); without flash attention 0-16 MiB more;
             results/runs/gpu-lease--nvidia-hopper--vm.jsonl)

ff_max = max(dense ff, n_experts_used * expert_ff + n_shared * shared_ff) for a gated FFN (SwiGLU / GeGLU:
gate, up and their product).  An ungated FFN (Nemotron-H's squared ReLU) holds ungated_ff_factor *
n_experts_used * (expert_ff + expert width) in place of act_ff_factor * ff_max: each selected expert's up
output and its down output at the expert width (the latent width of a latent MoE, else hidden), the shared
expert apart; a dense one is one expert of ff.  llama.cpp's memory-fit pass on Nemotron-3-Super variants gives
exactly 1 x n_experts_used x expert_ff and 1 x n_experts_used x width (expert_ff 1,344-5,376, latent
512-4,096, 16 or 22 experts per token), nothing of the shared expert's width or the expert count; besides it
the same graphs hold 3 x hidden + about 8,200 floats per token (hidden 3,072 and 4,096) where the prior counts
act_hidden_factor's 4 x hidden, left to the fit. Prior (estimator/data/memory_prior.json) from llama.cpp's own
CPU buffers (llama-cpp-python 0.3.36, results/runs/memory-*.jsonl): logits 1, out_hidden 2, mask 1, kq 1,
attn_hidden 5.5, act_hidden 4, act_ff 3, ungated_ff 1, mla_attn 1, head_residue 1, dsa 1, base 0; e.g.
Llama-3.2-1B at u = 512: 258.5 MiB with flash attention at any context (250.5 MiB logits + 8 MiB final norm),
8,470 MiB without it at 131,072 cells (8,192 MiB scores + 256 MiB F32 mask + 22 MiB); DeepSeek-V3 (3-layer
proxy) at u = 512 without flash attention, 8,192 cells: 2,472.0 MiB measured = 2,048 MiB scores (128 heads) +
16 MiB mask + 8 MiB transposed V + 400 MiB MLA activations (128 x 1,600 floats per token); DeepSeek-V2-Lite (4
and 8 layers, flash attention): 241.0 MiB = 200 MiB logits + 4 MiB final norm + 16,384 floats per token under
them.

Where a MoE layer leaves its down output and the logits (ggml's graph allocator, llama.cpp's memory-fit
pass).  A gated MoE layer allocates its selected experts' gate and up outputs (n_used x expert_ff floats per
token each), their SwiGLU product, then the down output (n_used x hidden).  Gate and up are freed by then: the
down output takes their hole when hidden <= 2 expert_ff ("fits"), else it lies above the product (the FFN term
above).  The weighted sum of its n_used views is allocated next to it; with shared experts their FFN follows,
and the layer's output ends up above the down output's region, so the logits (allocated last, larger than
any hole) start above it:

    R = (n_used + 2) * hidden      fits        (the down output's region and the layer's output)
      = 2 * hidden                 does not fit
      + mask floats per token      when the freed mask is smaller than one hidden row per token (k = 0)
      - hidden                     does not fit and the freed mask holds two or more rows (k >= 2)
    k = floor(mask bytes / (4 u hidden))

On a discrete device (llama.cpp's CUDA build) the masks live in the host's staging buffer, so R there has
no mask term (k = 0, mask 0); the H200's buffers do not check it: none of its MoE models has shared experts
but DeepSeek-V2-Lite, which fits (R = 8 x hidden either way) and leaves 14 x hidden on that device.
Without shared experts the layer's output falls into the freed regions below and nothing is left (R = 0).
One expert per token is left out too: Llama 4 weights its input before the experts and copies its single
expert's view, and its buffers (1 to 3 x hidden under the logits, by context and flash attention) follow no
rule found.
Read off llama.cpp's own buffers (memory-fit pass, flash attention on, 4K-131K cells): ERNIE-4.5-21B (6 of 64
experts, two shared, hidden 2,560 <= 2 x 1,536) 8 x hidden, 6 x and 10 x given 4 and 8 experts per token, 0
without its shared experts, 2 x hidden given expert_ff 1,024; Hunyuan-A13B 10 x hidden; DeepSeek-V2-Lite
8 x hidden; GLM-4.5 / -Air, dots.llm1, DeepSeek-V3 and Kimi-K2 (does not fit) 2 x hidden plus the mask at
4K cells, 1 x hidden at 32K; Kimi-K2 made 4,096 wide (fits) 10 x hidden plus the mask (43,008 floats).  Before
this rule (2026-12-05) only MLA models carried a residue (a cap of 16,384 floats fitted to DeepSeek-V2-Lite
and DeepSeek-V3), and ERNIE-4.5, Hunyuan, GLM-4.5 and dots.llm1 were 6-35 % under llama.cpp's buffer.
Ungated MoE (Nemotron-H's squared ReLU) is left out: its layout is not this one.

A fused attn_qkv (llama.cpp's phi3 graph: Phi-3 / Phi-4, whose q, k and v are views of one projection)
leaves rows under the logits too, only while the freed mask is smaller than one hidden row:

    R_qkv = 2 * hidden + mask floats per token    k = 0
          = 0                                     k >= 1

Read off llama.cpp's memory-fit pass on Phi-3.5-mini and its copies with 8 KV heads, ff 4,096, a 100,352
vocabulary or 8 layers (2K-8K cells with flash attention; 16K where the head is the largest moment): exactly
that at every point; Phi-4 and Phi-4-mini at 4K (k = 0) and 16K (k >= 1) too.  Before it Phi-3.5-mini and
Phi-4 were 16 % and 10 % under at 4K cells.  GLM-4-0414, which fuses only gate and up, leaves nothing.  On
a discrete device, as for R, the mask term is 0 and k = 0 (not checked on a GPU: no Phi model was measured
there).

"torch" — a PyTorch engine's activation peak (vLLM, SGLang; per device; T = the profile's
``max_batched_tokens``, vLLM's max_num_batched_tokens default 8192; tp = tensor-parallel size):

    activation peak = 2 * T * (act_hidden_factor * hidden + act_ff_factor * ff_max / tp)
                      + logits_factor * 4 * min(T, 256) * n_vocab / tp
    compute = compute_base_bytes + activation peak + cuda_graph_bytes

Context overhead per device: a CUDA / ROCm context and allocator pools on discrete GPUs (prior 400 MiB; NVIDIA
contexts take a few hundred MiB; llama.cpp's is fitted from NVML's per-process peak of the H200 runs less the
buffers on the device, 600-706 MiB, results/runs/gpu-lease--nvidia-hopper--vm.jsonl), 400 MiB on NPUs, 0 on
unified memory and CPUs (their OS reserve is in the usable fraction instead).  Usable fraction of device
memory (prior): gpu 0.96, npu 0.95, unified 0.75 (macOS caps GPU wired memory near 3/4 of RAM on large
machines), cpu 0.90 (OS and other processes); for engines
that reserve memory up front (vLLM) the gpu / npu fraction is 1.0 because gpu_memory_utilization already sets
the reservation.  Each engine starts from the memory_prior.json entry its profile names (``memory_prior``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path

from estimator.engines import ENGINES, get_engine
from estimator.physics.quant import kv_type_bytes
from estimator.physics.weights import FUSED_QKV_ARCHS
from estimator.specs import CHUNKED, FULL, SLIDING, HardwareSpec, ModelSpec, QuantSpec, Workload

MIB = 2**20
_PRIOR_PATH = Path(__file__).resolve().parent.parent / "data" / "memory_prior.json"


@dataclass(frozen=True)
class MemoryCoefficients:
    """Free coefficients of the runtime-memory model (flat floats; bytes where the name says so)."""

    compute_base_bytes: float = 0.0
    logits_factor: float = 1.0
    act_hidden_factor: float = 4.0
    act_ff_factor: float = 3.0
    ungated_ff_factor: float = 1.0
    kq_factor: float = 1.0
    mask_factor: float = 1.0
    out_hidden_factor: float = 2.0
    attn_hidden_factor: float = 5.5
    mla_attn_factor: float = 1.0
    head_residue_factor: float = 1.0
    dsa_factor: float = 1.0
    cuda_graph_bytes: float = 0.0
    context_overhead_gpu_bytes: float = 400 * MIB
    context_overhead_npu_bytes: float = 400 * MIB
    context_overhead_unified_bytes: float = 0.0
    context_overhead_cpu_bytes: float = 0.0
    usable_fraction_gpu: float = 0.96
    usable_fraction_npu: float = 0.95
    usable_fraction_unified: float = 0.75
    usable_fraction_cpu: float = 0.90

    @classmethod
    def from_dict(cls, d: dict | None, engine: str = "llama.cpp") -> MemoryCoefficients:
        """Defaults of ``engine`` overridden by the known float keys of ``d`` (unknown keys are ignored)."""
        base = asdict(default_coefficients(engine))
        names = {f.name for f in fields(cls)}
        for k, v in (d or {}).items():
            if k in names and isinstance(v, int | float):
                base[k] = float(v)
        return cls(**base)

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


@lru_cache(maxsize=1)
def _prior() -> dict[str, dict[str, float]]:
    if _PRIOR_PATH.is_file():
        data = json.loads(_PRIOR_PATH.read_text())
        return {k: v for k, v in data.get("engines", {}).items() if isinstance(v, dict)}
    return {}


def _prior_key(engine: str) -> str:
    """The memory_prior.json entry an engine starts from: its profile's ``memory_prior`` (an engine without a
    profile, e.g. one of imported records, uses its own name)."""
    if engine in ENGINES:
        return get_engine(engine).memory_prior
    return engine


def default_coefficients(engine: str = "llama.cpp") -> MemoryCoefficients:
    """The documented prior for ``engine`` (estimator/data/memory_prior.json over the dataclass defaults)."""
    names = {f.name for f in fields(MemoryCoefficients)}
    over = {k: float(v) for k, v in _prior().get(_prior_key(engine), {}).items() if k in names}
    return MemoryCoefficients(**over)


def default_memory_coefficients(engine: str) -> dict[str, float]:
    """Flat dict form of the prior (what calibration starts its fit from)."""
    return default_coefficients(engine).to_dict()


DEFAULT_MEMORY_COEFFICIENTS = {e: default_memory_coefficients(e) for e in ENGINES}


@lru_cache(maxsize=8)
def _default_cached(engine: str) -> MemoryCoefficients:
    return default_coefficients(engine)


def coerce(coeffs: MemoryCoefficients | dict | None, engine: str) -> MemoryCoefficients:
    if isinstance(coeffs, MemoryCoefficients):
        return coeffs
    return MemoryCoefficients.from_dict(coeffs, engine)


def usable_fraction(hardware: HardwareSpec, coeffs: MemoryCoefficients) -> float:
    return float(getattr(coeffs, f"usable_fraction_{hardware.kind}", coeffs.usable_fraction_gpu))


def usable_device_bytes(
    hardware: HardwareSpec, coeffs: MemoryCoefficients, reserve: float | None = None
) -> int:
    """Memory one device offers the engine (bytes).

    A device with a GPU working-set limit (``HardwareSpec.gpu_working_set_bytes``: Apple's Metal limit,
    raised by ``iogpu.wired_limit_mb``) offers that limit; others offer ``usable_fraction(kind) x memory``.
    An engine that reserves memory up front (``reserve`` = its gpu_memory_utilization) takes that fraction of
    it, with the gpu / npu usable fraction capped at 1 (the reservation already leaves the rest).
    """
    limit = hardware.gpu_working_set_bytes
    mem = float(hardware.memory_bytes or 0)
    if reserve is not None:
        return int(reserve * (limit if limit else mem * min(1.0, usable_fraction(hardware, coeffs))))
    return int(limit) if limit else int(usable_fraction(hardware, coeffs) * mem)


def reserved_usable_bytes(
    hardware: HardwareSpec, coeffs: MemoryCoefficients, fraction: float, fixed_bytes: float, of_free: bool
) -> float:
    """Memory one device offers an engine that reserves memory up front (bytes), given ``fixed_bytes`` =
    its weights + runtime buffers + context overhead on that device.

    A fraction of the whole device (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static):
    ``usable_device_bytes(fraction)``.  A fraction of the memory still free after the fixed part
    (``of_free``: TensorRT-LLM --kv_cache_free_gpu_memory_fraction): fixed + fraction x (M - fixed), M the
    whole usable device (``usable_device_bytes`` at 1.0); the KV pool is the second term."""
    if not of_free:
        return float(usable_device_bytes(hardware, coeffs, fraction))
    whole = float(usable_device_bytes(hardware, coeffs, 1.0))
    return fixed_bytes + fraction * (whole - fixed_bytes)


def context_overhead_bytes(hardware: HardwareSpec, coeffs: MemoryCoefficients) -> int:
    return int(getattr(coeffs, f"context_overhead_{hardware.kind}_bytes", coeffs.context_overhead_gpu_bytes))


@dataclass(frozen=True)
class RuntimeEstimate:
    """Per-device runtime memory (bytes).  output_bytes and host_compute_bytes live in host RAM on discrete
    devices; on unified / CPU devices memory.py counts them on the device."""

    compute_bytes: int
    output_bytes: int
    context_overhead_bytes: int
    host_compute_bytes: int
    coefficients: str  # "prior" (the values equal the shipped prior) or "custom" (anything else)
    # compute_bytes is the engine's own graph replayed through its allocator (EngineProfile.
    # replayed_compute_bytes), not the formula: no coefficient enters it
    compute_replayed: bool = False


def _ff_widths(m: ModelSpec) -> tuple[int, int]:
    """(dense, MoE) FFN widths of a token: the dense width (twice it on a double-wide model's KV-shared
    layers); a MoE layer's selected experts plus its shared ones (0 without experts)."""
    dense = max(m.ffn_width(i) for i in range(m.n_layers))
    moe = m.moe.n_experts_used * m.moe.expert_ff + m.moe.n_shared_experts * m.moe.shared_ff if m.moe else 0
    return dense, moe


def _ff_max(m: ModelSpec) -> int:
    """The widest FFN of a token (``_ff_widths``)."""
    return max(_ff_widths(m))


def _ungated_ff(m: ModelSpec) -> int:
    """Floats per token an ungated FFN (squared ReLU: Nemotron-H) holds at its widest: each selected expert's
    up output and its down output at the expert width (the latent width of a latent MoE, else hidden), before
    the weighted sum; a dense FFN is taken as one expert of ff (by analogy: no dense ungated model in the
    catalog, and the variant tried was not the largest moment, so this case is not measured).  The shared
    expert runs apart and is not in it."""
    if m.moe is None:
        return m.intermediate_size + m.hidden_size
    return m.moe.n_experts_used * (m.moe.expert_ff + (m.moe.latent_size or m.hidden_size))


def _down_above(m: ModelSpec) -> bool:
    """Whether a gated MoE layer's down output (n_used x hidden) does not fit the hole its gate and up
    outputs (n_used x expert_ff each) leave: hidden > 2 x expert_ff (module notes)."""
    return m.moe is not None and m.ffn_gated and m.hidden_size > 2 * m.moe.expert_ff


def _down_above_floats(m: ModelSpec) -> int:
    """Floats per token the MoE layer's moment holds above its gate, up and product: the down output
    (n_used x hidden) when it does not fit their hole, else 0."""
    return m.moe.n_experts_used * m.hidden_size if m.moe is not None and _down_above(m) else 0


def _moe_head_floats(m: ModelSpec, mask_bytes: float, u: int) -> float:
    """Floats per token a gated MoE model with shared experts leaves under its logits (R in the module notes);
    0 without shared experts, with one expert per token (Llama 4: its layout is not this one), for an ungated
    FFN, or when the last layer is dense."""
    moe = m.moe
    if (
        moe is None
        or not m.ffn_gated
        or moe.n_shared_experts <= 0
        or moe.n_experts_used < 2
        or (m.n_layers - 1) in moe.dense_layers
    ):
        return 0.0
    h = m.hidden_size
    k = int(mask_bytes // (4 * u * h))
    above = _down_above(m)
    r = 2.0 * h if above else float((moe.n_experts_used + 2) * h)
    if k == 0:
        r += mask_bytes / (4 * u)
    elif above and k >= 2:
        r -= h
    return r


def _fused_qkv_head_floats(m: ModelSpec, mask_bytes: float, u: int) -> float:
    """Floats per token a fused-attn_qkv graph (llama.cpp phi3) leaves under its logits (R_qkv in the module
    notes): 2 x hidden plus the mask while the freed mask is smaller than one hidden row per token, else 0."""
    if m.architecture not in FUSED_QKV_ARCHS or mask_bytes >= 4 * u * m.hidden_size:
        return 0.0
    return 2.0 * m.hidden_size + mask_bytes / (4 * u)


def _dsa_floats(m: ModelSpec, n_kv: int) -> float:
    """Floats per token DeepSeek Sparse Attention adds to the attention moment (module docstring): every
    layer's top-k indices (min(top_k, cells) int32 each, alive to the last layer's attention) and 1.5 x cells
    (the indexer's F32 scores and the F16 top-k mask).  Measured on one CPU backend; on a multi-device layer
    split each device is given every layer's indices (an upper bound: a device holds its own layers')."""
    mla = m.mla
    assert mla is not None
    top_k = min(mla.index_topk or n_kv, n_kv)
    return top_k * m.n_layers + 1.5 * n_kv


def runtime_buffers(
    model: ModelSpec,
    quant: QuantSpec | None,
    hardware: HardwareSpec,
    workload: Workload,
    mem_coeffs: MemoryCoefficients | dict | None = None,
    replay: bool = True,
) -> RuntimeEstimate:
    """Runtime buffers of one device (formulas in the module docstring).  ``quant`` does not change them in
    this model (kept for the contract: a future term may depend on dequantization buffers).  With ``replay``
    the compute buffers come from the engine's own graph where its profile replays one
    (``EngineProfile.replayed_compute_bytes``: llama.cpp on a CPU, for the architectures
    estimator.engines.llama_cpp_graph builds); without it, always from the formula (calibration fits the
    formula's coefficients)."""
    engine = workload.engine
    profile = get_engine(engine)
    c = coerce(mem_coeffs, engine)
    label = "prior" if c == _default_cached(engine) else "custom"
    m = model
    overhead = context_overhead_bytes(hardware, c)
    discrete = hardware.kind in ("gpu", "npu")
    if profile.runtime_model == "torch":
        tp = max(1, workload.n_devices if workload.split == "tp" else 1)
        t = profile.max_batched_tokens
        act = 2 * t * (c.act_hidden_factor * m.hidden_size + c.act_ff_factor * _ff_max(m) / tp)
        logits = c.logits_factor * 4 * min(t, 256) * m.vocab_size / tp
        compute = c.compute_base_bytes + act + logits + c.cuda_graph_bytes
        return RuntimeEstimate(int(compute), 0, overhead, 0, label)
    wl = workload
    lay = profile.kv_layout(
        m, wl.n_ctx, wl.n_seq, wl.n_ubatch, swa_full=wl.swa_full, unified=wl.kv_unified, pad=wl.kv_pad
    )
    u = max(1, min(wl.n_ubatch, wl.n_batch, lay.full))
    kinds = {profile.layer_kind(m, k) for k in m.layer_types}
    cells = [lay.full_per_stream] if FULL in kinds else []
    if SLIDING in kinds or CHUNKED in kinds:
        cells.append(lay.windowed_per_stream)
    mask_bytes = (2 if wl.flash_attn else 4) * u * sum(cells)  # F16 with flash attention, else F32
    mask = c.mask_factor * mask_bytes
    # the input embeddings are looked up and staged on the host when the token embedding stays there: the
    # device's head moment holds one F32 hidden row per token less than the CPU graph's
    staged = 1 if discrete and profile.embedding_on_host else 0
    logits = 4 * u * (c.logits_factor * m.vocab_size + (c.out_hidden_factor - staged) * m.hidden_size)
    mla = m.mla
    # on a discrete device the masks are built in the host's staging buffer (host_compute below): no mask
    # under the device's logits
    device_mask_bytes = 0 if discrete else mask_bytes
    moe_rows = _moe_head_floats(m, device_mask_bytes, u)
    kept = m.hidden_size if m.architecture in profile.head_keeps_hidden_archs and moe_rows == 0 else 0
    residue = moe_rows + kept + _fused_qkv_head_floats(m, device_mask_bytes, u)
    logits += 4 * u * c.head_residue_factor * residue
    if mla is not None:
        r = mla.kv_lora_rank
        attn = mask + 4 * u * c.mla_attn_factor * m.n_heads * (3 * r + mla.qk_rope_head_dim)
    else:
        attn = mask + 4 * u * c.attn_hidden_factor * m.hidden_size
    if not wl.flash_attn and cells:
        attn += c.kq_factor * 4 * u * m.n_heads * max(cells)
        if mla is not None:
            attn += max(cells) * kv_type_bytes(wl.kv_dtype, mla.kv_lora_rank)
    if mla is not None and mla.index_n_heads and cells:
        attn += c.dsa_factor * 4 * u * _dsa_floats(m, max(cells))
    # the mask is freed after the last layer's attention: only a model with more than one layer runs an FFN
    # while it lives
    if m.ffn_gated:  # the down output above its gate and up belongs to the MoE layer's moment only
        dense_ff, moe_ff = _ff_widths(m)
        ffn_width = max(c.act_ff_factor * dense_ff, c.act_ff_factor * moe_ff + _down_above_floats(m))
    else:
        ffn_width = c.ungated_ff_factor * _ungated_ff(m)
    ffn = (mask if m.n_layers > 1 else 0) + 4 * u * (c.act_hidden_factor * m.hidden_size + ffn_width)
    compute = c.compute_base_bytes + max(logits, attn, ffn)
    replayed = profile.replayed_compute_bytes(m, hardware, wl, lay, u) if replay else None
    output = 4 * m.vocab_size * wl.n_seq
    host_compute = 2 * 4 * u * m.hidden_size + mask if discrete else 0
    if replayed is not None:
        return RuntimeEstimate(int(replayed), int(output), overhead, int(host_compute), label, True)
    return RuntimeEstimate(int(compute), int(output), overhead, int(host_compute), label)
