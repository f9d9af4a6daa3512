"""Memory: fit the engine runtime terms (the ``memory`` section of coefficients.json) and the memory gate.

Fitted terms are whatever the estimator's runtime model exposes (``estimator.runtime.runtime_buffers(model,
quant, hardware, workload, mem_coeffs)`` with a dict of floats per engine); calibration invents none:
  compute_bytes           from records with a measured compute buffer (llama.cpp compute buffers, vLLM
                          activation peak), single device;
  context_overhead_bytes  from own measured records: device_total - (weights + kv + compute + output),
                          single device.
A coefficient is fitted only if it changes the prediction of the samples (finite-difference sensitivity);
the others keep the estimator's default and are listed as not identified.  Fit: least_squares on
ln(pred/meas), soft_l1, all coefficients >= 0.

Gate metrics (check.py):
  weights+kv  measured weights_bytes + kv_bytes vs weight_breakdown().total_bytes + kv_cache().total_bytes
              (exact physics, no fitted term); single-device records only (multi-GPU published weights may
              be per device).
  total       device_total_bytes of OWN measured records (origin "measured": NVML / process peak of the
              run) vs estimate_memory().total_bytes with runtime terms fitted without that device.
              Imported totals are not gated: their meaning differs by source (llama.cpp "total VRAM used
              (model + context)" without the CUDA context, peak process RSS, sampled GTT peaks; see
              docs/calibration.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from calibration.dataset import Dataset, LoadedRecord


@dataclass(frozen=True)
class MemoryGateRow:
    family: str
    engine: str
    backend: str
    metric: str  # "weights+kv" | "total"
    predicted_bytes: float
    measured_bytes: float
    scheme: str
    where: str

    @property
    def ape(self) -> float:
        return abs(self.predicted_bytes / self.measured_bytes - 1.0)


@dataclass(frozen=True)
class TermFit:
    coeffs: dict[str, float]
    fitted: tuple[str, ...]
    not_identified: tuple[str, ...]
    n_points: int
    median_ape: float | None


def fit_terms(
    samples: Sequence,
    predict: Callable[[object, dict], float],
    measured: Sequence[float],
    coeffs0: dict[str, float],
) -> TermFit:
    """Fit the coefficients of ``coeffs0`` that the samples are sensitive to (bounds >= 0).

    predict(sample, coeffs) -> bytes; residual ln(pred / meas), soft_l1 loss (f_scale 0.05 = 5 %).
    """
    y = np.asarray(measured, dtype=float)
    if not len(samples):
        return TermFit(dict(coeffs0), (), tuple(coeffs0), 0, None)
    base = np.array([predict(s, coeffs0) for s in samples], dtype=float)
    sensitive = []
    for k, v in coeffs0.items():
        probe = {**coeffs0, k: v * 1.5 + (1.0 if v == 0 else 0.0)}
        alt = np.array([predict(s, probe) for s in samples], dtype=float)
        if np.any(np.abs(alt - base) > 1e-9 * np.maximum(np.abs(base), 1.0)):
            sensitive.append(k)
    if not sensitive:
        return TermFit(dict(coeffs0), (), tuple(coeffs0), len(samples), _med(base, y))

    def fun(x):
        c = {**coeffs0, **dict(zip(sensitive, x, strict=True))}
        pred = np.array([predict(s, c) for s in samples], dtype=float)
        return np.log(np.maximum(pred, 1.0)) - np.log(y)

    x0 = np.array([max(coeffs0[k], 1e-12) for k in sensitive])
    res = least_squares(fun, x0, bounds=(0.0, np.inf), loss="soft_l1", f_scale=0.05, x_scale="jac")
    coeffs = {**coeffs0, **{k: float(v) for k, v in zip(sensitive, res.x, strict=True)}}
    pred = np.array([predict(s, coeffs) for s in samples], dtype=float)
    return TermFit(
        coeffs, tuple(sensitive), tuple(k for k in coeffs0 if k not in sensitive), len(samples), _med(pred, y)
    )


def _med(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.median(np.abs(pred / y - 1.0)))


# ------------------------------------------------------------------------------------ estimator wiring
def _runtime():
    try:
        from estimator import runtime
    except ImportError:
        return None
    return runtime


def default_memory_coeffs(engine: str) -> dict[str, float] | None:
    """The estimator's default memory coefficients for an engine (None when the estimator has none)."""
    rt = _runtime()
    if rt is None:
        return None
    for name in ("DEFAULT_MEMORY_COEFFICIENTS", "MEMORY_COEFFICIENTS", "DEFAULT_COEFFICIENTS"):
        table = getattr(rt, name, None)
        if isinstance(table, dict):
            sub = table.get(
                engine, table if all(isinstance(v, int | float) for v in table.values()) else None
            )
            if isinstance(sub, dict):
                return {k: float(v) for k, v in sub.items() if isinstance(v, int | float)}
    fn = getattr(rt, "default_memory_coefficients", None)
    return dict(fn(engine)) if callable(fn) else None


def _specs(lr: LoadedRecord, resolver):
    from calibration.features import workload_for

    model, quant, hw = resolver.spec_for(lr.record)
    return model, quant, hw, workload_for(lr.record)


