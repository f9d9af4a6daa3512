"""Cost: USD per 1M output tokens at the aggregate throughput and for one stream, from a dated cloud rate (or
``--usd-per-hour``), and rent-vs-buy with electricity (estimator.physics.cost), with the hardware comparison
chart (``chart_data.hardware_comparison``)."""

from __future__ import annotations

from estimator.physics.cost import CostEstimate, estimate_cost
from estimator.render import charts
from estimator.render.blocks import Block, Table, usd
from estimator.render.htmlkit import Ctx, card, e, figure, section, table
from estimator.render.i18n import origin_label, t
from estimator.report.units import Build, Unit


def build(b: Build) -> CostEstimate:
    spd = b.get("speed")
    o = b.options
    aggregate, concurrency, basis = _operating_point(b)
    return estimate_cost(
        b.hardware,
        b.workload.n_devices,
        spd.decode.tok_s if spd else None,
        aggregate,
        o.rates,
        o.usd_per_hour,
        o.hours_per_day,
        o.kwh_price_usd,
        o.purchase_usd,
        concurrency,
        basis,
    )


def _operating_point(b: Build) -> tuple[float | None, int | None, str]:
    """(output tok/s, clients, basis) the aggregate cost is priced at: the serving section's SLO point; one
    client when none meets the SLO; the speed section's decode aggregate when there is no serving estimate."""
    sv = b.get("serving")
    if sv is not None and sv.slo_point is not None:
        p = sv.slo_point
        clients = f"{p.concurrency:,} client{'s' if p.concurrency != 1 else ''}"
        basis = (
            f"serving model at {clients}, the most within TTFT <= "
            f"{sv.slo_ttft_s * 1000:,.0f} ms and TPOT <= {sv.slo_tpot_s * 1000:,.0f} ms "
            f"({sv.isl:,} + {sv.osl:,}-token requests)"
        )
        return p.output_tok_s, p.concurrency, basis
    if sv is not None and sv.rows:
        p = sv.rows[0]
        return p.output_tok_s, p.concurrency, "serving model at one client (no concurrency meets the SLO)"
    spd = b.get("speed")
    if spd is None:
        return None, None, ""
    return (
        spd.aggregate.tok_s,
        spd.concurrency,
        f"decode of {spd.concurrency} sequence{'s' if spd.concurrency != 1 else ''} (no serving estimate)",
    )


def text(d: dict) -> Block:
    c = d["cost"]
    s = Block("cost", "Cost")
    if c["usd_per_hour"] is not None:
        s.lines.append(f"Hourly rate {usd(c['usd_per_hour'])}/h ({rate_label(c)}).")
    rows = [
        ["USD per 1M output tokens at the aggregate throughput", usd(c["usd_per_1m_output_tokens"])],
        ["aggregate throughput priced", f"{c['aggregate_tok_s'] or 0:,.0f} tok/s: {c['aggregate_basis']}"],
        ["USD per 1M output tokens, one stream", usd(c["usd_per_1m_output_tokens_single_stream"])],
        ["purchase price", f"{usd(c['purchase_usd'], 0)} ({c['purchase_origin']})"],
        ["power (device TDP)", "–" if c["power_w"] is None else f"{c['power_w']:,.0f} W"],
        ["active hours", f"{c['hours_per_day']:g} h/day = {c['hours_per_month']:,.1f} h/month"],
        ["electricity", f"{usd(c['electricity_usd_per_month'])}/month at {usd(c['kwh_price_usd'], 3)}/kWh"],
        ["renting the same hours", f"{usd(c['rental_usd_per_month'])}/month"],
        [
            "buy-vs-rent break-even",
            "never"
            if c["break_even_months"] is None and c["rental_usd_per_month"] and c["purchase_usd"]
            else "–"
            if c["break_even_months"] is None
            else f"{c['break_even_months']:,.1f} months",
        ],
    ]
    s.tables.append(Table(["item", "value"], rows))
    s.notes += [f"note: {n}" for n in c["notes"]]
    return s


def rate_label(c: dict) -> str:
    """Where the hourly rate came from, with its value when the user gave it (``--usd-per-hour 2.5``) and
    provider, instance, date and source for a cloud rate."""
    if c["rate_origin"] == "--usd-per-hour":
        return f"set with --usd-per-hour {c['usd_per_hour']:g}"
    if c["rate_provider"]:
        return (
            f"{c['rate_origin']}: {c['rate_provider']} '{c['rate_instance']}', verified "
            f"{c['rate_verified_date']}, {c['rate_source_url']}"
        )
    return c["rate_origin"]


