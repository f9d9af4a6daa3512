"""Launch commands that match a sized configuration: ``llama-server`` (llama.cpp) and ``vllm serve`` (vLLM).

Both commands are built for every report; the one for the other engine is marked ``exact=False`` with notes
where the configuration cannot be reproduced there (e.g. a GGUF k-quant on vLLM, q8_0 KV on vLLM, fp8 KV on
llama.cpp, MoE-expert offload on vLLM).

Flag mapping (llama.cpp ``llama-server``):
  ``-c`` = n_ctx x parallel slots; with ``-np`` > 1 also ``--kv-unified`` (one KV pool of ``-c`` cells
  shared by the slots, sliding-window layers sized ``window x np + n_ubatch`` cells: the layout
  ``estimator.physics.kv`` sizes; an explicit ``-np`` without it gives each slot its own ``-c / -np`` stream
  and
  sliding-window cache of ``window + n_ubatch`` cells, i.e. (np - 1) x n_ubatch more cells per windowed
  layer); ``-ngl`` = layers on
  the device (999 = all; with ``--offload-gib`` the layer count is
  ``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))``); ``-ctk/-ctv`` = KV dtype; ``-fa on|off``;
  ``--n-cpu-moe N`` (routed experts of the first N layers
  in host RAM, the same as ``-ot 'blk\\.(0|..|N-1)\\.ffn_.*_exps\\.=CPU'``); multi-device: ``-sm row`` (tensor
  split) or ``-sm layer`` (pipeline) with ``-ts 1,1,..``.
vLLM ``vllm serve``: ``--max-model-len`` = n_ctx; ``--gpu-memory-utilization``; ``--tensor-parallel-size`` or
  ``--pipeline-parallel-size``; ``--kv-cache-dtype auto|fp8``; ``--max-num-seqs`` = concurrency;
  ``--cpu-offload-gb`` (GiB per GPU) for ``--offload-gib``.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from estimator.specs import GIB, ModelSpec, Workload

LLAMA_KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
VLLM_KV_TYPES = {
    "f16": "auto",
    "bf16": "auto",
    "auto": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
_DENSE_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


@dataclass(frozen=True)
class LaunchCommand:
    """One engine's command line.  ``argv`` is the exact argument vector; ``exact`` is False when the
    configuration could not be reproduced exactly (see ``notes``)."""

    engine: str
    argv: tuple[str, ...]
    exact: bool
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Shell form, one flag (with its value) per continuation line."""
        parts: list[str] = []
        args = list(self.argv)
        i = 0
        head = [args[0]]
        i = 1
        while i < len(args) and not args[i].startswith("-"):
            head.append(args[i])
            i += 1
        parts.append(shlex.join(head))
        while i < len(args):
            group = [args[i]]
            if i + 1 < len(args) and not args[i + 1].startswith("-"):
                group.append(args[i + 1])
                i += 1
            parts.append(shlex.join(group))
            i += 1
        return " \\\n  ".join(parts)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def n_cpu_moe_override(n_layers: int) -> str:
    """The ``-ot`` equivalent of ``--n-cpu-moe n_layers``: routed-expert tensors of layers
    0..n-1 on the CPU."""
    ids = "|".join(str(i) for i in range(n_layers))
    return rf"blk\.({ids})\.ffn_(up|down|gate)_exps\.=CPU"


def gpu_layers(model: ModelSpec, workload: Workload, weights_bytes: int) -> int:
    """Layers kept on the device for llama.cpp ``-ngl``: all (999) unless ``offload_bytes`` moves whole layers
    to host RAM; then ``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))`` (at least 0)."""
    if workload.offload_bytes <= 0 or weights_bytes <= 0:
        return 999
    per_layer = weights_bytes / model.n_layers
    return max(0, model.n_layers - math.ceil(workload.offload_bytes / per_layer))


