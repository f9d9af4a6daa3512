"""Serving calibration on the transfer framework: the serving design over (device, engine, backend) units, its
vectorised time function (the estimator's serving.solve), recovery of KNOWN serving parameters from generated
records, the held-out schemes per metric, and the coefficients document round trip (what the estimator reads:
basis, labels, per-metric intervals of the time)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("estimator.physics.serving")

from calibration import fit as F  # noqa: E402
from calibration import hierarchy as H  # noqa: E402
from calibration import pipeline, serving  # noqa: E402
from calibration.dataset import LoadedRecord, build_dataset, load_dataset  # noqa: E402
from calibration.validate import BASIS_SCHEME, FOLDS, basis_residuals, interval  # noqa: E402
from estimator.catalog.resolve import resolve_hardware  # noqa: E402
from estimator.physics import serving as sv  # noqa: E402
from estimator.physics.coefficients import from_eta, load_coefficients, parse_coefficients  # noqa: E402
from tests.calibration_gen import generate, generate_serving, write_records  # noqa: E402

BASE = {
    "bw_eff": 0.8, "kv_bw_eff": 0.6, "flops_eff": 0.5, "flops_rel_fp4": 1.0, "flops_rel_moe": 0.5,
    "attn_eff": 0.4, "t_fixed_s": 5e-4, "t_layer_s": 2e-5, "t_allreduce_s": 1e-5, "t_seq_s": 2e-5,
    "ttft_fixed_s": 0.03, "queue_share": 0.5,
}  # fmt: skip
TRUTH = {
    "nvidia-hopper": dict(BASE, bw_eff=0.7, ttft_fixed_s=0.04),
    "nvidia-blackwell": dict(BASE, bw_eff=0.6, flops_eff=0.4, ttft_fixed_s=0.05),
    "amd-cdna3": dict(BASE, bw_eff=0.5, ttft_fixed_s=0.08, t_seq_s=5e-5),
}
DEVICES = {
    "h100-80gb-sxm": "nvidia-hopper",
    "h200-141gb-sxm": "nvidia-hopper",
    "b200": "nvidia-blackwell",
    "mi300x": "amd-cdna3",
}


def _theta(state, device: str, key: str) -> float:
    u = next(i for i, un in enumerate(state.design.units) if un[0] == device)
    return float(state.theta[u, [p.key for p in state.design.params].index(key)])


@pytest.fixture(scope="module")
def records():
    return generate_serving(DEVICES, TRUTH, noise=0.02, seed=3)


@pytest.fixture(scope="module")
def points(records):
    ds = build_dataset([LoadedRecord(r, "generated", i) for i, r in enumerate(records)])
    pts, rejected = serving.serving_points(ds)
    assert not rejected and len(pts) == 2 * len(records)
    return pts


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory, records):
    """A results folder with generated decode / prefill records (two Ampere devices) and the serving records;
    ``python -m calibration fit`` equivalent: calibrate + document."""
    root = tmp_path_factory.mktemp("res")
    dec = {"nvidia-ampere": {"bw_eff": 0.62, "t_layer_s": 2e-5, "t_fixed_s": 4e-4}}
    pre = {"nvidia-ampere": {"flops_eff": 0.45, "attn_eff": 0.3, "t_layer_s": 6e-5}}
    speed_recs = generate({"rtx-3090": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere"}, dec, pre,
                          noise=0.03, models=("llama-2-7b", "llama-3.1-8b"), quants=("Q4_0",))  # fmt: skip
    write_records(root / "runs" / "gen.jsonl", speed_recs)
    write_records(root / "runs" / "serving.jsonl", records)
    cal = pipeline.calibrate(load_dataset(root), memory=False, e2e=False)
    doc = pipeline.coefficients_document(cal)
    path = root / "coefficients.json"
    path.write_text(json.dumps(doc))
    return cal, doc, path


def test_serving_engine_term_is_per_vendor():
    """The serving rows regress on ``engine=<e>@<vendor>``: SGLang's ROCm build says nothing about its CUDA
    build (held out by device, one shared term carried the MI300X rows' misfit to the B200: TPOT 20.4 % ->
    13.1 %, docs/calibration.md); on a CPU the term is ``@cpu``; llama.cpp is the reference (no term)."""
    from estimator.physics.covariates import covariates

    groups = ("engine_vendor", "vendor")
    assert covariates(resolve_hardware("mi300x"), "sglang", None, groups) == {
        "engine=sglang@amd": 1.0, "vendor=AMD": 1.0}  # fmt: skip
    assert covariates(resolve_hardware("b200"), "sglang", None, groups) == {"engine=sglang@nvidia": 1.0}
    assert covariates(resolve_hardware("b200"), "vllm", None, ("engine",)) == {"engine=vllm@accel": 1.0}
    cpu = resolve_hardware("epyc-9654")
    assert covariates(cpu, "vllm", None, ("engine_vendor",)) == {"engine=vllm@cpu": 1.0}
    assert covariates(resolve_hardware("b200"), "llama.cpp", None, ("engine_vendor",)) == {}


def test_serving_design_is_units_with_covariates_and_effects(points):
    """The serving fit's own design: only the serving rows of PARAMS, one row per (device, engine, backend,
    build era and settings: "" for every serving point), the engine / vendor covariates and the family /
    device effects each row names."""
    design = H.build_design(points, H.fitted_params((serving.PHASE,)))
    assert {p.phase for p in design.params} == {"serving"}
    assert {p.name for p in design.params} >= {
        "bw_eff",
        "flops_eff",
        "t_seq_s",
        "ttft_fixed_s",
        "queue_share",
    }
    assert design.units == sorted(
        [("b200", "vllm", "CUDA", "", ""), ("h100-80gb-sxm", "vllm", "CUDA", "", ""),
         ("h200-141gb-sxm", "vllm", "CUDA", "", ""), ("mi300x", "vllm", "ROCm", "", "")]
    )  # fmt: skip
    keys = [p.key for p in design.params]
    bw = design.names[keys.index("serving.bw_eff")]
    # the engine term is per vendor: vLLM's ROCm build is not its CUDA build
    assert {"cov:1", "cov:engine=vllm@nvidia", "cov:engine=vllm@amd", "cov:vendor=AMD"} <= set(bw)
    assert "cov:engine=vllm@accel" not in bw
    # the GEMM efficiencies have no engine term (both engines call the same GEMM libraries); flops_eff keeps
    # its vendor term
    for name in ("flops_eff", "flops_rel_moe", "flops_rel_fp4"):
        gemm = design.names[keys.index(f"serving.{name}")]
        assert not [c for c in gemm if c.startswith("cov:engine=")], name
    assert "cov:vendor=AMD" in design.names[keys.index("serving.flops_eff")]
    # the KV read and the decode attention run in shared attention kernels too, the per-request term was
    # confounded with SGLang's MoE rows, a small all-reduce's latency is the interconnect's: a vendor term,
    # no engine term; the link efficiency is each engine's own all-reduce path: an engine term per vendor
    for name in ("kv_bw_eff", "attn_decode_eff", "t_seq_s", "t_allreduce_s"):
        cols = design.names[keys.index(f"serving.{name}")]
        assert "cov:vendor=AMD" in cols and not [c for c in cols if c.startswith("cov:engine=")], name
    link = design.names[keys.index("serving.link_eff")]
    assert {"cov:engine=vllm@nvidia", "cov:engine=vllm@amd"} <= set(link)
    assert "cov:engine=vllm@accel" not in link
    # an engine's MoE path: an engine-wide term and one per vendor
    for name in ("moe_route_s", "bw_rel_moe"):
        cols = set(design.names[keys.index(f"serving.{name}")])
        assert {"cov:engine=vllm@accel", "cov:engine=vllm@nvidia", "cov:engine=vllm@amd"} <= cols, name
    assert {c for c in bw if c.startswith("family:")} == {f"family:{f}" for f in TRUTH}
    assert {c for c in bw if c.startswith("device:")} == {f"device:{d}" for d in DEVICES}
    assert not [c for c in design.names[keys.index("serving.queue_share")] if c.startswith("device:")]
    # the shipped prior is the offset: beta = 0 gives the prior's serving terms
    j = keys.index("serving.ttft_fixed_s")
    assert from_eta(design.params[j], design.offset[0, j]) == pytest.approx(0.02, rel=1e-6)


def test_serving_blocks_are_the_estimator_solve(points):
    """The vectorised serving time of every point equals estimator.physics.serving.solve on its own scalar
    features with its unit's parameters; a record's TTFT and TPOT points share one evaluation row."""
    design = H.build_design(points, H.fitted_params((serving.PHASE,)))
    prob = F.Problem(points, design, serving.SERVING)
    rng = np.random.default_rng(1)
    z = design.prior_mean + rng.normal(0, 0.1, design.n_z)
    lt = prob.log_times(design.eta(z))
    theta = design.theta(z)
    keys = [p.key for p in design.params]
    order = np.concatenate([a.index for a in prob.arrays])
    units = {u: i for i, u in enumerate(design.units)}
    for k, i in enumerate(order):
        p = points[i]
        params = {key.split(".", 1)[1]: float(theta[units[H.unit_key(p)], j]) for j, key in enumerate(keys)}
        t = sv.solve(p.features, params)[p.extra["metric"] + "_s"]
        assert math.log(t) == pytest.approx(lt[k], abs=1e-9)
    assert sum(len(a.row_unit) for a in prob.arrays) == len(points) // 2
    assert set(prob.phase_of) == set(serving.STRATA)


def test_serving_fit_recovers_known_parameters(calibrated):
    """Generated through the estimator's serving model with per-family parameters (2 % noise): the fit
    (calibration.fit, the decode / prefill optimiser with the serving time model) recovers them."""
    cal, _doc, _path = calibrated
    st = cal.serving.state
    assert st.n_points == {"serving": 2 * 4 * 5 * 3 * 2}  # metrics x devices x models x loads
    for dev, fam in DEVICES.items():
        assert _theta(st, dev, "serving.bw_eff") == pytest.approx(TRUTH[fam]["bw_eff"], rel=0.15), dev
        assert _theta(st, dev, "serving.ttft_fixed_s") == pytest.approx(
            TRUTH[fam]["ttft_fixed_s"], rel=0.2
        ), dev
    assert (
        0.005 <= st.scales.sigma["serving.tpot"] <= 0.05 and 0.005 <= st.scales.sigma["serving.ttft"] <= 0.05
    )
    assert np.sqrt(np.mean(st.residuals**2)) < 0.05
    # the decode / prefill fit is its own: no serving parameter in its design
    assert {p.phase for p in cal.speed.state.design.params} == {"decode", "prefill"}


def test_serving_held_out_schemes_per_metric(calibrated):
    """lodo / lomo / lofo refit the serving model per fold; the gate takes lodo for a family with two devices
    (hopper) and lomo for a single-device family; lofo predicts from covariates (basis pooled)."""
    cal, doc, _path = calibrated
    srv = cal.serving
    assert set(srv.held) == {"lodo", "lomo", "lofo"}
    gate = {(h.point.device, h.scheme, h.basis) for h in srv.gate()}
    assert ("h100-80gb-sxm", "lodo", "family") in gate and ("h200-141gb-sxm", "lodo", "family") in gate
    assert ("b200", "lomo (single device)", "device") in gate and (
        "mi300x",
        "lomo (single device)",
        "device",
    ) in gate
    assert {h.basis for h in srv.held["lofo"]} == {"pooled"}
    for stratum in serving.STRATA:
        cv = doc["model"]["cv"][stratum]
        assert {"lodo", "lomo", "lofo", "gate"} <= set(cv) and cv["gate"]["n"] == len(srv.points) // 2
        # a known model, held out by device within its family, is predicted within a few noise widths
        assert cv["gate"]["median_ape"] < 0.1, (stratum, cv["gate"])
    summary = doc["serving"]["cv"]["gate"]
    assert set(summary) == {"all/ttft", "all/tpot", "vllm/ttft", "vllm/tpot"}


def test_serving_intervals_are_of_the_time(calibrated):
    """The serving intervals are the conformal intervals of the held-out ln(t_pred / t_meas), mirrored: of
    ln(t_meas / t_pred), as CoefficientSet.metric_interval applies them to a time."""
    cal, doc, _path = calibrated
    for stratum in serving.STRATA:
        iv = doc["model"]["intervals"][stratum]["device"]
        assert iv["scheme"] == "lomo"
        res = basis_residuals(cal.serving.held, stratum, "device")
        lo, hi = interval(
            [h.log_ratio for h in res], groups=[FOLDS[BASIS_SCHEME["device"]](h.point) for h in res]
        )
        assert (iv["log_lo"], iv["log_hi"]) == (pytest.approx(-hi, abs=1e-4), pytest.approx(-lo, abs=1e-4))
        # too few families for a pooled interval: the shipped prior's serving interval, said so
        pooled = doc["model"]["intervals"][stratum]["pooled"]
        assert pooled["scheme"] == "" and "default" in pooled["note"]
        assert (pooled["log_lo"], pooled["log_hi"]) == (
            (-1.4, 1.0) if stratum.endswith("ttft") else (-0.9, 0.6)
        )


def test_a_lone_requests_ttft_has_its_own_interval(calibrated):
    """serving.ttft_lone: the conformal interval of the TTFT residuals of at most LONE_CONCURRENCY clients
    (the single-stream prefill's and the serving table's low rows); the file carries it, the set reads it,
    and a serving estimate uses it at one client, the all-concurrency TTFT interval at eight."""
    cal, doc, path = calibrated
    every = basis_residuals(cal.serving.held, "serving.ttft", "device")
    lone = [h for h in every if serving.lone_request(h.point)]
    assert 0 < len(lone) < len(every) and all(h.point.extra["concurrency"] <= 4 for h in lone)
    iv = doc["model"]["intervals"]["serving.ttft_lone"]["device"]
    lo, hi = interval([h.log_ratio for h in lone], groups=[FOLDS["lomo"](h.point) for h in lone])
    assert (iv["log_lo"], iv["log_hi"]) == (pytest.approx(-hi, abs=1e-4), pytest.approx(-lo, abs=1e-4))
    assert iv["n_residuals"] == len(lone) and iv["scheme"] == "lomo"
    b200 = resolve_hardware("b200")
    cs = load_coefficients(path).lookup(b200, "vllm", "serving")
    bounds = (pytest.approx(min(iv["log_lo"], 0)), pytest.approx(max(iv["log_hi"], 0)))
    assert cs.intervals["ttft_lone"] == bounds
    assert "TTFT_LONE from leave-one-model-out" in cs.interval_note
    sp = sv.serving_params(load_coefficients(path), b200, "vllm")
    for c, metric in ((1, "ttft_lone"), (8, "ttft")):
        f = sv.serving_features(*_spec("llama-3.1-8b", "BF16", b200), sv.ServingLoad(c, 1024, 256))
        est = sv.with_intervals(sv.point(f, sp.params), sp)
        assert est.ttft_lo_s == pytest.approx(est.ttft_s * math.exp(cs.intervals[metric][0]))


def test_serving_document_round_trip(calibrated):
    """What calibration writes, the estimator reads: serving is in the schema-2 model section; a measured
    device gets basis device with its TTFT / TPOT intervals, a device of an unmeasured family covariates
    (basis pooled), and the labels say which."""
    _cal, doc, path = calibrated
    model = doc["model"]
    assert {e["key"] for e in model["params"]} >= {"decode.bw_eff", "serving.bw_eff", "serving.ttft_fixed_s"}
    assert set(model["sigma"]) == {"decode", "prefill", "serving.ttft", "serving.tpot"}
    assert model["families"]["nvidia-blackwell"]["units"]["vllm/CUDA"]["serving"] == 60
    assert model["devices"]["rtx-3090"]["decode"] > 0 and "serving" not in model["devices"]["rtx-3090"]
    assert model["fits"]["serving"]["converged"] in (True, False)
    parse_coefficients(json.loads(path.read_text()))
    table = load_coefficients(path)
    b200 = resolve_hardware("b200")
    cs = table.lookup(b200, "vllm", "serving")
    assert cs.basis == "device" and cs.source == "calibrated"
    assert cs.label.startswith("calibrated: b200 measured") and "TTFT" in cs.interval_note
    for m in ("ttft", "tpot"):
        iv = model["intervals"][f"serving.{m}"]["device"]
        assert cs.intervals[m] == (pytest.approx(min(iv["log_lo"], 0)), pytest.approx(max(iv["log_hi"], 0)))
    assert cs.params["bw_eff"] == pytest.approx(0.6, rel=0.15)
    sp = sv.serving_params(table, b200, "vllm")
    assert sp.calibrated and sp.label == cs.label and sp.params["ttft_fixed_s"] == cs.params["ttft_fixed_s"]
    f = sv.serving_features(*_spec("llama-3.1-8b", "BF16", b200), sv.ServingLoad(8, 1024, 256))
    est = sv.with_intervals(sv.point(f, sp.params), sp)
    lo, hi = cs.intervals["ttft"]
    assert est.ttft_lo_s == pytest.approx(est.ttft_s * math.exp(lo)) and est.ttft_hi_s >= est.ttft_s
    # a device of a family without serving points: the covariates (and, its decode being uncalibrated for
    # vLLM, the serving fit's step terms), labelled as such
    l40s = resolve_hardware("l40s")
    cs = table.lookup(l40s, "vllm", "serving")
    assert cs.basis == "pooled" and not cs.calibrated and cs.label.startswith("covariates: pooled")
    sp = sv.serving_params(table, l40s, "vllm")
    assert not sp.calibrated and "covariates" in sp.label
    # another engine on a measured device is not "measured": SGLang on B200 is pooled too
    assert table.lookup(b200, "sglang", "serving").basis == "pooled"
    # a CPU (no datasheet TFLOPS) is outside what the serving fit admits: the prior's serving terms, the
    # step from its decode / prefill sets
    cpu = resolve_hardware("ryzen-9-7950x")
    assert table.lookup(cpu, "vllm", "serving").source == "prior"
    assert not sv.serving_params(table, cpu, "vllm").calibrated


def test_model_without_serving_falls_back_to_groups_and_prior(calibrated):
    """A schema-2 file whose model section has no serving parameters (written before the serving port, or
    without serving records) leaves serving to groups / pooled entries and the prior; schema 1 stays
    readable."""
    _cal, doc, path = calibrated
    old = json.loads(path.read_text())
    old["model"]["params"] = [e for e in old["model"]["params"] if not e["key"].startswith("serving.")]
    p2 = path.with_name("no-serving.json")
    p2.write_text(json.dumps(old))
    cs = load_coefficients(p2).lookup(resolve_hardware("b200"), "vllm", "serving")
    assert cs.source == "prior" and cs.label == "pooled prior (uncalibrated)" and cs.basis == ""
    golden = load_coefficients("tests/golden/coefficients.json")
    assert (
        golden.model is None and golden.lookup(resolve_hardware("b200"), "vllm", "serving").phase == "serving"
    )


def test_serving_rejections_say_why():
    """Records with a TTFT / TPOT figure the serving model does not cover are left out with their reason;
    e2e-only records are calibration.latency's, not serving rejections."""
    from dataclasses import replace

    one = {"models": (("llama-3.1-8b", "BF16"),), "concurrencies": (4,), "lengths": ((1024, 128),)}
    (rec,) = generate_serving({"b200": "nvidia-blackwell"}, {"nvidia-blackwell": BASE}, **one)
    recs = [
        replace(rec, record_id="trt", engine="trtllm"),
        replace(rec, record_id="dis", serving_mode="disagg"),
        replace(rec, record_id="big", n_devices=16),
        replace(rec, record_id="noq", quant=""),
        replace(rec, record_id="e2e", ttft_s=None, tpot_s=None, e2e_latency_s=3.0, concurrency=None),
        replace(rec, record_id="ok"),
        # vLLM before its V1 engine: stated by the record, or by its source (SOURCE_BUILDS)
        replace(rec, record_id="v0", engine_version="0.6.3.post1"),
        replace(rec, record_id="argonne", engine_version="",
                extra={**rec.extra, "source_group": "argonne-llm-inference-bench"}),
        replace(rec, record_id="v1", engine_version="0.8.0"),
        replace(rec, record_id="nightly", engine_version="nightly-5b8c30d62b754b57"),
    ]
    ds = build_dataset([LoadedRecord(r, "gen", i) for i, r in enumerate(recs)])
    points, rejected = serving.serving_points(ds)
    assert {p.record_id for p in points} == {"ok", "v1", "nightly"} and len(points) == 6
    why = {r.record_id: r.reason for r in rejected}
    assert set(why) == {"trt", "dis", "big", "noq", "v0", "argonne"}
    assert "TensorRT-LLM" in why["trt"] and "disaggregated" in why["dis"] and "16 devices" in why["big"]
    assert "precision" in why["noq"]
    assert "vLLM 0.6.3.post1 predates 0.8.0" in why["v0"] and "vLLM 0.6.1 predates 0.8.0" in why["argonne"]


