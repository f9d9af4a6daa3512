"""TensorRT-LLM (``trtllm-serve``, its PyTorch backend): its profile.

Facts from NVIDIA/TensorRT-LLM (read 2026-12): ``tensorrt_llm/commands/serve.py`` (``get_llm_args``: the
defaults of ``trtllm-serve``), ``tensorrt_llm/builder.py`` (``BuildConfig``) and ``tensorrt_llm/llmapi/
llm_args.py`` (``KvCacheConfig``, ``CudaGraphConfig``):

* Weights: Hugging Face checkpoints (``--backend pytorch``, the default since 1.0); quantized formats are
  pre-quantized checkpoints (NVIDIA ModelOpt FP8 / NVFP4 / INT4-AWQ, the published MXFP4 of gpt-oss): the
  PyTorch backend does not quantize a bf16 checkpoint at load time, and it does not load GGUF files.
* KV cache: paged blocks of ``tokens_per_block`` = 32 tokens; dtype ``auto`` (the model's) or ``fp8``
  (``kv_cache_config.dtype``, set in an ``--extra_llm_api_options`` YAML file: ``trtllm-serve`` has no flag
  for it).  Sliding-window layers are sized like vLLM's (window + one block per sequence), an assumption: the
  variable-sliding-window cache (``max_attention_window`` per layer) is what TensorRT-LLM offers for them.
* Memory: the KV cache takes ``--kv_cache_free_gpu_memory_fraction`` (default 0.9) of the memory that is
  still free **after** the weights and the runtime buffers are allocated (``reserves_free_memory``), unlike
  vLLM's and SGLang's fractions of the whole device.  Activations and CUDA graphs follow the same "torch"
  runtime model as vLLM (estimator.physics.runtime, the vLLM memory prior) with a step of ``max_num_tokens``.

Scheduler (``scheduler``): in-flight batching with the defaults of ``trtllm-serve``: ``max_num_tokens``
8,192 and ``max_batch_size`` 2,048 (``BuildConfig``); context (prompt) and generation requests share one
forward step; chunked prefill is off (``enable_chunked_prefill=False``), so a prompt is scheduled whole; the
capacity scheduler is ``GUARANTEED_NO_EVICT``: a request starts only when the KV blocks of its whole
prompt + output fit in the pool (``SchedulerSpec.reserves_whole_request``).  CUDA graphs are captured for
batch sizes 1-31, 32, 64, 128 with padding off (``CudaGraphConfig.enable_padding=False``): a batch of another
size runs without a graph and is never padded, so no padding is modelled.

Recurrent hybrids (Qwen3-Next, Nemotron-H; ``tensorrt_llm/_torch/pyexecutor/kv_cache/mamba_cache_manager/``
and ``_util.py``, read 2026-12 at commit 28295084): the default managers (``MambaHybridCacheManagerV2`` for
Qwen3-Next, ``CppMambaHybridCacheManager`` for Nemotron-H) keep one recurrent + conv state slot per request of
``max_batch_size`` x pp, plus one CUDA-graph padding slot (and one more under attention data parallelism), and
carve them out of the KV budget (the 0.9 fraction): the Cpp manager's cost model is slope x tokens +
(max_batch_size x pp + 1) x state bytes, and V2 refuses to start when the budget does not hold the slots plus
one attention page (``state_pool``).  With trtllm-serve's default max_batch_size of 2,048 that is 2,049
states: Qwen3-Next's 37.7 MiB each in bf16 is 75 GiB per GPU, so a hybrid is launched with --max_batch_size
set (the ``launch`` below sets it to the concurrency).  The state dtype is the model's (bf16) unless the
checkpoint's config.json names ``mamba_ssm_cache_dtype`` (Nemotron-H: float32); Qwen3.5's ``mamba_ssm_dtype``
is not read (``model_loader.validate_and_set_mamba_ssm_cache_dtype``,
``config_utils.resolve_ssm_cache_dtype``).  Heads and conv channels split over tensor parallelism, whole per
rank under attention data parallelism.  V2 splits its pool between state and attention pages by
a "typical step" (``avg_seq_len``, unset: max_seq_len / 2) and gives the state its share of that step when
that is more than the minimum (``state_pool``; the C++ storage manager's rounding of the pool to grains of up
to 32 MiB is not modelled); block reuse's state snapshots (off for these models by default) are not
modelled.

``launch``: ``trtllm-serve <checkpoint> --backend pytorch --max_seq_len n_ctx --max_batch_size concurrency
--max_num_tokens 8192 --kv_cache_free_gpu_memory_fraction f --tp_size N`` (``--pp_size`` for a layer
split), ``--extra_llm_api_options`` for an fp8 KV cache.
"""

