"""The report: every section present in text, JSON and Markdown, with known numbers where they are pinned."""

import pytest

from estimator.catalog.data import all_hardware, get_hardware, get_model
from estimator.catalog.rates import load_cloud_rates
from estimator.physics.coefficients import load_coefficients
from estimator.physics.limits import validate_workload
from estimator.physics.quant import get_quant
from estimator.render.json import render_json
from estimator.report.document import blocks, build_report, report_to_dict, to_markdown, to_text
from estimator.report.units import ReportOptions
from estimator.specs import GIB, SpecError, Workload

TABLE = load_coefficients(None)
OPTS = ReportOptions(hardware_catalog=tuple(all_hardware()), rates=load_cloud_rates())


SECTION_KEYS = (
    "summary", "model", "support", "memory", "kv", "context", "quant", "speed", "serving", "multi_device",
    "cost", "finetune", "recommendations", "launch", "notes",
)


def report(model="glm-4.5", hw="mi300x", quant="Q4_K_M", **wl):
    return report_to_dict(
        build_report(get_model(model), get_hardware(hw), get_quant(quant), Workload(**wl), TABLE, OPTS)
    )


@pytest.fixture(scope="module")
def glm():
    return report(n_ctx=8192)


def test_glm_known_numbers(glm):
    assert glm["kv"]["kv_bytes"] == pytest.approx(2.875 * GIB, rel=1e-3)
    opts = {o["kv_dtype"]: o for o in glm["kv"]["options"]}
    assert opts["q8_0"]["kv_bytes"] == pytest.approx(2.875 * GIB * 34 / 64, rel=1e-3)
    assert opts["q8_0"]["saving_bytes"] == glm["kv"]["kv_bytes"] - opts["q8_0"]["kv_bytes"]
    ctx = {r["n_ctx"]: r for r in glm["context_scaling"]}
    assert set(ctx) == {4096, 8192, 16384, 32768, 65536, 131072}
    assert ctx[32768]["kv_bytes"] == pytest.approx(11.5 * GIB, rel=1e-3)
    mem = glm["memory"]
    assert (
        mem["total_bytes"]
        == mem["weights_bytes"] + mem["kv_bytes"] + mem["runtime_bytes"] + mem["overhead_bytes"]
    )
    assert mem["headroom_bytes"] == mem["usable_bytes"] - mem["total_bytes"]
    assert mem["verdict"] == "does not fit"  # ~200 GiB of Q4_K_M weights on a 192 GB device
    assert glm["model"]["n_experts"] == 160 and "GQA" in glm["model"]["attention"]


def test_quant_matrix_and_speed_labels(glm):
    rows = {r["quant"]: r for r in glm["quant_matrix"]}
    assert {"BF16", "Q8_0", "Q4_K_M", "IQ4_XS", "Q2_K", "MXFP4", "FP8"} <= set(rows)
    assert rows["Q4_K_M"]["selected"] and not rows["Q8_0"]["selected"]
    assert rows["Q2_K"]["weights_bytes"] < rows["Q4_K_M"]["weights_bytes"] < rows["Q8_0"]["weights_bytes"]
    assert rows["Q2_K"]["verdict"] == "fits" and rows["Q2_K"]["cheapest_fit"] is not None
    sp = glm["speed"]
    for f in (sp["decode"], sp["prefill"], sp["aggregate"]):
        assert f["lo_tok_s"] <= f["tok_s"] <= f["hi_tok_s"] and f["coefficients"]
    assert sp["ttft_prompt_tokens"] == 4096 and sp["ttft_lo_s"] <= sp["ttft_s"] <= sp["ttft_hi_s"]
    if not sp["calibrated"]:
        assert "UNCALIBRATED" in sp["basis"] and any("pooled prior" in w for w in glm["warnings"])


def test_recommendations_fit(glm):
    r = glm["recommendations"]
    for key in ("best_single", "best_value", "most_memory_per_dollar", "multi_device"):
        c = r[key]
        assert c is not None and c["headroom_bytes"] >= 0, key
    assert r["multi_device"]["hardware_id"] == "mi300x" and r["multi_device"]["n_devices"] == 2


def test_finetune_order(glm):
    ft = {r["method"]: r for r in glm["finetune"]}
    assert ft["qlora"]["total_bytes"] < ft["lora"]["total_bytes"] < ft["full"]["total_bytes"]
    assert ft["full"]["optimizer_bytes"] == 12 * glm["model"]["params_total"]


