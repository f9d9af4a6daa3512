"""harness.synth: synthetic GGUF / config.json models with real architectures, loaded by the real
llama.cpp."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

from estimator.specs import SpecError
from harness import synth
from runners.llama_cpp import amx_safe_loading

ARCHS = (
    "llama", "qwen2", "qwen3", "qwen3_moe", "gemma3", "deepseek_v2", "gpt_oss", "gemma2", "phi3",
    "qwen3_next", "qwen3_5_moe_text", "qwen3_5_text", "glm4_moe", "llama4_text", "nemotron_h",
    "ministral3", "hunyuan", "minimax_m2", "cohere2", "ernie4_5_moe", "gemma4_text", "glm4",
    "deepseek_v32", "glm_moe_dsa", "dots1",
)  # fmt: skip

try:
    import llama_cpp
except ImportError:  # pragma: no cover - exercised where llama-cpp-python is missing
    llama_cpp = None

needs_llama = pytest.mark.skipif(llama_cpp is None, reason="llama-cpp-python not installed")


def test_every_writer_is_loaded_by_llama_cpp():
    """The writer's tensors are the estimator's inventory (``tensor_plan``), so llama.cpp loading a tiny model
    of every architecture it writes (``test_gguf_loads_and_evaluates``) is what checks that inventory: each
    llama.cpp architecture needs one entry in ARCHS."""
    assert {synth.GGUF_ARCH[a] for a in ARCHS} == set(synth.GGUF_ARCH.values())


def test_tensor_plan_shapes():
    names = {t.name: t for t in synth.tensor_plan(synth.tiny_model("qwen3_moe"), n_layers=2)}
    assert names["token_embd.weight"].shape == (1024, 256)
    assert names["blk.1.ffn_gate_exps.weight"].shape == (8, 256, 256)
    assert names["blk.1.ffn_gate_inp.weight"].storage == "f32"
    assert names["blk.0.attn_q_norm.weight"].shape == (64,)
    assert "blk.2.attn_q.weight" not in names
    mla = {t.name: t for t in synth.tensor_plan(synth.tiny_model("deepseek_v2"))}
    assert mla["blk.1.attn_kv_a_mqa.weight"].shape == (128 + 32, 256)
    assert mla["blk.1.attn_k_b.weight"].shape == (4, 128, 64)
    assert mla["blk.1.attn_v_b.weight"].shape == (4, 64, 128)
    assert "blk.0.ffn_up.weight" in mla and "blk.1.ffn_up_shexp.weight" in mla
    gemma = {t.name for t in synth.tensor_plan(synth.tiny_model("gemma3"))}
    assert "output.weight" not in gemma and "blk.3.post_ffw_norm.weight" in gemma


def test_bad_input():
    with pytest.raises(SpecError, match="no synthetic GGUF writer"):
        synth.gguf_arch(synth.dataclasses.replace(synth.tiny_model("llama"), architecture="mamba2"))
    with pytest.raises(SpecError, match="n_layers must be in 1..4"):
        synth.tensor_plan(synth.tiny_model("llama"), n_layers=9)


def _replace(arch: str, **kw):
    m = synth.tiny_model(arch)
    nested = {k: v for k, v in kw.items() if k in ("mla", "moe", "state") and isinstance(v, dict)}
    for k, v in nested.items():
        kw[k] = synth.dataclasses.replace(getattr(m, k), **v)
    return synth.dataclasses.replace(m, **kw)


@pytest.mark.parametrize(
    ("arch", "change", "needle"),
    [
        ("phi3", {"head_dim": 32}, "heads x head_dim = hidden"),
        ("deepseek_v2", {"mla": None}, "needs an MLA spec"),
        ("deepseek_v32", {"mla": {"index_n_heads": 0}}, "DSA indexer widths"),
        ("qwen3_next", {"state": {"value_head_dim": 32}}, "key and value head dims equal"),
        ("qwen3_next", {"state": None}, "need the state widths"),
        ("gemma4_text", {"moe": {"dense_layers": (0,)}}, "experts on every layer"),
        ("gemma4_text", {"window": None}, "full or sliding, with a window"),
        ("glm4_moe", {"moe": {"shared_ff": 512}}, "shared experts as wide as the routed ones"),
        ("dots1", {"n_kv_heads": 2}, "one KV head per head"),
        ("dots1", {"moe": {"shared_ff": 512}}, "shared experts as wide as the routed ones"),
    ],
)
def test_geometry_a_llama_cpp_loader_cannot_hold_is_refused(arch, change, needle, tmp_path):
    """A spec whose geometry the architecture's llama.cpp loader cannot express is refused with SpecError
    before a file is written (the writer would otherwise produce a file llama.cpp rejects)."""
    with pytest.raises(SpecError, match=needle):
        synth.write_shape_gguf(_replace(arch, **change), tmp_path / "x.gguf")
    assert list(tmp_path.iterdir()) == []


def test_hash_ignores_names_not_shapes():
    m = synth.tiny_model("llama")
    assert synth.spec_hash(m, 2) == synth.spec_hash(synth.dataclasses.replace(m, name="other", source="x"), 2)
    assert synth.spec_hash(m, 2) != synth.spec_hash(m, 3)
    assert synth.spec_hash(m, 2) != synth.spec_hash(synth.dataclasses.replace(m, hidden_size=512), 2)


def test_hf_config_dir(tmp_path):
    folder = synth.write_hf_config_dir(synth.tiny_model("qwen3_moe"), tmp_path / "m", n_layers=2)
    assert [p.name for p in folder.iterdir()] == ["config.json"]
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3MoeForCausalLM"] and cfg["num_hidden_layers"] == 2
    assert cfg["num_experts"] == 8 and cfg["num_experts_per_tok"] == 2 and cfg["head_dim"] == 64
    g = synth.hf_config(synth.tiny_model("gemma3"))
    assert g["model_type"] == "gemma3_text" and g["sliding_window"] == 128
    assert g["layer_types"][:2] == ["sliding_attention", "full_attention"]


def test_hf_config_gemma4_text_decoder():
    """Gemma 4 for vLLM: the catalog's own text_config cut to the proxy's layers, as the text-only class
    (the multimodal wrapper needs torchvision); a proxy ends on a full layer and keeps KV-sharing models
    whole (SpecError otherwise)."""
    from estimator.catalog.resolve import resolve_model

    m = resolve_model("gemma-4-26b-a4b")
    g = synth.hf_config(m, 6)
    assert g["architectures"] == ["Gemma4ForCausalLM"] and g["model_type"] == "gemma4_text"
    assert g["num_hidden_layers"] == 6 and g["layer_types"] == ["sliding_attention"] * 5 + ["full_attention"]
    assert g["attention_k_eq_v"] is True and g["num_global_key_value_heads"] == 2
    assert g["global_head_dim"] == 512
    assert g["enable_moe_block"] is True and g["num_experts"] == 128 and g["hidden_size"] == m.hidden_size
    with pytest.raises(SpecError, match="must end on a full-attention layer"):
        synth.hf_config(m, 4)
    e2b = resolve_model("gemma-4-e2b")
    assert synth.hf_config(e2b)["num_kv_shared_layers"] > 0
    with pytest.raises(SpecError, match="shares KV"):
        synth.hf_config(e2b, 5)


def test_hf_config_gated_deltanet_hybrids():
    """Qwen3-Next and Qwen3.5 for vLLM: the catalog's own config (Qwen3.5: its text_config, with the float32
    ``mamba_ssm_dtype`` vLLM reads) cut to the proxy's layers, as vLLM's text-only classes; read back, the
    proxy has the same state and layer pattern."""
    from estimator.catalog.hfconfig import spec_from_config
    from estimator.catalog.resolve import resolve_model

    nxt = synth.hf_config(resolve_model("qwen3-next-80b-a3b"), 4)
    assert nxt["architectures"] == ["Qwen3NextForCausalLM"] and nxt["num_hidden_layers"] == 4
    assert nxt["full_attention_interval"] == 4 and nxt["linear_num_value_heads"] == 32
    q35 = synth.hf_config(resolve_model("qwen3.5-35b-a3b"), 4)
    assert q35["architectures"] == ["Qwen3_5MoeForCausalLM"] and q35["model_type"] == "qwen3_5_moe_text"
    assert q35["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert q35["mamba_ssm_dtype"] == "float32" and "vision_config" not in q35
    for mid, cfg in (("qwen3-next-80b-a3b", nxt), ("qwen3.5-35b-a3b", q35)):
        back, proxy = spec_from_config(cfg), synth.proxy_spec(resolve_model(mid), 4)
        assert back.layer_types == proxy.layer_types and back.state == proxy.state


def test_vllm_config_folder_rewritten_when_the_writer_changes(tmp_path):
    """A cached config.json that the writer would no longer produce is written again (vLLM reads only it)."""
    m = synth.tiny_model("qwen3")
    folder = synth.synthetic_model(m, "BF16", engine="vllm", cache_dir_path=tmp_path)
    for stale in (json.dumps({"architectures": ["Stale"]}), "{not json"):
        (folder / "config.json").write_text(stale)
        again = synth.synthetic_model(m, "BF16", engine="vllm", cache_dir_path=tmp_path)
        assert again == folder and json.loads((folder / "config.json").read_text()) == synth.hf_config(m)


def _load_and_eval(path, n_tokens=64, vocab=1024):
    with amx_safe_loading(llama_cpp, str(path), 2):  # llama.cpp's AMX buffer crashes on some hosts
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, n_threads_batch=2, verbose=False)
    try:
        llm.eval(list(np.random.default_rng(0).integers(0, vocab, n_tokens)))
        llama_cpp.llama_synchronize(llm.ctx)
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(vocab,))
        return np.array(logits), int(llama_cpp.llama_model_size(llm.model))
    finally:
        llm.close()


@needs_llama
@pytest.mark.llama
@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_loads_and_evaluates(arch, tmp_path):
    path = synth.write_gguf(synth.tiny_model(arch), tmp_path / f"{arch}.gguf")
    logits, size = _load_and_eval(path)
    assert np.isfinite(logits).all() and logits.std() > 0
    import gguf

    reader = gguf.GGUFReader(str(path))
    assert size == sum(int(t.n_bytes) for t in reader.tensors)
    assert bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode() == "none"


@needs_llama
@pytest.mark.llama
def test_quantized_tensor_types(tmp_path):
    import gguf

    model = synth.tiny_model("qwen3")
    f16 = synth.synthetic_model(model, "F16", cache_dir_path=tmp_path, n_layers=2)
    q8 = synth.synthetic_model(model, "Q8_0", cache_dir_path=tmp_path, n_layers=2)
    q4 = synth.synthetic_model(model, "Q4_K_M", cache_dir_path=tmp_path, n_layers=2)
    assert f16.name.endswith("-F16.gguf") and q8.parent == tmp_path
    Q = gguf.GGMLQuantizationType
    t8 = {t.name: t.tensor_type for t in gguf.GGUFReader(str(q8)).tensors}
    assert all(v == (Q.F32 if k.endswith("norm.weight") else Q.Q8_0) for k, v in t8.items())
    t4 = {t.name: t.tensor_type for t in gguf.GGUFReader(str(q4)).tensors}
    assert t4["blk.0.attn_q.weight"] == Q.Q4_K and t4["blk.0.ffn_gate.weight"] == Q.Q4_K
    assert Q.Q6_K in t4.values()  # Q4_K_M keeps some tensors (attn_v / ffn_down / output) in Q6_K
    assert t4["blk.0.attn_norm.weight"] == Q.F32
    assert _load_and_eval(q4)[0].std() > 0
    with pytest.raises(SpecError, match="no quantization"):
        synth.quantize(f16, tmp_path / "x.gguf", "Q9_X")
    assert synth.synthetic_model(model, "Q8_0", cache_dir_path=tmp_path, n_layers=2) == q8  # cached


@needs_llama
@pytest.mark.llama
def test_depth_reduced_catalog_proxy(tmp_path):
    """Qwen3-0.6B with 2 of its 28 layers: real widths (hidden 1024, head_dim 128, vocab 151,936)."""
    from estimator.catalog.resolve import resolve_model

    model = resolve_model("qwen3-0.6b")
    path = synth.synthetic_model(model, "Q8_0", cache_dir_path=tmp_path, n_layers=2)
    with amx_safe_loading(llama_cpp, str(path), 2):  # llama.cpp's AMX buffer crashes on some hosts
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, n_threads_batch=2, verbose=False)
    try:
        assert llm.n_vocab() == 151_936 and llama_cpp.llama_model_n_layer(llm.model) == 2
        assert llama_cpp.llama_model_n_embd(llm.model) == 1024
        llm.eval(list(range(32)))
        llama_cpp.llama_synchronize(llm.ctx)
        desc = ctypes.create_string_buffer(128)
        llama_cpp.llama_model_desc(llm.model, desc, 128)
        assert b"qwen3" in desc.value and b"Q8_0" in desc.value
    finally:
        llm.close()


@needs_llama
@pytest.mark.llama
@pytest.mark.parametrize(
    ("arch", "quant"),
    [("gpt_oss", q) for q in ("F16", "Q8_0", "Q4_K_M", "Q4_0", "MXFP4")]
    + [("gemma2", "Q4_K_M"), ("phi3", "Q4_K_M")]
    + [("qwen3_next", q) for q in ("F16", "Q4_K_M", "Q3_K_M", "IQ4_XS")]
    + [("qwen3_5_moe_text", "Q5_K_M"), ("qwen3_5_text", "Q4_K_M")]
    + [("glm4_moe", q) for q in ("Q4_K_M", "IQ4_XS")]
    + [("llama4_text", q) for q in ("Q4_K_M", "Q3_K_M")]
    + [("nemotron_h", q) for q in ("Q4_K_M", "IQ4_XS")]
    + [("minimax_m2", "Q4_K_M"), ("hunyuan", "Q4_K_M"), ("ministral3", "Q4_K_M"), ("cohere2", "Q4_K_M")]
    + [("ernie4_5_moe", "Q4_K_M")]
    + [("gemma4_text", q) for q in ("F16", "Q4_K_M", "IQ4_XS", "Q3_K_M")]
    + [("glm4", q) for q in ("Q4_K_M", "IQ3_XXS")]
    + [("deepseek_v32", q) for q in ("F16", "Q4_K_M", "IQ4_XS")] + [("glm_moe_dsa", "Q4_K_M")]
    + [("dots1", q) for q in ("Q4_K_M", "Q2_K")],
)
def test_newer_writers_weights_equal_llama_cpp_quantizer(arch, quant, tmp_path):
    """gpt-oss (sliding / full, attention sinks, biased experts), gemma2 (sandwich norms, tied embeddings)
    and phi3 (fused qkv and gate+up): llama.cpp's quantizer output equals the estimator's weights to the
    byte.  gpt-oss's attention output bias (llama.cpp's wo_b) was once missing from the estimator, 4 x
    hidden B per layer.  Qwen3-Next / Qwen3.5 (Gated DeltaNet): the linear layers' attn_qkv is attn_v-like
    for the quantizer (Q4_K_M gives it q6_K on use_more_bits layers); the estimator once counted it as a
    plain ssm_in (Q4_K_M 3.6 % short on the tiny model) and missed the shared expert's gate.  GLM-4.5
    (glm4_moe): dense first layer, the router's score-correction bias, a shared expert.  Llama 4: dense and
    MoE layers interleaved; its QK norm has no weights (the estimator once counted two per layer).
    Nemotron-H: Mamba2, attention and latent-MoE blocks (the router's score-correction bias was missing).
    MiniMax-M2: its q / k norms span all heads (the estimator once sized them per head).  Cohere2: one norm
    per parallel block (the estimator once counted an FFN norm too).  Gemma 4: the experts' gate and up in one
    ffn_gate_up_exps (an ffn_gate tensor for the quantizer), the dense MLP beside them under plain ffn_*
    names, K==V full layers without attn_v, and the small tensors the estimator once missed (rope factors,
    layer scalars, router scales, three norms per MoE layer).  GLM-4-0414 (glm4): gate and up fused in one
    ffn_up of 2 x ff rows, sandwich norms beside its ffn_norm (the estimator once counted separate gate / up
    and no post norms).  DeepSeek-V3.2 / GLM-5 (deepseek32 / glm-dsa): the DSA lightning indexer's weights
    (k_norm with its bias, proj, attn_k - an attn_k tensor for the quantizer - and attn_q_b) and the router's
    score-correction bias, none of which the estimator counted before.  dots.llm1 (dots1): Qwen3's q / k
    norms and DeepSeek-V3's router bias beside shared experts (the estimator once counted neither)."""
    import gguf

    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    model = synth.tiny_model(arch)
    path = synth.synthetic_model(model, quant, cache_dir_path=tmp_path)
    engine = sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
    assert weight_breakdown(model, get_quant(quant)).total_bytes == engine


def _gemma4_e(**kw):
    """A tiny Gemma 4 E2B-style model: per-layer inputs of 64 per layer, the last 4 of 8 layers reusing the
    KV of layers 2 (sliding) and 3 (full) with a double-wide FFN, no experts."""
    m = synth.tiny_model("gemma4_text", n_layers=8)
    fields = dict(id="tiny-gemma4-e", moe=None, per_layer_input=64, n_kv_shared_layers=4,
                  double_wide_mlp=True, k_eq_v=False, global_n_kv_heads=None)  # fmt: skip
    return synth.dataclasses.replace(m, **{**fields, **kw})


def test_gemma4_e_inventory():
    """The per-layer table and projections, no K / V / k norm on the KV-shared layers, 2 x ff there."""
    from estimator.physics.weights import tensor_inventory

    inv = {t.name: t.shape for t in tensor_inventory(_gemma4_e())}
    assert inv["per_layer_token_embd.weight"] == (1024, 8 * 64)
    assert inv["per_layer_model_proj.weight"] == (512, 256)
    assert inv["blk.7.inp_gate.weight"] == (64, 256) and inv["blk.7.proj.weight"] == (256, 64)
    assert all(f"blk.{i}.attn_k.weight" in inv for i in range(4))
    gone = ("attn_k.weight", "attn_v.weight", "attn_k_norm.weight")
    assert not any(f"blk.{i}.{x}" in inv for i in range(4, 8) for x in gone)
    assert inv["blk.3.ffn_up.weight"] == (768, 256) and inv["blk.4.ffn_up.weight"] == (1536, 256)


def test_gemma4_e_kv_sharing_llama_cpp_cannot_hold_is_refused(tmp_path):
    """llama.cpp points shared sliding layers at layer first - 2 and shared full ones at first - 1: those must
    be a sliding then a full layer."""
    with pytest.raises(SpecError, match="sliding then a full layer"):
        synth.write_shape_gguf(_gemma4_e(n_kv_shared_layers=3), tmp_path / "x.gguf")
    assert list(tmp_path.iterdir()) == []


@needs_llama
@pytest.mark.llama
def test_gemma4_e_loads_and_evaluates(tmp_path):
    path = synth.write_gguf(_gemma4_e(), tmp_path / "g4e.gguf")
    logits, size = _load_and_eval(path)
    assert np.isfinite(logits).all() and logits.std() > 0


@needs_llama
@pytest.mark.llama
@pytest.mark.parametrize("quant", ["F16", "Q8_0", "Q4_K_M", "Q3_K_M", "IQ4_XS", "Q2_K"])
def test_gemma4_e_weights_equal_llama_cpp_quantizer(quant, tmp_path):
    """Gemma 4 E2B / E4B: the per-layer token table is a token-embedding tensor for the quantizer (tied
    embeddings: the output head's type, q6_K under Q4_K_M), per_layer_model_proj stays in the file's float
    type, the shared layers have no attn_k / attn_v (the attn_v counter runs over the others) and a wider
    FFN.  llama.cpp's quantizer output equals the estimator's weights to the byte."""
    import gguf

    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    model = _gemma4_e()
    path = synth.synthetic_model(model, quant, cache_dir_path=tmp_path)
    engine = sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)
    assert weight_breakdown(model, get_quant(quant)).total_bytes == engine


def test_gemma4_e_gguf_reads_back(tmp_path):
    """A Gemma 4 E-style GGUF (per-layer inputs, KV-shared layers, a per-layer feed_forward_length) reads back
    as the spec it was written from, and its tensors sum to the recipe's F16 bytes."""
    from estimator.catalog.ggufmodel import load_gguf
    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    model = _gemma4_e()
    m = load_gguf(synth.write_shape_gguf(model, tmp_path / "g4e.gguf"))
    assert (m.per_layer_input, m.n_kv_shared_layers, m.double_wide_mlp) == (64, 4, True)
    assert (m.intermediate_size, m.k_eq_v, m.global_head_dim) == (768, False, 128)
    assert weight_breakdown(m, None).total_bytes == weight_breakdown(model, get_quant("F16")).total_bytes
