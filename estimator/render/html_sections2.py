"""Sections of the HTML report, part 2: speed, multi-device and offload, cost, fine-tuning, recommendations,
launch commands, notes and footer (part 1 and the shared helpers live in
``estimator.render.html_sections``)."""

from __future__ import annotations

from estimator.render import charts, i18n
from estimator.render.html_sections import (
    Ctx,
    _card,
    _coef,
    _figure,
    _interval,
    _link,
    _measured_chip,
    _section,
    _table,
    _verdict,
    e,
)
from estimator.render.i18n import t

_SPEEDS = (("decode", "decode"), ("prefill", "prefill"), ("aggregate", "aggregate"))


def speed(ctx: Ctx) -> str:
    if ctx.get("speed") is None:
        return _section("speed", ctx.t("sec_speed"), f'<p class="note">{ctx.t("no_data")}</p>')
    m = ctx.measured
    cards = []
    for key, label_key in _SPEEDS:
        p = f"speed.{key}"
        label = (
            ctx.t(label_key, n=ctx.get("speed.concurrency"))
            if key == "aggregate"
            else ctx.t(label_key)
            + (f" (pp{ctx.get('speed.prefill_prompt_tokens')})" if key == "prefill" else "")
        )
        chip = _measured_chip(ctx, m.best(key) if m and key != "aggregate" else None, key)
        cards.append(_card(label, ctx.num(f"{p}.tok_s", "tok_s"), _interval(ctx, p), _coef(ctx, p) + chip))
    cards.append(
        _card(
            ctx.t("ttft"),
            ctx.num("speed.ttft_s", "seconds"),
            f"{ctx.t('interval')} {ctx.num('speed.ttft_lo_s', 'seconds')} – "
            f"{ctx.num('speed.ttft_hi_s', 'seconds')}",
            _coef(ctx, "speed.prefill"),
        )
    )
    notes = "".join(
        f"<li>{e(n)}</li>" for n in [ctx.get("speed.basis", ""), *(ctx.get("speed.notes") or [])] if n
    )
    return _section(
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
    return _figure(svg, ctx.get("quant_matrix.0.decode.coefficients", ""))


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
            e(f"{r.source} · {r.origin}") + (f" · {_link(r.origin_source)}" if r.origin_source else ""),
        ]
        for r in ctx.measured.runs[:10]
    ]
    return f"<h3>{ctx.t('measured')}</h3>" + _table(head, rows, {1, 2})


def multi_device(ctx: Ctx) -> str:
    head = [
        ctx.t("n_devices"),
        ctx.t("split"),
        ctx.t("device") + " (GiB)",
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("decode"),
        ctx.t("aggregate", n=ctx.get("workload.concurrency")),
    ]
    rows, cls = [], []
    for i, r in enumerate(ctx.get("multi_device.rows") or []):
        p = f"multi_device.rows.{i}"
        rows.append(
            [
                ctx.num(f"{p}.n_devices", "int"),
                e(r.get("split")),
                ctx.num(f"{p}.per_device_total_bytes"),
                ctx.num(f"{p}.total_bytes"),
                _verdict(ctx, f"{p}.verdict"),
                ctx.num(f"{p}.decode_tok_s", "tok_s"),
                ctx.num(f"{p}.aggregate_tok_s", "tok_s"),
            ]
        )
        cls.append("current" if r.get("n_devices") == ctx.get("workload.n_devices") else "")
    o = "multi_device.offload"
    off = _table(
        [ctx.t("offload_bytes"), ctx.t("host"), "host GB/s", ctx.t("decode"), ctx.t("offload_penalty")],
        [
            [
                ctx.num(f"{o}.offload_bytes"),
                ctx.num(f"{o}.host_bytes"),
                ctx.num(f"{o}.host_bandwidth_gbs", "num1"),
                f"{ctx.num(f'{o}.decode_tok_s_all_on_device', 'tok_s')} → "
                f"{ctx.num(f'{o}.decode_tok_s_with_offload', 'tok_s')}",
                ctx.num(f"{o}.slowdown", "num2") + "×",
            ]
        ],
        {0, 1, 2, 3, 4},
    )
    return _section("multi", ctx.t("sec_multi"), _table(head, rows, {0, 2, 3, 5, 6}, cls) + off)


