"""RunRecords on disk -> one clean table for calibration.

Every JSONL file under ``<results>/runs/`` is read line by line (``harness.records.scan_records``: each record
validated for types, finite numbers and ranges).  Exact duplicate records (same record_id and content) are
counted once, the repeats reported; so is a serving benchmark its source published twice (``Republished``:
another record_id, the same source, configuration and figures: aiconfigurator's silicon table carries
2026-03-25 rows again in its 2026-04-06 drop, a vLLM recipe gives one run in its summary table and in its full
output).  A line that is not a valid RunRecord, and an ``ok`` record carrying missing or impossible values
(negative or zero speed, zero memory, a speed for a phase the workload did not run, ...), is *reported* with
its file and line and left out; nothing is zero-filled.

Quality filter: own measurements are ``ok``; imported records carry the published quality flag in
``extra["quality"]`` (ok | legacy | rounded | suspect | aggregate).  Only ``ok`` rows are used unless a
caller opts in to more flags (and then says so: the flags used are written into coefficients.json).

The input hash is sha256 over the canonical JSON (sorted keys, compact separators, one record per line,
lines sorted) of exactly the records that pass: status ``ok``, valid, quality allowed (speed and memory
records and the serving / latency ones, which the serving fit and the -b 1 decode points use).  A change to
any of them, an added or a removed one, changes the hash, which is how ``python -m calibration check``
detects a stale coefficients.json.

Units: *_bytes bytes, *_tok_s tokens per second.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pandas as pd

from estimator.catalog.detect import host_device_key
from harness.records import Deduplicator, RecordError, RunRecord, record_to_dict, scan_records

DEFAULT_QUALITIES: tuple[str, ...] = ("ok",)
KNOWN_QUALITIES: tuple[str, ...] = (
    "ok", "legacy", "rounded", "suspect", "aggregate", "approximate", "warmup"
)  # fmt: skip
# A published timing its source says includes warm-up (the first row of a llama-batched-bench table, whose
# first pass also pays one-off costs such as loading or compiling kernels) is not a steady-state speed: such
# an "ok" row gets the derived flag ``warmup`` (record_quality), not fitted by default.
WARMUP_QUALITY = "warmup"
QUALITY_NOTES = {
    WARMUP_QUALITY: "derived: the source says these timings include warm-up, not a steady-state speed"
}
_WARMUP_NOTE = re.compile(r"\bincludes?\s+warm-?up", re.I)
# Measurements of serving at concurrency / offline batches (RunRecord schema 2).  A record that carries only
# these is not a speed or memory point: it is counted under SERVING_REASON and kept in
# ``Dataset.serving_records`` for the serving fit (calibration.serving) and the end-to-end latency check
# (calibration.latency), which list the records they cannot use with their reason.
SERVING_MEASUREMENTS = ("ttft_s", "tpot_s", "itl_s", "e2e_latency_s", "total_tok_s", "output_tok_s")
SERVING_REASON = "serving / batch latency only (TTFT, TPOT, ITL, e2e, throughput): the serving fit"

# Memory fields that must be > 0 when present on an ok record (zero memory is impossible).
_POSITIVE_MEMORY = ("weights_bytes", "kv_bytes", "compute_bytes", "device_total_bytes", "host_rss_bytes")
_NONNEG_MEMORY = ("output_bytes",)
_MEASUREMENTS = ("prefill_tok_s", "decode_tok_s") + _POSITIVE_MEMORY + _NONNEG_MEMORY


@dataclass(frozen=True)
class Rejection:
    """A line or record left out, with where it came from and why."""

    file: str
    line: int
    record_id: str
    reason: str

    def __str__(self) -> str:
        rid = f" [{self.record_id}]" if self.record_id else ""
        return f"{self.file}:{self.line}{rid}: {self.reason}"


@dataclass(frozen=True)
class LoadedRecord:
    record: RunRecord
    file: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Dataset:
    """The clean records (``records``), their table (``table``), and what was left out and why."""

    records: list[LoadedRecord]
    table: pd.DataFrame
    rejected: list[Rejection] = field(default_factory=list)
    excluded_status: dict[str, int] = field(default_factory=dict)  # failed/skipped counts (not errors)
    excluded_quality: dict[str, int] = field(default_factory=dict)  # quality flag -> count left out
    excluded_kind: dict[str, int] = field(default_factory=dict)  # reason -> count of records left out by kind
    qualities: tuple[str, ...] = DEFAULT_QUALITIES
    input_hash: str = ""
    # ok serving / batch-latency-only records of an allowed quality: the serving fit's points
    # (calibration.serving), the end-to-end latency check (calibration.latency) and the -b 1 runs fitted as
    # decode points (calibration.features.one_token_run_point); part of input_hash
    serving_records: list[LoadedRecord] = field(default_factory=list)
    # ok records whose quality flag the fit does not use (e.g. "approximate"): not fitted, kept as
    # out-of-sample evidence (calibration.maturity.evidence)
    set_aside: list[LoadedRecord] = field(default_factory=list)


# End-to-end latency runs (calibration.latency): llama-bench -pg (prompt + generate of one sequence) and vLLM
# offline batches, told apart from serving at concurrency by their build_info.
E2E_BUILDS = (re.compile(r"llama-bench -pg"), re.compile(r"offline .*batch latency", re.I))
_N_BATCH = re.compile(r"^\s*n_batch\s+(\d+)\s*$")


def is_e2e(rec: RunRecord) -> bool:
    """True for an end-to-end latency run (``E2E_BUILDS``) with its latency."""
    return rec.e2e_latency_s is not None and any(p.search(rec.build_info or "") for p in E2E_BUILDS)


def stated_n_batch(rec: RunRecord) -> int | None:
    """The run's n_batch: the record's, else llama-bench -b from the published ``batch_raw`` ("n_batch N")."""
    if rec.n_batch:
        return int(rec.n_batch)
    pub = rec.extra.get("published", {}) if isinstance(rec.extra, dict) else {}
    m = _N_BATCH.match(str(pub.get("batch_raw", "")))
    return int(m.group(1)) if m else None


def record_quality(rec: RunRecord) -> str:
    """Quality flag of a record: ``extra["quality"]`` for imports, ``ok`` for own measurements; an imported
    ``ok`` row whose notes say its timing includes warm-up is ``warmup`` (``WARMUP_QUALITY``)."""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    q = str(extra.get("quality") or "ok")
    if q == "ok" and _WARMUP_NOTE.search(str(extra.get("notes") or "")):
        return WARMUP_QUALITY
    return q


def is_serving_only(rec: RunRecord) -> bool:
    """True when the record measures serving / batch latency and no prefill or decode speed.  Memory figures
    do not count: a serve test of our runners repeats its point's memory, which the point's pp / tg records
    carry (and the memory fit reads) already."""
    return rec.prefill_tok_s is None and rec.decode_tok_s is None and any(
        getattr(rec, n) is not None for n in SERVING_MEASUREMENTS
    )


def validate_record(rec: RunRecord) -> list[str]:
    """Reasons why an ``ok`` record cannot be used (empty list: usable)."""
    problems: list[str] = []
    for name in ("n_prompt", "n_gen", "n_depth", "n_ctx"):
        v = getattr(rec, name)
        if not isinstance(v, int) or v < 0:
            problems.append(f"{name}={v!r} is not a non-negative integer")
    for name in ("n_devices", "n_layers_real", "n_layers_measured"):
        v = getattr(rec, name)
        if not isinstance(v, int) or v < 1:
            problems.append(f"{name}={v!r} must be an integer >= 1")
    has_speed = rec.decode_tok_s is not None or rec.prefill_tok_s is not None
    # batch 0 means "not stated" on imported memory-only rows; a speed needs the number of sequences.
    if not isinstance(rec.batch, int) or rec.batch < 0 or (has_speed and rec.batch < 1):
        problems.append(f"batch={rec.batch!r} must be >= 1 for a speed measurement")
    if (
        isinstance(rec.n_layers_measured, int)
        and isinstance(rec.n_layers_real, int)
        and rec.n_layers_measured > rec.n_layers_real
    ):
        problems.append(f"n_layers_measured={rec.n_layers_measured} > n_layers_real={rec.n_layers_real}")
    if not rec.model_id:
        problems.append("model_id is empty")
    if not rec.hardware_id and not rec.hardware_family:
        problems.append("neither hardware_id nor hardware_family is set")
    speeds = ("prefill_tok_s", "decode_tok_s", "prefill_tok_s_std", "decode_tok_s_std")
    for name in (*speeds, *SERVING_MEASUREMENTS):
        v = getattr(rec, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            problems.append(f"{name}={v!r} is not a finite number")
        elif name.endswith("_std") and v < 0:
            problems.append(f"{name}={v!r} is negative")
        elif not name.endswith("_std") and v <= 0:
            problems.append(f"{name}={v!r} must be > 0 on an ok record")
    for name in ("prefill_samples_tok_s", "decode_samples_tok_s"):
        for s in getattr(rec, name):
            if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s <= 0:
                problems.append(f"{name} holds an impossible sample {s!r}")
                break
    for name in _POSITIVE_MEMORY + _NONNEG_MEMORY:
        v = getattr(rec, name)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            problems.append(f"{name}={v!r} is not a finite number")
        elif name in _POSITIVE_MEMORY and v <= 0:
            problems.append(f"{name}={v!r} must be > 0 on an ok record")
        elif v < 0:
            problems.append(f"{name}={v!r} is negative")
    if rec.prefill_tok_s is not None and rec.n_prompt == 0:
        problems.append("prefill_tok_s given but n_prompt is 0 (prompt length not stated)")
    if rec.decode_tok_s is not None and rec.n_gen == 0:
        problems.append("decode_tok_s given but n_gen is 0 (generated length not stated)")
    if all(getattr(rec, name) is None for name in _MEASUREMENTS + SERVING_MEASUREMENTS):
        problems.append("ok record carries no measurement (no speed, no serving figure, no memory)")
    return problems


def iter_result_files(results: str | Path) -> list[Path]:
    """``*.jsonl`` entries under ``results/runs`` (recursively; folders aside), sorted; ``results`` may also
    be the runs folder.  A FIFO or device named ``*.jsonl`` is listed too: reading refuses it (a Rejection)
    instead of skipping it silently or blocking on it."""
    root = Path(results)
    runs = root / "runs" if (root / "runs").is_dir() else root
    if not runs.is_dir():
        raise FileNotFoundError(f"no results folder at {runs}")
    return sorted(p for p in runs.rglob("*.jsonl") if not p.is_dir())


def read_all(files: Iterable[Path]) -> tuple[list[LoadedRecord], list[Rejection]]:
    """Parse every line (``harness.records.scan_records``); a line that is not UTF-8, not JSON or not a valid
    record is a Rejection (file, line) and reading goes on; so is a file that cannot be read (line 0).
    Exact duplicates (same record_id and content, in any file) are counted once: each repeat is a Rejection
    naming the line it repeats; a record_id reused with other content is a Rejection too."""
    loaded: list[LoadedRecord] = []
    rejected: list[Rejection] = []
    dedup = Deduplicator()
    for path in files:
        try:
            for ln in dedup(scan_records(path)):
                if ln.record is None:
                    rejected.append(Rejection(str(path), ln.line, ln.record_id, ln.error))
                else:
                    loaded.append(LoadedRecord(ln.record, str(path), ln.line))
        except RecordError as exc:
            rejected.append(Rejection(str(path), 0, "", str(exc)))
    for where, first, rid in dedup.duplicates:
        file, _, line = where.rpartition(":")
        rejected.append(Rejection(file, int(line), rid, f"duplicate of {first} (same record_id and content)"))
    return loaded, rejected


# Fields that say which build of fitbench wrote a record, not what was measured: the input hash leaves them
# out, so records regenerated by a later commit (`make published`) hash as before.
NOT_HASHED = ("fitbench_git_sha",)


def canonical_json(rec: RunRecord) -> str:
    """The canonical text of a record without ``NOT_HASHED``: sorted keys, compact separators, non-ASCII
    kept."""
    d = {k: v for k, v in record_to_dict(rec).items() if k not in NOT_HASHED}
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def input_hash(records: Iterable[RunRecord]) -> str:
    """sha256 (hex) over the sorted canonical JSON lines of ``records`` (order of files and the writing
    commit's sha do not matter)."""
    h = hashlib.sha256()
    for line in sorted(canonical_json(r) for r in records):
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return "sha256:" + h.hexdigest()


# The engine build of a source's rows that state none, as the source states it for its other rows
# (../shared/reference/published/sources.md; the rows' notes), per (source_group, engine): Argonne's
# LLM-Inference-Bench (arXiv 2411.00136, Nov 2024) names "vLLM v0.6.1 ROCm docker" (MI300X) and "vLLM v0.5.2
# XPU" (Intel) in its rows' notes; its GH200 rows and Fig 21 TTFT rows name none and are taken as the same
# generation (the paper predates vLLM 0.8.0, the V1 engine, either way).
SOURCE_BUILDS = {("argonne-llm-inference-bench", "vllm"): "0.6.1"}


# Sources whose llama.cpp rows are builds of 2024 (shared/reference/published/sources.md; their rows do not
# state a build of their own).  llama.cpp's prompt kernels gained much in 2024-2025 (MMQ rework, stream-K,
# flash attention): on the devices measured in both years the 2025 scoreboard's pp512 rows ran 4-35 % faster
# than these sources' rows say (docs/calibration.md "Builds of 2024").  The speed fit gives their points the
# covariate ``build=2024`` on prefill ``flops_eff`` (calibration.hierarchy.build_covariates), so the device
# and family effects describe current builds, which is what the estimator predicts.
LEGACY_BUILD_SOURCES = {
    "xiongjiedai": "LLaMA 3 notebooks of May 2024, llama.cpp builds 2795-2843",
    "argonne-llm-inference-bench": "llama.cpp of mid-2024 (arXiv 2411.00136; build not stated)",
}
LEGACY_ERA = "2024"


def record_era(rec: RunRecord) -> str:
    """``LEGACY_ERA`` for a llama.cpp record whose source dates its build to 2024 (``LEGACY_BUILD_SOURCES`` by
    ``extra["source_group"]``), "" otherwise: a current build, or one nobody dates."""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    if rec.engine == "llama.cpp" and extra.get("source_group", "") in LEGACY_BUILD_SOURCES:
        return LEGACY_ERA
    return ""


def record_settings(rec: RunRecord) -> str:
    """The non-default kernel settings a record ran with, as its engine profile names them
    (``EngineProfile.record_settings`` on the options the runner recorded in ``extra``; llama.cpp's
    ``--no-repack``: "no_repack"), joined by "+"; "" for a default run, an imported row or an engine without a
    profile.  The speed fit gives such a record's points the covariate ``setting=<name>`` (group ``settings``,
    calibration.hierarchy.record_covariates), so the device and family effects describe default runs, which
    is what the estimator predicts."""
    from estimator.engines import ENGINES, get_engine

    extra = rec.extra if isinstance(rec.extra, dict) else {}
    if rec.engine not in ENGINES:
        return ""
    return "+".join(get_engine(rec.engine).record_settings(extra))


def record_source(rec: RunRecord) -> str:
    """The published source an imported record came from: its ``extra["source_group"]``
    (harness.import_published: one name per source of shared/reference/published/sources.md, e.g.
    "xiongjiedai", "llama.cpp-15013"), else its ``source`` (a URL as host/owner/repository: the serving
    imports name their file); "" for a fitbench run (origin "measured")."""
    if rec.origin == "measured":
        return ""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    group = str(extra.get("source_group") or "")
    if group or not rec.source:
        return group
    url = urllib.parse.urlparse(rec.source)
    if url.scheme in ("http", "https") and url.netloc:
        return "/".join([url.netloc, *[part for part in url.path.split("/") if part][:2]])
    return rec.source


def record_build(rec: RunRecord, engine: str | None = None) -> str:
    """The engine version of a record (``engine`` defaults to ``rec.engine``): its own ``engine_version``;
    else the version its ``build_info`` or published notes give after the engine's name ("vLLM v0.5.2 XPU",
    "SGLang 0.5.13.post1 (bench_serving)"); else what its source states for such rows (``SOURCE_BUILDS`` by
    ``extra["source_group"]``); "" when nobody says."""
    from estimator.engines import ENGINES, get_engine

    if rec.engine_version:
        return rec.engine_version
    engine = engine or rec.engine
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    label = get_engine(engine).label if engine in ENGINES else engine
    said = re.search(rf"\b{re.escape(label)}\s+v?(\d+(?:\.\d+)+(?:\.post\d+)?)\b",
                     f"{rec.build_info or ''}; {extra.get('notes', '')}", re.IGNORECASE)  # fmt: skip
    if said:
        return said.group(1)
    return SOURCE_BUILDS.get((extra.get("source_group", ""), engine), "")


def device_key(rec: RunRecord) -> str:
    """Identity of the physical device kind for cross-validation: catalog id, else host + device name +
    family (``estimator.catalog.detect.host_device_key``: two VMs named "vm" with an "AMD EPYC" of different
    ISA families are two devices)."""
    if rec.hardware_id:
        return rec.hardware_id
    return host_device_key(rec.host, rec.device_name, rec.hardware_family) or "unknown-device"


def to_row(lr: LoadedRecord) -> dict:
    r = lr.record
    return {
        "file": lr.file,
        "line": lr.line,
        "record_id": r.record_id,
        "origin": r.origin,
        "quality": record_quality(r),
        "engine": r.engine,
        "backend": r.backend,
        "hardware_id": r.hardware_id,
        "family": r.hardware_family,
        "device": device_key(r),
        "n_devices": r.n_devices,
        "model_id": r.model_id,
        "quant": r.quant,
        "n_layers_real": r.n_layers_real,
        "n_layers_measured": r.n_layers_measured,
        "n_prompt": r.n_prompt,
        "n_gen": r.n_gen,
        "n_depth": r.n_depth,
        "batch": r.batch,
        "n_ctx": r.n_ctx,
        "kv_dtype": r.kv_dtype,
        "flash_attn": r.flash_attn,
        "n_ubatch": r.n_ubatch,
        "prefill_tok_s": r.prefill_tok_s,
        "decode_tok_s": r.decode_tok_s,
        "weights_bytes": r.weights_bytes,
        "kv_bytes": r.kv_bytes,
        "compute_bytes": r.compute_bytes,
        "output_bytes": r.output_bytes,
        "device_total_bytes": r.device_total_bytes,
        "host_rss_bytes": r.host_rss_bytes,
    }


# What says where and when a record was written or which build ran it, not what was run or measured; and the
# figures (``*_s``, ``*_bytes``, ``*_std``: compared as published, ``_agree``: a later drop may round them).
PROVENANCE = ("record_id", "timestamp_utc", "extra", "fitbench_git_sha", "build_info", "engine_version")
# extra entries that say where a row came from (the raw row with its own id and figure strings, its file and
# line, notes, the quality flag given to it); every other entry (request_lengths, disagg, split, ...) is
# configuration and part of the key
EXTRA_PROVENANCE = ("published", "source_file", "source_line", "silicon_data_source", "notes", "quality")
FIGURE_SUFFIXES = ("_s", "_bytes", "_std")


def measurement_key(rec: RunRecord) -> str:
    """The canonical JSON of what a record ran: every field but ``PROVENANCE`` and the figures, and its
    extra entries but ``EXTRA_PROVENANCE`` (its source included: the same figures from two sources are two
    measurements).  A record with a model fingerprint (the architecture's hash, harness.provenance) is keyed
    on it and not on its model name: aiconfigurator's drops give DeepSeek-R1's runs again under DeepSeek-V3's
    model path, one architecture, the same figures."""
    d = {k: v for k, v in record_to_dict(rec).items()
         if k not in PROVENANCE and not k.endswith(FIGURE_SUFFIXES)}  # fmt: skip
    if d.get("model_fingerprint"):  # the architecture ran, under whichever name (speed ignores weight values)
        d.pop("model_id")
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    d["extra"] = {k: v for k, v in extra.items() if k not in EXTRA_PROVENANCE}
    return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _figures(rec: RunRecord) -> dict:
    d = record_to_dict(rec)
    return {k: v for k, v in d.items() if k.endswith(FIGURE_SUFFIXES) and v not in (None, [])}


def _decimals(x: float) -> int:
    """Decimal places ``x`` is given to, read from its shortest repr after rounding away binary noise (12
    significant digits: 12.22 ms / 1000 = 0.012220000000000002 -> 5); 0 for a whole number (1940 may be
    rounded to tens or not: taken as not)."""
    exponent = Decimal(f"{float(x):.12g}").normalize().as_tuple().exponent
    return max(0, -int(exponent))


def _agree(x: float, y: float) -> bool:
    """The same published figure: the more precise one rounded to the places of the other is the other
    (0.2318478822 and 0.23185; 1940.79 and 1941).  Two runs given to full precision agree only when equal:
    repeated offline batches can differ by less than 0.05 % (Argonne's GH200 runs), so no tolerance."""
    places = min(_decimals(x), _decimals(y))
    return math.isclose(round(float(x), places), round(float(y), places), rel_tol=1e-9, abs_tol=0.0)


def _same_figures(a: dict, b: dict) -> bool:
    if a.keys() != b.keys() or not a:
        return False
    for k, x in a.items():
        xs, ys = (list(x), list(b[k])) if isinstance(x, list | tuple) else ([x], [b[k]])
        if len(xs) != len(ys) or not all(_agree(u, v) for u, v in zip(xs, ys, strict=True)):
            return False
    return True


def _same_build(a: str, b: str) -> bool:
    """Versions that may name one build: equal, one unstated, or one a prefix of the other ("nightly-dev" and
    "nightly-dev-20260216-d3bae71e")."""
    return not a or not b or a.startswith(b) or b.startswith(a)


class Republished:
    """Finds a measurement its source published again.  A serving benchmark (a TTFT or TPOT figure): the same
    source, configuration (``measurement_key``) and build (``_same_build``) with the same figures as
    published (``_agree``) as a record seen before.  One source giving one run twice (in two data drops, or in
    a summary table and a full log) would weigh twice in the fit and in every held-out median.

    A serving benchmark states its whole configuration in the record's fields (concurrency, lengths, parallel
    sizes, mode), while a llama-bench import keeps part of it in its raw row (``-b`` in
    ``published["batch_raw"]``), which differs between drops by its ids and cannot be compared: a published
    speed is compared on its record fields and a figure precise enough to be one run's
    (``_first_speed``)."""

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[LoadedRecord, dict]]] = {}
        self._speeds: dict[str, list[tuple[LoadedRecord, float]]] = {}

    def first(self, lr: LoadedRecord) -> LoadedRecord | None:
        """The record ``lr`` repeats, or None (and ``lr`` is remembered)."""
        rec = lr.record
        if rec.ttft_s is None and rec.tpot_s is None:
            return self._first_speed(lr)
        figures = _figures(rec)
        same_key = self._seen.setdefault(measurement_key(rec), [])
        for seen, fig in same_key:
            if _same_build(seen.record.engine_version, rec.engine_version) and _same_figures(fig, figures):
                return seen
        same_key.append((lr, figures))
        return None


    def _first_speed(self, lr: LoadedRecord) -> LoadedRecord | None:
        """A published speed (one prefill or decode tokens/s figure) that its source gave again in another
        data drop: the same source URL, device and device count, engine, backend, quant, test (prompt,
        generated and depth tokens, ubatch, batch, flash attention), layer count and build (its era,
        ``record_era``, and a compatible version, ``_same_build``), with the same figure
        (``_agree``) given to at least ``SPEED_DIGITS`` significant digits, under whichever model name: one
        issue thread's table sits in both published CSVs, once as Meta-Llama-3-8B and once as llama-bench's
        "llama 8B Q4_0", which the import places on Llama 3.1 8B's geometry (harness.model_match).  Its
        raw row is not compared (ids, notes and names differ between drops); the figure's digits are what
        makes two rows one measurement."""
        rec = lr.record
        figs = [(k, v) for k, v in (("prefill", rec.prefill_tok_s), ("decode", rec.decode_tok_s)) if v]
        if rec.origin != "imported" or len(figs) != 1 or _significant(figs[0][1]) < SPEED_DIGITS:
            return None
        (phase, value), = figs
        key = json.dumps([rec.source, rec.hardware_id, rec.n_devices, rec.engine, rec.backend, rec.quant,
                          rec.n_prompt, rec.n_gen, rec.n_depth, rec.n_ubatch, rec.batch, rec.flash_attn,
                          rec.n_layers_real, record_era(rec), phase], default=str)  # fmt: skip
        same_key = self._speeds.setdefault(key, [])
        for seen, v in same_key:
            if _same_build(seen.record.engine_version, rec.engine_version) and _agree(v, value):
                return seen
        same_key.append((lr, value))
        return None


