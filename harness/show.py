"""``python -m harness show``: the stored records themselves, one row each, filtered.

    python -m harness show [--results results] [--model M] [--hardware H] [--family F] [--engine E]
                           [--quant Q] [--status ok|failed|skipped] [--test pp|tg|mem|serve] [--plan P]
                           [--file F] [--last N] [--format text|json|csv]

Every record file under ``<results>/runs/`` (own sweeps, imports, the published records), exact duplicates
counted once.  Filters (case-insensitive; a value may be a glob such as ``qwen3*`` or a comma-separated list
of alternatives; filters combine with AND):

* ``--model``: the model id (a Hugging Face id also by its name after the org); ``--hardware``: the
  catalog id or the device name; ``--family``: the hardware family; ``--engine``; ``--quant``; ``--status``;
* ``--test``: the kind of test (``harness.describe.test_kinds``): pp, tg, mem or serve;
* ``--plan``: the plan of an own sweep (its name, or the stem of its file); ``--file``: the records file
  (its name or stem, e.g. ``published``);
* ``--last N``: the N newest records left after the filters.

A filter value that no stored record has is bad input (exit 2, one line naming the nearest values); a
combination that leaves nothing prints that nothing matches.  Rows are in time order.  Columns: time (UTC),
host / device, engine + backend (+ CPU threads), model (the layers run for a depth-reduced proxy), quant,
test (``harness.describe.test_label``), tokens/s mean ± sd (the decode speed of a tg test, the prefill speed
of a pp test, the output throughput of a serving benchmark), the latencies stated (TTFT, TPOT, ITL in ms,
end-to-end in s), memory in GiB (the device total, else the engine's buffers) and status.  ``--format json``
/ ``csv`` write the same rows with raw numbers (tokens/s, seconds, bytes) plus where each record is
(FILE:LINE), its id, error and origin.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.describe import (
    KINDS,
    device_label,
    engine_label,
    gib,
    latency_text,
    mean_sd,
    memory_bytes,
    model_label,
    speed,
    test_kinds,
    test_label,
)
from harness.records import STATUSES, RecordLine, RunRecord

FORMATS = ("text", "json", "csv")
COLUMNS = ("time", "where", "record_id", "origin", "host", "device", "family", "engine", "backend",
           "n_threads", "model", "n_layers_measured", "n_layers_real", "quant", "test", "speed", "tok_s",
           "tok_s_sd", "ttft_s", "tpot_s", "e2e_latency_s", "memory_bytes", "status", "error")  # fmt: skip


class ShowError(ValueError):
    """A filter value that names nothing stored (the message names the nearest values)."""


def _plan_names(ln: RecordLine) -> tuple[str, ...]:
    rec = ln.record
    if rec.origin != "measured":
        return ()
    plan = rec.extra.get("plan") if isinstance(rec.extra, dict) else None
    return tuple(x for x in (plan, Path(rec.source).stem if rec.source else "") if x)


# filter name -> the values a record answers to
FIELDS: dict[str, Callable[[RecordLine], tuple[str, ...]]] = {
    "model": lambda ln: (ln.record.model_id, ln.record.model_id.rsplit("/", 1)[-1]),  # HF ids without org
    "hardware": lambda ln: tuple(x for x in (ln.record.hardware_id, ln.record.device_name) if x),
    "family": lambda ln: (ln.record.hardware_family,),
    "engine": lambda ln: (ln.record.engine,),
    "quant": lambda ln: (ln.record.quant,),
    "status": lambda ln: (ln.record.status,),
    "test": lambda ln: test_kinds(ln.record),
    "plan": _plan_names,
    "file": lambda ln: (Path(ln.path).name, Path(ln.path).stem),
}
CHOICES: dict[str, tuple[str, ...]] = {"status": STATUSES, "test": KINDS}  # fixed vocabularies


@dataclass(frozen=True)
class Filters:
    """Filter values by FIELDS name (None = no filter) and ``last`` (the N newest; None = all)."""

    values: dict[str, str | None]
    last: int | None = None


def _alternatives(value: str) -> list[str]:
    return [v.strip().lower() for v in value.split(",") if v.strip()]


def _matches(pattern: str, values: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(v.lower(), pattern) for v in values if v)


def check_filters(lines: list[RecordLine], filters: Filters) -> None:
    """ShowError when a filter value (one alternative of it) names nothing any stored record has: a fixed
    vocabulary (status, test) is checked against its words, the others against the stored values."""
    from estimator.catalog.data import nearest

    for name, value in filters.values.items():
        if value is None:
            continue
        alts = _alternatives(value)
        if not alts:
            raise ShowError(f"--{name}: empty value")
        if name in CHOICES:
            known = list(CHOICES[name])
        else:
            known = sorted({v for ln in lines for v in FIELDS[name](ln) if v})
        for alt in alts:
            if _matches(alt, known):
                continue
            if name in CHOICES:
                raise ShowError(f"--{name} {alt}: not one of {', '.join(known)}")
            near = nearest(alt, known) if known else []
            hint = f"; nearest: {', '.join(near)}" if near else ""
            raise ShowError(f"--{name} {alt}: no stored record has this {name}{hint}")


def select(lines: list[RecordLine], filters: Filters) -> list[RecordLine]:
    """The lines every filter accepts, in time order (file order among equal times); the ``last`` newest."""
    wanted = {n: _alternatives(v) for n, v in filters.values.items() if v is not None}
    out = [
        ln
        for ln in lines
        if all(any(_matches(alt, FIELDS[n](ln)) for alt in alts) for n, alts in wanted.items())
    ]
    out.sort(key=lambda ln: ln.record.timestamp_utc)  # stable: file order kept among equal times
    return out[-filters.last :] if filters.last else out


def row(ln: RecordLine) -> dict:
    """One record as a row of raw values (COLUMNS)."""
    rec: RunRecord = ln.record
    what, mean, sd = speed(rec)
    return {
        "time": rec.timestamp_utc,
        "where": ln.where,
        "record_id": rec.record_id,
        "origin": rec.origin,
        "host": rec.host,
        "device": rec.hardware_id or rec.device_name,
        "family": rec.hardware_family,
        "engine": rec.engine,
        "backend": rec.backend,
        "n_threads": rec.n_threads,
        "model": rec.model_id,
        "n_layers_measured": rec.n_layers_measured,
        "n_layers_real": rec.n_layers_real,
        "quant": rec.quant,
        "test": test_label(rec),
        "speed": what,
        "tok_s": mean,
        "tok_s_sd": sd,
        "ttft_s": rec.ttft_s,
        "tpot_s": rec.tpot_s,
        "e2e_latency_s": rec.e2e_latency_s,
        "memory_bytes": memory_bytes(rec),
        "status": rec.status,
        "error": rec.error,
    }


def _time(ts: str) -> str:
    return ts.replace("T", " ")[:16]


def render_text(lines: list[RecordLine], title: str, console=None) -> None:
    """The rich table (module doc)."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # piped / captured: don't cut ids to 80 columns
            console = Console(width=220)
    table = Table(title=title)
    for col in (
        "time (UTC)",
        "host / device",
        "engine",
        "model",
        "quant",
        "test",
        "tok/s",
        "latency",
        "mem GiB",
    ):
        table.add_column(col, justify="right" if col in ("tok/s", "latency", "mem GiB") else "left")
    table.add_column("status")
    for ln in lines:
        rec = ln.record
        _, mean, sd = speed(rec)
        mem = memory_bytes(rec)
        style = {"failed": "red", "skipped": "yellow"}.get(rec.status, "")
        table.add_row(
            _time(rec.timestamp_utc),
            device_label(rec),
            engine_label(rec),
            model_label(rec),
            rec.quant,
            test_label(rec),
            mean_sd(mean, sd, "") if mean is not None else "-",
            latency_text(rec) or "-",
            gib(mem).removesuffix(" GiB") if mem is not None else "-",
            rec.status,
            style=style or None,
        )
    console.print(table)