def cost(ctx: Ctx) -> str:
    c = "cost"
    src = ctx.get("cost.rate_source_url")
    rate_src = " · ".join(
        e(x)
        for x in (
            ctx.get("cost.rate_provider"),
            ctx.get("cost.rate_instance"),
            ctx.get("cost.rate_verified_date"),
            ctx.get("cost.rate_origin"),
        )
        if x
    )
    if src:
        rate_src += f' · <a href="{e(src)}" rel="noreferrer">{e(src)}</a>'
    cards = "".join(
        [
            _card(
                ctx.t("cost_per_1m"),
                ctx.num(f"{c}.usd_per_1m_output_tokens", "usd"),
                f"{ctx.t('aggregate', n=ctx.get('workload.concurrency'))}: "
                f"{ctx.num(f'{c}.aggregate_tok_s', 'tok_s')}",
            ),
            _card(ctx.t("usd_per_hour"), ctx.num(f"{c}.usd_per_hour", "usd"), rate_src),
            _card(
                ctx.t("purchase_price"),
                ctx.num(f"{c}.purchase_usd", "usd"),
                e(ctx.get("cost.purchase_origin")),
            ),
            _card(
                ctx.t("break_even"),
                ctx.num(f"{c}.break_even_months", "num1"),
                f"{ctx.t('power_month')}: {ctx.num(f'{c}.electricity_usd_per_month', 'usd')} · "
                f"{ctx.t('hours_per_day')}: {ctx.num(f'{c}.hours_per_day', 'num1')}",
            ),
        ]
    )
    notes = "".join(f"<li>{e(n)}</li>" for n in ctx.get("cost.notes") or [])
    return _section(
        "cost",
        ctx.t("sec_cost"),
        f'<div class="cards">{cards}</div><ul class="notes">{notes}</ul>' + _hw_chart(ctx),
    )


def _hw_chart(ctx: Ctx) -> str:
    """Hardware comparison: extras['hardware_comparison'] when given, else the recommendation candidates."""
    items = ctx.extras.get("hardware_comparison")
    if items is None:
        seen, items = set(), []
        for key in ("best_single", "best_value", "most_memory_per_dollar", "multi_device", "cheapest_cloud"):
            cand = ctx.get(f"recommendations.{key}")
            if cand and (cand["hardware_id"], cand["n_devices"]) not in seen:
                seen.add((cand["hardware_id"], cand["n_devices"]))
                items.append(cand)
    if not items:
        return ""
    from estimator.physics.cost import usd_per_million_tokens  # the estimator's own formula, not a copy

    rows_speed, rows_cost = [], []
    for cand in items:
        label = f"{cand['n_devices']}× {cand['hardware_name']}"
        tok_s, rate = cand.get("decode_tok_s"), cand.get("usd_per_hour")
        usd_1m = cand.get("usd_per_1m_output_tokens")
        if usd_1m is None and tok_s and rate:
            usd_1m = usd_per_million_tokens(rate, tok_s)
        rows_speed.append(charts.IntervalRow(label, tok_s, key=cand["hardware_id"]))
        rows_cost.append(charts.IntervalRow(label, usd_1m, key=cand["hardware_id"]))
    svg = charts.bar_panels(
        [
            charts.Panel(t("decode", ctx.lang), rows_speed, "tok/s", charts.style.BLUE),
            charts.Panel(t("cost_per_1m", ctx.lang), rows_cost, "USD", charts.style.BLUISH_GREEN),
        ],
        ctx.lang,
        t("chart_hw", ctx.lang),
    )
    return f"<h3>{ctx.t('sec_hw_compare')}</h3>" + _figure(svg)


