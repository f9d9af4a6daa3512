"""End-to-end latency records (llama-bench -pg, vLLM offline batches) predicted by the estimator from the fit:
prefill of B x n_prompt tokens + n_gen decode steps of B sequences."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import dataset, latency, pipeline  # noqa: E402
from calibration.dataset import load_dataset  # noqa: E402
from calibration.features import workload_for  # noqa: E402
from estimator.catalog.resolve import resolve_hardware, resolve_model  # noqa: E402
from estimator.physics import speed  # noqa: E402
from estimator.physics.quant import get_quant  # noqa: E402
from tests.calibration_gen import base_record, generate, write_records  # noqa: E402

DEVICES = {"rtx-3090": "nvidia-ampere", "rtx-a6000": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere"}
DEC = {"nvidia-ampere": {"bw_eff": 0.7, "t_layer_s": 2e-5, "t_fixed_s": 4e-4}}
PRE = {"nvidia-ampere": {"flops_eff": 0.45, "attn_eff": 0.3, "t_layer_s": 6e-5}}


def _e2e(hw_id: str, build: str, batch: int, n_batch_raw: str | None, rid: str, engine: str = "llama.cpp"):
    """An e2e record whose latency is the estimator's sum with the generating parameters."""
    rec = base_record(
        record_id=rid, engine=engine, hardware_id=hw_id, hardware_family="nvidia-ampere",
        model_id="llama-2-7b", quant="Q4_0",
        n_prompt=128, n_gen=128, batch=batch, decode_tok_s=None, build_info=build, schema_version=2,
        n_batch=None, extra={"published": {"batch_raw": n_batch_raw}} if n_batch_raw else {},
    )  # fmt: skip
    m, q, hw = resolve_model("llama-2-7b"), get_quant("Q4_0"), resolve_hardware(hw_id)
    wl = replace(workload_for(rec), n_seq=batch, n_depth=0)
    if n_batch_raw:
        wl = replace(wl, n_batch=int(n_batch_raw.split()[1]))
    pp = {**PRE["nvidia-ampere"], "bw_eff": DEC["nvidia-ampere"]["bw_eff"]}
    dp = {**DEC["nvidia-ampere"], "flops_eff": PRE["nvidia-ampere"]["flops_eff"]}
    t = speed.prompt_s(speed.prefill_features(m, q, wl), hw, pp, dp)  # -b 1: decode steps
    t += 128 * speed.decode_step_s(speed.tg_features(m, q, wl, 128, 128), hw, dp)
    return replace(rec, e2e_latency_s=t)


def test_stated_n_batch_reads_llama_bench_b_from_the_published_row():
    r = base_record(n_batch=None, extra={"published": {"batch_raw": "n_batch 16"}})
    assert dataset.stated_n_batch(r) == 16
    assert dataset.stated_n_batch(replace(r, n_batch=64)) == 64
    assert dataset.stated_n_batch(replace(r, extra={"published": {"batch_raw": "512"}})) is None


def test_only_prompt_plus_generate_and_offline_batches_are_e2e():
    r = base_record(e2e_latency_s=1.0, build_info="llama.cpp (llama-bench -pg)")
    assert dataset.is_e2e(r)
    assert dataset.is_e2e(replace(r, build_info="vLLM (offline LLM.generate batch latency)"))
    assert not dataset.is_e2e(replace(r, build_info="vLLM serving benchmark"))
    assert not dataset.is_e2e(replace(r, e2e_latency_s=None))


