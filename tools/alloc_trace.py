#!/usr/bin/env python3
"""Where ggml's graph allocator places llama.cpp's tensors: the evidence behind docs/memory-model.md §3.

llama.cpp's compute buffer is the high-water mark of ggml's graph allocator over the worst-case graph.  With
a ggml-base that prints its allocations (``bash tools/build_alloc_trace.sh``), this runs llama.cpp's
memory-fit pass (no_alloc, a data-less copy of a catalog model, as ``python -m harness memory-fit``) and
reads the trace of the last graph reserved: every ``allocating NAME (B bytes) - block i, offset O`` and
``freeing NAME at {chunk=c, offset=O} (B bytes)`` line.  It prints the tensors that are live when the
largest tensor (the logits, for most models) is placed and when the buffer reaches its high-water mark,
each at its offset, in MiB and in F32 hidden rows per token (4 x n_ubatch x hidden bytes), e.g.::

    python tools/alloc_trace.py gpt-oss-20b --ctx 32768
    python tools/alloc_trace.py gemma-4-e2b --ctx 4096 --fa on --ubatch 512

Nothing is written to results/; the shape file is cached like memory-fit's (~/.cache/fitbench/models).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIB = Path.home() / ".cache" / "fitbench" / "alloc-trace"
MIB = 2**20

_ALLOC = re.compile(
    r"allocating (?P<name>.+?) \((?P<size>\d+) bytes\) - block \d+, offset (?P<off>\d+), chunk (?P<ch>\d+)"
)
_FREE = re.compile(
    r"freeing (?P<name>.+?) at \{chunk=(?P<ch>\d+), offset=(?P<off>\d+)\} \((?P<size>\d+) bytes\)"
)
_BUFFER = re.compile(r"^fitbench compute_bytes (?P<bytes>\d+)$", re.MULTILINE)


def _fail(message: str) -> NoReturn:
    """Bad input or a missing build: one line on stderr, exit status 2 (as ``python -m harness``)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


@dataclass(frozen=True)
class Tensor:
    """One allocation of the trace: name, offset and size in bytes, allocator chunk."""

    name: str
    offset: int
    size: int
    chunk: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass(frozen=True)
class Moment:
    """The tensors live (chunk 0) when ``placed`` was allocated, ``placed`` included, sorted by offset."""

    placed: Tensor
    live: tuple[Tensor, ...]


def last_graph(text: str) -> list[str]:
    """The trace lines of the last graph the allocator laid out (llama.cpp reserves several; the compute
    buffer is sized by the largest, which for one context is the last full one): from the last allocation at
    offset 0 of chunk 0 on."""
    lines = text.splitlines()
    starts = [
        i for i, ln in enumerate(lines) if (m := _ALLOC.search(ln)) and m["off"] == "0" and m["ch"] == "0"
    ]
    return lines[starts[-1] :] if starts else []


def replay(lines: list[str]) -> tuple[Moment | None, Moment | None]:
    """(the moment the largest tensor is placed, the moment the high-water mark is reached) of one graph's
    trace lines; (None, None) when they hold no allocation."""
    live: dict[tuple[int, int], Tensor] = {}
    allocs: list[tuple[Tensor, tuple[Tensor, ...]]] = []
    for ln in lines:
        if m := _ALLOC.search(ln):
            t = Tensor(m["name"], int(m["off"]), int(m["size"]), int(m["ch"]))
            live[(t.chunk, t.offset)] = t
            below = sorted((x for x in live.values() if x.chunk == 0), key=lambda x: x.offset)
            allocs.append((t, tuple(below)))
        elif m := _FREE.search(ln):
            live.pop((int(m["ch"]), int(m["off"])), None)
    if not allocs:
        return None, None
    largest = max(allocs, key=lambda a: a[0].size)
    peak = max(allocs, key=lambda a: a[0].end if a[0].chunk == 0 else -1)
    return Moment(*largest), Moment(*peak)


def buffer_bytes(text: str) -> int | None:
    """The CPU compute buffer llama.cpp reported (bytes; the child prints the runner's figure), else None."""
    found = _BUFFER.findall(text)
    return int(found[-1]) if found else None


