"""Parse engine log text into numbers: llama.cpp buffer sizes, vLLM startup memory and bench-latency lines.

Pure functions over strings (no engine import), tested on real captured logs.

llama.cpp (format strings of llama.cpp@0c1e570; the function prefix changed across versions, so it is
ignored): ``load_tensors:   CPU_Mapped model buffer size =   938.13 MiB``, ``llama_kv_cache:  CPU KV buffer
size = 32.00 MiB``, ``sched_reserve:  CPU compute buffer size = 90.01 MiB``, ``llama_context:  CPU  output
buffer size = 0.12 MiB``, recurrent ``RS buffer size``, the recurrent-state summary ``llama_memory_recurrent:
size = 0.82 MiB (4 cells, 4 layers, 4 seqs 0 rs_seq), R (f32): 0.07 MiB, S (f32): 0.75 MiB, ...``, and the
KV summaries ``llama_kv_cache: size = 32.00 MiB
(2048 cells, 8 layers, 1/1 seqs), K (f16): 16.00 MiB, V (f16): 16.00 MiB`` / older ``KV self size  = X MiB, K
(f16): ...``. Older trees print model buffers without the word "model" (``llm_load_tensors:  CPU buffer size =
...``). Sizes are printed in MiB with two decimals, so parsed bytes are exact to +-0.005 MiB (5,243 bytes).

vLLM (0.32.0 format strings, methods.md C4): ``Model loading took X GiB memory and Y seconds``, ``Available KV
cache memory: X GiB``, CPU ``Explicitly set (X/Y) GiB for KV cache``, ``CPU KV cache size: 524,288 tokens,
Maximum concurrency for 1,024 tokens per request: 512.00x``, CUDA-graph lines, ``init engine (...) took X s``
and ``vllm bench latency``'s ``Avg latency: X seconds`` / ``P% percentile latency: X seconds``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

MIB = 2**20
GIB = 2**30

_BUFFER_RE = re.compile(
    r"^\s*(?P<prefix>\w+):\s+(?P<device>\S+)\s+(?P<kind>model|KV|compute|output|RS|LoRA)?\s*"
    r"buffer size\s*=\s*(?P<mib>[\d.]+) MiB",
    re.MULTILINE,
)
_KV_SUMMARY_RE = re.compile(
    r"(?:KV self size|llama_kv_cache\w*: size)\s*=\s*(?P<mib>[\d.]+) MiB"
    r"(?:\s*\(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers,\s*(?P<seqs>\d+)/(?P<seqs_max>\d+) seqs\))?"
    r",\s*K \((?P<type_k>\w+)\):\s*(?P<k_mib>[\d.]+) MiB,\s*V \((?P<type_v>\w+)\):\s*(?P<v_mib>[\d.]+) MiB"
)
_RS_SUMMARY_RE = re.compile(
    r"llama_memory_recurrent\w*: size\s*=\s*(?P<mib>[\d.]+) MiB"
    r"\s*\(\s*(?P<cells>\d+) cells,\s*(?P<layers>\d+) layers"
    r".*?R \((?P<type_r>\w+)\):\s*(?P<r_mib>[\d.]+) MiB,\s*S \((?P<type_s>\w+)\):\s*(?P<s_mib>[\d.]+) MiB"
)
_OFFLOAD_RE = re.compile(r"offloaded (?P<n>\d+)/(?P<total>\d+) layers to GPU")
_SWA_CACHE_RE = re.compile(r"creating\s+(?P<which>non-SWA|SWA) KV cache, size = (?P<cells>\d+) cells")
_N_CTX_RE = re.compile(r"^\s*\w+:\s+n_ctx\s*=\s*(?P<n>\d+)", re.MULTILINE)


def _mib_to_bytes(mib: str) -> int:
    return round(float(mib) * MIB)


@dataclass(frozen=True)
class LlamaBuffer:
    """One ``... buffer size = X MiB`` line: kind in model|KV|compute|output|RS|LoRA, device/buffer-type
    name."""

    kind: str
    device: str
    size_bytes: int
    prefix: str


@dataclass(frozen=True)
class KVSummary:
    """One KV-cache summary line (one per cache; SWA models print two)."""

    size_bytes: int
    k_bytes: int
    v_bytes: int
    type_k: str
    type_v: str
    cells: int | None
    layers: int | None


@dataclass(frozen=True)
class RSSummary:
    """The recurrent-state summary line (Gated DeltaNet / Mamba layers): R = convolution state, S = recurrent
    state; cells = sequences it holds state for, layers = recurrent layers."""

    size_bytes: int
    r_bytes: int
    s_bytes: int
    type_r: str
    type_s: str
    cells: int
    layers: int


@dataclass(frozen=True)
class LlamaMemory:
    """Everything llama.cpp's log says about memory.  ``*_bytes`` dicts map device/buffer type -> bytes."""

    buffers: tuple[LlamaBuffer, ...]
    kv_summaries: tuple[KVSummary, ...]
    rs_summaries: tuple[RSSummary, ...] = ()
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    n_ctx: int | None = None
    offloaded_layers: tuple[int, int] | None = None
    swa_cells: dict[str, int] = field(default_factory=dict)

    def total(self, kind: str) -> int | None:
        """Bytes of one buffer kind summed over devices; None when the log has no such line."""
        per_device = self.by_kind.get(kind)
        return sum(per_device.values()) if per_device else None


