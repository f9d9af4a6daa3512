"""Measurement -> RunRecords: one per test, provenance and memory on each, failed/skipped points."""

from __future__ import annotations

import dataclasses
import json

import pytest

from estimator.catalog.resolve import resolve_model
from harness.hwdetect import CpuInfo, HostInfo
from harness.provenance import (
    PointContext,
    failed_records,
    git_sha,
    measurement_from_dict,
    model_fingerprint,
    planned_tests,
    records_from_measurement,
    spec_to_dict,
)
from harness.records import record_from_dict, record_to_dict
from runners.base import Measurement, PointSpec
from runners.base import Test as MTest

HOST = HostInfo(
    host="h", backend="CPU", device_name="Test CPU", n_devices=1, driver="", hardware_id="",
    hardware_family="cpu-x86-avx512",
    cpu=CpuInfo("Test CPU", "x86_64", 2, 2, 2**34, ("avx512",), "cpu-x86-avx512"),
    detected={"host_bandwidth_probe_gbs": 20.0, "ram_bytes": 2**34},
)  # fmt: skip
SPEC = PointSpec(model_path="/x.gguf", n_ctx=1024, prompt_lengths=(64, 256), gen_lengths=(16,),
                 depths=(0, 512), n_threads=2)  # fmt: skip


def ctx(**kw) -> PointContext:
    model = resolve_model("qwen3-0.6b")
    base = dict(point_key="k", plan_source="plans/t.toml", host=HOST, engine="llama.cpp",
                engine_version="0.3.36", model_id=model.id, model=model, n_layers_measured=2, quant="Q8_0",
                synthetic_weights=True, spec=SPEC, git_sha="abc")  # fmt: skip
    base.update(kw)
    return PointContext(**base)


def measurement() -> Measurement:
    tests = (
        MTest("pp", 64, 0, 1, (100.0, 120.0, 110.0), 110.0, 10.0),
        MTest("tg", 16, 512, 1, (20.0, 22.0), 21.0, 1.41, ttft_s=0.05),
    )
    return Measurement(engine="llama.cpp", engine_version="llama-cpp-python 0.3.36", build_info="0c1e570",
                       backend="CPU", tests=tests, weights_bytes=5_000_000, kv_bytes=2_000_000,
                       compute_bytes=300_000, host_rss_bytes=9_000_000, n_params=123, n_threads=2,
                       extra={"kv_cells": 1024})  # fmt: skip


def test_one_record_per_test_with_memory_and_provenance():
    recs = records_from_measurement(ctx(), measurement())
    assert len(recs) == 2
    pp, tg = recs
    assert (pp.n_prompt, pp.n_gen, pp.n_depth, pp.prefill_tok_s, pp.decode_tok_s) == (64, 0, 0, 110.0, None)
    assert pp.prefill_samples_tok_s == (100.0, 120.0, 110.0) and pp.prefill_tok_s_std == 10.0
    assert (tg.n_prompt, tg.n_gen, tg.n_depth, tg.decode_tok_s, tg.ttft_s) == (0, 16, 512, 21.0, 0.05)
    for r in recs:
        assert r.weights_bytes == 5_000_000 and r.kv_bytes == 2_000_000 and r.host_rss_bytes == 9_000_000
        assert r.engine_version == "llama-cpp-python 0.3.36" and r.build_info == "0c1e570"
        assert (r.n_layers_real, r.n_layers_measured, r.synthetic_weights) == (28, 2, True)
        assert (
            r.hardware_family == "cpu-x86-avx512" and r.extra["detected"]["host_bandwidth_probe_gbs"] == 20.0
        )
        assert r.extra["point_key"] == "k" and r.extra["n_params"] == 123 and r.extra["kv_cells"] == 1024
        assert r.timestamp_utc.endswith("Z") and r.origin == "measured"
        assert record_from_dict(json.loads(json.dumps(record_to_dict(r)))) == r
    assert pp.record_id != tg.record_id


