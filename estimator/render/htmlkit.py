"""HTML building blocks of the report and the page: escaping, the render context, cards, tables, figures.

``Ctx`` carries the JSON report dict, the language, the measured runs and the chart data.  Every number taken
from the report is written with ``Ctx.num``: the element records the JSON path (``data-path``), the raw value
(``data-value``) and the format used (``data-fmt``), so a test can re-format the JSON value and compare it
with
the text shown.  Sections (estimator.report.sections) compose these helpers; nothing here knows a report
section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from estimator.catalog.measured import MeasuredMatches, MeasuredRun
from estimator.render import i18n
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


def verdict(ctx: Ctx, path: str, short: bool = False) -> str:
    """The verdict at ``path`` as a coloured pill; ``short`` (table cells) uses the short words with the long
    ones as its title."""
    v = ctx.get(path)
    if v is None:
        return "—"
    cls = {"fits": "fits", "fits with offload": "offload"}.get(v, "nofit")
    text = ctx.t(f"{cls}_short") if short else ctx.t(v)
    title = f' title="{ctx.t(v)}"' if short else ""
    return f'<span class="verdict {cls}" data-path="{e(path)}" data-value="{e(v)}"{title}>{text}</span>'


def coef(ctx: Ctx, path: str) -> str:
    """The coefficient label of a speed figure: calibrated family and runs, or the pooled prior."""
    label = ctx.get(f"{path}.coefficients", "")
    if ctx.lang != "en":
        from estimator.render.translate import tr

        label = tr(label, ctx.lang)
    calibrated = bool(ctx.get(f"{path}.calibrated"))
    n = ctx.get(f"{path}.n_points", 0) or 0
    state = t("calibrated", ctx.lang) if calibrated else t("uncalibrated", ctx.lang)
    runs = f" · {t('runs', ctx.lang, n=i18n.fmt_int(n, ctx.lang))}" if calibrated else ""
    return (
        f'<div class="coef{"" if calibrated else " prior"}" data-path="{e(path)}.coefficients" '
        f'data-calibrated="{str(calibrated).lower()}">{e(state)}{e(runs)} — {e(label)}</div>'
    )


def interval(ctx: Ctx, path: str) -> str:
    return (
        f'<span class="note">{ctx.t("interval")} {ctx.num(path + ".lo_tok_s", "sig")} – '
        f"{ctx.num(path + '.hi_tok_s', 'sig')} tok/s</span>"
    )


def measured_chip(ctx: Ctx, run: MeasuredRun | None, phase: str) -> str:
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


def card(label: str, big: str, sub: str = "", extra: str = "") -> str:
    return (
        f'<div class="card"><div class="label">{label}</div><div class="big">{big}</div>'
        f'<div class="sub">{sub}</div>{extra}</div>'
    )


def table(
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
    # the wrapper scrolls a table wider than the page (a phone) instead of widening the page
    inner = f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="table-wrap">{inner}</div>'


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2>{body}</section>'


def figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{e(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def link(text: str) -> str:
    parts = []
    for piece in str(text or "").split(" ; "):
        piece = piece.strip()
        if piece.startswith(("http://", "https://")):
            url = piece.split()[0]
            parts.append(f'<a href="{e(url)}" rel="noreferrer">{e(piece)}</a>')
        elif piece:
            parts.append(e(piece))
    return " ; ".join(parts) or "—"
