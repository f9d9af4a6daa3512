"""Measured runs to show beside the estimate: matching rows of ``results/runs/*.jsonl``.

The estimator must not import the harness, so this module reads the JSONL files with ``json`` and relies only
on the documented RunRecord keys (``harness/records.py``, schema_version 1 or 2: version 2 only added serving
fields, so the keys read here mean the same in both).  Lines it cannot read, rows of another schema version
and rows that are not ``status == "ok"`` are skipped (counted in ``skipped``): the report is still produced,
and the harness's own reader is the place that rejects bad files loudly.  Serving rows (TTFT / TPOT only, no
figure shown here) are not listed.

A row matches a report when its model (``model_id``, compared case-insensitively with the report's model id
and Hugging Face id), ``hardware_id`` and ``quant`` are the report's.  Depth-reduced proxy runs
(``n_layers_measured != n_layers_real``) measure a smaller model; they are not the model's speed and are left
out.  Rows are ranked by how close their workload is to the report's (engine, KV dtype, device count, depth).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 2  # harness.records.SCHEMA_VERSION; kept in step by tests/test_render_html.py
READ_VERSIONS = (1, 2)  # versions whose keys read here mean the same
_SHOWN = ("prefill_tok_s", "decode_tok_s", "device_total_bytes", "weights_bytes", "kv_bytes")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured point, with where it came from.  Units in names (tok/s, bytes)."""

    source: str  # "file.jsonl:line"; plus the record's own source (plan file or URL) in ``origin_source``
    origin: str  # measured | imported
    origin_source: str
    engine: str
    engine_version: str
    device_name: str
    n_devices: int
    kv_dtype: str
    n_prompt: int
    n_gen: int
    n_depth: int
    batch: int
    n_ctx: int
    timestamp_utc: str
    synthetic_weights: bool
    prefill_tok_s: float | None
    decode_tok_s: float | None
    device_total_bytes: int | None
    weights_bytes: int | None
    kv_bytes: int | None

    @property
    def test_label(self) -> str:
        """llama-bench style test name: ``pp512``, ``tg128``, ``pp512+tg128``, with ``@ d4096`` for depth."""
        parts = []
        if self.n_prompt:
            parts.append(f"pp{self.n_prompt}")
        if self.n_gen:
            parts.append(f"tg{self.n_gen}")
        label = "+".join(parts) or "load"
        return f"{label} @ d{self.n_depth}" if self.n_depth else label


@dataclass(frozen=True)
class MeasuredMatches:
    """Matching runs, best first, and how many rows were skipped while reading."""

    runs: tuple[MeasuredRun, ...]
    skipped: int
    files: int

    def best(self, phase: str) -> MeasuredRun | None:
        """The best-ranked run that has a figure for ``phase`` (``decode`` or ``prefill``)."""
        key = f"{phase}_tok_s"
        return next((r for r in self.runs if getattr(r, key) is not None), None)


def _norm(text: object) -> str:
    return str(text or "").strip().lower()


def iter_rows(results_dir: str | Path) -> Iterable[tuple[str, dict | None]]:
    """(``file:line``, row dict or None when unreadable) per non-empty line of ``results_dir/*.jsonl``."""
    root = Path(results_dir)
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.jsonl")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            yield f"{path.name}:0", None
            continue
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                row = None
            yield f"{path.name}:{lineno}", row if isinstance(row, dict) else None


def _to_run(where: str, row: dict) -> MeasuredRun:
    def num(key: str) -> float | None:
        v = row.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else None

    def integer(key: str) -> int | None:
        v = row.get(key)
        return int(v) if isinstance(v, int) and not isinstance(v, bool) else None

    return MeasuredRun(
        source=where,
        origin=str(row.get("origin", "")),
        origin_source=str(row.get("source", "")),
        engine=str(row.get("engine", "")),
        engine_version=str(row.get("engine_version", "")),
        device_name=str(row.get("device_name", "")),
        n_devices=int(row.get("n_devices") or 1),
        kv_dtype=str(row.get("kv_dtype", "")),
        n_prompt=int(row.get("n_prompt") or 0),
        n_gen=int(row.get("n_gen") or 0),
        n_depth=int(row.get("n_depth") or 0),
        batch=int(row.get("batch") or 1),
        n_ctx=int(row.get("n_ctx") or 0),
        timestamp_utc=str(row.get("timestamp_utc", "")),
        synthetic_weights=bool(row.get("synthetic_weights")),
        prefill_tok_s=num("prefill_tok_s"),
        decode_tok_s=num("decode_tok_s"),
        device_total_bytes=integer("device_total_bytes"),
        weights_bytes=integer("weights_bytes"),
        kv_bytes=integer("kv_bytes"),
    )


def find_measured(
    results_dir: str | Path,
    model_ids: Iterable[str],
    hardware_id: str,
    quant: str,
    engine: str = "llama.cpp",
    kv_dtype: str = "f16",
    n_devices: int = 1,
) -> MeasuredMatches:
    """Measured runs of (model, hardware, quant) under ``results_dir``, closest workload first.

    ``model_ids``: every name of the model (catalog id, Hugging Face id).  Ranking key: same engine, same KV
    dtype, same device count, single sequence, smallest depth, newest.
    """
    names = {_norm(m) for m in model_ids if m}
    hw, q = _norm(hardware_id), _norm(quant)
    found: list[MeasuredRun] = []
    skipped = 0
    files = len(list(Path(results_dir).glob("*.jsonl"))) if Path(results_dir).is_dir() else 0
    for where, row in iter_rows(results_dir):
        if row is None or row.get("schema_version") not in READ_VERSIONS or row.get("status") != "ok":
            skipped += 1
            continue
        if _norm(row.get("model_id")) not in names or _norm(row.get("hardware_id")) != hw:
            continue
        if _norm(row.get("quant")) != q:
            continue
        real, measured = row.get("n_layers_real"), row.get("n_layers_measured")
        if isinstance(real, int) and isinstance(measured, int) and real != measured:
            continue  # depth-reduced proxy: not this model's speed
        if all(row.get(k) is None for k in _SHOWN):
            continue  # serving row: nothing this section shows
        found.append(_to_run(where, row))

    def rank(r: MeasuredRun) -> tuple:
        return (
            _norm(r.engine) != _norm(engine),
            _norm(r.kv_dtype) != _norm(kv_dtype),
            r.n_devices != n_devices,
            r.batch != 1,
            r.n_depth,
        )

    found.sort(key=lambda r: r.timestamp_utc, reverse=True)  # newest first among equals (stable sort below)
    found.sort(key=rank)
    return MeasuredMatches(tuple(found), skipped, files)
