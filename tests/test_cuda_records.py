"""llama.cpp on an NVIDIA H200 (results/runs/gpu-lease--nvidia-hopper--vm.jsonl, measured through
tools/device_lease.sh): what those records say about the memory model, and how calibration and the sweep's
announcements read a GPU record.

* The CUDA_Host compute buffer is the inputs' staging plus the KQ masks (``runtime_buffers``
  host_compute_bytes), to llama.cpp's log rounding, with flash attention; the compute buffers of every CUDA
  configuration (device + host) within a median 3 %.
* Calibration's context-overhead target uses the run's own NVML per-process peak (its CUDA context
  included) minus the buffers on the device, and its compute target the device's compute buffers.
* A memory-only CUDA point is announced against the estimator's sizes of the same buffers.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from calibration.memory_fit import (
    _measured_runtime,
    device_buffer_bytes,
    device_used_bytes,
    measured_compute_bytes,
)
from estimator.catalog.data import get_hardware
from estimator.catalog.resolve import resolve_model
from estimator.physics.runtime import runtime_buffers
from estimator.specs import Workload
from harness import consistency as cons
from harness.records import RunRecord
from harness.synth import proxy_spec

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "results" / "runs" / "gpu-lease--nvidia-hopper--vm.jsonl"
MIB = 2**20
# llama.cpp prints buffer sizes in MiB with two decimals; the staging buffer also holds a few KiB of token
# positions and output ids that the formula leaves out: up to two printed digits
LOG_ROUNDING_BYTES = 0.03 * MIB

pytestmark = pytest.mark.skipif(not RUNS.is_file(), reason=f"{RUNS.name} is not in results/runs")


def _records() -> list[RunRecord]:
    return [rec for _, rec in cons.load_runs(ROOT / "results") if rec.backend == "CUDA"]


def _memory_records(flash_attn: bool) -> list[RunRecord]:
    return [r for r in _records() if not r.n_prompt and not r.n_gen and bool(r.flash_attn) == flash_attn]


def _workload(rec: RunRecord) -> Workload:
    return Workload(
        n_ctx=rec.n_ctx,
        kv_dtype=rec.kv_dtype or "f16",
        n_batch=int(rec.n_batch or 2048),
        n_ubatch=int(rec.n_ubatch or 512),
        flash_attn=bool(rec.flash_attn),
        engine="llama.cpp",
    )


def test_lease_records_are_cuda_h200_full_offload():
    recs = _records()
    assert len(recs) >= 80
    assert {r.hardware_id for r in recs} == {"h200-141gb-sxm"}
    assert all(r.status == "ok" and r.n_gpu_layers == -1 for r in recs)


def test_host_staging_buffer_is_inputs_and_masks():
    """With flash attention the CUDA_Host compute buffer is 2 x 4 u hidden + the F16 masks, to the log's
    rounding, on every full-depth model (sliding-window Gemma 3 and gpt-oss: two masks)."""
    recs = _memory_records(flash_attn=True)
    assert len(recs) >= 28
    for rec in recs:
        model = proxy_spec(resolve_model(rec.model_id), rec.n_layers_measured or None)
        rt = runtime_buffers(model, None, get_hardware("h200-141gb-sxm"), _workload(rec))
        host = rec.extra["buffers_bytes"]["compute"]["CUDA_Host"]
        assert abs(host - rt.host_compute_bytes) <= LOG_ROUNDING_BYTES, (rec.model_id, rec.n_ctx)


def test_host_staging_grows_by_the_mask_and_the_device_buffer_does_not():
    """From 4,096 to 32,768 cells with flash attention the host buffer grows by 2 u x 28,672 B (the F16 full
    mask) and the device buffer stays: its high-water mark is the head, after the mask is freed."""
    by_ctx = {(r.model_id, r.n_ctx): r.extra["buffers_bytes"]["compute"] for r in _memory_records(True)}
    grown = 0
    for (model_id, ctx), small in by_ctx.items():
        big = by_ctx.get((model_id, 32768))
        if ctx != 4096 or big is None or resolve_model(model_id).window:
            continue
        assert abs(big["CUDA_Host"] - small["CUDA_Host"] - 2 * 512 * (32768 - 4096)) <= LOG_ROUNDING_BYTES
        if resolve_model(model_id).moe is None:
            assert big["CUDA0"] == small["CUDA0"], model_id
        grown += 1
    assert grown >= 8


def test_cuda_compute_buffers_match_within_a_median_three_percent():
    rows = cons.compare_runs([(str(RUNS), r) for r in _records()])
    gaps = [abs(r.compute_gap[1]) for r in rows if r.compute_gap[1] is not None]
    assert len(gaps) >= 40
    assert statistics.median(gaps) < 3.0
    assert all(r.weights_ok() and r.kv_ok() for r in rows)


def test_dense_device_head_moment_is_one_hidden_row_below_the_cpu_graphs():
    """With flash attention the head is a dense model's largest moment; on the H200 its device buffer is the
    CPU graph's less 4 u hidden (the input embeddings are staged on the host): every dense full-depth model,
    4K-32K cells, to llama.cpp's log rounding (prior coefficients)."""
    rows = cons.compare_runs([(str(RUNS), r) for r in _memory_records(True)])
    dense = [r for r in rows if resolve_model(r.model_id).moe is None]
    assert len(dense) >= 20
    for r in dense:
        assert abs(r.engine_compute_bytes - r.est_compute_bytes) <= LOG_ROUNDING_BYTES, (r.model_id, r.n_ctx)


