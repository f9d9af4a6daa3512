"""Speed (estimated): single-stream decode from an empty context (tg128), prefill, time to first token of a 4K
prompt and the aggregate throughput at the chosen concurrency with the KV cache half full (n_ctx / 2 tokens
per sequence; at concurrency 1 that is one stream at that depth, hence slower than the empty-context decode;
the labels say which), each with its interval and coefficient set (estimator.physics.speed.estimate_speed),
measured runs beside them in HTML."""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.physics import speed as speed_mod
from estimator.render import charts, i18n
from estimator.render.blocks import Block, Table, speed_cell, tok
from estimator.render.htmlkit import Ctx, card, coef, e, figure, interval, link, measured_chip, section, table
from estimator.render.i18n import t
from estimator.report.sizing import SIZING_ERRORS, SpeedFigure, from_estimate
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class SpeedSection:
    """Every speed figure of the report (tokens/s, seconds), estimated; calibrated: both phases' sets are."""

    decode: SpeedFigure
    prefill: SpeedFigure
    prefill_prompt_tokens: int
    ttft_s: float
    ttft_lo_s: float
    ttft_hi_s: float
    ttft_prompt_tokens: int
    aggregate: SpeedFigure
    concurrency: int
    per_sequence_tok_s: float
    # decode (tg128, empty context) with the routed experts of memory.moe_offload_layers layers in host RAM,
    # when that expert offload is what makes the configuration fit (Build.expert_offload); None otherwise
    moe_offload_decode: SpeedFigure | None
    calibrated: bool
    basis: str
    notes: tuple[str, ...]


def _offload_decode(b: Build) -> SpeedFigure | None:
    """Decode with the routed experts of the fewest layers that make it fit in host RAM
    (``Build.expert_offload``)."""
    if b.expert_offload is None:
        return None
    wl = replace(b.workload, moe_offload_layers=b.expert_offload[0])
    try:
        return b.sizing.decode(b.quant, b.hardware, wl)
    except SIZING_ERRORS:
        return None


def build(b: Build) -> SpeedSection | None:
    """The speed figures, or None (and ``b.speed_error``) when the device lacks the figures the physics
    needs."""
    wl = b.workload
    support = b.get("support")
    if support.status == "unsupported":  # no speed for what does not run (the support section says why)
        b.speed_error = f"it does not run: {support.headline}"
        return None
    try:
        sets = b.sizing.sets(b.quant, b.hardware, wl)
        s = speed_mod.estimate_speed(b.model, b.quant, b.hardware, wl, b.table, sets)
    except SIZING_ERRORS as exc:
        b.speed_error = str(exc)
        return None
    calibrated = bool(s.decode.calibrated and s.prefill.calibrated)
    if calibrated:
        basis = "estimated from calibrated coefficients"
    elif s.decode.calibrated and sets.unmodelled:  # the notes say why (speed.unmodelled_prefill)
        basis = (
            "decode estimated from calibrated coefficients; prefill of these weights not modelled on this "
            "hardware family (see the notes): wide interval"
        )
    elif s.decode.calibrated != s.prefill.calibrated:  # what text() marks PARTLY CALIBRATED
        basis = one_phase_basis(s.decode.calibrated)
    elif s.decode.basis or s.prefill.basis:
        basis = (
            "estimated from the covariates of similar devices (this hardware family is not calibrated): "
            "wide interval"
        )
    else:
        basis = "estimated from the pooled prior (UNCALIBRATED for this hardware family): wide interval"
    if support.speed_path:
        basis = f"estimated on the {support.speed_path} (UNCALIBRATED): wide interval"
    return SpeedSection(
        decode=from_estimate(s.decode),
        prefill=from_estimate(s.prefill),
        prefill_prompt_tokens=int(wl.n_prompt),
        ttft_s=s.ttft_s,
        ttft_lo_s=s.ttft_lo_s,
        ttft_hi_s=s.ttft_hi_s,
        ttft_prompt_tokens=s.ttft_prompt_tokens,
        aggregate=from_estimate(s.aggregate),
        concurrency=s.concurrency,
        per_sequence_tok_s=s.per_sequence_tok_s,
        moe_offload_decode=_offload_decode(b),
        calibrated=calibrated,
        basis=basis,
        notes=tuple(s.notes),
    )


def one_phase_basis(decode_calibrated: bool) -> str:
    """The basis line when exactly one phase is calibrated (a device measured only in decode, e.g. from
    llama-bench -pg -b 1 runs): ``decode_calibrated`` says which."""
    done, todo = ("decode", "prefill") if decode_calibrated else ("prefill", "decode")
    return (
        f"{done} estimated from calibrated coefficients; {todo} from the covariates of similar devices (no "
        f"{todo} measurement of this hardware family): wide interval"
    )


def text(d: dict) -> Block:
    sp = d.get("speed")
    s = Block("speed", "Speed (estimated)")
    if not sp:
        if d.get("support", {}).get("status") == "unsupported":
            s.lines.append("No speed estimate: the configuration does not run (see Engine support).")
        else:
            s.lines.append("No speed estimate for this device (missing bandwidth or TFLOPS).")
        return s
    partly = sp["decode"]["calibrated"] != sp["prefill"]["calibrated"]
    head = "" if sp["calibrated"] else "**PARTLY CALIBRATED** — " if partly else "**UNCALIBRATED** — "
    s.lines.append(head + sp["basis"] + ".")
    ttft = f"{sp['ttft_s'] * 1000:,.0f} ms ({sp['ttft_lo_s'] * 1000:,.0f}–{sp['ttft_hi_s'] * 1000:,.0f})"
    half = f"{d['workload']['n_ctx'] // 2:,}"  # the aggregate's cache depth: half of n_ctx
    rows = [
        [
            "decode, one stream, empty context (tg128)",
            speed_cell(sp["decode"]) + " tok/s",
            sp["decode"]["coefficients"],
        ],
        [
            f"prefill (pp{sp['prefill_prompt_tokens']})",
            speed_cell(sp["prefill"]) + " tok/s",
            sp["prefill"]["coefficients"],
        ],
        [f"TTFT, {sp['ttft_prompt_tokens']:,}-token prompt", ttft, sp["prefill"]["coefficients"]],
        [
            f"aggregate at concurrency {sp['concurrency']}, KV half full ({half} tokens each)",
            speed_cell(sp["aggregate"]) + " tok/s",
            sp["aggregate"]["coefficients"],
        ],
        ["per sequence at that concurrency", tok(sp["per_sequence_tok_s"]) + " tok/s", ""],
    ]
    s.tables.append(Table(["metric", "estimate (interval)", "coefficients"], rows))
    s.notes += [f"note: {n}" for n in sp["notes"]]
    return s


