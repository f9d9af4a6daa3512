"""Row builders for ``python -m estimator list`` and ``fit`` (plain lists; the CLI renders text/JSON/CSV).

``fit_rows``: for every sizable catalog model, its parameter count (counted from the architecture, 10^9) and
the first format of ``quants`` (best quality first) that the engine runs on the device (formats it cannot run
there, estimator.physics.support, are left out; a fallback's speed is estimated on its path and labelled so)
and whose memory verdict is ``"fits"``, with its total, headroom and estimated decode speed (single stream,
the coefficient set's label alongside).  Models
that fit in no format are listed last with verdict "does not fit".

Scalar calls, one model at a time, stopping at the first format that fits.  The vectorised
``estimator.physics.matrix`` was measured for this view and is not faster: it sizes every format of every
model
(weight recipes dominate: ~0.40 s for one device and 8 formats, plus ~0.2 s to import numpy) where this loop
stops early (~0.45 s for the whole command), so ``fit`` stays off numpy.
"""

from __future__ import annotations

from dataclasses import replace

from estimator.specs import GIB, SpecError

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


def fit_rows(hw, workload, table, quants: tuple[str, ...]) -> tuple[list[str], list[list]]:
    """Sorted rows: fitting models by decode speed (fastest first), then the rest by name."""
    from estimator.catalog.data import all_models
    from estimator.engines import get_engine
    from estimator.physics import support
    from estimator.physics.limits import validate_workload
    from estimator.physics.quant import get_quant, kv_type
    from estimator.physics.weights import weight_breakdown
    from estimator.report.sizing import Sizing

    kv_type(workload.kv_dtype)  # an unknown KV dtype is bad input (SpecError), not "does not fit" for all

    headers = [
        "model",
        "params_total_b",
        "best_quant",
        "total_gib",
        "headroom_gib",
        "verdict",
        "decode_tok_s",
        "decode_lo_tok_s",
        "decode_hi_tok_s",
        "coefficients",
    ]
    fitting, rest = [], []
    profile = get_engine(workload.engine)
    qspecs = [get_quant(q) for q in quants]
    for model in all_models():
        if workload.n_ctx > model.max_context:
            wl = replace(workload, n_ctx=model.max_context)
        else:
            wl = workload
        validate_workload(model, wl, allow_overlong=True)  # context <= 0, devices < 1 ...: SpecError
        ph = Sizing(model, table)
        params_b = None
        row = None
        for q in qspecs:
            if not profile.runs(q) or not support.runs(model, q, hw, wl):  # the engine cannot run it there
                continue
            try:
                m = ph.memory(q, hw, wl)
            except _ERRORS:
                continue
            if params_b is None:  # counted from the architecture (same for every format)
                params_b = _r(weight_breakdown(model, q).n_params_total / 1e9)
            if m.verdict == "fits":
                try:
                    f = ph.decode(q, hw, wl)
                    speed = [_r(f.tok_s, 1), _r(f.lo_tok_s, 1), _r(f.hi_tok_s, 1), f.coefficients]
                except _ERRORS:
                    speed = [None, None, None, None]
                gib = [_r(m.total_bytes / GIB), _r(m.headroom_bytes / GIB)]
                row = [model.id, params_b, q.name, *gib, m.verdict, *speed]
                break
        if row is None:
            rest.append([model.id, params_b, None, None, None, "does not fit", None, None, None, None])
        else:
            fitting.append(row)
    fitting.sort(key=lambda r: -(r[6] or 0.0))
    rest.sort(key=lambda r: r[0])
    return headers, fitting + rest


# Text (terminal) view: a readable subset of the columns, short headers.  JSON / CSV keep every column.
TEXT_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "models": (("id", "id"), ("architecture", "architecture"), ("total_params", "params"),
               ("active_params", "active"), ("max_context", "max ctx"), ("attention", "attention"),
               ("verified", "verified")),
    "hardware": (("id", "id"), ("kind", "kind"), ("family", "family"), ("memory_gib", "GiB"),
                 ("bandwidth_gbs", "GB/s"), ("bf16_tflops", "bf16 TFLOPS"), ("price_usd", "USD"),
                 ("status", "status")),
    "quants": (("name", "name"), ("default_type", "type"), ("default_bits_per_weight", "bits/w"),
               ("engines", "engines"), ("description", "description")),
}  # fmt: skip


def text_view(what: str, headers: list[str], rows: list[list]) -> tuple[list[str], list[list], list[str]]:
    """(headers, rows, footnotes) for the terminal: TEXT_COLUMNS of a listing, or for ``fit`` the decode
    interval in one cell and the coefficient labels as numbered footnotes."""
    if what == "fit":
        idx = {h: i for i, h in enumerate(headers)}
        labels: list[str] = []
        out = []
        for r in rows:
            tok, lo, hi, coef = (r[idx[k]] for k in ("decode_tok_s", "decode_lo_tok_s", "decode_hi_tok_s",
                                                     "coefficients"))
            speed = None if tok is None else f"{tok:,.1f} ({lo:,.1f}–{hi:,.1f})"
            ref = None
            if coef:
                if coef not in labels:
                    labels.append(coef)
                ref = f"[{labels.index(coef) + 1}]"
            out.append([r[idx["model"]], r[idx["params_total_b"]], r[idx["best_quant"]], r[idx["total_gib"]],
                        r[idx["headroom_gib"]], r[idx["verdict"]], speed, ref])
        heads = ["model", "params B", "quant", "total GiB", "headroom GiB", "verdict",
                 "decode tok/s (est., interval)", "coef."]
        notes = [f"[{i + 1}] {lab}" for i, lab in enumerate(labels)]
        return heads, out, notes
    cols = TEXT_COLUMNS[what]
    idx = {h: i for i, h in enumerate(headers)}
    return [c[1] for c in cols], [[r[idx[c[0]]] for c in cols] for r in rows], []
