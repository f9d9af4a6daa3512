"""``python -m estimator fit``: which catalog models run on a device, ranked the way a user chooses.

Formats the engine cannot run on the device (``estimator.physics.support``) are left out; a fallback's speed
is estimated on its path and labelled so.  A model the engine runs in none of the formats there (its family
is not served on the device, or every format is refused) is left out of the ranking and counted in a note —
it is never "does not fit", which is a verdict about memory.  For every sizable catalog model that passes the
filters
(``FitQuery``: a substring of the id / Hugging Face id / architecture, a substring of the license, MoE or
dense only), the **pick** is the first format of ``quants`` (best quality first: BF16, FP8 (checkpoint
engines), Q8_0, ..., Q2_K; a
model published in a quantized format its engine loads as published, DeepSeek-V3 in FP8-BLOCK or gpt-oss in
MXFP4, starts at that format: ``model_formats``; a list the caller gives is kept as given), each as the
engine loads it (``weight_format``), that

* fits (memory verdict "fits"),
* leaves at least ``min_headroom_gib`` GiB of usable memory free, and
* decodes at least ``min_tok_s`` tokens/s (single stream, estimated, empty context: tg128 from depth 0).

When no format meets all three, the best format that fits is shown with what it misses ("below --min-tok-s",
"headroom below --min-headroom-gib").  When none fits and the model is a mixture of experts on an engine that
can keep experts in host RAM (llama.cpp), the routed experts of the fewest first layers go to host RAM
(``--n-cpu-moe k``, the smallest k that fits, found by bisection since memory falls as k grows) in the best
format from the engine's default down (Q4_K_M for llama.cpp: a BF16 model with every expert in host RAM is
no answer) whose decode meets ``min_tok_s``: verdict "fits with offload", the decode speed reading those
experts at host bandwidth, ``host_gib`` the host RAM it needs.

Ranking ("usefulness"): models that meet the criteria (those that fit, then those that need expert offload),
then those that miss one (same order), then those that do not fit; inside each group the largest model first
(total parameters counted from the architecture), then the better format, then the faster.  ``top`` keeps
the first N rows.

Context: a model whose maximum context is below the asked ``--ctx`` is left out (the notes say which); without
``--ctx`` the default 8,192 is clamped to each model's maximum, as ``report`` does.

Scalar calls (``estimator.report.sizing.Sizing``), one model at a time, stopping at the first format that
meets the criteria; no numpy (``estimator.physics.matrix`` was measured for this view and is not faster).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.specs import GIB, HardwareSpec, ModelSpec, SpecError, Workload

_ERRORS = (SpecError, ValueError, ArithmeticError)

# Quality order: the first format that meets the criteria is the model's pick (each engine tries those it
# loads: llama.cpp the GGUF recipes, a checkpoint engine BF16 and FP8, which it quantizes a bf16 checkpoint
# to at load time: vLLM / SGLang --quantization fp8)
FIT_QUANTS = ("BF16", "FP8", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "Q2_K")

HEADERS = [
    "rank",
    "model",
    "params_total_b",
    "params_active_b",
    "moe",
    "best_quant",
    "n_cpu_moe",
    "total_gib",
    "headroom_gib",
    "host_gib",
    "verdict",
    "meets",
    "misses",
    "decode_tok_s",
    "decode_lo_tok_s",
    "decode_hi_tok_s",
    "coefficients",
    "max_context",
    "license",
]


@dataclass(frozen=True)
class FitQuery:
    """What ``fit`` is asked: criteria (tok/s, GiB), filters and how many rows to keep.

    ctx_given: the user typed ``--ctx`` (models below it are left out) rather than taking the default
    (clamped to each model's maximum).  family / license: case-insensitive substrings; moe: True = MoE only,
    False = dense only, None = both; top: keep the first N rows (None = all).
    """

    min_tok_s: float = 0.0
    min_headroom_gib: float = 0.0
    family: str | None = None
    license: str | None = None
    moe: bool | None = None
    top: int | None = None
    ctx_given: bool = False
    quants: tuple[str, ...] = FIT_QUANTS


def _r(x: float | None, nd: int = 2):
    return None if x is None else round(x, nd)


def selected(model: ModelSpec, q: FitQuery) -> bool:
    """Whether a model passes the filters of ``q``."""
    if q.family:
        hay = " ".join(x for x in (model.id, model.hf_id or "", model.architecture, model.name) if x).lower()
        if q.family.lower() not in hay:
            return False
    if q.license and q.license.lower() not in (model.license or "").lower():
        return False
    return q.moe is None or (model.moe is not None) == q.moe


def _speed(sizing, quant, hw, wl):
    try:
        f = sizing.decode(quant, hw, wl)
    except _ERRORS:
        return None
    return f


def _row(model, params, quant, k, mem, verdict, meets, misses, fig):
    speed = [None, None, None, None] if fig is None else [
        _r(fig.tok_s, 1), _r(fig.lo_tok_s, 1), _r(fig.hi_tok_s, 1), fig.coefficients
    ]  # fmt: skip
    gib = [None, None, None] if mem is None else [
        _r(mem.total_bytes / GIB), _r(mem.headroom_bytes / GIB), _r(mem.host_bytes / GIB)
    ]  # fmt: skip
    return [
        None, model.id, *params, model.moe is not None, quant, k, *gib, verdict, meets, misses, *speed,
        model.max_context, model.license,
    ]  # fmt: skip


def model_formats(model: ModelSpec, qspecs: list, profile) -> list:
    """The formats tried for one model, best quality first: ``qspecs``; for a model published in a format
    other than the engine's default that the engine loads as published (DeepSeek-V3 in FP8-BLOCK, gpt-oss in
    MXFP4: ``EngineProfile.default_quant_for``), that format first, then the smaller of ``qspecs``, and the
    larger ones (upcasts of the published weights, no better than they are) last, for a device or backend
    where the published format does not run (vLLM's CPU backend has no MXFP4 / FP8)."""
    from estimator.physics.quant import bits_per_weight, get_quant

    own = profile.default_quant_for(model)
    if own == profile.default_quant or any(x.name == own for x in qspecs):
        return qspecs
    listed = get_quant(own)
    if not profile.runs(listed):
        return qspecs
    bits = bits_per_weight(listed.default_type)
    smaller = [x for x in qspecs if bits_per_weight(x.default_type) < bits]
    upcasts = [x for x in qspecs if x not in smaller]  # last: where the published format does not run
    return [profile.weight_format(listed), *smaller, *upcasts]


def fit_rows(hw: HardwareSpec, workload: Workload, table, query: FitQuery | None = None):
    """(headers, rows, notes): every selected catalog model with its pick, ranked (module doc)."""
    from estimator.catalog.data import all_models
    from estimator.engines import get_engine
    from estimator.physics import support
    from estimator.physics.limits import validate_workload
    from estimator.physics.quant import get_quant, kv_type
    from estimator.physics.weights import weight_breakdown
    from estimator.report.sizing import Sizing

    q = query or FitQuery()
    kv_type(workload.kv_dtype)  # an unknown KV dtype is bad input (SpecError), not "does not fit" for all
    profile = get_engine(workload.engine)
    # as the engine loads each format (vLLM / SGLang: norms in the checkpoint dtype, MXFP4 experts only)
    qspecs = [profile.weight_format(x) for x in (get_quant(n) for n in q.quants) if profile.runs(x)]
    rank_q = {x.name: i for i, x in enumerate(qspecs)}
    names = [x.name for x in qspecs]
    start = names.index(profile.default_quant) if profile.default_quant in names else 0
    offload_quants = qspecs[start:]  # expert offload from the engine's default format down
    min_head = q.min_headroom_gib * GIB
    # meets the criteria: fits, with expert offload; misses one: fits, with expert offload; does not fit
    groups: list[list] = [[], [], [], [], []]
    too_short: list[str] = []
    cannot_run: list[str] = []  # no format of ``quants`` runs on this engine / backend / device
    filtered = 0
    for model in all_models():
        if not selected(model, q):
            filtered += 1
            continue
        if workload.n_ctx > model.max_context:
            if q.ctx_given:
                too_short.append(model.id)
                continue
            wl = replace(workload, n_ctx=model.max_context)
        else:
            wl = workload
        validate_workload(model, wl, allow_overlong=True)  # context <= 0, devices < 1 ...: SpecError
        ph = Sizing(model, table)
        wb = weight_breakdown(model, qspecs[0]) if qspecs else None
        params = [_r(wb.n_params_total / 1e9), _r(wb.n_params_active / 1e9)] if wb else [None, None]
        pick = fallback = None
        runnable = False  # some format runs there (memory aside)
        formats = model_formats(model, qspecs, profile) if q.quants == FIT_QUANTS else qspecs
        for quant in formats:
            if not support.runs(model, quant, hw, wl):  # the engine cannot run it there (physics.support)
                continue
            runnable = True
            try:
                m = ph.memory(quant, hw, wl)
            except _ERRORS:
                continue
            if m.verdict != "fits":
                continue
            fig = _speed(ph, quant, hw, wl)
            misses = []
            if m.headroom_bytes < min_head:
                misses.append("headroom below --min-headroom-gib")
            if q.min_tok_s and (fig is None or fig.tok_s < q.min_tok_s):
                misses.append("below --min-tok-s")
            why = "; ".join(misses) or None
            row = _row(model, params, quant.name, None, m, m.verdict, not misses, why, fig)
            if not misses:
                pick = row
                break
            fallback = fallback or row
        if pick is not None:
            groups[0].append(pick)
            continue
        if fallback is not None:
            groups[2].append(fallback)
            continue
        if not runnable:  # not a memory verdict: the support table says it does not run here at all
            cannot_run.append(model.id)
            continue
        offload = None
        if model.moe is not None and profile.moe_cpu_offload:  # the engine can keep experts in host RAM
            # from the engine's default format down; a model published in another format from that one
            # (gpt-oss-120b: MXFP4 experts in host RAM, not a larger Q4_K_M)
            own = formats[0] if formats and formats[0].name not in names else None  # model_formats' own
            for quant in [own, *(x for x in formats[1:] if x in offload_quants)] if own else offload_quants:
                if not support.runs(model, quant, hw, replace(wl, moe_offload_layers=model.n_layers)):
                    continue
                got = ph.min_moe_offload(quant, hw, wl)
                if got is None:
                    continue
                k, m = got
                fig = _speed(ph, quant, hw, replace(wl, moe_offload_layers=k))
                slow = bool(q.min_tok_s) and (fig is None or fig.tok_s < q.min_tok_s)
                row = _row(model, params, quant.name, k, m, m.verdict, not slow,
                           "below --min-tok-s" if slow else None, fig)  # fmt: skip
                offload = offload or row
                if not slow:
                    offload = row
                    break
        if offload is not None:
            groups[1 if offload[HEADERS.index("meets")] else 3].append(offload)
        else:
            groups[3].append(_row(model, params, None, None, None, "does not fit", False, None, None))

    idx = {h: i for i, h in enumerate(HEADERS)}

    def usefulness(r):
        return (
            -(r[idx["params_total_b"]] or 0.0),
            rank_q.get(r[idx["best_quant"]], len(rank_q)),
            -(r[idx["decode_tok_s"]] or 0.0),
            r[idx["model"]],
        )

    rows = []
    for g in groups[:4]:
        rows += sorted(g, key=usefulness)
    rows += sorted(groups[4], key=lambda r: r[idx["model"]])
    for i, r in enumerate(rows):
        r[0] = i + 1
    notes = []
    if too_short:
        notes.append(
            f"left out: {len(too_short)} model(s) whose maximum context is below {workload.n_ctx:,} tokens "
            f"({', '.join(too_short)})"
        )
    if cannot_run:
        some = ", ".join(cannot_run[:3]) + (", ..." if len(cannot_run) > 3 else "")
        notes.append(
            f"{len(cannot_run)} model(s) left out: the engine cannot run them on this device (support table; "
            f"{some})"
        )
    if filtered:
        notes.append(f"{filtered} model(s) filtered out by --model-family / --license / --moe / --dense")
    if q.top is not None and len(rows) > q.top:
        notes.append(f"showing the top {q.top} of {len(rows)} (--top)")
        rows = rows[: q.top]
    return list(HEADERS), rows, notes


def text_view(headers: list[str], rows: list[list]) -> tuple[list[str], list[list], list[str]]:
    """(headers, rows, footnotes) for the terminal: the pick, its memory, the decode interval in one cell and
    the coefficient labels as numbered footnotes."""
    idx = {h: i for i, h in enumerate(headers)}
    labels: list[str] = []
    out = []
    for r in rows:
        tok, lo, hi, coef = (r[idx[k]] for k in ("decode_tok_s", "decode_lo_tok_s", "decode_hi_tok_s",
                                                 "coefficients"))  # fmt: skip
        speed = None if tok is None else f"{tok:,.1f} ({lo:,.1f}–{hi:,.1f})"
        ref = None
        if coef:
            if coef not in labels:
                labels.append(coef)
            ref = f"[{labels.index(coef) + 1}]"
        quant = r[idx["best_quant"]]
        if quant and r[idx["n_cpu_moe"]]:
            quant = f"{quant} --n-cpu-moe {r[idx['n_cpu_moe']]}"
        verdict = r[idx["verdict"]]
        if r[idx["misses"]]:
            verdict = f"{verdict}; {r[idx['misses']]}"
        params = r[idx["params_total_b"]]
        if r[idx["moe"]] and params is not None:
            params = f"{params} ({r[idx['params_active_b']]} act.)"
        mem = [r[idx["total_gib"]], r[idx["headroom_gib"]]]
        out.append([r[idx["rank"]], r[idx["model"]], params, quant, *mem, verdict, speed, ref])
    heads = ["#", "model", "params B", "quant", "total GiB", "headroom GiB", "verdict",
             "decode tok/s (est., interval)", "coef."]  # fmt: skip
    notes = [f"[{i + 1}] {lab}" for i, lab in enumerate(labels)]
    return heads, out, notes
