"""GGUF file -> ModelSpec (architecture from metadata, exact tensor bytes per type).

Read with the ``gguf`` package's GGUFReader (memory-mapped; tensor data is not read).  Metadata keys
(``{arch}.`` prefix, llama.cpp's LLM_KV names): block_count, embedding_length, feed_forward_length (scalar or
per-layer array), attention.head_count / head_count_kv (scalar or per-layer), attention.key_length (head_dim),
attention.sliding_window, attention.sliding_window_pattern (per-layer bools or a period),
attention.kv_lora_rank,
attention.q_lora_rank, attention.key_length_mla / value_length_mla, rope.dimension_count, context_length,
vocab_size (or the token list length), expert_count, expert_used_count, expert_feed_forward_length,
expert_shared_count, expert_shared_feed_forward_length, leading_dense_block_count, full_attention_interval,
ssm.conv_kernel / state_size / group_count / inner_size / time_step_rank, attention.indexer.head_count /
key_length / top_k (DeepSeek Sparse Attention), attention.key_length_swa, attention.shared_kv_layers and
embedding_length_per_layer_input (Gemma 4: the sliding layers' head width; E2B / E4B's per-layer inputs,
KV-shared layers and, from a per-layer feed_forward_length twice as wide on those, E2B's double-wide FFN).

``ModelSpec.gguf_tensors`` holds (name, ggml type, n_elements, n_bytes) for every tensor, so weight bytes are
the exact sum of the file's tensors: any recipe, dynamic per-tensor mixes (Unsloth's UD-*) included.  A split
GGUF (``split.count`` > 1, llama.cpp's ``<name>-00001-of-0000N.gguf`` files, as the large UD-IQ1_S / IQ1_M
uploads are) is read from its first file: the tensors of every shard are summed, the metadata is the
first's.  A file that is not GGUF, or whose tensor data runs past the end of the file (truncated), raises
SpecError.

Hostile files: the path must be a regular file (opened without blocking: a FIFO named ``x.gguf`` is refused,
not waited on); every numeric metadata key the loader reads is checked against ``GGUF_NUMBERS`` before use
(an integer in range — a per-layer array where llama.cpp allows one —, so a zero head count cannot divide by
zero and a block count of 2^31 cannot build a list per layer); the built spec is checked whole
(``estimator.validate.check_model``: top-k <= experts, heads, windows, ...).  ``context_length`` is required
(llama.cpp requires it too).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from estimator.catalog.files import open_regular
from estimator.specs import (
    CHUNKED,
    FULL,
    LINEAR,
    MAMBA,
    NONE,
    SLIDING,
    MLASpec,
    ModelSpec,
    MoESpec,
    SpecError,
    StateSpec,
)
from estimator.validate import (
    COUNT,
    EXPERTS,
    HEADS,
    MAX_LAYERS,
    MAX_MODEL_CONTEXT,
    MAX_WIDTH,
    NUMBER,
    PER_LAYER,
    WIDTH,
    WINDOW,
    Bound,
    check_fields,
    check_model,
    check_number,
)

# Numeric metadata keys (after the ``{arch}.`` prefix) -> (range, NUMBER / PER_LAYER: estimator.validate).
GGUF_NUMBERS: dict[str, tuple[Bound, str]] = {
    "block_count": (Bound(1, MAX_LAYERS), NUMBER),
    "embedding_length": (Bound(1, MAX_WIDTH), NUMBER),
    "feed_forward_length": (WIDTH, PER_LAYER),
    "attention.head_count": (HEADS, PER_LAYER),
    "attention.head_count_kv": (HEADS, PER_LAYER),
    "attention.key_length": (HEADS, NUMBER),
    "vocab_size": (Bound(1, MAX_WIDTH), NUMBER),
    "context_length": (Bound(1, MAX_MODEL_CONTEXT), NUMBER),
    "attention.sliding_window": (WINDOW, NUMBER),
    "attention.chunk_size": (WINDOW, NUMBER),
    "full_attention_interval": (COUNT, NUMBER),
    "ssm.conv_kernel": (HEADS, NUMBER),
    "ssm.state_size": (HEADS, NUMBER),
    "ssm.inner_size": (WIDTH, NUMBER),
    "ssm.group_count": (HEADS, NUMBER),
    "ssm.time_step_rank": (HEADS, NUMBER),
    "expert_count": (EXPERTS, NUMBER),
    "expert_used_count": (EXPERTS, NUMBER),
    "expert_shared_count": (EXPERTS, NUMBER),
    "leading_dense_block_count": (COUNT, NUMBER),
    "expert_feed_forward_length": (WIDTH, NUMBER),
    "expert_shared_feed_forward_length": (WIDTH, NUMBER),
    "attention.kv_lora_rank": (WIDTH, NUMBER),
    "attention.q_lora_rank": (WIDTH, NUMBER),
    "attention.key_length_mla": (HEADS, NUMBER),
    "attention.value_length_mla": (HEADS, NUMBER),
    "rope.dimension_count": (HEADS, NUMBER),
    "attention.indexer.head_count": (HEADS, NUMBER),
    "attention.indexer.key_length": (HEADS, NUMBER),
    "attention.indexer.top_k": (WINDOW, NUMBER),
    "attention.key_length_swa": (HEADS, NUMBER),
    "attention.shared_kv_layers": (COUNT, NUMBER),
    "embedding_length_per_layer_input": (WIDTH, NUMBER),
}

# The recurrent-state dtype a GGUF's source checkpoint declares, per GGUF architecture.  A GGUF does not
# carry config.json's ``mamba_ssm_dtype``; vLLM serves a GGUF with the original repository's config
# (``--tokenizer`` / ``--hf-config-path``), and every published Qwen3.5 config.json says "float32" (the
# catalog's Qwen3.5 entries, from their config.json files), so a Qwen3.5 GGUF keeps that.  Other hybrids
# declare none (Qwen3-Next) or are float32 by the engine's own default (Nemotron-H in vLLM).
GGUF_SSM_DTYPE = {"qwen35": "float32", "qwen35moe": "float32"}

# GGUF architecture names -> HF model_type used elsewhere in the estimator
_ARCH_MAP = {
    "qwen3moe": "qwen3_moe",
    "qwen2moe": "qwen2_moe",
    "deepseek2": "deepseek_v3",
    "glm4moe": "glm4_moe",
    "gpt-oss": "gpt_oss",
    "gemma3": "gemma3_text",
    "qwen3next": "qwen3_next",
    "qwen35": "qwen3_5_text",
    "qwen35moe": "qwen3_5_moe_text",
    "nemotron_h": "nemotron_h",
    "llama4": "llama4_text",
    "command-r": "cohere",
    "cohere2": "cohere2",
    "ernie4_5-moe": "ernie4_5_moe",
    "hunyuan-moe": "hunyuan",
    "minimax-m2": "minimax_m2",
    "phi3": "phi3",
    "gemma4": "gemma4_text",
    "deepseek32": "deepseek_v32",
    "glm-dsa": "glm_moe_dsa",
}


def ggml_type_name(enum_name: str) -> str:
    """ggml's spelling of a tensor type (``ggml_type_name``) from gguf's enum name: lower case, k-quants with
    an upper-case K (``Q4_K`` -> ``q4_K``, ``IQ4_XS`` -> ``iq4_xs``, ``BF16`` -> ``bf16``)."""
    n = enum_name.lower()
    return n[:-2] + "_K" if n.endswith("_k") else n


def file_type_name(code, tensors) -> str:
    """llama.cpp's name of a GGUF file's type: ``general.file_type`` (LLAMA_FTYPE_MOSTLY_Q4_K_M = 15 ->
    "Q4_K_M", ALL_F32 -> "F32"); without the key (or with an unknown code) the storage type holding most
    bytes, upper case ("mostly Q8_0" files say "Q8_0")."""
    if code is not None:
        from gguf import LlamaFileType

        try:
            name = LlamaFileType(int(code)).name
        except (ValueError, TypeError):
            name = ""
        if name and name != "GUESSED":
            return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    by_type: dict[str, int] = {}
    for _, ttype, _, nb in tensors:
        by_type[ttype] = by_type.get(ttype, 0) + nb
    return max(by_type, key=by_type.get).upper() if by_type else "GGUF"


def _val(reader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    try:
        v = f.contents()
    except Exception:  # noqa: BLE001 - a malformed field is treated as absent
        return default
    return v


def _scalar(v, default=None):
    if isinstance(v, list):
        vals = [x for x in v if x]
        return max(vals) if vals else default
    return default if v is None else v


def _check_numbers(reader, prefix: str, p: Path) -> None:
    """SpecError naming the file, key and value for a numeric key outside GGUF_NUMBERS."""
    values = {prefix + key: _val(reader, prefix + key) for key in GGUF_NUMBERS}
    check_fields(values, {prefix + key: rule for key, rule in GGUF_NUMBERS.items()}, str(p))
    pattern = _val(reader, prefix + "attention.sliding_window_pattern")
    if pattern is not None and not (
        isinstance(pattern, list) and all(isinstance(x, bool | int) for x in pattern)
    ):
        check_number(pattern, COUNT, f"{p}: {prefix}attention.sliding_window_pattern")


_SHARD = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")
MAX_SHARDS = 1024  # files of one split GGUF (llama.cpp's gguf-split writes a few dozen at most)


def _open(p: Path):
    """GGUFReader of one regular file; SpecError for a missing file, a FIFO / device / folder (refused without
    blocking), a file that is not GGUF or does not parse."""
    if not os.path.lexists(p):
        raise SpecError(f"{p}: no such GGUF file")
    fd, _ = open_regular(p)  # a FIFO / device / folder is refused without blocking
    try:
        magic = os.read(fd, 4)
    finally:
        os.close(fd)
    if magic != b"GGUF":
        raise SpecError(f"{p}: not a GGUF file (magic {magic!r}, expected b'GGUF')")
    try:
        from gguf import GGUFReader

        return GGUFReader(str(p), "r")
    except Exception as exc:  # noqa: BLE001 - any parse failure is bad input
        raise SpecError(f"{p}: unreadable or truncated GGUF ({type(exc).__name__}: {exc})") from None


def _tensors(p: Path, reader) -> list[tuple[str, str, int, int]]:
    """(name, ggml type, n_elements, n_bytes) of every tensor of one file; SpecError when data is missing."""
    size = p.stat().st_size
    out = []
    for t in reader.tensors:
        end = int(t.data_offset) + int(t.n_bytes)  # data_offset is absolute in the file
        if end > size:
            raise SpecError(f"{p}: truncated GGUF (tensor {t.name} ends at byte {end}, file has {size})")
        out.append((t.name, ggml_type_name(t.tensor_type.name), int(t.n_elements), int(t.n_bytes)))
    return out


def _shards(first: Path, n_split: int) -> list[Path]:
    """The files of a split GGUF (llama.cpp's ``<stem>-00001-of-0000N.gguf`` naming), the first one given;
    SpecError naming a missing shard."""
    mt = _SHARD.match(first.name)
    if mt is None or int(mt.group("i")) != 1:
        raise SpecError(
            f"{first}: split GGUF ({n_split} files); pass its first file, <name>-00001-of-{n_split:05d}.gguf"
        )
    shards = [
        first.with_name(f"{mt.group('stem')}-{i:05d}-of-{n_split:05d}.gguf") for i in range(1, n_split + 1)
    ]
    for s in shards:
        if not s.is_file():
            raise SpecError(f"{first}: split GGUF shard {s.name} is missing")
    return shards


def load_gguf(path: str | Path) -> ModelSpec:
    """ModelSpec of a .gguf file (the first file of a split GGUF); SpecError for a missing, non-GGUF,
    truncated or inconsistent file."""
    p = Path(path)
    reader = _open(p)
    tensors = _tensors(p, reader)
    n_split = _val(reader, "split.count", 0) or 0
    if n_split:
        check_number(n_split, Bound(1, MAX_SHARDS), f"{p}: split.count")
    if int(n_split) > 1:
        for shard in _shards(p, int(n_split))[1:]:
            tensors += _tensors(shard, _open(shard))
        expected = int(_val(reader, "split.tensors.count", len(tensors)) or len(tensors))
        if len(tensors) != expected:
            raise SpecError(f"{p}: split GGUF holds {len(tensors)} tensors, its header says {expected}")
    arch = _val(reader, "general.architecture")
    if not arch or not isinstance(arch, str):
        raise SpecError(f"{p}: GGUF without general.architecture")
    a = f"{arch}."
    _check_numbers(reader, a, p)
    try:
        spec = _spec(reader, p, arch, tensors)
    except SpecError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as exc:
        # metadata combinations the checks above did not foresee: one line naming the file, never a traceback
        raise SpecError(f"{p}: unusable GGUF metadata ({type(exc).__name__}: {exc})") from None
    return check_model(spec, str(p))


def _spec(reader, p: Path, arch: str, tensors: list) -> ModelSpec:
    a = f"{arch}."

    def need(key: str):
        v = _val(reader, a + key)
        if v is None:
            raise SpecError(f"{p}: missing GGUF key '{a + key}'")
        return v

    n = int(need("block_count"))
    hidden = int(need("embedding_length"))
    heads_v = _val(reader, a + "attention.head_count", 0)
    heads = int(_scalar(heads_v, 0))
    kv_v = _val(reader, a + "attention.head_count_kv", heads_v)
    if kv_v == 0 and heads:  # a scalar 0 (per-layer arrays use 0 for layers without attention)
        raise SpecError(f"{p}: {a}attention.head_count_kv is 0 for a model with {heads} attention heads")
    kv_heads = int(_scalar(kv_v, heads) or heads)
    head_dim = int(_val(reader, a + "attention.key_length") or (hidden // heads if heads else 0))
    ff = int(_scalar(_val(reader, a + "feed_forward_length"), 0) or 0)
    vocab = _val(reader, a + "vocab_size")
    if vocab is None:
        tok = reader.fields.get("tokenizer.ggml.tokens")
        vocab = len(tok.data) if tok is not None else None
    if vocab is None:
        embd = next((t for t in tensors if t[0] == "token_embd.weight"), None)
        vocab = embd[2] // hidden if embd else None
    if vocab is None:
        raise SpecError(f"{p}: missing GGUF key '{a}vocab_size' (and no token list)")
    ctx = int(need("context_length"))
    # layer kinds
    kinds = [FULL] * n
    window = _val(reader, a + "attention.sliding_window")
    pattern = _val(reader, a + "attention.sliding_window_pattern")
    chunk = _val(reader, a + "attention.chunk_size")
    interval = _val(reader, a + "full_attention_interval")
    if window:
        if isinstance(pattern, list) and len(pattern) == n:
            kinds = [SLIDING if x else FULL for x in pattern]
        elif isinstance(pattern, int) and pattern > 1:
            kinds = [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n)]
        elif arch == "gpt-oss":
            kinds = [SLIDING if i % 2 == 0 else FULL for i in range(n)]
        else:
            kinds = [SLIDING] * n
    elif chunk:
        window = chunk
        kinds = [FULL if (i + 1) % 4 == 0 else CHUNKED for i in range(n)]
    state = None
    if interval:
        kinds = [FULL if (i + 1) % int(interval) == 0 else LINEAR for i in range(n)]
    conv_k = _val(reader, a + "ssm.conv_kernel")
    if conv_k:
        d_state = int(_val(reader, a + "ssm.state_size") or 0)
        d_inner = int(_val(reader, a + "ssm.inner_size") or 0)
        groups = int(_val(reader, a + "ssm.group_count") or 1)
        dt_rank = int(_val(reader, a + "ssm.time_step_rank") or 1)
        if interval:  # Gated DeltaNet: ssm.inner_size = nv*dv, state_size = head dim, group_count = nk
            nv = dt_rank
            dv = d_inner // max(1, nv)
            state = StateSpec(
                recurrent_elems=nv * d_state * dv,
                conv_elems=(2 * groups * d_state + d_inner) * (int(conv_k) - 1),
                n_key_heads=groups,
                n_value_heads=nv,
                key_head_dim=d_state,
                value_head_dim=dv,
                conv_kernel=int(conv_k),
                ssm_dtype=GGUF_SSM_DTYPE.get(arch, ""),
            )
        else:  # Mamba2: heads = time_step_rank
            if isinstance(kv_v, list) and len(kv_v) == n:
                kinds = [
                    FULL
                    if kv
                    else (
                        MAMBA
                        if (isinstance(ff_l := _val(reader, a + "feed_forward_length"), list) and not ff_l[i])
                        else NONE
                    )
                    for i, kv in enumerate(kv_v)
                ]
            else:
                kinds = [MAMBA] * n
            state = StateSpec(
                recurrent_elems=d_inner * d_state,
                conv_elems=(d_inner + 2 * groups * d_state) * (int(conv_k) - 1),
                n_key_heads=groups,
                n_value_heads=dt_rank,
                key_head_dim=d_state,
                value_head_dim=d_inner // max(1, dt_rank),
                conv_kernel=int(conv_k),
            )
    moe = None
    n_exp = int(_val(reader, a + "expert_count") or 0)
    if n_exp > 1:
        dense = int(_val(reader, a + "leading_dense_block_count") or 0)
        n_sh = int(_val(reader, a + "expert_shared_count") or 0)
        expert_ff = int(_val(reader, a + "expert_feed_forward_length") or ff)
        # expert_shared_feed_forward_length is the shared experts' fused width (qwen2moe, ERNIE, Hunyuan,
        # Nemotron-H); without it (deepseek2 and its kin) llama.cpp sizes each shared expert as a routed one
        shared_total = int(_val(reader, a + "expert_shared_feed_forward_length") or 0)
        if shared_total:
            n_sh = max(n_sh, 1)
        shared_ff = shared_total // n_sh if shared_total else (expert_ff if n_sh else 0)
        moe = MoESpec(
            n_experts=n_exp,
            n_experts_used=int(_val(reader, a + "expert_used_count") or 1),
            expert_ff=expert_ff,
            n_shared_experts=n_sh,
            shared_ff=shared_ff,
            dense_layers=tuple(range(dense)),
        )
    mla = None
    kv_lora = _val(reader, a + "attention.kv_lora_rank")
    if kv_lora:
        k_mla = int(_val(reader, a + "attention.key_length_mla") or head_dim)
        rope = int(_val(reader, a + "rope.dimension_count") or 64)
        mla = MLASpec(
            kv_lora_rank=int(kv_lora),
            qk_rope_head_dim=rope,
            qk_nope_head_dim=k_mla - rope,
            v_head_dim=int(_val(reader, a + "attention.value_length_mla") or 128),
            q_lora_rank=int(_val(reader, a + "attention.q_lora_rank") or 0) or None,
            index_n_heads=int(_val(reader, a + "attention.indexer.head_count") or 0),
            index_head_dim=int(_val(reader, a + "attention.indexer.key_length") or 0),
            index_topk=int(_val(reader, a + "attention.indexer.top_k") or 0),
        )
    names = {t[0] for t in tensors}
    name = _val(reader, "general.name") or p.stem
    g_hd = g_kv = None
    k_eq_v = double_wide = False
    per_layer_input = n_kv_shared = 0
    if arch == "gemma4":
        # E2B / E4B: per-layer inputs, KV-shared last layers and (E2B) their FFN twice as wide, which the
        # converter writes as a per-layer feed_forward_length
        per_layer_input = int(_scalar(_val(reader, a + "embedding_length_per_layer_input"), 0) or 0)
        n_kv_shared = int(_val(reader, a + "attention.shared_kv_layers") or 0)
        ff_l = _val(reader, a + "feed_forward_length")
        if isinstance(ff_l, list) and n_kv_shared > 0 and ff_l and int(ff_l[-1]) == 2 * int(ff_l[0]):
            double_wide, ff = True, int(ff_l[0])  # the non-shared layers' width (``_scalar`` took the max)
        # full layers: key_length heads of their own (global_head_dim) and their own KV head count; sliding
        # layers: the *_swa width.  The dense MLP beside the experts is sized as one shared expert.
        g_hd, head_dim = head_dim, int(_val(reader, a + "attention.key_length_swa") or head_dim)
        kv_list = kv_v if isinstance(kv_v, list) and len(kv_v) == n else [kv_heads] * n
        kv_heads = next((int(k) for k, t in zip(kv_list, kinds, strict=True) if t == SLIDING), kv_heads)
        g_kv = next((int(k) for k, t in zip(kv_list, kinds, strict=True) if t == FULL), kv_heads)
        full = [i for i, t in enumerate(kinds) if t == FULL]
        k_eq_v = bool(full) and all(f"blk.{i}.attn_v.weight" not in names for i in full)
        if moe is not None:
            moe = dataclasses.replace(moe, n_shared_experts=1, shared_ff=ff)
    return ModelSpec(
        id=str(p),
        name=str(name),
        architecture=_ARCH_MAP.get(arch, arch),
        hidden_size=hidden,
        n_layers=n,
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ff,
        vocab_size=int(vocab),
        max_context=ctx,
        layer_types=tuple(kinds),
        tie_embeddings="output.weight" not in names,
        window=int(window) if window else None,
        moe=moe,
        mla=mla,
        state=state,
        native_dtype=file_type_name(_val(reader, "general.file_type"), tensors),
        qkv_bias=any(x.endswith("attn_q.bias") for x in names),
        attn_output_gate=arch in ("qwen3next", "qwen35", "qwen35moe"),  # q projection x 2: query and gate
        global_head_dim=g_hd,
        global_n_kv_heads=g_kv,
        k_eq_v=k_eq_v,
        per_layer_input=per_layer_input,
        n_kv_shared_layers=n_kv_shared,
        double_wide_mlp=double_wide,
        source=f"gguf:{p}",
        gguf_tensors=tuple(tensors),
        gguf_path=str(p),
    )