from __future__ import annotations

from estimator.engines.base import (
    EngineProfile,
    KVLayout,
    LaunchCommand,
    SchedulerSpec,
    StateDemand,
    checkpoint_quant,
    checkpoint_weight_format,
    dequantized_copy,
    paged_layout,
    slug,
)
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

BLOCK = 32  # KvCacheConfig.tokens_per_block
# hybrids whose model class prefers the V2 KV-cache manager (``get_preferred_kv_cache_manager_version``, so
# that kv_cache_config.use_kv_cache_manager_v2 "auto" resolves to it): Qwen3NextForCausalLM; Nemotron-H keeps
# the legacy C++ manager
V2_ARCHITECTURES = ("qwen3_next",)
MAX_NUM_TOKENS = 8192  # BuildConfig.max_num_tokens
MAX_BATCH_SIZE = 2048  # BuildConfig.max_batch_size
FREE_FRACTION = 0.9  # trtllm-serve --kv_cache_free_gpu_memory_fraction
OPTIONS_FILE = "trtllm-options.yaml"
# fitbench KV dtype name -> kv_cache_config.dtype
KV_FLAGS = {"f16": "auto", "bf16": "auto", "auto": "auto", "fp8": "fp8", "fp8_e4m3": "fp8"}
# catalog quant -> ModelOpt --qformat of the pre-quantized checkpoint TensorRT-LLM loads
MODELOPT_QFORMAT = {"FP8": "fp8", "FP8-BLOCK": "fp8_pb_wo", "NVFP4": "nvfp4", "AWQ-INT4": "int4_awq"}
_DENSE = ("F16", "BF16", "F32")
# quantized formats whose published Hugging Face checkpoints the PyTorch backend loads as they are: gpt-oss's
# MXFP4, DeepSeek-style FP8, NVIDIA's ModelOpt NVFP4 repositories; an AutoAWQ checkpoint is not ModelOpt's
# INT4-AWQ, so it takes the ModelOpt route (MODELOPT_QFORMAT)
LOADS_PUBLISHED = ("MXFP4", "FP8", "FP8-BLOCK", "NVFP4")


