"""harness.synth.write_shape_gguf: llama.cpp's data-less model file for its memory-fit pass (no_alloc), and
the plan rules of no_alloc points.  The llama.cpp side (the pass equals a real allocation) is in
tests/test_runner_llama.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from estimator.specs import SpecError
from harness import synth
from harness.plan import PlanError, load_plan

REPO = Path(__file__).resolve().parents[1]


def _table(path: Path) -> list[tuple[str, tuple[int, ...], int, int]]:
    import gguf

    r = gguf.GGUFReader(path)
    return [
        (t.name, tuple(int(x) for x in t.shape), int(t.tensor_type), int(t.data_offset)) for t in r.tensors
    ]


@pytest.mark.parametrize("arch", ["llama", "gemma3", "deepseek_v2", "qwen3_moe", "gpt_oss", "gemma2", "phi3"])
def test_shape_file_has_the_header_table_and_size_of_the_file_with_data(arch, tmp_path):
    model = synth.tiny_model(arch)
    full = synth.write_gguf(model, tmp_path / "full.gguf")
    shape = synth.write_shape_gguf(model, tmp_path / "shape.gguf")
    assert shape.stat().st_size == full.stat().st_size
    assert _table(shape) == _table(full)
    with shape.open("rb") as fh:  # the data section is a hole: it reads as zeros
        fh.seek(_table(shape)[-1][3])
        assert not any(fh.read(4096))


def test_shape_only_models_are_cached_f16_llama_cpp_files(tmp_path):
    model = synth.tiny_model("llama")
    path = synth.synthetic_model(model, "F16", cache_dir_path=tmp_path, shape_only=True)
    assert path.name.endswith("-F16-shape.gguf") and path.exists()
    assert synth.synthetic_model(model, "f16", cache_dir_path=tmp_path, shape_only=True) == path
    with pytest.raises(SpecError, match="F16"):
        synth.synthetic_model(model, "Q4_K_M", cache_dir_path=tmp_path, shape_only=True)
    with pytest.raises(SpecError, match="llama.cpp"):
        synth.synthetic_model(model, "F16", "vllm", cache_dir_path=tmp_path, shape_only=True)


_PLAN = """
name = "t"
engines = ["llama.cpp"]
models = ["llama-3.2-1b"]
contexts = [4096]
prompt_lengths = {lengths}
gen_lengths = {lengths}
quants = ["{quant}"]
engine_options = {{ no_alloc = true }}
"""


@pytest.mark.parametrize(
    ("lengths", "quant", "error"),
    [("[]", "Q4_K_M", "F16"), ("[128]", "F16", "memory-only"), ("[]", "F16", None)],
)
def test_plan_no_alloc_points_are_memory_only_and_f16(tmp_path, lengths, quant, error):
    f = tmp_path / "p.toml"
    f.write_text(_PLAN.format(lengths=lengths, quant=quant))
    if error is None:
        assert load_plan(f).points
        return
    with pytest.raises(PlanError, match=error):
        load_plan(f)


def test_the_committed_memory_fit_plan_loads():
    plan = load_plan(REPO / "plans" / "cpu-memory-fit.toml")
    assert plan.points and all(p.spec.engine_options.get("no_alloc") for p in plan.points)
    assert {p.n_layers == p.model.n_layers for p in plan.points} == {True}  # full depth
