"""The summary at the top of every report: what is sized on what, the verdict, the decode speed (rendered
only: its numbers are the other sections')."""

from __future__ import annotations

from estimator.render.blocks import Block, both, gib, pct, tok
from estimator.render.htmlkit import Ctx, e, verdict
from estimator.render.i18n import t
from estimator.report.units import Unit


def text(d: dict) -> Block:
    """The answer first: what is sized, the verdict with the memory figures, the single-stream decode."""
    m, w, mem, hw = d["model"], d["workload"], d["memory"], d["hardware"]
    s = Block("summary", f"{m['name']} on {w['n_devices']} x {hw['name']}")
    s.lines.append(
        f"{d['quant']} weights, {w['n_ctx']:,} tokens of context, KV {w['kv_dtype']}, engine {w['engine']}, "
        f"split {w['split']}, concurrency {w['concurrency']}."
    )
    s.lines.append(
        f"Verdict: **{mem['verdict']}** — needs {both(mem['total_bytes'])} of {both(mem['usable_bytes'])} "
        f"usable ({pct(mem['utilization'])} utilisation, headroom {gib(mem['headroom_bytes'])} GiB)."
    )
    sp = d.get("speed")
    if sp:
        s.lines.append(
            f"Decode ~{tok(sp['decode']['tok_s'])} tok/s (estimated; {sp['decode']['coefficients']})."
        )
    sup = d.get("support") or {}
    if sup.get("status") in ("fallback", "unsupported"):
        s.lines.append(f"Support: {sup['headline']}.")
    return s


# --- sections ----------------------------------------------------------------------------------------------
def html(ctx: Ctx) -> str:
    """The page header: title, the configuration and the memory verdict."""
    model, hw = ctx.get("model.name", ""), ctx.get("hardware.name", "")
    n = ctx.get("workload.n_devices", 1) or 1
    hw_label = f"{n}× {hw}" if n > 1 else hw
    lede = (
        f"{e(ctx.get('quant'))} · {ctx.t('context')}: {ctx.num('workload.n_ctx', 'int')} · "
        f"KV {e(ctx.get('workload.kv_dtype'))} · {e(ctx.get('workload.engine'))} · "
        f"{ctx.t('required')}: {ctx.num('memory.total_bytes', 'gib')} / {ctx.t('usable')}: "
        f"{ctx.num('memory.usable_bytes', 'gib')} — {verdict(ctx, 'memory.verdict')}"
    )
    return (
        f"<header><h1>{e(t('title_on', ctx.lang, model=model, hardware=hw_label))}</h1>"
        f'<p class="lede">{lede}</p><p class="note">{ctx.t("estimated_note")} {ctx.t("units_note")}</p>'
        "</header>"
    )


UNIT = Unit(key=None, text=text, html=html)