def test_every_section_in_every_format(glm):
    secs = blocks(glm)
    assert [s.key for s in secs] == list(SECTION_KEYS)
    md, txt, js = to_markdown(glm), to_text(glm), render_json(glm)
    for s in secs:
        assert s.title in md and s.title in txt, s.key
    for key in (
        "model",
        "memory",
        "kv",
        "context_scaling",
        "quant_matrix",
        "speed",
        "multi_device",
        "cost",
        "finetune",
        "recommendations",
        "launch",
    ):
        assert f'"{key}"' in js
    for text in (md, txt):
        assert "GiB" in text and "GB" in text and "llama-server" in text and "vllm serve" in text
        assert "estimated" in text


def test_multi_device_offload_and_launch():
    d = report(
        "glm-4.5",
        "h100-80gb-sxm",
        "Q4_K_M",
        n_ctx=16384,
        n_devices=4,
        split="tp",
        kv_dtype="q8_0",
        concurrency=4,
        moe_offload_layers=20,
    )
    assert d["workload"]["n_devices"] == 4 and len(d["memory"]["per_device"]) == 4
    off = d["multi_device"]["offload"]
    assert off["moe_offload_layers"] == 20 and off["slowdown"] is not None and off["slowdown"] > 1
    llama = next(e for e in d["launch"] if e["engine"] == "llama.cpp")
    argv = llama["argv"]
    assert argv[argv.index("--n-cpu-moe") + 1] == "20" and argv[argv.index("-ctk") + 1] == "q8_0"
    assert argv[argv.index("-ts") + 1] == "1,1,1,1" and argv[argv.index("-c") + 1] == str(16384 * 4)


def test_concurrency_sizes_the_kv_cache_the_launch_command_allocates():
    """--concurrency N starts N slots (llama-server -c n_ctx x N -np N): memory holds N sequences."""
    from estimator.physics.kv import kv_cache

    one = report("llama-3.1-8b", "rtx-4090", "Q4_K_M", n_ctx=16384)
    four = report("llama-3.1-8b", "rtx-4090", "Q4_K_M", n_ctx=16384, concurrency=4)
    llama = next(e for e in four["launch"] if e["engine"] == "llama.cpp")["argv"]
    total_ctx = int(llama[llama.index("-c") + 1])
    assert total_ctx == 4 * 16384 and four["kv"]["n_seq"] == 4 and one["kv"]["n_seq"] == 1
    allocated = kv_cache(get_model("llama-3.1-8b"), total_ctx, "f16").total_bytes
    assert four["memory"]["kv_bytes"] == four["kv"]["kv_bytes"] == allocated == 4 * one["memory"]["kv_bytes"]
    assert four["memory"]["total_bytes"] - one["memory"]["total_bytes"] >= 3 * one["memory"]["kv_bytes"]
    ctx = {r["n_ctx"]: r["kv_bytes"] for r in four["context_scaling"]}
    assert ctx[16384] == four["memory"]["kv_bytes"]
    # speed keeps the single-stream decode; the aggregate covers the 4 sequences
    assert four["speed"]["decode"]["tok_s"] == pytest.approx(one["speed"]["decode"]["tok_s"])


def test_vllm_report():
    d = report("llama-3.1-8b", "rtx-4090", "BF16", n_ctx=8192, engine="vllm", kv_dtype="fp8")
    vl = next(e for e in d["launch"] if e["engine"] == "vllm")
    assert vl["exact"] and "--kv-cache-dtype" in vl["argv"] and "fp8" in vl["argv"]
    assert d["memory"]["kv_capacity_tokens"] is not None


@pytest.mark.parametrize(
    "wl, msg",
    [
        ({"n_ctx": 0}, "positive"),
        ({"n_ctx": 10**7}, "maximum"),
        ({"moe_offload_layers": 3}, "mixture-of-experts"),
    ],
)
def test_bad_workloads(wl, msg):
    with pytest.raises(SpecError, match=msg):
        validate_workload(get_model("llama-3.1-8b"), Workload(**wl))


def test_overlong_allowed_with_warning():
    w = validate_workload(get_model("llama-3.1-8b"), Workload(n_ctx=10**6), allow_overlong=True)
    assert w and "maximum" in w[0]


def test_memory_basis_says_where_runtime_coefficients_come_from():
    import dataclasses

    from estimator.physics.coefficients import prior_table

    def basis(table):
        d = report_to_dict(
            build_report(
                get_model("qwen3-8b"), get_hardware("rtx-4090"), get_quant("Q4_K_M"), Workload(), table, OPTS
            )
        )
        return d["memory"]["basis"]

    assert basis(prior_table()).endswith("runtime coefficients: prior (uncalibrated)")
    fitted = dataclasses.replace(
        prior_table(), memory={"llama.cpp": {"compute_base_bytes": 1e7}}, path="results/coefficients.json"
    )
    assert basis(fitted).endswith("runtime coefficients: calibrated (results/coefficients.json)")
    assert "custom" not in basis(prior_table()) + basis(fitted)


