"""What the estimator predicts for a stored record: the record as a row of ``estimator.app.predict`` (the CSV
interface calibration backtests use) and that row's prediction with the current coefficients.

Record -> row (the inverse of calibration.features.workload_for, so the estimate is the one a backtest of the
record gets):
* model: ``model_id``, with ``n_layers`` = ``n_layers_measured`` when a depth-reduced proxy was run;
* hardware: the catalog id (``hardware_id``); a host outside the catalog is a ``custom`` device built from
  what the sweep detected (``extra["detected"]``: RAM as memory, the host-bandwidth probe as bandwidth,
  GB/s, the record's family, and ``measured_as`` = its device key, so the host's own calibrated effects
  answer once its runs are in the fit); a device with no bandwidth figure cannot be estimated;
* workload: engine, backend (when the engine knows it), quant, kv_dtype, n_prompt, n_gen, n_depth, batch,
  n_ctx, flash_attn, n_batch (llama-bench's 2048 when unstated), n_ubatch (512), split, n_devices and the
  llama.cpp KV switches a run stated (``engine_options``: swa_full, kv_unified); a serving benchmark adds
  ``concurrency``; a memory-only point asks for one generated token (only its memory columns are read).

Coefficients: ``<results>/coefficients.json`` when it exists, else ``estimator.physics.coefficients.
load_coefficients()`` ($FITBENCH_COEFFICIENTS, the repo's results/coefficients.json, else the shipped prior);
a file that cannot be read falls back to the shipped prior, and ``Estimator.source`` says which was used.
Nothing here raises for a record it cannot estimate: the reason comes back instead.
"""

from __future__ import annotations

from pathlib import Path

from estimator.catalog.detect import host_device_key
from harness.describe import test_kinds
from harness.records import RunRecord

GIB = 2**30


def hardware_columns(rec: RunRecord) -> dict[str, str]:
    """The hardware columns of a predict row for the record's device; ValueError when the estimator has no
    way to know the device's bandwidth."""
    if rec.hardware_id:
        return {"hardware": rec.hardware_id}
    det = rec.extra.get("detected") if isinstance(rec.extra, dict) else None
    det = det if isinstance(det, dict) else {}
    if det.get("gpus"):
        raise ValueError(f"{rec.device_name or 'the GPU'} is not in the catalog (no bandwidth figure)")
    bw = det.get("host_bandwidth_probe_gbs") or det.get("bandwidth_gbs")
    ram = det.get("ram_bytes")
    if not bw or not ram:
        raise ValueError("host not in the hardware catalog and its bandwidth probe / RAM are not recorded")
    return {
        "hardware": "custom",
        "kind": "cpu",
        "family": rec.hardware_family or str(det.get("cpu_family") or "custom"),
        "memory_gib": repr(ram / GIB),
        "bandwidth_gbs": repr(float(bw)),
        "host_bandwidth_gbs": repr(float(bw)),
        "hardware_name": str(det.get("cpu_model") or rec.device_name or "detected CPU"),
        "cpu_cores": str(det.get("physical_cores") or ""),
        "cpu_clock_ghz": str(det.get("cpu_clock_ghz") or ""),
        "cpu_isa": " ".join(str(f) for f in det.get("isa") or ()),
        "measured_as": host_device_key(rec.host, rec.device_name, rec.hardware_family),  # its own runs answer
    }


def _backend(rec: RunRecord) -> str:
    """The record's backend as its engine spells it, "" when the engine does not know it (the profile's
    default for the device is then used, as in calibration)."""
    from estimator.engines import ENGINES, get_engine

    if rec.engine not in ENGINES or not rec.backend:
        return ""
    return {b.lower(): b for b in get_engine(rec.engine).backend_names()}.get(rec.backend.lower(), "")