def _child_code(path: str, args: argparse.Namespace) -> str:
    """The child's program: the PointSpec ``python -m harness memory-fit`` builds (harness.memfit.point_spec,
    n_batch = n_ubatch), measured by the llama.cpp runner, its compute buffer printed after the trace."""
    return (
        "from dataclasses import replace\n"
        "from harness.memfit import point_spec\n"
        "from runners.base import get_runner\n"
        f"spec = replace(point_spec({args.ctx}, {args.ubatch}, {args.ubatch}, {args.fa == 'on'}),"
        f" model_path={path!r})\n"
        "m = get_runner('llama.cpp').measure(spec)\n"
        "print('fitbench compute_bytes', m.compute_bytes)\n"
    )


def run_trace(args: argparse.Namespace, model) -> str:
    """Build (or reuse) the data-less file of ``model`` and run the memory-fit pass with the tracing
    ggml-base; the child's stderr (the trace and llama.cpp's log) and stdout."""
    from estimator.specs import SpecError
    from harness.safe_files import FileRefused
    from harness.synth import synthetic_model

    lib = Path(args.lib)
    if not (lib / "llama_cpp").is_dir():
        _fail(f"no tracing llama_cpp under {lib}: run `bash tools/build_alloc_trace.sh {lib}` first")
    try:
        path = synthetic_model(model, "F16", "llama.cpp", None, args.cache, shape_only=True)
    except (SpecError, FileRefused, OSError) as exc:
        _fail(str(exc))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(lib), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-c", _child_code(str(path), args)], env=env, capture_output=True, text=True,
        timeout=args.timeout_s,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        _fail(f"llama.cpp's memory-fit pass failed (exit status {proc.returncode}): {tail}")
    return proc.stderr + "\n" + proc.stdout


def render(title: str, moment: Moment, row_bytes: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("offset MiB", "size MiB", "hidden rows", "tensor"):
        table.add_column(col, justify="right" if col != "tensor" else "left")
    for t in moment.live:
        table.add_row(f"{t.offset / MIB:.2f}", f"{t.size / MIB:.2f}", f"{t.size / row_bytes:.2f}", t.name)
    table.caption = (
        f"{moment.placed.name} placed at {moment.placed.offset / MIB:.2f} MiB = "
        f"{moment.placed.offset / row_bytes:.2f} hidden rows per token below it"
    )
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="catalog id, config.json or HF folder")
    ap.add_argument("--ctx", type=int, required=True, help="context cells")
    ap.add_argument("--fa", choices=("on", "off"), default="on", help="flash attention")
    ap.add_argument("--ubatch", type=int, default=512, help="n_ubatch")
    ap.add_argument("--lib", default=str(DEFAULT_LIB), help="OUT_DIR of tools/build_alloc_trace.sh")
    ap.add_argument("--cache", default=None, help="synthetic model cache (default ~/.cache/fitbench/models)")
    ap.add_argument("--timeout-s", type=float, default=600.0)
    args = ap.parse_args(argv)
    for name, value in (("--ctx", args.ctx), ("--ubatch", args.ubatch)):
        if value < 1:
            _fail(f"{name} {value}: expected a positive number of tokens")
    sys.path.insert(0, str(ROOT))
    from estimator.catalog.resolve import resolve_model
    from estimator.specs import SpecError

    try:
        model = resolve_model(args.model)
    except (SpecError, ValueError, OSError) as exc:
        _fail(str(exc))
    text = run_trace(args, model)
    largest, peak = replay(last_graph(text))
    if largest is None or peak is None:
        print(text[-3000:], file=sys.stderr)
        _fail("no allocator trace in the pass's output (is the tracing ggml-base the one loaded?)")
    row = 4 * args.ubatch * model.hidden_size
    buf = buffer_bytes(text)
    shown = f"{buf / MIB:.2f} MiB" if buf is not None else "not reported"
    top = peak.placed.end / MIB
    print(f"llama.cpp CPU compute buffer: {shown} (the trace's high-water mark {top:.2f} MiB)")
    render("live when the largest tensor is placed", largest, row)
    if peak.placed != largest.placed:
        render("live at the high-water mark", peak, row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
