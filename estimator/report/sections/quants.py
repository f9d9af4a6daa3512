"""Quantization matrix: the configuration in every weight format (``ReportOptions.quants``, default all):
weights,
KV, total, verdict, whether the engine runs it on this device (``support``: native | fallback | unsupported |
unlisted, estimator.physics.support), estimated single-stream decode (on its fallback path; none when it
does not run) and the cheapest catalog configuration that holds it and runs (estimator.report.recommend)."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import engines_for, get_engine
from estimator.physics.quant import QUANTS, get_quant
from estimator.physics.support import judge
from estimator.render.blocks import Block, Table, both, cand_cell, fit_cell, gib, speed_cell
from estimator.render.htmlkit import Ctx, e, section, table, verdict
from estimator.render.i18n import quant_description
from estimator.report.recommend import Candidate, Sizer, cheapest_fit, eligible, fb_mark
from estimator.report.sizing import SIZING_ERRORS, SpeedFigure
from estimator.report.units import Build, Unit
from estimator.specs import QuantSpec


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
    support: str = "native"
    # the sized engine serves the format from the model's published checkpoint (its own format, a dense dtype
    # of an unquantized checkpoint, FP8 quantized at load time: engines.base.checkpoint_args), not from a
    # checkpoint someone must publish in it; None for a llama.cpp GGUF recipe
    from_published: bool | None = None


def _judge_as(engine: str):
    """A support function judging with ``engine`` (the engine that loads the format), on the workload as that
    engine would run it (``EngineProfile.adopt``)."""
    profile = get_engine(engine)
    return lambda m, q, h, w: judge(m, q, h, profile.adopt(w))


def _memory_fn(sizing):
    """The memory function ``recommend.Sizer`` takes, bound to one Sizing."""
    return lambda _model, quant, hw, wl: sizing.memory(quant, hw, wl)


def row_quants(b: Build) -> tuple[QuantSpec, ...]:
    """The formats of the matrix: a GGUF file's own format first (when it is the one sized), then every
    catalog format of ``ReportOptions.quants`` (default all), sized from the architecture in the layout the
    sized engine loads (``EngineProfile.weight_format``)."""
    own = (b.quant,) if b.quant.from_file else ()
    profile = get_engine(b.workload.engine)  # each format in the layout the sized engine loads
    return own + tuple(profile.weight_format(get_quant(name)) for name in b.options.quants or tuple(QUANTS))


def build(b: Build) -> tuple[QuantRow, ...]:
    hw, wl, options = b.hardware, b.workload, b.options
    rows = []
    for q in row_quants(b):
        selected = q.name == b.quant.name
        sizing = b.sizing_for(q)
        try:
            m = sizing.memory(q, hw, wl)
            # support is judged with the engine that loads the format (the selected one when it does)
            wl_q = wl if get_engine(wl.engine).runs(q) else get_engine(engines_for(q)[0]).adopt(wl)
            sup = sizing.support(q, hw, wl_q).status
            dec = sizing.decode(q, hw, wl) if sup != "unsupported" else None
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
            sizer = Sizer(
                sizing.model, q, wl, _memory_fn(sizing), None, floor, _judge_as(wl_q.engine)
            )
            cheapest = cheapest_fit(sizer, eligible(options.hardware_catalog))
        rows.append(
            QuantRow(
                quant=q.name,
                description=q.description,
                engines=engines_for(q),
                from_published=get_engine(wl.engine).serves_published(b.model, q),
                weights_bytes=int(m.weights_bytes),
                kv_bytes=int(m.kv_bytes),
                total_bytes=int(m.total_bytes),
                verdict=m.verdict,
                decode=dec,
                cheapest_fit=cheapest,
                selected=selected,
                support=sup,
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
        if r["support"] == "unsupported":
            dec = "does not run"
        else:
            dec = speed_cell(r["decode"]) + (" fb" if r["support"] == "fallback" else "")
        rows.append(
            [name, gib(r["weights_bytes"]), *kv, gib(r["total_bytes"]), fit_cell(r["verdict"]),
             dec, cand_cell(r["cheapest_fit"]) + fb_mark(r["cheapest_fit"]), ", ".join(r["engines"])]
        )  # fmt: skip
    heads = ["quant", "weights GiB", *([] if kv_same else ["KV GiB"]), "total GiB", "fits"]
    heads += ["decode tok/s (est.)", "cheapest fit", "engines"]
    s.tables.append(Table(heads, rows))
    kv_line = f"KV cache {both(ok[0]['kv_bytes'])} in every row; " if kv_same and ok else ""
    s.lines.append(
        f"{kv_line}* = selected.  Decode speeds are estimated from the same coefficient set as the speed "
        "section; fb = the engine runs the format there on a fallback (part of it on a slower path), "
        "'does not run' = not at all (Engine support).  Cheapest fit: lowest purchase "
        "price of 1, 2, 4 or 8 catalog devices that run it (several only of GPUs / NPUs with an "
        "interconnect; one that falls back to the host CPU only when nothing else fits); device caveats are "
        "under Recommended hardware."
    )
    return s


def html(ctx: Ctx) -> str:
    """The matrix as a table narrow enough for the page: the KV column only when it differs between rows (else
    one line above the table), GiB only (GB is in the memory section), the cheapest fit as "N× id" on one
    line with the device's name as its title."""
    qm = ctx.get("quant_matrix") or []
    ok = [r for r in qm if not r.get("error")]
    kv_same = len({r["kv_bytes"] for r in ok}) <= 1
    head = [ctx.t("quant_format"), ctx.t("weights_gib"), *([] if kv_same else [ctx.t("kv_gib")])]
    head += [ctx.t("total_gib"), ctx.t("fit"), ctx.t("decode_speed"), ctx.t("cheapest_fit")]
    rows, cls = [], []
    for i, r in enumerate(qm):
        p = f"quant_matrix.{i}"
        if r.get("error"):
            blank = [""] * (len(head) - 2)
            rows.append([e(r.get("quant")), f'<span class="note">{e(r["error"])}</span>', *blank])
        else:
            cheap = r.get("cheapest_fit") or {}
            cheap_txt = (
                f'<span class="nowrap" title="{e(cheap.get("hardware_name"))}">'
                f"{cheap.get('n_devices', 1)}×&nbsp;{e(cheap.get('hardware_id'))}</span>" + e(fb_mark(cheap))
                if cheap
                else ctx.t("none_fits")
            )
            dec = (
                ctx.num(f"{p}.decode.tok_s", "tok_s") + (" *" if not r["decode"].get("calibrated") else "")
                if r.get("decode")
                else "—"
            )
            if r.get("support") in ("fallback", "unsupported"):
                dec += f' <span class="note">({e(r["support"])})</span>'

            rows.append(
                [
                    f'<b>{e(r.get("quant"))}</b> <span class="qdesc">'
                    f"{e(quant_description(r.get('description'), ctx.lang))}</span>",
                    ctx.num(f"{p}.weights_bytes"),
                    *([] if kv_same else [ctx.num(f"{p}.kv_bytes")]),
                    ctx.num(f"{p}.total_bytes"),
                    verdict(ctx, f"{p}.verdict", short=True),
                    dec,
                    cheap_txt,
                ]
            )
        cls.append("current" if r.get("selected") else "")
    numeric = set(range(1, len(head) - 3)) | {len(head) - 2}
    kv_line = ""
    if kv_same and ok:
        i = qm.index(ok[0])
        kv_line = f'<p class="note">{ctx.t("kv_every_row")}: {ctx.num(f"quant_matrix.{i}.kv_bytes")}</p>'
    note = f'<p class="note">* {ctx.t("uncalibrated")}</p>'
    return section("quant", ctx.t("sec_quant"), kv_line + table(head, rows, numeric, cls) + note)


UNIT = Unit(key="quant_matrix", type=tuple[QuantRow, ...], build=build, text=text, html=html)