def test_unified_devices_are_never_multiplied():
    d = report("llama-3.1-8b", "apple-m3-ultra", "Q4_K_M", n_ctx=8192)
    assert [r["n_devices"] for r in d["multi_device"]["rows"]] == [1]
    assert any("cannot be combined" in n for n in d["multi_device"]["notes"])
    big = report("deepseek-v3", "apple-m3-ultra", "BF16", n_ctx=8192)
    combinable = {h.id for h in all_hardware() if h.kind in ("gpu", "npu") and h.interconnect_gbs}
    cands = [r["cheapest_fit"] for r in big["quant_matrix"] if r["cheapest_fit"]]
    cands += [c for c in big["recommendations"].values() if isinstance(c, dict)]
    cands += [r["recommended"] for r in big["finetune"] if r["recommended"]]
    for c in cands:
        assert c["n_devices"] <= 8 and (c["n_devices"] == 1 or c["hardware_id"] in combinable), c
    assert any(c["n_devices"] > 1 for c in cands)


def test_two_macs_get_a_warning():
    d = report("llama-3.1-8b", "apple-m3-ultra", "Q4_K_M", n_ctx=8192, n_devices=2)
    assert any("cannot be combined" in w for w in d["warnings"])


def test_atlas_duo_is_noted_as_two_chips():
    d = report("qwen3-30b-a3b", "atlas-300i-duo-96gb", "Q8_0", n_ctx=8192)
    assert any("two Ascend 310P chips with 48 GB" in n for n in d["memory"]["notes"])
    glm = report("glm-4.5", "mi300x", "Q4_K_M", n_ctx=8192)
    # the Duo was the cheapest fit of the GGUF quants; its 310P chips run Q4/Q8 matmuls on the host CPU
    # (support table), so a native configuration wins now and the Duo is only named, marked, where memory
    # per dollar is the criterion
    for r in glm["quant_matrix"]:
        c = r["cheapest_fit"]
        if c and c["hardware_id"] == "atlas-300i-duo-96gb":  # F16 / F32 matmuls stay on the NPU, marked
            assert r["quant"] in ("F16", "F32") and c["support"] == "fallback", r["quant"]
    per_dollar = glm["recommendations"]["most_memory_per_dollar"]
    assert per_dollar["hardware_id"] == "atlas-300i-duo-96gb" and per_dollar["support"] == "fallback"
    assert "host CPU" in per_dollar["reason"]
    assert any("48 GB" in n for n in glm["recommendations"]["notes"])


def test_a_device_measured_in_decode_only_says_which_phase_is_calibrated():
    """The Intel Max 1550 with llama.cpp SYCL is calibrated in decode (its llama-bench -pg -b 1 runs) and has
    no prefill measurement: the report says so per phase instead of calling all its speed the pooled prior."""
    from estimator.report.request import ReportRequest, make_report

    req = ReportRequest(model="llama-3.1-8b", hardware="intel-max-1550", quant="F16")  # SYCL: its default
    d = report_to_dict(make_report(req))
    sp = d["speed"]
    assert sp["decode"]["calibrated"] and not sp["prefill"]["calibrated"] and not sp["calibrated"]
    assert sp["basis"].startswith("decode estimated from calibrated coefficients; prefill from the covar")
    warns = [w for w in d["warnings"] if "figures come from" in w]
    assert warns == [  # the fit's covariates of devices like it (schema 2), not the shipped pooled prior
        "prefill figures come from the covariates of devices like it: no calibrated prefill coefficients for "
        "intel-xe-hpc/llama.cpp (decode is calibrated)"
    ]
    assert "**PARTLY CALIBRATED** — decode estimated" in to_markdown(d)


def test_an_unmodelled_prefill_is_not_called_the_pooled_prior():
    """Quantized prefill on Hopper is NOT MODELLED (llama.cpp's MMQ issues mma.sync): the warning says so
    and names the weights, instead of claiming the family has no calibrated prefill coefficients (its F16
    prefill is fitted); F16 weights on the same device get no such warning."""
    from estimator.report.request import ReportRequest, make_report

    def warnings(quant: str) -> list[str]:
        req = ReportRequest(model="llama-3.1-8b", hardware="h200-141gb-sxm", quant=quant)
        return report_to_dict(make_report(req))["warnings"]

    q4 = warnings("Q4_K_M")
    assert (
        "prefill of Q4_K_M weights is not modelled on nvidia-hopper/llama.cpp (see the notes): its figures "
        "have a wide interval (decode is calibrated)"
    ) in q4
    assert not any("figures come from" in w for w in q4)
    assert not any("not modelled" in w for w in warnings("F16"))


