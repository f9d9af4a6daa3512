"""What a llama.cpp measurement ran, on import: llama.cpp's description of a model ("llama 8B Q4_0" + its
parameter count) -> the catalog model of that geometry, for llama-bench output and for published rows that
paste it (harness.model_match); and a llama-bench row's device from its gpu_info / cpu_info."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.specs import SpecError
from harness.importers import PUBLISHED_COLUMNS, ImportContext, ImportFormatError, import_file
from harness.model_match import match_desc, param_count, parse_desc

REPO = Path(__file__).resolve().parents[1]
# llama-bench's model_n_params of a Llama 3 / 3.1 8B GGUF (llama-bench -o json; "8.03 B" in its table)
LLAMA3_8B_PARAMS = 8_030_261_248


def ctx(**kw) -> ImportContext:
    return ImportContext(
        **{"source": "test", "resolve_hardware": resolve_hardware, "resolve_model": resolve_model, **kw}
    )


def test_parse_reads_llama_model_desc():
    assert parse_desc("llama 8B Q4_K - Medium") == ("llama", 8e9, 0, "Q4_K - Medium")
    assert parse_desc("qwen3moe 30B.A3B Q4_K - Medium")[:3] == ("qwen3moe", 30e9, 0)
    assert parse_desc("llama 8x7B Q4_0")[:3] == ("llama", 56e9, 8)
    assert parse_desc("llama ?B F16")[:2] == ("llama", None)
    assert parse_desc("smollm 135M Q8_0")[1] == pytest.approx(135e6)
    assert parse_desc("Meta-Llama-3.1-8B-Instruct") is None and parse_desc("LLaMA 2 7B") is None


def test_the_inventory_counts_what_llama_bench_counts():
    assert param_count(resolve_model("llama-3.1-8b")) == LLAMA3_8B_PARAMS


def test_one_geometry_maps_to_its_longest_context_entry_and_names_the_others():
    """Llama 3 8B, Llama 3.1 8B and DeepSeek-R1-Distill-Llama-8B differ only in their context limit."""
    spec, note = match_desc("llama 8B Q4_K - Medium", LLAMA3_8B_PARAMS)
    assert spec.id == "llama-3.1-8b"
    assert "8.03 B parameters" in note and "meta-llama/Meta-Llama-3-8B" in note
    assert "DeepSeek-R1-Distill-Llama-8B" in note


def test_the_exact_count_tells_apart_what_the_size_label_cannot():
    """llama.cpp labels Llama 2 7B and Mistral 7B both "llama 7B"; their counts differ (6.74 / 7.24 B)."""
    with pytest.raises(SpecError, match=r"fits \d+ catalog geometries: .*llama-2-7b.*mistral-7b"):
        match_desc("llama 7B Q4_0")
    assert match_desc("llama 7B Q4_0", param_count(resolve_model("llama-2-7b")))[0].id == "llama-2-7b"
    # v0.1 (sliding window) and Instruct v0.2 (none) have the same count but not the same geometry
    with pytest.raises(SpecError, match="fits 2 catalog geometries"):
        match_desc("llama 7B Q4_0", param_count(resolve_model("mistral-7b-v0.1")))


def test_the_file_name_settles_which_geometry_and_which_entry():
    """A llama-bench row's model_filename picks among the fits the entries it names; a name that names none
    leaves the description's answer (or its ambiguity)."""
    mistral = param_count(resolve_model("mistral-7b-v0.1"))
    assert match_desc("llama 7B Q4_0", mistral, file_name="/m/Mistral-7B-Instruct-v0.2.Q4_0.gguf")[0].id == (
        "mistral-7b-instruct-v0.2"
    )
    v01 = match_desc("llama 7B Q4_0", mistral, file_name="mistral-7b-v0.1.Q4_K_M.gguf")[0]
    assert v01.id == "mistral-7b-v0.1"
    with pytest.raises(SpecError, match="fits 2 catalog geometries"):
        match_desc("llama 7B Q4_0", mistral, file_name="model.gguf")
    spec, note = match_desc("llama 8B Q4_0", LLAMA3_8B_PARAMS, file_name="Meta-Llama-3-8B-Instruct.Q4_0.gguf")
    assert spec.id == "llama-3-8b" and "file name 'Meta-Llama-3-8B-Instruct.Q4_0.gguf'" in note
    # "3.1" stays one word: Llama 3.1's file does not name Llama 3
    file_name = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
    assert match_desc("llama 8B Q4_0", LLAMA3_8B_PARAMS, file_name=file_name)[0].id == "llama-3.1-8b"
    assert match_desc("llama 8B Q4_0", LLAMA3_8B_PARAMS, file_name="llama-8b.gguf")[0].id == "llama-3.1-8b"


def test_size_label_alone_and_expert_labels():
    assert match_desc("llama 3B Q4_K - Medium")[0].id == "llama-3.2-3b"
    assert match_desc("gpt-oss 20B MXFP4 MoE")[0].id == "gpt-oss-20b"
    assert match_desc("llama 8x7B Q4_0")[0].id == "mixtral-8x7b"  # llama.cpp's label for Mixtral until 2024
    assert match_desc("llama 8x22B Q4_0")[0].id == "mixtral-8x22b"


