"""Importer speed (issue 17, item 8): a 100k-row llama-bench JSON array, parsed, validated and appended as
`python -m harness import FILE --out X --hardware ID` does it (minus interpreter start-up).

Run: ``python -m pytest tests/benchmarks/test_bench_import.py --benchmark-enable``.  With the project's
default ``--benchmark-disable`` the same code runs once on 5,000 rows, as a plain test (the 120 MB file of the
real benchmark is generated only when benchmarks are enabled).  Nothing here asserts a time; ``extra_info``
keeps the row count and the input size.  Measured on the 2-core development VM (shared, not quiet): 100k rows
(120 MB) in 10.5-11.0 s per round (3 rounds), about 9,500 rows/s.  Before the fix the importer was quadratic
(a ``str.count`` from the start of the file per row): 4k rows 3.1 s, 8k rows 10 s, 100k rows did not finish in
15 minutes (the audit's figures, issue 17).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from harness.importers import ImportContext, import_file
from harness.store import append_new

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT.parent / "shared" / "reference" / "fixtures" / "llama-bench-cpu.json"

pytestmark = pytest.mark.skipif(not FIXTURE.is_file(), reason="../shared/reference not beside the repo")


def _big_llama_bench(path: Path, n_rows: int) -> Path:
    """n_rows distinct llama-bench results (the real fixture's rows, n_threads varied), indented like
    llama-bench's own ``-o json`` output."""
    rows = json.loads(FIXTURE.read_text())
    path.write_text(
        json.dumps([{**rows[i % len(rows)], "n_threads": 1 + i} for i in range(n_rows)], indent=2)
    )
    return path


def test_bench_import_llama_bench_100k_rows(benchmark, tmp_path):
    n_rows = 5_000 if benchmark.disabled else 100_000
    src = _big_llama_bench(tmp_path / "llama-bench.json", n_rows)
    out = tmp_path / "runs" / "imported.jsonl"
    ctx = ImportContext(source=str(src), hardware=resolve_hardware("ryzen-9-7950x"),
                        resolve_hardware=resolve_hardware, resolve_model=resolve_model)  # fmt: skip

    def setup():
        out.unlink(missing_ok=True)

    def run():
        _, records = import_file(src, "auto", ctx)
        return append_new(out, records)

    added, present = benchmark.pedantic(run, setup=setup, rounds=1 if benchmark.disabled else 3, iterations=1)
    assert (added, present) == (n_rows, 0)
    benchmark.extra_info.update(rows=n_rows, input_bytes=src.stat().st_size)
