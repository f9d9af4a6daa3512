"""What an inference engine decides, in one object: ``EngineProfile``.

Everything the estimator knows that differs between engines is a field or a method of a profile; physics,
report and app code ask the profile and never compare engine names.  A profile holds:

* **weights**: which weight container it loads (``container``: ``"gguf"`` for llama.cpp, ``"safetensors"``
  for vLLM / SGLang; a quant format lists the containers it exists in, ``QuantSpec.containers``), its
  default quant and multi-device split, and whether the token embedding stays in host RAM on discrete devices;
* **KV cache**: the KV dtype names it accepts (``kv_dtypes``, mapped to storage types by
  ``estimator.physics.quant.kv_type``), the cheaper ones a report compares, how it lays out cells
  (``kv_cells``: contiguous padded cells or paged blocks; sliding-window layers capped at the window), the
  byte width of the convolution state of linear-attention / SSM layers, which layer kinds it really implements
  (``layer_kind``), and whether a quantized V cache needs flash attention;
* **memory**: whether it reserves a fraction of device memory up front (``reserves_memory``: vLLM
  ``--gpu-memory-utilization``, SGLang ``--mem-fraction-static``) and which runtime-buffer model applies
  (``runtime_model``: ``"ggml"`` graph-allocator buffers or ``"torch"`` activation peak + CUDA graphs, see
  estimator.physics.runtime) with its token budget (``max_batched_tokens``); ``memory_prior`` names its entry
  of the runtime-memory prior;
* **speed**: whether its quantized GEMMs run on the int8 / fp16-accumulate path on NVIDIA (``int8_gemm``),
  whether prefill materialises the KQ score matrix without flash attention, whether a layer split over
  several devices pipelines micro-batches (see estimator.physics.counts.pipeline_factor);
* **requests**: ``check`` refuses a configuration the engine cannot run (one-line SpecError) and
  ``launch`` builds the command line that reproduces a sized configuration.

Profiles import only ``estimator.specs``: physics sits above them and asks them.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from estimator.specs import ModelSpec, QuantSpec, SpecError, Workload

CONTAINERS = ("gguf", "safetensors")


@dataclass(frozen=True)
class LaunchCommand:
    """One engine's command line.  ``argv`` is the exact argument vector; ``exact`` is False when the
    configuration could not be reproduced exactly on that engine (see ``notes``)."""

    engine: str
    argv: tuple[str, ...]
    exact: bool
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Shell form, one flag (with its value) per continuation line."""
        args = list(self.argv)
        head = [args[0]]
        i = 1
        while i < len(args) and not args[i].startswith("-"):
            head.append(args[i])
            i += 1
        parts = [shlex.join(head)]
        while i < len(args):
            group = [args[i]]
            if i + 1 < len(args) and not args[i + 1].startswith("-"):
                group.append(args[i + 1])
                i += 1
            parts.append(shlex.join(group))
            i += 1
        return " \\\n  ".join(parts)


