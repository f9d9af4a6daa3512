"""The compute-buffer band: how the engine's own buffers spread around the fitted estimate
(calibration.memory_fit.memory_bands), read back by the estimator (CoefficientTable.memory_band) and said in
the report's memory section with the command that prints llama.cpp's own figure."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from calibration import memory_fit
from estimator.catalog.data import all_hardware, get_hardware, get_model
from estimator.physics.coefficients import CoefficientsError, load_coefficients, parse_coefficients
from estimator.physics.quant import get_quant
from estimator.report.document import build_report, report_to_dict, to_html, to_text
from estimator.report.units import ReportOptions
from estimator.specs import Workload
from tests.test_calibration_memory import _compute_records, _ds

# a fixture shaped like the calibrated llama.cpp band (results/coefficients.json memory_bands, 2026-12-05):
# the report's arithmetic on it is what these tests check, not the band's values
BAND = {"n": 700, "median_ape": 0.0064, "within_5pct": 0.944, "ratio_p05": 0.99, "ratio_p95": 1.05,
        "ratio_min": 0.87, "ratio_max": 1.25, "basis": "in sample"}  # fmt: skip


def test_residual_band_known_answer():
    ratios = [1.0] * 18 + [0.9, 1.3]
    b = memory_fit.residual_band(ratios)
    assert b["n"] == 20 and b["within_5pct"] == pytest.approx(0.9)
    assert (b["ratio_min"], b["ratio_max"], b["median_ape"]) == (0.9, 1.3, 0.0)
    # numpy's linear quantile: position 0.95 x 19 = 18.05 between 1.0 and 1.3 (sorted), 0.05 x 19 = 0.95
    assert b["ratio_p95"] == pytest.approx(1.0 + 0.05 * 0.3)
    assert b["ratio_p05"] == pytest.approx(0.9 + 0.95 * 0.1)


def test_bands_count_each_measurement_once_and_see_an_outlier():
    from estimator.physics.runtime import default_memory_coefficients

    coeffs = default_memory_coefficients("llama.cpp")
    recs = _compute_records(coeffs)
    # another test row of the first run (same buffers): one measurement, not two
    twin = replace(recs[0], record_id="twin", n_gen=64)
    bands = memory_fit.memory_bands(_ds([*recs, twin]), {"llama.cpp": coeffs})
    b = bands["llama.cpp"]["compute_bytes"]
    assert b["n"] == len(recs) and b["within_5pct"] == 1.0
    assert b["ratio_min"] == pytest.approx(1.0, abs=1e-6) and b["ratio_max"] == pytest.approx(1.0, abs=1e-6)
    # one configuration whose engine allocated 20 % more than the formula: the band's top says so
    out = replace(recs[1], compute_bytes=int(recs[1].compute_bytes * 1.2))
    b = memory_fit.memory_bands(_ds([recs[0], out, *recs[2:]]), {"llama.cpp": coeffs})["llama.cpp"]
    assert b["compute_bytes"]["ratio_max"] == pytest.approx(1.2, rel=1e-6)
    assert b["compute_bytes"]["within_5pct"] == pytest.approx(1 - 1 / len(recs))
    assert "context_overhead_bytes" not in b  # no device-memory figures in these records


def test_bands_by_device_kind(monkeypatch):
    """Each device kind measured gets its own band next to the pooled one (CUDA buffers spread wider than
    CPU ones); one kind alone gets none."""
    from estimator.physics.runtime import default_memory_coefficients

    coeffs = default_memory_coefficients("llama.cpp")
    gpu = _compute_records(coeffs)[:9]  # rtx-3090
    cpu = [replace(r, record_id=f"cpu-{r.record_id}", hardware_id="ryzen-7-8840u-cpu", backend="CPU",
                   hardware_family="cpu-x86-avx512") for r in gpu]  # fmt: skip
    from calibration.features import Resolver, workload_for
    from estimator.physics.runtime import runtime_buffers

    res = Resolver()
    # the band is the formula's spread (a CPU replay of these llama graphs would be exact: no band)
    cpu = [replace(r, compute_bytes=int(1.1 * runtime_buffers(*res.spec_for(r), workload_for(r), coeffs,
                                                               replay=False).compute_bytes))
           for r in cpu]  # fmt: skip
    monkeypatch.setattr(memory_fit, "MIN_KIND_BAND", 5)
    b = memory_fit.memory_bands(_ds(gpu + cpu), {"llama.cpp": coeffs})["llama.cpp"]["compute_bytes"]
    assert b["n"] == 18 and set(b["by_kind"]) == {"cpu", "gpu"}
    assert b["by_kind"]["cpu"]["ratio_min"] == pytest.approx(1.1, rel=1e-3)
    assert b["by_kind"]["gpu"]["ratio_max"] == pytest.approx(1.0, rel=1e-6)
    one = memory_fit.memory_bands(_ds(gpu), {"llama.cpp": coeffs})["llama.cpp"]["compute_bytes"]
    assert "by_kind" not in one


def test_the_estimator_reads_the_band_of_its_device_kind(tmp_path):
    gpu_band = {**BAND, "ratio_p95": 1.13, "n": 42}
    gpu_band.pop("basis")
    table = _table(tmp_path, {"llama.cpp": {"compute_bytes": {**BAND, "by_kind": {"gpu": gpu_band}}}})
    assert table.memory_band("llama.cpp", kind="gpu")["ratio_p95"] == 1.13
    assert table.memory_band("llama.cpp", kind="gpu")["scope"] == "gpu"
    assert table.memory_band("llama.cpp", kind="unified")["scope"] == "all"
    d = _memory(table, hw="h100-80gb-sxm", model="qwen3-30b-a3b", n_ctx=32768)
    assert d["memory"]["compute_band"]["scope"] == "gpu" and d["memory"]["compute_band"]["n"] == 42
    assert "42 measured configurations on GPUs" in " ".join(to_text(d).split())
    assert "configuraciones medidas en GPU" in " ".join(to_text(d, lang="es").split())


def _doc(bands) -> dict:
    return {"schema_version": 1, "groups": [], "pooled": [], "memory_bands": bands}


@pytest.mark.parametrize(
    "bands, message",
    [
        ([], "'memory_bands' must be an object"),
        ({"llama.cpp": {"compute_bytes": {**BAND, "ratio_p95": "big"}}}, "non-numeric key 'ratio_p95'"),
        ({"llama.cpp": {"compute_bytes": {k: v for k, v in BAND.items() if k != "n"}}}, "key 'n'"),
        ({"llama.cpp": {"compute_bytes": {**BAND, "ratio_p05": 1.2}}}, "ratio_p05 <= ratio_p95"),
        ({"llama.cpp": {"compute_bytes": {**BAND, "by_kind": {"gpu": {"n": 3}}}}}, r"\['gpu'\]: missing"),
    ],
)
def test_malformed_bands_name_the_key(bands, message):
    with pytest.raises(CoefficientsError, match=message):
        parse_coefficients(_doc(bands), "coefficients.json")


def _table(tmp_path, bands=None):
    doc = json.loads(open("results/coefficients.json").read())
    doc.pop("memory_bands", None)
    if bands is not None:
        doc["memory_bands"] = bands
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps(doc))
    return load_coefficients(path)


# a model whose CPU buffers come from the formula (Cohere 2: not built, tests/test_llama_cpp_graph.py)
FORMULA_MODEL = "cohere-command-a-111b"


def _memory(table, model=FORMULA_MODEL, hw="ryzen-7-8840u-cpu", quant="Q4_K_M", **wl):
    opts = ReportOptions(hardware_catalog=tuple(all_hardware()))
    rep = build_report(get_model(model), get_hardware(hw), get_quant(quant), Workload(**wl), table, opts)
    return report_to_dict(rep)


def test_report_states_the_band_and_the_exact_command(tmp_path):
    table = _table(tmp_path, {"llama.cpp": {"compute_bytes": BAND}})
    assert table.memory_band("llama.cpp") == {**BAND, "scope": "all"} and table.memory_band("vllm") is None
    d = _memory(table, n_ctx=131072, flash_attn=False, n_ubatch=1024)
    band = d["memory"]["compute_band"]
    assert band["ratio_hi"] == 1.05 and band["n"] == 700
    assert band["compute_hi_bytes"] == int(band["compute_bytes"] * 1.05)
    assert band["exact_command"] == (
        f"python -m harness memory-fit --model {FORMULA_MODEL} --ctx 131072 --ubatch 1024 --fa off"
    )
    assert not band["tight"]
    text = " ".join(to_text(d).split())  # the terminal wraps lines
    assert "90% of 700 measured configurations" in text and band["exact_command"] in text
    # no band in the file, or another engine: nothing is claimed
    assert _memory(_table(tmp_path), n_ctx=4096)["memory"]["compute_band"] is None
    assert _memory(table, quant="BF16", engine="vllm")["memory"]["compute_band"] is None


def test_a_fit_inside_the_band_is_called_tight(tmp_path):
    """It fits, but the headroom is under the compute buffers' 95th-percentile excess: the report says so."""
    table = _table(tmp_path, {"llama.cpp": {"compute_bytes": {**BAND, "ratio_p95": 1.5}}})
    mem = _memory(table, n_ctx=4096)["memory"]
    excess = mem["compute_band"]["compute_hi_bytes"] - mem["compute_band"]["compute_bytes"]
    # a CPU's usable memory is 0.9 x its RAM (the prior): half the excess of headroom
    ram = int((mem["total_bytes"] + excess // 2) / 0.9)
    hw = replace(get_hardware("ryzen-7-8840u-cpu"), memory_bytes=ram)
    opts = ReportOptions(hardware_catalog=tuple(all_hardware()))
    rep = build_report(get_model(FORMULA_MODEL), hw, get_quant("Q4_K_M"), Workload(n_ctx=4096), table, opts)
    d = report_to_dict(rep)
    assert d["memory"]["verdict"] == "fits" and d["memory"]["compute_band"]["tight"]
    text = " ".join(to_text(d).split())
    assert "Tight: the headroom is smaller" in text  # the memory section
    assert "Tight: the compute buffers may take" in text.split("── Model")[0]  # and the answer panel
    assert "tight: under the compute buffers" in to_html(d)
    es = " ".join(to_text(d, lang="es").split())
    assert "Justo: los buffers de cómputo pueden ocupar" in es and "Tight" not in es
    assert "justo: menor que el exceso" in to_html(d, lang="es")


def test_predict_writes_the_banded_compute_buffers(tmp_path):
    """predict: compute_bytes always; compute_bytes_hi, total_bytes_hi and tight with a band, else empty."""
    from estimator.app.predict import predict_one

    row = {"model": FORMULA_MODEL, "hardware": "ryzen-7-8840u-cpu", "n_prompt": "512", "n_gen": "0",
           "n_ctx": "131072"}  # fmt: skip
    out = predict_one(row, _table(tmp_path, {"llama.cpp": {"compute_bytes": {**BAND, "ratio_p95": 1.2}}}))
    compute, total = int(out["compute_bytes"]), int(out["total_bytes"])
    assert 0 < compute <= int(out["runtime_bytes"])
    assert int(out["compute_bytes_hi"]) == int(compute * 1.2)
    assert int(out["total_bytes_hi"]) == int(total + 0.2 * compute) and out["tight"] == "false"
    bare = predict_one(row, _table(tmp_path))
    assert bare["compute_bytes"] == out["compute_bytes"]
    assert (bare["compute_bytes_hi"], bare["total_bytes_hi"], bare["tight"]) == ("", "", "")
