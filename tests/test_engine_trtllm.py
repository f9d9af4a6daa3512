"""TensorRT-LLM, the fourth engine profile: its KV pool from the memory left free (trtllm-serve's
--kv_cache_free_gpu_memory_fraction), paged 32-token blocks, GUARANTEED_NO_EVICT admission, support facts,
launch command, and serving records that are checked out of sample rather than fitted."""

import dataclasses
import math

import pytest

from estimator.catalog.data import get_hardware, get_model
from estimator.engines import ENGINES, engines_for, engines_with_kv, get_engine
from estimator.physics import serving as sv
from estimator.physics import support
from estimator.physics.coefficients import prior_table
from estimator.physics.matrix import build_matrix
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report
from estimator.specs import GIB, SpecError, Workload

TRT = get_engine("trtllm")
H100 = get_hardware("h100-80gb-sxm")


def _wl(**kw) -> Workload:
    base = {"n_ctx": 8192, "engine": "trtllm", "gpu_memory_utilization": TRT.memory_fraction, "split": "tp"}
    return Workload(**{**base, **kw})


def test_registered_and_loads_checkpoint_formats_only():
    assert "trtllm" in ENGINES and TRT.label == "TensorRT-LLM"
    assert "trtllm" in engines_for(get_quant("NVFP4")) and "trtllm" not in engines_for(get_quant("Q4_K_M"))
    assert "trtllm" in engines_with_kv("fp8") and "trtllm" not in engines_with_kv("q8_0")
    with pytest.raises(SpecError, match="TensorRT-LLM has no q8_0 KV cache"):
        TRT.check(_wl(kv_dtype="q8_0"))
    with pytest.raises(SpecError, match="TensorRT-LLM has no host-memory weight offload"):
        TRT.check(_wl(offload_bytes=8 * GIB))
    get_engine("vllm").check(_wl(engine="vllm", offload_bytes=8 * GIB))  # vLLM has --cpu-offload-gb


def test_paged_blocks_of_32_tokens_and_windowed_layers_hold_window_plus_a_block():
    llama = get_model("llama-3.1-8b")
    assert TRT.kv_cells(llama, 1000, 3, 512) == (3 * 1024, 3 * 1024)  # ceil(1000 / 32) = 32 blocks
    gemma = get_model("gemma-3-27b")
    full, windowed = TRT.kv_cells(gemma, 8192, 2, 512)
    assert full == 16384 and windowed == 2 * (gemma.window + 32)


def test_the_kv_pool_is_a_fraction_of_the_memory_left_after_weights_and_buffers():
    """TensorRT-LLM gives the KV cache 0.9 x (M - fixed); vLLM's 0.9 is of the whole device, so the same
    fraction leaves TensorRT-LLM the larger pool by 0.1 x fixed."""
    m, q = get_model("qwen3-8b"), get_quant("BF16")
    trt = estimate_memory(m, q, H100, _wl(), prior_table().memory_for("trtllm"))
    dev = trt.per_device[0]
    fixed = dev.weights_bytes + dev.runtime_bytes + dev.overhead_bytes
    assert dev.usable_bytes == pytest.approx(fixed + 0.9 * (H100.memory_bytes - fixed), abs=1)
    per_token = dev.kv_bytes / 8192
    assert trt.kv_capacity_tokens == pytest.approx(0.9 * (H100.memory_bytes - fixed) / per_token, rel=1e-6)
    vllm = estimate_memory(m, q, H100, _wl(engine="vllm"), prior_table().memory_for("vllm"))
    assert vllm.per_device[0].usable_bytes == int(0.9 * H100.memory_bytes)
    assert trt.kv_capacity_tokens > vllm.kv_capacity_tokens and trt.verdict == vllm.verdict == "fits"


@pytest.mark.parametrize("ctx", [8192, 65536, 131072, 262144])
def test_the_quant_matrix_judges_fit_as_the_memory_estimate_does(ctx):
    """The vectorised matrix applies the same free-memory rule (physics.matrix), context by context.  At 64K
    tokens the two rules disagree: 4 sequences fit 0.9 x (M - fixed) but not vLLM's 0.9 x M - fixed."""
    m, q = get_model("llama-3.1-70b"), get_quant("FP8")
    wl = _wl(n_ctx=ctx, n_devices=2, n_seq=4)
    mem = estimate_memory(m, q, H100, wl, prior_table().memory_for("trtllm"))
    mat = build_matrix([m], [H100], [q], (ctx,), prior_table(), wl)
    assert bool(mat.fits[0, 0, 0, 0]) == (mem.verdict == "fits")


