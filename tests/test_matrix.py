"""The vectorised matrix equals the scalar path (memory rtol 1e-9, speed rtol 1e-6) on random samples."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from estimator.catalog.data import all_hardware, all_models
from estimator.physics import matrix, speed
from estimator.physics.coefficients import prior_table
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import QUANTS
from estimator.specs import SpecError, Workload

CONTEXTS = (4096, 32768)


@pytest.fixture(scope="module")
def grid():
    rng = random.Random(7)
    models = rng.sample(all_models(), 8)
    # make sure an MoE and an MLA model are in the sample
    extra = [m for m in all_models() if m.mla is not None][:1] + [m for m in all_models() if m.moe][:1]
    models = list({m.id: m for m in models + extra}.values())
    hardware = rng.sample(all_hardware(), 25)
    return models, hardware, list(QUANTS.values())


def _check(mx, table, wl, n_samples, seed, decode_at_context=False):
    rng = random.Random(seed)
    M, H, Q, C = mx.shape  # noqa: N806
    checked = 0
    for _ in range(n_samples):
        i, j, k, l = rng.randrange(M), rng.randrange(H), rng.randrange(Q), rng.randrange(C)  # noqa: E741
        m, h, q, ctx = mx.models[i], mx.hardware[j], mx.quants[k], mx.contexts[l]
        pw = replace(wl, n_ctx=ctx)
        if h.memory_bytes:
            est = estimate_memory(m, q, h, pw, table.memory_for(wl.engine))
            assert mx.total_bytes[i, j, k, l] == pytest.approx(est.total_bytes, rel=1e-9, abs=0)
            assert mx.weights_bytes[i, j, k] == pytest.approx(est.weights_bytes, rel=1e-9, abs=0)
            assert mx.kv_bytes[i, l] == pytest.approx(est.kv_bytes, rel=1e-9, abs=0)
            assert bool(mx.fits[i, j, k, l]) == (est.verdict == "fits")
        else:
            assert not mx.fits[i, j, k, l]
        if h.bandwidth_gbs:
            _, _, dparams, _ = speed.merged_params(table, h, wl.engine)
            start = ctx if decode_at_context else wl.n_depth
            step = speed.decode_step_s(speed.tg_features(m, q, pw, start, max(wl.n_gen, 1)), h, dparams)
            assert mx.decode_tok_s[i, j, k, l] == pytest.approx(1.0 / step, rel=1e-6)
        else:
            assert np.isnan(mx.decode_tok_s[i, j, k, l])
        checked += 1
    return checked


def test_matrix_equals_scalar_single_device(grid):
    models, hardware, quants = grid
    table = prior_table()
    wl = Workload()
    mx = matrix.build_matrix(models, hardware, quants, CONTEXTS, table, wl)
    assert _check(mx, table, wl, 150, seed=1) == 150


def test_matrix_equals_scalar_decode_at_context_tp_batched(grid):
    models, hardware, quants = grid
    table = prior_table()
    wl = Workload(n_devices=2, n_seq=4, n_gen=32)
    mx = matrix.build_matrix(models, hardware, quants, CONTEXTS, table, wl, decode_at_context=True)
    assert _check(mx, table, wl, 100, seed=2, decode_at_context=True) == 100


def test_matrix_vllm(grid):
    models, hardware, quants = grid
    table = prior_table()
    wl = Workload(engine="vllm", kv_dtype="fp8")
    mx = matrix.build_matrix(models, hardware, quants, CONTEXTS, table, wl)
    assert _check(mx, table, wl, 60, seed=3) == 60


def test_matrix_physics_sanity(grid):
    models, hardware, quants = grid
    mx = matrix.build_matrix(models, hardware, quants, CONTEXTS, prior_table(), Workload())
    # a longer context never needs less memory and never fits where a shorter one does not
    assert np.all(mx.total_bytes[..., 1] >= mx.total_bytes[..., 0])
    assert not np.any(mx.fits[..., 1] & ~mx.fits[..., 0])
    # more bandwidth -> faster decode for the same model/quant (prior coefficients of the same kind)
    gpus = [j for j, h in enumerate(mx.hardware) if h.kind == "gpu" and h.bandwidth_gbs]
    lo, hi = (
        min(gpus, key=lambda j: mx.hardware[j].bandwidth_gbs),
        max(gpus, key=lambda j: mx.hardware[j].bandwidth_gbs),
    )
    assert np.all(mx.decode_tok_s[:, hi] > mx.decode_tok_s[:, lo])
    assert all(label == "pooled prior (uncalibrated)" for label in mx.coefficients)


def test_fit_table_sorted_and_fitting(grid):
    models, hardware, quants = grid
    mx = matrix.build_matrix(models, hardware, quants, CONTEXTS, prior_table(), Workload())
    hw = next(h for h in mx.hardware if h.memory_bytes and h.bandwidth_gbs)
    rows = matrix.fit_table(mx, hw.id, 4096, ("Q8_0", "Q4_K_M", "Q2_K"))
    assert len(rows) == len(models)
    fitting = [r for r in rows if r["fits"]]
    assert all(r["quant"] in ("Q8_0", "Q4_K_M", "Q2_K") for r in fitting)
    speeds = [r["decode_tok_s"] for r in fitting]
    assert speeds == sorted(speeds, reverse=True)
    assert rows[: len(fitting)] == fitting


def test_matrix_rejects_offload_and_pp(grid):
    models, hardware, quants = grid
    with pytest.raises(SpecError, match="offload"):
        matrix.build_matrix(
            models[:1], hardware[:1], quants[:1], CONTEXTS, prior_table(), Workload(offload_bytes=1)
        )
    with pytest.raises(SpecError, match="tensor-parallel"):
        matrix.build_matrix(
            models[:1], hardware[:1], quants[:1], CONTEXTS, prior_table(), Workload(n_devices=2, split="pp")
        )
