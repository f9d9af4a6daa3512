"""Runner protocol: measure one point in the current process and return a Measurement.

Runners import no other fitbench package, so a runner can run on a bare GPU box that has only its engine
installed (and in the separate vLLM virtual environment).  Engines are imported lazily inside the runner.
Units live in names: *_bytes, *_tok_s, *_s.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class PointSpec:
    """What to measure.  ``model_path`` is a GGUF file (llama.cpp) or a folder holding config.json (vLLM).

    prompt_lengths x depths are measured as prefill tests (pp{n} @ d{depth}); gen_lengths x depths as decode
    tests (tg{n} @ d{depth}); concurrencies > 1 as batched decode (vLLM).  repetitions >= 3 after one warm-up.
    serving_concurrencies: serving tests (vLLM): for each C, prompt length (ISL) and gen length (OSL), C
    clients each send ``serving_requests_per_client`` requests one after the other (a closed loop, as
    ``vllm bench serve --max-concurrency C``); the means over all requests are the test's figures.
    """

    model_path: str
    n_ctx: int
    prompt_lengths: tuple[int, ...] = (512,)
    gen_lengths: tuple[int, ...] = (128,)
    depths: tuple[int, ...] = (0,)
    concurrencies: tuple[int, ...] = (1,)
    repetitions: int = 3
    kv_dtype: str = "f16"
    flash_attn: bool = False
    n_threads: int | None = None
    n_batch: int = 2048
    n_ubatch: int = 512
    n_gpu_layers: int = -1  # -1 = all
    seed: int = 0
    engine_options: dict = field(default_factory=dict)  # e.g. gpu_memory_utilization, max_num_seqs
    serving_concurrencies: tuple[int, ...] = ()
    serving_requests_per_client: int = 4


@dataclass(frozen=True)
class Test:
    """One timed test of a point: pp (prefill) or tg (decode) at a depth and concurrency, or serve (``C`` =
    ``batch`` clients in a closed loop; n_prompt / n_tokens = the requests' input / output tokens; the tok/s
    fields hold the output throughput of all clients; times are means over the requests, seconds)."""

    kind: str  # "pp" | "tg" | "serve"
    n_tokens: int  # prompt tokens (pp) or generated tokens per sequence (tg, serve)
    n_depth: int
    batch: int
    samples_tok_s: tuple[float, ...]  # one value per repetition (tokens per second)
    mean_tok_s: float
    std_tok_s: float  # sample stdev (n-1), 0 for one sample
    ttft_s: float | None = None
    # serve tests only
    n_prompt: int = 0
    tpot_s: float | None = None
    e2e_latency_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    n_requests: int = 0


@dataclass(frozen=True)
class Measurement:
    """Everything one run of a point measured.  Memory fields are None when the engine/OS can't tell."""

    engine: str
    engine_version: str
    build_info: str
    backend: str
    tests: tuple[Test, ...]
    weights_bytes: int | None = None
    kv_bytes: int | None = None
    compute_bytes: int | None = None
    output_bytes: int | None = None
    device_total_bytes: int | None = None
    host_rss_bytes: int | None = None
    n_params: int | None = None
    n_threads: int | None = None
    extra: dict = field(default_factory=dict)
    log_tail: str = ""


class Runner(Protocol):
    name: str

    def available(self) -> bool: ...

    def install_hint(self) -> str: ...

    def measure(self, spec: PointSpec) -> Measurement: ...


# The one place that maps runner names to implementations (imported lazily).
REGISTRY: dict[str, str] = {
    "llama.cpp": "runners.llama_cpp:LlamaCppRunner",
    "vllm": "runners.vllm:VllmRunner",
}
# The ``engine_options`` each runner reads (name -> type); a plan naming another option, or giving one of the
# wrong type, is refused before anything runs (harness.plan).  Keep in step with the runners' ``measure``.
ENGINE_OPTIONS: dict[str, dict[str, type]] = {
    "llama.cpp": {
        "swa_full": bool,
        "use_mmap": bool,
        "offload_kqv": bool,
        "n_seq": int,  # n_seq / kv_unified: sequences and KV layout of memory-only points
        "kv_unified": bool,
        "no_alloc": bool,  # memory-only points through llama.cpp's memory-fit pass (runners.llama_cpp)
        "repack": bool,  # false: llama.cpp --no-repack (no AMX / CPU_REPACK buffers; runners.llama_cpp)
    },
    "vllm": {
        "dtype": str,
        "enforce_eager": bool,
        "max_num_seqs": int,
        "gpu_memory_utilization": float,
        "kv_cache_memory_bytes": int,
        "tensor_parallel_size": int,
        "max_num_batched_tokens": int,
        "quantization": str,
        "block_size": int,
        "enable_prefix_caching": bool,  # off unless asked (a hybrid's startup figures depend on it)
    },
}


def get_runner(name: str) -> Runner:
    """Instantiate a runner by name; raises KeyError naming the known runners."""
    try:
        target = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()
