"""vLLM's startup KV figures ("KV cache size: N tokens", "Maximum concurrency for L tokens per request: X"):
``VLLM.startup_kv`` on ``physics.kv.cache_layers`` against what vLLM 0.32.0 itself reported in our runner's
records (results/runs: the pool set with ``kv_cache_memory_bytes``, the proxy depth of each record), and the
rules that make a sliding-window model's startup concurrency an admission bound below the steady state."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from estimator.catalog.data import get_hardware, get_model
from estimator.engines import get_engine
from estimator.engines.base import CacheLayer
from estimator.physics.kv import cache_layers, state_bytes_per_seq
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.report.document import report_to_dict, to_text
from estimator.report.request import ReportRequest, make_report
from estimator.specs import FULL, LINEAR, SLIDING, Workload
from harness.synth import proxy_spec

ROOT = Path(__file__).resolve().parents[1]
VLLM = get_engine("vllm")
CPU = get_hardware("epyc-9654")
H100 = get_hardware("h100-80gb-sxm")


def _vllm_records() -> list[dict]:
    """Our runner's vLLM records that carry vLLM's own startup figures, one per configuration."""
    out, seen = [], set()
    for path in sorted((ROOT / "results" / "runs").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            e = r.get("extra") or {}
            if r.get("engine") != "vllm" or e.get("kv_cache_max_concurrency") is None:
                continue
            pool = e["kv_cache_memory_bytes_requested"]
            key = (
                r["model_id"],
                r["n_layers_measured"],
                e["max_model_len"],
                pool,
                e.get("enable_prefix_caching"),
            )
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


RECORDS = _vllm_records()


def test_the_records_cover_full_sliding_window_and_hybrid_models():
    models = {r["model_id"] for r in RECORDS}
    assert {"gemma-3-1b", "gemma-4-26b-a4b", "smollm2-360m", "qwen3-0.6b", "qwen3-next-80b-a3b"} <= models


@pytest.mark.parametrize(
    "rec",
    RECORDS,
    ids=lambda r: (
        f"{r['model_id']}@{r['n_layers_measured']}-{r['extra']['max_model_len']}"
        + ("-prefix" if r["extra"].get("enable_prefix_caching") else "")
    ),
)
def test_reproduces_what_vllm_logged(rec):
    """The runner starts vLLM with the prefix cache off (runners/vllm.py ``enable_prefix_caching=False``,
    recorded since 2026-12-04 as ``extra.enable_prefix_caching``): a hybrid's state groups take one block per
    request."""
    e = rec["extra"]
    model = proxy_spec(get_model(rec["model_id"]), rec["n_layers_measured"])
    length = e["max_model_len"]
    layers = cache_layers(model, "bf16", "vllm", 1)
    got = VLLM.startup_kv(
        layers,
        length,
        e["kv_cache_memory_bytes_requested"],
        CPU,
        Workload(engine="vllm"),
        prefix_caching=bool(e.get("enable_prefix_caching", False)),
    )
    assert got is not None
    assert got.block_tokens == e["block_size"]
    assert got.num_blocks == e["num_gpu_blocks"]
    assert got.kv_cache_tokens == e["kv_cache_size_tokens"]
    assert got.max_concurrency == pytest.approx(e["kv_cache_max_concurrency"], rel=1e-12)


def test_gemma3_proxy_blocks_per_request():
    """Gemma-3-1B's 6-layer proxy (5 sliding layers of window 512, 1 full), 2,048-token requests on the CPU
    build (2,048-token budget, two batches in flight): the full layer 16 blocks of 128, each sliding layer
    ceil(min(511 + 4,096, 2,048) / 128) + 1 = 17: 101 per request, where the window alone would hold 5."""
    model = proxy_spec(get_model("gemma-3-1b"), 6)
    got = VLLM.startup_kv(cache_layers(model, "bf16", "vllm", 1), 2048, 2**28, CPU, Workload(engine="vllm"))
    assert got.blocks_per_request == 16 + 5 * 17


def test_full_attention_agrees_with_the_steady_state_capacity():
    """One attention kind: vLLM's figures are the pool over a request's blocks, the estimator's capacity up
    to whole-block rounding."""
    wl = Workload(engine="vllm", n_ctx=8192)
    mem = estimate_memory(get_model("llama-3.1-8b"), get_quant("BF16"), H100, wl)
    s = mem.startup_kv
    assert s is not None and s.block_tokens == 16
    assert s.kv_cache_tokens == pytest.approx(mem.kv_capacity_tokens, rel=1e-3)
    assert int(s.max_concurrency) == mem.max_concurrency


def test_sliding_layers_count_the_in_flight_prefill_on_a_gpu():
    """gpt-oss-120b (18 sliding layers of window 128 and 18 full, alternating) at 8K on an H100: one group of
    each (18 layers, within 1.5x of each other); 2 x 8,192 prompt tokens in flight cover the whole request,
    so the sliding group takes 8,192 / 16 + 1 = 513 blocks next to the full group's 512, and the startup
    concurrency is about half the steady state's (whose sliding layers hold their 128-token window)."""
    model = get_model("gpt-oss-120b")
    layers = cache_layers(model, "bf16", "vllm", 1)
    assert sum(x.kind == SLIDING for x in layers) == sum(x.kind == FULL for x in layers) == 18
    mem = estimate_memory(model, get_quant("MXFP4"), H100, Workload(engine="vllm", n_ctx=8192))
    assert mem.startup_kv.blocks_per_request == 512 + 513
    assert mem.startup_kv.max_concurrency < 0.6 * mem.max_concurrency