def test_e2e_latency_is_predicted_from_the_fit(tmp_path):
    recs = generate(DEVICES, DEC, PRE, noise=0.01, seed=3, quants=("Q4_0", "Q8_0"))
    e2e = [
        _e2e("rtx-3090", "llama.cpp (llama-bench -pg)", 1, "n_batch 16", "e1"),
        _e2e("rtx-3090", "llama.cpp (llama-bench -pg)", 1, "n_batch 1", "e2"),
        _e2e("rtx-a6000", "llama.cpp (llama-bench -pg)", 1, None, "e3"),
        _e2e("a100-80gb-pcie", "vLLM (offline LLM.generate batch latency)", 8, None, "e4", "vllm"),
    ]
    # the vLLM run is Argonne's: no build of its own, the source's v0.6.1 (older than the V1 engine)
    e2e[3] = replace(e2e[3], engine_version="", extra={"source_group": "argonne-llm-inference-bench"})
    write_records(tmp_path / "runs" / "gen.jsonl", recs + e2e)
    ds = load_dataset(tmp_path)
    assert len(ds.serving_records) == 4
    cal = pipeline.calibrate(ds, cv=True, memory=False, schemes=("lodo",))
    assert len(cal.latency) == 4 and {r.scheme for r in cal.latency_held["full"]} == {"full"}
    for r in cal.latency_held["full"]:
        assert r.ape < 0.05, (r.point.where, r.predicted_s, r.point.measured_s)
    # n_batch 1 prefills token by token: 128 decode steps, much slower than n_batch 16
    by_id = {r.point.measured_s: r for r in cal.latency_held["full"]}
    assert len(by_id) == 4
    one = [r for r in cal.latency_held["full"] if r.point.prefill.decode_steps]
    assert len(one) == 1 and one[0].point.workload.n_batch == 1
    lodo = cal.latency_held["lodo"]
    assert len(lodo) == 4 and all(r.ape < 0.15 for r in lodo)
    summary = latency.summary(cal.latency_held)
    assert summary["full"]["n"] == 4 and summary["full"]["by_engine"]["vllm"]["n"] == 1
    older = {(d["engine"], d["build"]): d["older_than_profile"] for d in summary["full"]["by_device"]}
    assert older[("vllm", "0.6.1")] is True
    assert not any(v for (eng, _b), v in older.items() if eng == "llama.cpp")
    # the V0 run has an as-built stratum of its own; one run is too few for terms (calibration.asbuilt), so
    # the full prediction is the speed model's; the llama.cpp runs (current builds) have none
    assert [r.point.stratum for r in cal.latency_held["full"]] == ["", "", "", "vllm/CUDA/0.6.1"]
    bare = {id(r.point): r.predicted_s for r in cal.latency_held["full_no_terms"]}
    assert all(r.predicted_s == pytest.approx(bare[id(r.point)]) for r in cal.latency_held["full"])
    terms = summary["full"]["terms"]
    assert list(terms) == ["vllm/CUDA/0.6.1"] and terms["vllm/CUDA/0.6.1"]["n"] == 1
    assert terms["vllm/CUDA/0.6.1"]["time_scale_ln"] == 0.0


def test_one_token_prefill_records_are_decode_points():
    """A pp record prefilled one token per pass (llama-bench -b 1) measures decode steps: it becomes a decode
    point over the prompt's depths (step = 1 / prefill_tok_s), as the estimator predicts it; a batch of such
    sequences is left out with a reason."""
    from calibration.dataset import LoadedRecord, build_dataset
    from calibration.features import speed_points

    rec = base_record(
        record_id="pp-b1", model_id="llama-2-7b", quant="Q4_0", hardware_id="rtx-3090", n_prompt=128, n_gen=0,
        decode_tok_s=None, prefill_tok_s=40.0, n_batch=1, schema_version=2,
    )  # fmt: skip
    two = replace(rec, record_id="pp-b1-x2", batch=2)
    pts, rejected = speed_points(build_dataset([LoadedRecord(rec, "gen", 1), LoadedRecord(two, "gen", 2)]))
    assert [(p.phase, p.extra.get("one_token_prefill")) for p in pts] == [("decode", True)]
    assert pts[0].measured_s == pytest.approx(1 / 40.0) and pts[0].extra["n_prompt"] == 128
    assert len(rejected) == 1 and "one token per pass" in rejected[0].reason


def _run(rid: str, hw_id: str, n_batch_raw: str, n_devices: int = 1, latency_s: float = 12.8):
    return base_record(
        record_id=rid, engine="llama.cpp", hardware_id=hw_id, model_id="llama-2-7b", quant="Q4_0",
        n_prompt=128, n_gen=128, batch=1, decode_tok_s=None, build_info="llama.cpp (llama-bench -pg)",
        schema_version=2, n_batch=None, n_devices=n_devices, e2e_latency_s=latency_s,
        extra={"published": {"batch_raw": n_batch_raw}},
    )  # fmt: skip


