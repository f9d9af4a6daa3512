"""Shared pieces of the importers: the error type, the import context, the base record fields."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from estimator.specs import HardwareSpec, ModelSpec
from harness.provenance import utc_now
from harness.records import SCHEMA_VERSION, RecordError, RunRecord, record_from_dict, with_defaults


class ImportFormatError(ValueError):
    """The file is not of the expected shape; the message names the file and the first offending line."""


@dataclass(frozen=True)
class ImportContext:
    """What the file does not say: hardware (catalog spec or detected), source, timestamp, resolvers."""

    source: str
    hardware: HardwareSpec | None = None
    device_name: str = ""
    host: str = ""
    timestamp_utc: str = ""
    input_len: int | None = None
    output_len: int | None = None
    batch_size: int | None = None
    resolve_hardware: Callable[[str], HardwareSpec] | None = None
    resolve_model: Callable[[str], ModelSpec] | None = None
    # the model every row of a llama-bench file ran (``harness import --model``); None: each row's own
    # description of it (harness.model_match)
    model: ModelSpec | None = None
    # a published free-form device name ("NVIDIA GeForce RTX 3060 Ti") -> the one catalog device its tokens
    # name (estimator.catalog.names; SpecError when none or several); None: ids and aliases only
    match_hardware_name: Callable[[str], HardwareSpec] | None = None


def _err(path: Path, line: int | str, msg: str) -> ImportFormatError:
    return ImportFormatError(f"{path}:{line}: {msg}")


def _base(ctx: ImportContext, sha: str) -> dict:
    hw = ctx.hardware
    return dict(
        schema_version=SCHEMA_VERSION,
        timestamp_utc=ctx.timestamp_utc or utc_now(),
        origin="imported",
        source=ctx.source,
        fitbench_git_sha=sha,
        host=ctx.host,
        hardware_id=hw.id if hw else "",
        hardware_family=hw.family if hw else "",
        device_name=ctx.device_name or (hw.name if hw else ""),
        n_devices=1,
        driver="",
        model_fingerprint="",
        n_layers_real=0,
        n_layers_measured=0,
        synthetic_weights=False,
        status="ok",
    )


def csv_rows(path: Path, text: str, columns: tuple[str, ...], what: str) -> Iterator[tuple[dict, int]]:
    """(row, first line of the row) of a CSV with a header holding ``columns``; one pass over the text.

    A missing column names the file (line 1) and ``what`` the file should be; a row with more cells than the
    header names its line."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in columns if c not in (reader.fieldnames or ())]
    if missing:
        raise _err(path, 1, f"not {what}: missing column(s) {', '.join(missing)}")
    start = 2
    for r in reader:
        if None in r:
            raise _err(path, start, "more cells than header columns")
        yield r, start
        start = reader.line_num + 1


def _finish(row: dict, path: Path, line: int | str) -> RunRecord:
    try:
        return record_from_dict(with_defaults(row))
    except (RecordError, TypeError) as exc:
        raise _err(path, line, str(exc)) from None


# --- llama-bench ---------------------------------------------------------------------------------------
