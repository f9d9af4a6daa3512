"""Known-physics tests of estimator.physics.speed: scaling laws, MoE active bytes, expert union, roofs,
intervals."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from estimator.physics import speed
from estimator.physics.coefficients import prior_table
from estimator.specs import FULL, GIB, SLIDING, HardwareSpec, MLASpec, ModelSpec, MoESpec, Workload

P = {"bw_eff": 0.8, "t_layer_s": 1e-5, "t_fixed_s": 2e-4, "flops_eff": 0.5, "attn_eff": 0.3}
ZERO = {
    "bw_eff": 1.0,
    "t_layer_s": 0.0,
    "t_fixed_s": 0.0,
    "flops_eff": 1.0,
    "attn_eff": 1.0,
    "host_bw_eff": 1.0,
    "t_allreduce_s": 0.0,
}


def hw(bw=1000.0, tflops=100.0, kind="gpu", **kw) -> HardwareSpec:
    return HardwareSpec(
        id=kw.pop("id", "dev"),
        name="dev",
        vendor="NVIDIA",
        family=kw.pop("family", "nvidia-ada"),
        kind=kind,
        memory_bytes=80 * GIB,
        bandwidth_gbs=bw,
        bf16_tflops=tflops,
        **kw,
    )


def dfeat(bytes_per_token=None, flops=None, **kw) -> speed.DecodeFeatures:
    """Decode features with round defaults; ``bytes_per_token`` sets the weight bytes (no KV), ``flops`` the
    FLOPs of the whole batch."""
    f = dict(
        weight_bytes=4e9,
        kv_bytes=0.0,
        host_bytes=0.0,
        expert_union_bytes=0.0,
        flops_per_token=1.6e10,
        batch=1,
        n_layers=32,
        n_moe_layers=0,
        hidden_size=4096,
        n_devices=1,
        split="tp",
        fp8=False,
        engine="llama.cpp",
    )
    f.update(kw)
    if bytes_per_token is not None:
        f["weight_bytes"] = bytes_per_token - f["kv_bytes"]
    if flops is not None:
        f["flops_per_token"] = flops / f["batch"]
    return speed.DecodeFeatures(**f)


def pfeat(**kw) -> speed.PrefillFeatures:
    f = dict(
        tokens=512,
        flops=512 * 1.6e10,
        expert_flops=0.0,
        gemm_outputs=0.0,
        expert_gemm_outputs=0.0,
        attn_flops=1e11,
        kq_bytes=0.0,
        weight_bytes=4e9,
        host_bytes=0.0,
        n_passes=1,
        ubatch_tokens=512,
        kernel_class="kquant",
        pipeline_factor=1.0,
        n_layers=32,
        n_moe_layers=0,
        hidden_size=4096,
        n_devices=1,
        split="tp",
        fp8=False,
        engine="llama.cpp",
    )
    f.update(kw)
    return speed.PrefillFeatures(**f)


# ----------------------------------------------------------------------------------- pure time functions
def test_decode_time_formula():
    t = speed.decode_step_s(dfeat(), hw(), P)
    assert t == pytest.approx(2e-4 + 32 * 1e-5 + 4e9 / (1000e9 * 0.8))


def test_decode_memory_term_scales_with_bandwidth_and_bytes():
    t1 = speed.decode_step_s(dfeat(), hw(bw=500), ZERO)
    t2 = speed.decode_step_s(dfeat(), hw(bw=1000), ZERO)
    assert t1 / t2 == pytest.approx(2.0)
    t3 = speed.decode_step_s(dfeat(bytes_per_token=8e9), hw(bw=1000), ZERO)
    assert t3 / t2 == pytest.approx(2.0)


def test_batched_decode_takes_max_of_roofs():
    # memory roof: 4e9 / 1e12 = 4 ms; compute roof at B=64: 64 * 1.6e10 / 1e14 = 10.24 ms -> compute bound
    f = dfeat(batch=64, flops=64 * 1.6e10)
    t = speed.decode_step_s(f, hw(bw=1000, tflops=100), ZERO)
    assert t == pytest.approx(64 * 1.6e10 / 100e12)
    # batch 1 never uses the compute roof
    f1 = dfeat(flops=1e15)
    assert speed.decode_step_s(f1, hw(), ZERO) == pytest.approx(4e9 / 1e12)


def test_host_offload_is_read_at_host_bandwidth():
    dev = hw(host_bandwidth_gbs=50.0)
    t = speed.decode_step_s(dfeat(bytes_per_token=3e9, host_bytes=1e9), dev, ZERO)
    assert t == pytest.approx(3e9 / 1e12 + 1e9 / 50e9)


def test_tensor_parallel_splits_bytes_and_adds_allreduce():
    dev = hw(interconnect_gbs=900.0)
    p = dict(ZERO, t_allreduce_s=1e-5)
    t1 = speed.decode_step_s(dfeat(), dev, p)
    t2 = speed.decode_step_s(dfeat(n_devices=2), dev, p)
    comm = 32 * 2 * (1e-5 + 2 * 1 / 2 * 4096 * 2 / 450e9)
    assert t2 == pytest.approx(t1 / 2 + comm)


def test_pipeline_split_serialises():
    dev = hw(interconnect_gbs=64.0)
    t1 = speed.decode_step_s(dfeat(), dev, ZERO)
    t4 = speed.decode_step_s(dfeat(n_devices=4, split="pp"), dev, ZERO)
    assert t4 == pytest.approx(t1 + 3 * 4096 * 2 / 32e9)
    assert t4 > t1


def test_prefill_time_formula():
    t = speed.prefill_s(pfeat(), hw(bw=1000, tflops=100), P)
    # one pass: the weight matmuls sit on the larger of their compute (164 ms) and memory (5 ms) roofs
    compute, memory = 512 * 1.6e10 / (100e12 * 0.5), 4e9 / (1000e9 * 0.8)
    assert t == pytest.approx(max(compute, memory) + 1e11 / (100e12 * 0.3) + 32 * 1e-5)
    assert speed.prefill_s(pfeat(tokens=0), hw(), P) == 0.0


def test_prefill_small_ubatch_is_memory_bound_per_pass():
    # ubatch 1: 512 passes, each streams the weights once (5 ms) while computing only 0.32 ms
    f = pfeat(n_passes=512, ubatch_tokens=1, attn_flops=0.0)
    t = speed.prefill_s(f, hw(bw=1000, tflops=100), P)
    assert t == pytest.approx(512 * (4e9 / (1000e9 * 0.8) + 32 * 1e-5))


def test_kernel_class_and_relative_efficiency():
    from estimator.physics.quant import get_quant

    m = _tiny()
    classes = {q: speed.kernel_class(m, get_quant(q)) for q in ("F16", "BF16", "Q4_0", "Q8_0", "MXFP4")}
    assert set(classes.values()) <= {"f16", "legacy"} and classes["F16"] == classes["BF16"] == "f16"
    assert speed.kernel_class(m, get_quant("Q4_K_M")) == "kquant"
    # the table-lookup i-quants are a class of their own; the codebook-grid ones share another
    assert speed.kernel_class(m, get_quant("IQ4_XS")) == speed.kernel_class(m, get_quant("IQ4_NL")) == "iq4"
    assert {speed.kernel_class(m, get_quant(q)) for q in ("IQ3_M", "IQ2_XS", "IQ1_S")} == {"iquant"}
    assert speed.decode_kernel_class(m, get_quant("IQ4_XS")) == "iq4"
    assert speed.decode_kernel_class(m, get_quant("IQ2_XXS")) == "iquant"
    assert speed.kernel_class(m, get_quant("FP8")) == "other"
    f = pfeat(weight_bytes=0.0, attn_flops=0.0, kernel_class="f16")
    base = speed.prefill_s(f, hw(), ZERO)
    assert speed.prefill_s(f, hw(), dict(ZERO, flops_rel_f16=2.0)) == pytest.approx(base / 2)
    # a coefficient of another class does not touch it
    assert speed.prefill_s(f, hw(), dict(ZERO, flops_rel_legacy=2.0)) == pytest.approx(base)
    # iq4: its own ratio, else (a set written before the split) the single i-quant ratio
    f4 = replace(f, kernel_class="iq4")
    assert speed.prefill_s(f4, hw(), dict(ZERO, flops_rel_iquant=2.0)) == pytest.approx(base / 2)
    assert speed.prefill_s(f4, hw(), dict(ZERO, flops_rel_iquant=2.0, flops_rel_iq4=4.0)) == pytest.approx(
        base / 4
    )
    fg = replace(f, kernel_class="iquant")
    assert speed.prefill_s(fg, hw(), dict(ZERO, flops_rel_iq4=4.0)) == pytest.approx(base)


def test_kernel_class_ratios_are_llama_cpp_s_kernels_only():
    """ggml runs one kernel per weight type, whose efficiencies the class ratios carry; vLLM's / SGLang's
    linear layers are torch / cuBLAS / oneDNN: their BF16 runs take no f16 ratio (class ``engine``), so a
    set's bw_rel_f16 / flops_rel_f16 scale llama.cpp's F16 steps and leave vLLM's alone (and vLLM's runs
    cannot move them in a fit)."""
    from estimator.physics.quant import get_quant

    m, bf16 = _tiny(), get_quant("BF16")
    steps = {}
    for engine in ("llama.cpp", "vllm", "sglang"):
        wl = Workload(engine=engine)
        d, p = speed.decode_features(m, bf16, wl, 64), speed.prefill_features(m, bf16, wl)
        want = "f16" if engine == "llama.cpp" else "engine"
        assert (d.kernel_class, p.kernel_class) == (want, want)
        plain = speed.decode_step_s(d, hw(), P)
        half = speed.decode_step_s(d, hw(), dict(P, bw_rel_f16=0.5))
        steps[engine] = (plain, half)
        gemm = replace(p, weight_bytes=0.0, attn_flops=0.0)
        pre = speed.prefill_s(gemm, hw(), ZERO)
        pre2 = speed.prefill_s(gemm, hw(), dict(ZERO, flops_rel_f16=2.0))
        assert (pre2 < pre) == (engine == "llama.cpp")
    assert steps["llama.cpp"][1] > steps["llama.cpp"][0]
    assert steps["vllm"][1] == steps["vllm"][0] and steps["sglang"][1] == steps["sglang"][0]


def test_moe_expert_flops_use_their_own_efficiency():
    from estimator.catalog.data import get_model
    from estimator.physics.quant import get_quant

    m = get_model("qwen3-30b-a3b")
    e = m.moe
    assert speed.routed_active_params(m) == speed.n_moe_layers(m) * e.n_experts_used * 3 * m.hidden_size * (
        e.expert_ff
    )
    f = speed.prefill_features(m, get_quant("Q8_0"), Workload(n_prompt=2048, n_ubatch=2048))
    assert 0 < f.expert_flops < f.flops
    ff = replace(f, attn_flops=0.0, weight_bytes=0.0, kq_bytes=0.0)
    h = hw()
    t1 = speed.prefill_s(ff, h, ZERO)
    t_half = speed.prefill_s(ff, h, dict(ZERO, flops_rel_moe=0.5))
    assert t_half - t1 == pytest.approx(f.expert_flops / 100e12)


def test_output_head_runs_only_for_logit_rows():
    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    m, q = _tiny(), get_quant("F16")
    mm = speed.matmul_params(m, weight_breakdown(m, q).n_params_active)
    head = m.vocab_size * m.hidden_size
    # 4096 tokens in n_batch 2048 calls: two rows with logits; llama.cpp also runs the last layer's FFN for
    # those two rows only, vLLM for every token
    wl = Workload(n_prompt=4096, n_ubatch=512, n_batch=2048)
    ffn = speed.last_layer_ffn(m)[0]
    assert ffn > 0
    f = speed.prefill_features(m, q, wl)
    assert f.flops == 2 * ((mm - head) * 4096 + head * 2 - ffn * (4096 - 2))
    f = speed.prefill_features(m, q, replace(wl, engine="vllm"))
    assert f.flops == 2 * ((mm - head) * 4096 + head * 2)


def test_last_layer_ffn_known_answers():
    """The last layer's FFN of llama.cpp's skipped rows, from the architectures: Mistral-7B's gated FFN
    (3 x 4096 x 14336 weights; outputs 2 x 14336 + 4096 per token), Qwen3-30B-A3B's router (128 outputs of
    2048) and 8 of 128 experts of width 768."""
    from estimator.catalog.data import get_model

    assert speed.last_layer_ffn(get_model("mistral-7b-v0.3")) == (3 * 4096 * 14336, 0, 2 * 14336 + 4096, 0)
    routed = 8 * 3 * 2048 * 768
    routed_outs = 8 * (768 + 768 + 2048)
    assert speed.last_layer_ffn(get_model("qwen3-30b-a3b")) == (
        routed + 2048 * 128, routed, routed_outs + 128, routed_outs
    )


def test_one_layer_proxy_prefill_skips_most_of_its_ffn():
    """A one-layer Mistral proxy under llama.cpp multiplies its FFN for the logit row only: its prefill
    FLOPs per token are the attention projections' (4096 x 6144 + 4096 x 4096 weights), a fifth of vLLM's.
    Measured on this project's CPU VM (results/runs/cpu-full--*.jsonl, pp512): 1 layer 2,203 tok/s against
    171 tok/s for 4 layers, 12.9x, where the old count (every row through every FFN) said 4x."""
    from estimator.catalog.data import get_model
    from estimator.physics.quant import get_quant

    m, q = get_model("mistral-7b-v0.3"), get_quant("Q4_K_M")
    one, four = m.depth_proxy(1), m.depth_proxy(4)
    wl = Workload(n_ctx=1024, n_prompt=512)
    f1, f4 = speed.prefill_features(one, q, wl), speed.prefill_features(four, q, wl)
    v1 = speed.prefill_features(one, q, replace(wl, engine="vllm"))
    attn_proj = 4096 * (4096 + 1024 + 1024) + 4096 * 4096
    ffn = 3 * 4096 * 14336
    # (+ the norm weights the body counts: 3 x 4096 per token, 0.03 %)
    assert f1.flops == pytest.approx(2 * (attn_proj * 512 + ffn * 1 + m.vocab_size * m.hidden_size), rel=1e-3)
    assert v1.flops / f1.flops > 4
    assert 10 < f4.flops / f1.flops < 20


def test_one_layer_proxy_ratio_is_the_measured_one():
    """The measured side of the test above, from the committed records: the VM's pp512 of the 1- and 4-layer
    Mistral-7B Q4_K_M proxies (llama.cpp, flash attention off, no depth).  Their speed ratio is far from the
    4x of every row through every FFN and within a third of the FLOP ratio the last-layer rule gives (16.4x;
    the rest is the larger GEMMs running faster per FLOP)."""
    import json

    from estimator.catalog.data import get_model
    from estimator.physics.quant import get_quant

    runs = Path(__file__).resolve().parents[1] / "results" / "runs" / "cpu-full--cpu-x86-avx512--vm.jsonl"
    tok_s = {}
    for line in runs.read_text().splitlines():
        r = json.loads(line)
        if (r["model_id"], r["quant"], r["n_prompt"], r["n_depth"], r["flash_attn"]) == (
            "mistral-7b-v0.3", "Q4_K_M", 512, 0, False
        ) and r.get("prefill_tok_s"):
            tok_s.setdefault(r["n_layers_measured"], r["prefill_tok_s"])
    measured = tok_s[1] / tok_s[4]
    assert 10 < measured < 16  # 2,203 / 171 = 12.9
    m, q = get_model("mistral-7b-v0.3"), get_quant("Q4_K_M")
    wl = Workload(n_ctx=1024, n_prompt=512)
    flop_ratio = speed.prefill_features(m.depth_proxy(4), q, wl).flops / speed.prefill_features(
        m.depth_proxy(1), q, wl
    ).flops
    assert abs(math.log(measured / flop_ratio)) < math.log(1.35)
    assert abs(math.log(measured / 4)) > math.log(3)  # the old count: one FFN per layer and token


def test_peak_tflops_llama_cpp_uses_fp16_accumulate_rate_on_nvidia():
    geforce = hw(tflops=165.2, int8_tops=660.6)  # bf16 column = FP32-accumulate (half rate on GeForce)
    pro = hw(tflops=364.2, int8_tops=728.5)
    assert speed.peak_tflops(geforce, {}, engine="llama.cpp") == pytest.approx(330.3)
    assert speed.peak_tflops(geforce, {}, engine="vllm") == pytest.approx(165.2)
    assert speed.peak_tflops(pro, {}, engine="llama.cpp") == pytest.approx(364.25)
    amd = replace(hw(tflops=26.8, int8_tops=53.6), vendor="AMD")
    assert speed.peak_tflops(amd, {}, engine="llama.cpp") == pytest.approx(26.8)
    assert speed.peak_tflops(hw(tflops=None, int8_tops=47.0), {}, engine="llama.cpp") == pytest.approx(23.5)


def test_vulkan_on_intel_alchemist_runs_gemms_at_the_shader_rate():
    """llama.cpp's Vulkan backend uses no XMX on Arc A-series (EngineProfile.vector_gemm): its GEMMs run at
    the catalog's vector FP16 rate; SYCL, an Xe2 card and a device without that figure keep the matrix
    rate."""
    a770 = replace(hw(tflops=137.6, int8_tops=275.2), vendor="Intel", family="intel-xe-hpg",
                   vector_fp16_tflops=39.32)  # fmt: skip
    assert speed.peak_tflops(a770, {}, engine="llama.cpp") == pytest.approx(39.32)  # Vulkan: the default
    assert speed.peak_tflops(a770, {}, engine="llama.cpp", backend="vulkan") == pytest.approx(39.32)
    assert speed.peak_tflops(a770, {}, engine="llama.cpp", backend="SYCL") == pytest.approx(137.6)
    xe2 = replace(a770, family="intel-xe2")
    assert speed.peak_tflops(xe2, {}, engine="llama.cpp") == pytest.approx(137.6)
    assert speed.peak_tflops(replace(a770, vector_fp16_tflops=None), {}, engine="llama.cpp") == 137.6
    assert "39.32 TFLOPS, not the matrix engines' 137.6" in speed.vector_gemm_note(a770, "llama.cpp")
    assert speed.vector_gemm_note(a770, "llama.cpp", "vulkan")  # a record's spelling
    assert speed.vector_gemm_note(a770, "llama.cpp", "SYCL") == speed.vector_gemm_note(xe2, "llama.cpp") == ""
    # the prefill formula takes the rate of the features' backend
    sycl = speed.prefill_s(pfeat(backend="SYCL"), a770, P)
    vulkan = speed.prefill_s(pfeat(backend="Vulkan"), a770, P)
    compute = 512 * 1.6e10 / 0.5  # FLOP / flops_eff: the matmuls' compute roof dominates at these rates
    per_flops_s = compute + 1e11 / 0.3  # GEMMs and attention, FLOP / efficiency
    assert vulkan - sycl == pytest.approx(per_flops_s / 39.32e12 - per_flops_s / 137.6e12)




def test_power_covariate_is_board_watts_per_tflops_of_the_rate_the_engine_runs_at():
    """``ln_w_per_tflops`` = ln(tdp_w / peak / 1.75) of a discrete GPU, peak the engine's GEMM rate: a
    GeForce card at its FP16-accumulate rate (int8 / 2), a workstation card at its datasheet rate, an Arc
    A-series under Vulkan at its shader rate; nothing for unified memory or an unknown board power."""
    from estimator.physics.covariates import POWER_SCALE_W_PER_TFLOPS, covariates

    def x(h, engine="llama.cpp", backend=""):
        return covariates(h, engine, backend, ("power",)).get("ln_w_per_tflops")

    geforce = hw(tflops=165.2, int8_tops=660.6, tdp_w=450.0)
    assert x(geforce) == pytest.approx(math.log(450.0 / 330.3 / POWER_SCALE_W_PER_TFLOPS))
    assert x(geforce, "vllm") == pytest.approx(math.log(450.0 / 165.2 / POWER_SCALE_W_PER_TFLOPS))
    a770 = replace(hw(tflops=137.6, tdp_w=225.0), vendor="Intel", family="intel-xe-hpg")
    a770 = replace(a770, vector_fp16_tflops=39.32)
    assert x(a770, backend="Vulkan") - x(a770, backend="SYCL") == pytest.approx(math.log(137.6 / 39.32))
    assert x(replace(geforce, kind="unified")) is None
    assert x(replace(geforce, tdp_w=None)) is None

def test_catalogued_shader_rates_are_sourced_and_below_the_matrix_rate():
    """Every device with a vector FP16 rate (tools/catalog/hardware_covariates.csv) is a GPU whose bf16
    column, a matrix-engine rate, is higher, and names its source; each vector_gemm family of a profile has
    such a device."""
    from estimator.catalog.data import get_hardware, hardware_entry, hardware_ids
    from estimator.engines import ENGINES, get_engine

    rated = [get_hardware(i) for i in hardware_ids() if get_hardware(i).vector_fp16_tflops]
    for h in rated:
        assert h.kind != "cpu" and h.bf16_tflops and h.vector_fp16_tflops < h.bf16_tflops, h.id
        assert (hardware_entry(h.id)["covariate_source"] or "").startswith("https://"), h.id
    for engine in ENGINES:
        for _, family, why in get_engine(engine).vector_gemm:
            assert why and any(h.family == family for h in rated), family

# -------------------------------------------------------------- llama.cpp pipeline parallelism (layer split)
def _simulated_makespan(m: int, p: int, copies: int) -> int:
    """Event simulation: stage s of micro-batch j starts when stage s is free, stage s-1 of j is done and
    (for s = 0) the input copy of micro-batch j - copies has left the last stage; unit stage times."""
    free = [0] * p
    done: dict[tuple[int, int], int] = {}
    for j in range(m):
        for s in range(p):
            ready = done[(j, s - 1)] if s else (done[(j - copies, p - 1)] if j >= copies else 0)
            start = max(free[s], ready)
            done[(j, s)] = free[s] = start + 1
    return done[(m - 1, p - 1)]


def test_pipeline_makespan_matches_simulation():
    for m in range(1, 12):
        for p in range(1, 10):
            for c in (1, 2, 4):
                assert speed.pipeline_makespan(m, p, c) == _simulated_makespan(m, p, c), (m, p, c)
    assert speed.pipeline_makespan(4, 4) == 7  # textbook m + p - 1 while m <= copies


def test_pipeline_factor_conditions():
    wl = Workload(engine="llama.cpp", split="pp", n_devices=4, n_batch=2048, n_ubatch=512)
    assert speed.pipeline_factor(wl, 512, 512) == 1.0  # one micro-batch: nothing overlaps
    assert speed.pipeline_factor(wl, 2048, 512) == pytest.approx(7 / 16)
    assert speed.pipeline_factor(wl, 4096, 512) == pytest.approx(14 / 32)  # two calls do not overlap
    for off in (
        replace(wl, n_devices=1),
        replace(wl, engine="vllm"),
        replace(wl, split="tp"),
        replace(wl, offload_bytes=1),
        replace(wl, moe_offload_layers=1),
    ):
        assert speed.pipeline_factor(off, 4096, 512) == 1.0


def test_pipeline_speedup_known_answer_from_published_layer_split():
    """XiongjieDai llama-bench (May 2024, n_batch 2048 / n_ubatch 512), Llama-3-8B Q4_K_M on RTX 4090:
    pp4096 = 5265.68 t/s on 1 GPU, 8422.04 / 12491.1 / 15089.1 t/s on 2 / 4 / 8 GPUs.  The parameter-free
    schedule predicts the speed-up within 10 %."""
    measured = {2: 8422.04 / 5265.68, 4: 12491.1 / 5265.68, 8: 15089.1 / 5265.68}
    for n, ratio in measured.items():
        wl = Workload(engine="llama.cpp", split="pp", n_devices=n, n_batch=2048, n_ubatch=512)
        assert 1 / speed.pipeline_factor(wl, 4096, 512) == pytest.approx(ratio, rel=0.10)


# --------------------------------------------------------------------- flash attention off: KQ traffic
def test_kq_score_elems_brute_force_and_window():
    m = _tiny(layer_types=(FULL, SLIDING, FULL, SLIDING), window=100)
    for depth, n, u in ((0, 300, 128), (50, 77, 32), (1000, 10, 512)):
        brute = 0
        for s0 in range(0, n, u):
            uu = min(u, n - s0)
            n_kv = depth + s0 + uu
            brute += 2 * uu * n_kv + 2 * uu * min(n_kv, 100 + uu)
        assert speed.kq_score_elems(m, depth, n, u) == brute


def test_kq_bytes_only_without_flash_attention_on_llama_cpp():
    from estimator.physics.quant import get_quant

    m, q = _tiny(), get_quant("F16")
    off = Workload(n_prompt=1024, n_ubatch=512, flash_attn=False, engine="llama.cpp")
    f = speed.prefill_features(m, q, off)
    assert f.kq_bytes == speed.KQ_SCORE_BYTES * m.n_heads * speed.kq_score_elems(m, 0, 1024, 512)
    assert speed.prefill_features(m, q, replace(off, flash_attn=True)).kq_bytes == 0.0
    assert speed.prefill_features(m, q, replace(off, engine="vllm")).kq_bytes == 0.0
    t_on = speed.prefill_s(replace(f, kq_bytes=0.0), hw(), ZERO)
    assert speed.prefill_s(f, hw(), ZERO) == pytest.approx(t_on + f.kq_bytes / 1000e9)


def test_prefill_unknown_tflops_uses_absolute_rate():
    cpu = hw(tflops=None, kind="cpu", family="cpu-x86-avx2")
    with pytest.raises(ValueError, match="TFLOPS unknown"):
        speed.prefill_s(pfeat(), cpu, P)
    t = speed.prefill_s(pfeat(weight_bytes=0.0, attn_flops=0.0), cpu, dict(ZERO, flops_abs_tflops=0.5))
    assert t == pytest.approx(512 * 1.6e10 / 0.5e12)


def test_fp8_uses_fp8_rate_when_available():
    dev = hw(tflops=100.0, fp8_tflops=200.0)
    f = pfeat(weight_bytes=0.0, attn_flops=0.0)
    assert speed.prefill_s(f, dev, ZERO) == pytest.approx(
        2 * speed.prefill_s(replace(f, fp8=True), dev, ZERO)
    )


def test_prefill_offload_capped_by_link_on_discrete_gpu():
    dev = hw(host_bandwidth_gbs=100.0, interconnect_gbs=64.0)
    f = pfeat(flops=0.0, attn_flops=0.0, weight_bytes=0.0, host_bytes=32e9)
    assert speed.prefill_s(f, dev, ZERO) == pytest.approx(1.0)  # 32 GB at 32 GB/s one way
    uni = hw(kind="unified", host_bandwidth_gbs=100.0, interconnect_gbs=64.0)
    assert speed.prefill_s(f, uni, ZERO) == pytest.approx(0.32)


# --------------------------------------------------------------------------------------- pure helpers
def test_sum_keys_matches_brute_force():
    for depth in (0, 3, 10, 50):
        for n in (0, 1, 7, 40):
            for window in (None, 5, 16, 60):
                brute = sum(min(depth + i + 1, window) if window else depth + i + 1 for i in range(n))
                assert speed.sum_keys(depth, n, window) == brute


def test_expert_union():
    assert speed.expert_union(128, 8, 1) == pytest.approx(8)
    assert speed.expert_union(128, 8, 0) == 0
    u16 = speed.expert_union(128, 8, 16)
    assert 8 < u16 < 128 and u16 == pytest.approx(128 * (1 - (1 - 8 / 128) ** 16))
    assert speed.expert_union(128, 8, 4096) == pytest.approx(128)


def _tiny(**kw) -> ModelSpec:
    base = {
        "id": "tiny",
        "name": "tiny",
        "architecture": "llama",
        "hidden_size": 512,
        "n_layers": 4,
        "n_heads": 8,
        "n_kv_heads": 2,
        "head_dim": 64,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "max_context": 8192,
        "layer_types": (FULL,) * 4,
    }
    base.update(kw)
    return ModelSpec(**base)


def test_attention_flops_quadratic_and_windowed():
    m = _tiny()
    per_key = 4 * 8 * 64
    assert speed.attention_flops(m, 0, 100) == 4 * per_key * (100 * 101 // 2)
    # doubling the prompt ~quadruples attention
    assert speed.attention_flops(m, 0, 2000) / speed.attention_flops(m, 0, 1000) == pytest.approx(4, rel=1e-3)
    w = _tiny(layer_types=(SLIDING,) * 4, window=128)
    assert speed.attention_flops(w, 10_000, 10) == 4 * per_key * 10 * 128


def test_mla_attention_uses_real_dims():
    mla = MLASpec(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
    m = _tiny(mla=mla, n_heads=16)
    assert speed.attn_flops_per_key(m) == 2 * 16 * (128 + 64 + 128)
    assert speed.attn_flops_per_key(m, absorbed=True) == 2 * 16 * (512 + 64 + 512)


def test_dsa_attention_is_the_indexer_over_every_key_plus_the_selected_keys():
    """DeepSeek Sparse Attention: the indexer scores every cached key (2 x index heads x index dim each);
    an engine with sparse MLA kernels (vLLM, SGLang, TensorRT-LLM) attends at most index_topk keys per query,
    llama.cpp masks the dense attention and multiplies every key."""
    mla = MLASpec(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                  index_n_heads=64, index_head_dim=128, index_topk=2048)  # fmt: skip
    m = _tiny(mla=mla, n_heads=16)
    per_key, idx = 2 * 16 * (512 + 64 + 512), 2 * 64 * 128
    assert speed.indexer_flops_per_key(m) == idx
    # one token at depth 100,000: 100,001 keys scored, 2,048 attended by the sparse kernels
    sparse = speed.attention_flops(m, 100_000, 1, absorbed=True, sparse=True)
    assert sparse == 4 * (per_key * 2048 + idx * 100_001)
    assert speed.attention_flops(m, 100_000, 1, absorbed=True) == 4 * (per_key + idx) * 100_001
    # within the top-k nothing is skipped; a prompt's queries each attend min(position, top-k) keys, in the
    # latent form of the sparse kernels (llama.cpp's dense prompt attention keeps the naive form)
    assert speed.attention_flops(m, 0, 2048, sparse=True) == speed.attention_flops(m, 0, 2048, absorbed=True)
    keys = 2048 * 2049 // 2 + 2048 * 2048
    assert speed.attention_flops(m, 0, 4096, sparse=True) == 4 * (per_key * keys + idx * (4096 * 4097 // 2))
    naive = 2 * 16 * (128 + 64 + 128)
    assert speed.attention_flops(m, 0, 4096) == 4 * (naive + idx) * (4096 * 4097 // 2)
    assert speed.indexer_flops_per_key(_tiny()) == 0
    assert speed.attention_flops(_tiny(), 5000, 1, sparse=True) == speed.attention_flops(_tiny(), 5000, 1)


def test_dsa_short_prompts_run_dense_on_sglang_hopper_and_data_centre_blackwell():
    """SGLang's NSA backend prefills a batch whose longest sequence has at most index_topk keys as dense MHA
    (the naive form, every key: MHA_ONE_SHOT) on SM90 / SM100, except GLM-5 on Blackwell (forced to the
    sparse kernels); vLLM always runs the sparse latent form.  Decode steps never switch."""
    from estimator.catalog.resolve import resolve_hardware, resolve_model
    from estimator.engines import get_engine
    from estimator.physics import serving as sv
    from estimator.physics.quant import get_quant

    mla = MLASpec(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                  index_n_heads=64, index_head_dim=128, index_topk=2048)  # fmt: skip
    m = _tiny(mla=mla, n_heads=16)
    keys, idx = 2048 * 2049 // 2, 2 * 64 * 128
    naive, latent = 2 * 16 * (128 + 64 + 128), 2 * 16 * (512 + 64 + 512)
    assert speed.attention_flops(m, 0, 2048, sparse=True) == 4 * (latent + idx) * keys
    assert speed.attention_flops(m, 0, 2048, sparse=True, dense_upto=2048) == 4 * (naive + idx) * keys
    assert speed.attention_flops(m, 0, 2049, sparse=True, dense_upto=2048) == speed.attention_flops(
        m, 0, 2049, sparse=True
    )
    one = speed.attention_flops(m, 1000, 1, absorbed=True, sparse=True)
    assert speed.attention_flops(m, 1000, 1, absorbed=True, sparse=True, dense_upto=2048) == one
    v32, glm5 = resolve_model("deepseek-v3.2"), resolve_model("glm-5")
    sgl, vllm = get_engine("sglang"), get_engine("vllm")
    devices = ("h200-141gb-sxm", "b200", "b300", "rtx-5090", "mi300x")
    got = {hw: tuple(sgl.dense_prompt_keys(x, resolve_hardware(hw)) for x in (v32, glm5)) for hw in devices}
    assert got == {"h200-141gb-sxm": (2048, 2048), "b200": (2048, 0), "b300": (2048, 0), "rtx-5090": (0, 0),
                    "mi300x": (0, 0)}  # fmt: skip
    assert vllm.dense_prompt_keys(v32, resolve_hardware("h200-141gb-sxm")) == 0
    assert sgl.dense_prompt_keys(resolve_model("deepseek-v3"), resolve_hardware("h200-141gb-sxm")) == 0
    h200, q = resolve_hardware("h200-141gb-sxm"), get_quant("FP8")
    for engine, isl, form in (("sglang", 1024, False), ("vllm", 1024, True), ("sglang", 4096, True)):
        wl = Workload(n_ctx=isl + 256, kv_dtype="fp8", engine=engine, n_devices=8, split="tp")
        f = sv.serving_features(v32, q, h200, wl, sv.ServingLoad(16, isl, 256))
        want = speed.attention_flops(v32, 0, isl, sparse=form) / isl
        assert f.attn_prompt == pytest.approx(want, rel=1e-12), (engine, isl)
        g = sv._reload(f, v32, wl, sv.ServingLoad(16, 2048, 256))  # another load keeps the device's rule
        assert g.attn_prompt == pytest.approx(
            speed.attention_flops(v32, 0, 2048, sparse=engine == "vllm") / 2048, rel=1e-12
        )


def test_dsa_decode_step_follows_the_engines_kernels():
    """At 128K cells a DeepSeek-V3.2 step on vLLM reads the indexer keys of every token and 2,048 latent rows
    (its kernels attend the selected rows), llama.cpp every latent row: its KV term is ~10x larger."""
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.quant import get_quant

    m, q = resolve_model("deepseek-v3.2"), get_quant("FP8")
    wl = Workload(n_ctx=131072, n_prompt=0, n_gen=1, kv_dtype="fp8", engine="vllm")
    sparse = speed.decode_features(m, q, wl, 131071)
    dense = speed.decode_features(m, q, replace(wl, engine="llama.cpp", kv_dtype="f16"), 131071)
    assert sparse.kv_bytes < dense.kv_bytes / 8
    assert sparse.flops_per_token < dense.flops_per_token / 5


def test_matmul_params_excludes_embedding_lookup():
    assert speed.matmul_params(_tiny(), 10_000_000) == 10_000_000 - 1000 * 512
    assert speed.matmul_params(_tiny(tie_embeddings=True), 10_000_000) == 10_000_000


def test_estimate_interval_contains_point():
    s = prior_table().lookup(hw(), "llama.cpp", "decode")
    e = speed.estimate("decode", 42.0, 1 / 42.0, s)
    assert e.lo_tok_s < e.tok_s < e.hi_tok_s
    assert e.coefficients == "pooled prior (uncalibrated)" and not e.calibrated
    assert e.hi_tok_s / e.tok_s == pytest.approx(math.exp(s.log_hi))


def test_merged_params_borrow_across_phases():
    dec, pre, dp, pp = speed.merged_params(prior_table(), hw(), "llama.cpp")
    assert dp["flops_eff"] == pre.params["flops_eff"]
    assert pp["bw_eff"] == pre.params.get("bw_eff", dec.params["bw_eff"])
    assert dp["bw_eff"] == dec.params["bw_eff"]


def test_workload_default_is_single_device():
    assert Workload().n_devices == 1 and replace(Workload(), n_seq=4).n_seq == 4
    assert MoESpec(n_experts=8, n_experts_used=2, expert_ff=64).n_shared_experts == 0


# ------------------------------------------------------------------------ features from the real physics
def _catalog(model_id, hw_id):
    from estimator.catalog.data import get_hardware, get_model

    return get_model(model_id), get_hardware(hw_id)


def test_decode_features_use_active_bytes_and_kv():
    from estimator.physics.kv import kv_read_bytes
    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    m, _ = _catalog("llama-3.1-8b", "rtx-4090")
    q = get_quant("Q4_K_M")
    wb = weight_breakdown(m, q)
    f = speed.decode_features(m, q, Workload(), 4096)
    assert f.weight_bytes == pytest.approx(wb.active_bytes_per_token)
    assert f.kv_bytes == kv_read_bytes(m, 4096, "f16")
    assert f.bytes_per_token == pytest.approx(wb.active_bytes_per_token + kv_read_bytes(m, 4096, "f16"))
    # the token-embedding lookup is not read in full per token
    assert wb.active_bytes_per_token < wb.total_bytes


def test_moe_reads_active_not_total_bytes():
    from estimator.catalog.data import all_models
    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    moe = next(m for m in all_models() if m.moe is not None and m.moe.n_experts >= 64)
    q = get_quant("Q4_K_M")
    wb = weight_breakdown(moe, q)
    f = speed.decode_features(moe, q, Workload(), 0)
    routed_active = wb.routed_expert_bytes * moe.moe.n_experts_used / moe.moe.n_experts
    assert f.weight_bytes == pytest.approx(
        wb.dense_bytes - wb.token_embd_bytes * (not moe.tie_embeddings) + routed_active
    )
    assert f.weight_bytes < 0.5 * wb.total_bytes
    assert f.expert_union_bytes == pytest.approx(routed_active)


def test_batched_decode_reads_union_of_experts():
    from estimator.catalog.data import all_models
    from estimator.physics.quant import get_quant

    moe = next(m for m in all_models() if m.moe is not None and m.moe.n_experts >= 64)
    q = get_quant("Q4_K_M")
    f1 = speed.decode_features(moe, q, Workload(n_seq=1), 0)
    f8 = speed.decode_features(moe, q, Workload(n_seq=8), 0)
    e, k = moe.moe.n_experts, moe.moe.n_experts_used
    assert f8.expert_union_bytes / f1.expert_union_bytes == pytest.approx(
        speed.expert_union(e, k, 8) / k
    )
    # more bytes per step than one token, fewer than 8 independent tokens
    assert f1.weight_bytes < f8.weight_bytes < 8 * f1.weight_bytes
    assert f8.flops == pytest.approx(8 * f8.flops_per_token)


def test_estimate_speed_scales_with_bandwidth_and_labels_prior():
    from estimator.physics.quant import get_quant

    m, h = _catalog("llama-3.1-8b", "rtx-4090")
    q = get_quant("Q4_K_M")
    table = prior_table()
    # zero overheads isolate the bandwidth term: decode speed is then exactly proportional to bandwidth
    fast = speed.estimate_speed(m, q, replace(h, bandwidth_gbs=2000.0), Workload(), table)
    slow = speed.estimate_speed(m, q, replace(h, bandwidth_gbs=1000.0), Workload(), table)
    assert 1.5 < fast.decode.tok_s / slow.decode.tok_s < 2.0
    r = slow
    assert r.decode.lo_tok_s < r.decode.tok_s < r.decode.hi_tok_s
    assert r.prefill.lo_tok_s < r.prefill.tok_s < r.prefill.hi_tok_s
    assert r.ttft_lo_s < r.ttft_s < r.ttft_hi_s
    assert r.decode.coefficients == "pooled prior (uncalibrated)" and not r.decode.calibrated
    assert any("uncalibrated" in n for n in r.notes)
    # a bigger quant reads more bytes -> slower decode
    q8 = speed.estimate_speed(m, get_quant("Q8_0"), h, Workload(), table)
    assert q8.decode.tok_s < speed.estimate_speed(m, q, h, Workload(), table).decode.tok_s


def test_decode_slows_with_depth_and_aggregate_grows_with_concurrency():
    from estimator.physics.quant import get_quant

    m, h = _catalog("llama-3.1-8b", "rtx-4090")
    q = get_quant("Q4_K_M")
    _, _, dp, _ = speed.merged_params(prior_table(), h, "llama.cpp")
    t0 = speed.decode_step_s(speed.tg_features(m, q, Workload(), 0, 128), h, dp)
    t32k = speed.decode_step_s(speed.tg_features(m, q, Workload(), 32768, 128), h, dp)
    assert t32k > t0
    # tg mean equals the brute-force mean for a linear KV term
    w = Workload()
    brute = sum(speed.decode_step_s(speed.decode_features(m, q, w, d), h, dp) for d in range(100, 164)) / 64
    assert speed.decode_step_s(speed.tg_features(m, q, w, 100, 64), h, dp) == pytest.approx(brute, rel=1e-9)
    r1 = speed.estimate_speed(m, q, h, Workload(concurrency=1), prior_table())
    r16 = speed.estimate_speed(m, q, h, Workload(concurrency=16), prior_table())
    assert r16.aggregate.tok_s > 4 * r1.aggregate.tok_s
    assert r16.per_sequence_tok_s < r1.per_sequence_tok_s


def test_moe_expert_offload_is_slower_and_reads_host():
    from estimator.catalog.data import all_models
    from estimator.physics.quant import get_quant

    moe = next(m for m in all_models() if m.moe is not None and m.moe.n_experts >= 64)
    q = get_quant("Q4_K_M")
    f = speed.decode_features(moe, q, Workload(moe_offload_layers=moe.n_layers), 0)
    f0 = speed.decode_features(moe, q, Workload(), 0)
    assert f.host_bytes == pytest.approx(f0.expert_union_bytes)
    assert f.weight_bytes + f.host_bytes == pytest.approx(f0.weight_bytes)
    h = hw(bw=3000.0, host_bandwidth_gbs=80.0)
    assert speed.decode_step_s(f, h, P) > 5 * speed.decode_step_s(f0, h, P)


def test_gemm_width_term_slows_narrow_gemms_more():
    """gemm_k_half: each GEMM of inner dim K runs at eff x K / (K + k_half); absent = 0 = no effect."""
    from estimator.catalog.resolve import resolve_hardware, resolve_model
    from estimator.physics.counts import gemm_outputs_per_token
    from estimator.physics.quant import get_quant

    q = get_quant("Q4_K_M")
    hw = resolve_hardware("rtx-3090")
    base = {"flops_eff": 0.5, "attn_eff": 0.3, "t_layer_s": 0.0, "bw_eff": 0.8}
    wl = Workload(n_prompt=512, n_gen=0, n_ubatch=512, n_batch=512, engine="llama.cpp", flash_attn=True)
    ratios = {}
    for mid in ("qwen2.5-0.5b", "llama-3.1-8b"):
        m = resolve_model(mid)
        f = speed.prefill_features(m, q, wl)
        outs, routed = gemm_outputs_per_token(m)
        ffn_outs = speed.last_layer_ffn(m)[2]  # the last layer's FFN runs for the logit row only
        assert routed == 0 and f.gemm_outputs == outs * 512 + m.vocab_size - ffn_outs * 511  # one logit row
        t0 = speed.prefill_s(f, hw, base)
        assert speed.prefill_s(f, hw, {**base, "gemm_k_half": 0.0}) == t0
        ratios[mid] = speed.prefill_s(f, hw, {**base, "gemm_k_half": 1000.0}) / t0
    # the narrow model (hidden 896) loses more than the wide one (hidden 4096)
    assert ratios["qwen2.5-0.5b"] > ratios["llama-3.1-8b"] > 1.0


def test_gemm_outputs_count_routed_experts_by_k_over_e():
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.counts import gemm_outputs_per_token

    m = resolve_model("mixtral-8x7b")
    outs, routed = gemm_outputs_per_token(m)
    # per layer: 2 of 8 experts x (gate + up: ff rows each, down: hidden rows)
    assert routed == m.n_layers * 2 * (2 * m.moe.expert_ff + m.hidden_size)
    assert outs > routed


def test_one_token_passes_are_decode_steps():
    """n_batch 1 (llama-bench -b 1): every prompt token is a one-token pass returning logits, i.e. a decode
    step at its depth; the prefill estimate is the decode estimate of those steps, not the GEMM model (fitted
    on passes of 128+ tokens, which priced such a pass at several decode steps)."""
    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.quant import get_quant

    m, q, h = get_model("llama-3.1-8b"), get_quant("Q4_K_M"), get_hardware("rtx-4090")
    wl = Workload(n_ctx=4096, n_prompt=256, n_batch=1)
    f = speed.prefill_features(m, q, wl)
    assert f.ubatch_tokens == 1 and f.n_passes == 256 and f.decode_steps
    assert f.decode_steps == tuple(speed.tg_features(m, q, replace(wl, n_seq=1), 0, 256))
    sets = speed.speed_sets(prior_table(), m, q, h, wl)
    pre = speed.prefill_estimate(f, h, sets)
    dec = speed.decode_estimate(list(f.decode_steps), h, sets, 1)
    assert pre.phase == "prefill" and pre.tok_s == pytest.approx(dec.tok_s)
    assert pre.time_s == pytest.approx(256 * dec.time_s)  # the prompt's time: 256 steps, not one
    dparams = speed.merged_params(prior_table(), h, "llama.cpp")[2]
    step = speed.decode_step_s(list(f.decode_steps), h, dparams)
    assert speed.prompt_s(f, h, {}, dparams) == pytest.approx(256 * step)  # the native-path seconds
    # time to first token of a 4,096-token prompt: 4,096 such steps (plus one), not one
    est = speed.estimate_speed(m, q, h, wl, prior_table())
    assert est.ttft_s > speed.TTFT_PROMPT_TOKENS / est.prefill.tok_s
    gemm = speed.prefill_estimate(replace(f, decode_steps=()), h, sets)
    assert gemm.tok_s < pre.tok_s  # the GEMM model's one-token pass is slower than the decode step it is
    assert not speed.prefill_features(m, q, replace(wl, n_batch=2)).decode_steps


def test_engines_that_copy_offloaded_weights_read_them_over_the_link():
    """vLLM / SGLang --cpu-offload-gb copy offloaded weights to the GPU at every forward pass: decode reads
    them at one direction of the link (32 GB/s on an RTX 4090's PCIe 4.0 x16), below host RAM x host_bw_eff
    (89.6 GB/s x 0.6); under tensor parallelism each GPU over its own link, so two links (64 GB/s) leave host
    RAM the limit; llama.cpp computes offloaded layers on the host CPU, from host RAM."""
    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.quant import get_quant

    hw = get_hardware("rtx-4090")
    host = 89.6e9 * speed.DEFAULT_HOST_BW_EFF
    engines = ("llama.cpp", "vllm", "sglang")
    by_engine = {e: speed.rates_for_decode(speed.device_rates(hw, e), P) for e in engines}
    assert by_engine["llama.cpp"].host_link_bs == math.inf
    assert by_engine["vllm"].host_link_bs == by_engine["sglang"].host_link_bs == pytest.approx(32e9)
    # the offloaded bytes' share of a step: 8 GiB of a 70B model's weights in host RAM
    m, q = get_model("llama-3.1-70b"), get_quant("Q4_K_M")
    wl = Workload(offload_bytes=8 * GIB)
    t = {}
    for e in ("llama.cpp", "vllm"):
        f = speed.decode_features(m, q, replace(wl, engine=e), 0)
        assert f.host_bytes > 0
        t[e] = speed.step_s(f, by_engine[e])
    host_bytes = speed.decode_features(m, q, wl, 0).host_bytes
    assert t["vllm"] - t["llama.cpp"] == pytest.approx(host_bytes / 32e9 - host_bytes / host, rel=1e-9)
    for split, n, rate in (("tp", 2, host), ("pp", 2, 32e9), ("tp", 1, 32e9)):
        f = speed.decode_features(m, q, replace(wl, engine="vllm", n_devices=n, split=split), 0)
        assert speed.host_read_bs(f, by_engine["vllm"]) == pytest.approx(rate), (split, n)
        assert speed.host_read_bs(f, by_engine["llama.cpp"]) == pytest.approx(host)


def test_sglang_copies_whole_offloaded_modules_vllm_reads_what_a_step_touches():
    """SGLang's --cpu-offload-gb wraps each offloaded module's forward to copy every parameter to the GPU: a
    MoE layer's experts all cross the link at each decode step.  vLLM's UVA views are read where the kernels
    touch them (a step's routed experts); llama.cpp's host CPU reads the same touched bytes from host RAM."""
    from estimator.catalog.data import get_model
    from estimator.physics.quant import get_quant

    m, q = get_model("qwen3-30b-a3b"), get_quant("Q8_0")
    wb = speed.breakdown(m, q)
    wl = Workload(offload_bytes=8 * GIB)
    frac = 8 * GIB / wb.total_bytes
    host = {e: speed.decode_features(m, q, replace(wl, engine=e), 0).host_bytes for e in ("sglang", "vllm")}
    assert host["sglang"] == pytest.approx((wb.total_bytes - wb.token_embd_bytes) * frac)
    assert host["vllm"] == speed.decode_features(m, q, replace(wl, engine="llama.cpp"), 0).host_bytes
    assert host["vllm"] < 0.2 * host["sglang"]  # 8 of 128 experts per token
    # a dense model: a step reads every offloaded byte either way
    d = get_model("llama-3.1-8b")
    dense = {e: speed.decode_features(d, q, replace(wl, engine=e), 0).host_bytes for e in ("sglang", "vllm")}
    assert dense["sglang"] == pytest.approx(dense["vllm"], rel=1e-9)


def test_no_kernel_class_streams_weights_faster_than_the_memory_allows():
    """A kernel class's ratio (``bw_rel_q4_0`` 1.5 here) times bw_eff (0.9) would stream Q4_0 weights at 1.35x
    an RTX 3090's datasheet bandwidth: the weight stream stops at the datasheet (``stream_roof`` 1), and at
    1 / 0.85 of a detected host's copy probe (its only figure, ~0.85 of a datasheet a read-only stream may
    reach); a ratio under the roof is kept, and so is the set's bw_eff for the KV cache."""
    from estimator.catalog.resolve import resolve_hardware
    from estimator.physics.covariates import TYPICAL_STREAM_FRACTION

    params = {"bw_eff": 0.9, "t_fixed_s": 0.0, "t_layer_s": 0.0, "bw_rel_q4_0": 1.5, "bw_rel_q8_0": 1.05}
    gpu = resolve_hardware("rtx-3090")
    q4 = speed.decode_rates(gpu, params, "llama.cpp", kernel_class="q4_0")
    assert q4.bw_bs * q4.weight_rel == pytest.approx(gpu.bandwidth_gbs * 1e9)
    assert q4.bw_bs == pytest.approx(0.9 * gpu.bandwidth_gbs * 1e9)
    q8 = speed.decode_rates(gpu, params, "llama.cpp", kernel_class="q8_0")
    assert q8.weight_rel == pytest.approx(1.05)
    host = HardwareSpec(id="h", name="host", vendor="AMD", family="cpu-x86-avx512", kind="cpu",
                        memory_bytes=2**34, bandwidth_gbs=28.6, bf16_tflops=None,
                        bandwidth_measured_gbs=28.6)  # fmt: skip
    assert speed.stream_roof(host) == pytest.approx(1 / TYPICAL_STREAM_FRACTION)
    hq4 = speed.decode_rates(host, params, "llama.cpp", kernel_class="q4_0", backend="CPU")
    assert hq4.bw_bs * hq4.weight_rel == pytest.approx(28.6e9 / TYPICAL_STREAM_FRACTION)
    assert speed.stream_roof(gpu) == 1.0


def test_a_decode_interval_stops_at_the_memory_roof():
    """The upper end of a decode interval is at most the speed of streaming the step's bytes at the datasheet
    bandwidth (``roof_step_s``): an RTX A400 (96 GB/s) reads Llama-2-7B Q4_0's ~3.8 GB per token at most
    ~25 times a second, whatever width the conformal band has around its estimate; the estimate itself
    stays inside [lo, hi]."""
    from estimator.catalog.data import get_model
    from estimator.catalog.resolve import resolve_hardware
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.quant import get_quant

    model, quant, hw = get_model("llama-2-7b"), get_quant("Q4_0"), resolve_hardware("rtx-a400")
    wl = Workload(n_ctx=4096, n_prompt=512, n_gen=128, flash_attn=False)
    table = load_coefficients()
    sets = speed.speed_sets(table, model, quant, hw, wl)
    feats = speed.tg_features(model, quant, wl, 0, 128)
    e = speed.decode_estimate(feats, hw, sets)
    roof_tok_s = 1.0 / speed.roof_step_s(feats, hw)
    assert 20 < roof_tok_s < 30
    assert e.lo_tok_s <= e.tok_s <= e.hi_tok_s <= roof_tok_s * (1 + 1e-9)
    assert sets.dec.interval(e.tok_s)[1] > roof_tok_s  # the band alone would reach past the roof
    assert e.hi_tok_s == pytest.approx(roof_tok_s)


def test_ttft_prompt_is_4k_or_the_whole_context_when_smaller():
    """A report's TTFT is for a 4,096-token prompt; a context of 2,048 tokens (LLaMA-1, GPT-J) is asked a
    2,048-token prompt instead, whose time is that many tokens' prefill, not 4,096's."""
    from estimator.catalog.data import get_hardware, get_model
    from estimator.physics.quant import get_quant

    m, q, h = get_model("llama-2-7b"), get_quant("Q4_0"), get_hardware("rtx-4090")
    assert speed.ttft_prompt_tokens(Workload(n_ctx=8192)) == speed.TTFT_PROMPT_TOKENS == 4096
    assert speed.ttft_prompt_tokens(Workload(n_ctx=4096)) == 4096
    assert speed.ttft_prompt_tokens(Workload(n_ctx=2048)) == 2048
    full = speed.estimate_speed(m, q, h, Workload(n_ctx=4096), prior_table())
    small = speed.estimate_speed(m, q, h, Workload(n_ctx=2048), prior_table())
    assert (full.ttft_prompt_tokens, small.ttft_prompt_tokens) == (4096, 2048)
    assert small.ttft_s < 0.75 * full.ttft_s  # about half the prompt (attention grows with it)


def _row_term_case():
    """Llama 3.1 8B Q4_K_M, a 2048-token prompt in four passes of 512 on llama.cpp CUDA."""
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.quant import get_quant
    from estimator.specs import Workload

    wl = Workload(n_ctx=4096, n_prompt=2048, n_batch=2048, n_ubatch=512, engine="llama.cpp", backend="CUDA")
    model, q = resolve_model("llama-3.1-8b"), get_quant("Q4_K_M")
    return model, q, speed.prefill_features(model, q, wl)


def test_gemm_row_term_scales_a_pass_s_compute_by_its_rows_on_devices_with_a_peak():
    """``gemm_m_half``: a pass of u tokens runs its GEMMs at eff x u / (u + m_half): the compute of a pass
    grows by (1 + m_half / u), under the weights' memory roof; a device without a datasheet peak (a CPU)
    takes no such term."""
    from estimator.catalog.data import get_hardware

    model, q, f = _row_term_case()
    hw = get_hardware("rtx-3090")
    d = speed.device_rates(hw, "llama.cpp", False, "CUDA")
    params = {"flops_eff": 0.5, "bw_eff": 0.8, "attn_eff": 0.3, "t_layer_s": 0.0, "host_bw_eff": 0.5}
    base = speed.rates_for_prefill(d, params, f.kernel_class)
    rows = speed.rates_for_prefill(d, {**params, "gemm_m_half": 64.0}, f.kernel_class)
    assert base.m_half == 0.0 and rows.m_half == 64.0
    t0, t1 = speed.prefill_time(f, base), speed.prefill_time(f, rows)
    dense = f.flops + 2.0 * base.k_half * f.gemm_outputs  # no experts, no width term here
    assert t1 - t0 == pytest.approx(dense / (base.peak_s * base.eff) * 64.0 / 512, rel=1e-6)
    cpu = replace(d, peak_flops_s=None)
    cpu_params = {**params, "flops_abs_tflops": 1.0, "gemm_m_half": 64.0}
    assert speed.rates_for_prefill(cpu, cpu_params).m_half == 0.0


def test_expert_rows_spread_a_pass_over_the_experts_it_touches():
    """``counts.expert_rows``: a pass of u tokens gives each touched routed expert u x k / U(u) rows (1 at one
    token, u x k / E once every expert is touched); 0 for a dense model."""
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.counts import expert_rows, expert_union

    moe, dense = resolve_model("openai/gpt-oss-20b"), resolve_model("llama-3.1-8b")
    k, e = moe.moe.n_experts_used, moe.moe.n_experts
    assert expert_rows(moe, 1) == pytest.approx(1.0)
    assert expert_rows(moe, 16) == pytest.approx(16 * k / expert_union(e, k, 16))
    assert expert_rows(moe, 2048) == pytest.approx(2048 * k / e, rel=1e-6)
    assert expert_rows(dense, 512) == 0.0 and expert_rows(moe, 0) == 0.0


def test_gemm_row_term_on_expert_gemms_uses_their_own_rows():
    """The row term on a MoE model: the dense GEMMs of a pass grow by (1 + m_half / u), the routed experts'
    by (1 + m_half / m_e) with m_e = ``PrefillFeatures.expert_rows`` (u x k / E at large u), so a 512-token
    pass of gpt-oss-20b (64 rows per expert) pays more per token than a 2,048-token one (256)."""
    from estimator.catalog.data import get_hardware
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.quant import get_quant

    model, q = resolve_model("openai/gpt-oss-20b"), get_quant("MXFP4")
    hw = get_hardware("rtx-4090")
    d = speed.device_rates(hw, "llama.cpp", False, "CUDA")
    params = {"flops_eff": 0.5, "bw_eff": 0.8, "attn_eff": 0.3, "t_layer_s": 0.0, "host_bw_eff": 0.5}

    def feats(n_prompt, n_ubatch=2048):
        wl = Workload(n_ctx=4096, n_prompt=n_prompt, n_batch=2048, n_ubatch=n_ubatch, engine="llama.cpp",
                      backend="CUDA")  # fmt: skip
        return speed.prefill_features(model, q, wl)

    f = feats(512)
    assert f.expert_rows == pytest.approx(512 * 4 / 32, rel=1e-3)
    # two passes of 512 / 88 tokens: the rows of the mean pass (300 tokens), like the dense GEMMs' u
    from estimator.physics.counts import expert_rows

    assert feats(600, 512).expert_rows == pytest.approx(expert_rows(model, 300.0))
    base = speed.rates_for_prefill(d, params, f.kernel_class)
    rows = speed.rates_for_prefill(d, {**params, "gemm_m_half": 32.0}, f.kernel_class)
    t0, t1 = speed.prefill_time(f, base), speed.prefill_time(f, rows)
    dense = f.flops - f.expert_flops + 2.0 * base.k_half * (f.gemm_outputs - f.expert_gemm_outputs)
    expert = f.expert_flops + 2.0 * base.k_half * f.expert_gemm_outputs
    rate = base.peak_s * base.eff
    step = dense / rate * 32.0 / 512 + expert / rate * 32.0 / f.expert_rows
    assert t1 - t0 == pytest.approx(step, rel=1e-6)
    per_token = [speed.prefill_time(g, rows) / g.tokens for g in (f, feats(2048))]
    assert per_token[0] > per_token[1]
