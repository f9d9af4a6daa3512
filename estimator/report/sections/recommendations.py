"""Recommended hardware from the catalog (estimator.report.recommend): best single device, best value, most
memory per dollar, multi-device and the cheapest cloud offer that hold the configuration, with the caveats of
every device the report names."""

from __future__ import annotations

from estimator.render.blocks import Block, Table, cand_cell, gib, tok, usd
from estimator.render.htmlkit import Ctx, card, e, section
from estimator.report.recommend import Recommendations, Sizer, device_notes, fb_mark, recommend
from estimator.report.units import Build, Unit


def build(b: Build) -> Recommendations:
    ph = b.sizing
    memory_fn = lambda mm, qq, hh, ww: ph.memory(qq, hh, ww)  # noqa: E731
    sizer = Sizer(b.model, b.quant, b.workload, memory_fn, ph.decode_tok_s, b.floor_bytes)
    recs = recommend(sizer, b.hardware, b.options.hardware_catalog, b.options.rates)
    # caveats of the devices the quant matrix and the fine-tuning table name too
    elsewhere = [r.cheapest_fit.hardware_id for r in b.get("quant_matrix") if r.cheapest_fit is not None]
    elsewhere += [r.recommended.hardware_id for r in b.get("finetune") if r.recommended is not None]
    extra = [n for n in device_notes(elsewhere) if n not in recs.notes]
    return recs._replace(notes=recs.notes + tuple(extra)) if extra else recs


def text(d: dict) -> Block:
    r = d["recommendations"]
    s = Block("recommendations", "Recommended hardware (catalog)")
    rows = []
    picks = (
        ("best_single", "best single device"),
        ("best_value", "best value"),
        ("most_memory_per_dollar", "most memory per dollar"),
        ("multi_device", "multi-device"),
        ("cheapest_cloud", "cheapest cloud"),
    )
    for key, label in picks:
        c = r[key]
        if not c:
            rows.append([label, "none", "–", "–", "–", "–"])
            continue
        price = usd(c["usd_per_hour"]) + "/h" if c["usd_per_hour"] else usd(c["purchase_usd"], 0)
        mem, need = gib(c["memory_bytes"]), gib(c["required_bytes"])
        rows.append([label, cand_cell(c) + fb_mark(c), mem, need, price, tok(c["decode_tok_s"])])
        s.notes.append(f"{label}: {c['n_devices']}× {c['hardware_name']} — {c['reason']}")
    heads = ["pick", "configuration", "memory GiB", "needs GiB", "price", "decode tok/s (est.)"]
    s.tables.append(Table(heads, rows))
    if any(fb_mark(r[k]) for k, _ in picks):
        s.lines.append("fb = runs on a support fallback there (what falls back: the pick's note).")
    s.notes += [f"note: {n}" for n in r["notes"]]
    return s


_RECS = (
    ("best_single", "rec_best_single"),
    ("best_value", "rec_best_value"),
    ("most_memory_per_dollar", "rec_memory_per_dollar"),
    ("multi_device", "rec_multi"),
    ("cheapest_cloud", "sec_cost"),
)


def html(ctx: Ctx) -> str:
    cards = []
    for key, label in _RECS:
        p = f"recommendations.{key}"
        c = ctx.get(p)
        if not c:
            cards.append(card(ctx.t(label), ctx.t("none_fits")))
            continue
        sub = (
            f"{ctx.num(p + '.memory_bytes', 'gib')} · {ctx.num(p + '.purchase_usd', 'usd')} · "
            f"{ctx.num(p + '.decode_tok_s', 'tok_s')}"
        )
        if c.get("usd_per_hour"):
            sub += f" · {ctx.num(p + '.usd_per_hour', 'usd')}/h {e(c.get('rate_provider') or '')}"
        cards.append(
            card(
                ctx.t(label),
                e(f"{c['n_devices']}× {c['hardware_name']}"),
                sub,
                f'<div class="note">{e(c.get("reason"))}</div>',
            )
        )
    notes = "".join(f"<li>{e(n)}</li>" for n in ctx.get("recommendations.notes") or [])
    return section(
        "recommend",
        ctx.t("sec_recommend"),
        f'<div class="cards">{"".join(cards)}</div><ul class="notes">{notes}</ul>',
    )


UNIT = Unit(key="recommendations", type=Recommendations, build=build, text=text, html=html)
