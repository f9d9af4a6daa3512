"""Attention data parallelism (``--split dp``): each device runs attention for its own sequences (their whole
KV: an MLA latent cache is no longer replicated on every device) and holds every weight but the routed
experts, which are split over the devices (expert parallel).  Numbers follow from the catalog geometry."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.engines import get_engine
from estimator.physics import serving
from estimator.physics.kv import kv_cache_for
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.physics.weights import weight_breakdown
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report
from estimator.report.sections.summary import speed_lines
from estimator.specs import SpecError, Workload

H200 = "h200-141gb-sxm"


def _sized(model: str, engine: str, quant: str, **kw):
    m, hw = resolve_model(model), resolve_hardware(kw.pop("hardware", H200))
    q = get_engine(engine).weight_format(get_quant(quant))
    base = Workload(n_ctx=8192, n_seq=128, concurrency=128, engine=engine, n_devices=8)
    wl = replace(base, gpu_memory_utilization=get_engine(engine).memory_fraction, **kw)
    return m, q, hw, wl


def test_each_device_holds_its_own_sequences_and_a_share_of_the_experts():
    m, q, hw, wl = _sized("deepseek-r1", "sglang", "FP8-BLOCK")
    tp = estimate_memory(m, q, hw, replace(wl, split="tp"))
    dp = estimate_memory(m, q, hw, replace(wl, split="dp"))
    wb = weight_breakdown(m, q)
    one = kv_cache_for(m, wl, 16).total_bytes  # 128 sequences over 8 devices
    for d in dp.per_device:
        assert d.kv_bytes == one
        assert d.weights_bytes == int(wb.total_bytes - wb.routed_expert_bytes + wb.routed_expert_bytes / 8)
    # tensor parallel: the MLA latent of all 128 sequences on every device, 8x the KV of the dp layout
    assert tp.per_device[0].kv_bytes == kv_cache_for(m, wl).total_bytes == 8 * one
    assert (tp.verdict, dp.verdict) == ("does not fit", "fits")


def test_a_dense_model_is_one_replica_per_device_and_the_pools_add_up():
    m, q, hw, wl = _sized("llama-3.1-8b", "vllm", "BF16", n_seq=10, concurrency=10, split="dp")
    mem = estimate_memory(m, q, hw, wl)
    assert all(d.weights_bytes == weight_breakdown(m, q).total_bytes for d in mem.per_device)
    assert all(d.kv_bytes == kv_cache_for(m, wl, 2).total_bytes for d in mem.per_device)  # ceil(10 / 8)
    one = estimate_memory(m, q, hw, replace(wl, n_devices=1, n_seq=2, concurrency=2))
    assert mem.kv_capacity_tokens == 8 * one.kv_capacity_tokens
    assert mem.max_concurrency == 8 * one.max_concurrency


def test_llama_cpp_has_no_attention_data_parallelism():
    with pytest.raises(SpecError, match=r"llama\.cpp has no attention data parallelism .*--split tp or pp"):
        make_report(ReportRequest("llama-3.1-8b", "rtx-4090", devices=2, split="dp"))


@pytest.mark.parametrize(
    "engine, flags",
    [
        ("vllm", ["--data-parallel-size", "8", "--enable-expert-parallel"]),
        ("sglang", ["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention"]),
        ("trtllm", ["--tp_size", "8", "--ep_size", "8", "--extra_llm_api_options"]),
    ],
)
def test_launch_flags(engine, flags):
    m, q, _hw, wl = _sized("deepseek-r1", engine, "FP8-BLOCK", split="dp")
    cmd = get_engine(engine).launch(m, q, wl, 0)
    argv = list(cmd.argv)
    i = argv.index(flags[0])
    assert argv[i : i + len(flags)] == flags
    assert "--tensor-parallel-size" not in argv
    if engine == "trtllm":
        assert any("enable_attention_dp: true" in n for n in cmd.notes)


def test_serving_reads_a_sequence_once_and_the_dense_weights_on_every_replica():
    m, q, hw, wl = _sized("deepseek-r1", "sglang", "FP8-BLOCK")
    load = serving.ServingLoad(64, 1024, 1024, serving.SERVE)
    tp = serving.serving_features(m, q, hw, wl, load)
    dp = serving.serving_features(m, q, hw, replace(wl, split="dp"), load)
    assert (tp.replicas, dp.replicas) == (1.0, 8.0)
    assert tp.kv_bytes_per_seq == pytest.approx(8 * dp.kv_bytes_per_seq)  # the latent read on all 8 devices


def test_the_report_names_attention_data_parallelism_when_it_makes_the_model_fit():
    req = ReportRequest("deepseek-r1", H200, engine="sglang", devices=8, concurrency=128)
    d = report_to_dict(make_report(req))
    mem = d["memory"]
    assert mem["verdict"] == "does not fit"
    dp = report_to_dict(make_report(replace(req, split="dp")))["memory"]
    assert dp["verdict"] == "fits" and dp["attention_dp_total_bytes"] is None  # already dp
    assert mem["attention_dp_total_bytes"] == dp["total_bytes"]
    assert mem["attention_dp_max_concurrency"] == dp["max_concurrency"]
    assert dp["max_concurrency"] % 8 == 0 and dp["max_concurrency"] >= 128
    line = next(x for x in speed_lines(d) if x.startswith("With --split dp it fits"))
    assert "--tp-size 8 --dp-size 8 --enable-dp-attention" in line
    assert f"up to {dp['max_concurrency']:,} sequences of 8,192 tokens" in line
    # a configuration that fits gets no such line
    fits = report_to_dict(make_report(replace(req, concurrency=8)))
    assert fits["memory"]["verdict"] == "fits" and fits["memory"]["attention_dp_total_bytes"] is None
    assert not any(x.startswith("With --split dp") for x in speed_lines(fits))


def test_predict_takes_dp_where_the_engine_has_it():
    from estimator.app.predict import predict_one
    from estimator.physics.coefficients import load_coefficients

    table = load_coefficients()
    row = {"model": "qwen3-30b-a3b", "hardware": "h100-80gb-sxm", "engine": "vllm", "quant": "BF16",
           "n_prompt": "512", "n_gen": "128", "split": "dp", "n_devices": "2"}  # fmt: skip
    out = predict_one(row, table)
    assert out["error"] == "" and out["fits"] == "true"
    m, q = resolve_model("qwen3-30b-a3b"), get_quant("BF16")
    wb = weight_breakdown(m, get_engine("vllm").weight_format(q))
    assert int(out["weights_bytes"]) == 2 * int(wb.total_bytes - wb.routed_expert_bytes / 2)
    with pytest.raises(SpecError, match="llama.cpp has no attention data parallelism"):
        predict_one({**row, "engine": "llama.cpp", "quant": "Q4_K_M"}, table)


def test_vllm_schedules_per_rank_and_sglang_per_instance():
    """vLLM runs one EngineCore, with its own scheduler on the whole config, per data-parallel rank: an
    instance of 8 ranks holds 8 x max_num_batched_tokens and 8 x max_num_seqs per step and pads each rank's
    share to a captured size.  SGLang's dp attention keeps one budget for the instance (not per rank)."""
    load = serving.ServingLoad(64, 1024, 1024)
    for engine, ranked in (("vllm", True), ("sglang", False)):
        m, q, hw, wl = _sized("deepseek-r1", engine, "FP8-BLOCK")
        rank = get_engine(engine).scheduler(hw, wl)
        tp = serving.serving_features(m, q, hw, replace(wl, split="tp"), load)
        dp = serving.serving_features(m, q, hw, replace(wl, split="dp"), load)
        k = 8 if ranked else 1
        assert tp.max_batched_tokens == rank.max_batched_tokens
        assert dp.max_batched_tokens == k * rank.max_batched_tokens
        assert dp.max_seqs == k * rank.max_seqs
        assert dp.graph_sizes == tuple(k * g for g in rank.graph_sizes)
