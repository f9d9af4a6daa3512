"""Calibration fit: the vectorised evaluation is the estimator's formula; the one model across devices
recovers KNOWN parameters (generated through the estimator's physics, plus noise), shrinks sparse devices
toward similar ones, and transfers through covariates."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import features as feat  # noqa: E402
from calibration import fit as F  # noqa: E402
from calibration import hierarchy as H  # noqa: E402
from calibration import pipeline  # noqa: E402
from calibration.dataset import load_dataset  # noqa: E402
from calibration.fit import EFF, TIME, SpeedPoint  # noqa: E402
from estimator.catalog.resolve import resolve_hardware, resolve_model  # noqa: E402
from estimator.physics import speed  # noqa: E402
from estimator.physics.coefficients import PARAMS, from_eta, param, to_eta  # noqa: E402
from estimator.physics.quant import get_quant  # noqa: E402
from estimator.specs import Workload  # noqa: E402
from tests.calibration_gen import QUANTS, generate, write_records  # noqa: E402

AMPERE = {"rtx-3090": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere", "rtx-a6000": "nvidia-ampere"}
TRUE_DEC = {"nvidia-ampere": {"bw_eff": 0.62, "t_layer_s": 2.0e-5, "t_fixed_s": 4.0e-4}}
TRUE_PRE = {"nvidia-ampere": {"flops_eff": 0.45, "attn_eff": 0.3, "t_layer_s": 6.0e-5}}


def _theta(state, device: str, key: str) -> float:
    u = next(i for i, un in enumerate(state.design.units) if un[0] == device)
    j = [p.key for p in state.design.params].index(key)
    return float(state.theta[u, j])


@pytest.fixture(scope="module")
def ampere_cal(tmp_path_factory):
    root = tmp_path_factory.mktemp("res")
    write_records(root / "runs" / "gen.jsonl", generate(AMPERE, TRUE_DEC, TRUE_PRE, noise=0.03, seed=1))
    return pipeline.calibrate(load_dataset(root), cv=False, memory=False, e2e=False)


def test_vectorised_times_are_the_estimator_functions(ampere_cal):
    """phase_seconds on stacked arrays equals decode_step_s / prefill_s point for point, with the unit's
    ``build_scale`` (1 for a current build, up to the intercept's round-off) on the decode step and on the
    bandwidth prefill borrows, which the estimator never applies."""
    pts = ampere_cal.points
    st = ampere_cal.speed.state
    prob = F.Problem(pts, st.design)
    lt = prob.log_times(st.design.eta(st.z))
    keys = [p.key for p in st.design.params]
    order = np.concatenate([a.index for a in prob.arrays])
    units = {u: i for i, u in enumerate(st.design.units)}
    for k, i in enumerate(order):
        p = pts[i]
        th = st.theta[units[H.unit_key(p)]]
        par = {n: float(th[keys.index(key)]) for n, key in feat.phase_inputs(p.phase, keys).items()}
        build = par.pop("build_scale")
        assert build == pytest.approx(1.0, abs=1e-4)  # no build=2024 record here
        if p.phase == "prefill":
            par["bw_eff"] /= build
        t = (speed.decode_step_s if p.phase == "decode" else speed.prefill_s)(p.features, p.hardware, par)
        t *= build if p.phase == "decode" else 1.0
        assert math.log(t) == pytest.approx(lt[k], abs=1e-9)


def test_decode_and_prefill_params_recovered(ampere_cal):
    st = ampere_cal.speed.state
    assert st.n_points == {"decode": 45, "prefill": 45}
    for dev in AMPERE:
        assert _theta(st, dev, "decode.bw_eff") == pytest.approx(0.62, rel=0.06)
        assert _theta(st, dev, "prefill.flops_eff") == pytest.approx(0.45, rel=0.1)
    # 3 % noise: the noise scale is estimated near it
    assert 0.01 <= st.scales.sigma["decode"] <= 0.05


def test_transforms_round_trip_and_respect_bounds():
    for p in PARAMS:
        if not p.fit:
            continue
        for v in (p.default, min(p.upper, 1.0) * 0.5, 1e-3, 1.5 * p.lower):
            if p.lower < v < (0.98 * p.upper if p.upper <= 1 else p.upper) and v >= 1e-6:
                assert from_eta(p, to_eta(p, v)) == pytest.approx(v, rel=1e-6), (p.key, v)
        assert p.lower <= from_eta(p, 50.0) <= p.upper and p.lower <= from_eta(p, -50.0) <= p.upper
    bw = param("decode", "bw_eff")
    assert from_eta(bw, 30.0) == pytest.approx(1.0)  # an efficiency saturates at 1


def _toy(device: str, family: str, bw_eff: float, n: int, rng, memory_type: str = "GDDR6", vendor="NVIDIA"):
    """Decode points of a made-up GPU (1000 GB/s) at a known efficiency."""
    from estimator.specs import HardwareSpec

    hw = HardwareSpec(
        id=device, name=device, vendor=vendor, family=family, kind="gpu", memory_bytes=None,
        bandwidth_gbs=1000.0, bf16_tflops=100.0, memory_type=memory_type, year=2022,
    )  # fmt: skip
    out = []
    for i in range(n):
        f = speed.DecodeFeatures(
            weight_bytes=1e9 * (1 + i % 7), kv_bytes=0.0, host_bytes=0.0, expert_union_bytes=0.0,
            flops_per_token=0.0, batch=1, n_layers=16 + 8 * (i % 5), n_moe_layers=0, hidden_size=4096,
            n_devices=1, split="tp", fp8=False, engine="llama.cpp",
        )  # fmt: skip
        t = 3e-4 + 1e-5 * f.n_layers + f.bytes_per_token / (1e12 * bw_eff)
        t_meas = t * math.exp(rng.normal(0, 0.02))
        out.append(SpeedPoint([f], hw, t_meas, "decode", family, "llama.cpp", "CUDA", device, f"m{i % 7}",
                              vendor=vendor, kind="gpu"))  # fmt: skip
    return out


def test_efficiency_bounded_by_one():
    rng = np.random.default_rng(3)
    st = F.fit_model(_toy("d", "f", 1.3, 30, rng))  # data that imply more than the datasheet bandwidth
    assert 0 < _theta(st, "d", "decode.bw_eff") <= 1.0
    assert _theta(st, "d", "decode.t_layer_s") >= 0 and _theta(st, "d", "decode.t_fixed_s") >= 0


def test_sparse_device_shrinks_toward_its_family():
    """A device with 2 points sits between its own data and its family's well-measured devices."""
    rng = np.random.default_rng(5)
    rich = [p for k in range(3) for p in _toy(f"d{k}", "fam", 0.55 + 0.02 * k, 30, rng)]
    sparse = _toy("s", "fam", 0.9, 2, rng)
    st = F.fit_model(rich + sparse)
    alone = F.fit_model(sparse)
    fam = np.mean([_theta(st, f"d{k}", "decode.bw_eff") for k in range(3)])
    s = _theta(st, "s", "decode.bw_eff")
    assert fam < s < _theta(alone, "s", "decode.bw_eff") + 0.02


def test_unseen_device_inherits_from_similar_devices_through_covariates():
    """Two memory technologies with different efficiencies over several families: a held-out device of a new
    family is predicted near the devices with its memory technology, not near the overall mean."""
    rng = np.random.default_rng(11)
    pts = []
    for k in range(4):
        pts += _toy(f"g{k}", f"fg{k}", 0.8, 12, rng, "GDDR6")
        pts += _toy(f"h{k}", f"fh{k}", 0.4, 12, rng, "HBM2e")
    new = _toy("hnew", "fnew", 0.4, 6, rng, "HBM2e")
    design = H.build_design(pts + new)
    st = F.fit_model(pts, design)
    r = F.predict_log_ratio(st, new)
    assert np.median(np.abs(r)) < 0.15  # without the memory covariate the mean (~0.6) would miss by ~30 %
    assert _theta(st, "hnew", "decode.bw_eff") == pytest.approx(0.4, rel=0.2)


def test_param_defs_have_physical_bounds():
    for d in H.fitted_params():
        if d.kind == EFF:
            assert 0 < d.lower and d.upper == 1.0
        if d.kind == TIME:
            assert d.lower == 0.0
        # a record-level factor (the build era's, a non-default setting's) has no device or family of its own
        assert d.covariates and (d.effects or set(d.covariates) <= {"build", "settings"}), d.key


def test_batched_decode_borrows_the_prefill_compute_roof():
    """Batched decode reads flops_eff / flops_abs_tflops from the prefill parameters (as merged_params does),
    the prefill memory term the decode bw_eff."""
    keys = [p.key for p in H.fitted_params()]
    dec = feat.phase_inputs("decode", keys)
    pre = feat.phase_inputs("prefill", keys)
    assert dec["flops_eff"] == "prefill.flops_eff" and dec["flops_abs_tflops"] == "prefill.flops_abs_tflops"
    assert dec["t_layer_s"] == "decode.t_layer_s" and pre["t_layer_s"] == "prefill.t_layer_s"
    assert pre["bw_eff"] == "decode.bw_eff" and "attn_eff" not in dec
    # an older build's prefill streams at bw_eff / build_scale; the estimator (current builds) borrows bw_eff
    assert pre["build_scale"] == dec["build_scale"] == "decode.build_scale"
    assert "build_scale" not in speed.BORROW_FROM_DECODE


def test_batched_cpu_decode_uses_the_fitted_absolute_rate(tmp_path):
    """A CPU has no datasheet TFLOPS: a batched decode point's compute roof is the fitted flops_abs_tflops,
    with flops_eff 1."""
    from tests.calibration_gen import base_record

    cpu = {"ryzen-9-7950x": "cpu-x86-avx512", "core-i7-1165g7-cpu": "cpu-x86-avx512"}
    dec = {"cpu-x86-avx512": {"bw_eff": 0.5, "t_layer_s": 2e-5, "t_fixed_s": 4e-4}}
    recs = generate(cpu, dec, noise=0.02, models=("llama-2-7b", "qwen2.5-7b"), quants=("Q4_0",))
    recs = [replace(r, backend="CPU") for r in recs]
    pre = [
        base_record(record_id=f"pp{i}", hardware_id=h, hardware_family="cpu-x86-avx512", backend="CPU",
                    n_prompt=512, n_gen=0, decode_tok_s=None, prefill_tok_s=tok_s)
        for i, (h, tok_s) in enumerate((("ryzen-9-7950x", 150.0), ("core-i7-1165g7-cpu", 40.0)))
    ]  # fmt: skip
    batched = [replace(recs[0], record_id="b4", batch=4, decode_tok_s=4 * recs[0].decode_tok_s * 0.9)]
    write_records(tmp_path / "runs" / "cpu.jsonl", recs + pre + batched)
    cal = pipeline.calibrate(load_dataset(tmp_path), cv=False, memory=False, e2e=False)
    st = cal.speed.state
    (b,) = [p for p in cal.points if p.record_id == "b4"]
    keys = [p.key for p in st.design.params]
    th = st.theta[st.design.units.index(H.unit_key(b))]
    par = {n: float(th[keys.index(k)]) for n, k in feat.phase_inputs("decode", keys).items()}
    par["flops_eff"] = 1.0
    t = speed.decode_step_s(b.features, b.hardware, par) * par.pop("build_scale")  # ~1: a current build
    (lr,) = F.predict_log_ratio(st, [b])
    assert math.log(t / b.measured_s) == pytest.approx(lr, abs=1e-9)


def test_gemm_k_half_recovered_from_generated_prefill():
    """The GEMM width term (eff x K / (K + k_half)) is recovered from prefill times generated through the
    estimator's physics for models of different widths (hidden 896 .. 4096), with 2 % noise."""
    true = {"flops_eff": 0.4, "attn_eff": 0.3, "t_layer_s": 5e-5, "gemm_k_half": 3000.0}
    hw = resolve_hardware("rtx-3090")
    rng = np.random.default_rng(7)
    pts = []
    for mid in ("qwen2.5-0.5b", "llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b"):
        m = resolve_model(mid)
        for n in (64, 256, 512, 2048):
            wl = Workload(n_prompt=n, n_gen=0, n_ubatch=512, n_batch=2048, engine="llama.cpp")
            f = speed.prefill_features(m, get_quant("Q4_K_M"), wl)
            t = speed.prefill_s(f, hw, {**true, "bw_eff": 0.7}) * math.exp(rng.normal(0, 0.02))
            pts.append(SpeedPoint(f, hw, t, "prefill", "f", "llama.cpp", "CUDA", "d", mid, vendor="NVIDIA",
                                  kind="gpu"))  # fmt: skip
    st = F.fit_model(pts)
    assert _theta(st, "d", "prefill.gemm_k_half") > 1000  # separated from the efficiency, not left near 0
    assert _theta(st, "d", "prefill.flops_eff") == pytest.approx(0.4, rel=0.25)


def _robust_objective(prob, scales, z):
    """The objective solve() minimises, written from scipy's own loss functions: sum of c^2 rho((r_i / c)^2)
    / 2
    over the data rows (r in noise units, c = F_SCALE, rho of F.LOSS) plus half the squared prior rows."""
    from scipy.optimize._lsq.least_squares import IMPLEMENTED_LOSSES

    d = prob.design
    sig = np.array([scales.sigma[ph] for ph in prob.phase_of])
    r = (prob.log_times(d.eta(z)) - prob.y) / sig
    c = F.F_SCALE
    zz = (r / c) ** 2
    rho = np.empty((3, zz.size))
    if F.LOSS == "linear":
        rho[0] = zz
    else:
        IMPLEMENTED_LOSSES[F.LOSS](zz, rho, cost_only=True)
    prior = (z - d.prior_mean) / H.prior_scale(d, scales)
    return float(0.5 * c**2 * rho[0].sum() + 0.5 * np.sum(prior**2))


@pytest.mark.parametrize("loss", ["huber", "soft_l1", "cauchy"])
def test_robust_solve_reaches_the_robust_optimum_with_outliers(ampere_cal, loss, monkeypatch):
    """With a tenth of the points made 3x slower (outliers), solve() ends at the optimum of its robust loss: a
    direct
    quasi-Newton minimisation of the same objective from there finds nothing lower, and the outliers barely
    move the fit (plain least squares moves it more)."""
    from scipy.optimize import minimize

    monkeypatch.setattr(F, "LOSS", loss)
    st = ampere_cal.speed.state
    rng = np.random.default_rng(3)
    pts = [
        replace(p, measured_s=p.measured_s * (3.0 if rng.random() < 0.1 else 1.0)) for p in ampere_cal.points
    ]
    prob = F.Problem(pts, st.design)
    z, _, ok, msg = F.solve(prob, st.scales)
    assert ok, msg
    best = _robust_objective(prob, st.scales, z)
    res = minimize(
        lambda v: _robust_objective(prob, st.scales, v), z, method="L-BFGS-B", options={"maxiter": 200}
    )
    assert res.fun >= best - 1e-3 * abs(best)
    clean = F.solve(F.Problem(ampere_cal.points, st.design), st.scales)[0]
    monkeypatch.setattr(F, "LOSS", "linear")
    z_ls = F.solve(prob, st.scales)[0]
    assert np.linalg.norm(z - clean) < np.linalg.norm(z_ls - clean)


@pytest.mark.parametrize("loss", ["huber", "soft_l1", "cauchy", "linear"])
def test_robust_rows_are_the_losses_scipy_defines(loss):
    """Half the square of each row is scipy's robust loss c^2 rho((r/c)^2) / 2, and dF/dr its derivative."""
    from scipy.optimize._lsq.least_squares import IMPLEMENTED_LOSSES

    r = np.linspace(-6.0, 6.0, 2401)
    c = 1.5
    f, df = F.robust_rows(r, loss, c)
    z = (r / c) ** 2
    if loss == "linear":
        rho = z
    else:
        out = np.empty((3, r.size))
        IMPLEMENTED_LOSSES[loss](z, out, cost_only=False)
        rho = out[0]
    assert np.allclose(0.5 * f**2, 0.5 * c**2 * rho, atol=1e-12)
    assert np.allclose(df[1:-1], np.gradient(f, r)[1:-1], atol=2e-3)


def test_one_backends_i_quant_rows_stay_in_that_backends_term():
    """The i-quant ratios' own priors (Param.intercept_sd / covariate_sd): i-quant rows of one ROCm device,
    read at half the k-quant efficiency, set the ROCm term; the CUDA devices (the reference backend, no
    i-quant rows) keep ratio ~1.  Before, one such row moved the shared intercept and halved every backend."""
    from estimator.specs import HardwareSpec

    rng = np.random.default_rng(5)
    pts = [p for k in range(3) for p in _toy(f"c{k}", f"fc{k}", 0.7, 12, rng)]
    hw = HardwareSpec(
        id="r", name="r", vendor="AMD", family="fr", kind="gpu", memory_bytes=None, bandwidth_gbs=1000.0,
        bf16_tflops=100.0, memory_type="GDDR6", year=2022,
    )  # fmt: skip
    for i in range(8):
        cls = "iquant" if i % 2 else "kquant"
        f = speed.DecodeFeatures(
            weight_bytes=1e9 * (1 + i % 4), kv_bytes=0.0, host_bytes=0.0, expert_union_bytes=0.0,
            flops_per_token=0.0, batch=1, n_layers=24, n_moe_layers=0, hidden_size=4096, n_devices=1,
            split="tp", fp8=False, engine="llama.cpp", kernel_class=cls,
        )  # fmt: skip
        rel = 0.5 if cls == "iquant" else 1.0
        t = 3e-4 + 1e-5 * f.n_layers + f.bytes_per_token / (1e12 * 0.7 * rel)
        pts.append(SpeedPoint([f], hw, t * math.exp(rng.normal(0, 0.02)), "decode", "fr", "llama.cpp", "ROCm",
                              "r", f"m{i}", vendor="AMD", kind="gpu"))  # fmt: skip
    st = F.fit_model(pts)
    assert _theta(st, "r", "decode.bw_rel_iquant") == pytest.approx(0.5, rel=0.25)
    assert _theta(st, "c0", "decode.bw_rel_iquant") == pytest.approx(1.0, rel=0.1)
    # codebook-grid rows say nothing of the table-lookup i-quants (iq4_nl / iq4_xs): their ratio stays ~1
    assert _theta(st, "r", "decode.bw_rel_iq4") == pytest.approx(1.0, rel=0.1)
    j = [p.key for p in st.design.params].index("decode.bw_rel_iquant")
    scale = H.prior_scale(st.design, H.default_scales(st.design))
    cols = [i for i, (kind, jj) in enumerate(zip(st.design.col_kind, st.design.col_param, strict=True))
            if kind == "cov" and jj == j]  # fmt: skip
    by_group = {st.design.col_group[i]: scale[i] for i in cols}
    assert by_group["1"] == pytest.approx(0.1) and by_group["backend=ROCm"] == pytest.approx(1.0)


def test_a_2024_build_s_slower_prompts_stay_in_the_build_term(tmp_path):
    """Rows of a source that dates its llama.cpp build to 2024 (``record_era``) run their prompt GEMMs 25 %
    slower than the same devices' current rows (a known ln ratio of -0.22 of flops_eff on three Ampere cards,
    generated through the estimator's physics as that build ran them): the fit puts that in the record-level
    covariate ``build=2024`` of prefill flops_eff, not in the devices' effects, so the devices' current rate
    stays what their current rows say, which the estimator predicts (it never sets ``build``).  Their decode
    rows are as fast as the current ones: decode bw_eff carries no build term, and the decode step factor
    ``build_scale`` stays ~1."""
    from calibration.dataset import LEGACY_ERA, record_era
    from calibration.hierarchy import build_covariates
    from estimator.physics import covariates as cov

    slow = math.log(1.25)
    # F16 rows too: a 2024 build ran its quantized prompts on cuBLAS like F16 weights
    # (tests/test_build_eras.py), so the current F16 rows tell the F16 kernel class from the build term
    quants = (*QUANTS, "F16")
    recs = generate(AMPERE, TRUE_DEC, TRUE_PRE, noise=0.02, seed=3, quants=quants)
    slow_pre = {f: {**p, "flops_eff": p["flops_eff"] / math.exp(slow)} for f, p in TRUE_PRE.items()}
    as_built = generate(AMPERE, TRUE_DEC, slow_pre, noise=0.02, seed=3, quants=quants, era=LEGACY_ERA)
    old = [replace(r, record_id=f"old-{r.record_id}", extra={"source_group": "xiongjiedai"})
           for r in as_built]  # fmt: skip
    assert {record_era(r) for r in old} == {LEGACY_ERA} and {record_era(r) for r in recs} == {""}
    assert record_era(replace(old[0], engine="vllm")) == ""
    write_records(tmp_path / "runs" / "gen.jsonl", recs + old)
    cal = pipeline.calibrate(load_dataset(tmp_path), cv=False, memory=False, e2e=False)
    st = cal.speed.state
    d = st.design
    assert {u[3] for u in d.units} == {"", LEGACY_ERA}
    j = [p.key for p in d.params].index("prefill.flops_eff")
    beta = dict(zip(d.names[j], st.z[d.block[j]], strict=True))
    # eta of an efficiency far below its cap is ~ln(value): the term is the ln ratio of the rates
    assert beta["cov:build=2024"] == pytest.approx(-slow, abs=0.08)
    jd = [p.key for p in d.params].index("decode.bw_eff")
    assert not any(n.startswith("cov:build") for n in d.names[jd])
    js = [p.key for p in d.params].index("decode.build_scale")
    step = dict(zip(d.names[js], st.z[d.block[js]], strict=True))
    assert step["cov:build=2024"] == pytest.approx(0, abs=0.05)
    for dev in AMPERE:  # the current rate, within the noise
        assert _theta(st, dev, "prefill.flops_eff") == pytest.approx(TRUE_PRE["nvidia-ampere"]["flops_eff"],
                                                                     rel=0.08)  # fmt: skip
    assert build_covariates("", ("build",)) == {} and build_covariates(LEGACY_ERA, ("year",)) == {}
    hw = resolve_hardware("rtx-3090")
    assert cov.covariates(hw, "llama.cpp", "CUDA", cov.GROUPS).keys().isdisjoint({"build=2024"})


def _fit_step_factor(tmp_path, records) -> tuple[pipeline.Calibration, dict[str, float]]:
    """Fit ``records`` (AMPERE's devices, some of them with slower decode steps that a record covariate
    should carry); returns the calibration and the decode step factor's coefficients, having checked what
    every such case shares: the factor's intercept stays 1 (the default run the estimator predicts) and the
    devices' bw_eff stay what their default runs say."""
    write_records(tmp_path / "runs" / "gen.jsonl", records)
    cal = pipeline.calibrate(load_dataset(tmp_path), cv=False, memory=False, e2e=False)
    st = cal.speed.state
    d = st.design
    j = [p.key for p in d.params].index("decode.build_scale")
    beta = dict(zip(d.names[j], st.z[d.block[j]], strict=True))
    assert beta["cov:1"] == pytest.approx(0, abs=0.01)
    for dev in AMPERE:
        assert _theta(st, dev, "decode.bw_eff") == pytest.approx(TRUE_DEC["nvidia-ampere"]["bw_eff"], rel=0.1)
    return cal, beta


def test_a_2024_build_s_slower_steps_stay_in_the_step_factor(tmp_path):
    """Decode rows of a source that dates its llama.cpp build to 2024 take 12 % longer per step than the same
    devices' current rows: the fit puts the ln ratio in ``build_scale``'s covariate ``build=2024`` (a factor
    on the whole step: bandwidth and overheads alike), its intercept stays 1 (the current build, which the
    estimator predicts without the parameter), and the devices' decode terms stay what their current rows
    say."""
    from calibration.dataset import LEGACY_ERA, record_era

    slow = math.log(1.12)
    recs = generate(AMPERE, TRUE_DEC, TRUE_PRE, noise=0.02, seed=5)
    old = [replace(r, record_id=f"old-{r.record_id}", extra={"source_group": "xiongjiedai"},
                   decode_tok_s=r.decode_tok_s / math.exp(slow) if r.decode_tok_s else None)
           for r in recs]  # fmt: skip
    assert {record_era(r) for r in old} == {LEGACY_ERA}
    cal, beta = _fit_step_factor(tmp_path, recs + old)
    st, d = cal.speed.state, cal.speed.state.design
    assert beta["cov:build=2024"] == pytest.approx(slow, abs=0.04)  # RATE eta = ln(factor)
    # the estimator's decode rates never read the factor: a current build's step
    assert "build_scale" not in speed.DecodeRates.__dataclass_fields__
    # a 2024 record's prefill reads the weights at bw_eff / build_scale: the fit's prefill time of such a
    # point is the estimator's prefill_s with that bandwidth, not with the current build's
    prob = F.Problem(cal.points, d)
    lt = prob.log_times(d.eta(st.z))
    order = list(np.concatenate([a.index for a in prob.arrays]))
    keys = [p.key for p in d.params]
    units = {u: i for i, u in enumerate(d.units)}
    checked = 0
    for i, p in enumerate(cal.points):
        if p.phase != "prefill" or p.era != LEGACY_ERA:
            continue
        th = st.theta[units[H.unit_key(p)]]
        par = {n: float(th[keys.index(key)]) for n, key in feat.phase_inputs("prefill", keys).items()}
        build = par.pop("build_scale")
        assert build == pytest.approx(1.12, rel=0.05)
        current = math.log(speed.prefill_s(p.features, p.hardware, par))
        par["bw_eff"] /= build
        older = math.log(speed.prefill_s(p.features, p.hardware, par))
        assert older == pytest.approx(lt[order.index(i)], abs=1e-9)
        assert older > current + 1e-6  # the borrowed bandwidth matters to this point's time
        checked += 1
    assert checked


def test_a_no_repack_run_s_slower_steps_stay_in_the_setting_term(tmp_path):
    """Records a runner measured with llama.cpp's ``--no-repack`` (``extra.repack`` False: the generic
    quantized dot products, not the repacked kernels) take twice as long per decode step as the same devices'
    default runs: the fit puts ln 2 in ``build_scale``'s record covariate ``setting=no_repack`` (the engine
    profile's ``speed_settings``, calibration.dataset.record_settings), not in the devices' effects, so their
    decode terms stay what the default runs say, which the estimator predicts (it never sets ``settings``)."""
    from calibration.dataset import record_settings
    from calibration.hierarchy import settings_covariates
    from estimator.engines import get_engine
    from estimator.physics import covariates as cov

    slow = math.log(2.0)
    recs = generate(AMPERE, TRUE_DEC, TRUE_PRE, noise=0.02, seed=7)
    plain = [replace(r, record_id=f"plain-{r.record_id}", extra={"repack": False},
                     decode_tok_s=r.decode_tok_s / math.exp(slow) if r.decode_tok_s else None)
             for r in recs]  # fmt: skip
    assert {record_settings(r) for r in plain} == {"no_repack"} and {record_settings(r) for r in recs} == {""}
    assert record_settings(replace(plain[0], extra={"repack": True})) == ""
    assert record_settings(replace(plain[0], engine="vllm")) == ""  # vLLM's profile lists no such setting
    assert get_engine("llama.cpp").record_settings({"repack": False}) == ("no_repack",)
    cal, beta = _fit_step_factor(tmp_path, recs + plain)
    d = cal.speed.state.design
    assert {u[4] for u in d.units} == {"", "no_repack"}
    assert beta["cov:setting=no_repack"] == pytest.approx(slow, abs=0.06)  # RATE eta = ln(factor)
    jd = [p.key for p in d.params].index("decode.bw_eff")
    assert not any(n.startswith("cov:setting") for n in d.names[jd])
    assert settings_covariates("", ("settings",)) == {} and settings_covariates("no_repack", ("year",)) == {}
    assert settings_covariates("a+b", ("settings",)) == {"setting=a": 1.0, "setting=b": 1.0}
    hw = resolve_hardware("rtx-3090")
    assert not any(k.startswith("setting=") for k in cov.covariates(hw, "llama.cpp", "CPU", cov.GROUPS))


def test_own_runs_have_their_own_noise_scale(ampere_cal):
    """fitbench's own runs are a noise group of their own (SpeedPoint.noise_group): where they scatter 5x
    more than the published rows, their misfit sets their own scale, not the published rows' one."""
    rng = np.random.default_rng(7)
    pts = ampere_cal.points
    st = ampere_cal.speed.state
    own = "rtx-a6000"  # one device of the fixture plays fitbench's own runs
    noisy = [
        replace(p, origin="measured", measured_s=p.measured_s * math.exp(rng.normal(0.0, 0.15)))
        if p.device == own else replace(p, origin="imported")
        for p in pts
    ]  # fmt: skip
    assert {p.noise_group for p in noisy} == {"decode", "prefill", "decode:own", "prefill:own"}
    fitted = F.fit_model(noisy)
    sig = fitted.scales.sigma
    assert sig["decode:own"] > 2.5 * sig["decode"] and sig["prefill:own"] > 2.5 * sig["prefill"]
    assert sig["decode"] <= 0.05  # the published rows keep their 3 % noise
    assert F.noise_scale(sig, "serving.ttft:own") == F.noise_scale(sig, "serving.ttft") == H.SIGMA_START
    assert st.scales.sigma.keys() == {"decode", "prefill"}  # no own runs: one scale per stratum, as before
    assert all(type(k) is str for k in sig)
