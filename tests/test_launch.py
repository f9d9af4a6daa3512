"""Launch commands (each engine profile's ``launch``) carry the flags of the chosen configuration."""

import re

from estimator.engines import get_engine
from estimator.engines.base import gpu_layers
from estimator.engines.llama_cpp import n_cpu_moe_override
from estimator.physics.quant import get_quant
from estimator.specs import FULL, GIB, ModelSpec, MoESpec, Workload


def launch_commands(model, quant, workload, weights_bytes):
    """(llama.cpp, vLLM) commands for one configuration."""
    q = get_quant(quant)
    return tuple(get_engine(e).launch(model, q, workload, weights_bytes) for e in ("llama.cpp", "vllm"))

GLM = ModelSpec(
    id="glm-4.5",
    name="GLM-4.5",
    architecture="glm4_moe",
    hidden_size=5120,
    n_layers=92,
    n_heads=96,
    n_kv_heads=8,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151552,
    max_context=131072,
    layer_types=(FULL,) * 92,
    hf_id="zai-org/GLM-4.5",
    moe=MoESpec(
        n_experts=160,
        n_experts_used=8,
        expert_ff=1536,
        n_shared_experts=1,
        shared_ff=1536,
        dense_layers=(0, 1, 2),
    ),
)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_single_device_llama_default():
    lc, vl = launch_commands(GLM, "Q4_K_M", Workload(n_ctx=8192), 200 * GIB)
    assert lc.exact and not vl.exact  # engine llama.cpp chosen
    assert flag(lc.argv, "-c") == "8192" and flag(lc.argv, "-ngl") == "999" and flag(lc.argv, "-fa") == "on"
    assert "-ctk" not in lc.argv and "-sm" not in lc.argv
    assert flag(vl.argv, "--max-model-len") == "8192" and flag(vl.argv, "--kv-cache-dtype") == "auto"
    assert "llama-server" in lc.text and " \\\n  -c 8192" in lc.text


def test_tp_kv_q8_concurrency():
    w = Workload(n_ctx=16384, kv_dtype="q8_0", n_devices=4, split="tp", concurrency=8)
    lc, vl = launch_commands(GLM, "Q4_K_M", w, 200 * GIB)
    assert flag(lc.argv, "-ctk") == "q8_0" and flag(lc.argv, "-ctv") == "q8_0"
    assert flag(lc.argv, "-c") == str(16384 * 8) and flag(lc.argv, "-np") == "8"
    assert flag(lc.argv, "-sm") == "tensor" and flag(lc.argv, "-ts") == "1,1,1,1"
    assert flag(vl.argv, "--tensor-parallel-size") == "4" and flag(vl.argv, "--max-num-seqs") == "8"
    assert flag(vl.argv, "--kv-cache-dtype") == "fp8" and not vl.exact  # q8_0 has no vLLM equivalent


def test_slots_share_one_unified_kv_pool():
    """llama-server with an explicit -np N gives each slot its own stream (kv_unified false), so a
    sliding-window cache is N x (window + n_ubatch) cells; estimator.physics.kv sizes the unified pool
    (window x N + n_ubatch), so the command asks for --kv-unified whenever there are several slots."""
    lc, _ = launch_commands(GLM, "Q4_K_M", Workload(n_ctx=8192, concurrency=4), 200 * GIB)
    assert flag(lc.argv, "-np") == "4" and flag(lc.argv, "-c") == str(4 * 8192)
    assert "--kv-unified" in lc.argv and "  --kv-unified \\\n  -ngl" in lc.text
    assert any("--kv-unified" in n and "4 sequences of 8192" in n for n in lc.notes)
    one, _ = launch_commands(GLM, "Q4_K_M", Workload(n_ctx=8192), 200 * GIB)
    assert "--kv-unified" not in one.argv


def test_pp_vllm_fp8():
    w = Workload(
        n_ctx=8192, kv_dtype="fp8", engine="vllm", n_devices=2, split="pp", gpu_memory_utilization=0.9
    )
    lc, vl = launch_commands(GLM, "FP8", w, 350 * GIB)
    assert vl.exact and flag(vl.argv, "--pipeline-parallel-size") == "2"
    assert flag(vl.argv, "--gpu-memory-utilization") == "0.9" and flag(vl.argv, "--quantization") == "fp8"
    assert flag(lc.argv, "-sm") == "layer" and not lc.exact  # no fp8 KV nor FP8 weights in llama.cpp