def test_tensor_parallel_splits_kv_heads_and_replicates_an_mla_latent():
    llama = get_model("llama-3.1-70b")  # 8 KV heads
    one = cache_layers(llama, "bf16", "vllm", 1)[0].token_bytes
    assert cache_layers(llama, "bf16", "vllm", 4)[0].token_bytes == one // 4
    assert cache_layers(llama, "bf16", "vllm", 16)[0].token_bytes == one // 8  # one head per rank
    ds = get_model("deepseek-v3")
    assert cache_layers(ds, "bf16", "vllm", 8)[0] == cache_layers(ds, "bf16", "vllm", 1)[0]
    assert cache_layers(ds, "bf16", "vllm", 1)[0].latent


def test_a_hybrid_raises_the_attention_block_to_hold_a_state():
    """Qwen3-Next: a full layer's token is 2 KV heads x 256 x (K + V) x 2 B = 2,048 B; a Gated DeltaNet
    layer's state in vLLM's bf16 is 32 x 128 x 128 x 2 + 8,192 conv channels x 3 x 2 = 1,097,728 B.  The
    attention block becomes 16 x ceil(1,097,728 / (16 x 2,048)) = 544 tokens on a GPU (the size
    vllm-project/vllm PR 32492 names for Qwen3-Next) and 128 x 5 = 640 on the CPU backend (what vLLM logged
    in our run), and the state is padded to that page."""
    layers = cache_layers(get_model("qwen3-next-80b-a3b"), "bf16", "vllm", 1)
    assert {x.state_bytes for x in layers if x.kind == LINEAR} == {1_097_728}
    wl = Workload(engine="vllm", n_ctx=32768)
    gpu = VLLM.startup_kv(layers, 32768, 40 * 2**30, H100, wl, prefix_caching=False)
    assert gpu.block_tokens == 544
    # 36 linear + 12 full layers: groups of 12, a block 12 pages of 544 x 2,048 B
    assert gpu.num_blocks == 40 * 2**30 // (12 * 544 * 2048)
    assert gpu.blocks_per_request == -(-32768 // 544) + 3  # the full group's blocks, one per state group
    assert VLLM.startup_kv(layers, 32768, 40 * 2**30, CPU, wl, prefix_caching=False).block_tokens == 640
    # the prefix cache ("align" mode) keeps two state blocks per group and request
    on = VLLM.startup_kv(layers, 32768, 40 * 2**30, H100, wl)
    assert on.blocks_per_request == gpu.blocks_per_request + 3 and on.num_blocks == gpu.num_blocks


def test_mamba2_layers_keep_a_prefill_checkpoint_with_the_prefix_cache():
    """Nemotron-3-Super: 40 Mamba2 layers (float32 SSM state, its config's mamba_ssm_cache_dtype), 8 attention
    layers and 40 MLP-only layers that keep no cache.  Groups of 8: five state groups and one attention group;
    with the prefix cache a Mamba2 group holds 3 blocks per request (mamba_mixer2.py exports a prefill
    checkpoint), a Gated DeltaNet group 2."""
    model = get_model("nemotron-3-super-120b-a12b")
    layers = cache_layers(model, "bf16", "vllm", 1)
    wl = Workload(engine="vllm", n_ctx=32768)
    off = VLLM.startup_kv(layers, 32768, 100 * 2**30, H100, wl, prefix_caching=False)
    on = VLLM.startup_kv(layers, 32768, 100 * 2**30, H100, wl)
    assert off.blocks_per_request == -(-32768 // off.block_tokens) + 5
    assert on.blocks_per_request == off.blocks_per_request + 5 * 2


def test_the_recurrent_state_dtype_is_the_engines():
    """vLLM keeps the recurrent state in the model dtype unless the config names float32 (Qwen3.5's
    ``mamba_ssm_dtype``); llama.cpp and SGLang keep it in F32."""
    nxt, q35 = get_model("qwen3-next-80b-a3b"), get_model("qwen3.5-35b-a3b")
    assert q35.state.ssm_dtype == "float32" and nxt.state.ssm_dtype == ""
    assert get_engine("vllm").state_recurrent_bytes(nxt) == 2
    assert get_engine("vllm").state_recurrent_bytes(q35) == 4
    for engine in ("llama.cpp", "sglang"):
        assert get_engine(engine).state_recurrent_bytes(nxt) == 4
    # 32 value heads x 128 x 128 recurrent elements, 8,192 x 3 conv elements, per layer
    assert state_bytes_per_seq(nxt, "vllm")[LINEAR] == 36 * (524_288 * 2 + 24_576 * 2)
    assert state_bytes_per_seq(q35, "vllm")[LINEAR] == 30 * (524_288 * 4 + 24_576 * 2)
    assert state_bytes_per_seq(nxt, "llama.cpp")[LINEAR] == 36 * (524_288 * 4 + 24_576 * 4)


def test_a_hybrid_steady_state_is_its_block_managers():
    """Without windowed layers a running request of n_ctx tokens holds what it was admitted with."""
    mem = estimate_memory(
        get_model("qwen3-next-80b-a3b"),
        get_quant("FP8"),
        get_hardware("h200-141gb-sxm"),
        Workload(engine="vllm", n_ctx=32768),
    )
    s = mem.startup_kv
    assert s is not None and s.block_tokens == 544
    assert mem.max_concurrency == int(s.max_concurrency) and mem.kv_capacity_tokens == s.kv_cache_tokens


def test_what_it_does_not_model_gives_none():
    wl = Workload(engine="vllm", n_ctx=8192)
    dsa = cache_layers(get_model("deepseek-v3.2"), "bf16", "vllm", 1)
    assert any(x.kind == "indexer" for x in dsa)
    assert VLLM.startup_kv(dsa, 8192, 2**34, H100, wl) is None  # the indexer's own cache group
    full = (CacheLayer(FULL, 1024),) * 4
    assert VLLM.startup_kv(full, 8192, 2**34, H100, replace(wl, split="pp", n_devices=2)) is None
    assert get_engine("llama.cpp").startup_kv(full, 8192, 2**34, H100, wl) is None


def test_the_report_states_the_startup_figures_and_why_they_are_lower():
    d = report_to_dict(
        make_report(ReportRequest(model="gemma-3-27b", hardware="h100-sxm", engine="vllm", ctx=32768))
    )
    mem = d["memory"]
    assert 0 < mem["startup_max_concurrency"] < mem["max_concurrency"]
    # tokens = int(concurrency x 32,768); the JSON rounds the concurrency to 2 decimals
    assert abs(mem["startup_kv_tokens"] - mem["startup_max_concurrency"] * 32768) <= 0.005 * 32768
    text = " ".join(to_text(d).split())
    assert "vLLM's startup log: KV cache size" in text
    assert "running requests hold only their windows" in text


def test_each_data_parallel_rank_holds_a_hybrids_blocks():
    """Under --split dp every rank has its own pool and block manager with the whole state of its requests:
    the capacity is the ranks' sum of the block manager's figure, and no single startup figure is given."""
    model, hw = get_model("qwen3-next-80b-a3b"), H100
    wl = Workload(engine="vllm", n_ctx=32768, n_devices=4, split="dp")
    mem = estimate_memory(model, get_quant("FP8"), hw, wl)
    assert mem.startup_kv is None
    d = mem.per_device[0]
    budget = d.usable_bytes - d.weights_bytes - d.runtime_bytes - d.overhead_bytes
    rank = VLLM.startup_kv(cache_layers(model, "bf16", "vllm", 1), 32768, budget, hw, wl)
    assert mem.max_concurrency == 4 * int(rank.max_concurrency)
    assert mem.kv_capacity_tokens == 4 * rank.kv_cache_tokens
