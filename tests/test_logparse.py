"""runners.logparse on real logs: vLLM CPU fixtures (../shared/reference/fixtures) and llama.cpp lines
captured
from llama-cpp-python 0.3.36 (llama.cpp@0c1e570) loading fitbench's synthetic models on this CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.logparse import (
    GIB,
    MIB,
    parse_kv_summaries,
    parse_llama_buffers,
    parse_llama_memory,
    parse_vllm_bench_latency,
    parse_vllm_log,
)

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "fixtures"

# Captured: tiny gemma3 (2 sliding + 2 full layers, window 128), n_ctx 1024, n_ubatch 128, swa_full=False,
# q8_0 KV.  Long lines are continued with a backslash (the string holds them whole).
GEMMA3_SWA_LOG = """\
load_tensors:   CPU_Mapped model buffer size =     6.52 MiB
llama_context: n_ctx                 = 1024
llama_context:        CPU  output buffer size =     0.00 MiB
llama_kv_cache_iswa: creating non-SWA KV cache, size = 1024 cells
llama_kv_cache: layer   0: filtered
llama_kv_cache: layer   1: dev = CPU
llama_kv_cache:        CPU KV buffer size =     0.53 MiB
llama_kv_cache: size =    0.53 MiB (  1024 cells,   2 layers,  1/1 seqs), \
K (q8_0):    0.27 MiB, V (q8_0):    0.27 MiB
llama_kv_cache_iswa: creating     SWA KV cache, size = 256 cells
llama_kv_cache:        CPU KV buffer size =     0.13 MiB
llama_kv_cache: size =    0.13 MiB (   256 cells,   2 layers,  1/1 seqs), \
K (q8_0):    0.07 MiB, V (q8_0):    0.07 MiB
sched_reserve:        CPU compute buffer size =     9.51 MiB
"""
# Captured: tiny deepseek2 (MLA, kv_lora_rank 128 + rope 32), n_ctx 512: V is a view of the latent K cache.
MLA_LOG = """\
load_tensors:   CPU_Mapped model buffer size =    14.33 MiB
llama_kv_cache:        CPU KV buffer size =     0.62 MiB
llama_kv_cache: size =    0.62 MiB (   512 cells,   4 layers,  1/1 seqs), \
K (f16):    0.62 MiB, V (f16):    0.00 MiB
sched_reserve:        CPU compute buffer size =    10.29 MiB
"""
# Older trees (format strings quoted in methods.md A4): other prefixes, model buffers without the
# word "model".
OLD_LOG = """\
llm_load_tensors: offloaded 33/33 layers to GPU
llm_load_tensors:        CPU buffer size =    70.31 MiB
llm_load_tensors:      CUDA0 buffer size =  3820.93 MiB
llama_kv_cache_init:      CUDA0 KV buffer size =   256.00 MiB
llama_new_context_with_model: KV self size  =  256.00 MiB, K (f16):  128.00 MiB, V (f16):  128.00 MiB
llama_new_context_with_model:  CUDA_Host  output buffer size =     0.49 MiB
llama_new_context_with_model:      CUDA0 compute buffer size =   164.01 MiB
llama_new_context_with_model:  CUDA_Host compute buffer size =    12.01 MiB
"""


def test_llama_swa_log_sums_both_caches_per_device():
    mem = parse_llama_memory(GEMMA3_SWA_LOG)
    assert mem.by_kind["KV"] == {"CPU": round(0.53 * MIB) + round(0.13 * MIB)}
    assert mem.total("model") == round(6.52 * MIB)
    assert mem.total("compute") == round(9.51 * MIB)
    assert mem.total("output") == 0
    assert mem.total("RS") is None
    assert mem.swa_cells == {"full": 1024, "swa": 256}
    assert mem.n_ctx == 1024
    kv = mem.kv_summaries
    assert [(s.cells, s.layers, s.type_k, s.type_v) for s in kv] == [
        (1024, 2, "q8_0", "q8_0"),
        (256, 2, "q8_0", "q8_0"),
    ]


def test_llama_mla_log_has_empty_v():
    (s,) = parse_kv_summaries(MLA_LOG)
    assert s.v_bytes == 0 and s.k_bytes == s.size_bytes == round(0.62 * MIB)
    assert parse_llama_memory(MLA_LOG).total("KV") == round(0.62 * MIB)


def test_llama_old_format_lines():
    bufs = parse_llama_buffers(OLD_LOG)
    kinds = [(b.kind, b.device) for b in bufs]
    assert kinds == [
        ("model", "CPU"),
        ("model", "CUDA0"),
        ("KV", "CUDA0"),
        ("output", "CUDA_Host"),
        ("compute", "CUDA0"),
        ("compute", "CUDA_Host"),
    ]
    mem = parse_llama_memory(OLD_LOG)
    assert mem.offloaded_layers == (33, 33)
    assert mem.total("compute") == round(164.01 * MIB) + round(12.01 * MIB)
    (s,) = mem.kv_summaries
    assert s.size_bytes == 256 * MIB and s.cells is None


# the memory-fit pass (no_alloc) on the tiny Qwen3-Next test model (harness.synth.tiny_model): 4 sequences,
# 3 Gated DeltaNet layers and one full-attention layer
HYBRID_LOG = """\
llama_kv_cache:        CPU KV buffer size =     0.00 MiB
llama_kv_cache: size =    4.00 MiB (  8192 cells,   1 layers,  4/1 seqs), K (f16):    2.00 MiB, \
V (f16):    2.00 MiB
llama_memory_recurrent, layer   0: dev = CPU
llama_memory_recurrent: layer   3: skipped
llama_memory_recurrent:        CPU RS buffer size =     0.82 MiB
llama_memory_recurrent: size =    0.82 MiB (     4 cells,   4 layers,  4 seqs  0 rs_seq), \
R (f32):    0.07 MiB, \
S (f32):    0.75 MiB, P (f32):    0.00 MiB
"""


def test_llama_recurrent_state_summary():
    mem = parse_llama_memory(HYBRID_LOG)
    (rs,) = mem.rs_summaries
    assert (rs.cells, rs.layers, rs.type_r, rs.type_s) == (4, 4, "f32", "f32")
    assert (rs.size_bytes, rs.r_bytes, rs.s_bytes) == (
        round(0.82 * MIB),
        round(0.07 * MIB),
        round(0.75 * MIB),
    )
    assert mem.total("RS") == round(0.82 * MIB) and mem.kv_summaries[0].cells == 8192
    assert parse_llama_memory(OLD_LOG).rs_summaries == ()


def test_llama_log_without_buffers():
    mem = parse_llama_memory("llama_model_loader: loaded meta data\n")
    assert mem.buffers == () and mem.total("KV") is None and mem.n_ctx is None


@pytest.mark.skipif(
    not (FIXTURES / "vllm-cpu-startup.log").exists(), reason="shared/reference fixtures absent"
)
def test_vllm_cpu_startup_fixture():
    out = parse_vllm_log((FIXTURES / "vllm-cpu-startup.log").read_text())
    assert out["engine_version"] == "0.32.0"
    assert out["kv_cache_tokens"] == 524_288 and out["kv_device"] == "CPU"
    assert out["max_concurrency"] == 512.0 and out["max_concurrency_len"] == 1024
    assert out["cpu_kv_bytes"] == GIB
    assert out["init_engine_s"] == 2.75
    assert out["model_init_s"] == pytest.approx(0.067928)
    # 1 GiB / 524,288 tokens = 2048 B/token = 4 layers x 2 x 2 kv-heads x 64 x 2 B (methods.md C4)
    assert out["cpu_kv_bytes"] // out["kv_cache_tokens"] == 4 * 2 * 2 * 64 * 2
    assert "weights_bytes" not in out  # the CPU worker does not print "Model loading took"


@pytest.mark.skipif(not (FIXTURES / "vllm-cpu-bench-latency.log").exists(), reason="fixtures absent")
def test_vllm_bench_latency_fixture():
    text = (FIXTURES / "vllm-cpu-bench-latency.log").read_text()
    lat = parse_vllm_bench_latency(text)
    assert lat["avg_latency_s"] == pytest.approx(0.031084923666639952)
    assert lat["percentiles_s"]["50"] == pytest.approx(0.03233304999992015)
    assert set(lat["percentiles_s"]) == {"10", "25", "50", "75", "90", "99"}
    start = parse_vllm_log(text)
    assert start["max_concurrency"] == 2048.0 and start["max_concurrency_len"] == 256


def test_vllm_gpu_lines():
    # Built from vLLM 0.32.0's format strings (methods.md C4); no GPU log is in the fixtures.
    text = (
        "(Worker pid=1) INFO [gpu_model_runner.py:1] "
        "Model loading took 14.99 GiB memory and 5.123456 seconds\n"
        "(Worker pid=1) INFO [gpu_worker.py:1] Available KV cache memory: 103.40 GiB\n"
        "(EngineCore pid=2) INFO [kv_cache_utils.py:1] GPU KV cache size: 1,505,984 tokens\n"
        "(Worker pid=1) INFO [gpu_model_runner.py:2] Estimated CUDA graph memory: 0.51 GiB total\n"
        "(Worker pid=1) INFO [gpu_model_runner.py:3] Graph capturing finished in 12 secs, took 0.48 GiB\n"
    )
    out = parse_vllm_log(text)
    assert out["weights_bytes"] == round(14.99 * GIB) and out["weights_load_s"] == pytest.approx(5.123456)
    assert out["available_kv_bytes"] == round(103.40 * GIB)
    assert out["kv_cache_tokens"] == 1_505_984 and out["kv_device"] == "GPU"
    assert out["cudagraph_estimated_bytes"] == round(0.51 * GIB)
    assert out["cudagraph_bytes"] == round(0.48 * GIB)
    assert parse_vllm_log("nothing here") == {}
