"""The weight format sized when none is asked for, and the checkpoint a launch command names.

A checkpoint engine (vLLM, SGLang, TensorRT-LLM) loads the published checkpoint as it is: DeepSeek-V3 in
FP8 (128 x 128 blocks), gpt-oss in MXFP4, an NVFP4 repository in NVFP4; llama.cpp sizes Q4_K_M, except for a
model published in MXFP4, whose GGUF keeps the experts in MXFP4.  Before this the default was BF16 / Q4_K_M
for every model: DeepSeek-V3 on 8 x H200 (its reference deployment) read "does not fit" at 1,250 GiB and
gpt-oss-120b on one H100 80GB (its model card's claim) at 81 GiB.
"""

import pytest

from estimator.catalog.data import get_model
from estimator.engines import get_engine
from estimator.engines.base import checkpoint_quant
from estimator.physics.quant import get_quant
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report
from estimator.specs import Workload


@pytest.mark.parametrize(
    "model,engine,expected",
    [
        ("deepseek-v3", "vllm", "FP8-BLOCK"),
        ("kimi-k2", "sglang", "FP8-BLOCK"),
        ("gpt-oss-120b", "vllm", "MXFP4"),
        ("gpt-oss-120b", "trtllm", "MXFP4"),
        ("nemotron-3-super-120b-a12b", "vllm", "NVFP4"),  # the catalog's hf_id is the NVFP4 repository
        ("gemma-4-31b", "vllm", "BF16"),  # google's checkpoint; the geometry's config copy is NVIDIA's NVFP4
        ("llama-2-7b", "vllm", "F16"),
        ("llama-3.1-8b", "sglang", "BF16"),
        ("gpt-oss-120b", "llama.cpp", "MXFP4"),
        ("deepseek-v3", "llama.cpp", "Q4_K_M"),
        ("llama-3.1-8b", "llama.cpp", "Q4_K_M"),
    ],
)
def test_default_format_is_the_published_checkpoints(model, engine, expected):
    assert get_engine(engine).default_quant_for(get_model(model)) == expected


def build_request_report(req: ReportRequest) -> dict:
    return report_to_dict(make_report(req))


def _memory(model, hardware, devices, engine, quant=None):
    req = ReportRequest(model=model, hardware=hardware, devices=devices, engine=engine, quant=quant)
    return build_request_report(req)["memory"]


def test_deepseek_v3_fits_eight_h200_as_served():
    """671 B parameters in FP8 with bf16 embeddings / head / norms: ~642 GiB of weights, not BF16's 1,250."""
    default = _memory("deepseek-v3", "h200-141gb-sxm", 8, "vllm")
    fp8 = _memory("deepseek-v3", "h200-141gb-sxm", 8, "vllm", "FP8-BLOCK")
    bf16 = _memory("deepseek-v3", "h200-141gb-sxm", 8, "vllm", "BF16")
    assert default["weights_bytes"] == fp8["weights_bytes"]
    assert default["verdict"] == "fits" and bf16["verdict"] == "does not fit"
    assert 600 < default["weights_bytes"] / 2**30 < 660


def test_llama_cpps_mxfp4_is_the_published_gpt_oss_gguf():
    """llama-bench reports ggml-org's gpt-oss-20b MXFP4 GGUF as 11.27 GiB
    (https://github.com/ggml-org/llama.cpp/blob/master/benches/dgx-spark.md, in
    ../shared/reference/published/published_measurements.csv): MXFP4 experts, q8_0 for the rest."""
    from estimator.physics.weights import weight_breakdown

    w = weight_breakdown(get_model("gpt-oss-20b"), get_quant(get_engine("llama.cpp").default_quant_for(
        get_model("gpt-oss-20b"))))  # fmt: skip
    assert round(w.total_bytes / 2**30, 2) == 11.27


def test_gpt_oss_120b_fits_one_h100_on_llama_cpp():
    default = _memory("gpt-oss-120b", "h100-80gb-sxm", 1, "llama.cpp")
    q4 = _memory("gpt-oss-120b", "h100-80gb-sxm", 1, "llama.cpp", "Q4_K_M")
    assert default["verdict"] == "fits" and q4["verdict"] == "does not fit"
    assert (
        default["weights_bytes"]
        == _memory("gpt-oss-120b", "h100-80gb-sxm", 1, "llama.cpp", "MXFP4")["weights_bytes"]
    )


