"""Sections of the HTML report (used by ``estimator.render.html``), one function per report section.

Each function takes a ``Ctx`` (the JSON report dict, the language, measured runs and chart data) and returns
an HTML string.  Numbers come only from the report dict and are written with ``Ctx.num``: the element records
the JSON path (``data-path``), the raw value (``data-value``) and the format used (``data-fmt``), so a test
can re-format the JSON value and compare it with the text shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from estimator.catalog.measured import MeasuredMatches, MeasuredRun
from estimator.render import charts, i18n
from estimator.render.i18n import t

GIB = 2**30

FORMATS = {
    "gib": lambda v, lang: i18n.fmt_gib(v, lang),
    "gb": lambda v, lang: i18n.fmt_gb(v, lang),
    "tok_s": lambda v, lang: i18n.fmt_tok_s(v, lang),
    "sig": lambda v, lang: i18n.fmt_sig(v, lang),
    "pct": lambda v, lang: i18n.fmt_pct(v, lang),
    "int": lambda v, lang: i18n.fmt_int(v, lang),
    "usd": lambda v, lang: i18n.fmt_usd(v, lang),
    "seconds": lambda v, lang: i18n.fmt_seconds(v, lang),
    "num1": lambda v, lang: i18n.fmt_num(v, lang, 1),
    "num2": lambda v, lang: i18n.fmt_num(v, lang, 2),
}


def lookup(report: Any, path: str) -> Any:
    """The value at a dotted path of the report (``quant_matrix.3.decode.tok_s``); KeyError when absent."""
    node = report
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            raise KeyError(path)
    return node


def e(text: object) -> str:
    return escape("" if text is None else str(text), quote=True)


@dataclass
class Ctx:
    """Render context: the JSON report, the language, measured runs and optional chart data."""

    report: dict[str, Any]
    lang: str
    measured: MeasuredMatches | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str, default: Any = None) -> Any:
        try:
            return lookup(self.report, path)
        except (KeyError, IndexError, ValueError):
            return default

    def num(self, path: str, fmt: str = "gib", cls: str = "num") -> str:
        """A number of the report at ``path``, formatted and tagged with its path, raw value and format."""
        value = self.get(path)
        text = FORMATS[fmt](value, self.lang) if value is not None else "—"
        raw = "" if value is None else repr(value) if isinstance(value, float) else str(value)
        return (
            f'<span class="{cls}" data-path="{e(path)}" data-fmt="{fmt}" data-value="{e(raw)}">'
            f"{e(text)}</span>"
        )

    def t(self, key: str, **kw: object) -> str:
        return e(t(key, self.lang, **kw))


def _verdict(ctx: Ctx, path: str) -> str:
    v = ctx.get(path)
    if v is None:
        return "—"
    cls = {"fits": "fits", "fits with offload": "offload"}.get(v, "nofit")
    return f'<span class="verdict {cls}" data-path="{e(path)}" data-value="{e(v)}">{ctx.t(v)}</span>'


def _coef(ctx: Ctx, path: str) -> str:
    """The coefficient label of a speed figure: calibrated family and runs, or the pooled prior."""
    label = ctx.get(f"{path}.coefficients", "")
    calibrated = bool(ctx.get(f"{path}.calibrated"))
    n = ctx.get(f"{path}.n_points", 0) or 0
    state = t("calibrated", ctx.lang) if calibrated else t("uncalibrated", ctx.lang)
    runs = f" · {t('runs', ctx.lang, n=i18n.fmt_int(n, ctx.lang))}" if calibrated else ""
    return (
        f'<div class="coef{"" if calibrated else " prior"}" data-path="{e(path)}.coefficients" '
        f'data-calibrated="{str(calibrated).lower()}">{e(state)}{e(runs)} — {e(label)}</div>'
    )


def _interval(ctx: Ctx, path: str) -> str:
    return (
        f'<span class="note">{ctx.t("interval")} {ctx.num(path + ".lo_tok_s", "sig")} – '
        f"{ctx.num(path + '.hi_tok_s', 'sig')} tok/s</span>"
    )


def _measured_chip(ctx: Ctx, run: MeasuredRun | None, phase: str) -> str:
    if run is None:
        return ""
    value = getattr(run, f"{phase}_tok_s")
    src = f"{run.test_label}, {run.engine} {run.engine_version}, {run.source}"
    if run.origin_source:
        src += f" ({run.origin_source})"
    return (
        f'<div class="measured" data-measured="{phase}" data-value="{value!r}">{ctx.t("measured")}: '
        f'<b>{e(i18n.fmt_tok_s(value, ctx.lang))}</b> <span class="note">{e(src)}</span></div>'
    )


def _card(label: str, big: str, sub: str = "", extra: str = "") -> str:
    return (
        f'<div class="card"><div class="label">{label}</div><div class="big">{big}</div>'
        f'<div class="sub">{sub}</div>{extra}</div>'
    )


def _table(
    head: list[str], rows: list[list[str]], numeric: set[int], row_cls: list[str] | None = None
) -> str:
    th = "".join(f'<th class="n">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    body = []
    for r_i, row in enumerate(rows):
        cls = f' class="{row_cls[r_i]}"' if row_cls and row_cls[r_i] else ""
        tds = "".join(
            f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2>{body}</section>'


def _figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{e(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


# --- sections ----------------------------------------------------------------------------------------------
def header(ctx: Ctx) -> str:
    model, hw = ctx.get("model.name", ""), ctx.get("hardware.name", "")
    n = ctx.get("workload.n_devices", 1) or 1
    hw_label = f"{n}× {hw}" if n > 1 else hw
    lede = (
        f"{e(ctx.get('quant'))} · {ctx.t('context')}: {ctx.num('workload.n_ctx', 'int')} · "
        f"KV {e(ctx.get('workload.kv_dtype'))} · {e(ctx.get('workload.engine'))} · "
        f"{ctx.t('required')}: {ctx.num('memory.total_bytes', 'gib')} / {ctx.t('usable')}: "
        f"{ctx.num('memory.usable_bytes', 'gib')} — {_verdict(ctx, 'memory.verdict')}"
    )
    return (
        f"<header><h1>{e(t('title_on', ctx.lang, model=model, hardware=hw_label))}</h1>"
        f'<p class="lede">{lede}</p><p class="note">{ctx.t("estimated_note")} {ctx.t("units_note")}</p>'
        "</header>"
    )


def model_facts(ctx: Ctx) -> str:
    published = ctx.get("model.published_total_params")
    active_pub = ctx.get("model.published_active_params")
    rows = [
        (
            ctx.t("params_total"),
            ctx.num("model.params_total", "int")
            + (f' <span class="note">({e(published)})</span>' if published else ""),
        ),
        (
            ctx.t("params_active"),
            ctx.num("model.params_active", "int")
            + (f' <span class="note">({e(active_pub)})</span>' if active_pub else ""),
        ),
        (ctx.t("architecture"), e(f"{ctx.get('model.architecture')} ({ctx.get('model.arch_class') or '—'})")),
        (ctx.t("attention"), e(ctx.get("model.attention"))),
        (ctx.t("layers"), ctx.num("model.n_layers", "int")),
        (ctx.t("max_context"), ctx.num("model.max_context", "int")),
        (ctx.t("license"), e(ctx.get("model.license") or t("unknown", ctx.lang))),
        (ctx.t("source"), _link(ctx.get("model.source", ""))),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return _section("model", ctx.t("sec_model"), f'<dl class="facts">{dl}</dl>')


def _link(text: str) -> str:
    parts = []
    for piece in str(text or "").split(" ; "):
        piece = piece.strip()
        if piece.startswith(("http://", "https://")):
            url = piece.split()[0]
            parts.append(f'<a href="{e(url)}" rel="noreferrer">{e(piece)}</a>')
        elif piece:
            parts.append(e(piece))
    return " ; ".join(parts) or "—"


_COMPONENTS = ("weights", "kv", "runtime", "overhead")


def memory(ctx: Ctx) -> str:
    cards = "".join(
        [
            _card(
                ctx.t("required"), ctx.num("memory.total_bytes", "gib"), ctx.num("memory.total_bytes", "gb")
            ),
            _card(
                ctx.t("usable"),
                ctx.num("memory.usable_bytes", "gib"),
                f"{ctx.num('memory.physical_bytes', 'gib')} ({ctx.num('memory.physical_bytes', 'gb')})",
            ),
            _card(
                ctx.t("headroom"),
                ctx.num("memory.headroom_bytes", "gib"),
                f"{ctx.num('memory.utilization', 'pct')} {ctx.t('utilization').lower()}",
            ),
            _card(
                ctx.t("sec_verdict"),
                _verdict(ctx, "memory.verdict"),
                f"{ctx.t('kv_capacity')}: {ctx.num('memory.kv_capacity_tokens', 'int')}",
            ),
        ]
    )
    head = [ctx.t("component"), ctx.t("total") + " (GiB)", ctx.t("total") + " (GB)"]
    devices = ctx.get("memory.per_device") or []
    for d in devices:
        head.append(f"{ctx.t('device')} {d.get('index', 0)} (GiB)")
    rows = []
    for comp in (*_COMPONENTS, "total"):
        row = [ctx.t(comp), ctx.num(f"memory.{comp}_bytes", "gib"), ctx.num(f"memory.{comp}_bytes", "gb")]
        row += [ctx.num(f"memory.per_device.{i}.{comp}_bytes", "gib") for i in range(len(devices))]
        rows.append(row)
    usable_row = [
        ctx.t("usable"),
        ctx.num("memory.usable_bytes", "gib"),
        ctx.num("memory.usable_bytes", "gb"),
    ]
    usable_row += [ctx.num(f"memory.per_device.{i}.usable_bytes", "gib") for i in range(len(devices))]
    rows.append(usable_row)
    if ctx.get("memory.host_bytes"):
        rows.append(
            [ctx.t("host"), ctx.num("memory.host_bytes", "gib"), ctx.num("memory.host_bytes", "gb")]
            + [""] * len(devices)
        )
    table = _table(head, rows, set(range(1, len(head))))
    bars = [
        (
            f"{ctx.t('device')} {d.get('index', i)}",
            [(c, t(c, ctx.lang), d.get(f"{c}_bytes", 0) or 0) for c in _COMPONENTS],
            d.get("usable_bytes"),
        )
        for i, d in enumerate(devices)
    ]
    if ctx.get("memory.host_bytes"):
        bars.append(
            (t("host", ctx.lang), [("host", t("host", ctx.lang), ctx.get("memory.host_bytes"))], None)
        )
    chart = _figure(
        charts.memory_stack_chart(bars, ctx.lang, t("chart_memory", ctx.lang), t("usable_limit", ctx.lang)),
        ctx.get("memory.basis", ""),
    )
    return _section("memory", ctx.t("sec_memory"), f'<div class="cards">{cards}</div>{chart}{table}')


def kv(ctx: Ctx) -> str:
    head = [
        ctx.t("kv_dtype"),
        ctx.t("kv_gib"),
        ctx.t("kv_saving", dtype=""),
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("engine"),
    ]
    rows, cls = [], []
    for i, o in enumerate(ctx.get("kv.options") or []):
        p = f"kv.options.{i}"
        rows.append(
            [
                e(o.get("kv_dtype")),
                ctx.num(f"{p}.kv_bytes"),
                ctx.num(f"{p}.saving_bytes"),
                ctx.num(f"{p}.total_bytes"),
                _verdict(ctx, f"{p}.verdict"),
                e(", ".join(o.get("engines", []))),
            ]
        )
        cls.append("current" if o.get("kv_dtype") == ctx.get("kv.kv_dtype") else "")
    kinds = ", ".join(
        f"{k}: {i18n.fmt_gib(v, ctx.lang)}" for k, v in (ctx.get("kv.by_kind_bytes") or {}).items()
    )
    cards = "".join(
        [
            _card(
                ctx.t(
                    "kv_at_ctx", ctx=i18n.fmt_int(ctx.get("kv.n_ctx"), ctx.lang), dtype=ctx.get("kv.kv_dtype")
                ),
                ctx.num("kv.kv_bytes"),
                e(kinds),
            ),
            _card(
                ctx.t("kv_per_token"),
                ctx.num("kv.bytes_per_token", "int"),
                f"state: {ctx.num('kv.state_bytes', 'gib')}",
            ),
        ]
    )
    return _section(
        "kv", ctx.t("sec_kv"), f'<div class="cards">{cards}</div>' + _table(head, rows, {1, 2, 3}, cls)
    )


def context_scaling(ctx: Ctx) -> str:
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
                _verdict(ctx, f"{p}.verdict"),
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
    return _section("context", ctx.t("sec_context"), _figure(svg) + _table(head, rows, {0, 1, 2, 3, 4}, cls))


def _ctx_label(n: float) -> str:
    n = int(n)
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def quant_matrix(ctx: Ctx) -> str:
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
                    _verdict(ctx, f"{p}.verdict"),
                    dec,
                    cheap_txt,
                ]
            )
        cls.append("current" if r.get("selected") else "")
    note = f'<p class="note">* {ctx.t("uncalibrated")}</p>'
    return _section("quant", ctx.t("sec_quant"), _table(head, rows, {1, 2, 3, 4, 6}, cls) + note)
