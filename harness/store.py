"""The records store: results/runs/*.jsonl, stable point keys, and what a resumed sweep may skip.

Layout (see results/README.md): every file under ``<results>/runs/`` is JSON Lines of
``harness.records.RunRecord`` rows.  Own measurements go to ``<plan>--<family>--<host>.jsonl``; imports go to
``imported-<stem>.jsonl`` or ``published.jsonl``.  Files are append-only and each append is atomic
(``harness.records.append_records``).

Point key: sha256 of the canonical JSON (sorted keys, no spaces) of everything that defines a measured point
— host, engine, engine version, model id + architecture fingerprint, quant, measured layer count and every
PointSpec field except the machine-local ``model_path`` — cut to 20 hex digits.  A resumed sweep skips a
point whose key appears in ``extra["point_key"]`` of any record already stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.records import RecordError, RunRecord, append_records, iter_records

RUNS_DIR = "runs"
PUBLISHED_FILE = "published.jsonl"


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


def measured_path(results: str | Path, plan_name: str, family: str, host: str) -> Path:
    """Where a sweep of ``plan_name`` on ``host`` appends its records."""
    return runs_dir(results) / f"{safe_name(plan_name)}--{safe_name(family)}--{safe_name(host)}.jsonl"


def record_files(results: str | Path) -> list[Path]:
    """All record files, sorted by name (temporary files of an interrupted append are ignored)."""
    d = runs_dir(results)
    return sorted(p for p in d.glob("*.jsonl") if not p.name.startswith(".")) if d.is_dir() else []


def iter_all_records(results: str | Path) -> Iterator[RunRecord]:
    """Every record of every file; a bad line raises RecordError naming file and line."""
    for path in record_files(results):
        yield from iter_records(path)


def load_all_records(results: str | Path) -> list[RunRecord]:
    return list(iter_all_records(results))


def done_point_keys(
    results: str | Path, statuses: Iterable[str] = ("ok", "failed", "skipped"), key: str = "point_key"
) -> set[str]:
    """Point keys already recorded with one of ``statuses`` (own measurements only).  ``key`` names the
    ``extra`` entry: "point_key" (per host, the local sweep) or "plan_point_key" (per plan point whatever
    node measured it, the Ray executor)."""
    wanted = set(statuses)
    return {
        r.extra[key]
        for r in iter_all_records(results)
        if r.origin == "measured" and r.status in wanted and r.extra.get(key)
    }


def existing_record_ids(path: str | Path) -> set[str]:
    path = Path(path)
    return {r.record_id for r in iter_records(path)} if path.exists() else set()


def append_new(path: str | Path, records: Iterable[RunRecord]) -> tuple[int, int]:
    """Append records whose record_id is not in ``path`` yet (one atomic write).

    Returns (appended, already_present).  Duplicate ids inside ``records`` are an error: they would mean two
    different rows claim one identity.
    """
    records = list(records)
    ids = [r.record_id for r in records]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RecordError(f"two new records share record_id {dup}")
    have = existing_record_ids(path)
    new = [r for r in records if r.record_id not in have]
    appended = append_records(path, new)
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
    """Print a rich table per hardware family x engine x model with record counts per status; returns 0."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped / captured: don't truncate ids to 80 columns
        console = Console(width=200)
    files = record_files(results)
    if not files:
        console.print(f"no records under {runs_dir(results)}")
        return 0
    df = summary_frame(iter_all_records(results))
    table = Table(title=f"{runs_dir(results)}: {int(df.total.sum())} records in {len(files)} files")
    for col in ("family", "engine", "model"):
        table.add_column(col)
    for col in ("ok", "failed", "skipped", "measured", "imported"):
        table.add_column(col, justify="right")
    for row in df.itertuples(index=False):
        table.add_row(row.family, row.engine, row.model, *(str(getattr(row, c)) for c in
                      ("ok", "failed", "skipped", "measured", "imported")))  # fmt: skip
    console.print(table)
    return 0