def test_an_asked_format_wins_and_the_default_says_where_it_comes_from():
    rep = build_request_report(
        ReportRequest(model="deepseek-v3", hardware="h200-141gb-sxm", devices=8, engine="vllm")
    )
    assert rep["quant"] == "FP8-BLOCK"
    assert any("the format deepseek-ai/DeepSeek-V3 is published in" in n for n in rep["notes"])
    asked = build_request_report(
        ReportRequest(model="deepseek-v3", hardware="h200-141gb-sxm", devices=8, engine="vllm", quant="FP8")
    )
    assert asked["quant"] == "FP8"
    assert not any("is published in" in n for n in asked["notes"])
    plain = build_request_report(ReportRequest(model="llama-3.1-8b", hardware="rtx-4090", engine="vllm"))
    assert plain["quant"] == "BF16" and not any("is published in" in n for n in plain["notes"])


WL = Workload(n_ctx=8192, n_devices=8, engine="vllm")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(
    "model,quant,target,flags",
    [
        # the published checkpoint's own quantized format: the repository, the engine reads its config
        ("deepseek-v3", "FP8-BLOCK", "deepseek-ai/DeepSeek-V3", ()),
        ("deepseek-v3", "FP8", "deepseek-ai/DeepSeek-V3", ()),
        ("nemotron-3-super-120b-a12b", "NVFP4", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", ()),
        # a dense dtype of an unquantized checkpoint: --dtype; FP8 of one: quantized at load time
        ("llama-3.1-8b", "BF16", "meta-llama/Llama-3.1-8B", ("--dtype", "bfloat16")),
        ("llama-3.1-8b", "FP8", "meta-llama/Llama-3.1-8B", ("--quantization", "fp8")),
        # a dense dtype of a quantized checkpoint needs a dequantized copy
        ("deepseek-v3", "BF16", "<BF16 checkpoint of deepseek-ai/DeepSeek-V3>", ("--dtype", "bfloat16")),
        # another checkpoint format: a checkpoint published in it (was a GGUF path on vLLM)
        ("llama-3.1-8b", "NVFP4", "<NVFP4 checkpoint of meta-llama/Llama-3.1-8B>", ()),
        ("llama-3.1-8b", "FP8-BLOCK", "<FP8-BLOCK checkpoint of meta-llama/Llama-3.1-8B>", ()),
        ("llama-3.1-8b", "W4A16-G128", "<W4A16-G128 checkpoint of meta-llama/Llama-3.1-8B>", ()),
    ],
)
def test_launch_names_the_checkpoint_that_holds_the_format(engine, model, quant, target, flags):
    m = get_model(model)
    cmd = get_engine(engine).launch(m, get_quant(quant), WL, 0)
    argv = list(cmd.argv)
    assert target in argv
    assert not any(a.endswith(".gguf") for a in argv)
    for flag in flags:
        assert flag in argv
    if not flags:
        assert "--dtype" not in argv and "--quantization" not in argv


def test_checkpoint_quant_of_a_gguf_file_is_its_own_tensors(tmp_path):
    from estimator.catalog.resolve import resolve_model
    from tests.gguf_files import golden_tiny_llama

    m = resolve_model(str(golden_tiny_llama()))
    assert checkpoint_quant(m) is None


def test_fit_ranks_a_quantized_release_in_its_own_format():
    """`fit` on vLLM had sized every model at BF16: DeepSeek-V3 / Kimi K2 were left out on 8 x H200 and
    gpt-oss-120b took 229 GiB; on llama.cpp gpt-oss was a Q-format upcast of its MXFP4 experts."""
    from estimator.catalog.data import get_hardware
    from estimator.physics.coefficients import load_coefficients
    from estimator.report.fit import FitQuery, fit_rows
    from estimator.report.request import make_workload

    table = load_coefficients(None)
    heads, rows, _ = fit_rows(get_hardware("h200-141gb-sxm"), make_workload("vllm", devices=8), table)
    pick = {r[heads.index("model")]: r[heads.index("best_quant")] for r in rows}
    assert pick["deepseek-v3"] == "FP8-BLOCK" and pick["kimi-k2"] == "FP8-BLOCK"
    assert pick["gpt-oss-120b"] == "MXFP4" and pick["llama-3.1-405b"] == "BF16"
    heads, rows, _ = fit_rows(
        get_hardware("h100-80gb-sxm"), make_workload("llama.cpp"), table, FitQuery(family="gpt-oss")
    )
    assert {r[heads.index("best_quant")] for r in rows} == {"MXFP4"}
    # on a 24 GB card gpt-oss-120b fits with its MXFP4 experts in host RAM (was a larger Q4_K_M)
    heads, rows, _ = fit_rows(
        get_hardware("rtx-4090"), make_workload("llama.cpp"), table, FitQuery(family="gpt-oss")
    )
    big = next(r for r in rows if r[heads.index("model")] == "gpt-oss-120b")
    assert big[heads.index("best_quant")] == "MXFP4" and big[heads.index("n_cpu_moe")]


def test_predict_row_without_quant_takes_the_engines_default():
    from estimator.app import predict
    from estimator.physics.coefficients import prior_table

    base = {"model": "deepseek-v3", "hardware": "h200-141gb-sxm", "n_devices": "8", "engine": "vllm",
            "n_prompt": "512", "n_gen": "0"}  # fmt: skip
    empty, fp8, bf16 = predict.predict_rows(
        [{**base, "quant": ""}, {**base, "quant": "FP8-BLOCK"}, {**base, "quant": "BF16"}], prior_table()
    )
    assert empty["error"] == "" and empty["weights_bytes"] == fp8["weights_bytes"] != bf16["weights_bytes"]
    small = {**base, "engine": "llama.cpp", "n_devices": "1", "model": "llama-3.1-8b", "hardware": "rtx-4090"}
    llama, q4 = predict.predict_rows([{**small, "quant": ""}, {**small, "quant": "Q4_K_M"}], prior_table())
    assert llama["weights_bytes"] == q4["weights_bytes"]


@pytest.mark.parametrize(
    "name,fmt",
    [
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "fp8"),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "fp8"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "nvfp4"),
        ("Qwen/Qwen3-32B-AWQ", "awq"),
        ("openai/gpt-oss-120b", None),
        ("fp8-lab/Qwen3-8B", None),  # the organisation is not the repository's name
    ],
)
def test_a_repository_name_states_its_format(name, fmt):
    from estimator.catalog.names import stated_format

    assert stated_format(name) == fmt


