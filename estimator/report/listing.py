"""Row builders for ``python -m estimator list`` (plain lists; the CLI renders text / JSON / CSV).  ``fit``'s
rows and ranking are ``estimator.report.fit``."""

from __future__ import annotations

from estimator.specs import CHECKPOINT_QUANTS, GIB, SpecError

_ERRORS = (SpecError, ValueError, ArithmeticError)


def _r(x: float | None, nd: int = 2):
    return None if x is None else round(x, nd)


def list_rows(what: str) -> tuple[list[str], list[list]]:
    if what == "models":
        from estimator.catalog.data import all_models
        from estimator.report.sections.model import attention_label

        headers = [
            "id",
            "name",
            "hf_id",
            "architecture",
            "total_params",
            "active_params",
            "max_context",
            "attention",
            "checkpoint",
            "license",
            "verified",
        ]
        rows = [
            [
                m.id,
                m.name,
                m.hf_id,
                m.architecture,
                m.published_total_params,
                m.published_active_params,
                m.max_context,
                attention_label(m),
                CHECKPOINT_QUANTS.get(m.native_dtype, m.native_dtype),  # the format hf_id is published in
                m.license,
                m.verified,
            ]
            for m in all_models()
        ]
        return headers, rows
    if what == "hardware":
        from estimator.catalog.data import all_hardware

        headers = [
            "id",
            "name",
            "vendor",
            "family",
            "kind",
            "memory_gib",
            "bandwidth_gbs",
            "bf16_tflops",
            "fp8_tflops",
            "tdp_w",
            "price_usd",
            "status",
        ]
        rows = [
            [
                h.id,
                h.name,
                h.vendor,
                h.family,
                h.kind,
                _r(h.memory_bytes / GIB if h.memory_bytes else None),
                h.bandwidth_gbs,
                h.bf16_tflops,
                h.fp8_tflops,
                h.tdp_w,
                h.price_usd,
                h.status,
            ]
            for h in all_hardware()
        ]
        return headers, rows
    if what == "quants":
        from estimator.engines import engines_for
        from estimator.physics.quant import QUANTS, bits_per_weight

        headers = ["name", "default_type", "default_bits_per_weight", "engines", "description"]
        rows = []
        for q in QUANTS.values():
            try:
                bpw = _r(bits_per_weight(q.default_type), 4)
            except _ERRORS:
                bpw = None
            rows.append([q.name, q.default_type, bpw, ",".join(engines_for(q)), q.description])
        return headers, rows
    raise SpecError(f"unknown list {what!r}; one of models, hardware, quants")


# Text (terminal) view: a readable subset of the columns, short headers.  JSON / CSV keep every column.
TEXT_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "models": (("id", "id"), ("architecture", "architecture"), ("total_params", "params"),
               ("active_params", "active"), ("max_context", "max ctx"), ("attention", "attention"),
               ("checkpoint", "published as"), ("verified", "verified")),
    "hardware": (("id", "id"), ("kind", "kind"), ("family", "family"), ("memory_gib", "GiB"),
                 ("bandwidth_gbs", "GB/s"), ("bf16_tflops", "bf16 TFLOPS"), ("price_usd", "USD"),
                 ("status", "status")),
    "quants": (("name", "name"), ("default_type", "type"), ("default_bits_per_weight", "bits/w"),
               ("engines", "engines"), ("description", "description")),
}  # fmt: skip


def text_view(what: str, headers: list[str], rows: list[list]) -> tuple[list[str], list[list], list[str]]:
    """(headers, rows, footnotes) for the terminal: TEXT_COLUMNS of a listing (``fit``: its own view,
    estimator.report.fit)."""
    if what == "fit":
        from estimator.report.fit import text_view as fit_view

        return fit_view(headers, rows)
    cols = TEXT_COLUMNS[what]
    idx = {h: i for i, h in enumerate(headers)}
    return [c[1] for c in cols], [[r[idx[c[0]]] for c in cols] for r in rows], []
