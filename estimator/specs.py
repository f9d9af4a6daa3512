"""Frozen input specs of the sizing model: model architecture, hardware, quantization and workload.

Specs are inert: constructing one never touches the network, the environment or the disk.
Loaders (``estimator.catalog.data``, ``estimator.catalog.hfconfig``, ``estimator.catalog.ggufmodel``) build
them from files.

Units live in names: ``*_bytes`` (bytes), ``*_gbs`` (10^9 B/s), ``*_tflops`` (10^12 FLOP/s), ``*_w`` (watts),
``*_usd`` (US dollars).  GiB = 2^30 bytes, GB = 10^9 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

GIB = 2**30
GB = 10**9

# the catalog weight format of a published checkpoint, by its dtype (ModelSpec.native_dtype).  A Hugging Face
# ``quant_method: fp8`` checkpoint is transformers' fine-grained FP8: E4M3 weights with one scale per
# 128 x 128 block (``weight_block_size``), as DeepSeek-V3 / R1 / V3.2, Kimi K2, MiniMax-M2 and Qwen's -FP8
# repositories publish theirs (a per-tensor or per-channel FP8 checkpoint holds the same bytes within 0.1 %)
CHECKPOINT_QUANTS = {
    "bf16": "BF16", "f16": "F16", "f32": "F32", "fp8": "FP8-BLOCK", "mxfp4": "MXFP4", "nvfp4": "NVFP4",
    "awq": "AWQ-INT4",
}  # fmt: skip
# the checkpoint dtype of a catalog format a checkpoint is published in (tools/catalog/model_aliases.json)
FORMAT_DTYPES = {**{q: d for d, q in CHECKPOINT_QUANTS.items()}, "FP8": "fp8"}

# Per-layer attention kinds (ModelSpec.layer_types).
FULL = "full"  # full causal attention: KV grows with context
SLIDING = "sliding"  # sliding-window attention: KV capped at ModelSpec.window tokens
CHUNKED = "chunked"  # chunked local attention (Llama 4): KV capped at ModelSpec.window tokens
# multi-device splits (Workload.split): tensor parallel, pipeline / layer split, attention data parallel
SPLITS = ("tp", "pp", "dp")
LINEAR = "linear"  # linear attention (Gated DeltaNet): fixed per-sequence state
MAMBA = "mamba"  # SSM layer (Mamba2): fixed per-sequence state
NONE = "none"  # layer without a token mixer that needs a cache (e.g. Nemotron-H MLP-only layers)
LAYER_KINDS = (FULL, SLIDING, CHUNKED, LINEAR, MAMBA, NONE)


class SpecError(ValueError):
    """Bad or incomplete input: the message names what is wrong (a missing key, an unknown id)."""


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts feed-forward layout.

    n_experts routed experts of width expert_ff, n_experts_used of them per token, plus n_shared_experts
    always-on experts of width shared_ff.  Layers listed in ``dense_layers`` use a dense FFN of width
    ModelSpec.intermediate_size instead.
    """

    n_experts: int
    n_experts_used: int
    expert_ff: int
    n_shared_experts: int = 0
    shared_ff: int = 0
    dense_layers: tuple[int, ...] = ()
    # Latent MoE (Nemotron 3): routed experts work on a latent of this width, with hidden->latent and
    # latent->hidden projections per MoE layer (0: experts read the hidden state directly).
    latent_size: int = 0


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).

    The cache holds kv_lora_rank + qk_rope_head_dim elements per token per layer (shared by all heads).
    DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5: config index_n_heads / index_head_dim / index_topk)
    adds a lightning indexer per layer: index_n_heads query heads of index_head_dim scoring every cached
    token through one cached key of index_head_dim per token and layer; attention then reads the index_topk
    best tokens.  index_n_heads = 0: no indexer.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0


