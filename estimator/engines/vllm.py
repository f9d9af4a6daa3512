"""vLLM (``vllm serve``, the offline ``LLM`` engine): its profile.

KV cache: paged blocks of ``BLOCK`` tokens per sequence: full layers ceil(n_ctx / block) blocks,
sliding-window
/ chunked layers min(n_ctx, window + block) tokens (the hybrid KV-cache manager frees blocks outside the
window).  The SSM / recurrent state is float32, the convolution state bf16 (``mamba_ssm_cache_dtype`` of the
configs we catalogue): 2 B per conv element.  KV dtypes: the model dtype (``auto``: f16 / bf16) or fp8.

Startup log (``startup_kv``): the "KV cache size" and "Maximum concurrency" vLLM prints, by its block
manager's grouping and admission cap (a sliding layer counted up to the prompt tokens in flight past its
window): below the steady-state capacity for sliding-window models (docs/memory-model.md §5).

Memory: each device reserves ``--gpu-memory-utilization`` x memory; weights, the activation peak of a
``max_num_batched_tokens`` step, CUDA graphs and the context overhead come out of it, and the KV cache gets
the rest (estimator.physics.runtime, model "torch").

``vllm serve`` flags (``launch``): ``--max-model-len`` = n_ctx; ``--gpu-memory-utilization``;
``--tensor-parallel-size`` or ``--pipeline-parallel-size``; ``--kv-cache-dtype auto|fp8``; ``--max-num-seqs``
=
concurrency; ``--cpu-offload-gb`` (GiB per GPU) for ``--offload-gib``.

Scheduler (``scheduler``; vLLM V1, read in vllm 0.32.0 ``engine/arg_utils.py`` (the batch defaults) and
``config/vllm.py`` ``_set_cudagraph_sizes``): chunked prefill is always on, each step schedules the running
requests' decode tokens first and fills the rest of the token budget with prompt chunks.  V1 is the default
engine from vLLM 0.8.0 (``serving_since``): measurements of older (V0) builds are not serving points.
Defaults of ``vllm serve`` by memory of one device: >= 160 GiB ``max_num_batched_tokens`` 16384,
``max_num_seqs`` 1024; >= 70 GiB (not A100) 8192 / 1024; smaller GPUs 2048 / 256; CPU 2048 x world size / 128
x world size.  CUDA graphs are captured for 1, 2, 4, 8 .. 248 (step 8), 256 .. max (step 16) tokens, max =
min(2 x max_num_seqs, 512, max_num_batched_tokens) (vLLM raises the 512 to 1024 on compute capability 10.x,
not modelled); CPU builds capture none.  MXFP4 is loaded as the checkpoint stores it (``weight_format``).
"""

from __future__ import annotations

from estimator.engines.base import (
    CacheLayer,
    EngineProfile,
    KVLayout,
    LaunchCommand,
    SchedulerSpec,
    StartupKV,
    checkpoint_args,
    checkpoint_weight_format,
    paged_layout,
    slug,
)
from estimator.specs import (
    CHUNKED,
    FULL,
    GIB,
    LINEAR,
    MAMBA,
    NONE,
    SLIDING,
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    Workload,
)

BLOCK = 16  # default GPU block size (tokens)
# Block sizes of vLLM 0.32.0's attention backends (tokens): the CPU backend's 128 (the runner's records:
# block_size 128), FlashMLA's 64 for an MLA latent cache on CUDA, the CPU MLA kernel's 16 (platforms/cpu.py)
CPU_BLOCK = 128
MLA_BLOCK = 64
CPU_MLA_BLOCK = 16
# async scheduling (on by default, config/vllm.py) keeps two scheduler batches in flight
IN_FLIGHT_BATCHES = 2

