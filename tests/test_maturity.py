"""Backend maturity in calibration (issue 15 item 3): the maturity covariate, leave-one-backend-out and the
widening of an uncalibrated interval that it sets (calibration.maturity)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import fit as F  # noqa: E402
from calibration import maturity  # noqa: E402
from calibration.fit import SpeedPoint  # noqa: E402
from calibration.validate import FOLDS, HeldOut, _reset_groups, holdout  # noqa: E402
from estimator.catalog.data import get_hardware, get_model  # noqa: E402
from estimator.physics import covariates as cov  # noqa: E402
from estimator.physics import fallback, speed  # noqa: E402
from estimator.physics.coefficients import CoefficientsError, load_coefficients, param  # noqa: E402
from estimator.physics.quant import get_quant  # noqa: E402
from estimator.physics.speed import DecodeFeatures  # noqa: E402
from estimator.report.request import make_workload  # noqa: E402
from estimator.specs import HardwareSpec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ATLAS = "atlas-300i-duo-96gb"


# ------------------------------------------------------------------------------------------ the covariate
@pytest.mark.parametrize(
    "hw, backend, want",
    [
        ("intel-max-1550", "SYCL", "developing"),
        ("arc-a770-16gb", "Vulkan", "developing"),
        ("ascend-910b", "CANN", "developing"),
        ("atlas-300i-duo-96gb", "CANN", "experimental"),  # the 310P build: experimental
        ("adreno-x1-85", "OpenCL", "experimental"),
        ("mi300x", "ROCm", None),  # mature: no term
        ("rtx-4090", "CUDA", None),  # the reference backend
    ],
)
def test_maturity_covariate_comes_from_the_support_table(hw, backend, want):
    x = cov.covariates(get_hardware(hw), "llama.cpp", backend, ("backend", "maturity"))
    got = [k.split("=", 1)[1] for k in x if k.startswith("maturity=")]
    assert got == ([want] if want else [])


def test_maturity_is_a_covariate_of_the_levels_only():
    """The level parameters carry it; a backend's own overheads and kernel ratios stay its own."""
    for key in (("decode", "bw_eff"), ("prefill", "flops_eff"), ("prefill", "attn_eff")):
        assert "maturity" in param(*key).covariates
    for key in (("decode", "t_fixed_s"), ("decode", "t_layer_s"), ("decode", "bw_rel_q4_0")):
        assert "maturity" not in param(*key).covariates
    # other engines: their engine terms carry the platform (vLLM's ROCm build is "developing" too)
    assert not cov.covariates(get_hardware("mi300x"), "vllm", "ROCm", ("maturity",))


# --------------------------------------------------------------------------- leave-one-backend-out
def _points(devices: dict[str, tuple[str, float]], n: int = 12, seed: int = 0) -> list[SpeedPoint]:
    """Synthetic decode points: device -> (backend, bandwidth efficiency); 2 % noise."""
    rng = np.random.default_rng(seed)
    pts = []
    for dev, (backend, eff) in devices.items():
        hw = HardwareSpec(id=dev, name=dev, vendor="v", family=f"fam-{dev}", kind="gpu", memory_bytes=None,
                          bandwidth_gbs=1000.0, bf16_tflops=100.0, memory_type="GDDR6")  # fmt: skip
        for i in range(n):
            f = DecodeFeatures(
                weight_bytes=1e9 * (1 + i % 4), kv_bytes=0.0, host_bytes=0.0, expert_union_bytes=0.0,
                flops_per_token=0.0, batch=1, n_layers=24, n_moe_layers=0, hidden_size=1,
                n_devices=1, split="tp", fp8=False, engine="llama.cpp",
            )  # fmt: skip
            t = 3e-4 + 1e-5 * f.n_layers + f.bytes_per_token / (1e12 * eff)
            t_meas = t * math.exp(rng.normal(0, 0.02))
            pts.append(SpeedPoint([f], hw, t_meas, "decode", hw.family, "llama.cpp", backend, dev,
                                  f"m{i % 4}", vendor="v", kind="gpu"))  # fmt: skip
    return pts


DEVICES = {
    "c1": ("CUDA", 0.8), "c2": ("CUDA", 0.8), "c3": ("CUDA", 0.8), "c4": ("CUDA", 0.8),
    "s1": ("SYCL", 0.3), "s2": ("SYCL", 0.3),
    "v1": ("Vulkan", 0.3), "v2": ("Vulkan", 0.3),
}  # fmt: skip


def _lobo_vulkan_error(pts, targets) -> float:
    full = F.fit_model(pts)
    held, _ = holdout(pts, full, "lobo", subset=targets)
    assert FOLDS["lobo"](held[0].point) in ("llama.cpp/SYCL", "llama.cpp/Vulkan")
    return float(np.median([h.ape for h in held if h.point.backend == "Vulkan"]))