def parse_llama_buffers(text: str) -> list[LlamaBuffer]:
    """All buffer-size lines in log order.  Lines without a kind word are model buffers (older trees)."""
    out = []
    for m in _BUFFER_RE.finditer(text):
        kind = m.group("kind") or "model"
        out.append(
            LlamaBuffer(
                kind=kind,
                device=m.group("device"),
                size_bytes=_mib_to_bytes(m.group("mib")),
                prefix=m.group("prefix"),
            )
        )
    return out


def parse_kv_summaries(text: str) -> list[KVSummary]:
    """KV summary lines (new ``llama_kv_cache: size = ...`` and old ``KV self size = ...``)."""
    out = []
    for m in _KV_SUMMARY_RE.finditer(text):
        out.append(
            KVSummary(
                size_bytes=_mib_to_bytes(m.group("mib")),
                k_bytes=_mib_to_bytes(m.group("k_mib")),
                v_bytes=_mib_to_bytes(m.group("v_mib")),
                type_k=m.group("type_k"),
                type_v=m.group("type_v"),
                cells=int(m.group("cells")) if m.group("cells") else None,
                layers=int(m.group("layers")) if m.group("layers") else None,
            )
        )
    return out


def parse_rs_summaries(text: str) -> list[RSSummary]:
    """Recurrent-state summary lines (``llama_memory_recurrent: size = 0.82 MiB (4 cells, 4 layers, 4 seqs 0
    rs_seq), R (f32): 0.07 MiB, S (f32): 0.75 MiB, ...``)."""
    return [
        RSSummary(
            size_bytes=_mib_to_bytes(m.group("mib")),
            r_bytes=_mib_to_bytes(m.group("r_mib")),
            s_bytes=_mib_to_bytes(m.group("s_mib")),
            type_r=m.group("type_r"),
            type_s=m.group("type_s"),
            cells=int(m.group("cells")),
            layers=int(m.group("layers")),
        )
        for m in _RS_SUMMARY_RE.finditer(text)
    ]


def parse_llama_memory(text: str) -> LlamaMemory:
    """Buffers grouped by kind then device (same device summed: an SWA model has two KV buffers per
    device)."""
    buffers = parse_llama_buffers(text)
    by_kind: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for b in buffers:
        by_kind[b.kind][b.device] += b.size_bytes
    n_ctx = _N_CTX_RE.findall(text)
    off = _OFFLOAD_RE.findall(text)
    swa: dict[str, int] = {}
    for m in _SWA_CACHE_RE.finditer(text):
        swa["swa" if m.group("which") == "SWA" else "full"] = int(m.group("cells"))
    return LlamaMemory(
        buffers=tuple(buffers),
        kv_summaries=tuple(parse_kv_summaries(text)),
        rs_summaries=tuple(parse_rs_summaries(text)),
        by_kind={k: dict(v) for k, v in by_kind.items()},
        n_ctx=int(n_ctx[-1]) if n_ctx else None,
        offloaded_layers=(int(off[-1][0]), int(off[-1][1])) if off else None,
        swa_cells=swa,
    )


