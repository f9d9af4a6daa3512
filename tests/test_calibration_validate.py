"""Cross-validation: held-out predictions really exclude the held-out data; intervals and coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import features as feat  # noqa: E402
from calibration.fit import Prior, SpeedPoint  # noqa: E402
from calibration.hierarchy import fit_hierarchy  # noqa: E402
from calibration.validate import ape_stats, gate_holdout, holdout, interval, nested_coverage  # noqa: E402
from estimator.physics.speed import DecodeFeatures  # noqa: E402
from estimator.specs import HardwareSpec  # noqa: E402


def _points(effs: dict[str, float], n: int = 20, noise: float = 0.02, seed: int = 0) -> list[SpeedPoint]:
    rng = np.random.default_rng(seed)
    pts = []
    for dev, eff in effs.items():
        hw = HardwareSpec(
            id=dev,
            name=dev,
            vendor="v",
            family="fam",
            kind="gpu",
            memory_bytes=None,
            bandwidth_gbs=1000.0,
            bf16_tflops=100.0,
        )
        for i in range(n):
            f = DecodeFeatures(

                weight_bytes=1e9 * (1 + i % 5), kv_bytes=0.0, host_bytes=0.0, expert_union_bytes=0.0,

                flops_per_token=0.0, batch=1, n_layers=16 + 8 * (i % 4), n_moe_layers=0, hidden_size=1,

                n_devices=1, split="tp", fp8=False, engine="llama.cpp",

            )
            t = 3e-4 + 1e-5 * f.n_layers + f.bytes_per_token / (1e12 * eff)
            pts.append(
                SpeedPoint(
                    f,
                    hw,
                    t * math.exp(rng.normal(0, noise)),
                    "decode",
                    "fam",
                    "llama.cpp",
                    "CUDA",
                    dev,
                    f"m{i % 5}",
                    vendor="v",
                    kind="gpu",
                )
            )
    return pts


def _prior(_gk):
    return Prior(
        {"bw_eff": 0.7, "t_layer_s": 1e-5, "t_fixed_s": 3e-4},
        {"bw_eff": 1.0, "t_layer_s": 3e-4, "t_fixed_s": 1e-3},
    )


def test_lodo_does_not_see_the_held_out_device():
    # the odd device has a much lower efficiency: in-sample it is fitted, held out it cannot be
    pts = _points({"a": 0.6, "b": 0.6, "c": 0.6, "odd": 0.3})
    h = fit_hierarchy(pts, feat.decode_model(), _prior)
    held = holdout(pts, h, "lodo")
    odd = [x for x in held if x.point.device == "odd"]
    rest = [x for x in held if x.point.device != "odd"]
    assert len(held) == len(pts)
    assert np.median([x.ape for x in odd]) > 0.25  # predicted with ~0.5 efficiency, measured at 0.3
    assert np.median([x.ape for x in rest]) < 0.2
    assert all(x.level == "family" for x in held)


def test_lomo_and_gate_schemes():
    pts = _points({"only": 0.6})
    h = fit_hierarchy(pts, feat.decode_model(), _prior)
    held = gate_holdout(pts, h)
    assert {x.scheme for x in held} == {"lomo (single device)"}
    assert np.median([x.ape for x in held]) < 0.05
    lodo = holdout(pts, h, "lodo")  # single device held out: falls back to the pool, which has no data
    assert {x.level for x in lodo} == {"prior"}


def test_interval_and_coverage():
    rng = np.random.default_rng(0)
    r = rng.normal(0, 0.1, 2000)
    lo, hi = interval(r)
    assert lo == pytest.approx(-0.1645, abs=0.02) and hi == pytest.approx(0.1645, abs=0.02)
    assert interval([0.1, 0.2, 0.3, 0.4, 0.5])[0] == 0.0  # widened to contain 0
    pts = _points({"a": 0.6, "b": 0.62, "c": 0.58, "d": 0.61}, noise=0.05, seed=2)
    h = fit_hierarchy(pts, feat.decode_model(), _prior)
    held = holdout(pts, h, "lodo")
    cov = nested_coverage(held)
    assert cov is not None and 0.7 <= cov <= 1.0
    assert nested_coverage([]) is None


def test_ape_stats():
    assert ape_stats([]) == (None, None)
    med, p90 = ape_stats([0.0, 0.1, 0.2, 0.3, 1.0])
    assert med == pytest.approx(0.2) and p90 == pytest.approx(0.72)
