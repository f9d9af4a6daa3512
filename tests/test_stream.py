"""One stream of a serving engine on the serving fit's step (estimator.physics.stream): the report's
single-stream decode is the serving model's TPOT at one client, its time to first token the serving TTFT of
one client, with the serving set's intervals and a label that says so; engines, tables and configurations
outside the rule keep the decode / prefill fit's path."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from estimator.app import predict
from estimator.catalog.data import get_hardware, get_model
from estimator.physics import serving as sv
from estimator.physics import speed, stream
from estimator.physics.coefficients import load_coefficients, prior_table
from estimator.physics.quant import get_quant
from estimator.specs import Workload

TABLE = load_coefficients(None)  # the shipped fit: vLLM on the H100 is calibrated by serving records only
M, H, Q = get_model("llama-3.1-8b"), get_hardware("h100-80gb-sxm"), get_quant("FP8")
WL = Workload(engine="vllm", n_ctx=8192)


def _sets(table=TABLE, model=M, quant=Q, hw=H, wl=WL):
    return stream.speed_sets(table, model, quant, hw, wl)


def test_the_shipped_fit_times_vllm_on_the_h100_by_its_serving_set():
    sets = _sets()
    assert not speed.speed_sets(TABLE, M, Q, H, WL).dec.calibrated  # no llama-bench-style vLLM record
    assert sets.stream is not None and sets.stream.decode and sets.stream.prefill
    assert sets.dec.calibrated and sets.dec.basis == "device"
    assert sets.dec.label.startswith("serving fit (TPOT of one stream): calibrated: h100-80gb-sxm measured")
    assert sets.pre.label.startswith("serving fit (prompt chunks of TTFT): ")
    sset = TABLE.lookup(H, "vllm", "serving")
    tpot_lo, tpot_hi = sset.intervals["tpot"]
    ttft_lo, ttft_hi = sset.intervals["ttft_lone"]  # a lone request's TTFT: no queue, as one stream
    assert ttft_hi - ttft_lo < sset.intervals["ttft"][1] - sset.intervals["ttft"][0]
    # a time interval [lo, hi] is the speed interval [-hi, -lo]
    assert (sets.dec.log_lo, sets.dec.log_hi) == (-tpot_hi, -tpot_lo)
    assert (sets.pre.log_lo, sets.pre.log_hi) == (-ttft_hi, -ttft_lo)
    assert "90 % interval " in sets.dec.interval_note and "intervals:" not in sets.dec.interval_note


def test_one_stream_decode_is_the_serving_tpot_of_one_client():
    (est,) = sv.estimate_serving(M, Q, H, WL, [sv.ServingLoad(1, 1000, 2, sv.SERVE)], TABLE)
    depth = 1000 + 2 / 2  # the serving model's decode depth: isl + osl / 2
    dec = speed.decode_estimate(speed.decode_features(M, Q, WL, depth), H, _sets())
    assert 1.0 / dec.tok_s == pytest.approx(est.tpot_s, rel=1e-12)
    bounds = (1.0 / dec.hi_tok_s, 1.0 / dec.lo_tok_s)
    assert bounds == pytest.approx((est.tpot_lo_s, est.tpot_hi_s), rel=1e-12)


def test_time_to_first_token_is_the_serving_ttft_of_one_client():
    rep = speed.estimate_speed(M, Q, H, WL, TABLE, _sets())
    load = sv.ServingLoad(1, rep.ttft_prompt_tokens, 64, sv.SERVE)
    (est,) = sv.estimate_serving(M, Q, H, WL, [load], TABLE)
    assert rep.ttft_s == pytest.approx(est.ttft_s, rel=1e-12)
    assert (rep.ttft_lo_s, rep.ttft_hi_s) == pytest.approx((est.ttft_lo_s, est.ttft_hi_s), rel=1e-12)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget():
    sets = _sets()
    budget = int(sets.stream.base.max_batched_tokens)
    one = speed.prefill_features(M, Q, replace(WL, n_prompt=budget, n_ctx=4 * budget))
    three = speed.prefill_features(M, Q, replace(WL, n_prompt=3 * budget, n_ctx=4 * budget))
    t_one, t_three = sets.stream.prefill_s(one), sets.stream.prefill_s(three)
    # three full chunks: three steps of the full budget, each with the attention per token of the whole prompt
    base = sets.stream.base
    step3 = sv.mixed_step_s(replace(base, attn_prompt=three.attn_flops / (3 * budget)), 0.0, budget,
                            sets.stream.params)  # fmt: skip
    assert t_three == pytest.approx(3 * step3, rel=1e-12) and t_three > 3 * t_one
    # one token over the budget: one full step and a one-token step, not two full steps
    over = speed.prefill_features(M, Q, replace(WL, n_prompt=budget + 1, n_ctx=4 * budget))
    t_over = sets.stream.prefill_s(over)
    assert t_one < t_over < 1.2 * t_one


def test_predict_rows_use_the_same_path():
    row = {"model": "llama-3.1-8b", "hardware": "h100-80gb-sxm", "engine": "vllm", "quant": "FP8",
           "n_prompt": "512", "n_gen": "128"}  # fmt: skip
    (out,) = predict.predict_rows([row], TABLE)
    assert out["error"] == "" and out["calibrated"] == "true"
    assert out["coefficients"].startswith("prefill: serving fit (prompt chunks of TTFT)")
    assert "; decode: serving fit (TPOT of one stream)" in out["coefficients"]
    wl = replace(WL, n_ctx=640, n_prompt=512, n_gen=128)
    sets = stream.speed_sets(TABLE, M, Q, H, wl)
    dec = speed.decode_estimate(speed.tg_features(M, Q, wl, 512, 128), H, sets)
    assert float(out["decode_tok_s"]) == pytest.approx(dec.tok_s, rel=1e-5)


@pytest.mark.parametrize(
    "why, table, hw, wl",
    [
        ("llama.cpp: its own decode / prefill fit", TABLE, "h100-80gb-sxm", Workload(engine="llama.cpp")),
        ("the prior: no serving fit", prior_table(), "h100-80gb-sxm", WL),
        ("host offload", TABLE, "h100-80gb-sxm", replace(WL, offload_bytes=2**30)),
        ("a CPU: the serving fit has nothing there", TABLE, "xeon-platinum-8480-plus", WL),
    ],
)
def test_outside_the_rule_the_decode_and_prefill_fit_times_it(why, table, hw, wl):
    quant = get_quant("Q4_K_M") if wl.engine == "llama.cpp" else (Q if hw != "xeon-platinum-8480-plus" else
                                                                   get_quant("BF16"))
    h = get_hardware(hw)
    sets = stream.speed_sets(table, M, quant, h, wl)
    assert sets.stream is None, why
    assert sets == speed.speed_sets(table, M, quant, h, wl)


def test_the_stream_check_tool_compares_both_paths_on_the_serving_records(capsys):
    """tools/stream_check.py (the docs' figures): one row per (metric, engine, device) of the low-concurrency
    serving records, with both paths' errors."""
    from tests.tool_module import load_tool

    tool = load_tool("stream_check")
    assert tool.main([]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    keys = {(r[0].strip("| "), r[1], r[2]) for r in rows}
    assert ("tpot", "vllm", "h100-80gb-sxm") in keys and ("ttft", "sglang", "b200") in keys
    assert all(r[4].endswith("%") and r[5].endswith("%") for r in rows)


def test_an_uncalibrated_stream_on_a_less_mature_backend_widens_its_slow_side():
    """vLLM ROCm (a developing backend) on a Radeon the serving fit never measured: the pooled serving step,
    whose slow bounds (prefill / decode tok/s low, TTFT high) widen by the backend's maturity like every
    uncalibrated speed."""
    h, q = get_hardware("rx-7900-xtx"), get_quant("BF16")
    sets = _sets(quant=q, hw=h)
    assert sets.stream is not None and not sets.pre.calibrated and sets.widen_lo < 0
    rep = speed.estimate_speed(M, q, h, WL, TABLE, sets)
    lo, hi = sets.stream.ttft_interval(rep.ttft_s)
    assert (rep.ttft_lo_s, rep.ttft_hi_s) == pytest.approx((lo, hi * math.exp(-sets.widen_lo)))
    widened = sets.pre.interval(rep.prefill.tok_s)[0] * math.exp(sets.widen_lo)
    assert rep.prefill.lo_tok_s == pytest.approx(widened)
