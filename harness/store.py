"""The records store: results/runs/*.jsonl, stable point keys, and what a resumed sweep may skip.

Layout (see results/README.md): every file under ``<results>/runs/`` is JSON Lines of
``harness.records.RunRecord`` rows.  Own measurements go to ``<plan>--<family>--<host>.jsonl``; imports go to
``imported-<stem>.jsonl`` or ``published.jsonl``.  Files are append-only and each append is atomic
(``harness.records.append_records``).

Point key: sha256 of the canonical JSON (sorted keys, no spaces) of everything that defines a measured point
— host, engine, engine version, model id + architecture fingerprint, quant, measured layer count and every
PointSpec field except the machine-local ``model_path`` — cut to 20 hex digits.  A resumed sweep skips a
point whose key appears in ``extra["point_key"]`` of a record already stored by the same machine (its
hardware family and device name: host names repeat across machines).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.records import (
    Deduplicator,
    RecordError,
    RecordLine,
    RunRecord,
    append_records,
    scan_records,
)

RUNS_DIR = "runs"
PUBLISHED_FILE = "published.jsonl"
SERVING_FILE = "published-serving.jsonl"


def canonical_json(obj: object) -> str:
    """Deterministic JSON: sorted keys, compact separators, tuples as lists."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=list)


def short_hash(obj: object, n_hex: int = 20) -> str:
    """First ``n_hex`` hex digits of sha256(canonical_json(obj))."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:n_hex]


def point_key(host: str, engine: str, engine_version: str, point: dict) -> str:
    """Stable key of one measured point on one host with one engine version.

    ``point`` holds the model id, fingerprint, quant, measured layers and PointSpec fields; a ``model_path``
    entry, if present, is ignored (cache locations differ between machines and runs).
    """
    body = {k: v for k, v in point.items() if k != "model_path"}
    return short_hash({"host": host, "engine": engine, "engine_version": engine_version, "point": body})


def record_id(key: str, *parts: object) -> str:
    """Record id: a hash of the point key and whatever tells this record apart (test, timestamp, row)."""
    return short_hash([key, *parts], 24)


def runs_dir(results: str | Path) -> Path:
    return Path(results) / RUNS_DIR


def safe_name(text: str) -> str:
    """File-name-safe slug: letters, digits, '.', '_' and '-' kept; everything else becomes '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unnamed"


def import_target(results: str | Path, fmt: str, source_file: str | Path) -> Path:
    """Where ``python -m harness import`` appends by default (one file per source):
    published_measurements.csv -> published.jsonl, published_measurements_2.csv -> published-2.jsonl, another
    published CSV -> published-<stem>.jsonl, serving_silicon.csv -> published-serving.jsonl, any other file ->
    imported-<stem>.jsonl."""
    stem = Path(source_file).stem
    if fmt == "serving-silicon":
        return runs_dir(results) / SERVING_FILE
    if fmt == "published":
        base = "published_measurements"
        tail = stem[len(base) :].strip("_") if stem.startswith(base) else stem
        return runs_dir(results) / (f"published-{safe_name(tail)}.jsonl" if tail else PUBLISHED_FILE)
    return runs_dir(results) / f"imported-{safe_name(stem)}.jsonl"


def measured_path(results: str | Path, plan_name: str, family: str, host: str) -> Path:
    """Where a sweep of ``plan_name`` on ``host`` appends its records."""
    return runs_dir(results) / f"{safe_name(plan_name)}--{safe_name(family)}--{safe_name(host)}.jsonl"


def record_files(results: str | Path) -> list[Path]:
    """All record files, sorted by name (temporary files of an interrupted append are ignored)."""
    d = runs_dir(results)
    return sorted(p for p in d.glob("*.jsonl") if not p.name.startswith(".")) if d.is_dir() else []


def iter_record_lines(results: str | Path) -> Iterator[RecordLine]:
    """Every record of every file with where it is, exact duplicates (same record_id and content) dropped;
    the first bad line (or a record_id reused with other content) raises RecordError naming FILE:LINE."""
    dedup = Deduplicator()
    for path in record_files(results):
        for ln in dedup(scan_records(path)):
            if ln.record is None:
                raise RecordError(ln.message)
            yield ln


def iter_all_records(results: str | Path) -> Iterator[RunRecord]:
    """Every record of every file, exact duplicates dropped; a bad line raises RecordError naming it."""
    for ln in iter_record_lines(results):
        yield ln.record


@dataclass
class StoreScan:
    """What ``scan_store`` found: the valid records (duplicates dropped), the bad lines and the duplicates."""

    files: list[Path]
    records: list[RunRecord] = field(default_factory=list)
    lines: list[RecordLine] = field(default_factory=list)  # the same records with where they are
    errors: list[str] = field(default_factory=list)  # "FILE:LINE: reason"
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)  # (where, first where, record_id)