def finetune(ctx: Ctx) -> str:
    head = [
        ctx.t("ft_method"),
        ctx.t("weights_gib"),
        ctx.t("ft_grad_opt"),
        ctx.t("ft_act"),
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("sec_recommend"),
    ]
    rows = []
    for i, r in enumerate(ctx.get("finetune") or []):
        p = f"finetune.{i}"
        grad_opt = (
            (r.get("adapter_bytes", 0) or 0) + r.get("gradients_bytes", 0) + r.get("optimizer_bytes", 0)
        )
        rec = r.get("recommended")
        fits = t("fits" if r.get("fits_selected") else "does not fit", ctx.lang)
        rows.append(
            [
                f"<b>{e(r.get('label'))}</b>",
                ctx.num(f"{p}.weights_bytes"),
                e(i18n.fmt_gib(grad_opt, ctx.lang)),
                ctx.num(f"{p}.activations_bytes"),
                ctx.num(f"{p}.total_bytes"),
                e(fits),
                e(f"{rec['n_devices']}× {rec['hardware_name']}") if rec else ctx.t("none_fits"),
            ]
        )
    notes = "".join(
        f"<li>{e(a)}</li>"
        for a in dict.fromkeys(a for r in ctx.get("finetune") or [] for a in r.get("assumptions", []))
    )
    return _section(
        "finetune",
        ctx.t("sec_finetune"),
        _table(head, rows, {1, 2, 3, 4}) + f'<ul class="notes">{notes}</ul>',
    )


_RECS = (
    ("best_single", "rec_best_single"),
    ("best_value", "rec_best_value"),
    ("most_memory_per_dollar", "rec_memory_per_dollar"),
    ("multi_device", "rec_multi"),
    ("cheapest_cloud", "sec_cost"),
)


def recommended(ctx: Ctx) -> str:
    cards = []
    for key, label in _RECS:
        p = f"recommendations.{key}"
        c = ctx.get(p)
        if not c:
            cards.append(_card(ctx.t(label), ctx.t("none_fits")))
            continue
        sub = (
            f"{ctx.num(p + '.memory_bytes', 'gib')} · {ctx.num(p + '.purchase_usd', 'usd')} · "
            f"{ctx.num(p + '.decode_tok_s', 'tok_s')}"
        )
        if c.get("usd_per_hour"):
            sub += f" · {ctx.num(p + '.usd_per_hour', 'usd')}/h {e(c.get('rate_provider') or '')}"
        cards.append(
            _card(
                ctx.t(label),
                e(f"{c['n_devices']}× {c['hardware_name']}"),
                sub,
                f'<div class="note">{e(c.get("reason"))}</div>',
            )
        )
    notes = "".join(f"<li>{e(n)}</li>" for n in ctx.get("recommendations.notes") or [])
    return _section(
        "recommend",
        ctx.t("sec_recommend"),
        f'<div class="cards">{"".join(cards)}</div><ul class="notes">{notes}</ul>',
    )


def launch(ctx: Ctx) -> str:
    out = []
    for cmd in ctx.get("launch") or []:
        notes = "".join(f"<li>{e(n)}</li>" for n in cmd.get("notes", []))
        out.append(
            f"<h3>{e(cmd.get('engine'))}</h3>"
            f'<pre data-engine="{e(cmd.get("engine"))}">{e(cmd.get("text"))}</pre>'
            f'<ul class="notes">{notes}</ul>'
        )
    return _section("launch", ctx.t("sec_launch"), "".join(out))


def notes(ctx: Ctx) -> str:
    items = [*(ctx.get("warnings") or []), *(ctx.get("model.notes") or [])]
    if not items:
        return ""
    return _section(
        "notes",
        ctx.t("sec_notes"),
        '<ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in items) + "</ul>",
    )


def footer(ctx: Ctx) -> str:
    coef = ctx.get("coefficients") or {}
    src = coef.get("path") or "prior"
    return (
        f"<footer>{ctx.t('generated', version=ctx.get('fitbench_version', ''))} · "
        f"{e(ctx.get('generated_utc'))}"
        f" · {ctx.t('coefficients')}: {e(src)} {e(coef.get('created_utc') or '')} · schema "
        f"{e(ctx.get('schema_version'))}</footer>"
    )