def test_the_builds_a_profile_describes():
    from estimator.engines import get_engine

    vllm = get_engine("vllm")
    assert not vllm.describes_build("0.7.3") and not vllm.describes_build("v0.6.1")
    assert not vllm.describes_build("0.6.3.post1") and not vllm.describes_build("0.8.0rc1")
    assert vllm.describes_build("0.8.0") and vllm.describes_build("0.8") and vllm.describes_build("0.10")
    assert vllm.describes_build("1.2.0rc2.post2")
    # not stated, or not a version (nightly builds): taken as described
    assert vllm.describes_build("") and vllm.describes_build("nightly-dev-20260216-d3bae71e")
    assert get_engine("sglang").describes_build("0.1.0")  # no floor set


def _spec(model_id: str, quant: str, hw):
    from estimator.catalog.resolve import resolve_model
    from estimator.physics.quant import get_quant
    from estimator.specs import Workload

    return resolve_model(model_id), get_quant(quant), hw, Workload(n_ctx=2048, kv_dtype="bf16", engine="vllm")


def test_check_gates_tpot_and_ttft_and_report_has_the_serving_section(calibrated, tmp_path):
    """``python -m calibration check`` gates the serving medians (rows per family / engine / metric, the
    overall TPOT / TTFT against 20 % / 35 %, the serving strata per scheme); the report has the serving
    section."""
    from io import StringIO

    from rich.console import Console

    from calibration import check, report

    cal, doc, path = calibrated
    res = check.run_check(path.parent)
    assert res.ok, res.failures
    for metric in ("tpot", "ttft"):
        limit = check.THRESHOLDS[metric]
        n, med, _p90 = res.overall[metric]
        assert n == len(cal.serving.points) // 2 and med is not None and med <= limit
    rows = {(r.family, r.metric): r for r in res.rows if r.metric in ("ttft", "tpot")}
    assert rows[("nvidia-hopper", "tpot")].scheme == "lodo" and rows[("amd-cdna3", "ttft")].n == 30
    assert {(s[0], s[1]) for s in res.schemes} >= {("serving.ttft", "lomo"), ("serving.tpot", "gate")}
    out = StringIO()
    check.render(res, Console(file=out, width=200))
    assert "tpot" in out.getvalue() and "serving.ttft" in out.getvalue()
    md = report.write_report(cal, tmp_path, doc).read_text()
    assert "## Serving at concurrency (TTFT, TPOT)" in md and "| gate | all/tpot |" in md
    assert "| serving.tpot | lomo |" in md  # the headline table holds the serving strata
    gate = check.THRESHOLDS  # the report states the gate's own thresholds
    assert f"TPOT <= {100 * gate['tpot']:.0f} %, TTFT <= {100 * gate['ttft']:.0f} %" in md