def html(ctx: Ctx) -> str:
    c = "cost"
    src = ctx.get("cost.rate_source_url")
    rate_src = " · ".join(
        e(x)
        for x in (
            ctx.get("cost.rate_provider"),
            ctx.get("cost.rate_instance"),
            ctx.get("cost.rate_verified_date"),
            origin_label(ctx.get("cost.rate_origin") or "none", ctx.lang),
        )
        if x
    )
    if ctx.get("cost.rate_origin") == "--usd-per-hour":
        rate_src = f"--usd-per-hour {ctx.num('cost.usd_per_hour', 'usd')}"
    if src:
        host = src.split("//", 1)[-1].split("/", 1)[0] if src.startswith("http") else src
        rate_src += f' · <a href="{e(src)}" rel="noreferrer" title="{e(src)}">{e(host)}</a>'
    cards = "".join(
        [
            card(
                ctx.t("cost_per_1m"),
                ctx.num(f"{c}.usd_per_1m_output_tokens", "usd"),
                f"{ctx.t('aggregate', n=ctx.get('cost.aggregate_concurrency'))}: "
                f"{ctx.num(f'{c}.aggregate_tok_s', 'tok_s')}",
            ),
            card(ctx.t("usd_per_hour"), ctx.num(f"{c}.usd_per_hour", "usd"), rate_src),
            card(
                ctx.t("purchase_price"),
                ctx.num(f"{c}.purchase_usd", "usd"),
                e(ctx.get("cost.purchase_origin")),
            ),
            card(
                ctx.t("break_even"),
                ctx.num(f"{c}.break_even_months", "num1"),
                f"{ctx.t('power_month')}: {ctx.num(f'{c}.electricity_usd_per_month', 'usd')} · "
                f"{ctx.t('hours_per_day')}: {ctx.num(f'{c}.hours_per_day', 'num1')}",
            ),
        ]
    )
    notes = "".join(f"<li>{e(n)}</li>" for n in ctx.get("cost.notes") or [])
    return section(
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

    shown = chart_items(items)
    rows_speed, rows_cost = [], []
    for cand in shown:
        label = f"{cand['n_devices']}× {cand['hardware_id']}"  # ids: short enough to read whole
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
    caption = t("hw_top", ctx.lang, n=len(shown), total=len(items)) if len(shown) < len(items) else ""
    return f"<h3>{ctx.t('sec_hw_compare')}</h3>" + figure(svg, caption) + _hw_table(ctx, items)


CHART_TOP = 20


def chart_items(items: list[dict], top: int = CHART_TOP) -> list[dict]:
    """The configurations the chart draws: the ``top`` fastest (the list comes fastest first) and the chosen
    one wherever it ranks; the full list is the table under the chart."""
    shown = list(items[:top])
    shown += [c for c in items[top:] if c.get("selected")]
    return shown


_KINDS = ("gpu", "npu", "unified", "cpu")


def _hw_table(ctx: Ctx, items: list[dict]) -> str:
    """Every configuration in a folded table with a device-kind filter: radio inputs before the table and CSS
    rules in report.css (``#hwf-gpu:checked ~ .table-wrap tr:not(.kind-gpu)``), no script (the report is a
    static file)."""
    kinds = [k for k in _KINDS if any(c.get("kind") == k for c in items)]
    inputs = '<input type="radio" name="hwf" id="hwf-all" checked>' + "".join(
        f'<input type="radio" name="hwf" id="hwf-{k}">' for k in kinds
    )
    labels = f'<label for="hwf-all">{ctx.t("all")}</label>' + "".join(
        f'<label for="hwf-{k}">{ctx.t("kind_" + k)}</label>' for k in kinds
    )
    head = [ctx.t(k) for k in ("device", "decode_speed", "usd_per_hour", "cost_per_1m", "price_source")]
    rows, cls = [], []
    for i, c in enumerate(items):
        p = f"chart_data.hardware_comparison.{i}"
        rows.append(
            [
                e(f"{c['n_devices']}× {c['hardware_name']}"),
                ctx.num(f"{p}.decode_tok_s", "tok_s"),
                ctx.num(f"{p}.usd_per_hour", "usd"),
                ctx.num(f"{p}.usd_per_1m_output_tokens", "usd"),
                e(origin_label(c.get("rate_origin") or "none", ctx.lang)),
            ]
        )
        cls.append(f"kind-{c.get('kind', 'gpu')}" + (" current" if c.get("selected") else ""))
    return (
        f'<details class="hw-all"><summary>{ctx.t("hw_all", n=len(items))}</summary>{inputs}'
        f'<div class="filter" role="group">{labels}</div>'
        f"{table(head, rows, {1, 2, 3}, cls)}</details>"
    )


UNIT = Unit(key="cost", type=CostEstimate, build=build, text=text, html=html)
