"""Serving at concurrency (estimator.physics.serving): the mixed step on the one speed path, the closed loop,
KV and slot queueing, batch mode, engine scheduler facts, the vectorised path, and calibration recovering
known serving parameters from generated data."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.engines import get_engine
from estimator.engines.vllm import cudagraph_sizes
from estimator.physics import serving as sv
from estimator.physics import speed
from estimator.physics.coefficients import prior_table
from estimator.physics.quant import get_quant
from estimator.physics.weights import weight_breakdown
from estimator.specs import Workload

PARAMS = {
    "bw_eff": 0.8, "kv_bw_eff": 0.6, "flops_eff": 0.5, "flops_rel_fp4": 1.0, "flops_rel_moe": 0.5,
    "attn_eff": 0.4, "t_fixed_s": 5e-4, "t_layer_s": 2e-5, "t_allreduce_s": 1e-5, "t_seq_s": 2e-5,
    "ttft_fixed_s": 0.03, "queue_share": 0.5, "moe_route_s": 0.0,
}  # fmt: skip


def feats(model="llama-3.1-8b", hw="h100-80gb-sxm", quant="BF16", engine="vllm", c=1, isl=1024, osl=1024,
          cap=None, mode=sv.SERVE, n=1, kv="bf16"):  # fmt: skip
    wl = Workload(n_ctx=isl + osl, kv_dtype=kv, engine=engine, n_devices=n, split="tp")
    m, h, q = resolve_model(model), resolve_hardware(hw), get_quant(quant)
    return sv.serving_features(m, q, h, wl, sv.ServingLoad(c, isl, osl, mode), cap)


def test_a_pure_decode_step_is_the_decode_step_formula():
    """With u = 0 and no attention / per-request terms, the mixed step is speed.step_s of the decode features
    of the same batch (weights with the expert union, KV at depth isl + osl/2)."""
    m, q = resolve_model("qwen3-30b-a3b"), get_engine("vllm").weight_format(get_quant("BF16"))  # as loaded
    f = feats("qwen3-30b-a3b", c=8)
    p = dict(PARAMS, kv_bw_eff=PARAMS["bw_eff"], t_seq_s=0.0, attn_eff=1e30, flops_rel_moe=1.0)
    wl = Workload(n_ctx=2048, kv_dtype="bf16", engine="vllm", n_seq=8)
    d = speed.decode_features(m, q, wl, 1024 + 512)
    ref = speed.step_s(dataclasses.replace(d, flops_per_token=f.matmul_flops), sv.rates(f, p))
    assert sv.mixed_step_s(f, 8, 0, p) == pytest.approx(ref, rel=1e-12)
    assert f.kv_bytes_per_seq == pytest.approx(speed.kv_read_at(m, 1536, "bf16", "vllm"))


def test_routed_experts_stream_at_bw_rel_moe():
    """bw_rel_moe slows the read of the routed experts the step touches, not the dense weights: at batch 8 the
    memory time of a MoE step grows by union x (1 / bw_rel_moe - 1) / (tp x bw x bw_eff); a dense model's
    step does not change."""
    f = feats("qwen3-30b-a3b", c=8)
    p = dict(PARAMS, bw_rel_moe=1.0)
    half = dict(PARAMS, bw_rel_moe=0.5)
    d1, d2 = sv.step_features(f, 8, 0, p), sv.step_features(f, 8, 0, half)
    union = d1.expert_union_bytes
    assert union > 0 and d2.weight_bytes - d1.weight_bytes == pytest.approx(union, rel=1e-12)
    dense = feats(c=8)
    assert sv.mixed_step_s(dense, 8, 0, half) == sv.mixed_step_s(dense, 8, 0, p)
    assert sv.mixed_step_s(f, 8, 0, half) > sv.mixed_step_s(f, 8, 0, p)
    assert "bw_rel_moe" in sv.STEP_PARAMS  # an uncalibrated step (decode sets) keeps it at 1


def test_decode_attention_runs_at_its_own_efficiency():
    """The decoding requests' attention FLOPs are charged at attn_decode_eff, the prompt's at attn_eff (other
    kernels: an MLA decode's absorbed form on a few heads per device against a prefill's dense attention);
    a set without attn_decode_eff (the uncalibrated step of the decode / prefill sets) charges both at
    attn_eff.  Known answer: the difference of two steps is the attention term alone."""
    f = feats("deepseek-v3", hw="b200", quant="FP8", c=64, isl=8192, n=8)
    peak = f.n_devices * f.attn_flops_s
    old = dict(PARAMS)
    new = dict(PARAMS, attn_decode_eff=0.1)
    assert sv.mixed_step_s(f, 64, 0, new) - sv.mixed_step_s(f, 64, 0, old) == pytest.approx(
        64 * f.attn_decode / peak * (1 / 0.1 - 1 / PARAMS["attn_eff"]), rel=1e-9
    )
    assert sv.mixed_step_s(f, 0, 512, new) == sv.mixed_step_s(f, 0, 512, old)  # prompt attention: attn_eff
    assert "attn_decode_eff" in sv.STEP_PARAMS


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_single_client_ttft_is_its_own_prefill_and_tpot_one_decode_step(engine):
    """One client: TTFT is the request's own prefill, with no decode step beside it even on an engine that
    runs prefill as a step of its own (SGLang, spread lengths: not the lock-step cohort)."""
    f = dataclasses.replace(feats(c=1, isl=1024, osl=256, engine=engine), equal_lengths=False)
    s = sv.solve(f, PARAMS)
    assert s["running"] == 1 and not s["kv_limited"]
    assert s["tpot_s"] == pytest.approx(sv.mixed_step_s(f, 1.0, 0.0, PARAMS))
    assert s["ttft_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + sv.mixed_step_s(f, 0.0, 1024.0, PARAMS))
    assert s["e2e_s"] == pytest.approx(s["ttft_s"] + 255 * s["tpot_s"])
    assert s["output_tok_s"] == pytest.approx(256 / s["e2e_s"])


def test_latency_grows_and_throughput_saturates_with_concurrency():
    pts = [sv.point(dataclasses.replace(feats(), concurrency=float(c)), PARAMS) for c in (1, 4, 16, 64, 256)]
    for a, b in zip(pts, pts[1:], strict=False):
        assert b.ttft_s > a.ttft_s and b.tpot_s > a.tpot_s and b.output_tok_s > a.output_tok_s
    assert pts[-1].output_tok_s / pts[-2].output_tok_s < 4  # 4x the clients, less than 4x the tokens
    assert pts[0].per_user_tok_s == pytest.approx(1 / pts[0].tpot_s)


def test_kv_pool_bounds_the_running_requests_and_the_rest_wait():
    f = feats(c=64, isl=1024, osl=1024, cap=20 * 1536)
    s = sv.solve(f, PARAMS)
    assert s["running"] == 20 and s["kv_limited"]
    free = sv.solve(dataclasses.replace(f, kv_capacity_tokens=math.inf, concurrency=20.0), PARAMS)
    assert s["tpot_s"] == pytest.approx(free["tpot_s"])  # the same 20 run
    # the other 44 clients wait (64 - 20) / lam = 2.2 lives of a running request (Little's law)
    wait = s["ttft_s"] - free["ttft_s"]
    assert 2.2 * 1023 * free["tpot_s"] < wait < 2.2 * free["e2e_s"]


def test_an_engine_that_does_not_mix_serves_a_lock_step_cohort():
    """SGLang prefills a whole equal-length cohort before it decodes: against vLLM's mixed steps (same budget,
    same graphs) its TPOT is shorter and its TTFT longer, the published Qwen3-32B / H100 pattern (SGLang TPOT
    1.13-1.82x shorter, TTFT 2.1-6.9x longer than vLLM's at the same TP, concurrency and lengths)."""
    v, s = feats(engine="vllm", c=64, osl=128), feats(engine="sglang", c=64, osl=128)
    assert v.mixes_prefill and not s.mixes_prefill
    s = dataclasses.replace(s, max_batched_tokens=v.max_batched_tokens, graph_sizes=v.graph_sizes)
    vs, ss = sv.solve(v, PARAMS), sv.solve(s, PARAMS)
    assert ss["tpot_s"] < vs["tpot_s"] and ss["ttft_s"] > 2 * vs["ttft_s"]


def test_cohort_known_answer():
    """64 requests of 1,024 tokens in a budget of 8,192: 8 prefill batches of 8,192 tokens; the first request
    is done after batch 1, the last after batch 8, so TTFT = fixed + 4.5 batches and TPOT = one decode step of
    64 + 3.5 batches spread over the 127 later tokens.  A slot limit of 16 makes the other 48 clients wait
    three waves of 16."""
    f = dataclasses.replace(feats(engine="sglang", c=64, osl=128), max_batched_tokens=8192.0)
    t_b = sv.mixed_step_s(f, 0.0, 8192.0, PARAMS)
    t_d = sv.mixed_step_s(f, 64.0, 0.0, PARAMS)
    s = sv.solve(f, PARAMS)
    assert s["ttft_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + 4.5 * t_b, rel=1e-12)
    assert s["tpot_s"] == pytest.approx(t_d + 3.5 * t_b / 127, rel=1e-12)
    assert s["output_tok_s"] == pytest.approx(64 * 128 / (PARAMS["ttft_fixed_s"] + 8 * t_b + 127 * t_d))
    q = sv.solve(dataclasses.replace(f, max_seqs=16.0), PARAMS)
    wave = 2 * t_b + 127 * sv.mixed_step_s(f, 16.0, 0.0, PARAMS)  # 16 x 1,024 tokens: two batches of 8,192
    assert q["running"] == 16
    assert q["ttft_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + 1.5 * t_b + 48 / 16 * wave, rel=1e-12)
    # a lone request: its own prefill, then plain decode steps
    one = sv.solve(dataclasses.replace(f, concurrency=1.0), PARAMS)
    assert one["ttft_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + sv.mixed_step_s(f, 0.0, 1024.0, PARAMS))
    assert one["tpot_s"] == pytest.approx(sv.mixed_step_s(f, 1.0, 0.0, PARAMS))


def test_graph_padding_and_scheduler_facts():
    h100, b200 = resolve_hardware("h100-80gb-sxm"), resolve_hardware("b200")
    vs = get_engine("vllm").scheduler(h100, Workload(engine="vllm"))
    assert (vs.max_batched_tokens, vs.max_seqs, vs.mixes_prefill) == (8192, 1024, True)
    assert get_engine("vllm").scheduler(b200, Workload(engine="vllm")).max_batched_tokens == 16384
    assert vs.graph_sizes[:5] == (1, 2, 4, 8, 16) and vs.graph_sizes[-1] == 512 and 264 not in vs.graph_sizes
    assert cudagraph_sizes(512)[33:36] == (248, 256, 272)
    assert vs.padded(9) == 16 and vs.padded(257) == 272 and vs.padded(600) == 600
    ss = get_engine("sglang").scheduler(h100, Workload(engine="sglang", n_devices=2))
    assert (ss.max_batched_tokens, ss.mixes_prefill, ss.graph_sizes[-1]) == (8192, False, 256)
    f = feats()
    assert sv.step_features(f, 9, 0, PARAMS).batch == 16  # the GEMMs compute the padded rows
    assert sv.step_features(f, 600, 0, PARAMS).batch == 600


def test_a_prompt_over_the_budget_is_full_chunks_and_a_remainder():
    """A prompt of isl tokens under a budget of B tokens, n_d decoding beside it, takes floor(isl / room)
    steps of room = B - n_d prompt tokens and one step with the rest: an 8,192-token prompt on the H100
    (vLLM's budget 8,192) with requests decoding is one step of ~8,190 tokens and one of ~2, not two full
    steps."""
    f = feats(c=4, isl=8192, osl=1024)
    assert f.max_batched_tokens == 8192
    room, n_d = 8190.0, 2.0
    full, tail = sv.mixed_step_s(f, n_d, room, PARAMS), sv.mixed_step_s(f, n_d, 2.0, PARAMS)
    assert sv.chunks_s(f, n_d, 8192.0, room, PARAMS, sv.rates(f, PARAMS)) == pytest.approx(full + tail)
    assert tail < 0.1 * full  # the remainder is a decode-sized step
    # a prompt that divides the room: no remainder step; arrays give the same numbers
    assert sv.chunks_s(f, n_d, 2 * room, room, PARAMS, sv.rates(f, PARAMS)) == pytest.approx(2 * full)
    a = sv.chunks_s(f, n_d, np.array([8192.0, 2 * room]), room, PARAMS, sv.rates(f, PARAMS))
    assert a == pytest.approx([full + tail, 2 * full])
    # a batch of 17 x 512 tokens under the 8,192 budget: one full step and one of 512
    b = feats(c=17, isl=512, osl=128, mode=sv.BATCH)
    s = sv.solve(b, PARAMS)
    pre = sv.mixed_step_s(b, 0.0, 8192.0, PARAMS) + sv.mixed_step_s(b, 0.0, 512.0, PARAMS)
    assert s["ttft_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + pre)


def test_batch_mode_is_prefill_then_decode():
    f = feats(c=16, isl=512, osl=128, mode=sv.BATCH)
    s = sv.solve(f, PARAMS)
    pre = sv.mixed_step_s(f, 0.0, 16 * 512, PARAMS)  # one chunk: 8192 tokens fit the budget
    assert s["e2e_s"] == pytest.approx(PARAMS["ttft_fixed_s"] + pre + 127 * sv.mixed_step_s(f, 16, 0, PARAMS))
    assert s["output_tok_s"] == pytest.approx(16 * 128 / s["e2e_s"])


def test_array_features_give_the_scalar_numbers():
    uniform = ("fp8", "mixes_prefill", "graph_sizes", "batch_mode", "engine", "equal_lengths")
    for engine in ("vllm", "sglang"):
        loads = ((1, 1024, 1024), (8, 8192, 1024), (300, 128, 512))
        rows = [feats(engine=engine, c=c, isl=i, osl=o) for c, i, o in loads]
        arr = {}
        for fld in dataclasses.fields(sv.ServingFeatures):
            vals = [getattr(r, fld.name) for r in rows]
            arr[fld.name] = vals[0] if fld.name in uniform else np.array(vals, dtype=float)
        out = sv.solve(sv.ServingFeatures(**arr), PARAMS)
        for i, r in enumerate(rows):
            one = sv.solve(r, PARAMS)
            for k in ("ttft_s", "tpot_s", "output_tok_s"):
                assert out[k][i] == pytest.approx(one[k], rel=1e-9), (engine, i, k)


def test_serving_params_come_from_the_decode_and_prefill_sets_until_calibrated():
    table = prior_table()
    hw = resolve_hardware("b200")
    sp = sv.serving_params(table, hw, "vllm")
    dec = table.lookup(hw, "vllm", "decode")
    assert not sp.calibrated and sp.params["bw_eff"] == dec.params["bw_eff"]
    assert sp.params["kv_bw_eff"] == dec.params["bw_eff"] and sp.params["ttft_fixed_s"] == 0.02
    assert "uncalibrated" in sp.label


def test_mxfp4_on_vllm_keeps_the_non_expert_matrices_in_bf16():
    m = resolve_model("gpt-oss-120b")
    q = get_quant("MXFP4")
    llama = weight_breakdown(m, q)
    ckpt = weight_breakdown(m, get_engine("vllm").weight_format(q))
    assert get_engine("llama.cpp").weight_format(q) is q
    assert ckpt.routed_expert_bytes == llama.routed_expert_bytes  # experts MXFP4 in both
    assert ckpt.by_type_bytes.get("q8_0", 0) == 0 and llama.by_type_bytes["q8_0"] > 0
    # every element is either an MXFP4 expert weight (17 B per 32) or bf16 (2 B), as the gpt-oss checkpoint
    assert set(ckpt.by_type_bytes) == {"mxfp4", "bf16"}
    assert ckpt.by_type_bytes["bf16"] / 2 + ckpt.by_type_bytes["mxfp4"] * 32 / 17 == ckpt.n_params_total
    assert ckpt.total_bytes > llama.total_bytes


def test_checkpoint_engines_load_norms_in_the_checkpoint_dtype_and_fill_k_eq_v():
    """A PyTorch engine keeps norms, biases and the router in the checkpoint dtype (llama.cpp: F32); vLLM,
    SGLang and TensorRT-LLM also allocate V on Gemma 4's K==V full layers and load K into it.  The byte
    counts: one norm element 2 B less; one 31B full layer's V = 4 KV heads x 512 x 5,376 bf16."""
    m = resolve_model("gemma-4-31b")
    bf16 = get_quant("BF16")
    engines = ("llama.cpp", "vllm", "sglang", "trtllm")
    gguf, vllm, sglang, trt = (weight_breakdown(m, get_engine(e).weight_format(bf16)) for e in engines)
    assert get_engine("llama.cpp").weight_format(bf16) is bf16
    norms = gguf.by_class_bytes["norm"]
    assert trt.by_class_bytes["norm"] * 2 == norms  # F32 -> BF16
    n_full = m.layer_types.count("full")
    v_slot = n_full * m.global_n_kv_heads * m.global_head_dim * m.hidden_size * 2
    assert trt.total_bytes == gguf.total_bytes - norms // 2 + v_slot
    assert vllm.total_bytes == trt.total_bytes == sglang.total_bytes
    # a GGUF recipe stays llama.cpp's (the checkpoint engines do not rewrite its types)
    q4 = get_quant("Q4_K_M")
    assert get_engine("vllm").weight_format(q4) is q4 and get_engine("sglang").weight_format(q4) is q4


@pytest.mark.parametrize("name", ["NVFP4", "FP8-BLOCK", "FP8", "W4A16-G128", "AWQ-INT4"])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_v_slot_flag_keeps_the_formats_types(engine, name):
    """The engines' loading flag adds tensors, not types: every class keeps the listed format's type (NVFP4's
    bf16 attention, FP8-BLOCK's blocks), in the per-class table and tensor by tensor."""
    from estimator.physics.quant import type_for
    from estimator.physics.weights import class_types

    m, listed = resolve_model("gemma-4-31b"), get_quant(name)
    loaded = get_engine(engine).weight_format(listed)
    assert loaded.fills_k_eq_v
    assert class_types(m, loaded) == class_types(m, listed)
    for tclass in ("attn_q", "attn_k", "attn_v", "ffn_up", "token_embd", "output", "norm"):
        assert type_for(loaded, tclass, row_len=5376) == type_for(listed, tclass, row_len=5376), tclass


def test_calibration_recovers_known_serving_parameters():
    """Points generated by the estimator's serving model with known parameters (2 % noise) are fitted back
    through calibration.serving's vectorised model (calibration.serving.SERVING) by the decode / prefill
    optimiser (calibration.fit.fit_model: covariates, effects, robust least squares)."""
    from calibration.fit import SpeedPoint, fit_model
    from calibration.serving import SERVING

    rng = np.random.default_rng(0)
    truth = dict(PARAMS, bw_eff=0.7, flops_eff=0.45, ttft_fixed_s=0.05, t_seq_s=3e-5, queue_share=0.4)
    points = []
    hw = resolve_hardware("b200")
    for name, quant in (("llama-3.1-8b", "BF16"), ("qwen3-30b-a3b", "BF16"), ("llama-3.1-70b", "FP8")):
        for c in (1, 4, 16, 64, 256):
            for isl, osl in ((1024, 1024), (8192, 1024), (1024, 8192)):
                f = feats(name, "b200", quant, c=c, isl=isl, osl=osl)
                s = sv.solve(f, truth)
                for metric in ("ttft", "tpot"):
                    t = s[metric + "_s"] * math.exp(rng.normal(0, 0.02))
                    p = SpeedPoint(f, hw, t, "serving", "fam", "vllm", "CUDA", "b200", name, vendor="NVIDIA",
                                   kind="gpu", extra={"metric": metric})  # fmt: skip
                    points.append(p)
    st = fit_model(points, model=SERVING)
    keys = [p.key for p in st.design.params]
    assert st.design.units == [("b200", "vllm", "CUDA", "", "")]
    for k in ("bw_eff", "ttft_fixed_s", "queue_share"):
        assert st.theta[0, keys.index(f"serving.{k}")] == pytest.approx(truth[k], rel=0.15), k
    assert np.sqrt(np.mean(st.residuals**2)) < 0.05


@pytest.mark.parametrize(
    "engine, client",
    [("vllm", "vllm bench serve --max-concurrency C"),
     ("sglang", "python -m sglang.bench_serving --max-concurrency C"),
     ("llama.cpp", "a closed-loop client of C connections")],
)  # fmt: skip
def test_the_serving_note_names_the_engines_own_benchmark_client(engine, client):
    """The serving section says which closed-loop benchmark its figures are: the engine profile's client
    (bench_client), not vLLM's for every engine; the Spanish report keeps the command, translates the rest."""
    from estimator.render.translate import tr
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report

    quant = "Q4_K_M" if engine == "llama.cpp" else "BF16"
    d = report_to_dict(make_report(ReportRequest(model="llama-3.1-8b", hardware="h100-80gb-sxm", quant=quant,
                                                 engine=engine, concurrency=8)))  # fmt: skip
    note = next(n for n in d["serving"]["notes"] if n.startswith("requests of"))
    assert f"({client})" in note
    es = tr(note, "es")
    assert es.startswith("peticiones de")
    assert ("bucle cerrado" in es) if engine == "llama.cpp" else (client in es)


def test_a_configuration_that_does_not_fit_is_served_as_if_it_fit():
    """Llama-3.1-405B in BF16 on 8 x H100 does not fit: its reserved KV pool would be empty, and the sweep had
    run one request at a time (every other client 'waiting for KV').  The section says its figures assume the
    model fits, so it sizes them so: a pool as large as the clients need, the cost at the SLO's point.  Where
    the weights fit and only the sized sequences' KV does not, the pool is real and stays."""
    from estimator.report.document import report_to_dict
    from estimator.report.request import ReportRequest, make_report

    req = ReportRequest(model="llama-3.1-405b", hardware="h100-80gb-sxm", engine="vllm", devices=8,
                        concurrency=16)  # fmt: skip
    d = report_to_dict(make_report(req))
    assert d["memory"]["verdict"] == "does not fit"
    s = d["serving"]
    assert s["kv_capacity_tokens"] is None and not any(r["kv_limited"] for r in s["rows"])
    assert s["slo_point"]["concurrency"] > 16
    assert d["cost"]["aggregate_concurrency"] == s["slo_point"]["concurrency"]
    assert any("as large as the clients need" in n for n in s["notes"])
    # the weights fit and only the 256 sequences' KV overflows: the pool the engine reserves is real, and the
    # sweep keeps it (the clients beyond it wait), saying so
    pool = report_to_dict(make_report(ReportRequest(model="gpt-oss-120b", hardware="h100-80gb-sxm",
                                                    engine="vllm", concurrency=256)))  # fmt: skip
    assert pool["memory"]["verdict"] == "does not fit" and pool["serving"]["kv_capacity_tokens"] > 0
    assert any(r["kv_limited"] for r in pool["serving"]["rows"])
    said = "the KV cache of 256 sequences of 8,192 tokens does not fit: these figures are of the pool"
    assert any(n.startswith(said) for n in pool["serving"]["notes"])