def test_one_token_runs_are_the_decode_evidence_of_a_device_without_tg():
    """llama-bench -pg 128,128 -b 1 on one device is 256 decode steps from depth 0: a decode point of step
    e2e / 256 whose features are those of tg256 at depth 0, when the device has no tg record.  A -b 16 run
    (prompt GEMMs), a two-device run and a run on a device with tg records are not points."""
    from calibration.dataset import LoadedRecord, build_dataset
    from calibration.features import speed_points

    tg = base_record(record_id="tg", model_id="llama-2-7b", quant="Q4_0", hardware_id="rtx-3090", n_prompt=0,
                     n_gen=128, decode_tok_s=100.0, schema_version=2)  # fmt: skip
    recs = [
        _run("a100-b1", "a100-80gb-pcie", "n_batch 1"),
        _run("a100-b16", "a100-80gb-pcie", "n_batch 16"),
        _run("a100-x2", "a100-80gb-pcie", "n_batch 1", n_devices=2),
        _run("3090-b1", "rtx-3090", "n_batch 1"),
        tg,
    ]
    ds = build_dataset([LoadedRecord(r, "gen", i) for i, r in enumerate(recs)])
    assert len(ds.serving_records) == 4
    pts, _rejected = speed_points(ds)
    runs = [p for p in pts if p.extra.get("one_token_run")]
    assert [p.record_id for p in runs] == ["a100-b1"]
    assert runs[0].phase == "decode" and runs[0].measured_s == pytest.approx(12.8 / 256)
    m, q = resolve_model("llama-2-7b"), get_quant("Q4_0")
    wl = replace(workload_for(recs[0]), n_batch=1, n_seq=1, n_depth=0)
    want = speed.mean_features(speed.tg_features(m, q, wl, 0, 256))
    assert runs[0].features == [want]
    # the tg record of the 3090 is its decode evidence; its -b 1 run is the end-to-end check only
    assert [p.record_id for p in pts if p.device == "rtx-3090"] == ["tg"]


def test_fitted_runs_are_marked_and_left_out_of_the_not_fitted_error():
    recs = generate(DEVICES, DEC, PRE, noise=0.01, seed=3, quants=("Q4_0",))
    recs = [r for r in recs if r.hardware_id != "a100-80gb-pcie" or r.decode_tok_s is None]
    e2e = [
        _e2e("a100-80gb-pcie", "llama.cpp (llama-bench -pg)", 1, "n_batch 1", "fit-me"),
        _e2e("rtx-3090", "llama.cpp (llama-bench -pg)", 1, "n_batch 1", "check-only"),
    ]
    ds = build_from(recs + e2e)
    cal = pipeline.calibrate(ds, cv=False, memory=False, serve=False)
    fitted = {r.point.where: r.point.fitted for r in cal.latency_held["full"]}
    assert sorted(fitted.values()) == [False, True]
    s = latency.summary(cal.latency_held)["full"]
    assert s["n"] == 2 and s["not_fitted"]["n"] == 1
    assert sum(d["n_fitted"] for d in s["by_device"]) == 1


def build_from(recs):
    from calibration.dataset import LoadedRecord, build_dataset

    return build_dataset([LoadedRecord(r, "gen", i) for i, r in enumerate(recs)])


def test_a_record_of_a_model_the_catalog_lacks_names_it():
    """Argonne's GH200 rows of Deci/DeciLM-7B import without a model_id (no catalog entry: its KV head count
    differs per layer, which a ModelSpec does not describe): left out with the model the source names, not
    an empty-argument error."""
    from calibration.dataset import LoadedRecord, build_dataset

    rec = _e2e("a100-80gb-pcie", "vLLM (offline LLM.generate batch latency)", 1, None, "aq", engine="vllm")
    rec = replace(rec, model_id="", extra={"published": {"model_name": "Deci/DeciLM-7B"}})
    _, rejected = latency.latency_points(build_dataset([LoadedRecord(rec, "gen", 1)]))
    assert len(rejected) == 1
    assert "model not stated: the source names 'Deci/DeciLM-7B', which the catalog does not hold" in (
        rejected[0].reason
    )