def test_vllm_records_leave_llama_cpp_settings_unstated():
    """The vLLM runner ignores flash_attn / n_batch / n_ubatch / n_gpu_layers: its records must not claim
    the PointSpec defaults (flash attention off, n_batch 2048) as what vLLM ran with."""
    m = dataclasses.replace(measurement(), engine="vllm", engine_version="0.32.0")
    vctx = ctx(engine="vllm", quant="BF16", spec=dataclasses.replace(SPEC, flash_attn=True))
    for r in [*records_from_measurement(vctx, m), *failed_records(vctx, "failed", "x")]:
        assert (r.flash_attn, r.n_batch, r.n_ubatch, r.n_gpu_layers) == (None, None, None, None)
    lctx = ctx(spec=dataclasses.replace(SPEC, flash_attn=True))
    (pp, _) = records_from_measurement(lctx, measurement())
    assert (pp.flash_attn, pp.n_batch, pp.n_ubatch, pp.n_gpu_layers) == (True, 2048, 512, -1)


def test_failed_point_gets_one_record_per_planned_test():
    planned = planned_tests(SPEC)
    assert len(planned) == 2 * 2 + 1 * 2  # pp: 2 lengths x 2 depths; tg: 1 length x 2 depths
    recs = failed_records(ctx(), "failed", "crashed: killed by SIGABRT")
    assert len(recs) == len(planned) and all(r.status == "failed" and "SIGABRT" in r.error for r in recs)
    assert all(r.prefill_tok_s is None and r.weights_bytes is None for r in recs)
    assert len({r.record_id for r in recs}) == len(recs)
    with pytest.raises(ValueError):
        failed_records(ctx(), "ok", "")
    assert records_from_measurement(ctx(), dataclasses.replace(measurement(), tests=()))[0].status == "failed"


def test_batched_decode_tests_planned():
    spec = dataclasses.replace(SPEC, concurrencies=(1, 4))
    assert {t.batch for t in planned_tests(spec) if t.kind == "tg"} == {1, 4}


def test_fingerprint_tracks_sizing_fields_only():
    m = resolve_model("qwen3-0.6b")
    fp = model_fingerprint(m)
    assert fp == model_fingerprint(dataclasses.replace(m, name="renamed", source="elsewhere", notes=("x",)))
    assert fp != model_fingerprint(dataclasses.replace(m, n_layers=2))
    assert fp != model_fingerprint(dataclasses.replace(m, head_dim=64))
    assert fp != model_fingerprint(resolve_model("qwen2.5-0.5b"))
    # fields added to ModelSpec after records were taken count only away from their defaults: the stored
    # points keep their keys (``--resume`` skips them) and the synthetic files their cache names
    from harness.provenance import LATER_TOP_DEFAULTS
    from harness.synth import spec_hash

    body = {k: v for k, v in dataclasses.asdict(m).items() if k not in LATER_TOP_DEFAULTS}
    assert set(LATER_TOP_DEFAULTS) <= set(dataclasses.asdict(m)) and len(body) < len(dataclasses.asdict(m))
    assert fp != model_fingerprint(dataclasses.replace(m, per_layer_input=256))
    assert spec_hash(m, 2) != spec_hash(dataclasses.replace(m, per_layer_input=256), 2)


def test_measurement_json_round_trip_and_spec_dict():
    raw = json.loads(json.dumps(dataclasses.asdict(measurement())))
    raw["unknown_future_field"] = 1
    assert measurement_from_dict(raw) == measurement()
    d = spec_to_dict(SPEC)
    assert d["prompt_lengths"] == [64, 256] and d["model_path"] == "/x.gguf"
    assert PointSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}) == SPEC


def test_git_sha(tmp_path):
    sha = git_sha()
    assert sha == "unknown" or len(sha) == 40
    assert git_sha(tmp_path) == "unknown"


def test_memory_only_point_gives_one_record_without_speeds():
    import dataclasses

    from harness.provenance import failed_records, planned_tests

    spec = dataclasses.replace(SPEC, prompt_lengths=(), gen_lengths=(), engine_options={"n_seq": 4})
    m = dataclasses.replace(measurement(), tests=())
    (rec,) = records_from_measurement(ctx(spec=spec), m)
    assert (rec.status, rec.n_prompt, rec.n_gen, rec.batch) == ("ok", 0, 0, 4)
    assert rec.prefill_tok_s is None and rec.decode_tok_s is None and rec.compute_bytes == 300_000
    assert rec.extra["test"] == "memory"
    assert [t.kind for t in planned_tests(spec)] == ["mem"]
    (failed,) = failed_records(ctx(spec=spec), "failed", "boom")
    assert failed.status == "failed" and failed.batch == 4
    # a point with tests but none returned is still a failure
    assert records_from_measurement(ctx(), m)[0].status == "failed"
