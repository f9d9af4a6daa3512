"""GGUF loader: metadata -> ModelSpec, exact tensor bytes, clear errors for bad files."""

from __future__ import annotations

import dataclasses

import pytest

from estimator.catalog.ggufmodel import load_gguf
from estimator.catalog.resolve import resolve_model
from estimator.physics.weights import weight_breakdown
from estimator.specs import SpecError


def test_gguf_metadata(tiny_gguf):
    m = resolve_model(str(tiny_gguf))
    assert (m.architecture, m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads) == ("llama", 2, 64, 4, 2)
    assert m.vocab_size == 96 and m.max_context == 256 and not m.tie_embeddings


def test_gguf_weight_bytes_are_tensor_sums(tiny_gguf):
    import gguf

    m = load_gguf(tiny_gguf)
    reader = gguf.GGUFReader(str(tiny_gguf))
    file_sum = sum(int(t.n_bytes) for t in reader.tensors)
    wb = weight_breakdown(m)
    assert wb.exact and wb.total_bytes == file_sum
    # F16 tensors take 2 B per element, the Q8_0 head 34 B per 32 elements
    assert wb.by_type_bytes["q8_0"] == 96 * 64 // 32 * 34
    assert wb.by_type_bytes["f16"] == 2 * sum(t[2] for t in m.gguf_tensors if t[1] == "f16")
    assert wb.output_bytes == 96 * 64 // 32 * 34


def test_not_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(SpecError, match="not a GGUF file"):
        resolve_model(str(p))


def test_truncated_gguf(tiny_gguf, tmp_path):
    data = tiny_gguf.read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[: len(data) - 5000])
    with pytest.raises(SpecError, match="truncated"):
        load_gguf(p)
    p.write_bytes(data[:40])
    with pytest.raises(SpecError):
        load_gguf(p)


def test_missing_gguf():
    with pytest.raises(SpecError, match="no such"):
        resolve_model("/nonexistent/model.gguf")


def test_gguf_below_the_default_context_is_sized_at_its_maximum(tmp_path):
    """A GGUF trained at 2,048 tokens is sized at 2,048 when no --ctx is given (with a note), and refused
    when --ctx asks for more (issue 14)."""
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report
    from tests.gguf_files import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", context=2048)
    d = report_to_dict(make_report(ReportRequest(str(path), "rtx-4090")))
    assert d["workload"]["n_ctx"] == 2048
    assert any("maximum of 2,048 tokens" in n for n in d["notes"])  # the request chose it: a note
    with pytest.raises(SpecError, match="above"):
        make_report(ReportRequest(str(path), "rtx-4090", ctx=8192))


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(heads=0), "n_heads must be at least 1"),
        (dict(kv_heads=0), "head_count_kv is 0"),
        (dict(layers=0), "block_count must be between 1"),
        (dict(layers=2**31), "block_count must be between 1 and 4096"),
        (dict(context=None), "missing GGUF key 'llama.context_length'"),
        (dict(extra={"llama.expert_count": 4, "llama.expert_used_count": 8}), "above the experts"),
        (dict(extra={"llama.attention.sliding_window": -4}), "sliding_window must be between 0"),
        (dict(extra={"llama.attention.key_length": "sixteen"}), "key_length must be an integer"),
    ],
)
def test_hostile_metadata_is_one_line(tmp_path, kw, needle):
    from tests.gguf_files import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "m.gguf", **kw)
    with pytest.raises(SpecError) as exc:
        load_gguf(path)
    assert needle in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_gguf_fifo_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "m.gguf"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="is a FIFO, not a regular file"):
        load_gguf(fifo)


def test_split_gguf_sums_every_shard(tiny_gguf, tiny_gguf_split):
    assert len(tiny_gguf_split) >= 3
    whole, split = load_gguf(tiny_gguf), load_gguf(tiny_gguf_split[0])
    assert split.gguf_tensors == whole.gguf_tensors and split.n_layers == whole.n_layers
    with pytest.raises(SpecError, match="first file"):
        load_gguf(tiny_gguf_split[1])
    tiny_gguf_split[-1].rename(tiny_gguf_split[-1].with_suffix(".bak"))
    try:
        with pytest.raises(SpecError, match="shard .* is missing"):
            load_gguf(tiny_gguf_split[0])
    finally:
        tiny_gguf_split[-1].with_suffix(".bak").rename(tiny_gguf_split[-1])