def test_a_vllm_run_past_the_model_context_is_left_out_and_llama_bench_s_is_kept():
    """vLLM stops a sequence once prompt + output reach the model's context (Llama-2-7B: 4,096 tokens), so a
    batch of 2,048 + 2,049 tokens generated fewer tokens than it states (Argonne's llama-7b 2,048 + 2,048 runs
    took 0.05-3 s on the GH200): left out with why.  llama-bench sizes its context to the test, so its run of
    the same lengths is predicted; a vLLM run of exactly 4,096 tokens is too."""
    vllm = _e2e("a100-80gb-pcie", "vLLM (offline LLM.generate batch latency)", 1, None, "v", engine="vllm")
    over = replace(vllm, record_id="over", n_prompt=2048, n_gen=2049)
    exact = replace(vllm, record_id="exact", n_prompt=2048, n_gen=2048)
    cpp = _e2e("rtx-3090", "llama.cpp (llama-bench -pg)", 1, "n_batch 16", "cpp")
    cpp = replace(cpp, n_prompt=2048, n_gen=2049)
    points, rejected = latency.latency_points(build_from([over, exact, cpp]))
    assert sorted((p.engine, p.workload.n_gen) for p in points) == [("llama.cpp", 2049), ("vllm", 2048)]
    assert [r.line for r in rejected] == [0]
    assert rejected[0].reason == (
        "e2e features: 2048 + 2049 tokens exceed llama-2-7b's context of 4096: vLLM stops a sequence there, "
        "so the run generated fewer tokens than it states"
    )


def test_the_context_check_is_the_engine_profile_s_and_counts_the_depth():
    """check_context (the serving points' too): SGLang caps like vLLM, a depth counts toward the context, an
    engine that sizes its own context (llama.cpp) is never capped."""
    from calibration.features import check_context
    from estimator.specs import SpecError

    model = resolve_model("llama-2-7b")
    rec = base_record(model_id="llama-2-7b", n_prompt=2048, n_gen=1024, n_depth=1024)
    check_context(model, replace(rec, engine="sglang"))  # 4,096 tokens: within
    with pytest.raises(SpecError, match=r"^1025 \+ 2048 \+ 1024 tokens exceed .*SGLang stops a sequence"):
        check_context(model, replace(rec, engine="sglang", n_depth=1025))
    check_context(model, replace(rec, engine="llama.cpp", n_depth=1025))


def test_era_params_move_the_build_terms_as_the_fit_does():
    """A 2024 build: every parameter with the build covariate moves by its build=2024 coefficient in its
    transformed space, decode borrows the moved prefill flops_eff, prefill streams at bw_eff / build_scale."""
    import math

    from estimator.physics.coefficients import from_eta, param, to_eta

    model = {"params": [
        {"key": "decode.build_scale", "beta": {"1": 0.0, "build=2024": math.log(1.2)}},
        {"key": "prefill.flops_eff", "beta": {"1": 0.1, "build=2024": -0.3}},
        {"key": "decode.bw_eff", "beta": {"1": 0.2}},  # no build covariate: untouched
    ]}  # fmt: skip
    dp = {"bw_eff": 0.7, "build_scale": 1.0, "flops_eff": 0.5, "t_fixed_s": 3e-4}
    pp = {"bw_eff": 0.7, "flops_eff": 0.5, "attn_eff": 0.3}
    dp2, pp2, step = latency.era_params(model, "2024", dp, pp)
    fe = param("prefill", "flops_eff")
    assert step == pytest.approx(1.2)
    assert pp2["flops_eff"] == pytest.approx(float(from_eta(fe, to_eta(fe, 0.5) - 0.3)))
    assert dp2["flops_eff"] == pp2["flops_eff"] and pp2["bw_eff"] == pytest.approx(0.7 / 1.2)
    assert dp2["bw_eff"] == 0.7 and dp2["t_fixed_s"] == 3e-4 and pp2["attn_eff"] == 0.3
    assert (dp, pp) == ({"bw_eff": 0.7, "build_scale": 1.0, "flops_eff": 0.5, "t_fixed_s": 3e-4},
                        {"bw_eff": 0.7, "flops_eff": 0.5, "attn_eff": 0.3})  # fmt: skip
    assert latency.era_params(model, "", dp, pp)[2] == 1.0  # a current build


