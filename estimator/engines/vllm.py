"""vLLM (``vllm serve``, the offline ``LLM`` engine): its profile.

KV cache: paged blocks of ``BLOCK`` tokens per sequence: full layers ceil(n_ctx / block) blocks,
sliding-window
/ chunked layers min(n_ctx, window + block) tokens (the hybrid KV-cache manager frees blocks outside the
window).  The SSM / recurrent state is float32, the convolution state bf16 (``mamba_ssm_cache_dtype`` of the
configs we catalogue): 2 B per conv element.  KV dtypes: the model dtype (``auto``: f16 / bf16) or fp8.

Memory: each device reserves ``--gpu-memory-utilization`` x memory; weights, the activation peak of a
``max_num_batched_tokens`` step, CUDA graphs and the context overhead come out of it, and the KV cache gets
the rest (estimator.physics.runtime, model "torch").

``vllm serve`` flags (``launch``): ``--max-model-len`` = n_ctx; ``--gpu-memory-utilization``;
``--tensor-parallel-size`` or ``--pipeline-parallel-size``; ``--kv-cache-dtype auto|fp8``; ``--max-num-seqs``
=
concurrency; ``--cpu-offload-gb`` (GiB per GPU) for ``--offload-gib``.
"""

from __future__ import annotations

from estimator.engines.base import EngineProfile, LaunchCommand, checkpoint_args, pad, slug
from estimator.specs import GIB, ModelSpec, QuantSpec, Workload

BLOCK = 16  # default GPU block size (tokens)
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


class VLLM(EngineProfile):
    name = "vllm"
    backends_by_vendor = {"nvidia": "CUDA", "amd": "ROCm"}
    backends_by_kind = {"cpu": "CPU"}
    label = "vLLM"
    container = "safetensors"
    default_quant = "BF16"
    default_split = "tp"
    kv_dtypes = ("f16", "bf16", "fp8")
    kv_flags = KV_FLAGS
    kv_dtype_hint = "f16/bf16 = --kv-cache-dtype auto"
    cheaper_kv_dtypes = ("fp8",)
    state_conv_bytes = 2
    reserves_memory = True
    reservation_flag = "--gpu-memory-utilization"
    runtime_model = "torch"
    memory_prior = "vllm"
    max_batched_tokens = 8192
    offload_flag = "--cpu-offload-gb"

    def kv_cells(
        self, model: ModelSpec, n_ctx: int, n_seq: int, n_ubatch: int, swa_full: bool = False
    ) -> tuple[int, int]:
        cells = pad(n_ctx, BLOCK) * n_seq
        window = model.window or n_ctx
        return cells, min(cells, pad(min(n_ctx, window + BLOCK), BLOCK) * n_seq)

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        notes: list[str] = []
        exact = workload.engine == self.name
        q = quant.name.upper()
        repo = model.hf_id or model.id
        extra: list[str] = []
        checkpoint = checkpoint_args(model, quant)
        if checkpoint is not None:
            target, extra, notes = checkpoint[0], list(checkpoint[1]), list(checkpoint[2])
        elif q == "MXFP4":
            target = repo
            if model.native_dtype != "mxfp4":
                exact = False
                notes.append("vLLM serves MXFP4 only from a checkpoint published in MXFP4")
        elif q.startswith(("AWQ", "GPTQ")) or "INT4" in q:
            target = f"<{q.split('-')[0].split('_')[0]} int4 checkpoint of {repo}>"
            notes.append("vLLM reads the AWQ/GPTQ settings from the quantized checkpoint's config")
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
        if workload.n_devices > 1:
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


PROFILE = VLLM()