def test_a_held_out_backend_inherits_its_maturity(monkeypatch):
    """Vulkan held out: with the maturity term the fit learns from SYCL that a developing backend reaches
    less of the roofline; without it Vulkan gets CUDA's level (2.4x too fast)."""
    pts = _points(DEVICES)
    targets = maturity.new_backend_targets(pts)
    assert {pts[i].backend for i in targets} == {"SYCL", "Vulkan"}  # CUDA is mature: not a target
    with_term = _lobo_vulkan_error(pts, targets)
    monkeypatch.setattr(cov, "backend_maturity", lambda *a, **k: "")  # no maturity covariate
    without = _lobo_vulkan_error(pts, targets)
    assert without > 1.0  # 1.42 on this data
    # 0.64: SYCL's shift is split between its own term and the maturity term (equal priors), so about half
    # of it reaches Vulkan
    assert with_term < 0.6 * without


def test_lobo_resets_the_held_out_backends_own_term():
    """The warm start of a lobo fold carries nothing of the held-out backend: its backend=<b> columns are at
    their prior mean (0), the other backends' untouched."""
    pts = _points(DEVICES)
    full = F.fit_model(pts)
    d = full.design
    vulkan = [i for i, g in enumerate(d.col_group) if d.col_kind[i] == "cov" and g == "backend=Vulkan"]
    sycl = [i for i, g in enumerate(d.col_group) if d.col_kind[i] == "cov" and g == "backend=SYCL"]
    assert vulkan and sycl and np.any(np.abs(full.z[vulkan]) > 1e-3)
    z = _reset_groups(full, [p for p in pts if p.backend == "Vulkan"], "lobo")
    assert np.all(z[vulkan] == d.prior_mean[vulkan])
    assert np.array_equal(z[sycl], full.z[sycl])


# ------------------------------------------------------------------------------------------- the widening
def _held(backend: str, hw_id: str, log_ratios) -> list[HeldOut]:
    hw = get_hardware(hw_id)
    out = []
    for r in log_ratios:
        p = SpeedPoint([], hw, 1.0, "decode", hw.family, "llama.cpp", backend, hw.id, "m", vendor="v",
                       kind="gpu")
        out.append(HeldOut(p, r, "lobo", "pooled"))
    return out


INTERVALS = {"decode": {"pooled": {"log_lo": -0.5, "log_hi": 0.4}}}


def test_widening_is_how_far_below_the_pooled_interval_held_out_backends_fall():
    held = _held("Vulkan", "arc-a770-16gb", [-0.2] * 10 + [-1.3])
    held += _held("SYCL", "intel-max-1550", [-0.9] * 6)
    w = maturity.widening(held, INTERVALS)
    dev = w["developing"]
    assert dev["source"] == "lobo" and dev["n_residuals"] == 17
    assert dev["backends"]["llama.cpp/SYCL"] == {"n": 6, "median_ape": pytest.approx(math.exp(0.9) - 1, 1e-3),
                                                 "median_log_ratio": -0.9}  # fmt: skip
    # SYCL sits 0.4 below the pooled bound, Vulkan's tail 0.8: one vote per backend -> between them
    assert -0.8 <= dev["log_lo"] <= -0.4
    # one experimental backend is no evidence of a maturity: the shipped default stays, and says so
    exp = maturity.widening(held + _held("OpenCL", "adreno-x1-85", [-2.0] * 8), INTERVALS)["experimental"]
    assert exp["source"] == "default" and exp["log_lo"] == fallback.MATURITY_LOG_LO["experimental"]
    assert "shipped" in exp["note"]


def test_widening_is_never_positive():
    held = _held("Vulkan", "arc-a770-16gb", [0.1] * 6) + _held("SYCL", "intel-max-1550", [0.2] * 6)
    assert maturity.widening(held, INTERVALS)["developing"]["log_lo"] == 0.0


# ----------------------------------------------------------------------------------- the estimator side
def test_the_estimator_uses_the_calibrated_widening(tmp_path):
    """A coefficients file with model.maturity widens an uncalibrated prediction on a developing backend by
    its value; without it the shipped default applies; a positive widening is refused with its key."""
    import json

    from estimator.physics.coefficients import DEFAULT_PATH

    if not DEFAULT_PATH.is_file():
        pytest.skip("results/coefficients.json is not there")
    doc = json.loads(DEFAULT_PATH.read_text())
    m, q, h = get_model("qwen3-8b"), get_quant("Q4_K_M"), get_hardware("ascend-910b")
    wl = replace(make_workload("llama.cpp"), n_prompt=0, n_gen=128)
    widen = {}
    for name, value in (("none", None), ("fitted", -0.9)):
        d = json.loads(json.dumps(doc))
        d["model"].pop("maturity", None)
        if value is not None:
            d["model"]["maturity"] = {"developing": {"log_lo": value}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(d))
        widen[name] = speed.speed_sets(load_coefficients(path), m, q, h, wl).widen_lo
    assert widen == {"none": fallback.MATURITY_LOG_LO["developing"], "fitted": -0.9}
    d["model"]["maturity"] = {"developing": {"log_lo": 0.3}}
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(CoefficientsError, match="model.maturity.developing.log_lo"):
        load_coefficients(tmp_path / "bad.json")