def test_shipped_serving_terms_are_per_vendor_at_lookup():
    """The estimator applies the shipped serving fit's engine terms per vendor: on an NVIDIA part SGLang and
    vLLM get their own ``engine=<e>@nvidia`` terms; on a vendor neither engine was measured on (Intel) only
    the engine-wide terms of the MoE path apply, so the two engines share every other serving parameter
    there."""
    from estimator.physics.coefficients import model_params

    model = json.loads(Path("results/coefficients.json").read_text(encoding="utf-8"))["model"]
    beta = {e["key"]: set(e.get("beta", {})) for e in model["params"] if e["key"].startswith("serving.")}
    names = set().union(*beta.values())
    assert {"engine=sglang@nvidia", "engine=vllm@nvidia", "engine=sglang@amd"} <= names
    moe = ("serving.moe_route_s", "serving.bw_rel_moe")
    assert {k for k, cols in beta.items() if any(c.endswith("@accel") for c in cols)} == set(moe)
    h200, intel = resolve_hardware("h200-141gb-sxm"), resolve_hardware("intel-max-1550")

    def serving(hw, engine):
        return model_params(model, hw, engine, "serving", None)

    assert serving(h200, "sglang") != serving(h200, "vllm")
    on_intel = {e: serving(intel, e) for e in ("sglang", "vllm")}
    differ = {k for k in on_intel["vllm"] if on_intel["sglang"][k] != on_intel["vllm"][k]}
    assert differ and differ <= {k.split(".", 1)[1] for k in moe}