def test_no_match_names_why():
    with pytest.raises(SpecError, match="no catalog model has llama.cpp architecture 'gemma'"):
        match_desc("gemma 2B Q4_0")  # Gemma 1: not in the catalog
    with pytest.raises(SpecError, match=r"nearest: smollm2-135m"):
        match_desc("llama ?B F16", 3_672_320)
    with pytest.raises(SpecError, match="states no size"):
        match_desc("llama ?B F16")
    with pytest.raises(SpecError, match="not a llama.cpp model description"):
        match_desc("Meta-Llama-3.1-8B-Instruct")


def _lb_row(**kw) -> dict:
    row = {
        "build_commit": "b1d2c3", "build_number": 6000, "backends": "CUDA", "gpu_info": "NVIDIA RTX 4090",
        "model_filename": "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        "model_type": "llama 8B Q4_K - Medium", "model_size": 4_920_733_696,
        "model_n_params": LLAMA3_8B_PARAMS,
        "n_gpu_layers": 99, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ts": 12000.5, "stddev_ts": 20.1,
    }  # fmt: skip
    return {**row, **kw}


def test_llama_bench_rows_take_the_catalog_model_their_description_names(tmp_path):
    p = tmp_path / "lb.json"
    p.write_text(json.dumps([_lb_row(), _lb_row(model_type="gemma 2B Q4_0", model_n_params=2_506_172_416)]))
    _, (known, unknown) = import_file(p, ctx=ctx())
    llama = resolve_model("llama-3.1-8b")
    assert (known.model_id, known.n_layers_real, known.n_layers_measured) == (
        "meta-llama/Llama-3.1-8B",
        32,
        32,
    )
    assert known.model_fingerprint and "8.03 B parameters" in known.extra["mapped"]["model_id"]
    assert known.extra["raw"]["model_filename"].endswith("Q4_K_M.gguf")
    assert (
        unknown.model_id == "/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf" and not unknown.model_fingerprint
    )
    assert "model_id" not in unknown.extra["mapped"] and known.hardware_id == "rtx-4090"  # gpu_info
    # --model names it outright; one that is not the model the row ran is refused
    p.write_text(json.dumps([_lb_row(model_type="llama 8B Q4_K - Medium")]))
    _, (forced,) = import_file(p, ctx=ctx(model=llama))
    assert forced.model_id == "meta-llama/Llama-3.1-8B" and forced.extra["mapped"]["model_id"] == "--model"
    with pytest.raises(ImportFormatError, match=r"lb.json:1: --model gemma-3-1b has 1.00 B parameters"):
        import_file(p, ctx=ctx(model=resolve_model("gemma-3-1b")))


def test_without_the_catalog_the_file_name_stays():
    row = _lb_row()
    p = Path(os.environ.get("TMPDIR", "/tmp")) / f"fitbench-lb-{os.getpid()}.json"
    try:
        p.write_text(json.dumps(row))
        _, (rec,) = import_file(p, ctx=ImportContext(source="test"))
    finally:
        p.unlink(missing_ok=True)
    assert rec.model_id == row["model_filename"] and not rec.model_fingerprint


def _published_csv(path: Path, rows: list[dict]) -> Path:
    base = {c: "" for c in PUBLISHED_COLUMNS}
    base.update(
        source_url="https://example.org/thread", source_group="test", engine="llama.cpp", backend="ROCm",
        hardware_id="instinct-mi50", n_gpus="1", quant="Q4_0", n_prompt="1024", n_gen="0", n_depth="0",
        metric="pp_tps", value="379.92", unit="tokens/s", quality="ok",
    )  # fmt: skip
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[*PUBLISHED_COLUMNS, "params_b"])
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({**base, "row_id": str(i), **r})
    return path


def test_published_rows_that_paste_llama_bench_descriptions(tmp_path):
    """An issue thread's table says "llama 8B Q4_0" and 8.03 (B parameters): Llama 3.x 8B's geometry.  A
    count that fits two geometries ("llama 7B", 7.24: Mistral v0.1 or v0.2) and a model the catalog lacks
    stay without model_id."""
    src = _published_csv(tmp_path / "pub.csv", [
        {"model_name": "llama 8B Q4_0", "params_b": "8.03"},
        {"model_name": "llama 7B Q4_0", "params_b": "7.24"},
        {"model_name": "gemma 2B Q4_0"},
        {"model_name": "llama 7B Q4_0", "params_b": "6.74"},
    ])  # fmt: skip
    _, recs = import_file(src, "published", ctx())
    assert [r.model_id for r in recs] == ["meta-llama/Llama-3.1-8B", "", "", "meta-llama/Llama-2-7b-hf"]
    assert recs[0].n_layers_real == 32 and "llama 8B Q4_0" in recs[0].extra["mapped"]["model_id"]
    assert "mapped" not in recs[1].extra


