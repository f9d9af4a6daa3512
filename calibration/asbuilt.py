"""As-built terms of end-to-end runs: what an engine build older than the one its profile describes cost
beyond the speed model, fitted on that build's end-to-end latency records (calibration.latency).

The speed model and its coefficients describe current builds (the estimator predicts those).  The published
end-to-end runs (arXiv 2411.00136: llama.cpp of mid-2024, vLLM 0.5.2 / 0.6.1 with its V0 engine) measure
older programs whose costs the speed points do not show: on the MI300X vLLM 0.6.1 batches run at a fraction
of the GEMM rate that current builds reach (time grows with B from B = 32 on), llama.cpp's ROCm build of
2024 spends ~0.1 us per layer and cached token on a model with grouped KV heads (Llama-2-7B, with as many KV
heads as query heads, does not), and llama.cpp's SYCL layer split of 2024 ran 5-7x slower on 2-4 devices
than on one.  One stratum per (engine, backend, build) of an older build; within it, five terms::

    t = max(e^a x t_model + g x L_gqa + s x L_multi,  F / (R x e^-c)) x e^(m x [devices > 1])

    t_model  seconds the speed model gives the run as built (calibration.latency.predict_s)
    L_gqa    sum over the decode steps (and one-token prompt passes) of layers x cached tokens x sequences,
             divided by the tensor-parallel degree, for a model with fewer KV heads than query heads (else 0)
    L_multi  layers x forward passes (decode steps + prompt passes) of a run on more than one device
    F        the run's FLOPs (prompt GEMMs and attention + its decode steps)
    R        the GEMM rate of the speed model: datasheet peak x flops_eff x tensor-parallel devices

    a  time_scale_ln          ln of the factor on every modelled second
    g  gqa_attention_us       us per (layer x cached token x sequence) of grouped-KV attention
    c  compute_deficit_ln     >= 0: the run computes at e^-c of the current rate (a floor on its time)
    m  multi_device_ln        ln of the factor on a run over more than one device
    s  multi_device_layer_ms  ms per layer and pass on more than one device (synchronisation)

fitted by scipy.optimize.least_squares on ln(t / measured) with a soft-L1 loss (the source keeps duplicated
configurations whose values differ up to 10x) and a ridge prior on each term (``PRIOR_SD``); a term stays at
0 unless the stratum's runs ask for it.  Runs of a build the profile describes get no terms: their error is
the speed model's.  The estimator never applies these terms (it predicts current builds); they make the
end-to-end check compare like with like, and the calibration report lists them per stratum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TERMS = (
    "time_scale_ln", "gqa_attention_us", "compute_deficit_ln", "multi_device_ln", "multi_device_layer_ms"
)
# ridge prior (standard deviation, in the term's unit) and bounds of each term
PRIOR_SD = {"time_scale_ln": 1.0, "gqa_attention_us": 1.0, "compute_deficit_ln": 2.0, "multi_device_ln": 1.0,
            "multi_device_layer_ms": 1.0}  # fmt: skip
BOUNDS = {"time_scale_ln": (-5.0, 5.0), "gqa_attention_us": (0.0, 100.0), "compute_deficit_ln": (0.0, 10.0),
          "multi_device_ln": (-5.0, 5.0), "multi_device_layer_ms": (0.0, 100.0)}  # fmt: skip
MIN_RUNS = 10  # fewer runs in a stratum: no terms
SOFT_L1_SCALE = 0.2  # ln units: residuals beyond ~20 % count linearly, not squared
# starts of the compute deficit (the floor is flat at 0 where it does not bind: one start would stay there)
_DEFICIT_STARTS = (0.0, 1.0, 2.0, 3.0, 4.0)


@dataclass(frozen=True)
class RunComponents:
    """What the as-built terms act on, for one end-to-end run under one coefficient table (module doc)."""

    t_model_s: float
    flops: float
    gemm_flops_s: float  # R; NaN when the device has no datasheet peak (no floor)
    gqa_layer_tokens: float  # L_gqa
    multi_layer_passes: float  # L_multi
    multi: bool


def stratum(engine: str, backend: str, build: str, era: str) -> str:
    """The stratum of a run of an older build ("engine/backend/build"), "" for a build its engine profile
    describes (no terms).  ``build``: the version a record states; ``era``: calibration.dataset.record_era."""
    from estimator.engines import ENGINES, get_engine

    if era:
        return f"{engine}/{backend or '-'}/{era}"
    if build and engine in ENGINES and not get_engine(engine).describes_build(build):
        return f"{engine}/{backend or '-'}/{build}"
    return ""


def _columns(comps: list[RunComponents]) -> dict[str, np.ndarray]:
    return {
        "t": np.array([c.t_model_s for c in comps]),
        # no datasheet peak (NaN rate): no floor
        "floor": np.array([c.flops / c.gemm_flops_s if c.gemm_flops_s > 0 else 0.0 for c in comps]),
        "gqa": np.array([c.gqa_layer_tokens for c in comps]),
        "multi_lp": np.array([c.multi_layer_passes for c in comps]),
        "multi": np.array([float(c.multi) for c in comps]),
    }


def _seconds(theta: np.ndarray, col: dict[str, np.ndarray]) -> np.ndarray:
    a, g, c, m, s = theta
    t = np.exp(a) * col["t"] + g * 1e-6 * col["gqa"] + s * 1e-3 * col["multi_lp"]
    t = np.maximum(t, col["floor"] * math.exp(c))
    return t * np.exp(m * col["multi"])


def fit_terms(comps: list[RunComponents], measured_s: list[float]) -> dict[str, float]:
    """The terms of one stratum from its runs (module doc); all 0 with fewer than ``MIN_RUNS`` runs."""
    from scipy.optimize import least_squares

    if len(comps) < MIN_RUNS:
        return dict.fromkeys(TERMS, 0.0)
    col = _columns(comps)
    y = np.log(np.asarray(measured_s, dtype=float))
    sd = np.array([PRIOR_SD[k] for k in TERMS])
    lo, hi = np.array([BOUNDS[k][0] for k in TERMS]), np.array([BOUNDS[k][1] for k in TERMS])

    def residuals(theta):
        return np.concatenate([np.log(_seconds(theta, col)) - y, theta / sd])

    best = None
    for c0 in _DEFICIT_STARTS:
        start = np.array([0.0, 0.01, c0, 0.0, 0.01])
        r = least_squares(residuals, start, bounds=(lo, hi), loss="soft_l1", f_scale=SOFT_L1_SCALE)
        if best is None or r.cost < best.cost:
            best = r
    # a term the bounds hold at 0 comes back as ~1e-12: say 0
    return {k: float(v) if abs(v) > 1e-9 else 0.0 for k, v in zip(TERMS, best.x, strict=True)}


def apply_terms(terms: dict[str, float] | None, comp: RunComponents) -> float:
    """Seconds of a run with a stratum's terms (``comp.t_model_s`` when there are none)."""
    if not terms:
        return comp.t_model_s
    theta = np.array([terms.get(k, 0.0) for k in TERMS])
    return float(_seconds(theta, _columns([comp]))[0])


def describe(terms: dict[str, float]) -> str:
    """One line of what a stratum's terms say, in words (calibration report)."""
    parts = [f"time x{math.exp(terms['time_scale_ln']):.2f}"]
    if terms["gqa_attention_us"] > 1e-3:
        parts.append(f"grouped-KV attention {terms['gqa_attention_us']:.3f} us per layer x cached token")
    if terms["compute_deficit_ln"] > 0.05:
        parts.append(f"GEMMs at {100 * math.exp(-terms['compute_deficit_ln']):.0f} % of the current rate")
    if abs(terms["multi_device_ln"]) > 0.05 or terms["multi_device_layer_ms"] > 1e-3:
        parts.append(f"over > 1 device x{math.exp(terms['multi_device_ln']):.2f} + "
                     f"{terms['multi_device_layer_ms']:.3f} ms per layer and pass")  # fmt: skip
    return "; ".join(parts)
