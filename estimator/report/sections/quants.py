"""Quantization matrix: the configuration in every weight format (``ReportOptions.quants``, default all):
weights,
KV, total, verdict, estimated single-stream decode and the cheapest catalog configuration that holds it."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import engines_for, get_engine
from estimator.physics.quant import QUANTS, get_quant
from estimator.render.blocks import Block, Table, both, cand_cell, fit_cell, gib, speed_cell
from estimator.render.htmlkit import Ctx, e, section, table, verdict
from estimator.report.recommend import Candidate, Sizer, cheapest_fit, eligible
from estimator.report.sizing import SIZING_ERRORS, SpeedFigure
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class QuantRow:
    """One weight format: bytes, verdict, decode figure and cheapest fit; error: why it could not be sized."""

    quant: str
    description: str
    engines: tuple[str, ...]
    weights_bytes: int | None
    kv_bytes: int | None
    total_bytes: int | None
    verdict: str | None
    decode: SpeedFigure | None
    cheapest_fit: Candidate | None
    selected: bool
    error: str | None = None


def build(b: Build) -> tuple[QuantRow, ...]:
    hw, wl, options = b.hardware, b.workload, b.options
    rows = []
    for name in options.quants or tuple(QUANTS):
        q = get_engine(wl.engine).weight_format(get_quant(name))
        selected = q.name == b.quant.name
        try:
            m = b.sizing.memory(q, hw, wl)
            dec = b.sizing.decode(q, hw, wl)
        except SIZING_ERRORS as exc:
            rows.append(
                QuantRow(
                    quant=q.name, description=q.description, engines=engines_for(q), weights_bytes=None,
                    kv_bytes=None, total_bytes=None, verdict=None, decode=None, cheapest_fit=None,
                    selected=selected, error=str(exc),
                )
            )  # fmt: skip
            continue
        cheapest = None
        if options.hardware_catalog:
            floor = int(m.weights_bytes + m.kv_bytes)
            sizer = Sizer(b.model, q, wl, lambda mm, qq, hh, ww: b.sizing.memory(qq, hh, ww), None, floor)
            cheapest = cheapest_fit(sizer, eligible(options.hardware_catalog))
        rows.append(
            QuantRow(
                quant=q.name,
                description=q.description,
                engines=engines_for(q),
                weights_bytes=int(m.weights_bytes),
                kv_bytes=int(m.kv_bytes),
                total_bytes=int(m.total_bytes),
                verdict=m.verdict,
                decode=dec,
                cheapest_fit=cheapest,
                selected=selected,
            )
        )
    return tuple(rows)


def text(d: dict) -> Block:
    w = d["workload"]
    s = Block(
        "quant", f"Quantization matrix at {w['n_ctx']:,} tokens on {w['n_devices']} x {d['hardware']['id']}"
    )
    ok = [r for r in d["quant_matrix"] if not r["error"]]
    kv_same = len({r["kv_bytes"] for r in ok}) <= 1
    rows = []
    for r in d["quant_matrix"]:
        name = r["quant"] + (" *" if r["selected"] else "")
        if r["error"]:
            dash = ["–"] * (4 if kv_same else 5)
            rows.append([name, *dash[:-2], "error", *dash[-2:], ", ".join(r["engines"])])
            s.notes.append(f"{r['quant']}: {r['error']}")
            continue
        kv = [] if kv_same else [gib(r["kv_bytes"])]
        rows.append(
            [name, gib(r["weights_bytes"]), *kv, gib(r["total_bytes"]), fit_cell(r["verdict"]),
             speed_cell(r["decode"]), cand_cell(r["cheapest_fit"]), ", ".join(r["engines"])]
        )  # fmt: skip
    heads = ["quant", "weights GiB", *([] if kv_same else ["KV GiB"]), "total GiB", "fits"]
    heads += ["decode tok/s (est.)", "cheapest fit", "engines"]
    s.tables.append(Table(heads, rows))
    kv_line = f"KV cache {both(ok[0]['kv_bytes'])} in every row; " if kv_same and ok else ""
    s.lines.append(
        f"{kv_line}* = selected.  Decode speeds are estimated from the same coefficient set as the speed "
        "section.  Cheapest fit: lowest purchase price of 1, 2, 4 or 8 catalog devices (several only of "
        "GPUs / NPUs with an interconnect); device caveats are under Recommended hardware."
    )
    return s


def html(ctx: Ctx) -> str:
    head = [
        ctx.t("quant_format"),
        ctx.t("weights_gib"),
        ctx.t("kv_gib"),
        ctx.t("total_gib"),
        ctx.t("total_gb"),
        ctx.t("fit"),
        ctx.t("decode_speed"),
        ctx.t("cheapest_fit"),
    ]
    rows, cls = [], []
    for i, r in enumerate(ctx.get("quant_matrix") or []):
        p = f"quant_matrix.{i}"
        if r.get("error"):
            rows.append(
                [e(r.get("quant")), f'<span class="note">{e(r["error"])}</span>', "", "", "", "", "", ""]
            )
        else:
            cheap = r.get("cheapest_fit") or {}
            cheap_txt = (
                f"{cheap.get('n_devices', 1)}× {e(cheap.get('hardware_name'))}"
                if cheap
                else ctx.t("none_fits")
            )
            dec = (
                ctx.num(f"{p}.decode.tok_s", "tok_s") + (" *" if not r["decode"].get("calibrated") else "")
                if r.get("decode")
                else "—"
            )
            rows.append(
                [
                    f'<b>{e(r.get("quant"))}</b> <span class="note">{e(r.get("description"))}</span>',
                    ctx.num(f"{p}.weights_bytes"),
                    ctx.num(f"{p}.kv_bytes"),
                    ctx.num(f"{p}.total_bytes"),
                    ctx.num(f"{p}.total_bytes", "gb"),
                    verdict(ctx, f"{p}.verdict"),
                    dec,
                    cheap_txt,
                ]
            )
        cls.append("current" if r.get("selected") else "")
    note = f'<p class="note">* {ctx.t("uncalibrated")}</p>'
    return section("quant", ctx.t("sec_quant"), table(head, rows, {1, 2, 3, 4, 6}, cls) + note)


UNIT = Unit(key="quant_matrix", type=tuple[QuantRow, ...], build=build, text=text, html=html)