def scan_store(results: str | Path) -> StoreScan:
    """Read every record file without stopping at a bad line (for listings): each bad line, and each file
    that cannot be read, is one error; exact duplicates are dropped and noted."""
    scan = StoreScan(record_files(results))
    dedup = Deduplicator()
    for path in scan.files:
        try:
            for ln in dedup(scan_records(path)):
                if ln.record is None:
                    scan.errors.append(ln.message)
                else:
                    scan.records.append(ln.record)
                    scan.lines.append(ln)
        except RecordError as exc:
            scan.errors.append(str(exc))
    scan.duplicates = dedup.duplicates
    return scan


def load_all_records(results: str | Path) -> list[RunRecord]:
    return list(iter_all_records(results))


def done_point_keys(
    results: str | Path,
    statuses: Iterable[str] = ("ok", "failed", "skipped"),
    key: str = "point_key",
    machine: tuple[str, str] | None = None,
) -> set[str]:
    """Point keys already recorded with one of ``statuses`` (own measurements only).  ``key`` names the
    ``extra`` entry: "point_key" (per host, the local sweep) or "plan_point_key" (per plan point whatever
    node measured it, the Ray executor).  ``machine``: (hardware_family, device_name) of the machine that
    asks; records of another machine do not count, though the host name in their point key is the same
    (cloud VMs are all "vm", and a VM's CPU may call itself "AMD EPYC" on a Zen 3 and on a Zen 4 host)."""
    wanted = set(statuses)
    return {
        r.extra[key]
        for r in iter_all_records(results)
        if r.origin == "measured" and r.status in wanted and r.extra.get(key)
        and (machine is None or (r.hardware_family, r.device_name) == machine)
    }


def append_new(path: str | Path, records: Iterable[RunRecord]) -> tuple[int, int]:
    """Append records whose record_id is not in ``path`` yet (one atomic write, under the file's lock).

    Returns (appended, already_present).  Duplicate ids inside ``records`` are an error: they would mean two
    different rows claim one identity.
    """
    records = list(records)
    seen: set[str] = set()
    for r in records:
        if r.record_id in seen:
            raise RecordError(f"two new records share record_id {r.record_id}")
        seen.add(r.record_id)
    appended = append_records(path, records, skip_existing=True)
    return appended, len(records) - appended


def summary_frame(records: Iterable[RunRecord]):
    """pandas DataFrame: one row per (hardware_family, engine, model_id) with counts per status and origin."""
    import pandas as pd

    rows = [
        {"family": r.hardware_family or "(unknown)", "engine": r.engine, "model": r.model_id or "(unknown)",
         "origin": r.origin, "status": r.status}
        for r in records
    ]  # fmt: skip
    cols = ["family", "engine", "model"]
    if not rows:
        return pd.DataFrame(columns=[*cols, "ok", "failed", "skipped", "measured", "imported", "total"])
    df = pd.DataFrame(rows)
    status = pd.crosstab([df.family, df.engine, df.model], df.status)
    origin = pd.crosstab([df.family, df.engine, df.model], df.origin)
    out = status.join(origin, how="outer").fillna(0).astype(int)
    for col in ("ok", "failed", "skipped", "measured", "imported"):
        if col not in out:
            out[col] = 0
    out["total"] = out[["ok", "failed", "skipped"]].sum(axis=1)
    return out.reset_index()[[*cols, "ok", "failed", "skipped", "measured", "imported", "total"]]


def render_listing(results: str | Path) -> int:
    """Print a rich table per hardware family x engine x model with record counts per status.

    Returns 0, or 2 when a line is not a valid record: the table then counts the valid ones, and one line on
    stderr names the first bad line (FILE:LINE: why) and how many more there are.  Exact duplicate lines are
    counted once and noted under the table."""
    import sys

    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped / captured: don't truncate ids to 80 columns
        console = Console(width=200)
    scan = scan_store(results)
    if not scan.files:
        console.print(f"no records under {runs_dir(results)}")
        return 0
    df = summary_frame(scan.records)
    table = Table(title=f"{runs_dir(results)}: {int(df.total.sum())} records in {len(scan.files)} files")
    for col in ("family", "engine", "model"):
        table.add_column(col)
    for col in ("ok", "failed", "skipped", "measured", "imported"):
        table.add_column(col, justify="right")
    for row in df.itertuples(index=False):
        table.add_row(row.family, row.engine, row.model, *(str(getattr(row, c)) for c in
                      ("ok", "failed", "skipped", "measured", "imported")))  # fmt: skip
    console.print(table)
    if scan.duplicates:
        where, first, _ = scan.duplicates[0]
        console.print(
            f"{len(scan.duplicates)} duplicate line(s) counted once (e.g. {where} repeats {first})",
            markup=False,
        )
    if scan.errors:
        more = f" (and {len(scan.errors) - 1} more bad line(s))" if len(scan.errors) > 1 else ""
        sys.stderr.write(f"error: {scan.errors[0]}{more}\n")
        return 2
    return 0
