"""SGLang (``python -m sglang.launch_server``): its profile.

Facts from sgl-project/sglang ``python/sglang/srt/server_args.py`` (read 2026-12):

* KV cache: a token-level pool (``--page-size`` defaults to 1 token for the common attention backends), so a
  full-attention layer holds exactly n_ctx x n_seq tokens.  With the hybrid sliding-window pool (on by default
  for SWA models) every sliding-window layer holds ``--swa-full-tokens-ratio`` (default 0.8) of the
  full-layer tokens: ``cells_swa = ceil(0.8 x cells_full)``.  KV dtypes: the model dtype (``auto``),
  ``fp8_e4m3``, ``fp8_e5m2``.  The SSM / recurrent state is float32 and the conv state bf16 (2 B per element).
* Memory: ``--mem-fraction-static`` of device memory holds the weights and the KV pool; SGLang derives its
  default from the GPU memory (about 0.88 on a 24 GB card, 0.875 on 80 GB, 0.91 on 141 GB at TP 1), so the
  prior here is 0.88.  Activations and CUDA graphs use the rest, as in vLLM: the same "torch" runtime model
  (estimator.physics.runtime) starting from vLLM's memory prior, with a chunked-prefill budget of 8,192
  tokens (SGLang's ``--chunked-prefill-size`` default on large GPUs).  A recurrent hybrid's state takes a
  pool of its own out of the KV budget first (``state_pool``: ``--mamba-full-memory-ratio`` 0.9), and the
  running requests are capped at a third of its slots.
* Speed: serving at concurrency is calibrated on published SGLang runs (calibration.serving: B200 and MI300X
  rows, the engine term per vendor); a single stream's decode and prefill have no SGLang record and follow the
  same physics as vLLM (the report names the basis of each figure).

``launch``: ``--model-path``, ``--context-length`` = n_ctx, ``--mem-fraction-static``, ``--tp-size`` or
``--pp-size``, ``--kv-cache-dtype``, ``--max-running-requests`` = concurrency, ``--quantization fp8`` for FP8
from a bf16 checkpoint, ``--cpu-offload-gb`` for host offload.

Scheduler (``scheduler``; ``server_args.py`` as above): ``--chunked-prefill-size`` by device memory (< 35 GiB
2048, < 160 GiB 8192, else 16384) is the token budget of a prefill batch; without ``--enable-mixed-chunk``
(the default) a prefill batch is a step of its own and pauses decoding, prefill first.  The number of running
requests follows the KV pool (``--max-running-requests`` unset; 4096 here as a ceiling).  CUDA graphs are
captured for decode batches 1, 2, 4, 8, 12, 16 .. 256 (step 8), 272 .. 496 (step 16), 512 .. max (step 32),
max = ``--cuda-graph-max-bs``: 8 (tp < 4) / 80 below 35 GiB, 256 (tp < 4) / 512 below 160 GiB, else 512.
MXFP4 is loaded as the checkpoint stores it (``weight_format``).
"""

from __future__ import annotations

import math

from estimator.engines.base import (
    EngineProfile,
    KVLayout,
    LaunchCommand,
    SchedulerSpec,
    StateDemand,
    checkpoint_args,
    checkpoint_weight_format,
    slug,
)
from estimator.specs import GIB, HardwareSpec, ModelSpec, QuantSpec, Workload

