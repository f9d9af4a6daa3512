"""``python -m harness memory-fit``: what llama.cpp itself would allocate for one model x context, next to the
estimator's figures.

llama.cpp's memory-fit pass (``llama_model_params.no_alloc``, the pass ``llama-fit-params`` runs) loads a
data-less copy of the model (``harness.synth.write_shape_gguf``: the real tensor table, no weights), sizes
its KV cache and reserves the worst-case compute graphs through ggml's allocator without allocating a byte.
Its figures are the installed build's own, on its CPU backend, for the full-depth model whatever its size:

* weights_bytes  ``llama_model_size`` of the F16 file (every tensor; the estimator's weights of F16);
* kv_bytes       the KV cache's summary line (MiB with two decimals: +-0.005 MiB per cache);
* compute_bytes  the compute buffer the allocator's layout takes (exact, the same as a real context's);
* output_bytes   the logits output buffer (host).

The point runs in a child process (``python -m runners measure``) like a sweep's, so an engine abort is an
error message, not a crash.  Nothing is written to results/ (``plans/cpu-memory-fit.toml`` records such
points).  Exit 0, 2 on bad input or a failed pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from estimator.specs import ModelSpec
from harness.consistency import Comparison, compare_record
from harness.records import RunRecord
from runners.base import PointSpec

GIB = 2**30
MIB = 2**20
DEFAULT_TIMEOUT_S = 300.0


class MemoryFitError(Exception):
    """The pass could not run (bad input, unsupported architecture, engine missing or failing)."""


@dataclass(frozen=True)
class MemoryFit:
    """One pass: the record it makes (engine figures) and the estimator's figures for the same point."""

    record: RunRecord
    comparison: Comparison

    def to_dict(self) -> dict:
        c = self.comparison
        return {
            "model_id": c.model_id,
            "n_ctx": c.n_ctx,
            "n_ubatch": c.n_ubatch,
            "flash_attn": c.flash_attn,
            "kv_dtype": c.kv_dtype,
            "n_seq": self.record.batch,
            "engine": f"{self.record.engine_version}: llama.cpp memory-fit pass (no_alloc), CPU backend",
            "llama_cpp": {
                "weights_bytes": c.engine_weights_bytes,
                "kv_bytes": c.engine_kv_bytes,
                "compute_bytes": c.engine_compute_bytes,
                "output_bytes": self.record.output_bytes,
            },
            "estimator": {
                "weights_bytes": c.est_weights_bytes,
                "kv_bytes": c.est_kv_bytes,
                "compute_bytes": c.est_compute_bytes,
                "coefficients": c.coefficients,
            },
            "gap_pct": {k: getattr(c, f"{k}_gap")[1] for k in ("weights", "kv", "compute")},
        }


def point_spec(
    n_ctx: int,
    n_ubatch: int = 512,
    n_batch: int = 2048,
    flash_attn: bool = True,
    kv_dtype: str = "f16",
    n_seq: int = 1,
    kv_unified: bool = True,
    swa_full: bool = False,
) -> PointSpec:
    """The memory-only PointSpec of one pass (model_path filled in by ``run_memory_fit``)."""
    options = {"no_alloc": True, "n_seq": n_seq, "kv_unified": kv_unified, "swa_full": swa_full}
    return PointSpec(
        model_path="", n_ctx=n_ctx, prompt_lengths=(), gen_lengths=(), kv_dtype=kv_dtype,
        flash_attn=flash_attn, n_batch=max(n_batch, n_ubatch), n_ubatch=n_ubatch, n_threads=1,
        engine_options=options,
    )  # fmt: skip


def run_memory_fit(
    model: ModelSpec,
    spec: PointSpec,
    cache: str | Path | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    mem_coeffs: dict | None = None,
    coefficients_label: str = "prior",
) -> MemoryFit:
    """Build (or reuse) the model's data-less file, run the pass in a child, compare with the estimator.
    Raises MemoryFitError saying why when the file cannot be built or the pass fails."""
    from estimator.specs import SpecError
    from harness.hwdetect import detect_host
    from harness.provenance import PointContext, git_sha, records_from_measurement
    from harness.safe_files import FileRefused
    from harness.sweep import engine_version, measure_in_child
    from harness.synth import synthetic_model

    try:
        path = synthetic_model(model, "F16", "llama.cpp", None, cache, shape_only=True)
    except (SpecError, FileRefused) as exc:
        raise MemoryFitError(str(exc)) from None
    if not engine_version("llama.cpp"):
        raise MemoryFitError(
            "llama-cpp-python is not installed for this interpreter: run `make install-llama`"
        )
    spec = replace(spec, model_path=str(path))
    m, error, _ = measure_in_child(spec, "llama.cpp", timeout_s)
    if m is None:
        raise MemoryFitError("llama.cpp's memory-fit pass failed: " + error)
    host = detect_host(probe_bandwidth=False, use_gpus=False)
    ctx = PointContext(
        point_key="memory-fit", plan_source="python -m harness memory-fit", host=host, engine="llama.cpp",
        engine_version=m.engine_version, model_id=model.id, model=model, n_layers_measured=model.n_layers,
        quant="F16", synthetic_weights=True, spec=spec, git_sha=git_sha(),
    )  # fmt: skip
    records = records_from_measurement(ctx, m)
    rec = records[0]
    if rec.status != "ok":
        raise MemoryFitError(f"the pass gave no usable figures: {rec.error}")
    comp = compare_record("memory-fit", rec, model, 1, mem_coeffs, coefficients_label)
    if comp.error:
        raise MemoryFitError(comp.error)
    return MemoryFit(rec, comp)


def _fmt(v: int | None) -> str:
    if v is None:
        return "-"
    return f"{v / GIB:,.3f} GiB" if v >= GIB else f"{v / MIB:,.2f} MiB"


def render(fit: MemoryFit, console=None) -> None:
    """Answer first (what llama.cpp would allocate), then the estimator's figures and the gaps."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    c, r = fit.comparison, fit.record
    total = sum(v or 0 for v in (c.engine_weights_bytes, c.engine_kv_bytes, c.engine_compute_bytes))
    fa = "on" if c.flash_attn else "off"
    console.print(
        f"[bold]{c.model_id}[/] at {c.n_ctx:,} cells x {r.batch} sequence(s), n_ubatch {c.n_ubatch}, flash "
        f"attention {fa}, {c.kv_dtype} cache: llama.cpp would allocate [bold]{_fmt(total)}[/] of F16 "
        f"weights + KV + compute (GiB = 2^30 B)."
    )
    t = Table(
        title=f"{r.engine_version}: llama.cpp memory-fit pass (no_alloc), CPU backend, nothing allocated"
    )
    for col in ("", "llama.cpp", "estimator", "gap"):
        t.add_column(col, justify="right" if col else "left")
    rows = (
        ("weights (F16)", c.engine_weights_bytes, c.est_weights_bytes, c.weights_gap[1]),
        ("KV cache", c.engine_kv_bytes, c.est_kv_bytes, c.kv_gap[1]),
        ("compute buffer", c.engine_compute_bytes, c.est_compute_bytes, c.compute_gap[1]),
    )
    for name, eng, est, pct in rows:
        t.add_row(name, _fmt(eng), _fmt(est), "-" if pct is None else f"{pct:+.2f} %")
    t.add_row("output buffer (host)", _fmt(r.output_bytes), "-", "-")
    console.print(t)
    console.print(
        "The compute buffer is the installed build's own allocator layout on its CPU backend; a GPU "
        f"backend's graph can differ.  Estimator coefficients: {c.coefficients}."
    )
