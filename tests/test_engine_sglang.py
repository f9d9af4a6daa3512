"""SGLang, the third engine profile: sized end to end (memory reservation, token-level KV pool with the hybrid
sliding-window pool, launch command, request checks) with speed from the prior until calibrated."""

import dataclasses
import math

import pytest

from estimator.catalog.data import get_hardware, get_model
from estimator.engines import ENGINES, engines_for, engines_with_kv, get_engine
from estimator.physics.coefficients import prior_table
from estimator.physics.kv import kv_cache
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.report.document import report_to_dict, to_text
from estimator.report.request import ReportRequest, make_report
from estimator.specs import GIB, SpecError, Workload

SG = get_engine("sglang")


def test_registered_and_runs_checkpoint_formats_only():
    assert "sglang" in ENGINES
    assert "sglang" in engines_for(get_quant("FP8")) and "sglang" not in engines_for(get_quant("Q4_K_M"))
    assert "sglang" in engines_with_kv("fp8") and "sglang" not in engines_with_kv("q8_0")


def test_token_pool_and_hybrid_swa_ratio():
    full = get_model("llama-3.1-8b")
    kv = kv_cache(full, 1000, "f16", 3, "sglang")
    assert kv.n_cells == 3000  # page size 1: no padding
    gemma = get_model("gemma-3-27b")
    cells, swa = SG.kv_cells(gemma, 8192, 2, 512)
    assert cells == 16384 and swa == math.ceil(0.8 * 16384)
    assert SG.kv_cells(gemma, 8192, 2, 512, swa_full=True) == (16384, 16384)


