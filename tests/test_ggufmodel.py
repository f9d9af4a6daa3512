"""GGUF loader: metadata -> ModelSpec, exact tensor bytes, clear errors for bad files."""

from __future__ import annotations

import pytest

from estimator.catalog.ggufmodel import load_gguf
from estimator.catalog.resolve import resolve_model
from estimator.physics.weights import weight_breakdown
from estimator.specs import SpecError


def test_gguf_metadata(tiny_gguf):
    m = resolve_model(str(tiny_gguf))
    assert (m.architecture, m.n_layers, m.hidden_size, m.n_heads, m.n_kv_heads) == ("llama", 2, 64, 4, 2)
    assert m.vocab_size == 96 and m.max_context == 256 and not m.tie_embeddings


def test_gguf_weight_bytes_are_tensor_sums(tiny_gguf):
    import gguf

    m = load_gguf(tiny_gguf)
    reader = gguf.GGUFReader(str(tiny_gguf))
    file_sum = sum(int(t.n_bytes) for t in reader.tensors)
    wb = weight_breakdown(m)
    assert wb.exact and wb.total_bytes == file_sum
    # F16 tensors take 2 B per element, the Q8_0 head 34 B per 32 elements
    assert wb.by_type_bytes["q8_0"] == 96 * 64 // 32 * 34
    assert wb.by_type_bytes["f16"] == 2 * sum(t[2] for t in m.gguf_tensors if t[1] == "f16")
    assert wb.output_bytes == 96 * 64 // 32 * 34


def test_not_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"NOPE" + b"\0" * 100)
    with pytest.raises(SpecError, match="not a GGUF file"):
        resolve_model(str(p))


def test_truncated_gguf(tiny_gguf, tmp_path):
    data = tiny_gguf.read_bytes()
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[: len(data) - 5000])
    with pytest.raises(SpecError, match="truncated"):
        load_gguf(p)
    p.write_bytes(data[:40])
    with pytest.raises(SpecError):
        load_gguf(p)


def test_missing_gguf():
    with pytest.raises(SpecError, match="no such"):
        resolve_model("/nonexistent/model.gguf")
