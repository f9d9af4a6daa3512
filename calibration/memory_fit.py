"""Memory: fit the engine runtime terms (the ``memory`` section of coefficients.json) and the memory gate.

Fitted terms are whatever the estimator's runtime model exposes
(``estimator.physics.runtime.runtime_buffers(model,
quant, hardware, workload, mem_coeffs)`` with a dict of floats per engine); calibration invents none:
  compute_bytes           from own measured records with a compute buffer (llama.cpp compute buffers,
                          vLLM activation peak), single device, graphs of >= 2 layers; published compute
                          buffers (older CUDA / Metal builds) are only held out;
  context_overhead_bytes  from own measured records, single device: the device memory the run's processes
                          held (NVML, ``device_used_bytes``) - the buffers llama.cpp put on the device
                          (model, KV, RS, compute); without per-buffer sizes device_total - (weights + kv +
                          compute + output).  On an accelerator the compute target is the device's
                          compute buffers (``measured_compute_bytes``: llama.cpp stages inputs on the host).
Records of one-layer proxies are left out of the fit (``MIN_FIT_LAYERS``).
A coefficient is fitted only if it changes the prediction of the samples (finite-difference sensitivity);
the others keep the estimator's default and are listed as not identified.  Fit: least_squares on
ln(pred/meas), soft_l1, all coefficients >= 0.

Gate metrics (check.py):
  weights+kv  weights + KV the run allocated vs the estimator's weights + kv_cache().total_bytes
              (exact physics, no fitted term):
              * own llama.cpp records: weights_bytes (llama_model_size, every tensor) + kv_bytes from
                the engine log, vs weight_breakdown().total_bytes + KV;
              * published llama.cpp runs: the weights_gib and kv_gib records of one run are joined (same
                source, device, device count, model, quant, test and n_ctx).  weights_gib is the sum of
                the GPU / Metal model buffers ("'VRAM used' line", "sum of GPU/Metal buffers"): llama.cpp
                keeps the token embedding in a CPU buffer, so it is compared with total - token_embd
                (+ token_embd again for a tied embedding, duplicated on the device as the output head);
                "'mem required' line" (old host-side figure) is the whole model.  Both are sums over
                devices, so multi-GPU runs are gated too.
              vLLM records are not gated here: their kv_bytes is the pre-allocated pool
              (kv_cache_memory_bytes), not a need at n_ctx; their weights appear as the ungated
              "weights" row.
  total       * own measured records: ``device_used_bytes`` (origin "measured": NVML per-process peak of
                the run, context included; else its device_total_bytes) vs estimate_memory().total_bytes,
                runtime terms fitted without that device;
              * published single-device runs with a logged "total VRAM used (model + context)":
                llama.cpp's buffer total (device weights + KV + compute, no CUDA context), vs
                estimate_memory().total_bytes - context_overhead_bytes, runtime terms fitted without
                that device.
              Not gated: peak process RSS (mac-llm-bench, GB/GiB ambiguous; own CPU runs: mmap'd weights
              and untouched compute pages make RSS differ from allocations), sampled GTT peaks (Strix Halo).
  compute     (ungated) held-out compute buffers, single device, runtime terms fitted without the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares

from calibration.dataset import Dataset, LoadedRecord

# the runtime terms fitted (and banded) per engine
BAND_TARGETS = ("compute_bytes", "context_overhead_bytes")
BAND_TOLERANCE = 0.05  # issue 11: compute buffers within 5 %
MIN_KIND_BAND = 30  # distinct measurements a device kind needs for a band of its own
BAND_BASIS = (
    "in sample: the engine's own measured buffers (single device, graphs of two layers or more), one per "
    "distinct measurement, against the fitted coefficients"
)


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
    # what identifies the measurement (source / host, device, count, model, quant, n_ctx, KV dtype, bytes):
    # the test rows of one run (pp512, tg128 ...) repeat the same memory figures and count once
    measurement: tuple = ()

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

    # solved in units of each coefficient's default (at least 1): a byte-sized term (a 400 MiB context) has
    # a gradient of ~1e-9 per byte, under least_squares' gtol in bytes, so it would never leave its default
    scale = np.array([max(abs(coeffs0[k]), 1.0) for k in sensitive])

    def fun(x):
        c = {**coeffs0, **dict(zip(sensitive, x * scale, strict=True))}
        pred = np.array([predict(s, c) for s in samples], dtype=float)
        return np.log(np.maximum(pred, 1.0)) - np.log(y)

    x0 = np.array([max(coeffs0[k], 1e-12) for k in sensitive]) / scale
    res = least_squares(fun, x0, bounds=(0.0, np.inf), loss="soft_l1", f_scale=0.05, x_scale="jac")
    coeffs = {**coeffs0, **{k: float(v) for k, v in zip(sensitive, res.x * scale, strict=True)}}
    pred = np.array([predict(s, coeffs) for s in samples], dtype=float)
    return TermFit(
        coeffs, tuple(sensitive), tuple(k for k in coeffs0 if k not in sensitive), len(samples), _med(pred, y)
    )


def _med(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.median(np.abs(pred / y - 1.0)))


# ------------------------------------------------------------------------------------ estimator wiring
def _runtime():
    try:
        from estimator.physics import runtime
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
    """(model, quant, hardware, workload) of a record; memory-only imports leave batch unstated (0): one
    sequence."""
    import dataclasses

    from calibration.features import workload_for

    model, quant, hw = resolver.spec_for(lr.record)
    wl = workload_for(lr.record)
    return model, quant, hw, dataclasses.replace(wl, n_seq=max(int(wl.n_seq), 1))


MEMORY_METRICS = ("weights_gib", "kv_gib", "compute_buffer_gib", "total_gib")
# Runtime terms are fitted on graphs of at least this many layers.  ggml's allocator packs a one-layer graph
# differently (Mistral-7B with flash attention: 3 ff + 3 hidden at the FFN, about one hidden less than at 4
# layers, and a mask that is live at 8K cells but not at 32K); no deployed model has one layer.  One-layer
# proxy records stay in results/ and in the held-out compute rows.
MIN_FIT_LAYERS = 2


def published_runs(ds: Dataset) -> list[dict[str, LoadedRecord]]:
    """Imported memory records grouped per published run: {metric: record} for each (source, device, device
    count, model, quant, test, n_ctx)."""
    runs: dict[tuple, dict[str, LoadedRecord]] = {}
    for lr in ds.records:
        r = lr.record
        ex = r.extra if isinstance(r.extra, dict) else {}
        metric = ex.get("metric")
        if r.origin != "imported" or metric not in MEMORY_METRICS:
            continue
        test = (ex.get("published") or {}).get("test", "")
        key = (r.source, r.hardware_id, r.n_devices, r.model_id, r.quant, test, r.n_ctx)
        runs.setdefault(key, {})[metric] = lr
    return list(runs.values())


def weights_meaning(notes: str) -> str | None:
    """What a published weights_gib figure counts: "device" (GPU / Metal model buffers, token embedding in
    a CPU buffer), "all" (every tensor), or None (unknown: not compared)."""
    if "'VRAM used' line" in notes or "sum of GPU/Metal buffers" in notes:
        return "device"
    if "'mem required' line" in notes:
        return "all"
    return None


def weight_bytes_for(model, quant, meaning: str) -> int:
    """Estimator weight bytes with a given meaning (estimator.physics.memory places the embedding the same
    way)."""
    from estimator.physics import weights

    wb = weights.weight_breakdown(model, quant)
    if meaning == "all":
        return wb.total_bytes
    return wb.total_bytes - wb.token_embd_bytes + (wb.token_embd_bytes if model.tie_embeddings else 0)


def _fit_samples(ds: Dataset, resolver, engine: str, target: str, exclude_device: str | None = None):
    """(samples, measured bytes, measurement keys, one-layer records left out) of one engine's ``target``:
    own single-device records with that figure, graphs of >= ``MIN_FIT_LAYERS`` layers.  The key names the
    measurement (host / source, device, model, depth, quant, context, KV dtype, flash attention, ubatch,
    sequences, bytes): the test rows of one run repeat its buffers."""
    from calibration.dataset import device_key

    samples, meas, keys = [], [], []
    one_layer = 0
    for lr in ds.records:
        r = lr.record
        if r.engine != engine or r.n_devices != 1 or device_key(r) == exclude_device:
            continue
        m = _measured_runtime(r, target)
        if m is None:
            continue
        try:
            spec = _specs(lr, resolver)
        except Exception:  # noqa: BLE001 - a record without features is reported by features.py
            continue
        if spec[0].n_layers < MIN_FIT_LAYERS:
            one_layer += 1
            continue
        samples.append(spec)
        meas.append(m)
        keys.append((r.origin, r.host or r.source, device_key(r), r.model_id, r.n_layers_measured,
                     r.quant, r.n_ctx, r.kv_dtype, r.flash_attn, r.n_ubatch, r.batch,
                     int(round(float(m)))))  # fmt: skip
    return samples, meas, keys, one_layer


def _predictor(rt, target: str):
    """prediction(sample, coefficients) of ``target`` by the runtime formula (never a replayed graph: the
    coefficients and their band describe the formula)."""

    def predict(s, c):
        return float(getattr(rt.runtime_buffers(*s, c, replay=False), target))

    return predict


def fit_memory(ds: Dataset, resolver=None, exclude_device: str | None = None) -> tuple[dict, list[str]]:
    """The ``memory`` section: {engine: coeffs} fitted from the dataset (optionally without one device)."""
    from calibration.features import Resolver

    rt = _runtime()
    if rt is None:
        return {}, [
            "estimator.physics.runtime is not available: memory section left empty (estimator defaults apply)"
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
        for target in BAND_TARGETS:
            samples, meas, _keys, one_layer = _fit_samples(ds, resolver, engine, target, exclude_device)
            tf = fit_terms(samples, _predictor(rt, target), meas, coeffs)
            coeffs = tf.coeffs
            if tf.n_points:
                notes.append(
                    f"{engine} {target}: {tf.n_points} points, fitted {list(tf.fitted)}, "
                    f"in-sample median error {tf.median_ape:.1%}"
                    + (f"; {one_layer} one-layer proxy point(s) left out" if one_layer else "")
                )
        out[engine] = coeffs
    return out, notes


def residual_band(ratios: Sequence[float]) -> dict:
    """What a set of measured / predicted ratios says about a prediction: n, median |ratio - 1|, the share
    within 5 %, the 5th and 95th percentiles of the ratio (a 90 % band) and its extremes."""
    r = np.asarray(ratios, dtype=float)
    err = np.abs(r - 1.0)
    return {
        "n": int(r.size),
        "median_ape": round(float(np.median(err)), 6),
        "within_5pct": round(float(np.mean(err <= BAND_TOLERANCE)), 6),
        "ratio_p05": round(float(np.quantile(r, 0.05)), 6),
        "ratio_p95": round(float(np.quantile(r, 0.95)), 6),
        "ratio_min": round(float(r.min()), 6),
        "ratio_max": round(float(r.max()), 6),
    }


def memory_bands(ds: Dataset, memory: dict, resolver=None) -> dict:
    """The ``memory_bands`` section: {engine: {target: residual_band}} of the engine's own measured buffers
    against the estimate with the fitted ``memory`` coefficients, one ratio (measured / predicted) per
    distinct measurement (``_fit_samples``' key) — in sample: the same records the coefficients were fitted
    on (12 coefficients over hundreds of configurations; the memory gate's held-out rows are per device).
    A band also has ``by_kind``: {device kind: band} for each kind of at least ``MIN_KIND_BAND`` distinct
    measurements when more than one kind was measured (llama.cpp's CUDA buffers spread wider than its CPU
    ones: the MoE layouts of docs/memory-model.md §3)."""
    from calibration.features import Resolver

    rt = _runtime()
    if rt is None:
        return {}
    resolver = resolver or Resolver()
    out: dict[str, dict] = {}
    for engine, coeffs in sorted(memory.items()):
        for target in BAND_TARGETS:
            samples, meas, keys, _ = _fit_samples(ds, resolver, engine, target)
            predict = _predictor(rt, target)
            ratios: dict = {}
            kinds: dict = {}
            for s, m, k in zip(samples, meas, keys, strict=True):
                pred = predict(s, coeffs)
                if pred > 0:
                    ratios.setdefault(k, m / pred)
                    kinds.setdefault(s[2].kind, {}).setdefault(k, m / pred)
            if ratios:
                band = residual_band(list(ratios.values()))
                band["basis"] = BAND_BASIS
                own = {kd: residual_band(list(r.values())) for kd, r in sorted(kinds.items())}
                own = {kd: b for kd, b in own.items() if b["n"] >= MIN_KIND_BAND}
                if len(kinds) > 1 and own:
                    band["by_kind"] = own
                out.setdefault(engine, {})[target] = band
    return out


def _on_host(buffer_type: str) -> bool:
    """A llama.cpp buffer type in host RAM: CPU, CPU_Mapped, CPU_REPACK, CUDA_Host (pinned staging), ..."""
    return buffer_type.startswith("CPU") or buffer_type.endswith("_Host")


def device_buffer_bytes(r, kind: str) -> int | None:
    """Bytes of the engine's ``kind`` buffers (llama.cpp: model, KV, RS, compute, output) on the accelerator,
    from the record's per-buffer-type sizes (``extra.buffers_bytes``); 0 when it has none of that kind
    there; None for a CPU run or a record without per-buffer sizes."""
    per_kind = (r.extra or {}).get("buffers_bytes") if isinstance(r.extra, dict) else None
    if r.backend in ("", "CPU") or not isinstance(per_kind, dict):
        return None
    sizes = per_kind.get(kind) or {}
    return sum(int(v) for k, v in sizes.items() if not _on_host(str(k))) if isinstance(sizes, dict) else None


def device_used_bytes(r) -> int | None:
    """Peak device memory of a measured run, bytes: what NVML accounted to the run's processes, summed over
    devices, when every device reported it (their CUDA contexts included); else ``device_total_bytes``, the
    peak rise of the devices' used memory over the run, which misses what the process already held when
    sampling began (its CUDA context: llama-cpp-python creates it on import)."""
    devices = (r.extra or {}).get("nvml_devices") if isinstance(r.extra, dict) else None
    if isinstance(devices, list) and devices:
        per_process = [d.get("peak_process_bytes") for d in devices if isinstance(d, dict)]
        if len(per_process) == len(devices) and all(isinstance(v, int) and v > 0 for v in per_process):
            return sum(per_process)
    return r.device_total_bytes or None


def measured_compute_bytes(r) -> int | None:
    """The compute buffers the estimator's ``runtime_buffers().compute_bytes`` sizes: on an accelerator those
    on the device (llama.cpp stages inputs in a host buffer, ``host_compute_bytes``), else all of them."""
    on_device = device_buffer_bytes(r, "compute")
    return on_device if on_device else r.compute_bytes


def _measured_runtime(r, target: str) -> float | None:
    if target == "compute_bytes":
        # own runs only: the published compute buffers are CUDA / Metal logs of older builds whose graphs
        # differ (held out as ungated compute rows, never fitted)
        compute = measured_compute_bytes(r)
        return float(compute) if compute and r.origin == "measured" else None
    used = device_used_bytes(r)
    if r.origin != "measured" or not used:
        return None
    kinds = ("model", "KV", "RS", "compute")
    on_device = [device_buffer_bytes(r, k) for k in kinds]
    if on_device[0]:  # the buffers llama.cpp put on the device: the rest is the context and its pools
        rest = used - sum(v or 0 for v in on_device)
        return float(rest) if rest > 0 else None
    parts = (r.weights_bytes, r.kv_bytes, r.compute_bytes)
    if any(v is None for v in parts):
        return None
    rest = used - sum(parts) - (r.output_bytes or 0)
    return float(rest) if rest > 0 else None


def memory_gate(ds: Dataset, resolver=None) -> tuple[list[MemoryGateRow], list[str]]:
    """Held-out memory predictions for the gate (see module docstring)."""
    from calibration.features import Resolver
    from estimator.engines import ENGINES, get_engine
    from estimator.physics import kv

    resolver = resolver or Resolver()
    rows: list[MemoryGateRow] = []
    notes: list[str] = []

    def kv_pred(model, wl, engine) -> int:
        return kv.kv_cache_for(model, replace(wl, engine=engine)).total_bytes

    for lr in ds.records:  # own runs: weights and KV in one record
        r = lr.record
        if r.origin != "measured" or r.weights_bytes is None:
            continue
        try:
            model, quant, hw, wl = _specs(lr, resolver)
            w = weight_bytes_for(model, quant, "all")
            if r.engine in ENGINES and get_engine(r.engine).reserves_memory:
                # its measured KV is the whole reserved pool, not the cache of n_ctx tokens
                rows.append(_row(r, "weights", w, r.weights_bytes, "exact physics (ungated)", lr.where))
            elif r.kv_bytes is not None:
                pred = w + kv_pred(model, wl, r.engine)
                rows.append(
                    _row(r, "weights+kv", pred, r.weights_bytes + r.kv_bytes, "exact physics", lr.where)
                )
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            notes.append(f"{lr.where}: weights+kv not predictable ({exc})")
    unknown = 0
    for run in published_runs(ds):
        if "weights_gib" not in run or "kv_gib" not in run:
            continue
        wlr, klr = run["weights_gib"], run["kv_gib"]
        meaning = weights_meaning(str(wlr.record.extra.get("notes", "")))
        if meaning is None:
            unknown += 1
            continue
        try:
            model, quant, hw, wl = _specs(wlr, resolver)
            pred = weight_bytes_for(model, quant, meaning) + kv_pred(model, wl, wlr.record.engine)
        except Exception as exc:  # noqa: BLE001
            notes.append(f"{wlr.where}: weights+kv not predictable ({exc})")
            continue
        meas = wlr.record.weights_bytes + klr.record.kv_bytes
        where = f"{wlr.where} + {klr.where.rsplit(':', 1)[-1]}"
        rows.append(
            _row(wlr.record, "weights+kv", pred, meas, f"exact physics (published, {meaning})", where)
        )
    if unknown:
        notes.append(f"weights+kv: {unknown} published run(s) whose weights figure has no known meaning")
    rows += _held_out_runtime(ds, resolver, notes)
    distinct = distinct_measurements(rows)
    if len(distinct) < len(rows):
        notes.append(
            f"memory: {len(rows) - len(distinct)} row(s) repeat a measurement already counted (test rows of "
            "one run): counted once"
        )
    return distinct, notes


def distinct_measurements(rows: list[MemoryGateRow]) -> list[MemoryGateRow]:
    """One row per (metric, measurement): the first of rows that repeat the same measured figure."""
    seen: set = set()
    out = []
    for row in rows:
        key = (row.metric, row.measurement) if row.measurement else (row.metric, row.where)
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
    return out


def _row(r, metric: str, pred: float, meas: float, scheme: str, where: str) -> MemoryGateRow:
    from calibration.dataset import device_key
    from calibration.features import point_family

    origin = r.source if r.origin == "imported" else r.host
    key = (r.origin, origin, device_key(r), r.n_devices, r.model_id, r.n_layers_measured, r.quant, r.n_ctx,
           r.kv_dtype, int(round(float(meas))))  # fmt: skip
    return MemoryGateRow(
        point_family(r), r.engine, r.backend, metric, float(pred), float(meas), scheme, where, key
    )


def _held_out_runtime(ds: Dataset, resolver, notes: list[str]) -> list[MemoryGateRow]:
    """total (gated) and compute (ungated) rows whose runtime terms are fitted without the row's device."""
    from calibration.dataset import device_key

    cands: list[tuple[str, LoadedRecord, LoadedRecord | None]] = []
    for lr in ds.records:
        r = lr.record
        if r.n_devices != 1:
            continue
        if r.origin == "measured" and device_used_bytes(r):
            cands.append(("total", lr, None))
        if r.compute_bytes:
            cands.append(("compute", lr, None))
    for run in published_runs(ds):
        t, w = run.get("total_gib"), run.get("weights_gib")
        if t is None or w is None or t.record.n_devices != 1:
            continue
        if weights_meaning(str(w.record.extra.get("notes", ""))) == "device":
            cands.append(("total-buffers", t, w))
    if not cands:
        return []
    try:
        from estimator.physics import memory
    except ImportError:
        notes.append(f"memory: estimator.physics.memory is not available; {len(cands)} record(s) not gated")
        return []
    rows = []
    for dev in sorted({device_key(c[1].record) for c in cands}):
        coeffs, _ = fit_memory(ds, resolver, exclude_device=dev)
        for kind, lr, _w in (c for c in cands if device_key(c[1].record) == dev):
            r = lr.record
            try:
                model, quant, hw, wl = _specs(lr, resolver)
                c = coeffs.get(r.engine) or None
                if kind == "compute":
                    rt = _runtime().runtime_buffers(model, quant, hw, wl, c)
                    meas = measured_compute_bytes(r) or 0
                    rows.append(_row(r, "compute", rt.compute_bytes, meas, "lodo (ungated)", lr.where))
                    continue
                est = memory.estimate_memory(model, quant, hw, wl, c)
            except Exception as exc:  # noqa: BLE001
                notes.append(f"{lr.where}: {kind} memory not predictable ({exc})")
                continue
            if kind == "total":
                meas = device_used_bytes(r) or 0
                rows.append(_row(r, "total", est.total_bytes, meas, "lodo (runtime terms)", lr.where))
            else:
                pred = est.total_bytes - est.overhead_bytes
                meas = r.device_total_bytes or 0
                rows.append(_row(r, "total", pred, meas, "lodo (runtime terms), published buffers", lr.where))
    return rows


__all__ = [
    "fit_terms", "fit_memory", "memory_bands", "residual_band", "memory_gate", "published_runs",
    "MemoryGateRow", "TermFit", "math",
]  # fmt: skip
