"""llama.cpp (``llama-server``, ``llama-bench``, llama-cpp-python): its profile.

KV cells (src/llama-context.cpp, llama-kv-cache.cpp, llama-kv-cache-iswa.cpp of the llama.cpp tree that
llama-cpp-python 0.3.36 vendors, same at ggml-org/llama.cpp master).  n_ctx is fitbench's context per
sequence; llama.cpp's ``-c`` is the total T = n_ctx x n_seq; P = the cell padding:

  unified (``--kv-unified``, one stream):   full = pad_P(T)
                                            window = pad_256(min(full, window x n_seq + n_ubatch))
  non-unified (one stream per sequence):    per stream C_s = pad_P(pad_P(T) // n_seq)
                                            full = n_seq x C_s
                                            window = n_seq x pad_256(min(C_s, window + n_ubatch))
  ``--swa-full``:                           window = full

Padding by build: P = 256 since ggml-org/llama.cpp#17046 (Nov 2025; the SWA cache too); builds from #7257
(May 2024) to #16812 (Oct 2025) padded both caches to 256 with flash attention and to 32 without
(``kv_pad`` = 32 sizes such a build; their SWA cells were ``min(full, pad_P(window x n_seq + n_ubatch))``,
the same number); #16812 .. #17046 did not pad (``kv_pad`` = 1).  Without flash attention V is stored
transposed with the widest layer's row width on every layer (``n_embd_v_gqa_max``, Gemma 4).
Sliding-window layers are cached in the KV dtype like the others (ggml-org/llama.cpp#21277 kept them in F16
and was reverted a day later by #21332).

llama.cpp's ``llama`` architecture has no sliding window, so Mistral v0.1 / Mixtral run full attention on
every layer.  Recurrent state (Gated DeltaNet, Mamba) is F32, the convolution state included (4 B per
element).  A quantized V cache (q8_0, q4_0, ...) needs flash attention (``-fa on``); ``-fa auto`` (the
default since ggml-org/llama.cpp#15434) turns it on when the device runs the fused attention op, which every
backend sized here does.

Memory: on a discrete device the token embedding stays in host RAM (the input layer runs on the CPU); the
compute buffers follow ggml's graph allocator (estimator.physics.runtime, model "ggml").
Speed: quantized GEMMs on NVIDIA run MMQ int8 / cuBLAS fp16-accumulate (``int8_gemm``); without flash
attention the F32 KQ score matrix is materialised; a layer split over several devices pipelines the
micro-batches of one llama_decode call.

``llama-server`` flags (``launch``): ``-c`` = n_ctx x parallel slots; with ``-np`` > 1 also ``--kv-unified``
unless the workload asks for one stream per slot (``Workload.kv_unified`` False: each slot its own
``-c / -np`` stream and sliding-window cache of ``window + n_ubatch`` cells); ``--swa-full`` and ``-ub`` when
the workload sets them; ``-ngl`` = layers on the device (999 = all; with ``--offload-gib`` the layer count is
``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))``); ``-ctk/-ctv`` = KV dtype; ``-fa on|off``;
``--n-cpu-moe N`` (routed experts of the first N layers in host RAM, the same as
``-ot 'blk\\.(0|..|N-1)\\.ffn_.*_exps\\.=CPU'``); multi-device ``-sm tensor`` (tensor parallelism through
the meta device, ggml-org/llama.cpp#19378; it needs flash attention and not every architecture has it: the
support table says where it runs) or ``-sm layer`` (pipeline) with ``-ts 1,1,..``.  ``-sm row`` (split
buffers) is not used: CUDA dropped it in ggml-org/llama.cpp#24216; split buffers existed only in the
CUDA-family and SYCL backends.

Scheduler (``scheduler``; llama-server ``update_slots`` in tools/server/server.cpp): one ``llama_decode`` per
step holds the generating slots' next tokens and then prompt tokens of slots in prompt processing, up to
``-b`` (n_batch, 2048) tokens; ``-np`` slots (= the sized concurrency) run at once; no graph padding.
"""

from __future__ import annotations

from estimator.engines.base import EngineProfile, KVLayout, LaunchCommand, SchedulerSpec, gpu_layers, slug
from estimator.engines.base import pad as round_up
from estimator.engines.llama_cpp_graph import graph_shape, replayable, replayed_bytes
from estimator.specs import FULL, SLIDING, HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

PAD = 256  # KV cells are padded to 256 (shared/reference/methods.md A4; current builds, see above)
SWA_PAD = 256  # the sliding-window cache is padded to 256 whatever the build (ggml-org/llama.cpp#17046)
KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_QUANTIZED_KV = frozenset({"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"})


