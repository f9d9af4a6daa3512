"""tools/alloc_trace.py: reading ggml's allocator trace (what is live when the logits are placed, the
high-water mark), and, where tools/build_alloc_trace.sh has built its ggml-base, the trace of a real pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import alloc_trace  # noqa: E402

MIB = 2**20

# two graphs, as llama.cpp reserves them; the second is the one read.  Sizes in bytes: an 8 MiB embedding,
# a 4 MiB mask freed after the layer, a layer output kept, a 64 MiB logits tensor above it
TRACE = """\
ggml_dyn_tallocr_alloc: allocating inp_embd (1024 bytes) - block 0, offset 0, chunk 0
ggml_dyn_tallocr_alloc: allocating old (999999 bytes) - block 0, offset 1024, chunk 0
llama_context: something else
ggml_dyn_tallocr_alloc: allocating inp_embd (8388608 bytes) - block 0, offset 0, chunk 0
ggml_dyn_tallocr_alloc: allocating attn_inp_kq_mask (4194304 bytes) - block 0, offset 8388608, chunk 0
ggml_dyn_tallocr_alloc: allocating ffn_gate-0 (33554432 bytes) - block 0, offset 12582912, chunk 0
ggml_gallocr_free_node: freeing attn_inp_kq_mask at {chunk=0, offset=8388608} (4194304 bytes)
ggml_dyn_tallocr_alloc: allocating ffn_out-0 (8388608 bytes) - block 1, offset 46137344, chunk 0
ggml_gallocr_free_node: freeing ffn_gate-0 at {chunk=0, offset=12582912} (33554432 bytes)
ggml_dyn_tallocr_alloc: allocating result_output (67108864 bytes) - block 1, offset 54525952, chunk 0
fitbench compute_bytes 121634816
"""


def test_the_last_graph_is_read():
    lines = alloc_trace.last_graph(TRACE)
    assert "old" not in "".join(lines)
    assert lines[0].endswith("offset 0, chunk 0") and "8388608" in lines[0]


def test_live_tensors_when_the_logits_are_placed_and_at_the_high_water_mark():
    largest, peak = alloc_trace.replay(alloc_trace.last_graph(TRACE))
    assert largest.placed.name == "result_output"
    # the mask and the gate are freed by then: the embedding and the kept layer output lie under the logits
    assert [t.name for t in largest.live] == ["inp_embd", "ffn_out-0", "result_output"]
    assert largest.placed.offset == 52 * MIB
    assert peak.placed.end == 116 * MIB
    assert alloc_trace.buffer_bytes(TRACE) == 116 * MIB


def test_no_trace_reads_as_nothing():
    assert alloc_trace.replay(alloc_trace.last_graph("llama_context: no allocator lines\n")) == (None, None)
    assert alloc_trace.buffer_bytes("") is None


def test_a_missing_tracing_build_is_named(tmp_path):
    proc = subprocess.run(
        [sys.executable, "tools/alloc_trace.py", "qwen3-8b", "--ctx", "4096", "--lib", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "tools/build_alloc_trace.sh" in proc.stderr


def test_a_failed_pass_is_named(tmp_path):
    """A tracing build that cannot load: the child's failure, in one line, not an empty table."""
    (tmp_path / "llama_cpp").mkdir()
    (tmp_path / "llama_cpp" / "__init__.py").write_text("raise ImportError('broken tracing build')\n")
    proc = subprocess.run(
        [sys.executable, "tools/alloc_trace.py", "qwen3-0.6b", "--ctx", "1024", "--lib", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: llama.cpp's memory-fit pass failed (exit status 1)")
    assert "broken tracing build" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_an_unknown_model_names_the_nearest():
    proc = subprocess.run(
        [sys.executable, "tools/alloc_trace.py", "qwen3-8bb", "--ctx", "4096"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: unknown model 'qwen3-8bb'") and "qwen3-8b" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.llama
def test_a_real_trace_shows_the_kept_final_hidden_state():
    """gpt-oss-20b at 32K cells with flash attention: three hidden rows under the logits (input embeddings,
    the kept h_nextn, the gathered result_norm: docs/memory-model.md §3), the trace's high-water mark equal
    to the buffer llama.cpp reports.  Needs the build of tools/build_alloc_trace.sh."""
    pytest.importorskip("llama_cpp")
    if not (alloc_trace.DEFAULT_LIB / "llama_cpp").is_dir():
        pytest.skip(f"no tracing ggml-base under {alloc_trace.DEFAULT_LIB} (bash tools/build_alloc_trace.sh)")
    proc = subprocess.run(
        [sys.executable, "tools/alloc_trace.py", "gpt-oss-20b", "--ctx", "32768"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "= 3.00 hidden rows" in proc.stdout
    assert "buffer: 409.63 MiB (the trace's high-water mark 409.63 MiB)" in proc.stdout