@dataclass(frozen=True)
class StateSpec:
    """Fixed per-sequence state of linear-attention / SSM layers, in elements per layer.

    recurrent_elems: recurrent (or SSM) state; conv_elems: short-convolution state.
    Independent of context length.
    """

    recurrent_elems: int
    conv_elems: int
    # Extra widths needed for weights of linear-attention / SSM layers (0 when unknown).
    n_key_heads: int = 0
    n_value_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    conv_kernel: int = 0
    # the recurrent state's dtype the checkpoint asks for (config.json ``mamba_ssm_dtype``, Qwen3.5
    # "float32"; Nemotron-H ``mamba_ssm_cache_dtype``); "" when it states none.  An engine decides what it
    # keeps (EngineProfile.state_recurrent_bytes); a cache precision, not architecture (not fingerprinted)
    ssm_dtype: str = ""


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only LLM, enough to size weights, KV cache and FLOPs.

    ``head_dim`` is the effective per-head dimension (the config's explicit ``head_dim`` when given,
    never silently hidden/heads when the config says otherwise).  ``layer_types`` has one entry per layer
    from LAYER_KINDS.  ``window`` is the sliding / chunk size in tokens for SLIDING / CHUNKED layers.
    """

    id: str
    name: str
    architecture: str  # HF model_type of the text model, e.g. "llama", "qwen3_moe", "deepseek_v3"
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense FFN width (0 when every layer is MoE)
    vocab_size: int
    max_context: int
    layer_types: tuple[str, ...]
    tie_embeddings: bool = False
    window: int | None = None
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    state: StateSpec | None = None
    hf_id: str | None = None
    arch_class: str | None = None  # architectures[0] of config.json
    license: str | None = None
    native_dtype: str = "bf16"  # dtype of the official checkpoint: bf16 | fp8 | mxfp4 | ...
    # config.json declares ``auto_map``: the repository ships its own config / model / tokenizer code, which a
    # checkpoint engine runs only when told to (vLLM / SGLang --trust-remote-code); not a sizing fact
    custom_code: bool = False
    qkv_bias: bool = False
    source: str = ""
    verified: bool = False
    published_total_params: str | None = None
    published_active_params: str | None = None
    # Exact tensor inventory of a GGUF file: (name, ggml type name, n_elements, n_bytes).
    gguf_tensors: tuple[tuple[str, str, int, int], ...] | None = None
    gguf_path: str | None = None
    notes: tuple[str, ...] = ()
    # Full-attention layers with their own KV geometry (Gemma 4: 2 KV heads x 512 on global layers, K == V).
    global_head_dim: int | None = None
    global_n_kv_heads: int | None = None
    # FULL layers have no v_proj (attention_k_eq_v: V is the K projection); engines still cache V
    k_eq_v: bool = False
    ffn_gated: bool = True  # False: up/down MLP without a gate projection (Nemotron-H relu2)
    # q projection also yields an output gate (Qwen3-Next / Qwen3.5): 2x q width
    attn_output_gate: bool = False
    # Per-layer input embeddings (Gemma 4 E2B / E4B: hidden_size_per_layer_input): a second token table of
    # vocab x (per_layer_input x n_layers) elements, looked up per token, projected from the hidden state too
    # and fed to every layer through a small gate / projection pair (0: none)
    per_layer_input: int = 0
    # The last n_kv_shared_layers layers attend with the K / V of the last earlier layer of their kind: no K /
    # V projections (no k norm) and no cache of their own (Gemma 4 E2B / E4B num_kv_shared_layers)
    n_kv_shared_layers: int = 0
    # the KV-shared layers run an FFN of 2 x intermediate_size (Gemma 4 E2B use_double_wide_mlp)
    double_wide_mlp: bool = False

    def kv_shared(self, layer: int) -> bool:
        """True when ``layer`` reuses an earlier layer's K / V (``n_kv_shared_layers``): no K / V weights, no
        cache; llama.cpp needs a non-shared layer before it (``n_layer_kv_from_start`` > 0)."""
        return 0 < self.n_layers - self.n_kv_shared_layers <= layer

    def ffn_width(self, layer: int) -> int:
        """The dense FFN width of ``layer``: intermediate_size, twice that on a KV-shared layer of a
        double-wide model."""
        return self.intermediate_size * (2 if self.double_wide_mlp and self.kv_shared(layer) else 1)

    def depth_proxy(self, n_layers: int) -> ModelSpec:
        """The model cut to its first ``n_layers`` layers (same widths, the first entries of the layer
        pattern, no GGUF inventory): the depth-reduced proxy the harness builds and measures.  SpecError
        unless 1 <= n_layers <= self.n_layers.  The KV-shared layers among the first ``n_layers`` stay
        shared."""
        n = int(n_layers)
        if not 1 <= n <= self.n_layers:
            raise SpecError(f"n_layers must be in 1..{self.n_layers} for {self.id}, got {n_layers}")
        shared = max(0, n - (self.n_layers - self.n_kv_shared_layers)) if self.n_kv_shared_layers else 0
        return replace(
            self, n_layers=n, layer_types=self.layer_types[:n], gguf_tensors=None, gguf_path=None,
            n_kv_shared_layers=shared,
        )  # fmt: skip


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator (or CPU socket) as catalogued.

    memory_bytes: device memory (decimal-labelled GB in the source, binary on HBM/GDDR: "80 GB" = 80 GiB).
    bandwidth_gbs: theoretical peak memory bandwidth, 10^9 B/s.
    bf16_tflops / fp8_tflops: dense tensor throughput, 10^12 FLOP/s (None when unknown / unsupported).
    host_bandwidth_gbs: host RAM bandwidth used for CPU / MoE-expert offload (None: a default applies).
    kind: "gpu" | "unified" (Apple / APU: memory shared with the host) | "cpu" | "npu".
    n_dies: compute dies presented as one device (Apple Ultra, Blackwell, MI300-series: > 1).
    bandwidth_measured_gbs: achievable memory bandwidth where a measurement is published (None: unknown).
    cpu_cores / cpu_clock_ghz (kind "cpu"): physical cores and their maximum clock, 10^9 Hz (None: unknown);
    a CPU's GEMM rate scales with them (covariate ``cpu_size``, ``estimator.physics.covariates``).
    cpu_isa (kind "cpu"): its ISA features where known, as harness.hwdetect names them (``amx``, ``avx512``,
    ``avx512_bf16``, ``avx512_vnni``, ``avx2``, ``neon``, ...): detected, or catalogued
    (tools/catalog/hardware_covariates.csv); an engine whose CPU GEMMs use a matrix extension reaches another
    rate where the CPU has it (``EngineProfile.cpu_matrix_gemm``, covariate ``cpu_matrix``); () = not known.
    vector_fp16_tflops: the shader (vector ALU) FP16 rate of a GPU whose bf16_tflops is a matrix-engine rate,
    10^12 FLOP/s, where catalogued: what an engine backend that cannot issue the matrix instructions on the
    device reaches (``EngineProfile.vector_gemm``); None: not catalogued.
    measured_as: for a detected host outside the catalog, the device key its own runs carry in the
    calibration data (``"<host>:<device name>"``, calibration.dataset.device_key); when the coefficients hold
    that device, its calibrated effects answer instead of the catalog family's level
    (``estimator.physics.coefficients.calibration_keys``).  "" for a catalog device.
    """

    id: str
    name: str
    vendor: str
    family: str
    kind: str
    memory_bytes: int | None
    bandwidth_gbs: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    tdp_w: float | None = None
    interconnect_gbs: float | None = None
    price_usd: float | None = None
    year: int | None = None
    host_bandwidth_gbs: float | None = None
    memory_type: str | None = None
    n_dies: int = 1
    bandwidth_measured_gbs: float | None = None
    cpu_cores: int | None = None
    cpu_clock_ghz: float | None = None
    cpu_isa: tuple[str, ...] = ()
    vector_fp16_tflops: float | None = None
    measured_as: str = ""
    status: str = "unverified"  # verified | derived | partial | unverified (from the catalog's notes)
    source: str = ""
    # the most memory the GPU may use when less than usable_fraction x memory_bytes says: Apple's Metal
    # working set (macOS default about 2/3 to 3/4 of RAM, ``iogpu.wired_limit_mb`` when raised); None: the
    # usable fraction applies
    gpu_working_set_bytes: int | None = None
    # how this spec differs from the catalog row (figures overridden by the user, detected on this machine)
    notes: tuple[str, ...] = ()