def test_a_2024_run_is_predicted_as_built_and_a_current_one_as_is():
    """Argonne's llama.cpp runs are mid-2024 builds: with the shipped coefficients a -b 1 run (decode steps
    only) takes exactly the fitted step factor, a -b 16 run's prompt the 2024 GEMM term too; the same runs
    predicted as current builds are what a report says."""
    from calibration.dataset import LoadedRecord, build_dataset
    from estimator.physics.coefficients import load_coefficients

    table = load_coefficients()
    terms = {e["key"]: e.get("beta", {}) for e in table.model["params"]}
    if "build=2024" not in terms.get("decode.build_scale", {}):
        pytest.skip("the shipped coefficients carry no 2024 step factor")
    recs = [_run("b1", "rtx-3090", "n_batch 1"), _run("b16", "rtx-3090", "n_batch 16")]
    argonne = {"source_group": "argonne-llm-inference-bench"}
    old = [replace(r, record_id=f"{r.record_id}-2024", extra={**r.extra, **argonne}) for r in recs]
    ds = build_dataset([LoadedRecord(r, "gen", i) for i, r in enumerate(recs + old)])
    pts, rejected = latency.latency_points(ds)
    assert not rejected and [p.era for p in pts] == ["", "", "2024", "2024"]
    as_built = [latency.predict_s(p, table)[0] for p in pts]
    current = [latency.predict_s(p, table, as_built=False)[0] for p in pts]
    assert as_built[:2] == current[:2] == current[2:]  # current builds; the 2024 runs named as current ones
    step = math.exp(terms["decode.build_scale"]["build=2024"]) * table.lookup(
        pts[2].hardware, "llama.cpp", "decode").params["build_scale"]
    assert step > 1.0
    assert as_built[2] == pytest.approx(current[2] * step, rel=1e-9)  # -b 1: decode steps x build_scale
    assert current[3] < as_built[3]  # -b 16: prompt GEMMs at the 2024 flops_eff and bw_eff / build_scale


def test_run_components_count_what_the_as_built_terms_act_on():
    """calibration.asbuilt's inputs of a run: its modelled seconds (predict_s), FLOPs at the speed model's
    GEMM rate, grouped-KV layer-tokens only for a model that shares KV heads (one-token prompt passes and
    decode steps, summed over their depths) and layer-passes only over more than one device."""
    from dataclasses import replace as _replace

    from calibration.dataset import LoadedRecord, build_dataset
    from estimator.physics.coefficients import load_coefficients

    table = load_coefficients()
    mha = _run("mha", "rtx-3090", "n_batch 1")
    gqa = _replace(_run("gqa", "rtx-3090", "n_batch 1", n_devices=2), model_id="mistral-7b-v0.3")
    batched = _replace(_run("b64", "rtx-3090", "n_batch 64", n_devices=2), model_id="mistral-7b-v0.3")
    ds = build_dataset([LoadedRecord(r, "gen", i) for i, r in enumerate((mha, gqa, batched))])
    pts, rejected = latency.latency_points(ds)
    assert not rejected and [p.stratum for p in pts] == ["", "", ""]  # undated llama.cpp: current builds
    comps = [latency.run_components(p, table)[0] for p in pts]
    assert [c.t_model_s for c in comps] == [latency.predict_s(p, table)[0] for p in pts]
    assert comps[0].gqa_layer_tokens == 0.0 and not comps[0].multi and comps[0].multi_layer_passes == 0.0
    layers = pts[1].model.n_layers
    p, g = 128, 128
    assert pts[1].model.n_kv_heads < pts[1].model.n_heads
    assert comps[1].gqa_layer_tokens == pytest.approx(layers * (g * (p + (g - 1) / 2) + p * (p - 1) / 2))
    assert comps[1].multi and comps[1].multi_layer_passes == layers * (g + p)  # -b 1: a pass per token
    assert comps[2].gqa_layer_tokens == pytest.approx(layers * g * (p + (g - 1) / 2))  # decode steps only
    assert comps[2].multi_layer_passes == layers * (g + 2)  # 128 prompt tokens in two passes of 64
    flops_token = 2 * 7.2e9  # ~2 x parameters per token, attention aside
    assert comps[1].flops == pytest.approx(256 * flops_token, rel=0.15)
    assert comps[1].gemm_flops_s > 0
