"""Older llama.cpp builds as they ran: before MMQ became the default (llama.cpp PR #8075, 2024-06), ggml-cuda
ran the quantized GEMMs of passes over 32 tokens on tensor-core GPUs as dequantize-to-F16 + cuBLAS
(PR #3776).  Calibration times the records of such a build (``calibration.dataset.record_era``) that way
(``calibration.features.as_built_prefill``, ``estimator.physics.speed.dequant_gemm_features``); the
estimator predicts current builds and never does."""

from __future__ import annotations

from dataclasses import replace

import pytest

from calibration.dataset import LEGACY_ERA, load_dataset
from calibration.features import as_built_prefill, speed_points
from estimator.catalog.data import get_hardware
from estimator.catalog.resolve import resolve_model
from estimator.physics import speed
from estimator.physics.quant import get_quant
from estimator.specs import Workload
from harness.records import RunRecord
from tests.calibration_gen import write_records

PP512 = Workload(n_ctx=4096, n_prompt=512, n_batch=2048, n_ubatch=512, engine="llama.cpp", backend="CUDA")


def _pp(quant: str = "Q4_K_M", wl: Workload = PP512):
    model, q = resolve_model("llama-3.1-8b"), get_quant(quant)
    return model, q, speed.prefill_features(model, q, wl)


def test_dequant_path_reads_the_weights_and_writes_f16_copies_the_gemms_then_read():
    model, q, f = _pp()
    g = speed.dequant_gemm_features(f, model, q)
    assert f.kernel_class == "kquant" and f.dequant_bytes == 0 and g.kernel_class == "f16"
    head_q = speed.breakdown(model, q).output_bytes  # the logit rows' head stays quantized (mat-vec)
    body_f16 = speed.prefill_features(model, get_quant("F16"), PP512).weight_bytes - model.vocab_size * (
        model.hidden_size * 2
    )
    assert g.weight_bytes == pytest.approx(head_q + body_f16, rel=1e-3)  # the GEMMs read the F16 copies
    assert g.dequant_bytes == pytest.approx(f.weight_bytes - head_q + body_f16, rel=1e-3)  # read q, write F16
    # F16 weights and one token per pass have no such step
    m16, q16, f16 = _pp("F16")
    assert speed.dequant_gemm_features(f16, m16, q16) == f16
    _m, _q, one = _pp(wl=replace(PP512, n_batch=1, n_ubatch=1))
    assert speed.dequant_gemm_features(one, model, q) == one


def test_dequant_step_adds_its_bytes_at_the_streaming_rate_per_pass():
    model, q, f = _pp(wl=replace(PP512, n_prompt=2048))
    g = speed.dequant_gemm_features(f, model, q)
    hw = get_hardware("rtx-3090")
    d = speed.device_rates(hw, "llama.cpp", False, "CUDA")
    params = {"flops_eff": 0.5, "bw_eff": 0.8, "attn_eff": 0.3, "t_layer_s": 0.0, "host_bw_eff": 0.5}
    rates = speed.rates_for_prefill(d, params, "f16")
    extra = speed.prefill_time(g, rates) - speed.prefill_time(replace(g, dequant_bytes=0.0), rates)
    assert g.n_passes == 4
    assert extra == pytest.approx(4 * g.dequant_bytes / rates.bw_bs, rel=1e-9)


@pytest.mark.parametrize(
    ("device", "era", "backend", "ubatch", "engine", "dequant"),
    [
        ("rtx-3090", LEGACY_ERA, "CUDA", 512, "llama.cpp", True),
        ("h100-80gb-pcie", LEGACY_ERA, "CUDA", 512, "llama.cpp", True),
        ("rtx-3090", "", "CUDA", 512, "llama.cpp", False),  # a current build: MMQ
        ("rtx-3090", LEGACY_ERA, "CUDA", 32, "llama.cpp", False),  # MMQ took passes of up to 32 tokens
        ("tesla-p40", LEGACY_ERA, "CUDA", 512, "llama.cpp", False),  # no tensor cores: MMQ (dp4a)
        ("apple-m1-7c", LEGACY_ERA, "Metal", 512, "llama.cpp", False),  # Metal's own mul_mm kernels
    ],
)
def test_only_a_2024_cuda_build_on_tensor_cores_dequantizes(device, era, backend, ubatch, engine, dequant):
    wl = replace(PP512, n_ubatch=ubatch, backend=backend, engine=engine)
    model, q, f = _pp(wl=wl)
    g = as_built_prefill(f, model, q, get_hardware(device), engine, era)
    assert (g.dequant_bytes > 0) is dequant
    assert (g == f) is not dequant


def _h100_row(source_group: str) -> RunRecord:
    """A llama-bench pp512 row of Llama-3-8B Q4_K_M on an H100 PCIe (figure illustrative: the test reads
    only what calibration makes of the row, not its speed)."""
    from tests.calibration_gen import base_record

    return base_record(
        record_id=f"h100-{source_group}", hardware_id="h100-80gb-pcie", hardware_family="nvidia-hopper",
        model_id="meta-llama/Meta-Llama-3-8B", quant="Q4_K_M", n_prompt=512, n_gen=0, decode_tok_s=None,
        prefill_tok_s=7000.0, flash_attn=False, extra={"source_group": source_group, "unit": "tokens/s"},
    )  # fmt: skip


def test_a_2024_hopper_quantized_prefill_is_fitted_and_a_current_one_is_not(tmp_path):
    """MMQ's mma.sync on Hopper is what the prefill model does not describe (llama.cpp profile
    ``unmodelled_quant_gemm``); a 2024 build ran those GEMMs on cuBLAS, which it does."""
    write_records(tmp_path / "runs" / "h100.jsonl", [_h100_row("xiongjiedai"), _h100_row("llama.cpp-15013")])
    pts, rejected = speed_points(load_dataset(tmp_path))
    assert [(p.phase, p.features.kernel_class) for p in pts] == [("prefill", "f16")]
    assert pts[0].features.dequant_bytes > 0
    assert len(rejected) == 1 and "mma.sync" in rejected[0].reason