# Serving request lengths a caller names (report --lengths, predict's lengths column): "spread" lengths that
# vary (real traffic, random-length datasets) or "fixed" (every request exactly isl / osl tokens)
LENGTHS = ("spread", "fixed")


def equal_lengths(lengths: str, where: str) -> bool:
    """True for "fixed", False for "spread" (``LENGTHS``, case-insensitive); SpecError naming ``where`` (the
    option or column that said it) otherwise."""
    value = lengths.strip().lower()
    if value not in LENGTHS:
        raise SpecError(f"{where}: {lengths!r} is not {' or '.join(LENGTHS)}")
    return value == "fixed"


@dataclass(frozen=True)
class Workload:
    """What the engine is asked to do.

    n_ctx: context size allocated (tokens per sequence).  n_seq: concurrent sequences (batch).
    n_prompt / n_gen / n_depth: llama-bench semantics (pp{n_prompt} or tg{n_gen} on top of n_depth
    tokens already in the KV cache).  kv_dtype: f16 | bf16 | f32 | q8_0 | q4_0 | fp8.
    offload_bytes: weight bytes kept in host RAM.  moe_offload_layers: number of layers whose routed
    experts stay in host RAM (llama.cpp --n-cpu-moe).
    n_ubatch: tokens per micro-batch (llama.cpp -ub; sizes the compute buffers and the sliding-window cache).
    flash_attn: flash attention on (llama.cpp -fa on / auto) or off; ``EngineProfile.flash_attn_for`` turns a
    user's on / off / auto into this flag.
    swa_full: sliding-window layers get a full-size cache (llama.cpp --swa-full).
    kv_unified: the n_seq sequences share one KV cache (llama.cpp --kv-unified, what the launch command uses
    for several slots); False gives each sequence its own stream of n_ctx cells and window cells.
    kv_pad: KV cell padding of the engine build (0 = the engine's current rule; llama.cpp builds of May 2024 -
    Oct 2025 padded to 32 without flash attention).  The three KV options are llama.cpp's; vLLM ignores them.
    """

    n_ctx: int = 8192
    kv_dtype: str = "f16"
    n_seq: int = 1
    n_prompt: int = 512
    n_gen: int = 128
    n_depth: int = 0
    n_batch: int = 2048
    n_ubatch: int = 512
    flash_attn: bool = True
    engine: str = "llama.cpp"  # a name of estimator.engines.ENGINES
    n_devices: int = 1
    # tp (tensor parallel / llama.cpp -sm tensor) | pp (pipeline / layer split) | dp (attention data parallel,
    # experts expert-parallel: estimator.physics.memory); callers take the engine profile's default_split when
    # the user does not choose
    split: str = "tp"
    offload_bytes: int = 0
    moe_offload_layers: int = 0
    # fraction of device memory an engine that reserves memory up front takes (vLLM --gpu-memory-utilization)
    gpu_memory_utilization: float = 0.92
    concurrency: int = 1
    # the engine's backend (CUDA, ROCm, Metal, Vulkan, SYCL, CANN, CPU, ...); "" = the engine profile's
    # default for the device (EngineProfile.backend_for); what runs where is estimator/data/support.csv
    backend: str = ""
    swa_full: bool = False
    kv_unified: bool = True
    kv_pad: int = 0