# fitbench KV dtype name -> --kv-cache-dtype (runners/vllm.py keeps the same map: runners import nothing of
# ours;
# tests/test_launch.py checks the two agree)
KV_FLAGS = {
    "f16": "auto",
    "bf16": "auto",
    "auto": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


def _state_blocks(kind: str) -> int:
    """Blocks one request holds per state group with the prefix cache on (``mamba_cache_mode`` "align",
    v1/kv_cache_interface.py ``MambaSpec.max_memory_usage_bytes``: 2 + the prefill checkpoint blocks): a
    Gated DeltaNet layer 2 (the running state and the last block-aligned one), a Mamba2 layer 3
    (layers/mamba/mamba_mixer2.py exports one more, ``num_prefill_checkpoint_blocks=1``)."""
    return 3 if kind == MAMBA else 2


class VLLM(EngineProfile):
    name = "vllm"
    label = "vLLM"
    container = "safetensors"
    default_quant = "BF16"
    default_split = "tp"
    # vllm/config/parallel.py (data_parallel_size, enable_expert_parallel): N data-parallel ranks of TP 1
    attention_dp_flags = "--data-parallel-size N --enable-expert-parallel"
    # one EngineCore per data-parallel rank (v1/engine/core.py DPEngineCoreProc), each with its own Scheduler
    # on the whole scheduler_config: max_num_batched_tokens and max_num_seqs per rank
    dp_rank_schedulers = True
    kv_dtypes = ("f16", "bf16", "fp8")
    kv_flags = KV_FLAGS
    kv_dtype_hint = "f16/bf16 = --kv-cache-dtype auto"
    cheaper_kv_dtypes = ("fp8",)
    state_conv_bytes = 2
    # DSA: the FlashMLA / FlashInfer sparse MLA backends attend to the index_topk selected rows only
    # (v1/attention/backends/mla/flashmla_sparse.py: topk_indices per query token)
    sparse_attention = True
    reserves_memory = True
    reservation_flag = "--gpu-memory-utilization"
    trust_remote_code_flag = "--trust-remote-code"
    runtime_model = "torch"
    memory_prior = "vllm"
    max_batched_tokens = 8192
    # the V1 engine (the scheduler above) is vLLM's default from 0.8.0 (vllm-project/vllm PR 13726, release
    # notes of v0.8.0); V0 builds scheduled prompts first, without chunked prefill by default
    serving_since = "0.8.0"
    bench_client = "vllm bench serve --max-concurrency C"
    stream_on_serving_step = True
    fits_serving = True
    # max_model_len defaults to the length derived from the model config; vllm/v1/core/sched/utils.py
    # check_stop ends a request with FINISHED_LENGTH_CAPPED once num_tokens >= max_model_len (V0: the
    # engine's StopChecker, the same cap)
    stops_at_model_context = True
    offload_flag = "--cpu-offload-gb"
    # the offloader keeps offloaded parameters in pinned host memory and reads them from the GPU at every
    # forward pass (vllm/model_executor/offloader: UVA / prefetch; the --cpu-offload-gb help: "part of the
    # model is loaded from CPU memory to GPU memory on the fly in each model forward pass"); with UVA the
    # kernels read the bytes they touch (a MoE step: its routed experts), not whole modules
    offload_over_link = True
    # its CPU backend computes in BF16 (the CPU plans' dtype); x86 CPUs with AVX-512 BF16 / AMX have BF16 dot
    # instructions for its GEMMs, an AVX2-only x86 CPU has none and converts: measured 2026-12-07 on a Zen 3
    # VM (AVX2) against the Zen 4 VM (AVX-512) of the same size, prompts ran ~10x slower per core-GHz and
    # one-stream decode ~1.5x (docs/calibration.md "A second CPU host")
    cpu_gemm_fallback = (
        (
            "cpu-x86-avx2",
            "vLLM's CPU backend runs BF16 GEMMs, which an AVX2-only x86 CPU has no BF16 instructions for "
            "(measured: prompts ~10x slower than on an AVX-512 BF16 CPU of the same size)",
        ),
    )
    cpu_matrix_gemm = (
        (
            "amx",
            "vLLM's CPU backend runs its BF16 GEMMs through oneDNN, which issues AMX tile instructions on "
            "a CPU that has them (measured on a 2-vCPU Xeon guest with AMX: prompts ~3.6x faster than "
            "estimated from the AVX-512 BF16 CPUs of the same size)",
        ),
    )
    # platforms of vllm-project/vllm (CUDA, ROCm, XPU, CPU; the macOS build is CPU-only) and the hardware
    # plugins vllm-gaudi (Intel Gaudi: HPU) and vllm-ascend
    backends = (
        ("nvidia", "*", "CUDA"),
        ("amd", "gpu", "ROCm"),
        ("amd", "unified", "ROCm"),
        ("intel", "gpu", "XPU"),
        ("intel", "npu", "HPU"),
        ("huawei", "npu", "Ascend"),
        ("apple", "unified", "CPU"),
        ("*", "cpu", "CPU"),
    )

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
        """Paged blocks of BLOCK tokens per sequence; windowed layers hold window + one block (vLLM frees
        blocks that slid out of the window).  ``swa_full``, ``unified`` and ``pad`` are llama.cpp options
        that vLLM has no equivalent of: ignored."""
        return paged_layout(model, n_ctx, n_seq, BLOCK)

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        q = quant.name.upper()
        repo = model.hf_id or model.id
        extra: list[str] = []
        checkpoint = checkpoint_args(model, quant, self.label)
        if q == "MXFP4" and model.native_dtype != "mxfp4":
            target = repo
            exact = False
            notes.append("vLLM serves MXFP4 only from a checkpoint published in MXFP4")
        elif checkpoint is not None:
            target, extra, notes = checkpoint[0], list(checkpoint[1]), list(checkpoint[2])
        else:
            target = model.gguf_path or f"./{slug(model.name)}-{quant.name}.gguf"
            extra += ["--tokenizer", repo]
            notes.append("vLLM's GGUF loader is experimental and does not cover every architecture")
        argv = [
            "vllm",
            "serve",
            target,
            "--max-model-len",
            str(workload.n_ctx),
            "--gpu-memory-utilization",
            f"{self.reserved_fraction(workload):g}",
            *extra,
        ]
        flags, remote_notes = self.remote_code_args(model, target)
        argv += flags
        notes += remote_notes
        if workload.n_devices > 1 and workload.split == "dp":
            argv += ["--data-parallel-size", str(workload.n_devices), "--enable-expert-parallel"]
        elif workload.n_devices > 1:
            flag = "--tensor-parallel-size" if workload.split == "tp" else "--pipeline-parallel-size"
            argv += [flag, str(workload.n_devices)]
        kv = workload.kv_dtype.lower()
        if kv in KV_FLAGS:
            argv += ["--kv-cache-dtype", KV_FLAGS[kv]]
        else:
            exact = False
            argv += ["--kv-cache-dtype", "fp8"]
            notes.append(f"vLLM has no {workload.kv_dtype} KV cache; fp8 is the nearest 8-bit type")
        argv += ["--max-num-seqs", str(max(1, workload.concurrency))]
        if workload.offload_bytes > 0:
            per_gpu_gib = workload.offload_bytes / GIB / max(1, workload.n_devices)
            argv += ["--cpu-offload-gb", f"{per_gpu_gib:.4g}"]
        if workload.moe_offload_layers > 0:
            exact = False
            notes.append(
                "vLLM has no per-layer MoE-expert offload (llama.cpp --n-cpu-moe); use --cpu-offload-gb"
            )
        return LaunchCommand(self.name, tuple(argv), exact, tuple(notes))

    def scheduler(self, hardware: HardwareSpec, workload: Workload) -> SchedulerSpec:
        mem = hardware.memory_bytes or 0
        if hardware.kind == "cpu":
            n = max(1, workload.n_devices)
            budget, seqs, graphs = 2048 * n, 128 * n, ()
        else:
            if mem >= 160 * GIB:
                budget, seqs = 16384, 1024
            elif mem >= 70 * GIB and "a100" not in hardware.name.lower():
                budget, seqs = 8192, 1024
            else:
                budget, seqs = 2048, 256
            graphs = cudagraph_sizes(min(2 * seqs, 512, budget))
        return SchedulerSpec(budget, seqs, True, graphs, SCHEDULER_SOURCE)

    def state_recurrent_bytes(self, model: ModelSpec) -> int:
        """vllm 0.32.0 keeps the recurrent state in the conv state's dtype, the model dtype (bf16: 2 bytes),
        under ``--mamba-ssm-cache-dtype auto`` (model_executor/layers/mamba/mamba_utils.py
        ``_mamba_state_dtype``), unless the model's config hook sets one: Qwen3.5 takes its config.json
        ``mamba_ssm_dtype`` (float32 in every published Qwen3.5; models/config.py
        ``Qwen3_5ForConditionalGenerationConfig``), Nemotron-H its ``mamba_ssm_cache_dtype``, float32 when
        unstated (``NemotronHForCausalLMConfig``).  Qwen3-Next and other hybrids: the model dtype."""
        declared = model.state.ssm_dtype if model.state is not None else ""
        if model.architecture in ("qwen3_5_text", "qwen3_5_moe_text"):
            dtype = declared
        elif model.architecture == "nemotron_h":
            dtype = declared or "float32"
        else:
            dtype = ""
        return 4 if dtype == "float32" else 2

    def startup_kv(
        self,
        layers: tuple[CacheLayer, ...],
        max_model_len: int,
        pool_bytes: int,
        hardware: HardwareSpec,
        workload: Workload,
        *,
        prefix_caching: bool = True,
    ) -> StartupKV | None:
        """vLLM's startup "KV cache size: N tokens" and "Maximum concurrency for L tokens per request: X" for
        attention caches (full, sliding-window, chunked-local layers) and Gated-DeltaNet / Mamba hybrids, by
        vllm 0.32.0's block manager (v1/core/kv_cache_utils.py ``get_kv_cache_groups``,
        ``get_max_concurrency_for_kv_cache_config``; v1/kv_cache_interface.py ``max_memory_usage_bytes``;
        platforms/interface.py ``_align_hybrid_block_size``):

        * layers of one spec form a bucket; page = block x token_bytes; smaller pages take a larger block
          (x max page / page when it divides) so that every page equals the largest, P;
        * a hybrid's attention block b is raised to the smallest multiple of the base block whose page holds
          one sequence's recurrent state (b = base x ceil(state / (base x token_bytes))), and the state is
          padded to that page: every state layer takes one page, P = b x token_bytes;
        * group size g = the smallest bucket's layer count (the largest when it is < 1.5 x the smallest);
          a bucket of n layers makes ceil(n / g) groups, padded to g layers;
        * num_blocks = pool_bytes // (P x g): one block holds a page of every layer position of a group;
        * blocks of one request of L = max_model_len tokens, per group: full ceil(L / b); sliding window W
          ceil(min(W - 1 + F, L) / b) + 1; chunked A ceil(min(A + F, L) / b), with F = the in-flight tokens
          (2 batches of ``max_num_batched_tokens`` with async scheduling): vLLM's admission cap, a sliding
          layer counted with every token up to the prefill chunks in flight past its window; a state group
          1 block, with the prefix cache on (vLLM's default; ``mamba_cache_mode`` "align") 2 for Gated
          DeltaNet and 3 for Mamba2 (``_state_blocks``);
        * max concurrency = num_blocks / blocks per request; KV cache tokens = int(that x L).

        None for a hybrid whose attention layers differ in row width or hold an MLA latent (vLLM sizes the
        state page from the model-wide attention row), a model without attention layers, a DSA indexer
        cache (a group of its own) and pipeline parallelism (one pool per stage)."""
        if not layers or workload.split == "pp":
            return None
        layers = tuple(x for x in layers if x.kind != NONE)
        attn = [x for x in layers if x.kind in (FULL, SLIDING, CHUNKED)]
        states = [x for x in layers if x.kind in (LINEAR, MAMBA)]
        if not attn or len(attn) + len(states) != len(layers) or any(x.token_bytes <= 0 for x in attn):
            return None
        latent = any(x.latent for x in attn)
        block = self._startup_block(hardware, latent)
        buckets: dict[tuple[str, int, int], int] = {}
        for x in attn:
            key = (x.kind, x.span if x.kind != FULL else 0, x.token_bytes)
            buckets[key] = buckets.get(key, 0) + 1
        if states:
            row = {x.token_bytes for x in attn}
            state = max(x.state_bytes for x in states)
            if latent or len(row) != 1 or state <= 0:
                return None
            (tb,) = row
            block = max(block, block * -(-state // (block * tb)))
            for x in states:
                buckets[(x.kind, 0, 0)] = buckets.get((x.kind, 0, 0), 0) + 1
            page = block * tb
        else:
            page = max(block * tb for _, _, tb in buckets)
        counts = list(buckets.values())
        group = min(counts) if max(counts) >= 1.5 * min(counts) else max(counts)
        num_blocks = int(pool_bytes) // (page * group)
        in_flight = IN_FLIGHT_BATCHES * self.scheduler(hardware, workload).max_batched_tokens
        length = int(max_model_len)
        per_request = 0
        for (kind, span, tb), n in buckets.items():
            if kind in (LINEAR, MAMBA):
                per_request += -(-n // group) * (_state_blocks(kind) if prefix_caching else 1)
                continue
            b = block * (page // (block * tb)) if page % (block * tb) == 0 else block
            if kind == SLIDING:
                blocks = -(-min(span - 1 + in_flight, length) // b) + 1
            elif kind == CHUNKED:
                blocks = -(-min(span + in_flight, length) // b)
            else:
                blocks = -(-length // b)
            per_request += -(-n // group) * blocks
        conc = num_blocks / per_request
        return StartupKV(num_blocks, per_request, block, int(conc * length), conc)

    def _startup_block(self, hardware: HardwareSpec, latent: bool) -> int:
        """Base block size (tokens) of the attention backend vLLM picks on ``hardware``."""
        if self.backend_for(hardware) == "CPU":
            return CPU_MLA_BLOCK if latent else CPU_BLOCK
        return MLA_BLOCK if latent else BLOCK

    def weight_format(self, quant: QuantSpec) -> QuantSpec:
        """The checkpoint as loaded (``checkpoint_weight_format``); a checkpoint format (safetensors) also
        gets a V projection on K==V full layers: vLLM's fused qkv_proj keeps the V slot and loads K's weights
        into it (model_executor/models/gemma4.py, ``attention_k_eq_v``; ``QuantSpec.fills_k_eq_v``)."""
        return checkpoint_weight_format(quant, fills_k_eq_v=True)


SCHEDULER_SOURCE = (
    "vLLM V1 defaults of `vllm serve` (vllm 0.32.0 engine/arg_utils.py, config/vllm.py): chunked prefill, "
    "max_num_batched_tokens / max_num_seqs by device memory, CUDA graphs 1-512"
)


def cudagraph_sizes(largest: int) -> tuple[int, ...]:
    """vLLM's default capture sizes up to ``largest``: 1, 2, 4, then 8 .. 248 by 8, then 256 .. by 16."""
    sizes = [s for s in (1, 2, 4) if s <= largest]
    sizes += list(range(8, min(largest + 1, 256), 8))
    sizes += list(range(256, largest + 1, 16))
    return tuple(sizes)


PROFILE = VLLM()
