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

* ``evidence(records, table, qualities)``: the records of those backends that no fit saw -- a quality flag
  the fit does not use (the 310P's "approximate" rows) or a support fallback (the 310P's Q4 / Q8 rows run
  their matmuls on the host CPU, calibration.features.fallback_on_host) -- predicted out of sample as a
  report does, with the interval a report shows (the calibration report's table; tests/test_support.py).
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
# quality flags whose records are no evidence of speed (a source's number flagged as doubtful)
NOT_EVIDENCE = ("suspect",)


def new_backend_targets(points: Sequence[SpeedPoint]) -> list[int]:
    """Indices of the points on a less mature llama.cpp backend: the lobo targets."""
    return [i for i, p in enumerate(points) if cov.less_mature(p.hardware, p.engine, p.backend)]


def widening(held: Sequence[HeldOut], intervals: dict) -> dict:
    """Per less mature level: the extra ln-units below the pooled interval (module doc) with its evidence.

    held: the lobo held-out predictions; intervals: the fit's interval block (stratum -> basis ->
    {"log_lo", ...}).  Returns {maturity: {"log_lo", "n_residuals", "source": "lobo" | "default", "note"?,
    "backends": {engine/backend: {"n", "median_ape", "median_log_ratio"}}}} (log ratio = ln(tok_s_meas /
    tok_s_pred): negative when the held-out backend ran slower than predicted)."""
    # maturity -> backend -> (held-out prediction, its distance above the pooled lower bound)
    rows: dict[str, dict[str, list[tuple[HeldOut, float]]]] = defaultdict(lambda: defaultdict(list))
    for h in held:
        m = cov.less_mature(h.point.hardware, h.point.engine, h.point.backend)
        lo = ((intervals.get(h.point.stratum) or {}).get("pooled") or {}).get("log_lo")
        if m and lo is not None:
            rows[m][FOLDS[SCHEME](h.point)].append((h, h.log_ratio - float(lo)))
    out: dict = {}
    for m in LESS_MATURE:
        by_backend = rows.get(m, {})
        need = [(n, b) for b, hs in by_backend.items() for _, n in hs]
        entry: dict = {
            "n_residuals": len(need),
            "backends": {
                b: {
                    "n": len(hs),
                    "median_ape": round(statistics.median(h.ape for h, _ in hs), 4),
                    "median_log_ratio": round(statistics.median(h.log_ratio for h, _ in hs), 4),
                }
                for b, hs in sorted(by_backend.items())
            },
        }
        if len(need) < MIN_RESIDUALS or len(by_backend) < MIN_BACKENDS:
            out[m] = {
                "log_lo": MATURITY_LOG_LO[m],
                **entry,
                "source": "default",
                "note": f"fewer than {MIN_RESIDUALS} held-out points or {MIN_BACKENDS} backends: the shipped "
                "default",
            }
            continue
        lo, _ = interval([n for n, _ in need], level=LEVEL, groups=[b for _, b in need])
        out[m] = {"log_lo": round(min(0.0, lo), 4), **entry, "source": SCHEME}
    return out


def _less_mature_somewhere(engine: str, backend: str) -> bool:
    """True when the support table names the engine's backend developing / experimental on some family."""
    from estimator.catalog import support as table

    return any(f.engine == engine and backend in f.backends and f.subject == "backend"
               and f.maturity in LESS_MATURE for f in table.support_facts())  # fmt: skip


def evidence(records: Sequence, table, fitted_qualities: Sequence[str], resolver=None) -> list[dict]:
    """Out-of-sample checks of the less mature backends, predicted as a report does with ``table`` (the
    fitted coefficients): every llama.cpp decode record on a developing / experimental backend that is not a
    point of the fit, because its quality flag is not fitted (the 310P's "approximate" rows) or because it
    runs on a support fallback ("suspect" records are no evidence).  Each is timed as tg at the record's
    depth on the configuration's path (native or fallback), with the interval the report shows (maturity
    widening included).

    records: LoadedRecord; fitted_qualities: the quality flags the fit used.  Returns one dict per record
    (``measured_tok_s``, ``tok_s``, ``lo_tok_s``, ``hi_tok_s``, ``inside``, ``path``, ``why`` it is not
    fitted), or with ``error`` when it cannot be predicted."""
    from calibration import features as feat
    from calibration.dataset import record_quality
    from estimator.physics import speed
    from estimator.specs import SpecError

    resolver = resolver or feat.Resolver()
    out: list[dict] = []
    for lr in records:
        r = lr.record
        if r.engine != cov.REFERENCE_ENGINE or not r.decode_tok_s or record_quality(r) in NOT_EVIDENCE:
            continue
        if not _less_mature_somewhere(r.engine, cov.normalise_backend(r.backend)):
            continue
        row = {"where": f"{lr.file}:{lr.line}", "model": r.model_id, "quant": r.quant,
               "hardware": r.hardware_id, "n_devices": r.n_devices, "backend": r.backend,
               "measured_tok_s": float(r.decode_tok_s), "quality": record_quality(r)}  # fmt: skip
        try:
            model, quant, hw, wl = feat.record_specs(resolver, r)
        except (SpecError, KeyError, ValueError) as exc:
            out.append({**row, "error": str(exc)})
            continue
        maturity = cov.less_mature(hw, r.engine, r.backend)
        if not maturity:
            continue
        sets = speed.speed_sets(table, model, quant, hw, wl)
        path = sets.path
        on_host = path is not None and path.host is not None  # as features.fallback_on_host leaves it out
        if row["quality"] in fitted_qualities and not on_host:
            continue  # a point of the fit, not evidence
        e = speed.tg_path_estimate(model, quant, hw, wl, sets)
        out.append({
            **row, "maturity": maturity, "tok_s": e.tok_s, "lo_tok_s": e.lo_tok_s, "hi_tok_s": e.hi_tok_s,
            "inside": e.lo_tok_s <= row["measured_tok_s"] <= e.hi_tok_s,
            "path": "native" if path is None else ("host CPU fallback" if on_host else "device fallback"),
            "why": "runs on a support fallback" if on_host else f"quality {row['quality']!r} is not fitted",
        })  # fmt: skip
    return out