def fit_memory(ds: Dataset, resolver=None, exclude_device: str | None = None) -> tuple[dict, list[str]]:
    """The ``memory`` section: {engine: coeffs} fitted from the dataset (optionally without one device)."""
    from calibration.dataset import device_key
    from calibration.features import Resolver

    rt = _runtime()
    if rt is None:
        return {}, [
            "estimator.runtime is not available: memory section left empty (estimator defaults apply)"
        ]
    resolver = resolver or Resolver()
    out: dict[str, dict] = {}
    notes: list[str] = []
    engines = sorted({lr.record.engine for lr in ds.records})
    for engine in engines:
        coeffs = default_memory_coeffs(engine)
        if coeffs is None:
            notes.append(f"{engine}: the estimator exposes no default memory coefficients; nothing fitted")
            continue
        for target in ("compute_bytes", "context_overhead_bytes"):
            samples, meas = [], []
            for lr in ds.records:
                r = lr.record
                if r.engine != engine or r.n_devices != 1 or device_key(r) == exclude_device:
                    continue
                m = _measured_runtime(r, target)
                if m is None:
                    continue
                try:
                    samples.append(_specs(lr, resolver))
                except Exception:  # noqa: BLE001 - a record without features is reported by features.py
                    continue
                meas.append(m)

            def predict(s, c, target=target):
                return float(getattr(rt.runtime_buffers(*s, c), target))

            tf = fit_terms(samples, predict, meas, coeffs)
            coeffs = tf.coeffs
            if tf.n_points:
                notes.append(
                    f"{engine} {target}: {tf.n_points} points, fitted {list(tf.fitted)}, "
                    f"in-sample median error {tf.median_ape:.1%}"
                )
        out[engine] = coeffs
    return out, notes


def _measured_runtime(r, target: str) -> float | None:
    if target == "compute_bytes":
        return float(r.compute_bytes) if r.compute_bytes else None
    if r.origin != "measured" or not r.device_total_bytes:
        return None
    parts = (r.weights_bytes, r.kv_bytes, r.compute_bytes)
    if any(v is None for v in parts):
        return None
    rest = r.device_total_bytes - sum(parts) - (r.output_bytes or 0)
    return float(rest) if rest > 0 else None


def memory_gate(ds: Dataset, resolver=None) -> tuple[list[MemoryGateRow], list[str]]:
    """Held-out memory predictions for the gate (see module docstring)."""
    from calibration.features import Resolver
    from estimator import kv, weights

    resolver = resolver or Resolver()
    rows: list[MemoryGateRow] = []
    notes: list[str] = []
    multi = 0
    for lr in ds.records:
        r = lr.record
        if r.weights_bytes is None or r.kv_bytes is None:
            continue
        if r.n_devices != 1:
            multi += 1
            continue
        try:
            model, quant, hw, wl = _specs(lr, resolver)
            pred = (
                weights.weight_breakdown(model, quant).total_bytes
                + kv.kv_cache(model, wl.n_ctx, wl.kv_dtype, n_seq=wl.n_seq, engine=r.engine).total_bytes
            )
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            notes.append(f"{lr.where}: weights+kv not predictable ({exc})")
            continue
        rows.append(
            MemoryGateRow(
                r.hardware_family,
                r.engine,
                r.backend,
                "weights+kv",
                float(pred),
                float(r.weights_bytes + r.kv_bytes),
                "exact physics",
                lr.where,
            )
        )
    if multi:
        notes.append(
            f"weights+kv: {multi} multi-device record(s) not gated (published weights may be per device)"
        )
    rows += _total_gate(ds, resolver, notes)
    return rows, notes


def _total_gate(ds: Dataset, resolver, notes: list[str]) -> list[MemoryGateRow]:
    from calibration.dataset import device_key

    cands = [
        lr
        for lr in ds.records
        if lr.record.origin == "measured" and lr.record.device_total_bytes and lr.record.n_devices == 1
    ]
    if not cands:
        return []
    try:
        from estimator import memory
    except ImportError:
        notes.append(f"total: estimator.memory is not available; {len(cands)} record(s) not gated")
        return []
    rows = []
    for dev in sorted({device_key(lr.record) for lr in cands}):
        coeffs, _ = fit_memory(ds, resolver, exclude_device=dev)
        for lr in (x for x in cands if device_key(x.record) == dev):
            r = lr.record
            try:
                model, quant, hw, wl = _specs(lr, resolver)
                est = memory.estimate_memory(model, quant, hw, wl, coeffs.get(r.engine) or None)
            except Exception as exc:  # noqa: BLE001
                notes.append(f"{lr.where}: total memory not predictable ({exc})")
                continue
            rows.append(
                MemoryGateRow(
                    r.hardware_family,
                    r.engine,
                    r.backend,
                    "total",
                    float(est.total_bytes),
                    float(r.device_total_bytes),
                    "lodo (runtime terms)",
                    lr.where,
                )
            )
    return rows


__all__ = ["fit_terms", "fit_memory", "memory_gate", "MemoryGateRow", "TermFit", "math"]
