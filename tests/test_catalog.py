"""Catalog data: every model and device loads; ids and HF ids resolve; bad ids name the closest ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog import data as catalog
from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.physics.weights import tensor_inventory, weight_breakdown
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
        # the reference leaves out DeepSeek-V3.2's DSA indexer ("indexer weights not in computed params")
        idx = sum(t.n_elements for t in tensor_inventory(m) if ".indexer." in t.name)
        assert (wb.n_params_total - idx) / 1e9 == pytest.approx(ref["computed_total_params_B"], rel=0.01)
        assert (wb.n_params_active - idx) / 1e9 == pytest.approx(ref["computed_active_params_B"], rel=0.01)


@pytest.mark.parametrize("mid", [m for m in catalog.model_ids() if catalog.model_entry(m)["sizable"]])
def test_kv_per_token_matches_reference(mid):
    from estimator.physics.kv import layer_token_bytes

    ref = catalog.model_entry(mid)["reference"]
    m = catalog.get_model(mid)
    per = layer_token_bytes(m, "bf16", "llama.cpp")
    if ref["kv_bytes_per_token_bf16_full_layers"] is not None:
        # the reference counts K alone on K==V layers (Gemma 4's full layers); llama.cpp and vLLM cache V as
        # well (llama.cpp's memory-fit pass, tests/test_memory.py::test_gemma4_caches_v_on_its_k_eq_v_layers)
        k_eq_v = 2 if m.k_eq_v else 1
        # and leaves out DeepSeek-V3.2's indexer keys (one index_head_dim row per layer, bf16 here)
        indexer = 2 * m.mla.index_head_dim * m.n_layers if m.mla is not None and m.mla.index_n_heads else 0
        assert per["full"] == k_eq_v * ref["kv_bytes_per_token_bf16_full_layers"] + indexer
        assert per["sliding"] + per["chunked"] == (ref["kv_bytes_per_token_bf16_windowed_layers"] or 0)


@needs_reference
def test_catalog_covers_reference_and_keeps_provenance():
    ref = json.loads((REF / "models.json").read_text()) + json.loads((REF / "models_extra.json").read_text())
    added = json.loads((ROOT / "tools" / "catalog" / "models_added.json").read_text())["models"]
    completes = {e["hf_id"] for e in added if e.get("completes")}
    hf = {catalog.model_entry(e["hf_id"])["hf_id"] for e in ref + added}
    assert len(hf) == len(ref) + len(added) - len(completes) == len(catalog.model_ids())
    for e in ref:
        c = catalog.model_entry(e["hf_id"])
        if e["hf_id"] in completes:  # a reference entry without a config.json, completed here
            assert not e.get("hidden_size") and c["sizable"] and c["name"] == e["name"]
        else:
            assert c["source"] == e["source"] and c["verified"] == e["verified"]
    for e in added:  # this repository's additions: a config.json copy with its source
        c = catalog.model_entry(e["hf_id"])
        if e.get("completes") or c["source"].startswith("https://huggingface.co/"):
            # transcribed from public copies of the Hub's config.json (the Hub not read): unverified
            assert c["source"].startswith("https://huggingface.co/") and c["verified"] is False
        else:  # a config copy at a GitHub permalink
            assert c["source"].startswith("https://github.com/") and c["verified"] is True
        assert c["config_source"].startswith("tools/catalog/")


def test_model_aliases_resolve_to_the_same_architecture_with_their_note():
    for alias, mid, quant in [
        ("nvidia/DeepSeek-R1-NVFP4", "deepseek-r1", "NVFP4"),
        ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3", "NVFP4"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b", "FP8-BLOCK"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2", None),
        ("zhipuai/GLM-5", "glm-5", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        ("Qwen/Qwen2-7B", "qwen2-7b", None),  # the base model of the catalog's instruct entry
        ("Qwen/Qwen2-72B", "qwen2.5-72b", None),
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


def test_derived_tensor_rates_match_their_stated_formula():
    """A row whose notes derive its tensor rate ("N TC x M MHz [x P FLOP/clk]", P = 128 on Turing / Volta,
    256 after) holds that FP16 rate in the bf16 column, or half of it (GeForce FP32 accumulate), and twice it
    as INT8 where INT8 is given: an arithmetic slip in a hand-derived row fails here."""
    checked = 0
    for d in catalog._hardware_raw().values():
        note = d["verified_notes"]
        m = re.search(r"(\d+) TC x (\d+) MHz(?: (?:boost )?x (128|256))?", note)
        if not m or "bf16_tflops_dense" not in note.split("]")[0]:
            continue
        per = int(m.group(3) or (128 if d["family"] in ("nvidia-turing", "nvidia-volta") else 256))
        fp16_tflops = int(m.group(1)) * int(m.group(2)) * per / 1e6
        bf16 = d["bf16_tflops"]
        assert min(abs(bf16 - fp16_tflops), abs(bf16 - fp16_tflops / 2)) <= 0.15, d["id"]
        if d["int8_tops"] is not None:
            assert d["int8_tops"] == pytest.approx(2 * fp16_tflops, abs=0.3), d["id"]
        checked += 1
    assert checked >= 50
    for hid in ("rtx-3060-ti", "rtx-2080", "titan-rtx", "rtx-5060", "rtx-4000-sff-ada"):
        assert "TC x" in catalog._hardware_raw()[hid]["verified_notes"]


def test_binned_apple_rows_scale_their_full_chip_per_gpu_core():
    """"Compute N/M of <row> (X)": a binned Apple part's GPU rate is N/M of the named row's, which holds X."""
    raw = catalog._hardware_raw()
    checked = 0
    for d in raw.values():
        m = re.search(r"[Cc]ompute (\d+)/(\d+) of ([\w.-]+) \(([\d.]+)\)", d["verified_notes"])
        if not m:
            continue
        n, full, ref, quoted = int(m.group(1)), int(m.group(2)), m.group(3), float(m.group(4))
        assert raw[ref]["bf16_tflops"] == quoted, d["id"]
        assert d["bf16_tflops"] == pytest.approx(quoted * n / full, abs=0.06), d["id"]
        assert d["family"] == raw[ref]["family"], d["id"]
        checked += 1
    assert checked >= 9
    assert resolve_hardware("apple-m4-max-40c").id == "apple-m4-max"
    assert resolve_hardware("apple-m3-max-30c").bandwidth_gbs == 300


def test_rows_the_added_devices_derive_from_exist():
    """An added row that says it follows "the <id> row" (its method or its figures) names a catalog device."""
    raw = catalog._hardware_raw()
    named = 0
    for d in raw.values():
        if not d["catalog_file"].startswith("tools/catalog/"):
            continue
        for ref in re.findall(r"(?:the|as|of|from) ([a-z0-9][a-z0-9.-]+[a-z0-9]) row", d["verified_notes"]):
            if ref != "that":
                assert ref in raw, (d["id"], ref)
                named += 1
    assert named >= 40


def test_dual_die_modules_are_catalogued_per_device_the_runtime_sees():
    """An MI250X is two GCDs, which ROCm presents as two 64 GB devices (as the K80's two GPUs)."""
    for hid in ("instinct-mi250x", "instinct-mi250"):
        hw = catalog.get_hardware(hid)
        assert hw.memory_bytes == 64 * GIB and hw.bandwidth_gbs == 1640 and hw.family == "amd-cdna2"
    assert catalog.get_hardware("instinct-mi250x").bf16_tflops == pytest.approx(383.0 / 2, abs=0.06)


def test_gaudi_2_rates_follow_their_matrix_engine_derivation():
    """Gaudi 2's BF16 peak is its two MMEs' rate (the row's note: 1650 MHz x 256x256 MACs x 2 MMEs x 2 FLOP),
    FP8 twice that; an NPU of its own family, named as users and published tables write it."""
    raw = catalog._hardware_raw()["gaudi-2"]
    m = re.search(r"(\d+) MHz MME clock x (\d+)x(\d+) MACs x (\d+) MMEs x 2 FLOP", raw["verified_notes"])
    assert m, raw["verified_notes"]
    mhz, rows, cols, n_mme = (int(g) for g in m.groups())
    derived_tflops = mhz * 1e6 * rows * cols * n_mme * 2 / 1e12
    hw = catalog.get_hardware("gaudi-2")
    assert hw.bf16_tflops == pytest.approx(derived_tflops, abs=0.6)
    assert hw.fp8_tflops == pytest.approx(2 * derived_tflops, abs=1.0)
    assert (hw.kind, hw.family, hw.bandwidth_gbs) == ("npu", "intel-gaudi2", 2460)
    assert hw.memory_bytes == 96 * 2**30
    for name in ("Gaudi2", "Intel Gaudi 2", "Habana Gaudi2", "gaudi 2"):
        assert resolve_hardware(name, forgiving=True).id == "gaudi-2", name
    assert resolve_hardware("Gaudi3", forgiving=True).id == "gaudi-3"


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


def test_max_context_matches_the_reference_and_the_configs():
    """Every model's maximum context is its config's max_position_embeddings, and where the reference entry
    gives one, the reference's (issue 13: Llama 2 was listed at 2048 from an early config copy; it is
    4096)."""
    ref = [json.loads((REF / name).read_text()) for name in ("models.json", "models_extra.json")]
    ref = ref[0] + ref[1]
    by_hf = {e["hf_id"]: e for e in ref}
    checked = 0
    for mid in catalog.model_ids():
        entry = catalog.model_entry(mid)
        if not entry["sizable"]:
            continue
        m = catalog.get_model(mid)
        cfg = entry["config"].get("text_config") or entry["config"]
        if "max_position_embeddings" in cfg:
            assert m.max_context == cfg["max_position_embeddings"], mid
        want = by_hf.get(entry["hf_id"], {}).get("max_position_embeddings")
        if want is not None:
            assert m.max_context == want, (mid, m.max_context, want)
            checked += 1
    assert checked > 60
    assert catalog.get_model("llama-2-7b").max_context == 4096
    assert catalog.get_model("llama-2-70b").max_context == 4096


def test_build_catalog_patches_a_config_copy_that_disagrees_with_the_reference():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_catalog import reconcile_max_context
    finally:
        sys.path.pop(0)
    cfg = {"max_position_embeddings": 2048, "hidden_size": 8}
    patched, note = reconcile_max_context({"max_position_embeddings": 4096}, cfg, "configs/x.json")
    assert patched["max_position_embeddings"] == 4096 and cfg["max_position_embeddings"] == 2048
    assert "4,096" in note and "2,048" in note and "configs/x.json" in note
    same, none = reconcile_max_context({"max_position_embeddings": 2048}, cfg, "configs/x.json")
    assert same is cfg and none is None
    nested = {"text_config": {"max_position_embeddings": 8192}}
    patched, _ = reconcile_max_context({"max_position_embeddings": 131072}, nested, "c")
    assert patched["text_config"]["max_position_embeddings"] == 131072


def test_reference_notes_about_figures_fitbench_now_counts_are_rewritten():
    """A reference note saying the DSA indexer or Gemma 4's V cache is left out describes the reference's own
    figures; the catalog says what fitbench counts instead, and a rewrite that no longer matches the
    reference stops the build."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_catalog import rewrite_notes
    finally:
        sys.path.pop(0)
    notes = " ".join(catalog.model_entry("deepseek-v3.2")["notes"])
    assert "not in computed params" not in notes and "NOT included" not in notes and "are counted" in notes
    assert "still cache V" in " ".join(catalog.model_entry("gemma-4-26b-a4b")["notes"])
    assert rewrite_notes("x/y", ["a"]) == ["a"]
    with pytest.raises(SystemExit, match="match no reference note"):
        rewrite_notes("deepseek-ai/DeepSeek-V3.2", ["something else"])


def test_widely_downloaded_gguf_families_are_catalogued():
    from estimator.catalog.data import get_model
    from estimator.physics.weights import weight_breakdown
    from estimator.specs import FULL, SLIDING

    g2 = get_model("gemma-2-9b")
    # Gemma 2 alternates sliding (window 4096) and global layers from layer 0, as llama.cpp's swa pattern 2
    assert g2.layer_types[:4] == (SLIDING, FULL, SLIDING, FULL) and g2.window == 4096 and g2.tie_embeddings
    assert weight_breakdown(g2, "BF16").n_params_total / 1e9 == pytest.approx(9.24, abs=0.01)
    g270 = get_model("gemma-3-270m")
    assert g270.layer_types.count(FULL) == 3 and g270.window == 512 and g270.head_dim == 256
    assert weight_breakdown(g270, "BF16").n_params_total / 1e6 == pytest.approx(268, abs=1)
    q2 = get_model("qwen2-7b")
    assert q2.qkv_bias and set(q2.layer_types) == {FULL} and q2.vocab_size == 152064
    for mid in ("gemma-2-2b", "gemma-2-27b", "qwen2-0.5b", "qwen2-1.5b", "qwen2.5-3b", "phi-3.5-mini-3.8b"):
        assert get_model(mid).source.startswith("https://github.com/mlc-ai/mlc-llm/blob/79d603f")


def test_models_of_argonnes_gh200_runs_are_catalogued_with_their_geometry():
    """The 7B-class models Argonne ran with vLLM on a GH200 (published_measurements_2.csv) resolve by the HF
    id the rows name; the GPT-2-era configs (GPT-J, BLOOM, OPT) size an MLP without a gate, and the counted
    parameters match the names (GPT-J 6.05 B, OPT 6.65 B without its 8.4 M position embeddings, BLOOM
    7.07 B)."""
    expect = {  # hf id: (layers, hidden, kv heads, ffn width, gated, tied, billions counted)
        "EleutherAI/gpt-j-6b": (28, 4096, 16, 16384, False, False, 6.05),
        "facebook/opt-6.7b": (32, 4096, 32, 16384, False, True, 6.65),
        "bigscience/bloom-7b1": (30, 4096, 32, 16384, False, True, 7.07),
        "BAAI/Aquila-7B": (32, 4096, 32, 11008, True, False, 7.30),
        "Qwen/Qwen1.5-7B": (32, 4096, 32, 11008, True, False, 7.72),
    }
    for hf, (n, h, kv, ff, gated, tied, billions) in expect.items():
        m = resolve_model(hf)
        assert (m.n_layers, m.hidden_size, m.n_kv_heads, m.intermediate_size) == (n, h, kv, ff), hf
        assert (m.ffn_gated, m.tie_embeddings) == (gated, tied), hf
        assert weight_breakdown(m, "F16").n_params_total / 1e9 == pytest.approx(billions, abs=0.01), hf
        entry = catalog.model_entry(m.id)
        assert entry["source"] and entry["config_source"].startswith("tools/catalog/configs/")
    assert resolve_model("bigscience/bloom-7b1").max_context == 2048  # ALiBi: the training length
    assert resolve_model("Qwen/Qwen1.5-7B").window is None  # use_sliding_window false