@pytest.mark.parametrize("arch", ["qwen3_next", "qwen3_5_moe_text", "qwen3_5_text"])
def test_hybrid_gguf_reads_back_its_layer_pattern_and_state(arch, tmp_path):
    """A Gated DeltaNet GGUF (llama.cpp qwen3next / qwen35 / qwen35moe keys, as harness.synth writes them)
    gives back the layer pattern, the recurrent-state widths and the gated query of the spec it was written
    from, so its KV cache and state are sized as the catalog model's."""
    import dataclasses

    from estimator.engines import get_engine
    from estimator.physics.kv import kv_cache
    from harness import synth

    spec = synth.tiny_model(arch)
    got = load_gguf(str(synth.write_shape_gguf(spec, tmp_path / f"{arch}.gguf")))
    assert got.architecture == arch and got.attn_output_gate
    # a Qwen3.5 GGUF keeps the float32 recurrent state its source config.json declares (the GGUF does not
    # carry mamba_ssm_dtype), so vLLM sizes it in F32 as it does the catalog's Qwen3.5; Qwen3-Next states none
    qwen35 = arch.startswith("qwen3_5")
    assert got.state.ssm_dtype == ("float32" if qwen35 else "")
    assert get_engine("vllm").state_recurrent_bytes(got) == (4 if qwen35 else 2)
    assert got.layer_types == spec.layer_types
    assert got.state == dataclasses.replace(spec.state, ssm_dtype=got.state.ssm_dtype)
    assert kv_cache(got, 4096, n_seq=2).total_bytes == kv_cache(spec, 4096, n_seq=2).total_bytes


@pytest.mark.parametrize("moe", [True, False], ids=["26b-a4b-like", "31b-like"])
def test_gemma4_gguf_reads_back_its_two_head_geometries(moe, tmp_path):
    """A Gemma 4 GGUF (llama.cpp gemma4 keys as harness.synth writes them: key_length = the full layers'
    heads, key_length_swa = the sliding ones', head_count_kv per layer, no attn_v on the K==V full layers)
    gives back both geometries, K==V and the dense MLP beside the experts, so its weights, KV cache and
    buffers are sized as the catalog model's."""
    import dataclasses

    from estimator.physics.kv import kv_cache
    from harness import synth

    spec = synth.tiny_model("gemma4_text")
    if not moe:
        spec = dataclasses.replace(spec, moe=None)
    got = load_gguf(str(synth.write_shape_gguf(spec, tmp_path / "g4.gguf")))
    assert got.architecture == "gemma4_text" and got.k_eq_v
    assert (got.head_dim, got.n_kv_heads, got.global_head_dim, got.global_n_kv_heads) == (64, 2, 128, 1)
    assert got.layer_types == spec.layer_types and got.moe == spec.moe
    for fa in (True, False):
        kv = kv_cache(got, 4096, flash_attn=fa).total_bytes
        assert kv == kv_cache(spec, 4096, flash_attn=fa).total_bytes


@pytest.mark.parametrize("arch", ["deepseek_v32", "glm_moe_dsa"])
def test_dsa_gguf_reads_back_its_indexer(arch, tmp_path):
    """A DeepSeek Sparse Attention GGUF (llama.cpp deepseek32 / glm-dsa keys: attention.indexer.head_count,
    key_length, top_k) gives back the indexer of the spec it was written from, so its KV cache (the
    indexer's key cache included) is sized as the catalog model's."""
    from estimator.physics.kv import kv_cache
    from harness import synth

    spec = synth.tiny_model(arch)
    got = load_gguf(str(synth.write_shape_gguf(spec, tmp_path / f"{arch}.gguf")))
    assert got.architecture == arch and got.mla == spec.mla
    assert kv_cache(got, 4096).total_bytes == kv_cache(spec, 4096).total_bytes
    assert kv_cache(got, 4096).total_bytes > kv_cache(dataclasses.replace(spec, mla=dataclasses.replace(
        spec.mla, index_n_heads=0)), 4096).total_bytes  # fmt: skip


@pytest.mark.parametrize("arch", ["deepseek_v2", "ernie4_5_moe", "hunyuan"])
def test_moe_gguf_reads_back_its_shared_experts(arch, tmp_path):
    """deepseek2 files carry no shared-expert width (llama.cpp sizes each of n_expert_shared as a routed
    expert); ERNIE / Hunyuan files carry the fused width of all of them.  Either way the spec read back holds
    the same shared width as the one written, so the FFN moment of the compute buffer counts it."""
    from harness import synth

    spec = synth.tiny_model(arch)
    got = load_gguf(str(synth.write_shape_gguf(spec, tmp_path / "m.gguf")))
    width = spec.moe.n_shared_experts * spec.moe.shared_ff
    assert got.moe.n_shared_experts * got.moe.shared_ff == width > 0
