"""Cost: USD per 1M output tokens at the aggregate throughput and for one stream, from a dated cloud rate (or
``--usd-per-hour``), and rent-vs-buy with electricity (estimator.physics.cost), with the hardware comparison
chart (``chart_data.hardware_comparison``)."""

from __future__ import annotations

from estimator.physics.cost import CostEstimate, estimate_cost
from estimator.render import charts
from estimator.render.blocks import Block, Table, usd
from estimator.render.htmlkit import Ctx, card, e, figure, section
from estimator.render.i18n import t
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
        f"decode of {spd.concurrency} sequences (no serving estimate)",
    )


def text(d: dict) -> Block:
    c = d["cost"]
    s = Block("cost", "Cost")
    if c["usd_per_hour"] is not None:
        src = (
            f"{c['rate_provider']} '{c['rate_instance']}', verified {c['rate_verified_date']}, "
            f"{c['rate_source_url']}"
            if c["rate_provider"]
            else c["rate_origin"]
        )
        s.lines.append(f"Hourly rate {usd(c['usd_per_hour'])}/h ({c['rate_origin']}: {src}).")
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


def html(ctx: Ctx) -> str:
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
    return f"<h3>{ctx.t('sec_hw_compare')}</h3>" + figure(svg)


UNIT = Unit(key="cost", type=CostEstimate, build=build, text=text, html=html)
