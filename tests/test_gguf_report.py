"""A .gguf is sized from its own tensors and labelled with its own type (issue 13: 1).

The user's command was ``report --model file-Q8_0.gguf --hardware rtx-4090``: it printed "Q4_K_M weights",
sized a Q4_K_M recipe, showed "native dtype 1" and "0.00 B params", and ``--quant gguf`` was refused.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from estimator.catalog.ggufmodel import file_type_name, load_gguf
from estimator.physics.quant import file_quant
from estimator.physics.weights import weight_breakdown
from estimator.report.request import ReportRequest, make_report
from estimator.specs import SpecError
from tests.estimator_cli import run
from tests.gguf_files import golden_tiny_llama

ROOT = Path(__file__).resolve().parents[1]
TINY = golden_tiny_llama()  # llama, 2 layers, general.file_type 7 = MOSTLY_Q8_0 (in the model cache)


@pytest.fixture()
def q8_file(tmp_path):
    path = tmp_path / "file-Q8_0.gguf"
    shutil.copy(TINY, path)
    return path


def file_bytes(path) -> int:
    import gguf

    return sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors)


def test_the_users_command_sizes_the_file_and_names_its_type(q8_file):
    p = run("report", "--model", str(q8_file), "--hardware", "rtx-4090", "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["quant"] == "Q8_0 (GGUF file)" and d["workload"]["quant"] == "Q8_0 (GGUF file)"
    assert d["memory"]["weights_bytes"] + d["memory"]["host_bytes"] >= file_bytes(q8_file)
    assert d["model"]["native_dtype"] == "Q8_0" and d["model"]["from_gguf"]
    assert d["model"]["params_total"] == sum(t[2] for t in load_gguf(q8_file).gguf_tensors)
    # the file's own format is the first, selected row of the quant matrix; catalog formats follow
    first = d["quant_matrix"][0]
    assert first["quant"] == "Q8_0 (GGUF file)" and first["selected"]
    assert first["weights_bytes"] == d["memory"]["weights_bytes"]
    assert not any(r["selected"] for r in d["quant_matrix"][1:])
    # the default context (8192) is above this file's 256: clamped with a note instead of exit 2
    assert d["workload"]["n_ctx"] == 256
    assert any("own tensors" in n for n in d["notes"]) and any("maximum" in n for n in d["notes"])


def test_text_report_labels_the_file(q8_file):
    p = run("report", "--model", str(q8_file), "--hardware", "rtx-4090")
    assert p.returncode == 0, p.stderr
    head = p.stdout.split("── Model")[0]
    assert "Q8_0 (GGUF file) weights" in head and "Q4_K_M" not in head
    assert re.search(r"GGUF file( type)?:? +Q8_0", p.stdout), p.stdout  # the label may wrap
    assert "0.00 B" not in p.stdout and " M total" in p.stdout  # 0.1 M parameters, not "0.00 B"


def test_quant_gguf_is_the_files_own_tensors(q8_file):
    a = json.loads(
        run("report", "--model", str(q8_file), "--hardware", "rtx-4090", "--format", "json").stdout
    )
    p = run(
        "report", "--model", str(q8_file), "--hardware", "rtx-4090", "--quant", "gguf", "--format", "json"
    )
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)
    assert b["quant"] == a["quant"] and b["memory"]["weights_bytes"] == a["memory"]["weights_bytes"]


def test_naming_a_format_resizes_the_architecture_and_says_so(q8_file):
    p = run(
        "report", "--model", str(q8_file), "--hardware", "rtx-4090", "--quant", "Q4_K_M", "--format", "json"
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["quant"] == "Q4_K_M" and not d["model"]["from_gguf"]
    own = json.loads(
        run("report", "--model", str(q8_file), "--hardware", "rtx-4090", "--format", "json").stdout
    )
    assert d["memory"]["weights_bytes"] < own["memory"]["weights_bytes"]  # Q4_K_M recipe < the Q8_0 file
    assert any("re-sized as Q4_K_M" in n and "Q8_0" in n for n in d["notes"])
    assert all(not r["quant"].endswith("(GGUF file)") for r in d["quant_matrix"])


def test_file_quant_is_exact_and_distinct_from_the_recipe():
    m = load_gguf(TINY)
    q = file_quant(m)
    assert q.from_file and q.name == "Q8_0 (GGUF file)" and q.default_type == "q8_0"
    assert weight_breakdown(m, q).total_bytes == file_bytes(TINY)
    assert weight_breakdown(m, q).exact


def test_file_type_name_from_metadata_or_tensors():
    assert file_type_name(15, ()) == "Q4_K_M"
    assert file_type_name(0, ()) == "F32"
    assert file_type_name(32, ()) == "BF16"
    tensors = (("a", "q4_K", 10, 1000), ("b", "q6_K", 10, 300), ("c", "f32", 1, 4))
    assert file_type_name(None, tensors) == "Q4_K"  # no key: the type holding most bytes
    assert file_type_name(1024, tensors) == "Q4_K"  # GUESSED


def test_quant_gguf_for_a_catalog_model_is_a_clear_error():
    with pytest.raises(SpecError, match="not a GGUF file"):
        make_report(ReportRequest(model="qwen3-0.6b", hardware="rtx-4090", quant="gguf"))