# Significant digits a published speed needs before an equal figure under the same source, device and test
# counts as the same measurement (``Republished._first_speed``): 379.92 has 5; "37" could be two runs.
SPEED_DIGITS = 4


def _significant(x: float) -> int:
    """Significant digits ``x`` is given to (its shortest repr, 12-digit binary noise rounded away)."""
    return len(Decimal(f"{float(x):.12g}").normalize().as_tuple().digits)


def _repeats(again: Republished, lr: LoadedRecord, rejected: list[Rejection]) -> bool:
    """True (and a Rejection naming the first) when ``lr`` is a measurement already kept."""
    first = again.first(lr)
    if first is not None:
        why = f"the measurement of '{first.where}' published again (same source, configuration and figures)"
        rejected.append(Rejection(lr.file, lr.line, lr.record.record_id, why))
    return first is not None


def build_dataset(
    loaded: list[LoadedRecord],
    rejected: list[Rejection] | None = None,
    qualities: Iterable[str] = DEFAULT_QUALITIES,
) -> Dataset:
    """Filter parsed records to the usable ones (status ok, valid, quality allowed, each measurement once:
    ``Republished``) and tabulate them."""
    qualities = tuple(sorted(set(qualities)))
    unknown = [q for q in qualities if q not in KNOWN_QUALITIES]
    if unknown:
        raise ValueError(f"unknown quality flag(s) {unknown}; known: {', '.join(KNOWN_QUALITIES)}")
    rejected = list(rejected or [])
    again = Republished()
    keep: list[LoadedRecord] = []
    by_status: dict[str, int] = {}
    by_quality: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    serving: list[LoadedRecord] = []
    set_aside: list[LoadedRecord] = []
    for lr in loaded:
        rec = lr.record
        if rec.status != "ok":
            by_status[rec.status] = by_status.get(rec.status, 0) + 1
            continue
        if is_serving_only(rec):
            by_kind[SERVING_REASON] = by_kind.get(SERVING_REASON, 0) + 1
            if record_quality(rec) in qualities and not _repeats(again, lr, rejected):
                serving.append(lr)
            continue
        q = record_quality(rec)
        if q not in qualities:
            by_quality[q] = by_quality.get(q, 0) + 1
            set_aside.append(lr)
            continue
        problems = validate_record(rec)
        if problems:
            rejected.append(Rejection(lr.file, lr.line, rec.record_id, "; ".join(problems)))
            continue
        if not _repeats(again, lr, rejected):
            keep.append(lr)
    table = pd.DataFrame([to_row(lr) for lr in keep], columns=_TABLE_COLUMNS)
    return Dataset(
        records=keep,
        table=table,
        rejected=rejected,
        excluded_status=by_status,
        excluded_quality=by_quality,
        excluded_kind=by_kind,
        qualities=qualities,
        input_hash=input_hash(lr.record for lr in keep + serving),
        serving_records=serving,
        set_aside=set_aside,
    )


_TABLE_COLUMNS = [
    "file",
    "line",
    "record_id",
    "origin",
    "quality",
    "engine",
    "backend",
    "hardware_id",
    "family",
    "device",
    "n_devices",
    "model_id",
    "quant",
    "n_layers_real",
    "n_layers_measured",
    "n_prompt",
    "n_gen",
    "n_depth",
    "batch",
    "n_ctx",
    "kv_dtype",
    "flash_attn",
    "n_ubatch",
    "prefill_tok_s",
    "decode_tok_s",
    "weights_bytes",
    "kv_bytes",
    "compute_bytes",
    "output_bytes",
    "device_total_bytes",
    "host_rss_bytes",
]


def load_dataset(results: str | Path, qualities: Iterable[str] = DEFAULT_QUALITIES) -> Dataset:
    """Read every record under ``results`` and return the clean Dataset (with its rejections)."""
    loaded, rejected = read_all(iter_result_files(results))
    return build_dataset(loaded, rejected, qualities)
