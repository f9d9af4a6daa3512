"""As-built terms of end-to-end runs of older engine builds (calibration.asbuilt): what they act on, that the
fit finds terms that generated the times, that runs of a current build get none, and that a fold's terms never
see its held-out runs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from calibration import asbuilt, latency


def _runs(n: int, seed: int = 0) -> list[asbuilt.RunComponents]:
    """Runs with model seconds 1-100 s, FLOPs that bind the floor only when the rate drops several-fold,
    grouped-KV layer-tokens on half of them and more than one device on a third."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        t = float(rng.uniform(1.0, 100.0))
        multi = i % 3 == 0
        out.append(asbuilt.RunComponents(
            t_model_s=t, flops=float(t * 1e14 * rng.uniform(0.05, 0.5)), gemm_flops_s=1e14,
            gqa_layer_tokens=float(rng.uniform(1e6, 5e8)) if i % 2 else 0.0,
            multi_layer_passes=float(rng.uniform(1e3, 3e4)) if multi else 0.0, multi=multi,
        ))  # fmt: skip
    return out


TRUE = {"time_scale_ln": 0.4, "gqa_attention_us": 0.12, "compute_deficit_ln": 2.0, "multi_device_ln": 0.5,
        "multi_device_layer_ms": 0.3}  # fmt: skip


def test_the_fit_finds_the_terms_that_made_the_times():
    comps = _runs(300)
    rng = np.random.default_rng(1)
    measured = [asbuilt.apply_terms(TRUE, c) * math.exp(rng.normal(0, 0.02)) for c in comps]
    got = asbuilt.fit_terms(comps, measured)
    assert got["time_scale_ln"] == pytest.approx(0.4, abs=0.03)
    assert got["gqa_attention_us"] == pytest.approx(0.12, rel=0.15)
    assert got["compute_deficit_ln"] == pytest.approx(2.0, abs=0.05)
    assert got["multi_device_ln"] == pytest.approx(0.5, abs=0.05)
    assert got["multi_device_layer_ms"] == pytest.approx(0.3, rel=0.25)
    pred = [asbuilt.apply_terms(got, c) for c in comps]
    assert np.median(np.abs(np.log(np.array(pred) / measured))) < 0.03
    assert "GEMMs at 14 % of the current rate" in asbuilt.describe(got)


def test_runs_the_model_already_times_keep_terms_near_zero_and_few_runs_get_none():
    comps = _runs(60, seed=2)
    got = asbuilt.fit_terms(comps, [c.t_model_s for c in comps])
    assert abs(got["time_scale_ln"]) < 0.01 and got["compute_deficit_ln"] < 0.05
    assert abs(got["multi_device_ln"]) < 0.01 and got["multi_device_layer_ms"] < 0.01
    assert got["gqa_attention_us"] < 0.01
    few = asbuilt.fit_terms(comps[: asbuilt.MIN_RUNS - 1], [10 * c.t_model_s for c in comps[:9]])
    assert set(few.values()) == {0.0}
    assert asbuilt.apply_terms(None, comps[0]) == comps[0].t_model_s
    assert asbuilt.apply_terms(few, comps[0]) == pytest.approx(comps[0].t_model_s)
    # a device without a datasheet peak (NaN rate) has no compute floor, however large the deficit
    no_peak = asbuilt.RunComponents(t_model_s=2.0, flops=1e18, gemm_flops_s=math.nan, gqa_layer_tokens=0.0,
                                    multi_layer_passes=0.0, multi=False)  # fmt: skip
    deficit = {**dict.fromkeys(asbuilt.TERMS, 0.0), "compute_deficit_ln": 5.0}
    assert asbuilt.apply_terms(deficit, no_peak) == 2.0


def test_only_builds_older_than_the_profile_have_a_stratum():
    assert asbuilt.stratum("llama.cpp", "ROCm", "", "2024") == "llama.cpp/ROCm/2024"
    assert asbuilt.stratum("vllm", "ROCm", "0.6.1", "") == "vllm/ROCm/0.6.1"  # V0: older than the V1 profile
    assert asbuilt.stratum("vllm", "CUDA", "0.11.0", "") == ""  # a build the profile describes
    assert asbuilt.stratum("llama.cpp", "CUDA", "", "") == ""  # undated llama.cpp: a current build


def test_a_fold_fits_its_terms_without_the_held_out_runs():
    """fit_strata with a fold's filter gives the terms of the other runs alone, whatever the held-out runs
    measured; runs of a current build (no stratum) are never fitted."""
    comps = _runs(80, seed=3)
    pts, pairs = [], []
    for i, c in enumerate(comps):
        dev = "x" if i < 20 else "y"
        st = "" if i % 10 == 9 else "vllm/ROCm/0.6.1"
        scale = 50.0 if dev == "x" else 1.0  # the held-out device measured something else entirely
        pts.append(SimpleNamespace(device=dev, stratum=st, measured_s=asbuilt.apply_terms(TRUE, c) * scale))
        pairs.append((c, "pooled"))
    held = latency.fit_strata(pts, pairs, lambda lp: lp.device != "x")
    alone = latency.fit_strata(pts[20:], pairs[20:])
    assert held == alone and list(held) == ["vllm/ROCm/0.6.1"]
    assert held["vllm/ROCm/0.6.1"]["time_scale_ln"] == pytest.approx(0.4, abs=0.05)
    everything = latency.fit_strata(pts, pairs)["vllm/ROCm/0.6.1"]
    assert everything["time_scale_ln"] > held["vllm/ROCm/0.6.1"]["time_scale_ln"] + 0.03  # soft-L1: robust


def test_the_report_lists_each_stratum_s_terms_and_the_figure_without_them():
    from calibration.report import _scheme_lines

    terms = {**TRUE, "n": 300, "devices": ["mi300x"], "reads": asbuilt.describe(TRUE)}
    row = {"engine": "vllm", "device": "mi300x", "n_devices": 1, "basis": "pooled", "build": "0.6.1",
           "older_than_profile": True, "n": 300, "n_fitted": 0, "median_ape": 0.1, "median_log_ratio": -0.01,
           "median_log_ratio_no_terms": -0.68}  # fmt: skip
    e2e = {"full": {"n": 300, "median_ape": 0.1, "p90_ape": 0.4, "by_engine": {}, "by_device": [row],
                    "terms": {"vllm/ROCm/0.6.1": terms}}}  # fmt: skip
    doc = {"model": {"cv": {"decode": {}}, "coverage": {}, "e2e": e2e}}
    text = "\n".join(_scheme_lines(doc))
    assert "| vllm | mi300x | 1 | pooled | 0.6.1 *older* | 300 | 0 | 10.0% | -0.01 | -0.68 |" in text
    assert "| vllm/ROCm/0.6.1 | 300 | mi300x | +0.400 | 0.120 | 2.000 | +0.500 | 0.300 |" in text
    assert "GEMMs at 14 % of the current rate" in text
