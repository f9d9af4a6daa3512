"""Engine-reported memory vs the estimator's prediction for the same point (issue 3's consistency check).

For every own llama.cpp run in results/runs/ (``origin == "measured"``, ``engine == "llama.cpp"``, status ok;
the tests of one run share its memory figures, so a run is compared once) the estimator is asked for the
same point; an own vLLM run is compared on its weights only (the worker's parameters plus the linears its CPU
backend packed, against the weights of the layout vLLM loads: the profile's ``weight_format``, norms in the
checkpoint dtype and a V projection on K==V layers):

* model: ``estimator.catalog.resolve.resolve_model(model_id)`` reduced to ``n_layers_measured`` layers with
  ``harness.synth.proxy_spec`` (the spec of the file the sweep built: real widths, first K layers);
* weights: ``estimator.physics.weights.weight_breakdown(proxy, get_quant(quant)).total_bytes``
  vs ``weights_bytes`` = ``llama_model_size`` (exact tensor bytes of the loaded file, all devices, the token
  embedding's CPU buffer included);
* KV: ``estimator.physics.kv.kv_cache(proxy, n_ctx, kv_dtype, n_seq=1, n_ubatch=..., flash_attn=...,
swa_full=...)``
  vs ``kv_bytes`` = the KV (+ recurrent state) buffers of llama.cpp's log.  The log prints MiB with two
  decimals, so each buffer carries +-0.005 MiB (5,243 B) of rounding: the KV check allows
  max(tolerance x engine bytes, 5,243 B x number of buffers);
* compute (the "gap", reported, never asserted: it is what calibration fits):
  ``estimator.physics.runtime.runtime_buffers(...)`` compute_bytes (x devices) + host_compute_bytes vs
  ``compute_bytes`` = all compute buffers of the log (CPU, CUDA0, CUDA_Host ...), with the prior memory
  coefficients unless a coefficients file is given.

Gaps are ``estimator - engine`` in bytes and in % of the engine figure.  ``python -m harness consistency
[--results DIR] [--format table|json] [--tolerance 0.01] [--coefficients FILE]`` prints one row per run and a
summary per architecture; exit 1 when a weights or KV figure is outside the tolerance, 2 on bad input.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from estimator.specs import HardwareSpec, ModelSpec, SpecError, Workload
from harness.records import RunRecord

TOLERANCE = 0.01  # issue 3: weights and KV within 1 %
LOG_MIB_ROUNDING_BYTES = 5243  # llama.cpp logs buffer sizes as "%.2f MiB": +-0.005 MiB per buffer
MIB = 2**20
_KIND = {"CPU": "cpu", "Metal": "unified"}  # any other backend is a discrete device


def gap(engine_bytes: int | None, est_bytes: int | None) -> tuple[int | None, float | None]:
    """(estimator - engine in bytes, the same in % of the engine figure); None when either is unknown."""
    if engine_bytes is None or est_bytes is None:
        return None, None
    diff = int(est_bytes) - int(engine_bytes)
    return diff, (100.0 * diff / engine_bytes if engine_bytes else None)


@dataclass(frozen=True)
class Comparison:
    """One run: engine figures vs estimator figures (bytes); a vLLM run has weights only (KV / compute None).
    ``error`` says why the estimator could not size the point (then the est_* fields are None)."""

    where: str  # "file:line" of the run's first record
    run_id: str
    model_id: str
    architecture: str
    n_layers_measured: int
    n_layers_real: int
    quant: str
    n_ctx: int
    kv_dtype: str
    flash_attn: bool
    n_ubatch: int
    swa_full: bool
    backend: str
    n_records: int
    engine_weights_bytes: int | None
    est_weights_bytes: int | None
    engine_kv_bytes: int | None
    est_kv_bytes: int | None
    kv_rounding_bytes: int  # log rounding allowance of the engine KV figure
    engine_compute_bytes: int | None
    est_compute_bytes: int | None
    coefficients: str  # "prior" or the coefficients file used for the compute estimate
    error: str = ""
    engine: str = "llama.cpp"  # vLLM rows compare weights only

    @property
    def weights_gap(self) -> tuple[int | None, float | None]:
        return gap(self.engine_weights_bytes, self.est_weights_bytes)

    @property
    def kv_gap(self) -> tuple[int | None, float | None]:
        return gap(self.engine_kv_bytes, self.est_kv_bytes)

    @property
    def compute_gap(self) -> tuple[int | None, float | None]:
        return gap(self.engine_compute_bytes, self.est_compute_bytes)

    def weights_ok(self, tolerance: float = TOLERANCE) -> bool | None:
        """|estimator - engine| <= tolerance x engine; None when not comparable."""
        diff, _ = self.weights_gap
        return None if diff is None else abs(diff) <= tolerance * self.engine_weights_bytes

    def kv_ok(self, tolerance: float = TOLERANCE) -> bool | None:
        """|estimator - engine| <= max(tolerance x engine, log rounding); None when not comparable."""
        diff, _ = self.kv_gap
        if diff is None:
            return None
        return abs(diff) <= max(tolerance * self.engine_kv_bytes, self.kv_rounding_bytes)

    def to_dict(self, tolerance: float = TOLERANCE) -> dict:
        out = asdict(self)
        for name in ("weights", "kv", "compute"):
            diff, pct = getattr(self, f"{name}_gap")
            out[f"{name}_gap_bytes"], out[f"{name}_gap_pct"] = diff, pct
        out["weights_ok"], out["kv_ok"] = self.weights_ok(tolerance), self.kv_ok(tolerance)
        return out


# engines whose own runs report memory the estimator sizes: llama.cpp (weights, KV, compute buffers) and vLLM
# (weights only: its KV figure is the pool the run asked for, its activations are not reported)
MEMORY_ENGINES = ("llama.cpp", "vllm")


def is_engine_run(rec: RunRecord) -> bool:
    """An own llama.cpp or vLLM measurement with memory figures (not an import, not a test double)."""
    return (
        rec.origin == "measured"
        and rec.engine in MEMORY_ENGINES
        and rec.status == "ok"
        and "TEST DOUBLE" not in (rec.build_info or "")
    )


def load_runs(results: str | Path) -> list[tuple[str, RunRecord]]:
    """(file:line, record) of every own llama.cpp ok record under ``results/runs/*.jsonl``, exact duplicates
    counted once; a bad line (not UTF-8, not JSON, not a valid record) raises RecordError naming it."""
    from harness.store import iter_record_lines

    return [(ln.where, ln.record) for ln in iter_record_lines(results) if is_engine_run(ln.record)]


def _run_key(rec: RunRecord) -> str:
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    return str(extra.get("run_id") or f"{extra.get('point_key', '')}|{rec.timestamp_utc}|{rec.record_id}")


def group_runs(items: Iterable[tuple[str, RunRecord]]) -> list[tuple[str, RunRecord, int]]:
    """One (where, first record, number of records) per run, in file order."""
    first: dict[str, tuple[str, RunRecord]] = {}
    count: dict[str, int] = {}
    for where, rec in items:
        key = _run_key(rec)
        first.setdefault(key, (where, rec))
        count[key] = count.get(key, 0) + 1
    return [(w, r, count[k]) for k, (w, r) in first.items()]


def _hardware(rec: RunRecord) -> HardwareSpec:
    """Enough of a HardwareSpec for runtime_buffers (it only reads the device kind)."""
    return HardwareSpec(
        id=rec.hardware_id,
        name=rec.device_name,
        vendor="",
        family=rec.hardware_family,
        kind=_KIND.get(rec.backend, "gpu"),
        memory_bytes=None,
        bandwidth_gbs=None,
        bf16_tflops=None,
    )


def _n_buffers(rec: RunRecord, kinds: Sequence[str]) -> int:
    buffers = (rec.extra or {}).get("buffers_bytes") or {}
    return sum(len(buffers.get(k) or {}) for k in kinds) or 1


def compare_record(
    where: str,
    rec: RunRecord,
    model: ModelSpec | None,
    n_records: int = 1,
    mem_coeffs: dict | None = None,
    coefficients_label: str = "prior",
) -> Comparison:
    """Size ``rec``'s point with the estimator.  ``model`` is the real (full-depth) spec of ``rec.model_id``;
    None, or any SpecError while sizing, gives a Comparison carrying the error text."""
    from estimator.engines import get_engine
    from estimator.physics.kv import kv_cache
    from estimator.physics.quant import get_quant
    from estimator.physics.runtime import runtime_buffers
    from estimator.physics.weights import weight_breakdown
    from harness.synth import proxy_spec

    llama = rec.engine == "llama.cpp"
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    # a memory-only point states its sequences and cache layout; its n_ctx is per sequence (the context's
    # total, n_ctx_actual, holds every sequence); a speed run's context holds one sequence
    n_seq = int(extra.get("n_seq") or 1)
    kv_unified = bool(extra.get("kv_unified", True))
    n_ctx = int(rec.n_ctx if extra.get("memory_only") else (extra.get("n_ctx_actual") or rec.n_ctx))
    n_ubatch = int(rec.n_ubatch or 512)
    swa_full = bool(extra.get("swa_full", False))
    base = dict(
        where=where,
        run_id=_run_key(rec),
        model_id=rec.model_id,
        architecture=model.architecture if model else "",
        n_layers_measured=rec.n_layers_measured,
        n_layers_real=rec.n_layers_real,
        quant=rec.quant,
        n_ctx=n_ctx,
        kv_dtype=rec.kv_dtype,
        flash_attn=bool(rec.flash_attn),
        n_ubatch=n_ubatch,
        swa_full=swa_full,
        backend=rec.backend,
        n_records=n_records,
        engine_weights_bytes=rec.weights_bytes,
        engine_kv_bytes=rec.kv_bytes if llama else None,
        kv_rounding_bytes=LOG_MIB_ROUNDING_BYTES * _n_buffers(rec, ("KV", "RS")),
        engine_compute_bytes=rec.compute_bytes if llama else None,
        coefficients=coefficients_label,
        engine=rec.engine,
    )
    empty = dict(est_weights_bytes=None, est_kv_bytes=None, est_compute_bytes=None)
    if model is None:
        return Comparison(**base, **empty, error=f"model {rec.model_id!r} is not known to the estimator")
    try:
        proxy = proxy_spec(model, rec.n_layers_measured or None)
        quant = get_engine(rec.engine).weight_format(get_quant(rec.quant))  # the layout the engine loads
        weights = weight_breakdown(proxy, quant).total_bytes
        if not llama:
            return Comparison(**base, est_weights_bytes=weights, est_kv_bytes=None, est_compute_bytes=None)
        kv = kv_cache(
            proxy,
            n_ctx,
            rec.kv_dtype or "f16",
            n_seq=n_seq,
            engine="llama.cpp",
            n_ubatch=n_ubatch,
            flash_attn=bool(rec.flash_attn),
            swa_full=swa_full,
            kv_unified=kv_unified,
        ).total_bytes
        workload = Workload(
            n_ctx=n_ctx,
            kv_dtype=rec.kv_dtype or "f16",
            n_seq=n_seq,
            swa_full=swa_full,
            kv_unified=kv_unified,
            n_batch=int(rec.n_batch or 2048),
            n_ubatch=n_ubatch,
            flash_attn=bool(rec.flash_attn),
            engine="llama.cpp",
            n_devices=max(1, rec.n_devices),
            split="pp",
        )
        rt = runtime_buffers(proxy, quant, _hardware(rec), workload, mem_coeffs)
        compute = rt.compute_bytes * max(1, rec.n_devices) + rt.host_compute_bytes
    except (SpecError, KeyError, ValueError) as exc:
        return Comparison(**base, **empty, error=f"{type(exc).__name__}: {exc}")
    return Comparison(**base, est_weights_bytes=weights, est_kv_bytes=kv, est_compute_bytes=compute)


def compare_runs(
    items: Iterable[tuple[str, RunRecord]],
    resolve: Callable[[str], ModelSpec] | None = None,
    mem_coeffs: dict | None = None,
    coefficients_label: str = "prior",
) -> list[Comparison]:
    """One Comparison per run of ``items`` ((where, record) pairs).  ``resolve`` maps a model id to its real
    ModelSpec (default ``estimator.catalog.resolve.resolve_model``); an id it rejects becomes an error row."""
    if resolve is None:
        from estimator.catalog.resolve import resolve_model as resolve
    models: dict[str, ModelSpec | None] = {}
    out = []
    for where, rec, n in group_runs(items):
        if rec.model_id not in models:
            try:
                models[rec.model_id] = resolve(rec.model_id)
            except (SpecError, KeyError, ValueError, FileNotFoundError):
                models[rec.model_id] = None
        out.append(compare_record(where, rec, models[rec.model_id], n, mem_coeffs, coefficients_label))
    return out


def _abs_max(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals, key=abs) if vals else None


def by_architecture(rows: Sequence[Comparison], tolerance: float = TOLERANCE) -> list[dict]:
    """Per architecture: runs, models, quants, the largest |weights %| and |KV %| (signed), the compute gap
    range and median (%), and how many runs are outside the tolerance."""
    groups: dict[str, list[Comparison]] = {}
    for r in rows:
        groups.setdefault(r.architecture or "(unknown)", []).append(r)
    out = []
    for arch, rs in sorted(groups.items()):
        cg = [r.compute_gap[1] for r in rs if r.compute_gap[1] is not None]
        out.append(
            {
                "architecture": arch,
                "runs": len(rs),
                "models": sorted({r.model_id for r in rs}),
                "quants": sorted({r.quant for r in rs}),
                "weights_gap_pct_max": _abs_max(r.weights_gap[1] for r in rs),
                "kv_gap_pct_max": _abs_max(r.kv_gap[1] for r in rs),
                "compute_gap_pct_min": min(cg) if cg else None,
                "compute_gap_pct_median": statistics.median(cg) if cg else None,
                "compute_gap_pct_max": max(cg) if cg else None,
                "out_of_tolerance": sum(
                    1 for r in rs if r.weights_ok(tolerance) is False or r.kv_ok(tolerance) is False
                ),
                "errors": sum(1 for r in rs if r.error),
            }
        )
    return out


def report_dict(rows: Sequence[Comparison], tolerance: float = TOLERANCE) -> dict:
    """The machine-readable report (``--format json``)."""
    return {
        "tolerance": tolerance,
        "kv_log_rounding_bytes_per_buffer": LOG_MIB_ROUNDING_BYTES,
        "gap": "estimator - engine (bytes; % of the engine figure)",
        "runs": [r.to_dict(tolerance) for r in rows],
        "architectures": by_architecture(rows, tolerance),
        "out_of_tolerance": sum(
            1 for r in rows if r.weights_ok(tolerance) is False or r.kv_ok(tolerance) is False
        ),
        "errors": sum(1 for r in rows if r.error),
    }


def _mib(v: int | None) -> str:
    return "-" if v is None else f"{v / MIB:,.2f}"


def _pct(v: float | None, ok: bool | None = None) -> str:
    if v is None:
        return "-"
    text = f"{v:+.2f}%"
    return text if ok is not False else f"[bold red]{text}[/]"


def render_tables(rows: Sequence[Comparison], tolerance: float = TOLERANCE, console=None) -> None:
    """Rich tables: one row per run (MiB = 2^20 B), then the per-architecture summary."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # piped / captured: don't squeeze the columns to 80
            console = Console(width=200)
    coeffs = sorted({r.coefficients for r in rows}) or ["prior"]
    t = Table(
        title=f"engine vs estimator, {len(rows)} runs (gap = estimator - engine; weights/KV "
        f"tolerance {tolerance:.0%}; compute with {', '.join(coeffs)} memory coefficients)"
    )
    for col in ("model", "engine", "arch", "layers", "quant", "ctx / kv / fa"):
        t.add_column(col)
    for col in ("weights MiB eng", "est", "Δ", "KV MiB eng", "est", "Δ", "compute MiB eng", "est", "gap"):
        t.add_column(col, justify="right")
    for r in rows:
        fa = "fa" if r.flash_attn else "-"
        t.add_row(
            r.model_id,
            r.engine,
            r.architecture or "?",
            f"{r.n_layers_measured}/{r.n_layers_real}",
            r.quant,
            f"{r.n_ctx} / {r.kv_dtype} / {fa}",
            _mib(r.engine_weights_bytes),
            _mib(r.est_weights_bytes),
            _pct(r.weights_gap[1], r.weights_ok(tolerance)),
            _mib(r.engine_kv_bytes),
            _mib(r.est_kv_bytes),
            _pct(r.kv_gap[1], r.kv_ok(tolerance)),
            _mib(r.engine_compute_bytes),
            _mib(r.est_compute_bytes),
            _pct(r.compute_gap[1]),
        )
    console.print(t)
    for r in rows:
        if r.error:
            console.print(f"[yellow]{r.where}[/]: {r.error}")
    s = Table(title="per architecture (largest |Δ| signed; compute gap min / median / max)")
    for col in ("architecture", "runs", "quants", "weights Δ", "KV Δ", "compute gap", "out of tol."):
        s.add_column(col, justify="left" if col in ("architecture", "quants") else "right")
    for a in by_architecture(rows, tolerance):
        cg = "-"
        if a["compute_gap_pct_median"] is not None:
            cg = " / ".join(
                f"{a[k]:+.0f}%"
                for k in ("compute_gap_pct_min", "compute_gap_pct_median", "compute_gap_pct_max")
            )
        s.add_row(
            a["architecture"],
            str(a["runs"]),
            ", ".join(a["quants"]),
            _pct(a["weights_gap_pct_max"]),
            _pct(a["kv_gap_pct_max"]),
            cg,
            str(a["out_of_tolerance"]),
        )
    console.print(s)


def run_cli(
    results: str | Path,
    fmt: str = "table",
    tolerance: float = TOLERANCE,
    coefficients: str | None = None,
) -> int:
    """``python -m harness consistency``: 0 all within tolerance (or nothing to compare), 1 a weights or KV
    figure outside it, 2 bad input (message on stderr)."""
    from harness.records import RecordError

    if not 0 < tolerance < 1:
        sys.stderr.write(f"error: --tolerance must be in (0, 1), got {tolerance}\n")
        return 2
    if not Path(results).is_dir():
        sys.stderr.write(f"error: results folder not found: {results}\n")
        return 2
    mem, label = None, "prior"
    if coefficients:
        from estimator.physics.coefficients import load_coefficients

        try:
            mem, label = load_coefficients(coefficients).memory_for("llama.cpp") or None, coefficients
        except (SpecError, OSError, ValueError) as exc:
            sys.stderr.write(f"error: --coefficients {coefficients}: {str(exc).splitlines()[0]}\n")
            return 2
    try:
        rows = compare_runs(load_runs(results), mem_coeffs=mem, coefficients_label=label)
    except RecordError as exc:
        sys.stderr.write(f"error: {str(exc).splitlines()[0]}\n")
        return 2
    report = report_dict(rows, tolerance)
    if fmt == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif not rows:
        print(f"no measured llama.cpp records with status ok under {results}/runs")
    else:
        render_tables(rows, tolerance)
    return 1 if report["out_of_tolerance"] else 0
