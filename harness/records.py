"""The one record schema: a flat, frozen, versioned RunRecord per measured (or imported) point.

Written by the harness (own runs and imports), read by calibration and by the CI backtest.
Files are JSON Lines under results/runs/, append-only, one record per line, each line written whole
(``append_records`` writes old + new content to a temporary file and renames it over the target, through
``harness.safe_files``: a killed writer never leaves half a line, a device or FIFO at the target is refused).

Readers reject unknown schema versions and missing keys; an older version is migrated by ``migrate``
(version 1 -> 2: ``migrate_v1_to_v2``, the serving fields added unstated).  Every record is validated on read
and before it is written (``record_from_dict``): each field of its annotated type, numbers finite and within
the range its unit allows (FIELD_RANGES), enumerations and the timestamp.  ``scan_records`` reads a file line
by line (a non-UTF-8 byte, bad JSON or an invalid record is an error line naming FILE:LINE, and reading goes
on); ``Deduplicator`` drops exact duplicates by ``record_id``.
Units live in the field names: *_bytes (bytes), *_tok_s (tokens per second), *_s (seconds).

Schema history:
  1  the first version (llama-bench style points: workload, memory, prefill / decode speed).
  2  serving at concurrency: request concurrency, parallel layout (TP / PP / EP / attention-DP / MoE-TP
     sizes), serving mode (agg | disagg), TTFT / TPOT / ITL means and medians / p99, end-to-end latency, total
     and output throughput (``SERVING_FIELDS``).  For a serving benchmark ``n_prompt`` / ``n_gen`` are the
     input / output lengths of each request (ISL / OSL) and ``batch`` the concurrency.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import get_args, get_origin, get_type_hints

from harness.locks import exclusive
from harness.safe_files import (
    atomic_write,
    read_or_raise,
    read_regular_bytes,
    remove_stale_temps,
    write_target,
)

SCHEMA_VERSION = 2

STATUSES = ("ok", "failed", "skipped")
SERVING_MODES = ("", "agg", "disagg")


class RecordError(ValueError):
    """A record that does not match the schema; the message names the file, line and key."""


@dataclass(frozen=True)
class RunRecord:
    """One measured point.  Flat on purpose (one row of a table); lists hold raw samples only."""

    # --- identity & provenance --------------------------------------------------------------------
    record_id: str  # stable hash of the point spec + host + engine version (see harness.store.point_key)
    schema_version: int
    timestamp_utc: str  # ISO-8601, e.g. "2026-11-29T17:00:00Z"
    origin: str  # "measured" (a fitbench run) | "imported" (published / foreign tool output)
    source: str  # plan file for own runs; source URL or file for imports
    fitbench_git_sha: str
    host: str
    engine: str  # "llama.cpp" | "vllm" | "trtllm" | "mlx" | "other"
    engine_version: str
    build_info: str  # e.g. llama.cpp commit, vLLM wheel name, CUDA version
    backend: str  # CPU | CUDA | Metal | ROCm | Vulkan | ...
    device_name: str
    hardware_id: str  # catalog id, or "" when no catalog entry matches
    hardware_family: str  # calibration group, e.g. "nvidia-hopper", "cpu-x86-avx512"
    n_devices: int
    driver: str
    model_id: str  # catalog id / hf id / path
    model_fingerprint: str  # hash of the architecture facts that matter for sizing
    n_layers_real: int  # layers of the real model
    n_layers_measured: int  # layers actually built and run (depth-reduced proxy when smaller)
    quant: str
    synthetic_weights: bool
    # --- workload ---------------------------------------------------------------------------------
    n_prompt: int
    n_gen: int
    n_depth: int
    batch: int  # concurrent sequences
    n_ctx: int
    kv_dtype: str
    flash_attn: bool | None
    n_threads: int | None
    n_batch: int | None
    n_ubatch: int | None
    n_gpu_layers: int | None
    # --- measurement ------------------------------------------------------------------------------
    status: str  # ok | failed | skipped
    error: str = ""
    weights_bytes: int | None = None  # engine's own count of model tensor bytes (all devices)
    kv_bytes: int | None = None  # KV cache + recurrent state buffers allocated
    compute_bytes: int | None = None  # engine compute / activation buffers
    output_bytes: int | None = None  # logits / output buffer (llama.cpp)
    device_total_bytes: int | None = None  # peak device memory used by the run (NVML delta on GPU)
    host_rss_bytes: int | None = None  # peak resident set of the process tree
    prefill_tok_s: float | None = None  # mean over repetitions
    prefill_tok_s_std: float | None = None
    prefill_samples_tok_s: tuple[float, ...] = ()
    decode_tok_s: float | None = None
    decode_tok_s_std: float | None = None
    decode_samples_tok_s: tuple[float, ...] = ()
    ttft_s: float | None = None  # mean time to first token (serving: under load, queueing included)
    extra: dict = field(default_factory=dict)  # engine-specific numbers (vLLM KV tokens, CUDA graphs, ...)
    # --- serving at concurrency (schema 2; None = not stated / not a serving benchmark) ------------------
    concurrency: int | None = None  # requests the benchmark client keeps in flight (max-concurrency)
    serving_mode: str = ""  # "" not a serving benchmark | "agg" one engine serves both phases | "disagg"
    tp_size: int | None = None  # tensor-parallel size (attention; the whole model when no MoE split)
    pp_size: int | None = None  # pipeline-parallel size
    ep_size: int | None = None  # MoE expert-parallel size
    dp_size: int | None = None  # attention data-parallel size
    moe_tp_size: int | None = None  # tensor-parallel size inside each MoE expert
    tpot_s: float | None = None  # mean time per output token after the first, per request
    itl_s: float | None = None  # mean inter-token latency
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    tpot_p50_s: float | None = None
    tpot_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    e2e_latency_s: float | None = None  # wall time of a whole request (or of an offline batch run)
    total_tok_s: float | None = None  # (input + output) tokens of all requests / wall time
    output_tok_s: float | None = None  # output tokens of all requests / wall time


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
# Version 1 required the fields without a default; version 2 records are written whole: every key required.
_REQUIRED_V1: tuple[str, ...] = tuple(
    f.name for f in fields(RunRecord) if f.default is MISSING and f.default_factory is MISSING
)
_REQUIRED = FIELD_NAMES
# Fields added by schema 2, with the value a version-1 record gets (= not stated).
SERVING_FIELDS: tuple[str, ...] = (
    "concurrency", "serving_mode", "tp_size", "pp_size", "ep_size", "dp_size", "moe_tp_size", "tpot_s",
    "itl_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_p50_s", "itl_p99_s",
    "e2e_latency_s", "total_tok_s", "output_tok_s",
)  # fmt: skip
_V2_DEFAULTS: dict[str, object] = {f.name: f.default for f in fields(RunRecord) if f.name in SERVING_FIELDS}


def with_defaults(row: dict) -> dict:
    """``row`` completed with the default of every field it leaves out (for writers that build a record from
    the fields they know, e.g. importers); the reader itself never fills keys of a current-version record."""
    out: dict = {f.name: f.default for f in fields(RunRecord) if f.default is not MISSING}
    out.update(extra={}, prefill_samples_tok_s=[], decode_samples_tok_s=[])
    out.update(row)
    return out


def migrate_v1_to_v2(raw: dict) -> dict:
    """A version-1 record as version 2: the serving fields are added as not stated (None, serving_mode "").

    Version 1 required only the fields without a default: those must be present, the defaulted ones are
    filled.  A version-1 row that already holds a serving key with a stated value is rejected (version 1 had
    no such key, so the row is not what it says it is).  Nothing else changes (``ttft_s`` was mean TTFT).
    """
    missing = [k for k in _REQUIRED_V1 if k not in raw]
    if missing:
        raise RecordError(f"missing key(s): {', '.join(missing)}")
    stated = [k for k in SERVING_FIELDS if raw.get(k, _V2_DEFAULTS[k]) != _V2_DEFAULTS[k]]
    if stated:
        raise RecordError(f"schema_version 1 record carries version-2 field(s): {', '.join(stated)}")
    out = with_defaults(raw)
    out.update(_V2_DEFAULTS)
    out["schema_version"] = 2
    return out

# --- validation on read (and before every write) ---------------------------------------------------------
# Driven by the schema itself: each field's *type* comes from its annotation (str, int, float, bool, dict,
# tuple[float, ...], optionally "| None"); each numeric field's *range* comes from FIELD_RANGES (the first
# pattern matching its name, so the unit in the name decides: *_bytes, *tok_s*, *_s, n_*), or from a
# ``field(metadata={"range": (lo, hi)})`` on the field, which wins.  A field added to RunRecord is validated
# by the same code without a line here.  Floats must be finite everywhere (``extra`` included).
MAX_BYTES = 2**50  # 1 PiB: no single measured point holds more (bytes)
MAX_TOK_S = 1e9  # tokens per second
MAX_SECONDS = 1e7  # about 116 days (seconds)
MAX_COUNT = 2**40  # tokens, layers, devices, threads, sequences
FIELD_RANGES: tuple[tuple[str, float | None, float | None], ...] = (
    ("schema_version", 1, None),
    ("n_gpu_layers", -1, MAX_COUNT),  # -1 = every layer (llama-cpp-python's convention)
    ("*_bytes", 0, MAX_BYTES),
    ("*tok_s*", 0, MAX_TOK_S),  # *_tok_s, *_tok_s_std, *_samples_tok_s
    ("*_s", 0, MAX_SECONDS),
    ("n_*", 0, MAX_COUNT),
    ("batch", 0, MAX_COUNT),
    ("*", 0, None),  # any other number: nothing in a record is negative
)
ORIGINS = ("measured", "imported")
FIELD_CHOICES: dict[str, tuple[str, ...]] = {
    "status": STATUSES,
    "origin": ORIGINS,
    "serving_mode": SERVING_MODES,
}


def parse_timestamp(text: str) -> datetime:
    """An ISO-8601 date-time with a time zone ("2026-01-01T00:00:00Z", "...+00:00"); ValueError otherwise."""
    if not isinstance(text, str) or "T" not in text:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time (e.g. 2026-01-01T00:00:00Z)")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time (e.g. 2026-01-01T00:00:00Z)") from None
    if when.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (write it in UTC, e.g. 2026-01-01T00:00:00Z)")
    return when


FIELD_CHECKS: dict[str, Callable[[str], object]] = {"timestamp_utc": parse_timestamp}


@dataclass(frozen=True)
class _FieldRule:
    name: str
    base: type  # str | int | float | bool | dict | tuple | list
    optional: bool
    lo: float | None
    hi: float | None
    item: type | None = None  # element type of a tuple / list field (tuple[float, ...] -> float)


_BASES = (str, int, float, bool, dict, tuple, list)


def field_rules(cls: type = RunRecord) -> dict[str, _FieldRule]:
    """One rule per field of the record dataclass ``cls``, from its annotation, FIELD_RANGES and its
    metadata.  TypeError for an annotation the validator does not know (caught at import, not on a read)."""
    hints = get_type_hints(cls)
    rules = {}
    for f in fields(cls):
        hint = hints[f.name]
        args = get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        kinds = [a for a in args if a is not type(None)]
        base = (get_origin(kinds[0]) or kinds[0]) if len(kinds) == 1 else None
        if base not in _BASES:
            raise TypeError(f"{cls.__name__}.{f.name}: annotation {hint} is not one the validator knows")
        item = None
        if base in (tuple, list):
            item = next((a for a in get_args(kinds[0]) if a is not Ellipsis), object)
        lo, hi = f.metadata.get("range") or next(
            (lo, hi) for pat, lo, hi in FIELD_RANGES if fnmatch.fnmatchcase(f.name, pat)
        )
        rules[f.name] = _FieldRule(f.name, base, type(None) in args, lo, hi, item)
    return rules


_RULES = field_rules()
_SEQUENCES = tuple(name for name, rule in _RULES.items() if rule.base in (tuple, list))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _range_problem(rule: _FieldRule, value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    if rule.lo is not None and value < rule.lo:
        return f"is below {rule.lo:g}" if rule.lo else "is negative"
    if rule.hi is not None and value > rule.hi:
        return f"is above {rule.hi:g}, not a possible value"
    return ""


def _scalar_problem(base: type, value: object) -> str:
    """Type problem of one scalar value ("" when it is of type ``base``; ints are fine for floats)."""
    if base is str:
        return "" if isinstance(value, str) else "is not a string"
    if base is bool:
        return "" if isinstance(value, bool) else "is not true or false"
    if base is int:
        return "" if isinstance(value, int) and not isinstance(value, bool) else "is not an integer"
    if base is float:
        return "" if _is_number(value) else "is not a finite number"
    return ""


def check_value(rule: _FieldRule, value: object) -> tuple[str, object]:
    """(problem or "", value to store) for one field under its rule (``field_rules``)."""
    kind = type(value)
    if kind is str and rule.base is str:  # fast paths for the common cases (a 100k-row import checks 4M)
        return "", value
    if (kind is int and rule.base is int) or (kind is float and rule.base is float):
        return _range_problem(rule, value), value
    if value is None:
        return ("" if rule.optional else "is null"), value
    if rule.base is dict:
        if not isinstance(value, dict):
            return "is not a JSON object", value
        try:
            json.dumps(value, allow_nan=False)  # C speed; the walk below only runs to name the place
        except ValueError:
            return f"holds a number that is not finite at {_non_finite_path(value)}", value
        except TypeError:
            return "holds a value that is not JSON", value
        return "", value
    if rule.base in (tuple, list):
        numeric = rule.item in (int, float)
        if not isinstance(value, list | tuple) or any(_scalar_problem(rule.item, x) for x in value):
            return ("is not a list of numbers" if numeric else "is not a list"), value
        for x in value if numeric else ():
            if problem := _range_problem(rule, x):
                return f"holds an impossible sample {_show(x)} ({problem})", value
        return "", rule.base(value)
    problem = _scalar_problem(rule.base, value)
    if problem or not _is_number(value):
        return problem, value
    return _range_problem(rule, value), value


def _non_finite_path(obj: object, path: str = "") -> str:
    """Where a non-finite float hides in a JSON value ("" when none)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return path or "."
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    else:
        return ""
    for key, val in items:
        found = _non_finite_path(val, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")
        if found:
            return found
    return ""


def migrate(raw: dict) -> dict:
    """A raw record of an older schema version brought to SCHEMA_VERSION; unknown versions are rejected."""
    version = raw.get("schema_version")
    if version == SCHEMA_VERSION:
        return raw
    if version == 1 and not isinstance(version, bool):
        return migrate_v1_to_v2(raw)
    raise RecordError(
        f"unknown schema_version {version!r} (this fitbench reads versions 1 and {SCHEMA_VERSION})"
    )


def record_from_dict(raw: dict, where: str = "") -> RunRecord:
    """Validate and build a RunRecord; ``where`` ("file:line") prefixes error messages.

    Checks: a JSON object of a known schema version (older ones migrated), no missing or unknown key, every
    field of its annotated type, every number finite and within its range (FIELD_RANGES), the enumerated
    fields (FIELD_CHOICES) and the timestamp (FIELD_CHECKS).  The first problem raises RecordError."""
    prefix = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        raise RecordError(f"{prefix}record is not a JSON object")
    try:
        raw = migrate(raw)
    except RecordError as exc:
        raise RecordError(f"{prefix}{exc}") from None
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise RecordError(f"{prefix}missing key(s): {', '.join(missing)}")
    unknown = sorted(set(raw) - set(FIELD_NAMES))
    if unknown:
        raise RecordError(f"{prefix}unknown key(s): {', '.join(unknown)}")
    data = {}
    for name, value in raw.items():
        rule = _RULES[name]
        problem, data[name] = check_value(rule, value)
        if problem:
            shown = name if rule.base in (dict, tuple, list) else f"{name}={_show(value)}"
            raise RecordError(f"{prefix}{shown} {problem}")
        if name in FIELD_CHOICES and value not in FIELD_CHOICES[name]:
            raise RecordError(f"{prefix}{name} {_show(value)} not in {FIELD_CHOICES[name]}")
        if name in FIELD_CHECKS:
            try:
                FIELD_CHECKS[name](value)
            except ValueError as exc:
                raise RecordError(f"{prefix}{name}: {exc}") from None
    rec = RunRecord(**data)
    _VALIDATED[id(rec)] = rec
    return rec


# Records built by record_from_dict (valid by construction), so check_record does not validate them twice.
# Weak values: an entry goes with its record, so a reused id() never vouches for another object.
_VALIDATED: weakref.WeakValueDictionary[int, RunRecord] = weakref.WeakValueDictionary()


def check_record(rec: RunRecord, where: str = "") -> RunRecord:
    """Validate a record built in code (what ``record_from_dict`` checks on read); returns it unchanged."""
    if _VALIDATED.get(id(rec)) is not rec:
        record_from_dict(record_to_dict(rec), where)
    return rec


def record_to_dict(rec: RunRecord) -> dict:
    """Plain JSON-ready dict (tuples become lists).  Shallow: ``extra`` is the record's own dict, not a copy
    (``dataclasses.asdict`` deep-copied every imported source row and dominated a 100k-row import)."""
    out = {name: getattr(rec, name) for name in FIELD_NAMES}
    for name in _SEQUENCES:
        out[name] = list(out[name])
    return out


@dataclass(frozen=True)
class RecordLine:
    """One non-empty line of a records file: its record, or why it is not one (``error``, without the
    FILE:LINE prefix, which ``message`` adds)."""

    path: str
    line: int
    record: RunRecord | None = None
    error: str = ""
    record_id: str = ""  # the line's record_id when it could be read, even from a bad record

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def message(self) -> str:
        return f"{self.where}: {self.error}"


def scan_records(path: str | Path) -> Iterator[RecordLine]:
    """Every non-empty line of one JSONL file as a RecordLine; a bad line (not UTF-8, not JSON, not a valid
    record) is a RecordLine with an error and reading goes on.  RecordError when the file itself cannot be
    read (missing, unreadable, or not a regular file: a FIFO or device is never read)."""
    data = read_or_raise(path, RecordError)
    for lineno, raw_line in enumerate(data.split(b"\n"), 1):
        if not raw_line.strip():
            continue
        try:
            text = raw_line.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw_line[exc.start]
            yield RecordLine(
                str(path), lineno, error=f"not UTF-8 text (byte 0x{bad:02x} at column {exc.start + 1})"
            )
            continue
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            yield RecordLine(str(path), lineno, error=f"not valid JSON ({exc.msg})")
            continue
        rid = raw.get("record_id", "") if isinstance(raw, dict) else ""
        rid = rid if isinstance(rid, str) else ""
        try:
            rec = record_from_dict(raw)
        except RecordError as exc:
            yield RecordLine(str(path), lineno, error=str(exc), record_id=rid)
            continue
        yield RecordLine(str(path), lineno, rec, record_id=rec.record_id)


class Deduplicator:
    """Drops exact duplicates by ``record_id`` across everything it sees: a later line with the id and the
    content of an earlier one is dropped (noted in ``duplicates`` as (where, first where, record_id)); a later
    line with
    the id but *other* content becomes an error line (two rows claim one identity; the first one is kept)."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[str, str]] = {}  # record_id -> (where, sha256 of the canonical record)
        self.duplicates: list[tuple[str, str, str]] = []

    def __call__(self, lines: Iterable[RecordLine]) -> Iterator[RecordLine]:
        for ln in lines:
            if ln.record is None:
                yield ln
                continue
            canon = json.dumps(record_to_dict(ln.record), sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(canon.encode("utf-8")).hexdigest()
            seen = self.first.get(ln.record_id)
            if seen is None:
                self.first[ln.record_id] = (ln.where, digest)
                yield ln
            elif seen[1] == digest:
                self.duplicates.append((ln.where, seen[0], ln.record_id))
            else:
                yield RecordLine(
                    ln.path, ln.line, None,
                    f"record_id {ln.record_id} is also at {seen[0]} with different content", ln.record_id,
                )  # fmt: skip


def read_records(path: str | Path) -> list[RunRecord]:
    """Read one JSONL file; a bad line raises RecordError naming file and line."""
    return list(iter_records(path))


def iter_records(path: str | Path) -> Iterator[RunRecord]:
    """The records of one file in order; the first bad line raises RecordError naming FILE:LINE."""
    for ln in scan_records(path):
        if ln.record is None:
            raise RecordError(ln.message)
        yield ln.record


def append_records(path: str | Path, records: Iterable[RunRecord], skip_existing: bool = False) -> int:
    """Append records atomically: the new file content (old lines + new lines) is written to a temporary
    file in the same folder, fsynced and renamed over the target (``harness.safe_files.atomic_write``).
    Returns the number appended; with ``skip_existing`` a record whose record_id is already in the file is
    left out (checked under the lock, so two importers of one file cannot both add it).

    A symlinked target is written through (the file it resolves to is updated); a target that exists and is
    not a regular file is refused (``FileRefused``) and never read.  Every record is validated first
    (``check_record``), so nothing a reader would reject is written.  Writers of one file are serialised by an
    exclusive lock (``harness.locks.exclusive``), so two processes appending at once cannot lose each other's
    records (the read-copy-rename would otherwise race)."""
    records = [check_record(r) for r in records]
    if not records:
        return 0
    real = write_target(path)
    real.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(real):
        remove_stale_temps(real.parent)
        old = read_regular_bytes(real) if real.exists() else b""
        if old and not old.endswith(b"\n"):
            raise RecordError(f"{path}: last line is incomplete; refusing to append")
        if skip_existing and old:
            have = {r.record_id for r in iter_records(real)}
            records = [r for r in records if r.record_id not in have]
        if records:
            lines = "".join(json.dumps(record_to_dict(r), sort_keys=True) + "\n" for r in records)
            atomic_write(real, old + lines.encode("utf-8"))
    return len(records)