def test_a_configuration_that_does_not_fit_says_its_speeds_assume_it_would(glm):
    """The main job's case (GLM-4.5 Q4_K_M on one MI300X does not fit): the summary says its speeds and cost
    are as if it fit and names the least offload that fits, rounded up so that it does."""
    text = to_text(glm)
    line = next(x for x in text.splitlines() if "As if it fit" in x)
    gib_off = float(line.split("--offload-gib ")[1].split()[0])
    assert gib_off * GIB >= glm["memory"]["min_offload_bytes"] > (gib_off - 0.1) * GIB
    fitted = report(n_ctx=8192, offload_bytes=int(gib_off * GIB))
    assert fitted["memory"]["verdict"] != "does not fit"
    assert "As if it fit" not in to_text(fitted)


def test_offloaded_weights_get_no_serving_estimate_and_the_cost_follows_the_decode():
    """With weights in host RAM the serving model (every weight read from device memory) would price
    output tokens at the speed of a model fully on the device: the serving section declines, and the cost
    is priced at the decode that includes the host reads."""
    full = report(n_ctx=8192)
    off = report(n_ctx=8192, offload_bytes=18 * GIB)
    assert full["serving"]["rows"] and not off["serving"]["rows"] and off["serving"]["slo_point"] is None
    assert "host RAM" in off["serving"]["notes"][0]
    c = off["cost"]
    assert c["aggregate_tok_s"] == pytest.approx(off["speed"]["aggregate"]["tok_s"])
    assert "no serving estimate" in c["aggregate_basis"]
    assert off["speed"]["decode"]["tok_s"] < 0.5 * full["speed"]["decode"]["tok_s"]
    assert c["usd_per_1m_output_tokens"] > 2 * full["cost"]["usd_per_1m_output_tokens"]
    assert "No serving estimate: the configuration keeps weights in host RAM" in to_text(off)


def test_sglangs_serving_section_follows_the_request_lengths():
    """SGLang does not mix prompts into decode steps: with fixed lengths (the default) its clients move in a
    lock-step cohort (longer TTFT, shorter TPOT, a note says so); ``--lengths spread`` gives the staggered
    form and its own note; vLLM's figures do not depend on it."""
    from dataclasses import replace

    args = (get_model("qwen3-32b"), get_hardware("h100-80gb-sxm"), get_quant("BF16"))
    out = {}
    for engine in ("sglang", "vllm"):
        wl = Workload(n_ctx=8192, engine=engine, n_devices=2, split="tp", kv_dtype="bf16")
        for equal in (True, False):
            opts = replace(OPTS, serving_equal_lengths=equal)
            out[engine, equal] = report_to_dict(build_report(*args, wl, TABLE, opts))["serving"]
    fixed, spread = out["sglang", True], out["sglang", False]
    f64, s64 = ({r["concurrency"]: r for r in v["rows"]}[64] for v in (fixed, spread))
    assert f64["ttft_s"] > s64["ttft_s"] and f64["tpot_s"] < s64["tpot_s"]
    assert any("lock step" in n or "together before it decodes" in n for n in fixed["notes"])
    assert any("--lengths spread" in n for n in spread["notes"])
    assert out["vllm", True]["rows"] == out["vllm", False]["rows"]


def test_the_uncalibrated_speed_warning_names_what_the_figures_come_from():
    """A family nobody measured is predicted from the fit's covariates (schema 2): the warning says so; with
    the shipped prior only, it says the pooled prior."""
    from estimator.physics.coefficients import prior_table
    from estimator.report.request import make_workload

    table = load_coefficients(None)
    if not table.calibrated:
        pytest.skip("no results/coefficients.json")
    opts = ReportOptions(hardware_catalog=tuple(all_hardware()), rates=load_cloud_rates())
    args = (get_model("qwen3-8b"), get_hardware("ascend-910b"), get_quant("Q4_0"), make_workload("llama.cpp"))
    said = {}
    for name, t in (("fit", table), ("prior", prior_table())):
        d = report_to_dict(build_report(*args, t, opts))
        said[name] = [w for w in d["warnings"] if "figures come from" in w]
    assert said == {
        "fit": ["speed figures come from the covariates of devices like it: no calibrated coefficients for "
                "huawei-ascend/llama.cpp"],
        "prior": ["speed figures come from the pooled prior: no calibrated coefficients for "
                  "huawei-ascend/llama.cpp"],
    }  # fmt: skip
