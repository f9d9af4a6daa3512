"""The lines a sweep prints after each point: what was measured, llama-bench style, against the estimate.

One line per test of a point that measured::

    smollm2-135m (4/30 L) Q8_0 | llama.cpp CPU t=2 | pp64 | 1,234.56 ± 12.34 tok/s | est. 1,180 (+4.6 %)

(mean ± standard deviation over the repetitions, tokens/s; "est." is the estimator's prediction of the same
point through ``estimator.app.predict`` with the coefficients ``harness.estimate.Estimator`` loads, and the
percentage is (measured − estimate) / estimate).  A memory-only point prints the engine's weights + KV and
its compute buffers against the estimator's sizes of the same buffers, on the device and in host RAM (for
llama.cpp as ``harness consistency`` sizes them; GiB = 2^30 B).  A
serving benchmark prints its output throughput against the estimated one.  A point that failed or was
skipped prints one line: its tests, its status and the first line of the reason.  An estimate that cannot
be made prints "est. —" and why, never a traceback: nothing here may stop or fail a sweep.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.describe import (
    engine_buffers_bytes,
    engine_label,
    gib,
    mean_sd,
    model_label,
    number,
    signed_pct,
    speed,
    test_kinds,
    test_label,
)
from harness.estimate import Estimator
from harness.records import RunRecord

NO_ESTIMATE = "est. —"
MAX_REASON_CHARS = 160


def _pct(measured: float, estimate: float) -> str:
    return signed_pct((measured - estimate) / estimate) if estimate else "n/a"


def _float(out: dict | None, key: str) -> float | None:
    try:
        return float(out[key]) if out and out.get(key) not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _short(text: str, n: int = MAX_REASON_CHARS) -> str:
    line = " ".join((text or "").strip().splitlines()[:1]) if text else ""
    return line if len(line) <= n else line[: n - 1] + "…"


def speed_cells(rec: RunRecord, out: dict | None, why: str) -> tuple[str, str]:
    """(measured, estimate) cells of a speed test."""
    what, mean, sd = speed(rec)
    if mean is None:
        return "no speed recorded", NO_ESTIMATE
    measured = mean_sd(mean, sd)
    key = {"decode": "decode_tok_s", "prefill": "prefill_tok_s", "output": "output_tok_s"}[what]
    est = _float(out, key)
    if est is None:
        return measured, f"{NO_ESTIMATE} ({_short(why, 100)})" if why else NO_ESTIMATE
    return measured, f"est. {number(est)} ({_pct(mean, est)})"


def memory_cells(rec: RunRecord, out: dict | None, why: str) -> tuple[str, str]:
    """(measured, estimate) cells of a memory-only point: weights + KV and buffers, GiB."""
    wkv, bufs = engine_buffers_bytes(rec)
    if wkv is None:
        return "no memory recorded", NO_ESTIMATE
    e_wkv, e_compute = _float(out, "engine_weights_kv_bytes"), _float(out, "engine_compute_bytes")
    if e_wkv is not None and e_compute is not None and rec.compute_bytes is not None:
        # llama.cpp's own buffers, device and host (Estimator._engine_view): compute buffers alone
        measured = f"weights+KV {gib(wkv)}, compute {gib(rec.compute_bytes)}"
        est = f"est. {gib(e_wkv)} ({_pct(wkv, e_wkv)}), compute {gib(e_compute)} "
        return measured, est + f"({_pct(rec.compute_bytes, e_compute)})"
    measured = f"weights+KV {gib(wkv)}" + (f", buffers {gib(bufs)}" if bufs is not None else "")
    e_w, e_kv, e_rt = (_float(out, k) for k in ("weights_bytes", "kv_bytes", "runtime_bytes"))
    if e_w is None or e_kv is None:
        return measured, f"{NO_ESTIMATE} ({_short(why, 100)})" if why else NO_ESTIMATE
    est = f"est. {gib(e_w + e_kv)} ({_pct(wkv, e_w + e_kv)})"
    if bufs is not None and e_rt is not None:
        est += f", buffers {gib(e_rt)} ({_pct(bufs, e_rt)})"
    return measured, est


def point_lines(records: list[RunRecord], estimates: list[tuple[dict | None, str]]) -> list[tuple[str, str]]:
    """(line, rich style) per line to print for one point's records (module doc)."""
    if not records:
        return []
    head = f"{model_label(records[0])} {records[0].quant} | {engine_label(records[0])}"
    bad = [r for r in records if r.status != "ok"]
    lines: list[tuple[str, str]] = []
    if bad and len({(r.status, r.error) for r in bad}) == 1:  # one cause for every test that did not run
        tests = ", ".join(test_label(r) for r in bad)
        style = "red" if bad[0].status == "failed" else "yellow"
        lines.append((f"{head} | {tests} | {bad[0].status.upper()}: {_short(bad[0].error)}", style))
        bad_ids = {id(r) for r in bad}
    else:
        bad_ids = set()
    for rec, (out, why) in zip(records, estimates, strict=True):
        if id(rec) in bad_ids:
            continue
        if rec.status != "ok":
            style = "red" if rec.status == "failed" else "yellow"
            lines.append((f"{head} | {test_label(rec)} | {rec.status.upper()}: {_short(rec.error)}", style))
            continue
        cells = memory_cells if test_kinds(rec) == ("mem",) else speed_cells
        measured, est = cells(rec, out, why)
        lines.append((f"{head} | {test_label(rec)} | {measured} | {est}", ""))
    return lines


class Announcer:
    """Prints each stored point's lines through ``emit(text, style)`` (the sweep's console, so they appear
    above its progress bar).  The first point also prints which coefficients the estimates use."""

    def __init__(self, emit: Callable[[str, str], None], estimator: Estimator) -> None:
        self.emit = emit
        self.estimator = estimator
        self._said_source = False

    def __call__(self, records: list[RunRecord]) -> None:
        try:
            ok = [r for r in records if r.status == "ok"]
            estimates = self.estimator.predict(ok) if ok else []
            by_rec = {id(r): e for r, e in zip(ok, estimates, strict=True)}
            pairs = [by_rec.get(id(r), (None, "")) for r in records]
            if ok and not self._said_source:
                self._said_source = True
                self.estimator.table()
                self.emit(f"est. = estimator.app.predict with {self.estimator.source}", "dim")
            lines = point_lines(records, pairs)
        except Exception as exc:  # noqa: BLE001 - a line is never worth a sweep
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            lines = [(f"{len(records)} record(s) stored ({NO_ESTIMATE}: {why})", "")]
        for text, style in lines:
            try:
                self.emit(text, style)
            except Exception:  # noqa: BLE001, S110 - a console that cannot print loses a line, not a point
                pass
