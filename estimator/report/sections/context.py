"""Context scaling: total memory at each context of ``ReportOptions.contexts`` up to the model maximum, plus
the maximum and the chosen context (weights constant), with a chart per KV dtype (``chart_data``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.render import charts
from estimator.render.blocks import GIB, Block, Table, fit_cell, gb, gib
from estimator.render.htmlkit import Ctx, figure, section, table, verdict
from estimator.render.i18n import t
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class ContextRow:
    """Memory at one context (bytes); above_max: beyond the model's maximum context."""

    n_ctx: int
    kv_bytes: int
    total_bytes: int
    headroom_bytes: int
    verdict: str
    above_max: bool


def build(b: Build) -> tuple[ContextRow, ...]:
    model, wl, contexts = b.model, b.workload, b.options.contexts
    ctxs = sorted(
        {c for c in contexts if c <= model.max_context}
        | {wl.n_ctx}
        | ({model.max_context} if model.max_context < max(contexts) * 2 else set())
    )
    rows = []
    for c in ctxs:
        m = b.sizing.memory(b.quant, b.hardware, replace(wl, n_ctx=c))
        rows.append(
            ContextRow(
                n_ctx=c,
                kv_bytes=int(m.kv_bytes),
                total_bytes=int(m.total_bytes),
                headroom_bytes=int(m.headroom_bytes),
                verdict=m.verdict,
                above_max=c > model.max_context,
            )
        )
    return tuple(rows)


def text(d: dict) -> Block:
    s = Block("context", f"Context scaling ({d['quant']}, weights constant)")
    rows = [
        [f"{r['n_ctx']:,}" + (" (above max)" if r["above_max"] else ""), gib(r["kv_bytes"]),
         gib(r["total_bytes"]), gb(r["total_bytes"]), gib(r["headroom_bytes"]), fit_cell(r["verdict"])]
        for r in d["context_scaling"]
    ]  # fmt: skip
    s.tables.append(Table(["context", "KV GiB", "total GiB", "total GB", "headroom GiB", "fits"], rows))
    return s


def html(ctx: Ctx) -> str:
    head = [
        ctx.t("ctx_tokens"),
        ctx.t("kv_gib"),
        ctx.t("total_gib"),
        ctx.t("total_gb"),
        ctx.t("headroom"),
        ctx.t("fit"),
    ]
    rows, cls = [], []
    for i, r in enumerate(ctx.get("context_scaling") or []):
        p = f"context_scaling.{i}"
        rows.append(
            [
                ctx.num(f"{p}.n_ctx", "int"),
                ctx.num(f"{p}.kv_bytes"),
                ctx.num(f"{p}.total_bytes"),
                ctx.num(f"{p}.total_bytes", "gb"),
                ctx.num(f"{p}.headroom_bytes"),
                verdict(ctx, f"{p}.verdict"),
            ]
        )
        cls.append("current" if r.get("n_ctx") == ctx.get("workload.n_ctx") else "")
    by_kv = ctx.extras.get("context_by_kv")  # {kv_dtype: [[n_ctx, total_bytes], ...]} (docs/html.md)
    if by_kv:
        series = [(dt, [(c, b / GIB) for c, b in pts]) for dt, pts in by_kv.items()]
    else:
        sc = ctx.get("context_scaling") or []
        series = [(str(ctx.get("workload.kv_dtype")), [(r["n_ctx"], r["total_bytes"] / GIB) for r in sc])]
    svg = charts.line_chart(
        series,
        ctx.lang,
        t("chart_context", ctx.lang),
        _ctx_label,
        "GiB",
        (ctx.get("memory.usable_bytes", 0) / GIB, t("usable_limit", ctx.lang)),
    )
    return section("context", ctx.t("sec_context"), figure(svg) + table(head, rows, {0, 1, 2, 3, 4}, cls))


def _ctx_label(n: float) -> str:
    n = int(n)
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


UNIT = Unit(key="context_scaling", type=tuple[ContextRow, ...], build=build, text=text, html=html)