def test_the_shipped_file_carries_the_widening_it_measured():
    table = load_coefficients(None)
    if not table.calibrated:
        pytest.skip("no results/coefficients.json")
    mat = table.model["maturity"]
    assert mat["developing"]["source"] == "lobo"  # Vulkan and SYCL measured: the widening is measured
    assert set(mat["developing"]["backends"]) >= {"llama.cpp/SYCL", "llama.cpp/Vulkan"}
    assert table.maturity_log_lo("developing") == mat["developing"]["log_lo"] <= 0
    assert table.maturity_log_lo("mature") is None
    # experimental has one measured backend: the file repeats the shipped default; the estimator: "assumed"
    assert mat["experimental"]["source"] == "default" and table.maturity_log_lo("experimental") is None


def test_the_speed_notes_say_how_much_and_whether_it_was_measured():
    """An uncalibrated prediction on a less mature backend names the widening and where it comes from."""
    table = load_coefficients(None)
    if not table.calibrated:
        pytest.skip("no results/coefficients.json")
    notes = {}
    cases = (("ascend-910b", "qwen3-8b", "Q4_0"), ("atlas-300i-duo-96gb", "qwen3-4b", "Q4_K_M"))
    for hw, model, quant in cases:
        m, q, h = get_model(model), get_quant(quant), get_hardware(hw)
        wl = make_workload("llama.cpp")
        rep = speed.estimate_speed(m, q, h, wl, table)
        notes[hw] = [n for n in rep.notes if n.startswith("backend maturity")]
    x = math.exp(table.maturity_log_lo("developing"))
    assert notes["ascend-910b"] == [
        f"backend maturity (developing): the lower bound is widened x{x:.2f} (measured: backends of this "
        "maturity held out)"
    ]
    assert notes["atlas-300i-duo-96gb"] == [
        "backend maturity (experimental): the lower bound is widened x0.37 (assumed)"
    ]


# ------------------------------------------------------------------------ out-of-sample evidence (the 310P)
def test_records_no_fit_saw_are_predicted_out_of_sample():
    """The 310P's published rows are "approximate" (set aside by the dataset, not fitted) or run on a host-CPU
    fallback: the calibration report predicts them with the fitted coefficients and says whether each lies
    inside the interval a report shows."""
    from calibration.dataset import load_dataset

    ds = load_dataset(ROOT / "results")
    table = load_coefficients(None)
    if not table.calibrated or not any(lr.record.hardware_id == ATLAS for lr in ds.set_aside):
        pytest.skip("needs results/coefficients.json and `make published`")
    assert all(lr.record.hardware_id != ATLAS for lr in ds.records)  # none of them is fitted
    rows = maturity.evidence(ds.records + ds.set_aside, table, ds.qualities)
    atlas = {r["quant"]: r for r in rows if r["hardware"] == ATLAS}
    assert set(atlas) == {"Q4_0", "Q8_0", "F16"}  # the 8x 310P3 row states no n_gen: the dataset rejects it
    assert atlas["Q4_0"]["path"] == "host CPU fallback" and atlas["F16"]["path"] == "device fallback"
    assert all(r["inside"] and r["maturity"] == "experimental" for r in atlas.values())
    assert all(r["why"] == "quality 'approximate' is not fitted" or r["path"] == "host CPU fallback"
               for r in atlas.values())  # fmt: skip
    # no "suspect" record is evidence, every row is on a less mature backend, and a record of a fitted
    # quality on its native path is a point of the fit, not evidence
    assert all(r.get("quality") != "suspect" for r in rows)
    assert all(r["maturity"] in maturity.LESS_MATURE for r in rows if "error" not in r)
    assert not [r for r in rows if r.get("path") == "native" and r["quality"] in ds.qualities]


def test_the_report_section_names_the_widening_its_source_and_the_evidence():
    from calibration.report import _maturity_lines

    sycl = {"n": 20, "median_ape": 1.075, "median_log_ratio": -0.73}
    doc = {"model": {"maturity": {
        "developing": {"log_lo": -0.558, "n_residuals": 70, "source": "lobo",
                       "backends": {"llama.cpp/SYCL": sycl}},
        "experimental": {"log_lo": -1.0, "n_residuals": 2, "source": "default", "backends": {}},
    }}}  # fmt: skip
    ev = [{"where": "f:1", "hardware": ATLAS, "n_devices": 1, "model": "m", "quant": "F16", "path": "native",
           "measured_tok_s": 6.0, "tok_s": 7.1, "lo_tok_s": 0.8, "hi_tok_s": 13.0, "inside": True,
           "why": "quality 'approximate' is not fitted"},
          {"where": "f:2", "error": "device 'x' has no bandwidth in the catalog"}]  # fmt: skip
    text = "\n".join(_maturity_lines(doc, ev))
    assert "| developing | llama.cpp/SYCL | 20 | 107.5% | -0.73 |" in text
    assert "| developing | -0.558 | x0.57 | leave-one-backend-out | 70 |" in text
    assert "| experimental | -1.000 | x0.37 | shipped default (too few backends) | 2 |" in text
    assert "1 of 1 inside their interval" in text and "| 6 | 7.1 (0.8-13) | yes |" in text
    assert "1 such record(s) could not be predicted: f:2 (device 'x' has no bandwidth" in text
    assert _maturity_lines({"model": {}}, ev) == []