# ---------------------------------------------------------------------------------------------- vLLM
_VLLM_PATTERNS: dict[str, re.Pattern[str]] = {
    "engine_version": re.compile(r"Initializing a V1 LLM engine \(v(?P<v>[^)]+)\)"),
    "weights_gib": re.compile(r"Model loading took (?P<v>[\d.]+) GiB(?: memory)? and (?P<s>[\d.]+) s"),
    "available_kv_gib": re.compile(r"Available KV cache memory: (?P<v>[\d.]+) GiB"),
    "cpu_kv_gib": re.compile(r"Explicitly set \((?P<v>[\d.]+)/(?P<node>[\d.]+)\) GiB for KV cache"),
    "kv_cache_tokens": re.compile(r"(?P<dev>\w+) KV cache size: (?P<v>[\d,]+) tokens"),
    "max_concurrency": re.compile(
        r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<v>[\d.]+)x"
    ),
    "init_engine_s": re.compile(
        r"init engine \(profile, create kv cache, warmup model\) took (?P<v>[\d.]+) s"
    ),
    "cudagraph_estimated_gib": re.compile(r"Estimated CUDA graph memory: (?P<v>[\d.]+) GiB total"),
    "cudagraph_gib": re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs?, took (?P<v>[\d.]+) GiB"),
    "cudagraph_pool_gib": re.compile(r"CUDA graph pool memory: (?P<v>[\d.]+) GiB \(actual\)"),
    "model_init_s": re.compile(r"Initializing model took (?P<v>[\d.]+) seconds"),
}


def parse_vllm_log(text: str) -> dict:
    """Numbers from a vLLM startup log; keys present only when their line is.

    Keys: engine_version (str); weights_bytes, available_kv_bytes, cpu_kv_bytes, cudagraph_estimated_bytes,
    cudagraph_bytes, cudagraph_pool_bytes (GiB in the log, converted with 2^30 and rounded: the log prints two
    decimals, so +-0.005 GiB); weights_load_s, init_engine_s, model_init_s (s); kv_cache_tokens, kv_device,
    max_concurrency (x), max_concurrency_len (tokens per request).  The last occurrence of a line wins.
    """
    out: dict = {}
    for key, pat in _VLLM_PATTERNS.items():
        matches = list(pat.finditer(text))
        if not matches:
            continue
        m = matches[-1]
        v = m.group("v")
        if key == "engine_version":
            out[key] = v
        elif key == "kv_cache_tokens":
            out[key] = int(v.replace(",", ""))
            out["kv_device"] = m.group("dev")
        elif key == "max_concurrency":
            out[key] = float(v)
            out["max_concurrency_len"] = int(m.group("len").replace(",", ""))
        elif key.endswith("_gib"):
            out[key.removesuffix("_gib") + "_bytes"] = round(float(v) * GIB)
            if key == "weights_gib":
                out["weights_load_s"] = float(m.group("s"))
        else:
            out[key] = float(v)
    return out


_AVG_LAT_RE = re.compile(r"Avg latency: (?P<v>[\d.eE+-]+) seconds")
_PCT_LAT_RE = re.compile(r"(?P<p>\d+)% percentile latency: (?P<v>[\d.eE+-]+) seconds")


def parse_vllm_bench_latency(text: str) -> dict:
    """``vllm bench latency`` stdout: {"avg_latency_s": float, "percentiles_s": {"50": float, ...}}."""
    out: dict = {}
    m = _AVG_LAT_RE.search(text)
    if m:
        out["avg_latency_s"] = float(m.group("v"))
    pct = {p.group("p"): float(p.group("v")) for p in _PCT_LAT_RE.finditer(text)}
    if pct:
        out["percentiles_s"] = pct
    return out
