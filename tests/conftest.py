"""Shared fixtures: a tiny GGUF file written with gguf.GGUFWriter (F16 + Q8_0 tensors)."""

from __future__ import annotations

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
