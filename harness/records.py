"""The one record schema: a flat, frozen, versioned RunRecord per measured (or imported) point.

Written by the harness (own runs and imports), read by calibration and by the CI backtest.
Files are JSON Lines under results/runs/, append-only, one record per line, each line written whole
(``append_records`` writes to a temporary file and renames, so a killed writer never leaves half a line).

Readers reject unknown schema versions and missing keys; an older version is migrated by ``migrate``
(version 1 -> 2: ``migrate_v1_to_v2``, the serving fields added unstated).
Units live in the field names: *_bytes (bytes), *_tok_s (tokens per second), *_s (seconds).

Schema history:
  1  the first version (llama-bench style points: workload, memory, prefill / decode speed).
  2  serving at concurrency: request concurrency, parallel layout (TP / PP / EP / attention-DP / MoE-TP
     sizes), serving mode (agg | disagg), TTFT / TPOT / ITL means and medians / p99, end-to-end latency, total
     and output throughput (``SERVING_FIELDS``).  For a serving benchmark ``n_prompt`` / ``n_gen`` are the
     input / output lengths of each request (ISL / OSL) and ``batch`` the concurrency.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

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
    """Validate and build a RunRecord; ``where`` ("file:line") prefixes error messages."""
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
    if raw["status"] not in STATUSES:
        raise RecordError(f"{prefix}status {raw['status']!r} not in {STATUSES}")
    if raw["serving_mode"] not in SERVING_MODES:
        raise RecordError(f"{prefix}serving_mode {raw['serving_mode']!r} not in {SERVING_MODES}")
    data = dict(raw)
    if not isinstance(data.get("extra", {}), dict):
        raise RecordError(f"{prefix}extra is not a JSON object")
    for key in ("prefill_samples_tok_s", "decode_samples_tok_s"):
        samples = data.get(key) or ()
        if not isinstance(samples, list | tuple) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in samples
        ):
            raise RecordError(f"{prefix}{key} is not a list of numbers (tokens/s)")
        data[key] = tuple(samples)
    return RunRecord(**data)


def record_to_dict(rec: RunRecord) -> dict:
    """Plain JSON-ready dict (tuples become lists)."""
    out = asdict(rec)
    for key in ("prefill_samples_tok_s", "decode_samples_tok_s"):
        out[key] = list(out[key])
    return out


def read_records(path: str | Path) -> list[RunRecord]:
    """Read one JSONL file; a bad line raises RecordError naming file and line."""
    return list(iter_records(path))


def iter_records(path: str | Path) -> Iterator[RunRecord]:
    path = Path(path)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            yield record_from_dict(raw, f"{path}:{lineno}")


def append_records(path: str | Path, records: Iterable[RunRecord]) -> int:
    """Append records atomically: the new file content (old lines + new lines) is written to a temporary
    file in the same directory, fsynced and renamed over the target.  Returns the number appended.

    Writers of the same file are serialised by an exclusive lock on a sidecar ``.<name>.lock`` file, so two
    sweeps appending at once cannot lose each other's records (the read-copy-rename would otherwise race)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(record_to_dict(r), sort_keys=True) + "\n" for r in records]
    if not lines:
        return 0
    with _locked(path):
        return _append_locked(path, lines)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.parent / f".{path.name}.lock"
    with open(lock, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _append_locked(path: Path, lines: list[str]) -> int:
    old = path.read_bytes() if path.exists() else b""
    if old and not old.endswith(b"\n"):
        raise RecordError(f"{path}: last line is incomplete; refusing to append")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(old)
            fh.write("".join(lines).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(lines)