def write_rows(lines: list[RecordLine], fmt: str, out=None) -> None:
    """``json`` (a list of row objects) or ``csv`` (header + rows) of the lines to ``out`` (stdout)."""
    out = out or sys.stdout
    rows = [row(ln) for ln in lines]
    if fmt == "json":
        json.dump(rows, out, indent=1)
        out.write("\n")
        return
    w = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)


def run_cli(results: str | Path, filters: Filters, fmt: str) -> int:
    """``python -m harness show``: 0, or 2 when a stored line is not a valid record (the valid ones are still
    shown and the first bad line named on stderr, like ``harness ls``).  ShowError on bad input."""
    from harness.store import runs_dir, scan_store

    if not Path(results).is_dir():
        raise ShowError(f"{results}: no such results folder")
    if filters.last is not None and filters.last < 1:
        raise ShowError("--last must be >= 1")
    scan = scan_store(results)
    check_filters(scan.lines, filters)
    chosen = select(scan.lines, filters)
    if fmt == "text":
        asked = [f"{n} {v}" for n, v in filters.values.items() if v is not None]
        asked += [f"last {filters.last}"] if filters.last else []
        what = f" ({', '.join(asked)})" if asked else ""
        if chosen:
            render_text(chosen, f"{runs_dir(results)}: {len(chosen)} of {len(scan.lines)} records{what}")
        else:
            print(f"no record matches{what}; {len(scan.lines)} records stored")
    else:
        write_rows(chosen, fmt)
    if scan.errors:
        more = f" (and {len(scan.errors) - 1} more bad line(s))" if len(scan.errors) > 1 else ""
        sys.stderr.write(f"error: {scan.errors[0]}{more}\n")
        return 2
    return 0
