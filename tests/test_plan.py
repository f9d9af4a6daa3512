"""Plan parsing and validation: errors name the entry before anything runs; shipped plans are valid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.plan import PlanError, load_plan, parse_plan

REPO = Path(__file__).resolve().parents[1]

BASE = """
name = "t"
engines = ["llama.cpp"]
models = ["smollm2-135m", { id = "qwen3-30b-a3b", layers = 2 }]
quants = ["Q8_0", "Q4_K_M"]
layers = 4
contexts = [1024]
prompt_lengths = [128, 512]
gen_lengths = [32]
depths = [0, 256]
threads = [2]
flash_attn = [false, true]
"""


def test_expands_points_with_lists_carried_per_point():
    plan = parse_plan(BASE, "t.toml")
    assert len(plan.points) == 2 * 2 * 2  # models x quants x flash_attn
    p = plan.points[0]
    assert p.model.id == "smollm2-135m" and p.n_layers == 4 and p.model.n_layers == 30
    assert p.spec.prompt_lengths == (128, 512) and p.spec.depths == (0, 256) and p.spec.n_threads == 2
    moe = [q for q in plan.points if q.model.id == "qwen3-30b-a3b"]
    assert {q.n_layers for q in moe} == {2}
    assert plan.engines == ("llama.cpp",)
    assert len({p.index for p in plan.points}) == len(plan.points)


@pytest.mark.parametrize(
    ("replace", "expected"),
    [
        (('"smollm2-135m"', '"smollm2-13m"'), r"sweep\[0\]\.models\[0\] 'smollm2-13m'.*smollm2-135m"),
        (('"Q4_K_M"]', '"Q4_K_MM"]'), r"sweep\[0\]\.quants\[1\] 'Q4_K_MM'.*Q4_K_M"),
        (
            ('engines = ["llama.cpp"]', 'engines = ["llama.cp"]'),
            r"engines\[0\] 'llama.cp'.*nearest: llama.cpp",
        ),
        (("gen_lengths", "gen_length"), r"unknown key 'gen_length'.*gen_lengths"),
        (("layers = 4", "layers = 400"), r"models\[0\].*layers = 400 but the model has only 30"),
        (("contexts = [1024]", "contexts = [512]"), r"contexts\[0\] = 512: smaller than .* 768"),
        (('"Q8_0", ', '"FP8", '), r"quants 'FP8': not available for engine llama.cpp"),
        (("flash_attn = [false, true]", 'flash_attn = ["no"]'), r"flash_attn: expected true/false"),
        (("threads = [2]", "threads = [-1]"), r"threads\[0\]: must be >= 0"),
    ],
)
def test_bad_entries_are_named(replace, expected):
    text = BASE.replace(*replace)
    assert text != BASE
    with pytest.raises(PlanError, match=expected):
        parse_plan(text, "t.toml")


def test_unbuildable_architecture_fails_before_running(unwritable_config):
    text = BASE.replace('"smollm2-135m"', json.dumps(str(unwritable_config)))
    with pytest.raises(PlanError, match=r"config\.json.*cannot build a synthetic GGUF.*'olmo2'"):
        parse_plan(text, "t.toml")


def test_invalid_toml_and_missing_file():
    with pytest.raises(PlanError, match="not valid TOML"):
        parse_plan("engines = [", "x.toml")
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan("/nonexistent/plan.toml")


def test_plan_that_is_not_utf8_is_a_plan_error(tmp_path):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(PlanError, match=r"latin1.toml: not UTF-8 text \(byte 11"):
        load_plan(bad)


def test_shipped_plans_are_valid():
    quick = load_plan(REPO / "plans" / "cpu-quick.toml")
    assert set(quick.engines) == {"llama.cpp", "vllm"}
    gpu = load_plan(REPO / "plans" / "gpu.toml")
    assert {"llama.cpp", "vllm"} <= set(gpu.engines)
    full = load_plan(REPO / "plans" / "cpu-full.toml")
    archs = {p.model.architecture for p in full.points}
    assert len(archs) >= 8, archs
    assert any(p.model.moe is not None for p in full.points)
    assert any("sliding" in p.model.layer_types for p in full.points)
    assert any(p.model.mla is not None for p in full.points)
    assert len({p.quant for p in full.points if p.engine == "llama.cpp"}) >= 4
    assert max(len(p.spec.prompt_lengths) for p in full.points) >= 3
    assert max(len(p.spec.depths) for p in full.points) >= 2
    memory = load_plan(REPO / "plans" / "cpu-memory.toml")  # its KV-layout sweeps pass n_seq / kv_unified
    assert {p.spec.engine_options.get("n_seq", 1) for p in memory.points} == {1, 4}
    assert all(not p.spec.prompt_lengths and not p.spec.gen_lengths for p in memory.points)
    for path in sorted((REPO / "plans").glob("*.toml")):  # every shipped plan, named or not
        assert load_plan(path).points, path


def test_cli_check_plan_bad_entry_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE.replace('"smollm2-135m"', '"no-such-model"'))
    res = subprocess.run([sys.executable, "-m", "harness", "check-plan", "--plan", str(bad)],
                         cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "models[0] 'no-such-model'" in res.stderr
    assert "Traceback" not in res.stderr


VLLM = """
name = "v"
engines = ["vllm"]
models = [{ id = "smollm2-135m", layers = 2 }]
quants = ["BF16"]
contexts = [512]
prompt_lengths = [64]
gen_lengths = [16]
depths = [0]
"""


def test_vllm_kv_dtype_checked_before_running():
    with pytest.raises(PlanError, match=r"kv_dtypes\[0\] 'q8_0': vLLM has no q8_0 KV cache"):
        parse_plan(VLLM + 'kv_dtypes = ["q8_0"]\n', "v.toml")
    assert len(parse_plan(VLLM + 'kv_dtypes = ["f16", "fp8"]\n', "v.toml").points) == 2


def test_vllm_config_that_cannot_be_written_fails_before_running():
    """A Gemma 4 proxy cut on a sliding layer has no config.json vLLM would load as written (transformers
    forces the last layer to full attention): refused at plan time, naming the layer; 6 layers end on the
    full one."""
    bad = VLLM.replace('{ id = "smollm2-135m", layers = 2 }', '{ id = "gemma-4-26b-a4b", layers = 4 }')
    with pytest.raises(PlanError, match=r"config\.json for vLLM.*layer 3 is sliding_attention"):
        parse_plan(bad, "v.toml")
    assert parse_plan(bad.replace("layers = 4", "layers = 6"), "v.toml").points


def test_vllm_flash_attn_axis_does_not_duplicate_points():
    # vLLM chooses its own attention backend: fa true/false would be the same measurement twice
    assert len(parse_plan(VLLM + "flash_attn = [false, true]\n", "v.toml").points) == 1


def test_memory_only_points():
    text = BASE.replace("prompt_lengths = [128, 512]", "prompt_lengths = []").replace(
        "gen_lengths = [32]", "gen_lengths = []"
    )
    plan = parse_plan(text.replace("depths = [0, 256]", "depths = [0]"), "t.toml")
    assert plan.points and all(p.spec.prompt_lengths == () == p.spec.gen_lengths for p in plan.points)


def test_decode_only_and_prefill_only_points():
    """One list empty: the point measures the other phase only (plans/cpu-amx-decode.toml)."""
    decode = parse_plan(BASE.replace("prompt_lengths = [128, 512]", "prompt_lengths = []"), "t.toml")
    assert decode.points and all(p.spec.prompt_lengths == () and p.spec.gen_lengths for p in decode.points)
    prefill = parse_plan(BASE.replace("gen_lengths = [32]", "gen_lengths = []"), "t.toml")
    assert prefill.points and all(p.spec.gen_lengths == () and p.spec.prompt_lengths for p in prefill.points)


def test_points_recorded_before_the_serving_fields_keep_their_keys():
    """PointSpec gained serving fields after the CPU set was measured; at their defaults they stay out of the
    key, so ``--resume`` of plans/cpu-full.toml skips the stored points instead of measuring them again."""
    import json

    from harness.plan import KEY_FIELDS_ADDED, load_plan
    from harness.store import point_key
    from harness.sweep import model_fingerprint

    root = Path(__file__).resolve().parent.parent
    stored, keys = {}, set()
    for line in (root / "results/runs/cpu-full--cpu-x86-avx512--vm.jsonl").open():
        r = json.loads(line)
        stored[(r["model_id"], r["quant"], r["n_layers_measured"], r["engine"])] = r
        keys.add(r["extra"].get("point_key"))
    plan = load_plan(root / "plans/cpu-full.toml")
    checked = 0
    for p in plan.points:
        r = stored.get((p.model.id, p.quant, p.n_layers, p.engine))
        if r is None or r["extra"].get("point_key") is None:
            continue
        body = p.key_body(model_fingerprint(p.model))
        assert not set(KEY_FIELDS_ADDED) & set(body["spec"])
        version = r["engine_version"].rsplit(" ", 1)[-1]  # the record names the distribution too
        assert point_key(r["host"], p.engine, version, body) in keys, p.label
        checked += 1
    assert checked >= 20
