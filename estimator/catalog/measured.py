"""Measured runs to show beside the estimate: matching rows of ``results/runs/*.jsonl``.

The estimator must not import the harness, so this module reads the JSONL files with ``json`` and relies only
on the documented RunRecord keys (``harness/records.py``, schema_version 1 or 2: version 2 only added serving
fields, so the keys read here mean the same in both).  Serving rows (TTFT / TPOT only, no figure shown here)
are not listed.

Reading never fails the report — the harness's own reader is the place that rejects bad files loudly — and
never trusts a row:

* files are opened without blocking and must be regular files (``estimator.catalog.files``): a FIFO or device
  named ``runs/x.jsonl`` is skipped, never waited on;
* lines are decoded one by one: a line that is not UTF-8, not JSON or not an object is skipped;
* every value read is checked (``row_problem``): text fields must be text, numbers finite and inside
  ``FIELD_RANGES`` — a copy of ``harness.records.FIELD_RANGES`` (the estimator cannot import the harness;
  ``tests/test_measured_runs.py`` keeps the two equal) —, counts and byte sizes whole; a row with one bad
  value (``decode_tok_s: "fast"``, a NaN, a list, ``inf``) is skipped whole;
* a row whose ``record_id`` was seen before is a duplicate: the first is kept.

Skipped lines and rows (other schema versions and ``status != "ok"`` included) are counted in ``skipped``,
duplicates in ``duplicates``.

A row matches a report when its model (``model_id``, compared case-insensitively with the report's model id
and Hugging Face id), ``hardware_id`` and ``quant`` are the report's.  Depth-reduced proxy runs
(``n_layers_measured != n_layers_real``) measure a smaller model; they are not the model's speed and are left
out.  Rows are ranked by how close their workload is to the report's (engine, KV dtype, device count, depth).
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from estimator.catalog.files import iter_lines
from estimator.specs import SpecError

SCHEMA_VERSION = 2  # harness.records.SCHEMA_VERSION; kept in step by tests/test_render_html.py
READ_VERSIONS = (1, 2)  # versions whose keys read here mean the same
_SHOWN = ("prefill_tok_s", "decode_tok_s", "device_total_bytes", "weights_bytes", "kv_bytes")
MAX_LINE_BYTES = 1 << 20  # a record is a few KB; a longer line is skipped unread

# A copy of harness.records.FIELD_RANGES (name pattern, lowest, highest; the first match decides), kept equal
# by tests/test_measured_runs.py.
MAX_BYTES = 2**50
MAX_TOK_S = 1e9
MAX_SECONDS = 1e7
MAX_COUNT = 2**40
FIELD_RANGES: tuple[tuple[str, float | None, float | None], ...] = (
    ("schema_version", 1, None),
    ("n_gpu_layers", -1, MAX_COUNT),
    ("*_bytes", 0, MAX_BYTES),
    ("*tok_s*", 0, MAX_TOK_S),
    ("*_s", 0, MAX_SECONDS),
    ("n_*", 0, MAX_COUNT),
    ("batch", 0, MAX_COUNT),
    ("*", 0, None),
)
# What this module reads from a row: text fields, number fields (None allowed), whole-number fields.
_TEXT = (
    "record_id", "origin", "source", "engine", "engine_version", "device_name", "kv_dtype", "timestamp_utc",
    "model_id", "hardware_id", "quant", "status",
)  # fmt: skip
_NUMBERS = (
    "schema_version", "n_devices", "n_prompt", "n_gen", "n_depth", "batch", "n_ctx", "n_layers_real",
    "n_layers_measured", "prefill_tok_s", "decode_tok_s", "device_total_bytes", "weights_bytes", "kv_bytes",
)  # fmt: skip
_WHOLE = tuple(n for n in _NUMBERS if not n.endswith("tok_s"))


def field_range(name: str) -> tuple[float | None, float | None]:
    """(lowest, highest) a number field may hold (None: unbounded), from FIELD_RANGES."""
    return next((lo, hi) for pattern, lo, hi in FIELD_RANGES if fnmatch.fnmatchcase(name, pattern))


def row_problem(row: dict) -> str:
    """Why a row cannot be shown ("" when it can): a text field that is not text, a number that is not a
    finite number inside its range, a count that is not whole, a flag that is not true / false."""
    for key in _TEXT:
        if row.get(key) is not None and not isinstance(row[key], str):
            return f"{key}={row[key]!r:.40} is not text"
    for key in _NUMBERS:
        v = row.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return f"{key}={v!r:.40} is not a finite number"
        if key in _WHOLE and not isinstance(v, int):
            return f"{key}={v!r:.40} is not an integer"
        lo, hi = field_range(key)
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return f"{key}={v!r:.40} is outside [{lo}, {hi}]"
    if row.get("synthetic_weights") is not None and not isinstance(row["synthetic_weights"], bool):
        return f"synthetic_weights={row['synthetic_weights']!r:.40} is not true or false"
    return ""


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
    """Matching runs, best first; how many lines or rows were skipped while reading (unreadable, invalid,
    another schema, not ok, a file that is not a regular file) and how many duplicates were dropped."""

    runs: tuple[MeasuredRun, ...]
    skipped: int
    files: int
    duplicates: int = 0

    def best(self, phase: str) -> MeasuredRun | None:
        """The best-ranked run that has a figure for ``phase`` (``decode`` or ``prefill``)."""
        key = f"{phase}_tok_s"
        return next((r for r in self.runs if getattr(r, key) is not None), None)


def _norm(text: object) -> str:
    return str(text or "").strip().lower()


def _decode(line: bytes) -> dict | None:
    try:
        row = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def iter_rows(results_dir: str | Path) -> Iterator[tuple[str, dict | None]]:
    """(``file:line``, row dict or None when unusable) per non-empty line of ``results_dir/*.jsonl``; a file
    that is not a regular file or cannot be opened is one ``(file:0, None)``."""
    root = Path(results_dir)
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.jsonl")):
        if path.name.startswith("."):
            continue  # an append's temporary
        try:
            for lineno, line in iter_lines(path, MAX_LINE_BYTES):
                if line is None:
                    yield f"{path.name}:{lineno}", None
                elif line.strip():
                    row = _decode(line)
                    yield f"{path.name}:{lineno}", row if row is None or not row_problem(row) else None
        except SpecError:  # not a regular file (a FIFO, a device), or unreadable
            yield f"{path.name}:0", None


def _to_run(where: str, row: dict) -> MeasuredRun:
    """A MeasuredRun of a row that passed ``row_problem`` (numbers finite, in range, whole where counted)."""

    def num(key: str) -> float | None:
        v = row.get(key)
        return float(v) if v is not None and v > 0 else None

    def integer(key: str) -> int | None:
        v = row.get(key)
        return None if v is None else int(v)

    def count(key: str, default: int) -> int:
        v = row.get(key)
        return int(v) if v else default

    return MeasuredRun(
        source=where,
        origin=str(row.get("origin") or ""),
        origin_source=str(row.get("source") or ""),
        engine=str(row.get("engine") or ""),
        engine_version=str(row.get("engine_version") or ""),
        device_name=str(row.get("device_name") or ""),
        n_devices=count("n_devices", 1),
        kv_dtype=str(row.get("kv_dtype") or ""),
        n_prompt=count("n_prompt", 0),
        n_gen=count("n_gen", 0),
        n_depth=count("n_depth", 0),
        batch=count("batch", 1),
        n_ctx=count("n_ctx", 0),
        timestamp_utc=str(row.get("timestamp_utc") or ""),
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
    skipped = duplicates = 0
    seen: set[str] = set()
    files = len(list(Path(results_dir).glob("*.jsonl"))) if Path(results_dir).is_dir() else 0
    for where, row in iter_rows(results_dir):
        if row is None or row.get("schema_version") not in READ_VERSIONS or row.get("status") != "ok":
            skipped += 1
            continue
        rid = row.get("record_id")
        if rid:
            if rid in seen:
                duplicates += 1
                continue
            seen.add(rid)
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
    return MeasuredMatches(tuple(found), skipped, files, duplicates)
