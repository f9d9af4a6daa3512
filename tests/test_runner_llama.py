"""Real llama.cpp measurements (CPU backend) on tiny synthetic models, through the runner and its child
CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import synth
from runners.base import PointSpec, get_runner
from runners.jsonio import measurement_from_dict

pytestmark = pytest.mark.llama
llama_cpp = pytest.importorskip("llama_cpp")
ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


def _formula(model, hardware, workload, coeffs):
    """The runtime formula's buffers (estimator.physics.runtime): these tests are its evidence against
    llama.cpp, so they ask for it by name (on a CPU the estimate is otherwise the replayed graph,
    tests/test_llama_cpp_graph.py)."""
    from estimator.physics.runtime import runtime_buffers

    return runtime_buffers(model, None, hardware, workload, coeffs, replay=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cache = tmp_path_factory.mktemp("models")
    return {
        a: synth.synthetic_model(synth.tiny_model(a), "Q8_0", cache_dir_path=cache)
        for a in ("llama", "gemma3", "deepseek_v2")
    }


def test_measure_pp_tg_and_memory(models):
    spec = PointSpec(
        model_path=str(models["llama"]),
        n_ctx=512,
        prompt_lengths=(32, 64),
        gen_lengths=(8,),
        depths=(0, 128),
        repetitions=3,
        n_threads=2,
    )
    m = get_runner("llama.cpp").measure(spec)
    assert [(t.kind, t.n_tokens, t.n_depth) for t in m.tests] == [
        ("pp", 32, 0),
        ("pp", 64, 0),
        ("tg", 8, 0),
        ("pp", 32, 128),
        ("pp", 64, 128),
        ("tg", 8, 128),
    ]
    for t in m.tests:
        assert len(t.samples_tok_s) == 3 and all(s > 0 for s in t.samples_tok_s)
        assert min(t.samples_tok_s) <= t.mean_tok_s <= max(t.samples_tok_s) and t.std_tok_s >= 0
    # 4 layers x 2 kv-heads x 64 x (K + V) x 2 B (f16) x 512 cells = 1 MiB (methods.md A4 formula)
    assert m.kv_bytes == 4 * 2 * 64 * 2 * 2 * 512
    assert m.weights_bytes == 3_908_608  # llama_model_size of the Q8_0 tiny llama
    assert m.compute_bytes and m.compute_bytes > 0 and m.output_bytes is not None
    assert abs(m.extra["buffers_bytes"]["model"]["CPU_Mapped"] - m.weights_bytes) < 0.01 * MIB
    assert m.backend == "CPU" and m.n_threads == 2 and m.device_total_bytes is None
    assert m.host_rss_bytes and m.extra["peak_rss_anon_bytes"] > 0
    assert m.engine_version == f"llama-cpp-python {llama_cpp.__version__}" and m.build_info.startswith("ggml")
    assert "KV buffer size" in m.log_tail


def test_swa_and_mla_kv_from_log(models):
    runner = get_runner("llama.cpp")
    g = runner.measure(
        PointSpec(
            model_path=str(models["gemma3"]),
            n_ctx=2048,
            prompt_lengths=(),
            gen_lengths=(),
            n_ubatch=256,
            n_threads=2,
        )
    )
    # full layers: 2048 cells; sliding (window 128): pad(128 + n_ubatch 256, 256) = 512 cells
    assert g.extra["swa_cells"] == {"full": 2048, "swa": 512}
    assert g.kv_bytes == 2 * 2 * 64 * 2 * 2 * (2048 + 512)
    d = runner.measure(
        PointSpec(
            model_path=str(models["deepseek_v2"]),
            n_ctx=1024,
            prompt_lengths=(16,),
            gen_lengths=(4,),
            repetitions=1,
            n_threads=2,
        )
    )
    # MLA caches kv_lora_rank + rope = 160 latent elements per token per layer (V is a view of it)
    assert d.kv_bytes == 4 * 160 * 2 * 1024
    assert [s["v_bytes"] for s in d.extra["kv_summaries"]] == [0]


def test_kv_and_weights_equal_estimator(models):
    """Engine-parsed KV bytes and llama_model_size vs estimator.physics.kv / estimator.physics.weights (same
    point)."""
    kv_mod = pytest.importorskip("estimator.physics.kv")
    weights_mod = pytest.importorskip("estimator.physics.weights")
    runner = get_runner("llama.cpp")
    for arch, n_ctx in (("llama", 1024), ("gemma3", 2048)):
        spec = PointSpec(
            model_path=str(models[arch]), n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), n_threads=2
        )
        m = runner.measure(spec)
        model = synth.tiny_model(arch)
        est = kv_mod.kv_cache(
            model, n_ctx, "f16", 1, "llama.cpp", n_ubatch=spec.n_ubatch, flash_attn=False, swa_full=False
        )
        assert m.kv_bytes == pytest.approx(est.total_bytes, rel=0.01)
        assert m.weights_bytes == pytest.approx(
            weights_mod.weight_breakdown(model, "Q8_0").total_bytes, rel=0.01
        )


def test_depth_beyond_context_is_skipped(models):
    m = get_runner("llama.cpp").measure(
        PointSpec(
            model_path=str(models["llama"]),
            n_ctx=256,
            prompt_lengths=(64,),
            gen_lengths=(),
            depths=(0, 240),
            repetitions=1,
            n_threads=2,
        )
    )
    assert [(t.n_depth) for t in m.tests] == [0]
    assert m.extra["skipped_tests"][0]["n_depth"] == 240


def test_child_cli(models, tmp_path):
    spec = {
        "model_path": str(models["llama"]),
        "n_ctx": 256,
        "prompt_lengths": [32],
        "gen_lengths": [4],
        "repetitions": 3,
        "n_threads": 2,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    cmd = [
        sys.executable,
        "-m",
        "runners",
        "measure",
        "--engine",
        "llama.cpp",
        "--spec",
        str(tmp_path / "spec.json"),
        "--out",
        str(tmp_path / "out.json"),
    ]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    m = measurement_from_dict(json.loads((tmp_path / "out.json").read_text()))
    assert [t.kind for t in m.tests] == ["pp", "tg"] and isinstance(m.tests[0].samples_tok_s, tuple)
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".part"] == []

    spec["flash"] = True
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    r = subprocess.run(
        cmd[:7] + [str(tmp_path / "bad.json"), "--out", str(tmp_path / "o2.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unknown key(s): flash" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o2.json").exists()

    missing = dict(spec, model_path=str(tmp_path / "nope.gguf"))
    missing.pop("flash")
    (tmp_path / "missing.json").write_text(json.dumps(missing))
    r = subprocess.run(
        cmd[:7] + [str(tmp_path / "missing.json"), "--out", str(tmp_path / "o3.json")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"error: model file not found: {tmp_path}/nope.gguf"
    ]

    r = subprocess.run(
        [sys.executable, "-m", "runners", "check", "--engine", "llama.cpp"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and "available" in r.stdout


@pytest.mark.gpu
def test_gpu_offload(models):
    m = get_runner("llama.cpp").measure(
        PointSpec(
            model_path=str(models["llama"]),
            n_ctx=512,
            prompt_lengths=(64,),
            gen_lengths=(8,),
            n_gpu_layers=-1,
        )
    )
    if m.backend == "CPU":
        pytest.skip("llama-cpp-python built without a GPU backend")
    assert m.extra["offloaded_layers"][0] == m.extra["offloaded_layers"][1]
    assert any(dev != "CPU" for dev in m.extra["buffers_bytes"]["KV"])
    assert m.device_total_bytes is None or m.device_total_bytes > 0


# DeepSeek-2 (MLA) keeps more attention activations alive than the prior's 5.5 x hidden: within 15 % only
@pytest.mark.parametrize(("arch", "rel"), [("llama", 0.05), ("gemma3", 0.05), ("deepseek_v2", 0.15)])
def test_memory_only_point_and_compute_buffers_with_and_without_flash_attention(models, arch, rel):
    """A memory-only point creates one context and evaluates nothing.  Its compute buffer, llama.cpp's own,
    is the estimator's prior (estimator/data/memory_prior.json) within 5 % with flash attention on and off,
    at 4K and 32K cells (the F32 KQ scores dominate without flash attention at 32K)."""
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import HardwareSpec, Workload

    cpu = HardwareSpec("cpu", "cpu", "x", "cpu", "cpu", 2**36, 50.0, 1.0)
    model = synth.tiny_model(arch)
    runner = get_runner("llama.cpp")
    for n_ctx in (4096, 32768):
        for fa in (True, False):
            spec = PointSpec(
                model_path=str(models[arch]), n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), flash_attn=fa,
                engine_options={"n_seq": 1},
            )  # fmt: skip
            m = runner.measure(spec)
            assert m.tests == () and m.extra["memory_only"] and m.kv_bytes > 0
            wl = Workload(n_ctx=n_ctx, flash_attn=fa)
            est = _formula(model, cpu, wl, default_coefficients("llama.cpp")).compute_bytes
            assert est == pytest.approx(m.compute_bytes, rel=rel), (n_ctx, fa)


@pytest.mark.parametrize(
    "arch",
    [
        "llama",
        "gemma3",
        "deepseek_v2",
        "gpt_oss",
        "gemma2",
        "phi3",
        "qwen3_next",
        "glm4_moe",
        "llama4_text",
        "nemotron_h",
        "cohere2",
        "gemma4_text",
        "deepseek_v32",
    ],
)
def test_memory_fit_pass_on_a_shape_only_file_equals_a_real_allocation(arch, tmp_path):
    """engine option no_alloc on the data-less file (harness.synth.write_shape_gguf) reports what a real
    context allocates from the F16 file with data: the same compute buffer to the byte, the same weights,
    the same KV cache (from the cache's summary line: 0.01 MiB rounding per line), flash attention on and
    off, one and four sequences.  Nothing of the shape file is read: it holds no tensor data."""
    model = synth.tiny_model(arch)
    real = synth.synthetic_model(model, "F16", cache_dir_path=tmp_path / "real")
    shape = synth.synthetic_model(model, "F16", cache_dir_path=tmp_path, shape_only=True)
    assert shape.stat().st_size == real.stat().st_size
    runner = get_runner("llama.cpp")
    for n_ctx, fa, n_seq in ((4096, True, 1), (4096, False, 1), (2048, True, 4)):
        common = dict(n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), flash_attn=fa, n_ubatch=256)
        got = {
            name: runner.measure(
                PointSpec(model_path=str(path), engine_options={"n_seq": n_seq, **opts}, **common)
            )
            for name, path, opts in (("real", real, {}), ("fit", shape, {"no_alloc": True}))
        }
        r, f = got["real"], got["fit"]
        assert f.extra["no_alloc"] and not r.extra["no_alloc"]
        assert f.compute_bytes == r.compute_bytes > 0, (n_ctx, fa, n_seq)
        assert f.weights_bytes == r.weights_bytes
        lines = len(f.extra["kv_summaries"]) + len(f.extra["rs_summaries"])  # each rounded to 0.01 MiB
        assert f.kv_bytes == pytest.approx(r.kv_bytes, abs=0.006 * MIB * lines)


def _fit_pass_compute_bytes(model, n_ctx: int, tmp_path) -> int:
    """llama.cpp's memory-fit pass (no_alloc, flash attention, one sequence) on a data-less copy of
    ``model``: the compute buffer it reports."""
    path = synth.synthetic_model(model, "F16", cache_dir_path=tmp_path, shape_only=True)
    spec = PointSpec(
        model_path=str(path), n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), flash_attn=True,
        engine_options={"no_alloc": True},
    )  # fmt: skip
    return get_runner("llama.cpp").measure(spec).compute_bytes


# Nemotron-3-Super's widths at 12 layers with a 16K vocabulary (the output head small, so the FFN moment is
# the largest) and one width changed at a time: experts per token, expert_ff, latent width
UNGATED_VARIANTS = [
    dict(),
    dict(expert_ff=1344),
    dict(expert_ff=5376),
    dict(latent_size=2048),
    dict(latent_size=0),  # experts on the hidden width
    dict(n_experts_used=16),
]


@pytest.mark.parametrize("change", UNGATED_VARIANTS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_ungated_moe_ffn_moment_follows_llama_cpp(change, tmp_path):
    """llama.cpp's memory-fit pass on a squared-ReLU latent MoE (Nemotron-H): the FFN moment grows by exactly
    n_experts_used x (expert_ff + expert width) floats per token, as runtime._ungated_ff counts it; the
    prior is within 6 % of each buffer (it counts 4 x hidden of the ~6 x hidden the graphs hold: 8 MiB at
    u = 512, left to the fit), where the gated form (3 x ff_max) is 23-110 % high."""
    from dataclasses import replace

    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import Workload

    base = get_model("nemotron-3-super-120b-a12b")
    base = replace(base, vocab_size=16384, n_layers=12, layer_types=base.layer_types[:12])
    model = replace(base, moe=replace(base.moe, **change))
    measured = _fit_pass_compute_bytes(model, 4096, tmp_path)
    wl = Workload(n_ctx=4096, flash_attn=True)
    cpu = get_hardware("epyc-9654")
    est = _formula(model, cpu, wl, default_coefficients("llama.cpp")).compute_bytes
    assert est == pytest.approx(measured, rel=0.06)
    gated = _formula(replace(model, ffn_gated=True), cpu, wl, default_coefficients("llama.cpp"))
    assert gated.compute_bytes > 1.2 * measured


# DeepSeek-V3.2's widths with a 16K vocabulary at 6 layers (3 dense, 3 MoE), one DSA fact changed at a time
DSA_VARIANTS = [
    dict(),
    dict(index_topk=1024),
    dict(index_n_heads=32),
    dict(index_head_dim=256),
    dict(n_layers=20),
]


@pytest.mark.parametrize("change", DSA_VARIANTS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_sparse_attention_moment_follows_llama_cpp(change, tmp_path):
    """llama.cpp's memory-fit pass on DeepSeek Sparse Attention variants: the buffer holds every layer's
    top-k indices (top_k floats per token per layer: 6 -> 20 layers and top_k 2,048 -> 1,024 move it by
    exactly that) and 1.5 x cells for the indexer's scores and top-k mask, not the indexer's heads or
    width; runtime._dsa_floats counts those, within 2.5 % where the MLA form alone is 6-20 % under (39 % at
    DeepSeek-V3.2's 61 layers)."""
    from dataclasses import replace

    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import Workload

    full = get_model("deepseek-v3.2")
    n = change.get("n_layers", 6)
    mla = replace(full.mla, **{k: v for k, v in change.items() if k != "n_layers"})  # change stays whole
    model = replace(full, vocab_size=16384, n_layers=n, layer_types=full.layer_types[:n], mla=mla)
    measured = _fit_pass_compute_bytes(model, 8192, tmp_path)
    wl, cpu, prior = Workload(n_ctx=8192, flash_attn=True), get_hardware("epyc-9654"), default_coefficients()
    assert _formula(model, cpu, wl, prior).compute_bytes == pytest.approx(measured, rel=0.025)
    without = replace(model, mla=replace(model.mla, index_n_heads=0))
    assert _formula(without, cpu, wl, prior).compute_bytes < 0.95 * measured


# (model, cells): full-depth graphs at a context where llama.cpp packs the rows under the logits at the bottom
# of its buffer (the allocator trace of the memory-fit pass); the first three keep every row's final hidden
# state as a graph output (h_nextn), Qwen3-8B does not
KEPT_HIDDEN_CASES = [
    ("gpt-oss-20b", 32768, 3),
    ("qwen3.5-9b", 8192, 3),
    ("gemma-4-31b", 32768, 3),
    ("qwen3-8b", 32768, 2),
]


@pytest.mark.parametrize("model_id,n_ctx,rows", KEPT_HIDDEN_CASES, ids=[c[0] for c in KEPT_HIDDEN_CASES])
def test_head_keeping_final_hidden_state_follows_llama_cpp(model_id, n_ctx, rows, tmp_path):
    """llama.cpp's memory-fit pass: a graph that keeps every row's final hidden state as an output (gpt-oss,
    Qwen3.5, Gemma 4: EngineProfile.head_keeps_hidden_archs) holds three hidden rows per token under the
    logits (input embeddings, the kept state, the gathered result_norm), another graph two; the estimator's
    head moment counts the third row for those architectures (within 0.5 % with the prior)."""
    from estimator.catalog.data import get_hardware, get_model
    from estimator.engines import get_engine
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import Workload

    model = get_model(model_id)
    assert (model.architecture in get_engine("llama.cpp").head_keeps_hidden_archs) == (rows == 3)
    measured = _fit_pass_compute_bytes(model, n_ctx, tmp_path)
    u = 512
    assert measured == pytest.approx(4 * u * (model.vocab_size + rows * model.hidden_size), abs=64 * 1024)
    wl, cpu, prior = Workload(n_ctx=n_ctx, flash_attn=True), get_hardware("epyc-9654"), default_coefficients()
    assert _formula(model, cpu, wl, prior).compute_bytes == pytest.approx(measured, rel=0.005)


def _change_id(change: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in change.items()) or "as-is"


# ERNIE-4.5-21B-A3B's widths at 6 layers (one dense, five MoE; its 103K vocabulary, so the logits are the
# largest moment) and one MoE fact changed at a time: shared experts, experts per token, expert width
MOE_HEAD_VARIANTS = [
    dict(),  # 6 of 64 experts, two shared, hidden 2,560 <= 2 x expert_ff 1,536: the down output fits
    dict(n_shared_experts=0),
    dict(n_experts_used=4),
    dict(expert_ff=1024),  # hidden > 2 x expert_ff: the down output lies above its gate and up
]


@pytest.mark.parametrize("n_ctx", [4096, 16384])
@pytest.mark.parametrize("change", MOE_HEAD_VARIANTS, ids=_change_id)
def test_moe_head_moment_follows_llama_cpp(change, n_ctx, tmp_path):
    """llama.cpp's memory-fit pass: a gated MoE layer with shared experts leaves (n_used + 2) x hidden floats
    per token under the logits when its down output fits the hole of its gate and up outputs, 2 x hidden
    when it does not (1 x once the freed mask holds two hidden rows), plus the mask while the mask is smaller
    than one hidden row; nothing without shared experts (runtime._moe_head_floats).  Without the term the
    estimate is 2-17 % under these buffers."""
    from dataclasses import replace

    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.runtime import default_coefficients, runtime_buffers
    from estimator.specs import Workload

    full = get_model("ernie-4.5-21b-a3b")
    base = replace(full, n_layers=6, layer_types=full.layer_types[:6])
    model = replace(base, moe=replace(base.moe, **change))
    measured = _fit_pass_compute_bytes(model, n_ctx, tmp_path)
    wl, cpu, prior = Workload(n_ctx=n_ctx, flash_attn=True), get_hardware("epyc-9654"), default_coefficients()
    assert _formula(model, cpu, wl, prior).compute_bytes == pytest.approx(measured, rel=0.01)
    # the replayed graph (tests/test_llama_cpp_graph.py) on these variants: llama.cpp's own buffer
    assert runtime_buffers(model, None, cpu, wl).compute_bytes == pytest.approx(measured, abs=0.01 * 2**20)
    without = _formula(model, cpu, wl, replace(prior, head_residue_factor=0.0)).compute_bytes
    if model.moe.n_shared_experts:  # at least one hidden row per token under the logits is the term's
        assert measured - without >= 4 * 512 * model.hidden_size * 0.99
    else:
        assert without == pytest.approx(measured, rel=0.01)


# ERNIE-4.5-300B-A47B's widths at 6 layers (three dense, three MoE) with a 16K vocabulary, so that the FFN
# moment is the largest: hidden 8,192 > 2 x expert_ff 3,584
DOWN_ABOVE_VARIANTS = [dict(), dict(expert_ff=1792), dict(n_experts_used=4)]


@pytest.mark.parametrize("change", DOWN_ABOVE_VARIANTS, ids=_change_id)
def test_moe_down_output_above_its_gate_and_up_follows_llama_cpp(change, tmp_path):
    """llama.cpp's memory-fit pass: when hidden > 2 x expert_ff the experts' down output (n_used x hidden
    floats per token) does not fit the hole their gate and up outputs leave and lies above their SwiGLU
    product, so the MoE layer's moment is 3 x n_used x expert_ff + n_used x hidden + the hidden rows below;
    with 4 experts per token the dense layers' moment is the larger and the term must not touch it."""
    from dataclasses import replace

    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import Workload

    full = get_model("ernie-4.5-300b-a47b")
    base = replace(full, vocab_size=16384, n_layers=6, layer_types=full.layer_types[:6])
    model = replace(base, moe=replace(base.moe, **change))
    measured = _fit_pass_compute_bytes(model, 4096, tmp_path)
    wl, cpu, prior = Workload(n_ctx=4096, flash_attn=True), get_hardware("epyc-9654"), default_coefficients()
    assert _formula(model, cpu, wl, prior).compute_bytes == pytest.approx(measured, rel=0.01)
    moe, h, u = model.moe, model.hidden_size, 512
    down_bytes = 4 * u * moe.n_experts_used * h
    moe_moment = 4 * u * (3 * moe.n_experts_used * moe.expert_ff + 4 * h) + down_bytes
    dense_moment = 4 * u * (3 * model.intermediate_size + 4 * h)
    if moe_moment > dense_moment:  # the down output is what makes the MoE moment the largest
        assert moe_moment - down_bytes < 0.85 * measured


# Phi-3.5-mini's widths at 8 layers (llama.cpp's phi3 graph: q, k and v are views of one attn_qkv
# projection), one fact changed at a time, at contexts whose F16 mask is smaller than one hidden row per token
# (2K, 4K cells at hidden 3,072: k = 0) or not (8K; with the FFN narrowed or the vocabulary widened, so that
# the head is the largest moment there too)
FUSED_QKV_CASES = [
    (dict(), 2048),
    (dict(), 4096),
    (dict(n_kv_heads=8), 4096),
    (dict(intermediate_size=4096), 4096),
    (dict(intermediate_size=4096), 8192),
    (dict(vocab_size=100352), 2048),
    (dict(vocab_size=100352), 8192),
]
FUSED_QKV_IDS = [f"{_change_id(c)}-{n}" for c, n in FUSED_QKV_CASES]


@pytest.mark.parametrize("change,n_ctx", FUSED_QKV_CASES, ids=FUSED_QKV_IDS)
def test_fused_qkv_head_moment_follows_llama_cpp(change, n_ctx, tmp_path):
    """llama.cpp's memory-fit pass on a fused-attn_qkv graph: 2 x hidden floats per token plus the mask under
    the logits while the freed mask is smaller than one hidden row, nothing once it holds one
    (runtime._fused_qkv_head_floats, within 0.5 %)."""
    from dataclasses import replace

    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.runtime import default_coefficients
    from estimator.specs import Workload

    full = get_model("phi-3.5-mini-3.8b")
    model = replace(full, n_layers=8, layer_types=full.layer_types[:8], **change)
    measured = _fit_pass_compute_bytes(model, n_ctx, tmp_path)
    wl, cpu, prior = Workload(n_ctx=n_ctx, flash_attn=True), get_hardware("epyc-9654"), default_coefficients()
    assert _formula(model, cpu, wl, prior).compute_bytes == pytest.approx(measured, rel=0.005)
    u, h = 512, model.hidden_size
    head = 4 * u * (model.vocab_size + 2 * h)
    mask = 2 * u * n_ctx
    rows = 4 * u * 2 * h + mask if mask < 4 * u * h else 0
    assert measured == pytest.approx(head + rows, abs=64 * 1024)  # a few KiB of positions and output ids