def n_cpu_moe_override(n_layers: int) -> str:
    """The ``-ot`` equivalent of ``--n-cpu-moe n_layers``: routed-expert tensors of layers 0..n-1 on the
    CPU."""
    ids = "|".join(str(i) for i in range(n_layers))
    return rf"blk\.({ids})\.ffn_(up|down|gate)_exps\.=CPU"


class LlamaCpp(EngineProfile):
    name = "llama.cpp"
    label = "llama.cpp"
    container = "gguf"
    default_quant = "Q4_K_M"
    default_split = "pp"  # --split-mode layer, llama-bench's default too
    kv_dtypes = KV_TYPES
    kv_flags = {k: k for k in KV_TYPES}
    flash_attn_option = True
    kv_layout_options = True
    cheaper_kv_dtypes = ("q8_0", "q4_0")
    quantized_v_needs_flash_attn = True
    transposed_v_max_width = True
    state_conv_bytes = 4
    indexer_key_dtype = "kv"
    # DSA: build_attn unmasks the top-k rows of a full KQ mask (src/llama-graph.cpp, ggml_set_rows into
    # kq_mask_all) and runs the dense attention over every cached row
    sparse_attention = False
    embedding_on_host = True
    runtime_model = "ggml"
    memory_prior = "llama.cpp"
    # python -m harness memory-fit runs llama.cpp's memory-fit pass on the installed build's CPU backend
    exact_buffers_scope = "its CPU backend"
    int8_gemm = True
    # ggml-cuda's quantized GEMMs (MMQ) issue the synchronous warp MMA (mma.sync) of Ampere; Hopper reaches
    # its datasheet tensor rate only through warpgroup MMA (wgmma), which cuBLAS (F16 weights) issues and
    # MMQ does not.  Measured on an H200 (results/runs/gpu-lease--nvidia-hopper--vm.jsonl): Q4_K_M / Q8_0
    # prefill at about half the rate of the same model's F16 prefill
    unmodelled_quant_gemm = (
        (
            "nvidia-hopper",
            "llama.cpp's quantized GEMMs issue mma.sync, not the wgmma that Hopper's datasheet rate needs; "
            "the prefill model has no term for that rate yet",
        ),
    )
    # Before MMQ became the default (PR #8075, 2024-06-23), ggml-cuda ran a quantized GEMM of more than
    # MMQ_MAX_BATCH_SIZE = 32 tokens on a GPU with FP16 tensor cores (Volta and later) by dequantizing the
    # weights to F16 and calling cuBLAS (PR #3776, 2023-10); MMQ served smaller passes and older GPUs.
    # The 2024 builds of the published data (calibration.dataset.LEGACY_BUILD_SOURCES) predate #8075
    older_build_dequant_gemm = (
        (
            "2024",
            "CUDA",
            ("nvidia-volta", "nvidia-turing", "nvidia-ampere", "nvidia-ampere-embedded", "nvidia-ada",
             "nvidia-hopper", "nvidia-blackwell", "nvidia-blackwell-ultra"),
            32,
            "llama.cpp PR #3776 (cuBLAS for passes over 32 tokens on tensor cores), PR #8075 (MMQ default)",
        ),
    )  # fmt: skip
    # ggml-vulkan turns VK_KHR_cooperative_matrix on for Intel only on Xe2 (llama.cpp PR #14001, 2025-06:
    # coopmat regressed Arc A770 prefill; PR #24404, 2026-06, still finds A770 regressions): an Alchemist
    # card's device line reads "matrix cores: none" (issue #17628) and its GEMMs run in shaders
    vector_gemm = (
        (
            "Vulkan",
            "intel-xe-hpg",
            "llama.cpp's Vulkan backend enables cooperative matrices on Intel Xe2 only (PR #14001); on "
            "Alchemist (Arc A-series) its GEMMs run in shaders, not on the XMX engines",
        ),
    )
    materializes_kq_without_fa = True
    # llama.cpp's AMX weight buffer (an "extra buffer type" it repacks Q4_0 / Q4_1 / Q8_0 / Q4_K / Q5_K /
    # Q6_K / IQ4_XS weights into on a CPU with AMX, ggml-cpu/amx) runs prompt GEMMs on AMX-INT8 tiles.
    # Measured on the 2-vCPU Xeon guest with AMX (plans/cpu-amx.toml, 2026-12-07, a build with
    # tools/amx_header_fix.py) against the same points with --no-repack: prompts x2.0-2.7 (Q4_0, Q8_0),
    # x1.7-1.9 (Q6_K), x1.1-1.2 (Q4_K_M) faster (medians per prompt length); the other measured CPUs have no
    # AMX, so the prefill rate gets the covariate cpu_matrix_gemm on such a CPU.  F16 / BF16 weights are not
    # repacked.
    cpu_matrix_gemm = (
        (
            "amx",
            "llama.cpp repacks Q4_0 / Q8_0 / k-quant weights into its AMX buffer and runs prompt GEMMs on "
            "AMX-INT8 tiles (measured on a 2-vCPU Xeon guest with AMX: prompts x2.0-2.7 for Q4_0 / Q8_0, "
            "x1.1-1.2 for Q4_K_M, against the same points with --no-repack)",
        ),
    )
    # That buffer faults at the first prompt of more than one token when llama.cpp was compiled by GCC 12
    # (seen with 12.2 on that guest, llama-cpp-python 0.3.36): GCC 12's _tile_loadconfig declares an 8-byte
    # memory operand, so the compiler drops ggml's stores of the tile shapes and ldtilecfg loads a
    # half-written configuration (the disassembly of libggml-cpu.so; tools/amx_header_fix.py, which `make
    # install-llama` applies; ggml-org/llama.cpp#20824 was closed without a cause).  Single-token steps do
    # not load tiles and run.  ``--no-repack`` (llama_model_params.use_extra_bufts = false) avoids it, and
    # with it the CPU_REPACK layouts too (runners.llama_cpp, option ``repack``)
    cpu_crash_workarounds = (
        (
            "amx",
            "repack",
            False,
            "llama.cpp's AMX weight buffer crashes at the first prompt when llama.cpp was compiled by GCC 12 "
            "(its tile-configuration intrinsic lets the compiler drop the tile shapes; "
            "ggml-org/llama.cpp#20824); a build with a corrected header runs it",
        ),
    )
    # --no-repack keeps the weights in ggml's plain layout, so a CPU runs its generic vec_dot kernels instead
    # of the repacked GEMV / GEMM (CPU_REPACK's interleaved Q4_0 / Q4_K / IQ4_NL / Q8_0 rows, or the AMX
    # buffer): on the Xeon guest of 2026-12-07 a decode step took x2.1-2.4 (Q4_0), x1.9 (Q8_0), x1.7 (Q6_K)
    # and x1.2 (Q4_K_M) the time of the same points with the buffers on (medians at depths 0 and 384;
    # plans/cpu-amx.toml against plans/cpu-full.toml).  The runner records the option as ``extra.repack``
    # (runners.llama_cpp)
    speed_settings = (("repack", False, "no_repack"),)
    option_flags = (("repack", False, "--no-repack"),)
    quant_kernel_classes = True
    last_layer_ffn_outputs_only = True
    # src/models/{gemma4,openai-moe,qwen3next,qwen35,qwen35moe,nemotron-h}.cpp mark h_nextn (the final hidden
    # state of every row, before or after the final norm) as a graph output and, unless the context asks for
    # masked next-n embeddings (not the default), gather the output rows from it only after the last layer:
    # tools/alloc_trace.py on the memory-fit pass shows three hidden rows live under the logits (input
    # embeddings, h_nextn, the gathered result_norm) where other graphs keep two.  DeepSeek-2/3 and GLM-4.5
    # (h_nextn too) gather before the last FFN unless next-n embeddings are asked for, and leave two.  The
    # last layer's FFN runs for every row there as well; the prefill model keeps last_layer_ffn_outputs_only
    # for them: published llama-bench runs of these models mostly predate the change (llama-cpp-python
    # 0.3.36)
    head_keeps_hidden_archs = (
        "gemma4_text", "gpt_oss", "nemotron_h", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text",
    )  # fmt: skip
    pipelines_layer_split = True
    moe_cpu_offload = True
    offload_flag = "-ngl"
    serving_not_fitted = (
        "llama.cpp serving: its speed is the decode / prefill fit (llama-server's queue is not fitted)"
    )
    # the build a user of this device runs by default (README's backend table); Intel GPUs: Vulkan, the
    # prebuilt release builds (the measured Intel Arc rows are Vulkan), SYCL on request; Intel's data-centre
    # GPUs (family_backends below) SYCL
    backends = (
        ("nvidia", "*", "CUDA"),
        ("amd", "gpu", "ROCm"),
        ("amd", "unified", "Vulkan"),
        ("intel", "gpu", "Vulkan"),
        ("intel", "unified", "Vulkan"),
        ("apple", "unified", "Metal"),
        ("huawei", "npu", "CANN"),
        ("qualcomm", "unified", "OpenCL"),
        ("moore threads", "gpu", "MUSA"),
        ("cambricon", "npu", "none"),
        ("kunlunxin (baidu)", "npu", "none"),
        ("intel", "npu", "none"),
        ("*", "cpu", "CPU"),
    )
    # The Data Center GPU Max series (Xe-HPC) runs SYCL: llama.cpp's SYCL guide lists the Max 1550 and 1100 as
    # verified devices (docs/backend/SYCL.md, "Verified devices"), they run in oneAPI / Level Zero HPC
    # systems, and every published llama.cpp row of the Max is SYCL (482 rows of Argonne's
    # LLM-Inference-Bench, shared/reference/published S13)
    family_backends = (("intel-xe-hpc", "SYCL"),)
    # builds a user may pick instead (docs/build.md of llama.cpp): ROCm on AMD APUs (gfx1151 ...), Vulkan on
    # any discrete or integrated GPU with a Vulkan driver, SYCL on Intel GPUs (and NVIDIA / AMD through the
    # oneAPI plugins), OpenCL on Intel GPUs, the CPU backend on unified-memory SoCs (their CPU cores)
    backend_options = (
        ("amd", "unified", "ROCm"),
        ("nvidia", "gpu", "Vulkan"),
        ("nvidia", "unified", "Vulkan"),
        ("amd", "gpu", "Vulkan"),
        ("apple", "unified", "Vulkan"),
        ("qualcomm", "unified", "Vulkan"),
        ("intel", "gpu", "SYCL"),
        ("intel", "unified", "SYCL"),
        ("nvidia", "gpu", "SYCL"),
        ("amd", "gpu", "SYCL"),
        ("intel", "gpu", "OpenCL"),
        ("intel", "unified", "OpenCL"),
        ("*", "unified", "CPU"),
    )

    def check(self, workload: Workload) -> None:
        """llama.cpp accepts every KV dtype name a report compares; the quantized-V rule is
        ``check_cache``."""

    def layer_kind(self, model: ModelSpec, kind: str) -> str:
        if kind == SLIDING and model.architecture in ("mistral", "mixtral"):
            return FULL
        return kind

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
        """Cells as the module docstring derives them (``pad`` 0 = current builds, 256)."""
        p = int(pad) or PAD
        total = round_up(n_ctx * n_seq, p)
        window = model.window or n_ctx
        if unified or n_seq == 1:
            swa = total if swa_full else round_up(min(total, window * n_seq + n_ubatch), SWA_PAD)
            return KVLayout(total, swa, 1)
        per_stream = round_up(total // n_seq, p)
        swa = per_stream if swa_full else round_up(min(per_stream, window + n_ubatch), SWA_PAD)
        return KVLayout(n_seq * per_stream, n_seq * swa, n_seq)

    def default_quant_for(self, model: ModelSpec) -> str:
        """Q4_K_M, except for a model published in MXFP4 (gpt-oss): its GGUF keeps the experts in MXFP4
        (llama.cpp's MXFP4_MOE layout, the catalog's MXFP4: ggml-org's gpt-oss-20b file is 11.27 GiB in
        llama-bench, published_measurements.csv), and Q4_K_M's k-quants do not fit its 2,880-wide rows (they
        fall back to q5_0: 81 GiB for gpt-oss-120b instead of 59 GiB)."""
        return "MXFP4" if model.native_dtype == "mxfp4" else self.default_quant

    def check_cache(self, kv_dtype: str, flash_attn: bool) -> None:
        if kv_dtype.lower() in _QUANTIZED_KV and not flash_attn:
            raise SpecError(f"llama.cpp needs flash attention (-fa on) for a quantized V cache ({kv_dtype})")

    def exact_buffers_command(self, model_arg: str, model: ModelSpec, workload: Workload) -> str:
        """``python -m harness memory-fit``: llama.cpp's own memory-fit pass on a data-less copy of the model
        (its CPU backend's buffers; harness.memfit) at this context, micro-batch, flash attention, KV type,
        sequences and window options."""
        argv = ["python", "-m", "harness", "memory-fit", "--model", model_arg, "--ctx", str(workload.n_ctx)]
        if workload.n_ubatch != Workload.n_ubatch:
            argv += ["--ubatch", str(workload.n_ubatch)]
        if not workload.flash_attn:
            argv += ["--fa", "off"]
        kv = workload.kv_dtype.lower()
        if kv != "f16" and kv in KV_TYPES:
            argv += ["--kv-dtype", kv]
        if workload.n_seq > 1:
            argv += ["--n-seq", str(workload.n_seq)] + ([] if workload.kv_unified else ["--no-kv-unified"])
        if workload.swa_full and model.window:
            argv.append("--swa-full")
        return " ".join(argv)

    def replayed_compute_bytes(
        self, model: ModelSpec, hardware: HardwareSpec, workload: Workload, layout: KVLayout, n_tokens: int
    ) -> int | None:
        """llama.cpp's CPU compute buffer replayed (estimator.engines.llama_cpp_graph): on a CPU, for a model
        whose graph that module builds, with a cache type it was checked with.  On a GPU the scheduler builds
        the inputs in a host buffer and splits the graph, which is not replayed here (None: the formula)."""
        if hardware.kind != "cpu":
            return None
        kinds = tuple(self.layer_kind(model, k) for k in model.layer_types)
        if not replayable(model, set(kinds), workload.kv_dtype.lower()):
            return None
        kv_bytes = 4 if workload.kv_dtype.lower() == "f32" else 2  # GRAPH_KV_DTYPES: f16 / bf16 / f32
        shape = graph_shape(
            model, kinds, n_tokens, layout.full_per_stream, layout.windowed_per_stream, workload.flash_attn,
            workload.n_seq, kv_bytes,
        )
        return replayed_bytes(shape)

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        if model.gguf_path:
            model_arg = model.gguf_path
        else:
            model_arg = f"./{slug(model.name)}-{quant.name}.gguf"
            notes.append(f"{model_arg} stands for your GGUF of {model.hf_id or model.id} at {quant.name}")
        if not self.runs(quant):
            exact = False
            notes.append(
                f"llama.cpp has no {quant.name} weight format; use a GGUF of similar size "
                "(e.g. Q8_0 for FP8, Q4_K_M for 4-bit)"
            )
        slots = max(1, workload.concurrency)
        argv = [
            "llama-server",
            "-m",
            model_arg,
            "-c",
            str(workload.n_ctx * slots),
            "-np",
            str(slots),
            *(["--kv-unified"] if slots > 1 and workload.kv_unified else []),
            *(["--swa-full"] if workload.swa_full and model.window else []),
            *(["-b", str(workload.n_batch)] if workload.n_batch != Workload.n_batch else []),
            *(["-ub", str(workload.n_ubatch)] if workload.n_ubatch != Workload.n_ubatch else []),
            "-ngl",
            str(gpu_layers(model, workload, weights_bytes)),
            "-fa",
            "on" if workload.flash_attn else "off",
        ]
        kv = workload.kv_dtype.lower()
        if kv != "f16":
            if kv in KV_TYPES:
                argv += ["-ctk", kv, "-ctv", kv]
                if not workload.flash_attn and kv not in ("f32", "bf16"):
                    notes.append("llama.cpp needs flash attention (-fa on) for a quantized V cache")
            else:
                exact = False
                argv += ["-ctk", "q8_0", "-ctv", "q8_0"]
                notes.append(f"llama.cpp has no {workload.kv_dtype} KV cache; q8_0 is the nearest 8-bit type")
        if workload.moe_offload_layers > 0:
            argv += ["--n-cpu-moe", str(workload.moe_offload_layers)]
            notes.append(f"equivalent override: -ot '{n_cpu_moe_override(workload.moe_offload_layers)}'")
        if workload.offload_bytes > 0:
            notes.append("-ngl keeps whole layers on the device; the offloaded layers run on the CPU")
        if workload.n_devices > 1:
            split = "tensor" if workload.split == "tp" else "layer"
            argv += ["-sm", split, "-ts", ",".join(["1"] * workload.n_devices)]
        if slots > 1 and workload.kv_unified:
            notes.append(
                f"the {slots} slots share one KV pool of {workload.n_ctx * slots} tokens (--kv-unified): "
                f"room for {slots} sequences of {workload.n_ctx} tokens, as sized here"
            )
        elif slots > 1:
            notes.append(
                f"each of the {slots} slots has its own KV stream of {workload.n_ctx} tokens "
                "(no --kv-unified), as sized here"
            )
        if workload.kv_pad:
            notes.append(f"sized for a build that pads the KV cache to {workload.kv_pad} cells")
        return LaunchCommand(self.name, tuple(argv), exact, tuple(notes))

    def scheduler(self, hardware: HardwareSpec, workload: Workload) -> SchedulerSpec:
        return SchedulerSpec(
            max(int(workload.n_batch), 1),
            max(int(workload.concurrency), 1),
            True,
            (),
            "llama-server: -b n_batch tokens per llama_decode (slots' decode tokens, then prompt tokens), "
            "-np slots = the sized concurrency",
        )


PROFILE = LlamaCpp()