_SPEEDS = (("decode", "decode"), ("prefill", "prefill"), ("aggregate", "aggregate"))


def html(ctx: Ctx) -> str:
    if ctx.get("speed") is None:
        return section("speed", ctx.t("sec_speed"), f'<p class="note">{ctx.t("no_data")}</p>')
    m = ctx.measured
    cards = []
    # in English: the fragment's text is localized once, by estimator.render.translate.translate_html
    half = i18n.fmt_int((ctx.get("workload.n_ctx") or 0) // 2)
    for key, label_key in _SPEEDS:
        p = f"speed.{key}"
        if key == "aggregate":  # measured with the cache half full; decode from an empty context
            label = f"{ctx.t(label_key, n=ctx.get('speed.concurrency'))} · {ctx.t('kv_half_full', n=half)}"
        elif key == "decode":
            label = f"{ctx.t(label_key)} · {ctx.t('empty_context')}"
        else:
            label = ctx.t(label_key) + f" (pp{ctx.get('speed.prefill_prompt_tokens')})"
        chip = measured_chip(ctx, m.best(key) if m and key != "aggregate" else None, key)
        cards.append(card(label, ctx.num(f"{p}.tok_s", "tok_s"), interval(ctx, p), coef(ctx, p) + chip))
    cards.append(
        card(
            ctx.t("ttft"),
            ctx.num("speed.ttft_s", "seconds"),
            f"{ctx.t('interval')} {ctx.num('speed.ttft_lo_s', 'seconds')} – "
            f"{ctx.num('speed.ttft_hi_s', 'seconds')}",
            coef(ctx, "speed.prefill"),
        )
    )
    notes = "".join(
        f"<li>{e(n)}</li>" for n in [ctx.get("speed.basis", ""), *(ctx.get("speed.notes") or [])] if n
    )
    return section(
        "speed",
        ctx.t("sec_speed"),
        f'<div class="cards">{"".join(cards)}</div>'
        + _speed_chart(ctx)
        + _measured_table(ctx)
        + f'<ul class="notes">{notes}</ul>',
    )


def _speed_chart(ctx: Ctx) -> str:
    rows = [r for r in ctx.get("quant_matrix") or [] if r.get("decode")]
    if not rows:
        return ""
    prefill = ctx.extras.get("prefill_by_quant") or {}
    measured = ctx.measured.best("decode") if ctx.measured else None
    dec_rows = [
        charts.IntervalRow(
            r["quant"],
            r["decode"]["tok_s"],
            r["decode"]["lo_tok_s"],
            r["decode"]["hi_tok_s"],
            measured.decode_tok_s if measured and r.get("selected") else None,
            r["quant"],
        )
        for r in rows
    ]
    panels = [charts.Panel(t("decode", ctx.lang), dec_rows, "tok/s", charts.style.BLUE)]
    if prefill:
        pre_rows = []
        for r in rows:
            f = prefill.get(r["quant"])
            pre_rows.append(
                charts.IntervalRow(
                    r["quant"],
                    f["tok_s"] if f else None,
                    f and f["lo_tok_s"],
                    f and f["hi_tok_s"],
                    None,
                    r["quant"],
                )
            )
        panels.append(charts.Panel(t("prefill", ctx.lang), pre_rows, "tok/s", charts.style.ORANGE))
    legend = [(t("measured", ctx.lang), charts.style.MEASURED_COLOR)] if measured else []
    svg = charts.interval_panels(panels, ctx.lang, t("chart_speed", ctx.lang), legend)
    return figure(svg, ctx.get("quant_matrix.0.decode.coefficients", ""))


def _origin(ctx: Ctx, origin: str) -> str:
    """A record's origin (measured | imported) in the page's language; another value as it is."""
    return ctx.t(f"run_{origin}") if origin in ("measured", "imported") else origin


def _measured_table(ctx: Ctx) -> str:
    if not ctx.measured or not ctx.measured.runs:
        return ""
    head = [ctx.t("measured"), ctx.t("prefill"), ctx.t("decode"), "KV", ctx.t("engine"), ctx.t("source")]
    rows = [
        [
            e(r.test_label),
            e(i18n.fmt_tok_s(r.prefill_tok_s, ctx.lang)),
            e(i18n.fmt_tok_s(r.decode_tok_s, ctx.lang)),
            e(r.kv_dtype),
            e(f"{r.engine} {r.engine_version}"),
            e(f"{r.source} · {_origin(ctx, r.origin)}")
            + (f" · {link(r.origin_source)}" if r.origin_source else ""),
        ]
        for r in ctx.measured.runs[:10]
    ]
    return f"<h3>{ctx.t('measured')}</h3>" + table(head, rows, {1, 2})


UNIT = Unit(key="speed", type=SpeedSection | None, build=build, text=text, html=html)