def test_cli_model_option(tmp_path):
    p = tmp_path / "lb.json"
    p.write_text(json.dumps([_lb_row(model_type="gemma 2B Q4_0", model_n_params=2_506_172_416)]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "harness", "import", str(p), "--results", str(tmp_path / "r"), *args]
        return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)

    res = run("--hardware", "rtx-4090")
    assert res.returncode == 0 and "1 of 1 records name no catalog model" in res.stderr, res.stderr
    assert "'gemma 2B Q4_0'" in res.stderr and "--model ID" in res.stderr
    res = run("--model", "gema-2b")
    assert res.returncode == 2 and "closest: " in res.stderr and "gemma-2-2b" in res.stderr


def test_vllm_bench_json_takes_the_model_from_the_option_or_a_catalog_model_id(tmp_path):
    """`vllm bench latency --output-json` does not name its model: --model does (or a model_id key the
    catalog knows); an unknown model_id stays as written, without a fingerprint."""
    p = tmp_path / "lat.json"
    p.write_text(json.dumps({"avg_latency": 1.5, "latencies": [1.4, 1.5, 1.6], "percentiles": {}}))
    _, (bare,) = import_file(p, ctx=ctx())
    _, (named,) = import_file(p, ctx=ctx(model=resolve_model("qwen3-0.6b")))
    assert bare.model_id == "" and not bare.model_fingerprint
    assert (named.model_id, named.n_layers_real) == ("Qwen/Qwen3-0.6B", 28) and named.model_fingerprint
    p.write_text(json.dumps({"model_id": "Qwen/Qwen3-0.6B", "avg_latency": 1.5, "latencies": [1.5]}))
    _, (keyed,) = import_file(p, ctx=ctx())
    assert keyed.model_fingerprint == named.model_fingerprint
    p.write_text(json.dumps({"model_id": "my-finetune", "avg_latency": 1.5, "latencies": [1.5]}))
    _, (unknown,) = import_file(p, ctx=ctx())
    assert unknown.model_id == "my-finetune" and not unknown.model_fingerprint


def test_llama_bench_rows_without_hardware_take_the_device_they_name(tmp_path):
    """Imported without --hardware, a row's one GPU (gpu_info) or, on the CPU backend, its CPU (cpu_info)
    names the catalog device; several GPUs, a bin the name does not state ("Apple M3 Max": 30 or 40 GPU
    cores) and a name that fits two devices ("RTX 3080": 10 or 12 GB) stay empty; --hardware wins."""
    cpu = "AMD Ryzen 9 7950X 16-Core Processor"
    rows = [
        _lb_row(backends="CUDA", gpu_info="NVIDIA GeForce RTX 4090", cpu_info=cpu),
        _lb_row(backends="CPU", gpu_info="", cpu_info=cpu),
        _lb_row(backends="Vulkan", gpu_info="AMD Radeon RX 7900 XTX (RADV NAVI31)", cpu_info=cpu),
        _lb_row(backends="CUDA", gpu_info="NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 4090", cpu_info=cpu),
        _lb_row(backends="Metal,BLAS", gpu_info="Apple M3 Max", cpu_info="Apple M3 Max"),
        _lb_row(backends="CUDA", gpu_info="NVIDIA GeForce RTX 3080", cpu_info=cpu),
    ]
    p = tmp_path / "lb.json"
    p.write_text(json.dumps(rows))
    _, recs = import_file(p, ctx=ctx(match_hardware_name=_token_match))
    assert [r.hardware_id for r in recs] == ["rtx-4090", "ryzen-9-7950x", "rx-7900-xtx", "", "", ""]
    assert [r.hardware_family for r in recs][:3] == ["nvidia-ada", "cpu-x86-avx512", "amd-rdna3"]
    assert recs[0].extra["mapped"]["hardware_id"] == "gpu_info 'NVIDIA GeForce RTX 4090'"
    assert "token match" in recs[2].extra["mapped"]["hardware_id"]
    rtx3090 = resolve_hardware("rtx-3090")
    _, given = import_file(p, ctx=ctx(match_hardware_name=_token_match, hardware=rtx3090))
    assert {r.hardware_id for r in given} == {"rtx-3090"} and "hardware_id" not in given[0].extra["mapped"]


def _token_match(name: str):
    """What `harness import` passes as ImportContext.match_hardware_name (harness.__main__)."""
    from harness.__main__ import _published_device

    return _published_device(name)


def test_the_import_names_the_models_it_could_not_place(tmp_path):
    src = _published_csv(tmp_path / "pub.csv", [
        {"model_name": "llama 8B Q4_0", "params_b": "8.03"},
        {"model_name": "gemma 2B Q4_0"},
        {"model_name": "gemma 2B Q4_0"},
        {"model_name": "Deci/DeciLM-7B"},
    ])  # fmt: skip
    argv = [sys.executable, "-m", "harness", "import", str(src), "--results", str(tmp_path / "r")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    said = "warning: 3 of 4 records name no catalog model ('gemma 2B Q4_0' x2, 'Deci/DeciLM-7B' x1"
    assert said in res.stderr