def slug(text: str) -> str:
    """A file-name-safe form of a model name (placeholder GGUF paths)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def pad(n: int, to: int) -> int:
    """Round ``n`` up to a multiple of ``to``."""
    return -(-int(n) // to) * to


class EngineProfile:
    """Base profile: the fields every engine sets, and the behaviour shared by all (see module doc).

    Subclasses set the class attributes and implement ``kv_cells`` and ``launch``.
    """

    name: str = ""
    label: str = ""  # how messages name it ("vLLM")
    container: str = ""
    default_quant: str = ""
    # multi-device split when not told: "tp" tensor parallel, "pp" pipeline / layer split
    default_split: str = "tp"
    kv_dtypes: tuple[str, ...] = ()  # the KV dtype names a report accepts
    # every KV dtype name its command line / runner accepts -> the engine's own spelling
    kv_flags: dict[str, str] = {}
    cheaper_kv_dtypes: tuple[str, ...] = ()  # compared against f16 by the report's KV section
    quantized_v_needs_flash_attn: bool = False
    state_conv_bytes: int = 2  # bytes per conv-state element of linear-attention / SSM layers
    embedding_on_host: bool = False  # discrete devices keep token_embd in host RAM
    reserves_memory: bool = False  # pre-allocates Workload.gpu_memory_utilization x device memory
    memory_fraction: float = 0.92  # that fraction when the user does not give one (Workload's default)
    reservation_flag: str = ""  # its command-line name, for messages
    runtime_model: str = "torch"  # "ggml" | "torch" (estimator.physics.runtime)
    memory_prior: str = ""  # key of estimator/data/memory_prior.json and coefficients "memory"
    max_batched_tokens: int = 8192  # token budget of one scheduler step (torch runtime model)
    int8_gemm: bool = False
    materializes_kq_without_fa: bool = False
    pipelines_layer_split: bool = False
    moe_cpu_offload: bool = False  # per-layer routed-expert offload (llama.cpp --n-cpu-moe)
    flash_attn_option: bool = False  # flash attention is a user switch (llama.cpp -fa), not the engine's pick
    offload_flag: str = ""  # the flag that keeps weight bytes in host RAM
    kv_dtype_hint: str = ""  # appended to the unknown-KV-dtype message
    # the compute backend a report assumes per device vendor (lower case) / kind when the user names none
    # (the speed model's backend covariates, estimator.physics.covariates); "" when the engine has none
    backends_by_vendor: dict[str, str] = {}
    backends_by_kind: dict[str, str] = {}

    # ------------------------------------------------------------------------------------------- speed
    def backend_for(self, hardware) -> str:
        """The backend this engine runs on a device by default: by kind first (CPUs), then by vendor."""
        kind = hardware.kind or "gpu"
        if kind in self.backends_by_kind:
            return self.backends_by_kind[kind]
        return self.backends_by_vendor.get((hardware.vendor or "").lower(), "")

    # ------------------------------------------------------------------------------------------- weights
    def runs(self, quant: QuantSpec) -> bool:
        """True when the engine loads weights in this format (its container holds the format)."""
        return self.container in quant.containers

    # ------------------------------------------------------------------------------------------------ KV
    def layer_kind(self, model: ModelSpec, kind: str) -> str:
        """The attention kind the engine really runs for a layer the config declares as ``kind``."""
        return kind

    def kv_cells(
        self, model: ModelSpec, n_ctx: int, n_seq: int, n_ubatch: int, swa_full: bool = False
    ) -> tuple[int, int]:
        """(cells of a full-attention layer, cells of a sliding-window / chunked layer) for n_seq sequences
        of n_ctx tokens each."""
        raise NotImplementedError

    def accepts_kv(self, kv_dtype: str) -> bool:
        """True when the engine's command line takes this KV dtype name (``kv_flags``)."""
        return kv_dtype.lower() in self.kv_flags

    def reserved_fraction(self, workload: Workload) -> float:
        """The memory fraction a command of this engine asks for: the sized one when the workload runs on this
        engine, else the engine's own default (the workload's value belongs to another engine)."""
        return workload.gpu_memory_utilization if workload.engine == self.name else self.memory_fraction

    def check_cache(self, kv_dtype: str, flash_attn: bool) -> None:
        """SpecError when the engine cannot allocate this KV cache at all (raised while sizing it)."""

    # ------------------------------------------------------------------------------------------ requests
    def check(self, workload: Workload) -> None:
        """Refuse (SpecError, one line) a requested configuration the engine cannot run: its KV dtype, MoE
        expert offload; the physics-level checks (``check_cache``) run while sizing."""
        if workload.moe_offload_layers and not self.moe_cpu_offload:
            raise SpecError(
                f"--n-cpu-moe is a llama.cpp option; for {self.label}: --offload-gib ({self.offload_flag})"
            )
        if workload.kv_dtype.lower() not in self.kv_dtypes:
            raise SpecError(
                f"{self.label} has no {workload.kv_dtype} KV cache; use one of {', '.join(self.kv_dtypes)}"
                + (f" ({self.kv_dtype_hint})" if self.kv_dtype_hint else "")
            )

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        """The engine's command line for this configuration (``exact`` when workload.engine is this one)."""
        raise NotImplementedError


_DENSE_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def checkpoint_args(model: ModelSpec, quant: QuantSpec) -> tuple[str, list[str], list[str]] | None:
    """(model argument, extra flags, notes) of a Hugging Face checkpoint engine (vLLM, SGLang) for a dense
    dtype (``--dtype``) or FP8 (``--quantization fp8`` quantizes a bf16 checkpoint at load time); None for
    any other format (the engine decides)."""
    q = quant.name.upper()
    repo = model.hf_id or model.id
    if q in _DENSE_DTYPES:
        return repo, ["--dtype", _DENSE_DTYPES[q]], []
    if q == "FP8":
        if model.native_dtype == "fp8":
            return repo, [], []
        note = "--quantization fp8 quantizes the bf16 checkpoint to FP8 at load time"
        return repo, ["--quantization", "fp8"], [note]
    return None


def gpu_layers(model: ModelSpec, workload: Workload, weights_bytes: int) -> int:
    """Layers kept on the device: all (999) unless ``offload_bytes`` moves whole layers to host RAM; then
    ``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))`` (at least 0)."""
    if workload.offload_bytes <= 0 or weights_bytes <= 0:
        return 999
    per_layer = weights_bytes / model.n_layers
    return max(0, model.n_layers - math.ceil(workload.offload_bytes / per_layer))