SWA_FULL_TOKENS_RATIO = 0.8
# a recurrent hybrid's state pool (python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py
# ``handle_max_mamba_cache`` and ``init_memory_pool``; the later kv-cache configurator keeps the rule):
# --mamba-full-memory-ratio = state memory / full-attention KV memory (default 0.9), and with the radix cache
# on (the default) --max-running-requests is capped at a third of the state slots
# (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO)
MAMBA_FULL_MEMORY_RATIO = 0.9
STATE_SLOTS_PER_REQUEST = 3
# fitbench KV dtype name -> --kv-cache-dtype
KV_FLAGS = {
    "f16": "auto",
    "bf16": "auto",
    "auto": "auto",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


class SGLang(EngineProfile):
    name = "sglang"
    label = "SGLang"
    container = "safetensors"
    default_quant = "BF16"
    default_split = "tp"
    # sglang/srt/server_args.py (enable_dp_attention, dp_size): attention DP over the TP group
    attention_dp_flags = "--tp-size N --dp-size N --enable-dp-attention"
    # dp attention divides --chunked-prefill-size and --max-running-requests by the dp size
    # (srt/server_args.py _handle_data_parallelism; the pool configurator's per-worker max_running_requests):
    # one budget for the instance, not one per rank
    dp_rank_schedulers = False
    kv_dtypes = ("f16", "bf16", "fp8")
    kv_flags = KV_FLAGS
    kv_dtype_hint = "f16/bf16 = --kv-cache-dtype auto"
    cheaper_kv_dtypes = ("fp8",)
    state_conv_bytes = 2
    # DSA: the NSA backend attends to the index_topk selected rows only
    # (python/sglang/srt/layers/attention/nsa_backend.py, sparse FlashMLA kernels)
    sparse_attention = True
    reserves_memory = True
    memory_fraction = 0.88
    reservation_flag = "--mem-fraction-static"
    trust_remote_code_flag = "--trust-remote-code"
    runtime_model = "torch"
    memory_prior = "vllm"
    max_batched_tokens = 8192
    stream_on_serving_step = True
    bench_client = "python -m sglang.bench_serving --max-concurrency C"
    fits_serving = True
    # python/sglang/srt/managers/scheduler.py clips a request's max_new_tokens to max_req_len - prompt - 1,
    # max_req_len from the context length of the model config
    stops_at_model_context = True
    offload_flag = "--cpu-offload-gb"
    # python/sglang/srt/utils/offloader.py (OffloaderV1): offloaded parameters live in pinned host memory, and
    # the wrapped forward copies every parameter of the module to the GPU (``v.to(device)`` over its
    # state_dict) at every forward pass
    offload_over_link = True
    offload_copies_modules = True
    # the platforms of SGLang's quantization compatibility table (NVIDIA, AMD Instinct, Ascend A2/A3)
    backends = (("nvidia", "*", "CUDA"), ("amd", "gpu", "ROCm"), ("huawei", "npu", "Ascend"))

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
        """One token pool of n_ctx x n_seq slots; windowed layers get SWA_FULL_TOKENS_RATIO of it (SGLang's
        --swa-full-tokens-ratio), all of it with ``swa_full``.  ``unified`` and ``pad`` are llama.cpp
        options SGLang has no equivalent of: ignored."""
        cells = n_ctx * n_seq
        return KVLayout(cells, cells if swa_full else math.ceil(SWA_FULL_TOKENS_RATIO * cells), 1)

    def state_pool(self, pool_bytes: int, demand: StateDemand) -> tuple[int, int] | None:
        """SGLang gives a hybrid's state a pool of its own before sizing the KV pool: state slots =
        floor(pool x r / (1 + r) / state_bytes), r = MAMBA_FULL_MEMORY_RATIO; the full-attention KV gets the
        rest, pool - slots x state_bytes; running requests <= slots // STATE_SLOTS_PER_REQUEST (the radix
        cache keeps a request's state at the prefix it may share besides the running one).  The pool does not
        depend on the launch's request limit, the attention's token bytes or the model class."""
        state_bytes = demand.state_bytes
        if state_bytes <= 0 or pool_bytes <= 0:
            return None
        r = MAMBA_FULL_MEMORY_RATIO
        slots = int(pool_bytes * r / (1 + r)) // int(state_bytes)
        return int(pool_bytes) - slots * int(state_bytes), slots // STATE_SLOTS_PER_REQUEST

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        extra: list[str] = []
        checkpoint = checkpoint_args(model, quant, self.label)
        if checkpoint is not None:
            target, extra, notes = checkpoint[0], list(checkpoint[1]), list(checkpoint[2])
        else:
            exact = False
            target = model.gguf_path or f"./{slug(model.name)}-{quant.name}.gguf"
            notes.append(f"SGLang serves {quant.name} only through its experimental GGUF loader")
        argv = [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            target,
            "--context-length",
            str(workload.n_ctx),
            "--mem-fraction-static",
            f"{self.reserved_fraction(workload):g}",
            *extra,
        ]
        flags, remote_notes = self.remote_code_args(model, target)
        argv += flags
        notes += remote_notes
        if workload.n_devices > 1 and workload.split == "dp":
            n = str(workload.n_devices)
            argv += ["--tp-size", n, "--dp-size", n, "--enable-dp-attention"]
        elif workload.n_devices > 1:
            argv += ["--tp-size" if workload.split == "tp" else "--pp-size", str(workload.n_devices)]
        kv = workload.kv_dtype.lower()
        if kv in KV_FLAGS:
            argv += ["--kv-cache-dtype", KV_FLAGS[kv]]
        else:
            exact = False
            argv += ["--kv-cache-dtype", "fp8_e4m3"]
            notes.append(f"SGLang has no {workload.kv_dtype} KV cache; fp8_e4m3 is the nearest 8-bit type")
        argv += ["--max-running-requests", str(max(1, workload.concurrency))]
        if workload.offload_bytes > 0:
            per_gpu_gib = workload.offload_bytes / GIB / max(1, workload.n_devices)
            argv += ["--cpu-offload-gb", f"{per_gpu_gib:.4g}"]
        if workload.moe_offload_layers > 0:
            exact = False
            notes.append(
                "SGLang has no per-layer MoE-expert offload (llama.cpp --n-cpu-moe); use --cpu-offload-gb"
            )
        if model.window:
            notes.append(
                f"sliding-window layers get {SWA_FULL_TOKENS_RATIO:g} of the full layers' KV tokens "
                "(--swa-full-tokens-ratio), as sized here"
            )
        return LaunchCommand(self.name, tuple(argv), exact, tuple(notes))

    def scheduler(self, hardware: HardwareSpec, workload: Workload) -> SchedulerSpec:
        mem = hardware.memory_bytes or 0
        tp_small = workload.n_devices < 4
        if mem < 35 * GIB:
            budget, max_bs = 2048, 8 if tp_small else 80
        elif mem < 160 * GIB:
            budget, max_bs = 8192, 256 if tp_small else 512
        else:
            budget, max_bs = 16384, 512
        graphs = () if hardware.kind == "cpu" else cuda_graph_sizes(max_bs)
        return SchedulerSpec(budget, MAX_RUNNING_REQUESTS, False, graphs, SCHEDULER_SOURCE)

    def weight_format(self, quant: QuantSpec) -> QuantSpec:
        """The checkpoint as loaded (``checkpoint_weight_format``), with a V projection on K==V full layers:
        SGLang's Gemma 4 keeps one fused qkv_proj for every layer and its loader copies k_proj into the V
        shard where ``attention_k_eq_v`` holds (python/sglang/srt/models/gemma4_causal.py, load_weights)."""
        return checkpoint_weight_format(quant, fills_k_eq_v=True)

    def dense_prompt_keys(self, model: ModelSpec, hardware: HardwareSpec) -> int:
        """index_topk on SM90 / SM100 for a DSA model, else 0.

        SGLang's NSA backend (python/sglang/srt/layers/attention/nsa_backend.py, ``set_nsa_prefill_impl``)
        runs a prompt batch as dense MHA (``MHA_ONE_SHOT``: the naive, decompressed form; FlashAttention-3 on
        SM90, TRT-LLM ragged attention on SM100) when the device is SM90 or SM100-109, the batch's longest
        sequence has at most ``SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD`` keys (default: the model's
        index_topk, set in server_args.py ``_handle_deepseek_family``), the KV cache is bf16 / fp8_e4m3 and
        the batch fits the chunk workspace.  GLM-5 (``GlmMoeDsaForCausalLM``) on Blackwell is forced to the
        sparse MLA kernels (threshold 0).  SM from the catalog: Hopper = SM90; data-centre Blackwell (HBM
        parts: B200, GB200, B300) = SM100 / SM103; GeForce and workstation Blackwell are SM120 / SM121."""
        m = model.mla
        if m is None or not m.index_n_heads or not m.index_topk or hardware.vendor.lower() != "nvidia":
            return 0
        hbm = (hardware.memory_type or "").upper().startswith("HBM")
        sm100 = hardware.family.startswith("nvidia-blackwell") and hbm
        if hardware.family == "nvidia-hopper" or (sm100 and model.arch_class != "GlmMoeDsaForCausalLM"):
            return int(m.index_topk)
        return 0


MAX_RUNNING_REQUESTS = 4096
SCHEDULER_SOURCE = (
    "SGLang defaults (sgl-project/sglang python/sglang/srt/server_args.py): --chunked-prefill-size and "
    "--cuda-graph-max-bs by device memory, prefill batches not mixed with decode"
)


def cuda_graph_sizes(largest: int) -> tuple[int, ...]:
    """SGLang's default decode capture sizes up to ``largest``."""
    sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, largest + 1, 32)]
    return tuple(s for s in sizes if s <= largest)


PROFILE = SGLang()
