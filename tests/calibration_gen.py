"""Generated RunRecords from KNOWN speed parameters, through the estimator's own physics, plus noise.

Used by the calibration tests: the fit must recover the parameters it was generated with.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.records import RunRecord, record_to_dict

MODELS = ("llama-2-7b", "llama-3.1-8b", "llama-2-13b", "qwen2.5-7b", "llama-3.1-70b")
QUANTS = ("Q4_0", "Q4_K_M", "Q8_0")


def base_record(**kw) -> RunRecord:
    rec = RunRecord(
        record_id="r0",
        schema_version=1,
        timestamp_utc="2026-01-01T00:00:00Z",
        origin="imported",
        source="generated",
        fitbench_git_sha="",
        host="h",
        engine="llama.cpp",
        engine_version="b1",
        build_info="",
        backend="CUDA",
        device_name="dev",
        hardware_id="rtx-3090",
        hardware_family="nvidia-ampere",
        n_devices=1,
        driver="",
        model_id="llama-2-7b",
        model_fingerprint="",
        n_layers_real=32,
        n_layers_measured=32,
        quant="Q4_0",
        synthetic_weights=False,
        n_prompt=0,
        n_gen=128,
        n_depth=0,
        batch=1,
        n_ctx=4096,
        kv_dtype="f16",
        flash_attn=None,
        n_threads=None,
        n_batch=2048,
        n_ubatch=512,
        n_gpu_layers=99,
        status="ok",
        decode_tok_s=50.0,
    )
    return replace(rec, **kw)


def generate(
    devices: dict[str, str],
    dec_params: dict[str, dict],
    pre_params: dict[str, dict] | None = None,
    noise: float = 0.03,
    seed: int = 0,
    models=MODELS,
    quants=QUANTS,
    era: str = "",
) -> list[RunRecord]:
    """Records for every device x model x quant: tg128 (decode) and pp512 (prefill) rows.

    devices: hardware id -> family; dec_params / pre_params: family -> params.  Times come from
    estimator.physics.speed with those params; multiplicative log-normal noise of sd ``noise``.  ``era``: the
    prompts as a build of that era ran them (calibration.features.as_built_prefill); the records do not say
    the era (a test sets their source).
    """
    from calibration.features import as_built_prefill, workload_for
    from estimator.catalog.resolve import resolve_hardware, resolve_model
    from estimator.physics import speed
    from estimator.physics.quant import get_quant

    rng = np.random.default_rng(seed)
    out = []
    i = 0
    for hw_id, fam in devices.items():
        hw = resolve_hardware(hw_id)
        for mid in models:
            model = resolve_model(mid)
            for q in quants:
                quant = get_quant(q)
                i += 1
                rec = base_record(
                    record_id=f"d{i}",
                    hardware_id=hw_id,
                    hardware_family=fam,
                    model_id=mid,
                    n_layers_real=model.n_layers,
                    n_layers_measured=model.n_layers,
                    quant=q,
                    device_name=hw.name,
                    n_prompt=0,
                    n_gen=128,
                    decode_tok_s=1.0,
                )
                wl = workload_for(rec)
                t = speed.decode_step_s(speed.tg_features(model, quant, wl, 0, 128), hw, dec_params[fam])
                t *= float(np.exp(rng.normal(0, noise)))
                out.append(replace(rec, decode_tok_s=1.0 / t))
                if pre_params:
                    i += 1
                    rec = replace(
                        rec, record_id=f"p{i}", n_prompt=512, n_gen=0, decode_tok_s=None, prefill_tok_s=1.0
                    )
                    f = speed.prefill_features(model, quant, workload_for(rec))
                    f = as_built_prefill(f, model, quant, hw, rec.engine, era)
                    pp = {**pre_params[fam], "bw_eff": dec_params[fam]["bw_eff"]}
                    t = speed.prefill_s(f, hw, pp) * float(np.exp(rng.normal(0, noise)))
                    out.append(replace(rec, prefill_tok_s=512 / t))
    return out


def write_records(path: Path, records: list[RunRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(record_to_dict(r), sort_keys=True) + "\n")
    return path


SERVING_MODELS = (("llama-3.1-8b", "BF16"), ("qwen3-30b-a3b", "BF16"), ("llama-3.1-70b", "FP8"),
                  ("qwen3-8b", "BF16"), ("qwen3-32b", "FP8"))  # fmt: skip


def generate_serving(
    devices: dict[str, str],
    params: dict[str, dict],
    noise: float = 0.03,
    seed: int = 0,
    models=SERVING_MODELS,
    engine: str = "vllm",
    concurrencies=(1, 8, 64),
    lengths=((1024, 1024), (8192, 1024)),
) -> list[RunRecord]:
    """Serving records (schema 2: TTFT and TPOT of a closed loop at ``concurrencies``, vLLM ``agg``) for
    every device x model x load.

    devices: hardware id -> family; params: family -> serving params.  Times come from
    estimator.physics.serving.solve with those params on the features calibration.serving builds for the
    record (the path a real record takes); multiplicative log-normal noise of sd ``noise``.
    """
    from calibration.dataset import LoadedRecord, build_dataset
    from calibration.serving import serving_points
    from estimator.catalog.resolve import resolve_hardware, resolve_model
    from estimator.physics.serving import solve

    rng = np.random.default_rng(seed)
    recs = []
    for hw_id, fam in devices.items():
        hw = resolve_hardware(hw_id)
        for mid, q in models:
            n_layers = resolve_model(mid).n_layers
            for c in concurrencies:
                for isl, osl in lengths:
                    recs.append(
                        base_record(
                            record_id=f"s{len(recs)}-{engine}", schema_version=2, engine=engine,
                            engine_version="0.19.0", hardware_id=hw_id, hardware_family=fam,
                            backend="ROCm" if hw.vendor.upper() == "AMD" else "CUDA",
                            device_name=hw.name, model_id=mid, n_layers_real=n_layers,
                            n_layers_measured=n_layers, quant=q, n_prompt=isl, n_gen=osl, batch=c, n_ctx=0,
                            kv_dtype="", n_batch=None, n_ubatch=None, n_gpu_layers=None, decode_tok_s=None,
                            concurrency=c, serving_mode="agg", ttft_s=1.0, tpot_s=1.0,
                        )
                    )  # fmt: skip
    ds = build_dataset([LoadedRecord(r, "generated", i) for i, r in enumerate(recs)])
    points, rejected = serving_points(ds)
    assert not rejected, rejected
    feats = {p.record_id: p.features for p in points}
    out = []
    for r in recs:
        s = solve(feats[r.record_id], params[r.hardware_family])
        ttft, tpot = (float(s[k]) * float(np.exp(rng.normal(0, noise))) for k in ("ttft_s", "tpot_s"))
        out.append(replace(r, ttft_s=ttft, tpot_s=tpot))
    return out