def test_two_formats_in_one_name_are_refused():
    from estimator.catalog.names import stated_format
    from estimator.specs import SpecError

    with pytest.raises(SpecError, match="two weight formats"):
        stated_format("someone/Qwen3-32B-FP8-AWQ")


@pytest.mark.parametrize(
    "name,entry,hf_id,default",
    [
        # a quantized re-upload named by its tokens: that repository, in its name's format
        ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8",
         "FP8-BLOCK"),  # fmt: skip
        ("Qwen/Qwen3-32B-AWQ", "qwen3-32b", "Qwen/Qwen3-32B-AWQ", "AWQ-INT4"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b", "nvidia/Llama-3.3-70B-Instruct-FP4", "NVFP4"),
        # a dated release: its repository, the entry's format (DeepSeek-V3's FP8)
        ("deepseek-ai/DeepSeek-V3-0324", "deepseek-v3", "deepseek-ai/DeepSeek-V3-0324", "FP8-BLOCK"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B-Instruct-2507", "BF16"),
        # catalog aliases: with a format, that repository in it; without, the entry's own repository
        ("nvidia/DeepSeek-R1-NVFP4", "deepseek-r1", "nvidia/DeepSeek-R1-NVFP4", "NVFP4"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B-FP8", "FP8-BLOCK"),
        ("zhipuai/GLM-5", "glm-5", "zhipuai/GLM-5", "BF16"),  # the name the user gave (GLM's former org)
        ("deepseek-ai/DeepSeek-V3.1", "deepseek-v3", "deepseek-ai/DeepSeek-V3.1", "FP8-BLOCK"),
        ("qwen3-32b", "qwen3-32b", "Qwen/Qwen3-32B", "BF16"),
    ],
)
def test_a_named_repository_is_sized_and_served_as_published(name, entry, hf_id, default):
    from estimator.catalog.resolve import resolve_model_noted

    m, _ = resolve_model_noted(name)
    assert (m.id, m.hf_id) == (entry, hf_id)
    assert get_engine("vllm").default_quant_for(m) == default
    cmd = get_engine("vllm").launch(m, get_quant(default), Workload(n_ctx=8192, engine="vllm"), 0)
    assert cmd.argv[2] == hf_id


def test_an_moe_that_does_not_fit_gets_the_expert_offload_that_fits():
    """gpt-oss-120b in MXFP4 on an RTX 4090: does not fit whole; the report names the fewest layers of routed
    experts in host RAM that make it fit (llama.cpp --n-cpu-moe), the host RAM and the decode speed with them
    there, the same figures `fit` gives; a dense model or a configuration that fits gets none."""
    from estimator.catalog.data import get_hardware
    from estimator.physics.coefficients import load_coefficients
    from estimator.report.fit import FitQuery, fit_rows
    from estimator.report.request import make_workload

    d = build_request_report(ReportRequest(model="gpt-oss-120b", hardware="rtx-4090"))
    mem, sp = d["memory"], d["speed"]
    assert mem["verdict"] == "does not fit"
    k = mem["moe_offload_layers"]
    assert 0 < k < 36 and mem["moe_offload_host_bytes"] > 30 * 2**30
    assert sp["moe_offload_decode"]["tok_s"] < sp["decode"]["tok_s"]
    table = load_coefficients(None)
    hw = get_hardware("rtx-4090")
    heads, rows, _ = fit_rows(hw, make_workload("llama.cpp"), table, FitQuery(family="gpt-oss"))
    big = next(r for r in rows if r[heads.index("model")] == "gpt-oss-120b")
    assert big[heads.index("n_cpu_moe")] == k
    from estimator.catalog.data import get_model
    from estimator.physics.memory import estimate_memory
    from estimator.report.document import to_brief

    assert f"With --n-cpu-moe {k} it fits" in " ".join(to_brief(d, width=300).split())
    # k - 1 layers do not fit: the least offload, not just one that fits

    wl = make_workload("llama.cpp", moe_offload_layers=k - 1)
    m = estimate_memory(get_model("gpt-oss-120b"), get_quant("MXFP4"), get_hardware("rtx-4090"), wl,
                        load_coefficients(None).memory_for("llama.cpp"))  # fmt: skip
    assert m.verdict == "does not fit"
    for model, hw in (("llama-3.1-70b", "rtx-4090"), ("gpt-oss-20b", "rtx-4090")):
        d = build_request_report(ReportRequest(model=model, hardware=hw))
        assert d["memory"]["moe_offload_layers"] is None and d["speed"]["moe_offload_decode"] is None


@pytest.mark.parametrize(
    "model,quant,target",
    [
        ("gpt-oss-120b", "MXFP4", "openai/gpt-oss-120b"),
        ("deepseek-v3", "FP8-BLOCK", "deepseek-ai/DeepSeek-V3"),
        ("nemotron-3-super-120b-a12b", "NVFP4", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"),
        ("deepseek-v3", "BF16", "<BF16 checkpoint of deepseek-ai/DeepSeek-V3>"),
        # an AutoAWQ repository is not ModelOpt's INT4-AWQ: the ModelOpt route
        ("Qwen/Qwen3-32B-AWQ", "AWQ-INT4", "<AWQ-INT4 checkpoint of Qwen/Qwen3-32B-AWQ>"),
        ("llama-3.1-8b", "BF16", "meta-llama/Llama-3.1-8B"),
    ],
)
def test_trtllm_serves_the_published_checkpoint_it_can_load(model, quant, target):
    from estimator.catalog.resolve import resolve_model_noted

    m, _ = resolve_model_noted(model)
    cmd = get_engine("trtllm").launch(m, get_quant(quant), Workload(n_ctx=8192, engine="trtllm"), 0)
    assert cmd.argv[1] == target


def test_the_catalog_keeps_its_own_repository_for_records():
    """Records and calibration key on the catalog entry (``get_model``): an alias of a quantized re-upload
    resolves to the entry's own repository there; only a user-facing resolution (the report, predict) takes
    the repository as named."""
    from estimator.app import predict
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.coefficients import prior_table

    assert get_model("nvidia/DeepSeek-R1-NVFP4").hf_id == "deepseek-ai/DeepSeek-R1"
    assert resolve_model("nvidia/DeepSeek-R1-NVFP4").native_dtype == "fp8"
    row = {"hardware": "b200", "n_devices": "8", "engine": "vllm", "quant": "", "n_prompt": "512",
           "n_gen": "0"}  # fmt: skip
    alias, base = predict.predict_rows(
        [{**row, "model": "nvidia/DeepSeek-R1-NVFP4"}, {**row, "model": "deepseek-r1"}], prior_table()
    )
    assert int(alias["weights_bytes"]) < 0.7 * int(base["weights_bytes"])  # NVFP4 against FP8-BLOCK


def test_fit_on_a_checkpoint_engine_tries_fp8_at_load_time():
    """vLLM quantizes a bf16 checkpoint to FP8 at load time (--quantization fp8): Llama-3.1-70B fits one H100
    80GB that way at 8K (the way it is served), where `fit` had only BF16 (141 GiB: does not fit)."""
    from estimator.catalog.data import get_hardware
    from estimator.physics.coefficients import load_coefficients
    from estimator.report.fit import FitQuery, fit_rows
    from estimator.report.request import make_workload

    hw, table = get_hardware("h100-80gb-sxm"), load_coefficients(None)
    heads, rows, _ = fit_rows(hw, make_workload("vllm"), table, FitQuery(family="llama-3.1"))
    pick = {r[heads.index("model")]: r[heads.index("best_quant")] for r in rows}
    assert pick["llama-3.1-70b"] == "FP8" and pick["llama-3.1-8b"] == "BF16"


def test_list_models_says_what_each_repository_is_published_in():
    from estimator.report.listing import list_rows

    headers, rows = list_rows("models")
    col = {r[headers.index("id")]: r[headers.index("checkpoint")] for r in rows}
    assert col["deepseek-v3"] == "FP8-BLOCK" and col["gpt-oss-120b"] == "MXFP4"
    assert col["nemotron-3-super-120b-a12b"] == "NVFP4" and col["llama-2-7b"] == "F16"
    assert col["llama-3.1-8b"] == "BF16"
