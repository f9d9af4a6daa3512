"""Shared fixtures: a tiny GGUF file written with gguf.GGUFWriter (F16 + Q8_0 tensors); a config.json no
synthetic GGUF writer builds."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    """2-layer llama GGUF (hidden 64, 4/2 heads, ff 128, vocab 96): F16 2-D, F32 1-D, one Q8_0 tensor."""
    from tests.gguf_files import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_gguf_split(tmp_path_factory):
    """The same model as a split GGUF of at most 8 tensors per file (gguf-py's writer names the files
    tiny-00001-of-0000N.gguf and writes the split.* keys, as llama.cpp's gguf-split does); the paths in
    order."""
    from tests.gguf_files import write_tiny_gguf

    folder = tmp_path_factory.mktemp("gguf_split")
    write_tiny_gguf(folder / "tiny.gguf", split_max_tensors=8)
    return sorted(folder.glob("tiny-*-of-*.gguf"))


@pytest.fixture
def unwritable_config(tmp_path):
    """A config.json the estimator sizes but no synthetic GGUF writer builds (OLMo 2: every catalog model
    has a writer)."""
    cfg = {
        "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "hidden_size": 2048,
        "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16,
        "intermediate_size": 8192, "vocab_size": 100352, "max_position_embeddings": 4096,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip
    path = tmp_path / "olmo2" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    return path
