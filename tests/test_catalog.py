"""Catalog data: every model and device loads; ids and HF ids resolve; bad ids name the closest ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog import data as catalog
from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.physics.weights import weight_breakdown
from estimator.specs import GIB, LAYER_KINDS, SpecError

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT.parent / "shared" / "reference"
# the catalog's source: tests that compare against it or rebuild from it skip when it is not beside the repo
needs_reference = pytest.mark.skipif(
    not (REF / "models.json").is_file() or not (REF / "hardware.csv").is_file(),
    reason=f"{REF} is absent (../shared/reference, the catalog's source, is not beside the repository)",
)


@pytest.mark.parametrize("mid", catalog.model_ids())
def test_every_model_loads_or_says_why(mid):
    entry = catalog.model_entry(mid)
    assert entry["source"] or entry["unsizable_reason"]
    if not entry["sizable"]:
        with pytest.raises(SpecError, match="not sizable"):
            catalog.get_model(mid)
        return
    m = catalog.get_model(mid)
    assert len(m.layer_types) == m.n_layers and set(m.layer_types) <= set(LAYER_KINDS)
    assert m.head_dim > 0 and m.vocab_size > 0 and m.max_context > 0
    ref = entry["reference"]
    if ref["computed_total_params_B"]:  # parameter counts agree with the reference within 1 %
        wb = weight_breakdown(m, "BF16")
        assert wb.n_params_total / 1e9 == pytest.approx(ref["computed_total_params_B"], rel=0.01)
        assert wb.n_params_active / 1e9 == pytest.approx(ref["computed_active_params_B"], rel=0.01)


@pytest.mark.parametrize("mid", [m for m in catalog.model_ids() if catalog.model_entry(m)["sizable"]])
def test_kv_per_token_matches_reference(mid):
    from estimator.physics.kv import layer_token_bytes

    ref = catalog.model_entry(mid)["reference"]
    m = catalog.get_model(mid)
    per = layer_token_bytes(m, "bf16", "llama.cpp")
    if ref["kv_bytes_per_token_bf16_full_layers"] is not None:
        assert per["full"] == ref["kv_bytes_per_token_bf16_full_layers"]
        assert per["sliding"] + per["chunked"] == (ref["kv_bytes_per_token_bf16_windowed_layers"] or 0)


@needs_reference
def test_catalog_covers_reference_and_keeps_provenance():
    ref = json.loads((REF / "models.json").read_text()) + json.loads((REF / "models_extra.json").read_text())
    added = json.loads((ROOT / "tools" / "catalog" / "models_added.json").read_text())["models"]
    hf = {catalog.model_entry(e["hf_id"])["hf_id"] for e in ref + added}
    assert len(hf) == len(ref) + len(added) == len(catalog.model_ids())
    for e in ref:
        c = catalog.model_entry(e["hf_id"])
        assert c["source"] == e["source"] and c["verified"] == e["verified"]
    for e in added:  # this repository's additions: a config.json copy with its source
        c = catalog.model_entry(e["hf_id"])
        assert c["source"].startswith("https://github.com/")
        assert c["config_source"].startswith("tools/catalog/")


def test_model_aliases_resolve_to_the_same_architecture_with_their_note():
    for alias, mid, quant in [
        ("nvidia/DeepSeek-R1-NVFP4", "deepseek-r1", "NVFP4"),
        ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3", "NVFP4"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "FP8-BLOCK"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2", None),
        ("zhipuai/GLM-5", "glm-5", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
    ]:
        assert resolve_model(alias).id == mid
        (a,) = [a for a in catalog.model_entry(alias)["aliases"] if a["alias"] == alias]
        assert a["quant"] == quant and a["note"]
    glm5 = resolve_model("glm-5")
    assert glm5.mla is not None and glm5.moe.n_experts == 256 and glm5.n_layers == 78
    wb = weight_breakdown(resolve_model("qwen3.5-397b-a17b"), "BF16")
    assert wb.n_params_total / 1e9 == pytest.approx(397, rel=0.01)
    assert wb.n_params_active / 1e9 == pytest.approx(17, rel=0.03)


def test_added_devices_and_published_names_resolve():
    for name, hid in [("h100_sxm", "h100-80gb-sxm"), ("b200_sxm", "b200"), ("gb200", "gb200-per-gpu"),
                      ("Intel PVC GPU", "intel-max-1550"), ("NVIDIA A30", "a30"), ("mi300x", "mi300x")]:
        assert resolve_hardware(name).id == hid
    added = [d for d in catalog._hardware_raw().values() if d["catalog_file"].startswith("tools/catalog/")]
    assert len(added) >= 20
    for d in added:
        assert d["source"] and d["verified_notes"].startswith("status=") and d["family"]
        assert d["bandwidth_gbs"] and d["memory_gb"]
    assert catalog.get_hardware("a30").bf16_tflops == 165


def test_short_and_hf_ids_resolve_case_insensitively():
    for arg, mid in [
        ("glm-4.5", "glm-4.5"),
        ("zai-org/GLM-4.5", "glm-4.5"),
        ("GLM-4.5-Air", "glm-4.5-air"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("deepseek-v3", "deepseek-v3"),
        ("gemma-3-27b", "gemma-3-27b"),
        ("qwen3-0.6b", "qwen3-0.6b"),
        ("qwen3-next-80b-a3b", "qwen3-next-80b-a3b"),
        ("llama-3.1-8b", "llama-3.1-8b"),
        ("gpt-oss-120b", "gpt-oss-120b"),
        ("gemma-4-26b-a4b", "gemma-4-26b-a4b"),
        ("nemotron-3-super-120b-a12b", "nemotron-3-super-120b-a12b"),
    ]:
        assert resolve_model(arg).id == mid


def test_unknown_model_names_three_closest():
    with pytest.raises(SpecError, match="closest: ") as exc:
        resolve_model("glm-4.6")
    assert len(str(exc.value).split("closest: ")[1].split(", ")) == 3
    assert "glm-4.5" in str(exc.value)


def test_license_known_for_headline_models():
    assert catalog.get_model("glm-4.5").license == "MIT"
    assert catalog.get_model("qwen3-0.6b").license == "Apache-2.0"
    assert "Llama" in catalog.get_model("llama-3.1-8b").license


@pytest.mark.parametrize("hid", catalog.hardware_ids())
def test_every_device_loads(hid):
    hw = catalog.get_hardware(hid)
    assert hw.kind in ("gpu", "unified", "cpu", "npu")
    assert hw.status in ("verified", "derived", "partial", "unverified")
    assert hw.source and hw.family
    assert hw.host_bandwidth_gbs is None or hw.host_bandwidth_gbs > 0


def test_device_values_and_kinds():
    h = catalog.get_hardware("MI300X")
    assert h.memory_bytes == 192 * GIB and h.bandwidth_gbs == 5300 and h.kind == "gpu"
    assert catalog.get_hardware("mac-studio-m3-ultra-512gb").kind == "unified"
    assert catalog.get_hardware("epyc-9654").kind == "cpu"
    with pytest.raises(SpecError, match="closest: "):
        resolve_hardware("mi300")


def test_custom_hardware():
    hw = resolve_hardware("custom", memory_gib=48, bandwidth_gbs=900, tflops=150, family="my-family")
    assert hw.memory_bytes == 48 * GIB and hw.family == "my-family" and hw.bf16_tflops == 150
    with pytest.raises(SpecError, match="--memory-gib"):
        resolve_hardware("custom", bandwidth_gbs=900)


@needs_reference
def test_build_catalog_is_reproducible(tmp_path):
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "build_catalog.py"),
            "--reference",
            str(REF),
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    for name in ("models.json", "hardware.json"):
        assert (tmp_path / name).read_text() == (ROOT / "estimator" / "data" / name).read_text()
