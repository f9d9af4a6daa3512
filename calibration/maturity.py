"""Backend maturity in calibration: how a backend nobody measured is predicted, and how far below the pooled
interval its speed can fall.

A backend's maturity comes from the support table's ``backend`` rows (estimator/data/support.csv: mature |
developing | experimental).  It enters the fit as a covariate of the level parameters (``maturity=<m>`` on
``bw_eff``, ``flops_eff``, ``attn_eff``: estimator.physics.covariates), so a llama.cpp backend without a
point of its own (CANN on the 910B, MUSA) inherits what the measured backends of its maturity share (Vulkan
and SYCL: less of the roofline than CUDA / ROCm / Metal), not the mature backends' level.

This module measures that transfer and the interval it needs:

* ``new_backend_targets(points)``: the indices of the llama.cpp points on a less mature backend, the targets
  of leave-one-backend-out (``lobo``, calibration.validate.FOLDS): each such backend's points are predicted
  by a fit without any point of that backend, its own ``backend=<b>`` covariate at the prior, so a held-out
  prediction is what the estimator says of a new backend of that maturity (its maturity term learnt from
  the other backends).
* ``widening(held, intervals)``: per maturity, how far below the pooled interval's lower end those held-out
  speeds fall (ln units, <= 0)::

      need_i = ln(tok_s_meas / tok_s_pred)_i - log_lo(pooled basis, stratum of i)
      log_lo(maturity) = min(0, lower end of validate.interval(need, groups = backend))

  (the group-weighted split-conformal bound at LEVEL, each backend weighing the same).  The estimator widens
  an uncalibrated prediction on a backend of that maturity by it (estimator.physics.fallback
  ``maturity_log_lo``).  With fewer than ``MIN_RESIDUALS`` held-out points or ``MIN_BACKENDS`` backends, the
  shipped default (``fallback.MATURITY_LOG_LO``) stays and the entry says so.

Records that run on a support fallback (the 310P's Q4 / Q8 rows: their matmuls run on the host CPU) are not
speed points (calibration.features.fallback_on_host); they check the fallback path's interval
(tests/test_support.py), which this widening is part of.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from calibration.features import SpeedPoint
from calibration.validate import FOLDS, LEVEL, HeldOut, interval
from estimator.physics import covariates as cov
from estimator.physics.fallback import MATURITY_LOG_LO

SCHEME = "lobo"
LESS_MATURE = ("developing", "experimental")
MIN_RESIDUALS = 5
MIN_BACKENDS = 2  # one backend's bias is not a maturity's


def point_maturity(p: SpeedPoint) -> str:
    """The support table's maturity of the point's llama.cpp backend on its device ('' for other engines, the
    reference backend and unlisted backends)."""
    if p.engine != cov.REFERENCE_ENGINE or p.hardware is None:
        return ""
    backend = cov.normalise_backend(p.backend)
    if not backend or backend == cov.REFERENCE_BACKEND:
        return ""
    return cov.backend_maturity(p.hardware, p.engine, backend)


def new_backend_targets(points: Sequence[SpeedPoint]) -> list[int]:
    """Indices of the points on a less mature llama.cpp backend: the lobo targets."""
    return [i for i, p in enumerate(points) if point_maturity(p) in LESS_MATURE]


def widening(held: Sequence[HeldOut], intervals: dict) -> dict:
    """Per less mature level: the extra ln-units below the pooled interval (module doc) with its evidence.

    held: the lobo held-out predictions; intervals: the fit's interval block (stratum -> basis ->
    {"log_lo", ...}).  Returns {maturity: {"log_lo", "n_residuals", "source": "lobo" | "default", "note"?,
    "backends": {engine/backend: {"n", "median_ape", "median_log_ratio"}}}} (log ratio = ln(tok_s_meas /
    tok_s_pred): negative when the held-out backend ran slower than predicted)."""
    need: dict[str, list[tuple[float, str]]] = defaultdict(list)
    by_backend: dict[str, dict[str, list[HeldOut]]] = defaultdict(lambda: defaultdict(list))
    for h in held:
        m = point_maturity(h.point)
        lo = ((intervals.get(h.point.stratum) or {}).get("pooled") or {}).get("log_lo")
        if m not in LESS_MATURE or lo is None:
            continue
        backend = FOLDS[SCHEME](h.point)
        need[m].append((h.log_ratio - float(lo), backend))
        by_backend[m][backend].append(h)
    out: dict = {}
    for m in LESS_MATURE:
        rows = need.get(m, [])
        entry: dict = {
            "n_residuals": len(rows),
            "backends": {
                b: {
                    "n": len(hs),
                    "median_ape": round(statistics.median(h.ape for h in hs), 4),
                    "median_log_ratio": round(statistics.median(h.log_ratio for h in hs), 4),
                }
                for b, hs in sorted(by_backend[m].items())
            },
        }
        if len(rows) < MIN_RESIDUALS or len(entry["backends"]) < MIN_BACKENDS:
            out[m] = {
                "log_lo": MATURITY_LOG_LO[m],
                **entry,
                "source": "default",
                "note": f"fewer than {MIN_RESIDUALS} held-out points or {MIN_BACKENDS} backends: the shipped "
                "default",
            }
            continue
        lo, _ = interval([n for n, _ in rows], level=LEVEL, groups=[b for _, b in rows])
        out[m] = {"log_lo": round(min(0.0, lo), 4), **entry, "source": SCHEME}
    return out