@dataclass(frozen=True)
class QuantSpec:
    """A weight format: the ggml (or engine) type per tensor class.

    ``types`` maps a tensor class to a storage type name (a key of estimator.physics.quant.TYPE_SIZES).
    Tensor classes: token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down,
    ffn_gate_exps, ffn_up_exps, ffn_down_exps, ffn_*_shexp, norm (1-D), other.
    """

    name: str
    default_type: str
    types: dict[str, str] = field(default_factory=dict)
    description: str = ""
    # weight containers the format exists in: "gguf" (llama.cpp) and / or "safetensors" (HF checkpoints that
    # vLLM / SGLang load); an engine profile runs the formats of its container
    containers: tuple[str, ...] = ("gguf",)
    # the weights of one GGUF file as stored (ModelSpec.gguf_tensors: exact bytes per tensor), not a recipe;
    # ``estimator.physics.quant.file_quant`` builds it, named after the file's own type ("Q8_0 (GGUF file)")
    from_file: bool = False
    # the engine's loader allocates a V projection on K==V full layers (ModelSpec.k_eq_v) and fills it with
    # K's weights (vLLM's and SGLang's fused qkv_proj, TensorRT-LLM's Gemma 4 weight mapper), so those layers
    # hold attn_v bytes as the other layers do; set by the engine profile's ``weight_format``
    # (physics.quant.as_listed drops it for typing)
    fills_k_eq_v: bool = False
