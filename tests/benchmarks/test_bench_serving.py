"""Serving model speed (pytest-benchmark; no timed assertions): a 64-point concurrency sweep of one
configuration through estimator.physics.serving, as the report's serving section and ``predict`` evaluate it
(issue 9's budget: < 50 ms).

Run: ``python -m pytest tests/benchmarks/test_bench_serving.py --benchmark-enable``
"""

from __future__ import annotations

from estimator.catalog.data import get_hardware, get_model
from estimator.physics import serving
from estimator.physics.coefficients import prior_table
from estimator.physics.quant import get_quant
from estimator.specs import Workload


def test_bench_serving_sweep_64(benchmark):
    model, hw, quant = get_model("glm-4.5"), get_hardware("mi300x"), get_quant("FP8")
    wl = Workload(n_ctx=2048, kv_dtype="fp8", engine="vllm", n_devices=8, split="tp")
    loads = [serving.ServingLoad(c, 1024, 1024) for c in range(1, 1025, 16)]
    table = prior_table()
    out = benchmark(serving.estimate_serving, model, quant, hw, wl, loads, table)
    benchmark.extra_info["points"] = len(out)
    assert len(out) == 64 and all(e.tpot_s > 0 for e in out)
    assert out[-1].output_tok_s > out[0].output_tok_s