def predict_row(rec: RunRecord) -> dict[str, str]:
    """The predict row of a record (module doc); ValueError when its device cannot be described."""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    opts = extra.get("engine_options") if isinstance(extra.get("engine_options"), dict) else {}
    kinds = test_kinds(rec)
    row = {
        "model": rec.model_id,
        **hardware_columns(rec),
        "n_devices": str(max(1, rec.n_devices)),
        "engine": rec.engine,
        "backend": _backend(rec),
        "quant": rec.quant,
        "kv_dtype": rec.kv_dtype or "f16",
        "n_prompt": str(rec.n_prompt),
        "n_gen": str(1 if kinds == ("mem",) else rec.n_gen),
        "n_depth": str(rec.n_depth),
        "batch": str(max(1, rec.batch)),
        "n_ctx": str(rec.n_ctx or max(rec.n_depth + rec.n_prompt + rec.n_gen, 1)),
        "flash_attn": "1" if rec.flash_attn else "0",
        "n_batch": str(rec.n_batch or max(2048, rec.n_ubatch or 0)),
        "n_ubatch": str(rec.n_ubatch or 512),
        "swa_full": "1" if opts.get("swa_full", extra.get("swa_full", False)) else "0",
        "kv_unified": "1" if opts.get("kv_unified", extra.get("kv_unified", True)) else "0",
    }
    if 0 < rec.n_layers_measured < rec.n_layers_real:
        row["n_layers"] = str(rec.n_layers_measured)
    if extra.get("split") in ("tp", "pp"):
        row["split"] = extra["split"]
    if kinds == ("serve",):
        row["concurrency"] = str(rec.concurrency or rec.batch)
    return row


class Estimator:
    """Predicts records with one coefficient table, loaded on first use (module doc).  ``predict`` returns
    one (outputs, why not) pair per record: outputs are predict's OUTPUT_COLUMNS (strings), or None with
    the reason when the record cannot be estimated."""

    def __init__(self, results: str | Path | None = None) -> None:
        self.results = Path(results) if results is not None else None
        self._table = None
        self.source = ""

    def table(self):
        if self._table is None:
            from estimator.physics.coefficients import load_coefficients, prior_table

            local = self.results / "coefficients.json" if self.results is not None else None
            try:
                self._table = load_coefficients(local if local is not None and local.is_file() else None)
                path = self._table.path
                self.source = _shown(path) if path else "the shipped prior (uncalibrated)"
            except Exception as exc:  # noqa: BLE001 - a damaged file: the prior, and say so
                self._table = prior_table()
                why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.source = f"the shipped prior (uncalibrated; coefficients not readable: {why})"
        return self._table

    def predict(self, records: list[RunRecord]) -> list[tuple[dict | None, str]]:
        from estimator.app.predict import predict_rows

        rows, out = [], []
        for rec in records:
            try:
                rows.append(predict_row(rec))
                out.append(None)
            except Exception as exc:  # noqa: BLE001 - an estimate must never stop a sweep
                out.append((None, _first_line(exc)))
        if rows:
            try:
                predicted = iter([_result(r) for r in predict_rows(rows, self.table())])
            except Exception as exc:  # noqa: BLE001 - the estimator failed as a whole: no estimates
                predicted = iter([(None, _first_line(exc))] * len(rows))
            out = [o if o is not None else next(predicted) for o in out]
        return [self._engine_view(rec, o) for rec, o in zip(records, out, strict=True)]

    def _engine_view(self, rec: RunRecord, result: tuple[dict | None, str]) -> tuple[dict | None, str]:
        """A llama.cpp memory-only record: add the estimator's sizes of every buffer llama.cpp reports, on
        the device and in host RAM (``harness.consistency.compare_record``), as ``engine_weights_kv_bytes``
        and ``engine_compute_bytes``.  predict's weights / runtime bytes count the device alone, and on a
        GPU llama.cpp keeps the token embedding and the inputs' staging buffer in host RAM."""
        row, why = result
        if row is None or rec.engine != "llama.cpp" or rec.n_prompt or rec.n_gen:
            return result
        try:
            from estimator.catalog.resolve import resolve_model
            from harness.consistency import compare_record

            mem = self.table().memory_for("llama.cpp") or None
            c = compare_record("", rec, resolve_model(rec.model_id), mem_coeffs=mem)
        except Exception:  # noqa: BLE001 - the plain prediction stands
            return result
        if c.est_weights_bytes is None or c.est_kv_bytes is None or c.est_compute_bytes is None:
            return result
        extra = {
            "engine_weights_kv_bytes": str(c.est_weights_bytes + c.est_kv_bytes),
            "engine_compute_bytes": str(c.est_compute_bytes),
        }
        return {**row, **extra}, why


def _result(row: dict) -> tuple[dict | None, str]:
    return (None, row["error"]) if row.get("error") else (row, "")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _shown(path: str) -> str:
    """``path`` relative to the working folder when it lies inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path