def test_a_request_is_admitted_with_its_whole_output_reserved():
    """GUARANTEED_NO_EVICT: a running request holds isl + osl tokens of the pool, where vLLM's grows to
    isl + osl / 2 on average; a pool of 100,000 tokens at 2,000 + 2,000 holds 25 against 33 requests."""
    m, q = get_model("llama-3.1-8b"), get_quant("BF16")
    load = sv.ServingLoad(64, 2000, 2000)
    trt = sv.serving_features(m, q, H100, _wl(), load, kv_capacity_tokens=100_000)
    vllm = sv.serving_features(m, q, H100, _wl(engine="vllm"), load, kv_capacity_tokens=100_000)
    assert trt.kv_output_share == 1.0 and vllm.kv_output_share == 0.5
    assert sv._running(trt)[0] == 25 and sv._running(vllm)[0] == 33
    sched = TRT.scheduler(H100, _wl())
    assert (sched.max_batched_tokens, sched.max_seqs, sched.mixes_prefill, sched.graph_sizes) == (
        8192, 2048, True, ())


def test_launch_command_reproduces_the_sized_configuration():
    m = get_model("llama-3.1-70b")
    wl = _wl(n_devices=4, concurrency=32, kv_dtype="fp8")
    cmd = TRT.launch(m, get_quant("NVFP4"), wl, 0)
    argv = list(cmd.argv)
    assert argv[:4] == ["trtllm-serve", f"<NVFP4 checkpoint of {m.hf_id}>", "--backend", "pytorch"]
    assert argv[argv.index("--tp_size") + 1] == "4" and argv[argv.index("--max_batch_size") + 1] == "32"
    assert argv[argv.index("--kv_cache_free_gpu_memory_fraction") + 1] == "0.9"
    assert argv[argv.index("--max_seq_len") + 1] == "8192"
    assert argv[argv.index("--extra_llm_api_options") + 1] == "trtllm-options.yaml" and cmd.exact
    assert any("--qformat nvfp4" in n for n in cmd.notes) and any("dtype: fp8" in n for n in cmd.notes)
    bf16 = TRT.launch(m, get_quant("BF16"), _wl(kv_dtype="bf16"), 0)
    assert bf16.argv[1] == m.hf_id and "--extra_llm_api_options" not in bf16.argv


@pytest.mark.parametrize(
    "hw, quant, status",
    [
        ("h100-80gb-sxm", "BF16", support.NATIVE),
        ("h100-80gb-sxm", "FP8", support.NATIVE),
        ("h100-80gb-sxm", "NVFP4", support.UNSUPPORTED),  # FP4 needs Blackwell
        ("b200", "NVFP4", support.NATIVE),
        ("a100-80gb-sxm", "FP8", support.UNSUPPORTED),  # FP8 needs Ada or later
        ("a100-80gb-sxm", "AWQ-INT4", support.NATIVE),
        ("mi300x", "BF16", support.UNSUPPORTED),  # NVIDIA GPUs only
        ("rtx-2080-ti", "BF16", support.UNSUPPORTED),  # Turing: not a supported architecture
    ],
)
def test_support_facts(hw, quant, status):
    m = get_model("llama-3.1-8b")
    assert support.judge(m, get_quant(quant), get_hardware(hw), _wl()).status == status


def test_report_prints_its_command_only_where_it_runs():
    d = report_to_dict(make_report(ReportRequest("qwen3-8b", "rtx-4090"), prior_table()))  # llama.cpp Q4_K_M
    trt = next(c for c in d["launch"] if c["engine"] == "trtllm")
    assert trt["argv"] == [] and trt["notes"][0].startswith("no command")
    d = report_to_dict(make_report(ReportRequest("qwen3-8b", "h100-80gb-sxm", engine="trtllm", concurrency=8),
                                   prior_table()))
    assert d["workload"]["engine"] == "trtllm" and d["workload"]["gpu_memory_utilization"] == 0.9
    cmd = next(c for c in d["launch"] if c["engine"] == "trtllm")
    assert cmd["exact"] and cmd["argv"][0] == "trtllm-serve"
    assert d["speed"]["decode"]["tok_s"] > 0 and not d["speed"]["calibrated"]


def test_its_serving_records_are_left_out_of_the_fit_with_the_profiles_reason():
    from calibration import serving
    from calibration.dataset import LoadedRecord, build_dataset
    from tests.calibration_gen import generate_serving
    from tests.test_calibration_serving import BASE

    assert serving.ENGINES == ("vllm", "sglang") and not TRT.fits_serving
    one = {"models": (("llama-3.1-8b", "BF16"),), "concurrencies": (4,), "lengths": ((1024, 128),)}
    (rec,) = generate_serving({"b200": "nvidia-blackwell"}, {"nvidia-blackwell": BASE}, **one)
    trt = dataclasses.replace(rec, record_id="trt", engine="trtllm", engine_version="1.2.0rc6")
    ds = build_dataset([LoadedRecord(trt, "gen", 0)])
    points, rejected = serving.serving_points(ds)
    assert points == [] and rejected[0].reason == f"serving: {TRT.serving_not_fitted}"
    checked, _ = serving.serving_points(ds, engines=("trtllm",))  # what tools/engine_check.py predicts
    assert {p.engine for p in checked} == {"trtllm"} and len(checked) == 2