def test_the_pool_capacity_counts_the_hybrid_swa_ratio():
    """The pool's capacity in tokens is of full-layer tokens, each with 0.8 of a token in every sliding
    layer (SGLang's hybrid SWA pool, as its cache is sized): the KV budget over the KV bytes of one sequence
    per token of context.  Counting the sliding layers at their window share had put Gemma 3 27B's capacity
    3x too high next to its own cache size."""
    m, hw = get_model("gemma-3-27b"), get_hardware("h200-141gb-sxm")
    wl = Workload(n_ctx=8192, engine="sglang", gpu_memory_utilization=SG.memory_fraction)
    mem = estimate_memory(m, get_quant("BF16"), hw, wl, prior_table().memory_for("sglang"))
    per_token = kv_cache(m, 8192, "f16", 1, "sglang").total_bytes / 8192
    budget = mem.usable_bytes - (mem.total_bytes - mem.kv_bytes)  # what the reservation leaves the pool
    assert mem.kv_capacity_tokens == int(budget // per_token)
    assert mem.max_concurrency == mem.kv_capacity_tokens // 8192


def test_reserves_its_own_fraction_and_reports_capacity():
    m, hw = get_model("qwen3-8b"), get_hardware("h100-80gb-sxm")
    wl = Workload(n_ctx=8192, engine="sglang", gpu_memory_utilization=SG.memory_fraction)
    mem = estimate_memory(m, get_quant("BF16"), hw, wl, prior_table().memory_for("sglang"))
    assert mem.usable_bytes == int(0.88 * hw.memory_bytes)
    assert mem.kv_capacity_tokens and mem.kv_capacity_tokens > 8192 and mem.verdict == "fits"


def test_report_end_to_end_with_prior_speed_and_its_own_command():
    req = ReportRequest("qwen3-32b", "h200-141gb-sxm", engine="sglang", concurrency=8)
    d = report_to_dict(make_report(req, prior_table()))
    assert d["workload"]["engine"] == "sglang" and d["workload"]["gpu_memory_utilization"] == 0.88
    assert d["quant"] == "BF16" and d["speed"]["decode"]["tok_s"] > 0 and not d["speed"]["calibrated"]
    cmd = next(c for c in d["launch"] if c["engine"] == "sglang")
    argv = cmd["argv"]
    assert cmd["exact"] and argv[:3] == ["python", "-m", "sglang.launch_server"]
    assert argv[argv.index("--max-running-requests") + 1] == "8"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.88"
    assert any("uncalibrated" in w or "pooled prior" in w for w in d["warnings"])


def test_other_engines_commands_use_their_own_fraction():
    d = report_to_dict(make_report(ReportRequest("qwen3-8b", "rtx-4090"), prior_table()))
    sg = next(c for c in d["launch"] if c["engine"] == "sglang")
    assert not sg["exact"] and sg["argv"][sg["argv"].index("--mem-fraction-static") + 1] == "0.88"


def test_refuses_what_sglang_cannot_run():
    with pytest.raises(SpecError, match="SGLang has no q8_0 KV cache"):
        make_report(ReportRequest("qwen3-8b", "h100-80gb-sxm", engine="sglang", kv_dtype="q8_0"))
    with pytest.raises(SpecError, match="--n-cpu-moe is a llama.cpp option; for SGLang"):
        make_report(ReportRequest("qwen3-30b-a3b", "h100-80gb-sxm", engine="sglang", n_cpu_moe=4))


def test_offload_maps_to_cpu_offload_gb():
    d = report_to_dict(
        make_report(ReportRequest("qwen3-32b", "rtx-4090", engine="sglang", offload_gib=40), prior_table())
    )
    argv = next(c for c in d["launch"] if c["engine"] == "sglang")["argv"]
    assert float(argv[argv.index("--cpu-offload-gb") + 1]) == pytest.approx(40 * GIB / GIB)


def test_a_hybrids_state_takes_its_own_pool():
    """SGLang sizes a recurrent hybrid's state pool first (model_runner_kv_cache_mixin.py
    ``handle_max_mamba_cache``): state memory / KV memory = --mamba-full-memory-ratio 0.9, so the state gets
    0.9 / 1.9 of the pool, the full-attention KV the rest, and with the radix cache on the running requests
    are capped at a third of the state slots.  Qwen3-Next FP8 on an H200 at 32K: the KV pool is about 1.9x
    smaller than the whole reservation would hold."""
    from estimator.engines.base import StateDemand
    from estimator.physics.kv import layer_token_bytes, state_bytes_per_seq
    from estimator.specs import FULL

    model = get_model("qwen3-next-80b-a3b")
    state = sum(state_bytes_per_seq(model, "sglang").values())
    assert state == 36 * (524_288 * 4 + 24_576 * 2)  # F32 recurrent, bf16 conv
    pool = 40 * 2**30
    wl = Workload(engine="sglang", n_ctx=32768)
    left, requests = SG.state_pool(pool, StateDemand(state, wl))
    slots = int(pool * 0.9 / 1.9) // state
    assert left == pool - slots * state and requests == slots // 3
    assert SG.state_pool(pool, StateDemand(0, wl)) is None
    mem = estimate_memory(model, get_quant("FP8"), get_hardware("h200-141gb-sxm"), wl)
    per_token = layer_token_bytes(model, "f16", "sglang")[FULL]
    d = mem.per_device[0]
    budget = d.usable_bytes - d.weights_bytes - d.runtime_bytes - d.overhead_bytes
    left, requests = SG.state_pool(int(budget), StateDemand(state, wl))
    assert mem.kv_capacity_tokens == left // per_token < budget // per_token / 1.8
    assert mem.max_concurrency == min(mem.kv_capacity_tokens // 32768, requests)


def test_the_state_pool_bounds_serving_concurrency():
    """The serving model runs at most the requests SGLang's state pool admits (max_seqs = min(the
    scheduler's, the pool's)); vLLM keeps the state in its KV pool and has no such bound."""
    from estimator.physics import serving as sv

    model, hw = get_model("qwen3-next-80b-a3b"), get_hardware("h100-80gb-sxm")
    table = prior_table()
    wl = Workload(engine="sglang", n_ctx=2048, n_devices=2)
    cap, state_cap = sv.pool_capacity(model, get_quant("FP8"), hw, wl, table)
    assert cap > 0 and 0 < state_cap < 4096
    load = sv.ServingLoad(4096, 1024, 1024)
    f = sv.serving_features(model, get_quant("FP8"), hw, wl, load, cap, state_max_requests=state_cap)
    assert f.max_seqs == min(sv.ranked_scheduler(SG, hw, wl, 1).max_seqs, state_cap)
    vllm = Workload(engine="vllm", n_ctx=2048)
    assert sv.pool_capacity(model, get_quant("FP8"), hw, vllm, table)[1] is None


def test_more_sequences_than_the_state_pool_admits_do_not_fit():
    """The bytes of 45 sequences fit the reservation, but SGLang's state pool admits fewer: the verdict says
    so and why (the report's warning names the engine's limit)."""
    model, hw, fp8 = get_model("qwen3-next-80b-a3b"), get_hardware("h200-141gb-sxm"), get_quant("FP8")
    ok = estimate_memory(model, fp8, hw, Workload(engine="sglang", n_ctx=32768, n_seq=30))
    assert ok.verdict == "fits" and ok.max_concurrency >= 30
    over = estimate_memory(model, fp8, hw, Workload(engine="sglang", n_ctx=32768, n_seq=45))
    assert over.total_bytes <= over.usable_bytes and over.max_concurrency < 45
    assert over.verdict == "does not fit" and over.min_offload_bytes == 0
    assert any("SGLang admits at most" in n and "a state pool of its own" in n for n in over.notes)
    req = ReportRequest(
        model=model.id, hardware=hw.id, engine="sglang", quant="FP8", ctx=32768, concurrency=45
    )
    d = report_to_dict(make_report(req))
    assert any("SGLang admits at most" in w for w in d["warnings"])
    mem = d["memory"]
    assert mem["state_max_requests"] > 0 and mem["max_concurrency"] <= mem["state_max_requests"]
    assert "keeps the recurrent state in a pool of its own" in " ".join(to_text(d).split())
    vllm = report_to_dict(make_report(dataclasses.replace(req, engine="vllm", concurrency=1)))
    assert vllm["memory"]["state_max_requests"] is None