class TensorRTLLM(EngineProfile):
    name = "trtllm"
    label = "TensorRT-LLM"
    container = "safetensors"
    default_quant = "BF16"
    default_split = "tp"
    # tensorrt_llm/llmapi/llm_args.py (enable_attention_dp) in the extra LLM API options file
    attention_dp_flags = "--tp_size N --ep_size N + enable_attention_dp: true"
    kv_dtypes = ("f16", "bf16", "fp8")
    kv_flags = KV_FLAGS
    kv_dtype_hint = "set as kv_cache_config.dtype in an --extra_llm_api_options file"
    cheaper_kv_dtypes = ("fp8",)
    state_conv_bytes = 2
    # DSA: its DeepSeek-V3.2 path attends to the index_topk selected rows only (TensorRT-LLM tech blog
    # "Optimizing DeepSeek-V3.2 on NVIDIA Blackwell GPUs", section DeepSeek Sparse Attention)
    sparse_attention = True
    reserves_memory = True
    reserves_free_memory = True
    memory_fraction = FREE_FRACTION
    reservation_flag = "--kv_cache_free_gpu_memory_fraction"
    trust_remote_code_flag = "--trust_remote_code"
    runtime_model = "torch"
    memory_prior = "vllm"
    max_batched_tokens = MAX_NUM_TOKENS
    # the PyTorch backend is trtllm-serve's default from 1.0 (the scheduler above); older builds defaulted to
    # prebuilt TensorRT engines
    serving_since = "1.0.0rc0"
    # the client of the trtllm-serve benchmarking guide (nvidia.github.io/TensorRT-LLM, "Run benchmarking with
    # trtllm-serve")
    bench_client = "benchmark_serving.py --max-concurrency C against trtllm-serve"
    stream_on_serving_step = True
    # Not a point of the serving fit: fitted with vLLM and SGLang, its 775 records moved their held-out
    # figures (TPOT by device 12.9 % -> 16.9 %) and took the TTFT gate over its threshold (38.7 % > 35 %;
    # docs/calibration.md).  Its serving figures use the fit's pooled NVIDIA terms, which predict its records
    # out of sample within 24 % (TPOT) / 39 % (TTFT) median (tools/engine_check.py).
    serving_not_fitted = (
        "TensorRT-LLM: not fitted (fitted, it moved the held-out vLLM / SGLang figures and the TTFT gate); "
        "its serving figures use the pooled terms, checked on these records by tools/engine_check.py"
    )
    # CUDA GPUs only (NVIDIA's engine); no host-memory weight offload in the PyTorch backend
    backends = (("nvidia", "*", "CUDA"), ("*", "*", "none"))

    def kv_layout(
        self,
        model: ModelSpec,
        n_ctx: int,
        n_seq: int,
        n_ubatch: int,
        *,
        swa_full: bool = False,
        unified: bool = True,
        pad: int = 0,
    ) -> KVLayout:
        """Paged blocks of BLOCK tokens per sequence; windowed layers hold window + one block (module doc).
        ``swa_full``, ``unified`` and ``pad`` are llama.cpp options: ignored."""
        return paged_layout(model, n_ctx, n_seq, BLOCK)

    def serves_published(self, model: ModelSpec, quant: QuantSpec) -> bool | None:
        """The published checkpoint as loaded (``launch``: a dense dtype of an unquantized checkpoint, its own
        format where the PyTorch backend loads it, FP8 of an FP8 checkpoint); trtllm-serve quantizes nothing
        at load time (ModelOpt does, beforehand)."""
        q = quant.name.upper()
        published = checkpoint_quant(model)
        if q in _DENSE:
            return published in (None, *_DENSE)
        fp8 = q.startswith("FP8") and model.native_dtype == "fp8"
        return (q == published and q in LOADS_PUBLISHED) or fp8

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        q = quant.name.upper()
        repo = model.hf_id or model.id
        if self.serves_published(model, quant):
            target = repo
        elif q in _DENSE:  # a dense dtype of a quantized checkpoint
            target, note = dequantized_copy(model, q, self.label, dtype_flag=False)
            notes.append(note)
        elif q in MODELOPT_QFORMAT:
            target = f"<{q} checkpoint of {repo}>"
            notes.append(
                f"TensorRT-LLM loads a pre-quantized {q} checkpoint: quantize {repo} with NVIDIA ModelOpt "
                f"(--qformat {MODELOPT_QFORMAT[q]}) or use a published one"
            )
        else:
            exact = False
            target = f"./{slug(model.name)}-{quant.name}"
            notes.append(
                f"TensorRT-LLM has no {quant.name} loader; the nearest is an NVFP4 / INT4-AWQ checkpoint"
            )
        argv = [
            "trtllm-serve",
            target,
            "--backend",
            "pytorch",
            "--max_seq_len",
            str(workload.n_ctx),
            "--max_batch_size",
            str(max(1, workload.concurrency)),
            "--max_num_tokens",
            str(MAX_NUM_TOKENS),
            "--kv_cache_free_gpu_memory_fraction",
            f"{self.reserved_fraction(workload):g}",
        ]
        flags, remote_notes = self.remote_code_args(model, target)
        argv += flags
        notes += remote_notes
        options: list[str] = []  # notes on what the extra LLM API options file holds
        if workload.n_devices > 1 and workload.split == "dp":
            n = str(workload.n_devices)
            argv += ["--tp_size", n, "--ep_size", n]
            options.append(f"{OPTIONS_FILE} turns on attention data parallelism: 'enable_attention_dp: true'")
        elif workload.n_devices > 1:
            argv += ["--tp_size" if workload.split == "tp" else "--pp_size", str(workload.n_devices)]
        kv = workload.kv_dtype.lower()
        if KV_FLAGS.get(kv, "fp8") != "auto":
            if kv not in KV_FLAGS:
                exact = False
                notes.append(
                    f"TensorRT-LLM has no {workload.kv_dtype} KV cache; fp8 is the nearest 8-bit type"
                )
            options.append(f"{OPTIONS_FILE} holds the KV cache dtype: 'kv_cache_config: {{dtype: fp8}}'")
        if options:
            argv += ["--extra_llm_api_options", OPTIONS_FILE]
            notes += options
        if workload.offload_bytes > 0 or workload.moe_offload_layers > 0:  # another engine's sizing
            exact = False
            notes.append("TensorRT-LLM's PyTorch backend has no host-memory weight offload")
        return LaunchCommand(self.name, tuple(argv), exact, tuple(notes))

    def state_recurrent_bytes(self, model: ModelSpec) -> int:
        """``kv_cache_config.mamba_ssm_cache_dtype`` "auto": the checkpoint's config.json
        ``mamba_ssm_cache_dtype`` (Nemotron-H: float32, 4 bytes), else the model dtype (bf16: 2 bytes); the
        ``mamba_ssm_dtype`` key of Qwen3.5 is not read (module doc)."""
        declared = model.state.ssm_dtype if model.state is not None else ""
        return 4 if model.architecture == "nemotron_h" and declared == "float32" else 2

    def state_pool(self, pool_bytes: int, demand: StateDemand) -> tuple[int, int] | None:
        """The recurrent state's slots out of the KV budget (module doc): (pool - slots x state_bytes,
        max_batch_size), max_batch_size = the launch's ``--max_batch_size`` (the concurrency, ``launch``).

        At least R = max_batch_size x pipeline stages + one CUDA-graph padding slot (+ one for attention
        data parallelism's dummy request); that is the legacy (C++) manager's count.  The V2 manager of a
        model class that prefers it (``V2_ARCHITECTURES``) splits the pool by a typical step instead:
        R state slots of S = ``demand.state_bytes`` next to max_batch_size x stages requests of C =
        max_seq_len // 2 tokens (its ``avg_seq_len`` fallback) in pages of BLOCK tokens, so the state gets the
        share R x S / (R x S + B x stages x ceil(C / BLOCK) x BLOCK x ``demand.token_bytes``) of the pool when
        that is more than R slots.  A
        negative remainder is a launch TensorRT-LLM refuses: the state alone overflows the pool."""
        state_bytes, workload, model = demand.state_bytes, demand.workload, demand.model
        if state_bytes <= 0 or pool_bytes <= 0:
            return None
        batch = max(1, int(workload.concurrency))
        stages = int(workload.n_devices) if workload.split == "pp" else 1
        slots = batch * stages + 1 + (1 if workload.split == "dp" else 0)
        if model is not None and model.architecture in V2_ARCHITECTURES and demand.token_bytes > 0:
            typical = int(workload.n_ctx) // 2
            w_state = slots * float(state_bytes)
            w_attn = batch * stages * -(-typical // BLOCK) * BLOCK * float(demand.token_bytes)
            slots = max(slots, int(pool_bytes * w_state / (w_state + w_attn)) // int(state_bytes))
        return int(pool_bytes) - slots * int(state_bytes), batch

    def scheduler(self, hardware: HardwareSpec, workload: Workload) -> SchedulerSpec:
        return SchedulerSpec(
            MAX_NUM_TOKENS, MAX_BATCH_SIZE, True, (), SCHEDULER_SOURCE, reserves_whole_request=True
        )

    def weight_format(self, quant: QuantSpec) -> QuantSpec:
        """The checkpoint as loaded (``checkpoint_weight_format``), with a V projection on K==V full layers:
        TensorRT-LLM's Gemma 4 weight mapper copies each full layer's k_proj (and its scales) into v_proj
        when ``attention_k_eq_v`` holds (tensorrt_llm/_torch/models/checkpoints/hf/gemma4_weight_mapper.py,
        ``_handle_buffers_and_kvdup``)."""
        return checkpoint_weight_format(quant, fills_k_eq_v=True)


SCHEDULER_SOURCE = (
    "TensorRT-LLM defaults of `trtllm-serve` (tensorrt_llm/commands/serve.py, builder.py BuildConfig): "
    "max_num_tokens 8192, max_batch_size 2048, in-flight batching without chunked prefill, "
    "GUARANTEED_NO_EVICT admission, CUDA graphs without padding"
)

PROFILE = TensorRTLLM()