def test_the_engine_check_tool_predicts_its_records_out_of_sample(capsys):
    """tools/engine_check.py (the docs' figures): the shipped fit's pooled terms on TensorRT-LLM's records,
    per metric and device, with the share inside the report's interval."""
    from tests.tool_module import load_tool

    tool = load_tool("engine_check")
    assert tool.main([]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    keys = {(r[0].strip("| "), r[1]) for r in rows}
    assert ("tpot", "all") in keys and ("ttft", "h100-80gb-sxm") in keys
    assert all(r[3].endswith("%") and r[5].strip(" |").endswith("%") for r in rows)
    with pytest.raises(SystemExit):
        tool.main(["--engine", "vllm"])  # a fitted engine is not out of sample


def test_gib_units_of_the_pool():
    """The pool of a 70B FP8 model on 4 x H100 is tens of GiB per device (a sanity bound on the units)."""
    m = get_model("llama-3.1-70b")
    mem = estimate_memory(m, get_quant("FP8"), H100, _wl(n_devices=4), prior_table().memory_for("trtllm"))
    pool = mem.kv_capacity_tokens * mem.per_device[0].kv_bytes / 8192 / GIB
    assert 40 < pool < 80 and math.isfinite(pool)


def test_a_hybrids_state_slots_come_out_of_the_kv_budget():
    """TensorRT-LLM's default hybrid managers keep one state slot per request of --max_batch_size x pp, one
    CUDA-graph padding slot and one more under attention data parallelism, out of the KV budget: exactly
    that many for Nemotron-H (the legacy C++ manager), at least that many for Qwen3-Next, whose V2 manager
    splits the pool by a typical step of max_batch_size requests of max_seq_len / 2 tokens.  The state is
    bf16 unless the config names mamba_ssm_cache_dtype (Nemotron-H: float32; Qwen3.5's mamba_ssm_dtype is not
    read)."""
    from estimator.engines.base import StateDemand
    from estimator.physics.kv import layer_token_bytes, state_bytes_per_seq
    from estimator.specs import FULL

    nxt, q35 = get_model("qwen3-next-80b-a3b"), get_model("qwen3.5-35b-a3b")
    nemo = get_model("nemotron-3-super-120b-a12b")
    assert [TRT.state_recurrent_bytes(m) for m in (nxt, q35, nemo)] == [2, 2, 4]
    state = sum(state_bytes_per_seq(nxt, "trtllm").values())
    assert state == 36 * (524_288 * 2 + 24_576 * 2)  # 37.7 MiB per request, bf16
    # the legacy manager's count (no model class, or one that keeps it): exactly R slots
    pool = 30 * GIB
    legacy = StateDemand(state, _wl(concurrency=64), model=nemo)
    assert TRT.state_pool(pool, legacy) == (pool - 65 * state, 64)
    dp, pp = _wl(concurrency=64, split="dp", n_devices=2), _wl(concurrency=8, split="pp", n_devices=2)
    assert TRT.state_pool(pool, StateDemand(state, dp))[0] == pool - 66 * state
    assert TRT.state_pool(pool, StateDemand(state, pp))[0] == pool - 17 * state
    assert TRT.state_pool(pool, StateDemand(0, _wl())) is None
    # V2 (Qwen3-Next): the state's share of a typical step of 64 requests of 16,384 tokens, here more than
    # the 65 slots it needs at least
    per_token = layer_token_bytes(nxt, "f16", "trtllm")[FULL] // 2  # 2 KV heads, one per device
    wl = _wl(n_ctx=32768, n_devices=2, concurrency=64)
    w_state, w_attn = 65 * (state // 2), 64 * 16384 * per_token
    share = int(pool * w_state / (w_state + w_attn)) // (state // 2)
    assert share > 65
    got = TRT.state_pool(pool, StateDemand(state // 2, wl, per_token, nxt))
    assert got == (pool - share * (state // 2), 64)
    # a pool smaller than the typical step's total keeps the minimum
    small = 2 * GIB
    left_small, _ = TRT.state_pool(small, StateDemand(state // 2, wl, per_token, nxt))
    assert left_small == small - 65 * (state // 2)
    # Qwen3-Next FP8 on two H100s at 32K, --max_batch_size 64: the memory estimate takes that split
    mem = estimate_memory(nxt, get_quant("FP8"), H100, wl)
    d = mem.per_device[0]
    budget = d.usable_bytes - d.weights_bytes - d.runtime_bytes - d.overhead_bytes
    left, running = TRT.state_pool(int(budget), StateDemand(state // 2, wl, per_token, nxt))
    assert mem.kv_capacity_tokens == left // per_token and running == 64
    assert left < budget - 65 * (state // 2)
    assert mem.max_concurrency == min(mem.kv_capacity_tokens // 32768, 64) == 64
    assert mem.state_max_requests == 64
    # trtllm-serve's own default of 2,048 requests: 2,049 states (75 GiB on one GPU) overflow the pool
    big = estimate_memory(nxt, get_quant("FP8"), H100, _wl(n_ctx=1024, n_devices=2, concurrency=2048))
    assert big.kv_capacity_tokens == 0 and big.verdict == "does not fit"