def llama_cpp_command(model: ModelSpec, quant: str, workload: Workload, weights_bytes: int) -> LaunchCommand:
    """``llama-server`` for this model, quant and workload (flag mapping in the module doc)."""
    notes: list[str] = []
    exact = workload.engine == "llama.cpp"
    q = quant.upper()
    if model.gguf_path:
        model_arg = model.gguf_path
    else:
        model_arg = f"./{_slug(model.name)}-{quant}.gguf"
        notes.append(f"{model_arg} stands for your GGUF of {model.hf_id or model.id} at {quant}")
    if q == "FP8" or q.startswith(("AWQ", "GPTQ")) or "INT4" in q:
        exact = False
        notes.append(
            f"llama.cpp has no {quant} weight format; use a GGUF of similar size (e.g. Q8_0 for FP8, Q4_K_M "
            "for 4-bit)"
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
    if kv not in ("f16",):
        if kv in LLAMA_KV_TYPES:
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
        argv += [
            "-sm",
            "row" if workload.split == "tp" else "layer",
            "-ts",
            ",".join(["1"] * workload.n_devices),
        ]
    if slots > 1:
        notes.append(
            f"the {slots} slots share one KV pool of {workload.n_ctx * slots} tokens (--kv-unified): "
            f"room for {slots} sequences of {workload.n_ctx} tokens, as sized here"
        )
    return LaunchCommand("llama.cpp", tuple(argv), exact, tuple(notes))


def vllm_command(model: ModelSpec, quant: str, workload: Workload) -> LaunchCommand:
    """``vllm serve`` for this model, quant and workload (flag mapping in the module doc)."""
    notes: list[str] = []
    exact = workload.engine == "vllm"
    q = quant.upper()
    repo = model.hf_id or model.id
    extra: list[str] = []
    if q in _DENSE_DTYPES:
        target = repo
        extra += ["--dtype", _DENSE_DTYPES[q]]
    elif q == "FP8":
        target = repo
        if model.native_dtype != "fp8":
            extra += ["--quantization", "fp8"]
            notes.append("--quantization fp8 quantizes the bf16 checkpoint to FP8 at load time")
    elif q == "MXFP4":
        target = repo
        if model.native_dtype != "mxfp4":
            exact = False
            notes.append("vLLM serves MXFP4 only from a checkpoint published in MXFP4")
    elif q.startswith(("AWQ", "GPTQ")) or "INT4" in q:
        target = f"<{q.split('-')[0].split('_')[0]} int4 checkpoint of {repo}>"
        notes.append("vLLM reads the AWQ/GPTQ settings from the quantized checkpoint's config")
    else:
        target = model.gguf_path or f"./{_slug(model.name)}-{quant}.gguf"
        extra += ["--tokenizer", repo]
        notes.append("vLLM's GGUF loader is experimental and does not cover every architecture")
    argv = [
        "vllm",
        "serve",
        target,
        "--max-model-len",
        str(workload.n_ctx),
        "--gpu-memory-utilization",
        f"{workload.gpu_memory_utilization:g}",
    ] + extra
    if workload.n_devices > 1:
        flag = "--tensor-parallel-size" if workload.split == "tp" else "--pipeline-parallel-size"
        argv += [flag, str(workload.n_devices)]
    kv = workload.kv_dtype.lower()
    if kv in VLLM_KV_TYPES:
        argv += ["--kv-cache-dtype", VLLM_KV_TYPES[kv]]
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
        notes.append("vLLM has no per-layer MoE-expert offload (llama.cpp --n-cpu-moe); use --cpu-offload-gb")
    return LaunchCommand("vllm", tuple(argv), exact, tuple(notes))


def launch_commands(
    model: ModelSpec, quant: str, workload: Workload, weights_bytes: int
) -> tuple[LaunchCommand, LaunchCommand]:
    """(llama.cpp, vLLM) commands for the configuration; the chosen engine's comes out ``exact``."""
    return llama_cpp_command(model, quant, workload, weights_bytes), vllm_command(model, quant, workload)
