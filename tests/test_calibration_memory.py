"""Memory calibration: published runs joined for the weights+KV gate, held-out totals, the fitted compute
buffer, and the estimator reading the fitted ``memory`` section back."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from calibration import memory_fit
from calibration.dataset import LoadedRecord, build_dataset
from tests.calibration_gen import base_record

GIB = 2**30
DEVICE_NOTES = "n_ctx=8192; ngl=10000; model buffers: CPU=1 MiB, CUDA0=2 MiB (sum of GPU/Metal buffers; ...)"


def _ds(records):
    return build_dataset([LoadedRecord(r, "mem.jsonl", i + 1) for i, r in enumerate(records)])


def _published(metric: str, notes: str, **kw):
    """One imported memory-only record as harness.importers writes it (batch 0 = not stated)."""
    extra = {"metric": metric, "notes": notes, "quality": "ok", "published": {"test": "load n_ctx=8192"}}
    base = dict(
        record_id=f"{metric}-{kw.get('n_devices', 1)}-{kw.get('hardware_id', 'rtx-3090')}",
        source="https://example/run.ipynb",
        model_id="llama-3.1-8b",
        quant="Q4_K_M",
        n_gen=0,
        batch=0,
        n_ctx=8192,
        n_batch=None,
        n_ubatch=None,
        decode_tok_s=None,
        extra=extra,
    )
    base.update(kw)
    return base_record(**base)


def _physics(model_id="llama-3.1-8b", quant="Q4_K_M", n_ctx=8192, engine="llama.cpp"):
    from estimator.catalog.resolve import resolve_model
    from estimator.engines import get_engine
    from estimator.physics.kv import kv_cache
    from estimator.physics.quant import get_quant
    from estimator.physics.weights import weight_breakdown

    m = resolve_model(model_id)
    wb = weight_breakdown(m, get_engine(engine).weight_format(get_quant(quant)))  # the layout it loads
    return m, wb, kv_cache(m, n_ctx, "f16", 1, "llama.cpp").total_bytes


def test_published_weights_and_kv_are_joined_with_the_device_meaning():
    m, wb, kv = _physics()
    device_w = wb.total_bytes - wb.token_embd_bytes  # untied: the embedding stays in a CPU buffer
    recs = [
        _published("weights_gib", DEVICE_NOTES, weights_bytes=device_w),
        _published("kv_gib", "KV self size (K f16 + V f16)", kv_bytes=kv),
        # the same run on 4 GPUs: sums over devices, gated too
        _published("weights_gib", DEVICE_NOTES, n_devices=4, weights_bytes=device_w),
        _published("kv_gib", "KV self size", n_devices=4, kv_bytes=kv),
    ]
    rows, notes = memory_fit.memory_gate(_ds(recs))
    wkv = [r for r in rows if r.metric == "weights+kv"]
    assert len(wkv) == 2 and all(r.ape < 1e-9 for r in wkv), (wkv, notes)
    assert all("published, device" in r.scheme for r in wkv)


def test_device_meaning_is_not_the_whole_model():
    # a figure that counts the embedding too must not pass as the device buffer (the gate can fail)
    m, wb, kv = _physics()
    recs = [
        _published("weights_gib", DEVICE_NOTES, weights_bytes=wb.total_bytes),
        _published("kv_gib", "KV self size", kv_bytes=kv),
    ]
    (row,) = [r for r in memory_fit.memory_gate(_ds(recs))[0] if r.metric == "weights+kv"]
    assert row.ape == pytest.approx(wb.token_embd_bytes / (wb.total_bytes + kv), rel=1e-6)
    assert row.ape > 0.01


def test_host_meaning_and_unknown_meaning():
    m, wb, kv = _physics()
    host = [
        _published(
            "weights_gib", "n_ctx=8192; 'mem required' line (old build)", weights_bytes=wb.total_bytes
        ),
        _published("kv_gib", "KV self size", kv_bytes=kv),
    ]
    (row,) = [r for r in memory_fit.memory_gate(_ds(host))[0] if r.metric == "weights+kv"]
    assert row.ape < 1e-9 and "all" in row.scheme
    unknown = [replace(host[0], extra={**host[0].extra, "notes": "peak RSS"}), host[1]]
    rows, notes = memory_fit.memory_gate(_ds(unknown))
    assert not [r for r in rows if r.metric == "weights+kv"]
    assert any("no known meaning" in n for n in notes)


def test_vllm_kv_pool_is_not_gated_as_weights_plus_kv():
    m, wb, kv = _physics("llama-3.1-8b", "BF16", 1024, engine="vllm")  # norms in bf16, as vLLM loads them
    rec = base_record(
        origin="measured",
        engine="vllm",
        model_id="llama-3.1-8b",
        quant="BF16",
        n_ctx=1024,
        weights_bytes=wb.total_bytes,
        kv_bytes=256 * 2**20,
    )
    rows, _ = memory_fit.memory_gate(_ds([rec]))
    assert [r.metric for r in rows] == ["weights"] and rows[0].ape < 1e-9


def _compute_records(coeffs: dict):
    """Own-style records whose compute buffers come from estimator.physics.runtime with known coefficients."""
    from calibration.features import Resolver, workload_for
    from estimator.physics.runtime import runtime_buffers

    res = Resolver()
    out = []
    i = 0
    for hw_id in ("rtx-3090", "rtx-4090", "a100-80gb-pcie"):
        for model in ("llama-3.1-8b", "qwen2.5-7b", "llama-2-7b"):
            for n_ctx, ub in ((1024, 512), (8192, 512), (4096, 256)):
                i += 1
                r = base_record(
                    record_id=f"c{i}",
                    origin="measured",
                    hardware_id=hw_id,
                    model_id=model,
                    n_ctx=n_ctx,
                    n_ubatch=ub,
                    flash_attn=False,
                    compute_bytes=1,
                )
                model_s, quant, hw = res.spec_for(r)
                cb = runtime_buffers(model_s, quant, hw, workload_for(r), coeffs).compute_bytes
                out.append(replace(r, compute_bytes=int(cb)))
    return out


def test_fit_memory_recovers_the_compute_buffer_and_the_estimator_reads_it(tmp_path):
    from estimator.physics.coefficients import load_coefficients
    from estimator.physics.runtime import default_memory_coefficients

    truth = {**default_memory_coefficients("llama.cpp"), "logits_factor": 1.3, "kq_factor": 0.7}
    ds = _ds(_compute_records(truth))
    mem, notes = memory_fit.fit_memory(ds)
    got = mem["llama.cpp"]
    assert got["logits_factor"] == pytest.approx(1.3, rel=0.02), notes
    assert got["kq_factor"] == pytest.approx(0.7, rel=0.05)
    # held-out compute rows (device left out) are accurate on consistent data
    rows, _ = memory_fit.memory_gate(ds)
    comp = [r.ape for r in rows if r.metric == "compute"]
    assert len(comp) == 27 and max(comp) < 0.02

    # the estimator's memory estimate uses coefficients.json's memory section when present
    from estimator.catalog.resolve import resolve_hardware, resolve_model
    from estimator.physics.memory import estimate_memory
    from estimator.physics.quant import get_quant
    from estimator.specs import Workload

    doc = {"schema_version": 1, "groups": [], "pooled": [], "memory": mem}
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps(doc))
    table = load_coefficients(path)
    m, q, h = resolve_model("llama-3.1-8b"), get_quant("Q4_K_M"), resolve_hardware("rtx-4090")
    wl = Workload(n_ctx=8192, flash_attn=False)
    fitted = estimate_memory(m, q, h, wl, table.memory_for("llama.cpp"))
    prior = estimate_memory(m, q, h, wl, None)
    assert fitted.runtime_bytes != prior.runtime_bytes
    assert fitted.coefficients != "prior"


def test_compute_fit_uses_own_runs_of_two_layers_or_more():
    """One-layer proxies (ggml packs their graph differently) and published compute buffers (older CUDA /
    Metal builds) are not fitted: a fit on them alone keeps the prior and says what it left out."""
    from estimator.physics.runtime import default_memory_coefficients

    prior = default_memory_coefficients("llama.cpp")
    truth = {**prior, "logits_factor": 1.3}
    recs = _compute_records(truth)
    one_layer = [replace(r, record_id=f"L1-{r.record_id}", n_layers_measured=1) for r in recs]
    published = [replace(r, record_id=f"pub-{r.record_id}", origin="imported") for r in recs]
    mem, notes = memory_fit.fit_memory(_ds(one_layer + published))
    assert mem["llama.cpp"]["logits_factor"] == prior["logits_factor"]
    mem, notes = memory_fit.fit_memory(_ds(one_layer + recs))
    assert mem["llama.cpp"]["logits_factor"] == pytest.approx(1.3, rel=0.02)
    assert any(f"{len(one_layer)} one-layer proxy point(s) left out" in n for n in notes), notes


def test_memory_gate_counts_each_measurement_once():
    """The test rows of one run (pp512, tg128) repeat its memory figures: one sample, not two."""
    from calibration.memory_fit import MemoryGateRow, distinct_measurements

    key = ("imported", "https://example/run", "rtx-3090", 1, "llama-2-7b", 32, "Q4_0", 4096, "f16", 4 * 10**9)
    pp = MemoryGateRow("nvidia-ampere", "llama.cpp", "CUDA", "weights+kv", 4.0e9, 4.0e9, "exact", "a:1", key)
    tg = MemoryGateRow("nvidia-ampere", "llama.cpp", "CUDA", "weights+kv", 4.0e9, 4.0e9, "exact", "a:2", key)
    other = MemoryGateRow("nvidia-ampere", "llama.cpp", "CUDA", "weights+kv", 4.0e9, 4.1e9, "exact", "a:3",
                          (*key[:-1], 4_100_000_000))  # fmt: skip
    total = MemoryGateRow("nvidia-ampere", "llama.cpp", "CUDA", "total", 5.0e9, 5.0e9, "lodo", "a:1", key)
    assert distinct_measurements([pp, tg, other, total]) == [pp, other, total]