def test_calibration_reads_device_figures_of_a_gpu_record():
    """Context overhead = NVML per-process peak - buffers on the device (600-710 MiB on the H200: the CUDA
    context, cuBLAS and the pool); the compute target is the device's buffer, not the host staging."""
    speed = [r for r in _records() if r.n_gen and r.n_depth == 0]
    assert len(speed) == 8
    for rec in speed:
        nv = rec.extra["nvml_devices"][0]
        assert device_used_bytes(rec) == nv["peak_process_bytes"] > rec.device_total_bytes
        on_device = sum(device_buffer_bytes(rec, k) for k in ("model", "KV", "RS", "compute"))
        assert _measured_runtime(rec, "context_overhead_bytes") == nv["peak_process_bytes"] - on_device
        assert 550 * MIB < _measured_runtime(rec, "context_overhead_bytes") < 750 * MIB
        assert measured_compute_bytes(rec) == rec.extra["buffers_bytes"]["compute"]["CUDA0"]


def test_device_figures_fall_back_without_per_process_accounting():
    rec = next(r for r in _records() if r.n_gen)
    devices = [dict(d, peak_process_bytes=0) for d in rec.extra["nvml_devices"]]
    blind = dataclasses.replace(rec, extra={**rec.extra, "nvml_devices": devices})
    assert device_used_bytes(blind) == rec.device_total_bytes  # NVML saw no processes (containers)
    cpu = dataclasses.replace(rec, backend="CPU")
    assert device_buffer_bytes(cpu, "compute") is None
    assert measured_compute_bytes(cpu) == rec.compute_bytes


def test_memory_point_is_announced_against_the_same_buffers():
    from harness.announce import point_lines
    from harness.estimate import Estimator

    rec = next(r for r in _memory_records(True) if r.model_id == "llama-3.1-8b")
    est = Estimator(ROOT / "results")
    (line, _), = point_lines([rec], est.predict([rec]))
    # the token embedding stays in host RAM on a GPU: both sides count it, so weights + KV agree exactly
    measured, estimated = line.split(" | ")[-2:]
    assert measured.startswith("weights+KV 15.458 GiB, compute "), line
    assert estimated.startswith("est. 15.458 GiB (+0.0 %), compute "), line


def test_quantized_prefill_on_hopper_is_left_out_of_the_fit_and_its_decode_is_not():
    """llama.cpp's MMQ issues mma.sync, which Hopper's datasheet rate does not describe: the quantized
    prefill points are listed as left out, F16 prefill and every decode point stay fitted."""
    from calibration.dataset import load_dataset
    from calibration.features import speed_points

    pts, rejected = speed_points(load_dataset(ROOT / "results"))
    ours = [p for p in pts if p.hardware.id == "h200-141gb-sxm" and p.engine == "llama.cpp"]
    assert sorted(p.phase for p in ours).count("decode") == 16
    assert sorted(p.phase for p in ours).count("prefill") == 8
    left = [r for r in rejected if "mma.sync" in r.reason]
    assert len(left) == 24 and all("nvidia-hopper" in r.reason for r in left)


def test_unmodelled_prefill_names_only_quantized_gemms_on_hopper():
    from estimator.physics.quant import get_quant
    from estimator.physics.speed import unmodelled_prefill

    model = resolve_model("llama-3.1-8b")
    h200, ada = get_hardware("h200-141gb-sxm"), get_hardware("rtx-4090")
    assert "mma.sync" in unmodelled_prefill(model, get_quant("Q4_K_M"), h200, "llama.cpp")
    assert unmodelled_prefill(model, get_quant("F16"), h200, "llama.cpp") == ""
    assert unmodelled_prefill(model, get_quant("Q4_K_M"), ada, "llama.cpp") == ""
    assert unmodelled_prefill(model, get_quant("Q4_K_M"), h200, "vllm") == ""


def test_unmodelled_prefill_interval_holds_every_h200_measurement():
    """The estimate of a quantized H200 prefill is marked not calibrated, and its interval (lower bound
    UNMODELLED_LOG_LO) holds every measured point, which the fit never saw."""
    from harness.estimate import Estimator

    recs = [r for r in _records() if r.n_prompt and not r.n_gen and r.quant != "F16"]
    assert len(recs) == 24
    for rec, (out, why) in zip(recs, Estimator(ROOT / "results").predict(recs), strict=True):
        assert out is not None, why
        lo, hi = float(out["prefill_tok_s_lo"]), float(out["prefill_tok_s_hi"])
        assert lo <= rec.prefill_tok_s <= hi, (rec.model_id, rec.quant, rec.n_prompt, rec.n_depth, lo, hi)
        assert out["calibrated"] != "true"
