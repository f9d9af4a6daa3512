"""``chart_data``: series consistent with the report tables, fitting configurations only, honest costs."""

import pytest

from estimator.catalog.data import all_hardware, get_hardware, get_model
from estimator.catalog.rates import load_cloud_rates
from estimator.physics import speed, stream
from estimator.physics.coefficients import load_coefficients
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.report.document import build_report, report_to_dict
from estimator.report.sections.charts import AMORTISE_YEARS
from estimator.report.sizing import Sizing as Physics
from estimator.report.units import ReportOptions
from estimator.specs import Workload

TABLE = load_coefficients(None)
RATES = load_cloud_rates()
OPTS = ReportOptions(hardware_catalog=tuple(all_hardware()), rates=RATES)


def report(model, hw, quant, **wl):
    return report_to_dict(
        build_report(get_model(model), get_hardware(hw), get_quant(quant), Workload(**wl), TABLE, OPTS)
    )


@pytest.fixture(scope="module")
def glm():
    return report("glm-4.5", "mi300x", "Q4_K_M", n_ctx=8192)


def test_context_by_kv_matches_the_tables(glm):
    by_kv = glm["chart_data"]["context_by_kv"]
    assert list(by_kv) == ["f16", "q8_0", "q4_0"]  # llama.cpp dtypes of the KV options; no fp8
    assert by_kv["f16"] == [[r["n_ctx"], r["total_bytes"]] for r in glm["context_scaling"]]
    options = {o["kv_dtype"]: o for o in glm["kv"]["options"]}
    for dt, pts in by_kv.items():
        at = dict(pts)
        assert at[8192] == options[dt]["total_bytes"], dt
        assert [b for _, b in pts] == sorted(b for _, b in pts)  # grows with context
    assert by_kv["q4_0"][-1][1] < by_kv["q8_0"][-1][1] < by_kv["f16"][-1][1]


def test_context_by_kv_vllm_dtypes():
    d = report("llama-3.1-8b", "rtx-4090", "BF16", n_ctx=8192, engine="vllm")
    assert list(d["chart_data"]["context_by_kv"]) == ["f16", "fp8"]


def test_prefill_by_quant_is_the_speed_sections_prefill(glm):
    pre = glm["chart_data"]["prefill_by_quant"]
    assert set(pre) == {r["quant"] for r in glm["quant_matrix"] if r["decode"]}
    assert pre["Q4_K_M"] == glm["speed"]["prefill"]
    for f in pre.values():
        assert f["lo_tok_s"] <= f["tok_s"] <= f["hi_tok_s"] and f["coefficients"]
    assert pre["Q2_K"]["tok_s"] != pre["BF16"]["tok_s"]


def test_hardware_comparison_fits_and_is_minimal(glm):
    opts = glm["chart_data"]["hardware_comparison"]
    assert len(opts) > 10
    model, quant = get_model("glm-4.5"), get_quant("Q4_K_M")
    for o in opts:
        hw = get_hardware(o["hardware_id"])
        assert o["headroom_bytes"] >= 0 and o["required_bytes"] <= o["memory_bytes"]
        assert hw.kind != "cpu"
        if o["n_devices"] > 1:
            assert hw.kind in ("gpu", "npu") and hw.interconnect_gbs, o["hardware_id"]
            fewer = Workload(n_ctx=8192, n_devices=o["n_devices"] // 2)
            assert estimate_memory(model, quant, hw, fewer).verdict != "fits", o["hardware_id"]
        if o["decode_tok_s"] and o["usd_per_hour"]:
            assert o["usd_per_1m_output_tokens"] == pytest.approx(
                o["usd_per_hour"] / (o["decode_tok_s"] * 3600) * 1e6
            )
    ids = {(o["hardware_id"], o["n_devices"]) for o in opts}
    assert ("mi300x", 2) in ids and ("apple-m3-ultra", 1) in ids
    assert not any(o["selected"] for o in opts)  # 1 x MI300X does not hold it
    speeds = [o["decode_tok_s"] for o in opts if o["decode_tok_s"] is not None]
    assert speeds == sorted(speeds, reverse=True)


def test_hardware_comparison_costs_say_where_they_come_from(glm):
    opts = {(o["hardware_id"], o["n_devices"]): o for o in glm["chart_data"]["hardware_comparison"]}
    with_rate = {r.hardware_id for r in RATES}
    for (hid, n), o in opts.items():
        if hid in with_rate:
            assert o["rate_origin"].startswith("cloud rate") and o["rate_provider"], hid
        elif o["purchase_usd"]:
            assert o["rate_origin"] == "amortised purchase + power"
            hw = get_hardware(hid)
            expect = hw.price_usd * n / (AMORTISE_YEARS * 365.25 * 4.0) + (hw.tdp_w or 0) * n / 1000 * 0.15
            assert o["usd_per_hour"] == pytest.approx(expect)
        else:
            assert o["rate_origin"] == "none" and o["usd_per_hour"] is None
    assert any("amortised" in n and "assumption" in n for n in glm["chart_data"]["notes"])


def test_selected_configuration_comes_first_when_it_fits():
    d = report("llama-3.1-8b", "rtx-4090", "Q4_K_M", n_ctx=8192)
    first = d["chart_data"]["hardware_comparison"][0]
    assert first["selected"] and (first["hardware_id"], first["n_devices"]) == ("rtx-4090", 1)
    assert first["decode_tok_s"] == pytest.approx(d["speed"]["decode"]["tok_s"])


@pytest.mark.parametrize(
    "model, hw, wl",
    [
        ("glm-4.5", "h100-80gb-sxm", {"n_devices": 4}),
        ("glm-4.5", "h100-80gb-sxm", {"n_devices": 4, "split": "pp", "moe_offload_layers": 10}),
        ("llama-3.1-8b", "rtx-4090", {"engine": "vllm", "n_depth": 1000, "n_gen": 64}),
        ("gemma-3-27b", "apple-m3-ultra", {}),
    ],
)
def test_shared_decode_features_equal_mean_decode_step(model, hw, wl):
    m, h, q, w = get_model(model), get_hardware(hw), get_quant("Q4_K_M"), Workload(**wl)
    feats = speed.tg_features(m, q, w, int(w.n_depth), int(w.n_gen))
    sets = stream.speed_sets(TABLE, m, q, h, w)
    # vLLM on a GPU without a decode set of its own: one stream on the serving fit's step (physics.stream)
    assert (sets.stream is not None) == (w.engine == "vllm")
    if sets.stream is not None:
        step = sum(sets.stream.decode_s(f) for f in feats) / len(feats)
    else:
        _, _, dparams, _ = speed.merged_params(TABLE, h, w.engine)
        step = speed.decode_step_s(feats, h, dparams)
    assert Physics(m, TABLE).decode(q, h, w).tok_s == pytest.approx(1.0 / step, rel=1e-12)
