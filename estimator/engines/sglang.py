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
  tokens (SGLang's ``--chunked-prefill-size`` default on large GPUs).
* Speed: no SGLang measurement is calibrated yet, so its figures come from the pooled prior (the report says
  so); batched decode and prefill follow the same physics as vLLM.

``launch``: ``--model-path``, ``--context-length`` = n_ctx, ``--mem-fraction-static``, ``--tp-size`` or
``--pp-size``, ``--kv-cache-dtype``, ``--max-running-requests`` = concurrency, ``--quantization fp8`` for FP8
from a bf16 checkpoint, ``--cpu-offload-gb`` for host offload.
"""

from __future__ import annotations

import math

from estimator.engines.base import EngineProfile, LaunchCommand, checkpoint_args, slug
from estimator.specs import GIB, ModelSpec, QuantSpec, Workload

SWA_FULL_TOKENS_RATIO = 0.8
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
    backends_by_vendor = {"nvidia": "CUDA", "amd": "ROCm"}
    backends_by_kind = {"cpu": "CPU"}
    label = "SGLang"
    container = "safetensors"
    default_quant = "BF16"
    default_split = "tp"
    kv_dtypes = ("f16", "bf16", "fp8")
    kv_flags = KV_FLAGS
    kv_dtype_hint = "f16/bf16 = --kv-cache-dtype auto"
    cheaper_kv_dtypes = ("fp8",)
    state_conv_bytes = 2
    reserves_memory = True
    memory_fraction = 0.88
    reservation_flag = "--mem-fraction-static"
    runtime_model = "torch"
    memory_prior = "vllm"
    max_batched_tokens = 8192
    offload_flag = "--cpu-offload-gb"

    def kv_cells(
        self, model: ModelSpec, n_ctx: int, n_seq: int, n_ubatch: int, swa_full: bool = False
    ) -> tuple[int, int]:
        cells = n_ctx * n_seq
        return cells, cells if swa_full else math.ceil(SWA_FULL_TOKENS_RATIO * cells)

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        repo = model.hf_id or model.id
        extra: list[str] = []
        checkpoint = checkpoint_args(model, quant)
        if checkpoint is not None:
            target, extra, notes = checkpoint[0], list(checkpoint[1]), list(checkpoint[2])
        elif self.runs(quant):
            target = f"<{quant.name} checkpoint of {repo}>"
            notes.append("SGLang reads the quantization settings from the quantized checkpoint's config")
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
        if workload.n_devices > 1:
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


PROFILE = SGLang()
