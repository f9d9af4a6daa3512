"""Cross-validation: held-out predictions really exclude the held-out data, every fold refits its own scales,
conformal intervals and their out-of-sample coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import fit as F  # noqa: E402
from calibration.fit import SpeedPoint  # noqa: E402
from calibration.validate import (  # noqa: E402
    FOLDS,
    HeldOut,
    ape_stats,
    basis_of,
    coverage,
    gate_holdout,
    holdout,
    interval,
)
from estimator.physics.speed import DecodeFeatures  # noqa: E402
from estimator.specs import HardwareSpec  # noqa: E402


def _points(effs: dict[str, float], n: int = 20, noise: float = 0.02, seed: int = 0, family=None):
    rng = np.random.default_rng(seed)
    pts = []
    for dev, eff in effs.items():
        fam = family(dev) if family else "fam"
        hw = HardwareSpec(id=dev, name=dev, vendor="v", family=fam, kind="gpu", memory_bytes=None,
                          bandwidth_gbs=1000.0, bf16_tflops=100.0, memory_type="GDDR6")  # fmt: skip
        for i in range(n):
            f = DecodeFeatures(
                weight_bytes=1e9 * (1 + i % 5), kv_bytes=0.0, host_bytes=0.0, expert_union_bytes=0.0,
                flops_per_token=0.0, batch=1, n_layers=16 + 8 * (i % 4), n_moe_layers=0, hidden_size=1,
                n_devices=1, split="tp", fp8=False, engine="llama.cpp",
            )  # fmt: skip
            t = 3e-4 + 1e-5 * f.n_layers + f.bytes_per_token / (1e12 * eff)
            t_meas = t * math.exp(rng.normal(0, noise))
            pts.append(SpeedPoint([f], hw, t_meas, "decode", fam, "llama.cpp", "CUDA", dev, f"m{i % 5}",
                                  vendor="v", kind="gpu"))  # fmt: skip
    return pts


def test_lodo_does_not_see_the_held_out_device():
    # the odd device has a much lower efficiency: in-sample it is fitted, held out it cannot be
    pts = _points({"a": 0.6, "b": 0.6, "c": 0.6, "odd": 0.3})
    full = F.fit_model(pts)
    held, _ = holdout(pts, full, "lodo")
    odd = [x for x in held if x.point.device == "odd"]
    rest = [x for x in held if x.point.device != "odd"]
    assert len(held) == len(pts)
    assert np.median([x.ape for x in odd]) > 0.25  # predicted with ~0.6 efficiency, measured at 0.3
    assert np.median([x.ape for x in rest]) < 0.2
    assert {x.basis for x in held} == {"family"}  # the other devices of the family were fitted
    assert np.median(np.abs(full.residuals)) < 0.05  # in sample the odd device is fitted


def test_folds_refit_their_own_scales():
    """A fold re-estimates the noise and shrinkage scales on its own data (nothing from the full fit but a
    warm start)."""
    pts = _points({"a": 0.6, "b": 0.62, "c": 0.58, "odd": 0.3}, noise=0.05, seed=4)
    full = F.fit_model(pts)
    _, states = holdout(pts, full, "lodo", keep_states=True)
    sig = {k: s.scales.sigma["decode"] for k, s in states.items()}
    assert sig["odd"] != pytest.approx(full.scales.sigma["decode"], rel=1e-6)
    assert all(len(s.train) < len(pts) for s in states.values())


def test_lomo_and_gate_schemes():
    pts = _points({"only": 0.6})
    full = F.fit_model(pts)
    held = {s: holdout(pts, full, s)[0] for s in ("lodo", "lomo")}
    gate = gate_holdout(pts, held)
    assert {x.scheme for x in gate} == {"lomo (single device)"}
    assert {x.basis for x in held["lomo"]} == {"device"}
    assert np.median([x.ape for x in gate]) < 0.05
    assert {x.basis for x in held["lodo"]} == {"pooled"}  # the only device held out: covariates alone


def test_lofo_predicts_from_other_families_only():
    pts = _points({"a": 0.6, "b": 0.6, "c": 0.6}, family=lambda d: f"f{d}")
    full = F.fit_model(pts)
    held, _ = holdout(pts, full, "lofo")
    assert {x.basis for x in held} == {"pooled"} and len(held) == len(pts)
    assert np.median([x.ape for x in held]) < 0.1  # the same physics in every family


def test_basis_of():
    pts = _points({"a": 0.6, "b": 0.6}, n=2)
    a, b = pts[0], pts[2]
    assert basis_of(a, pts[1:]) == "device"
    assert basis_of(a, [b]) == "family"
    assert basis_of(a, []) == "pooled"


def test_conformal_interval():
    rng = np.random.default_rng(0)
    r = rng.normal(0, 0.1, 4000)
    lo, hi = interval(r)
    assert lo == pytest.approx(-0.1645, abs=0.015) and hi == pytest.approx(0.1645, abs=0.015)
    assert interval([0.1, 0.2, 0.3, 0.4, 0.5])[0] == 0.0  # widened to contain 0
    # (n + 1)-corrected ranks: with 9 residuals the 95 % rank is beyond the sample -> the maximum
    assert interval(np.arange(1, 10) / 10 - 0.5)[1] == pytest.approx(0.4)


def test_out_of_sample_coverage_is_near_nominal():
    rng = np.random.default_rng(1)
    held = []
    for d in range(40):
        p = _points({f"d{d}": 0.6}, n=5, seed=d)
        held += [HeldOut(x, float(rng.normal(0, 0.1)), "lodo", "family") for x in p]
    cov = coverage(held, {"lodo": held}, FOLDS["lodo"])
    assert 0.85 <= cov.groups <= 0.95 and 0.85 <= cov.points <= 0.95
    assert cov.n_groups == 40 and cov.n_points == 200
    assert coverage([], {}, FOLDS["lodo"]) is None


def test_group_weighted_interval_gives_every_group_one_vote():
    """One device with 100 residuals near 0 and 20 devices with one residual each spread wide: per point
    the interval would be narrow, per group it spans the single-point devices."""
    r = [0.0] * 100 + list(np.linspace(-1.0, 1.0, 20))
    groups = ["big"] * 100 + [f"d{i}" for i in range(20)]
    narrow = interval(r)
    wide = interval(r, groups=groups)
    assert narrow[1] < 0.5 and wide[0] <= -0.85 and wide[1] >= 0.85


def test_ape_stats():
    assert ape_stats([]) == (None, None)
    med, p90 = ape_stats([0.0, 0.1, 0.2, 0.3, 1.0])
    assert med == pytest.approx(0.2) and p90 == pytest.approx(0.72)
