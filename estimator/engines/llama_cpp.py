"""llama.cpp (``llama-server``, ``llama-bench``, llama-cpp-python): its profile.

KV cells (src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp, ggml-org/llama.cpp master):
  full layers:     C_full = pad256(n_ctx x n_seq)   (n_ctx per sequence; llama.cpp's -c is the total)
  sliding/chunked: C_swa = min(C_full, pad256(window x n_seq + n_ubatch))   unless --swa-full (then C_full)
llama.cpp's ``llama`` architecture has no sliding window, so Mistral v0.1 / Mixtral run full attention on
every
layer.  Recurrent state (Gated DeltaNet, Mamba) is F32, the convolution state included (4 B per element).
A quantized V cache (q8_0, q4_0, ...) needs flash attention (``-fa on``).

Memory: on a discrete device the token embedding stays in host RAM (the input layer runs on the CPU); the
compute buffers follow ggml's graph allocator (estimator.physics.runtime, model "ggml").
Speed: quantized GEMMs on NVIDIA run MMQ int8 / cuBLAS fp16-accumulate (``int8_gemm``); without flash
attention the F32 KQ score matrix is materialised; a layer split over several devices pipelines the
micro-batches of one llama_decode call.

``llama-server`` flags (``launch``): ``-c`` = n_ctx x parallel slots; with ``-np`` > 1 also ``--kv-unified``
(one KV pool of ``-c`` cells shared by the slots, sliding-window layers sized ``window x np + n_ubatch``
cells:
the layout sized here; an explicit ``-np`` without it gives each slot its own ``-c / -np`` stream and
sliding-window cache of ``window + n_ubatch`` cells, i.e. (np - 1) x n_ubatch more cells per windowed layer);
``-ngl`` = layers on the device (999 = all; with ``--offload-gib`` the layer count is
``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))``); ``-ctk/-ctv`` = KV dtype; ``-fa on|off``;
``--n-cpu-moe N`` (routed experts of the first N layers in host RAM, the same as
``-ot 'blk\\.(0|..|N-1)\\.ffn_.*_exps\\.=CPU'``); multi-device ``-sm row`` (tensor split) or ``-sm layer``
(pipeline) with ``-ts 1,1,..``.
"""

from __future__ import annotations

from estimator.engines.base import EngineProfile, LaunchCommand, gpu_layers, pad, slug
from estimator.specs import FULL, SLIDING, ModelSpec, QuantSpec, SpecError, Workload

PAD = 256  # KV cells are padded to 256 (shared/reference/methods.md A4)
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
    cheaper_kv_dtypes = ("q8_0", "q4_0")
    quantized_v_needs_flash_attn = True
    state_conv_bytes = 4
    embedding_on_host = True
    runtime_model = "ggml"
    memory_prior = "llama.cpp"
    int8_gemm = True
    materializes_kq_without_fa = True
    pipelines_layer_split = True
    moe_cpu_offload = True
    offload_flag = "-ngl"
    # the usual build per vendor (Intel Arc and Qualcomm Adreno: the backends their published runs use)
    backends_by_vendor = {"nvidia": "CUDA", "amd": "ROCm", "apple": "Metal", "intel": "Vulkan",
                          "qualcomm": "OpenCL"}  # fmt: skip
    backends_by_kind = {"cpu": "CPU"}

    def check(self, workload: Workload) -> None:
        """llama.cpp accepts every KV dtype name a report compares; the quantized-V rule is
        ``check_cache``."""

    def layer_kind(self, model: ModelSpec, kind: str) -> str:
        if kind == SLIDING and model.architecture in ("mistral", "mixtral"):
            return FULL
        return kind

    def kv_cells(
        self, model: ModelSpec, n_ctx: int, n_seq: int, n_ubatch: int, swa_full: bool = False
    ) -> tuple[int, int]:
        cells = pad(n_ctx * n_seq, PAD)
        window = model.window or n_ctx
        return cells, cells if swa_full else min(cells, pad(window * n_seq + n_ubatch, PAD))

    def check_cache(self, kv_dtype: str, flash_attn: bool) -> None:
        if kv_dtype.lower() in _QUANTIZED_KV and not flash_attn:
            raise SpecError(f"llama.cpp needs flash attention (-fa on) for a quantized V cache ({kv_dtype})")

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
            *(["--kv-unified"] if slots > 1 else []),
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
            split = "row" if workload.split == "tp" else "layer"
            argv += ["-sm", split, "-ts", ",".join(["1"] * workload.n_devices)]
        if slots > 1:
            notes.append(
                f"the {slots} slots share one KV pool of {workload.n_ctx * slots} tokens (--kv-unified): "
                f"room for {slots} sequences of {workload.n_ctx} tokens, as sized here"
            )
        return LaunchCommand(self.name, tuple(argv), exact, tuple(notes))


PROFILE = LlamaCpp()