def test_offload_flags():
    w = Workload(n_ctx=8192, offload_bytes=20 * GIB, moe_offload_layers=10)
    assert gpu_layers(GLM, w, 92 * GIB) == 92 - 20
    lc, vl = launch_commands(GLM, "Q4_K_M", w, 92 * GIB)
    assert flag(lc.argv, "--n-cpu-moe") == "10" and flag(lc.argv, "-ngl") == "72"
    assert flag(vl.argv, "--cpu-offload-gb") == "20" and not vl.exact


def test_ot_regex_matches_exactly_first_n_layers():
    rx = re.compile(n_cpu_moe_override(3).split("=")[0])
    assert rx.search("blk.2.ffn_up_exps.weight") and not rx.search("blk.3.ffn_up_exps.weight")
    assert not rx.search("blk.1.ffn_up_shexp.weight")


def test_vllm_kv_flags_agree_with_the_runner():
    """runners/vllm.py keeps its own KV dtype map (runners import nothing of ours): it must agree with the
    vLLM profile's, so a measured point and the estimator's launch command use the same --kv-cache-dtype."""
    from estimator.engines.vllm import KV_FLAGS
    from runners.vllm import KV_DTYPES

    shared = set(KV_FLAGS) & set(KV_DTYPES)
    assert {"f16", "bf16", "fp8"} <= shared
    assert {k: KV_FLAGS[k] for k in shared} == {k: KV_DTYPES[k] for k in shared}


def test_flash_attention_setting_resolves_through_the_profile():
    import pytest

    from estimator.engines import get_engine
    from estimator.specs import SpecError

    llama = get_engine("llama.cpp")
    assert llama.flash_attn_for("on") and not llama.flash_attn_for("off") and llama.flash_attn_for("auto")
    assert llama.flash_attn_for(False) is False
    vllm = get_engine("vllm")  # vLLM picks its own attention kernels: no switch to turn them off
    assert vllm.flash_attn_for("on") and vllm.flash_attn_for("auto")
    with pytest.raises(SpecError, match="llama.cpp option"):
        vllm.flash_attn_for("off")
    with pytest.raises(SpecError, match="on, off or auto"):
        llama.flash_attn_for("sometimes")


def test_llama_server_kv_switches():
    from estimator.catalog.data import get_model
    from estimator.engines import get_engine
    from estimator.physics.quant import get_quant
    from estimator.specs import Workload

    m, q = get_model("gemma-3-27b"), get_quant("Q4_K_M")
    lc = get_engine("llama.cpp").launch(m, q, Workload(concurrency=4), 10**10)
    assert "--kv-unified" in lc.argv and "--swa-full" not in lc.argv and "-ub" not in lc.argv
    wl = Workload(concurrency=4, kv_unified=False, swa_full=True, n_ubatch=1024)
    lc = get_engine("llama.cpp").launch(m, q, wl, 10**10)
    assert "--kv-unified" not in lc.argv and "--swa-full" in lc.argv
    assert lc.argv[lc.argv.index("-ub") + 1] == "1024"
    assert any("own KV stream" in n for n in lc.notes)


def test_a_repository_with_its_own_code_gets_trust_remote_code():
    """Kimi K2's config.json declares auto_map (its tokenizer is the repository's own code): vLLM and SGLang
    refuse to load it without --trust-remote-code, trtllm-serve without --trust_remote_code.  A model whose
    config has no auto_map, and a GGUF path, get no flag; the flag is no sizing fact (fingerprint)."""
    from estimator.catalog.data import get_model
    from estimator.catalog.hfconfig import spec_from_config
    from harness.provenance import model_fingerprint

    kimi, llama = get_model("kimi-k2"), get_model("llama-3.1-8b")
    assert kimi.custom_code and not llama.custom_code
    wl = Workload(n_ctx=8192, n_devices=8, engine="vllm")
    flags = {"vllm": "--trust-remote-code", "sglang": "--trust-remote-code", "trtllm": "--trust_remote_code"}
    for engine, flag in flags.items():
        cmd = get_engine(engine).launch(kimi, get_quant("FP8-BLOCK"), wl, 0)
        assert flag in cmd.argv and any("ships its own code" in n for n in cmd.notes), engine
        plain = get_engine(engine).launch(llama, get_quant("BF16"), wl, 0)
        assert flag not in plain.argv, engine
    gguf = get_engine("vllm").launch(kimi, get_quant("Q4_K_M"), wl, 0)  # vLLM's GGUF loader: a local file
    assert "--trust-remote-code" not in gguf.argv
    cfg = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048}  # fmt: skip
    own = spec_from_config({**cfg, "auto_map": {"AutoConfig": "configuration_x.XConfig"}})
    assert own.custom_code and not spec_from_config(cfg).custom_code
    assert model_fingerprint(own) == model_fingerprint(spec_from_config(cfg))
