"""Small inline-SVG chart helpers for the HTML report (no JavaScript, no external fonts or files).

Each function returns one ``<svg>`` element as a string, with a ``<title>`` for screen readers, a
``viewBox`` so CSS can scale it, colours from ``estimator.render.style`` and numbers formatted for the
language
(``estimator.render.i18n``).  Every bar / point carries ``data-value`` with the raw number it draws, so tests
can
check the picture against the report.

Charts:
* ``memory_stack_chart`` — memory per device as a horizontal stacked bar (weights, KV, runtime, overhead)
  against the device's usable memory (a dashed limit mark), in GiB.
* ``line_chart`` — y against x for several series (memory vs context per KV dtype), log2 x axis, optional
  horizontal limit line.
* ``interval_panels`` — one or more panels of horizontal bars with interval whiskers and optional measured
  markers (decode and prefill speed per quant).
* ``bar_panels`` — one or more panels of plain horizontal bars sharing row labels (hardware comparison:
  decode speed and cost per 1M tokens).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from estimator.render import style
from estimator.render.i18n import fmt_num, fmt_sig

WIDTH_PX = 720
ROW_PX = 22
BAR_PX = 14
CHAR_PX = 6.6  # average glyph advance of 12 px sans-serif, for sizing label columns


@dataclass(frozen=True)
class IntervalRow:
    """One bar with an interval: ``value`` inside [``lo``, ``hi``]; ``measured`` drawn as a black diamond."""

    label: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    measured: float | None = None
    key: str = ""  # identifier written to data-key (e.g. the quant name)


@dataclass(frozen=True)
class Panel:
    """A titled panel of rows for ``interval_panels`` / ``bar_panels``; ``unit`` labels its axis."""

    title: str
    rows: Sequence[IntervalRow]
    unit: str = ""
    color: str = style.BLUE


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _el(tag: str, text: str | None = None, **attrs: object) -> str:
    """One SVG element; attribute names use ``_`` for ``-`` (``stroke_width`` -> ``stroke-width``).

    Floats are written with 2 decimals; ``text`` is escaped; ``title`` becomes a child ``<title>`` tooltip.
    """
    title = attrs.pop("title", None)
    parts = []
    for k, v in attrs.items():
        if v is None:
            continue
        val = f"{v:.2f}" if isinstance(v, float) else str(v)
        parts.append(f'{k.rstrip("_").replace("_", "-")}="{_e(val)}"')
    inner = (f"<title>{_e(title)}</title>" if title is not None else "") + (
        _e(text) if text is not None else ""
    )
    head = f"<{tag} {' '.join(parts)}"
    return f"{head}>{inner}</{tag}>" if inner else f"{head}/>"


def _label_width(labels: Sequence[str], lo: int = 60, hi: int = 240) -> float:
    """Width of a label column: the longest label with the 10 % glyph margin ``_truncate`` allows, so a label
    that fits the column is never cut (only those longer than ``hi`` are)."""
    longest = max((len(s) for s in labels), default=0)
    return float(min(hi, max(lo, (longest + 2) * CHAR_PX * 1.1 + 6)))


def _truncate(label: str, width_px: float) -> str:
    max_chars = max(4, int(width_px / (CHAR_PX * 1.1)) - 1)  # 10 % margin for wide glyphs
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError("tick range must be finite")
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _svg_open(height: float, title: str, css_class: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css_class}" role="img" '
        f'viewBox="0 0 {WIDTH_PX} {height:.0f}" width="{WIDTH_PX}" height="{height:.0f}" '
        f'font-family="{_e(style.FONT_STACK)}" font-size="{style.FONT_SIZE_PX}" fill="{style.TEXT_COLOR}">'
        f"<title>{_e(title)}</title>"
    )


def _legend(items: Sequence[tuple[str, str]], x: float, y: float) -> tuple[str, float]:
    """A legend of colour swatches (wrapping at the chart width); returns (svg, height used)."""
    out = []
    cx, cy = x, y
    for name, color in items:
        w = 18 + len(name) * CHAR_PX + 16
        if cx + w > WIDTH_PX - 8 and cx > x:
            cx, cy = x, cy + 18
        out.append(_el("rect", x=cx, y=cy - 9, width=12, height=12, fill=color))
        out.append(_el("text", name, x=cx + 17, y=cy + 1))
        cx += w
    return "".join(out), cy - y + 18


def _text_px(text: str, size_px: float = style.SMALL_SIZE_PX) -> float:
    """Estimated width of ``text`` in pixels at ``size_px`` (CHAR_PX is the 12 px average advance)."""
    return len(text) * CHAR_PX * size_px / style.FONT_SIZE_PX


def spaced_labels(
    positions: Sequence[tuple[float, str]], lo_x: float, hi_x: float, size_px: float = style.SMALL_SIZE_PX
) -> list[tuple[float, str, str]]:
    """(x, text, anchor) of the axis labels that can be drawn without colliding: centred labels, left to
    right, each kept only when it clears the last kept one by 4 px; a label that would cross ``lo_x`` /
    ``hi_x`` is anchored at its start / end instead (so panel edges and the SVG border do not cut or overlap
    it)."""
    out: list[tuple[float, str, str]] = []
    right_edge = float("-inf")
    for x, text in positions:
        w = _text_px(text, size_px)
        anchor, left, right = "middle", x - w / 2, x + w / 2
        if left < lo_x:
            anchor, left, right = "start", x, x + w
        elif right > hi_x:
            anchor, left, right = "end", x - w, x
        if left < right_edge + 4:
            continue
        out.append((x, text, anchor))
        right_edge = right
    return out


def _vgrid(
    ticks: Sequence[float],
    sx: Callable[[float], float],
    top: float,
    bottom: float,
    label: Callable[[float], str],
    lo_x: float = 0.0,
    hi_x: float = WIDTH_PX,
) -> list[str]:
    """Vertical grid lines with tick labels under the axis (labels that would collide are left out:
    ``spaced_labels``)."""
    out = [_el("line", x1=sx(tv), y1=top, x2=sx(tv), y2=bottom, stroke=style.GRID_COLOR) for tv in ticks]
    for x, text, anchor in spaced_labels([(sx(tv), label(tv)) for tv in ticks], lo_x, hi_x):
        out.append(
            _el(
                "text",
                text,
                x=x,
                y=bottom + 13,
                text_anchor=anchor,
                font_size=style.SMALL_SIZE_PX,
                fill=style.MUTED_TEXT_COLOR,
            )
        )
    return out


def memory_stack_chart(
    devices: Sequence[tuple[str, Sequence[tuple[str, str, float]], float | None]],
    lang: str,
    title: str,
    usable_label: str = "usable",
) -> str:
    """Stacked horizontal bars of memory per device, in GiB.

    ``devices``: (device label, [(component key, component label, bytes)], usable bytes or None).
    Component colours come from ``style.MEMORY_COLORS`` by key.  The dashed vertical mark on each row is that
    device's usable memory; a bar longer than its mark does not fit.
    """
    gib = 2**30
    left = _label_width([d[0] for d in devices], hi=200)
    right, top = 16.0, 14.0
    totals = [sum(b for _, _, b in parts) for _, parts, _ in devices]
    usables = [u for _, _, u in devices if u]
    ticks = nice_ticks(0, max(totals + usables + [1.0]) / gib)
    span = ticks[-1] or 1.0
    plot_w = WIDTH_PX - left - right
    axis_y = top + len(devices) * ROW_PX + 8

    def sx(v_gib: float) -> float:
        return left + plot_w * v_gib / span

    body = _vgrid(ticks, sx, top, axis_y, lambda v: fmt_num(v, lang, 0 if span >= 10 else 1), left, WIDTH_PX)
    seen: dict[str, str] = {}
    for i, (label, parts, usable) in enumerate(devices):
        y = top + 4 + i * ROW_PX
        body.append(_el("text", _truncate(label, left), x=left - 6, y=y + BAR_PX - 3, text_anchor="end"))
        x = 0.0
        for key, name, nbytes in parts:
            if nbytes <= 0:
                continue
            color = style.MEMORY_COLORS.get(key, style.GREY)
            seen.setdefault(name, color)
            w = nbytes / gib
            body.append(
                _el(
                    "rect",
                    x=sx(x),
                    y=y,
                    width=max(0.5, sx(x + w) - sx(x)),
                    height=BAR_PX,
                    fill=color,
                    data_key=key,
                    data_value=str(nbytes),
                    title=f"{name}: {fmt_num(w, lang)} GiB",
                )
            )
            x += w
        inside = sx(x) + 60 >= WIDTH_PX
        last = next(
            (style.MEMORY_COLORS.get(k, style.GREY) for k, _, b in reversed(parts) if b > 0), style.GREY
        )
        body.append(
            _el(
                "text",
                fmt_num(x, lang),
                x=min(sx(x) + 4, WIDTH_PX - 4.0) if not inside else sx(x) - 4,
                y=y + BAR_PX - 3,
                font_size=style.SMALL_SIZE_PX,
                text_anchor="end" if inside else "start",
                fill=style.text_on(last) if inside else style.TEXT_COLOR,
            )
        )
        if usable:
            ux = sx(usable / gib)
            body.append(
                _el(
                    "line",
                    x1=ux,
                    y1=y - 3,
                    x2=ux,
                    y2=y + BAR_PX + 3,
                    stroke=style.LIMIT_COLOR,
                    stroke_width=2,
                    stroke_dasharray="3,2",
                    data_key="usable",
                    data_value=str(usable),
                    title=f"{usable_label}: {fmt_num(usable / gib, lang)} GiB",
                )
            )
    body.append(_el("line", x1=left, y1=axis_y, x2=WIDTH_PX - right, y2=axis_y, stroke=style.AXIS_COLOR))
    body.append(
        _el(
            "text",
            "GiB",
            x=WIDTH_PX - right,
            y=axis_y + 26,
            text_anchor="end",
            font_size=style.SMALL_SIZE_PX,
            fill=style.MUTED_TEXT_COLOR,
        )
    )
    legend, lh = _legend(list(seen.items()) + [(usable_label, style.LIMIT_COLOR)], left, axis_y + 40)
    return _svg_open(axis_y + 40 + lh, title, "chart-memory") + "".join(body) + legend + "</svg>"


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    lang: str,
    title: str,
    x_format: Callable[[float], str],
    y_unit: str = "",
    limit: tuple[float, str] | None = None,
    log2_x: bool = True,
) -> str:
    """Lines of y against x, one per series (colours ``style.SERIES``); points carry data-x / data-value.

    ``limit``: (y value, label) drawn as a dashed horizontal line (usable memory).  ``log2_x`` spaces
    powers of two evenly (context lengths 4K, 8K, ..., 128K).
    """
    pts = [p for _, s in series for p in s]
    if not pts:
        return _svg_open(40, title, "chart-line") + _el("text", "—", x=10, y=24) + "</svg>"
    left, right, top, plot_h = 56.0, 16.0, 14.0, 220.0
    fx: Callable[[float], float] = math.log2 if log2_x else float
    xs = sorted({p[0] for p in pts})
    x_lo, x_hi = fx(xs[0]), fx(xs[-1])
    if x_hi == x_lo:
        x_hi = x_lo + 1
    ys = [p[1] for p in pts] + ([limit[0]] if limit else [])
    ticks = nice_ticks(0, max(ys + [1e-9]))
    y_hi = ticks[-1] or 1.0
    plot_w = WIDTH_PX - left - right
    bottom = top + plot_h

    def sx(v: float) -> float:
        return left + plot_w * (fx(v) - x_lo) / (x_hi - x_lo)

    def sy(v: float) -> float:
        return top + plot_h * (1 - v / y_hi)

    body = []
    dec = 0 if y_hi >= 10 else 1
    for tv in ticks:
        body.append(_el("line", x1=left, y1=sy(tv), x2=WIDTH_PX - right, y2=sy(tv), stroke=style.GRID_COLOR))
        body.append(
            _el(
                "text",
                fmt_num(tv, lang, dec),
                x=left - 6,
                y=sy(tv) + 4,
                text_anchor="end",
                fill=style.MUTED_TEXT_COLOR,
            )
        )
    for x, text, anchor in spaced_labels([(sx(xv), x_format(xv)) for xv in xs], left, WIDTH_PX, 12):
        body.append(_el("text", text, x=x, y=bottom + 16, text_anchor=anchor, fill=style.MUTED_TEXT_COLOR))
    body.append(_el("line", x1=left, y1=bottom, x2=WIDTH_PX - right, y2=bottom, stroke=style.AXIS_COLOR))
    mid = f"{top + plot_h / 2:.0f}"
    body.append(
        _el(
            "text",
            y_unit,
            x=12,
            y=mid,
            transform=f"rotate(-90 12 {mid})",
            text_anchor="middle",
            fill=style.MUTED_TEXT_COLOR,
        )
    )
    if limit:
        ly = sy(limit[0])
        body.append(
            _el(
                "line",
                x1=left,
                y1=ly,
                x2=WIDTH_PX - right,
                y2=ly,
                stroke=style.LIMIT_COLOR,
                stroke_width=1.5,
                stroke_dasharray="6,4",
                data_key="limit",
                data_value=str(limit[0]),
            )
        )
        body.append(
            _el("text", limit[1], x=WIDTH_PX - right - 4, y=ly - 4, text_anchor="end", fill=style.LIMIT_COLOR)
        )
    legend_items = []
    for i, (name, s) in enumerate(series):
        color = style.SERIES[i % len(style.SERIES)]
        legend_items.append((name, color))
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        body.append(_el("polyline", points=path, fill="none", stroke=color, stroke_width=2))
        for x, y in s:
            body.append(
                _el(
                    "circle",
                    cx=sx(x),
                    cy=sy(y),
                    r=3,
                    fill=color,
                    data_series=name,
                    data_x=str(x),
                    data_value=str(y),
                    title=f"{name} · {x_format(x)}: {fmt_num(y, lang)} {y_unit}",
                )
            )
    legend, lh = _legend(legend_items, left, bottom + 40)
    return _svg_open(bottom + 40 + lh, title, "chart-line") + "".join(body) + legend + "</svg>"


def _panel_svg(
    panel: Panel, x0: float, width: float, y0: float, labels_w: float, lang: str, show_labels: bool
) -> str:
    """Horizontal bars (with whiskers when lo/hi are given) for one panel; bars start at x0 + labels_w."""
    rows = panel.rows
    plot_x = x0 + (labels_w if show_labels else 0)
    plot_w = width - (labels_w if show_labels else 0) - 12
    vals = [v for r in rows for v in (r.value, r.hi, r.measured) if v is not None and math.isfinite(v)]
    ticks = nice_ticks(0, max(vals + [1e-9]), 4)
    span = ticks[-1] or 1.0

    def sx(v: float) -> float:
        return plot_x + plot_w * min(v, span) / span

    top = y0 + 22
    bottom = top + len(rows) * ROW_PX + 4
    out = [_el("text", panel.title, x=plot_x, y=y0 + 12, font_weight=600)]
    whole = all(float(tv).is_integer() for tv in ticks)  # "50", not "50.0"

    def tick_label(v: float) -> str:
        return fmt_num(v, lang, 0) if whole else fmt_sig(v, lang)

    out += _vgrid(ticks, sx, top, bottom, tick_label, plot_x, x0 + width - 4)
    for i, r in enumerate(rows):
        y = top + 4 + i * ROW_PX
        base_y = y + BAR_PX - 3
        if show_labels:
            out.append(_el("text", _truncate(r.label, labels_w), x=plot_x - 6, y=base_y, text_anchor="end"))
        if r.value is None or not math.isfinite(r.value):
            out.append(_el("text", "—", x=plot_x + 4, y=base_y, fill=style.MUTED_TEXT_COLOR))
            continue
        tip = f"{r.label}: {fmt_sig(r.value, lang)} {panel.unit}"
        if r.lo is not None and r.hi is not None:
            tip += f" [{fmt_sig(r.lo, lang)} – {fmt_sig(r.hi, lang)}]"
        out.append(
            _el(
                "rect",
                x=plot_x,
                y=y,
                width=max(0.5, sx(r.value) - plot_x),
                height=BAR_PX,
                fill=panel.color,
                fill_opacity=0.85,
                data_key=r.key or r.label,
                data_value=str(r.value),
                title=tip,
            )
        )
        cy = y + BAR_PX / 2
        if r.lo is not None and r.hi is not None:
            lo_x, hi_x = sx(r.lo), sx(r.hi)
            out.append(
                f'<g stroke="{style.INTERVAL_COLOR}" stroke-width="1.2" data-lo="{r.lo}" data-hi="{r.hi}">'
                + _el("line", x1=lo_x, y1=cy, x2=hi_x, y2=cy)
                + _el("line", x1=lo_x, y1=cy - 4, x2=lo_x, y2=cy + 4)
                + _el("line", x1=hi_x, y1=cy - 4, x2=hi_x, y2=cy + 4)
                + "</g>"
            )
        if r.measured is not None:
            mx = sx(r.measured)
            out.append(
                _el(
                    "path",
                    d=f"M{mx:.1f},{cy - 5} L{mx + 5:.1f},{cy} L{mx:.1f},{cy + 5} L{mx - 5:.1f},{cy} Z",
                    fill=style.MEASURED_COLOR,
                    data_measured=str(r.measured),
                )
            )
        end = sx(r.hi if r.hi is not None else r.value)
        text = fmt_sig(r.value, lang)
        inside = end + 6 + len(text) * CHAR_PX > x0 + width
        out.append(
            _el(
                "text",
                text,
                x=(sx(r.value) - 4) if inside else end + 6,
                y=base_y,
                font_size=style.SMALL_SIZE_PX,
                text_anchor="end" if inside else "start",
                fill=style.text_on(panel.color) if inside else style.TEXT_COLOR,
            )
        )
    out.append(_el("line", x1=plot_x, y1=bottom, x2=plot_x + plot_w, y2=bottom, stroke=style.AXIS_COLOR))
    out.append(
        _el(
            "text",
            panel.unit,
            x=plot_x + plot_w,
            y=bottom + 26,
            text_anchor="end",
            font_size=style.SMALL_SIZE_PX,
            fill=style.MUTED_TEXT_COLOR,
        )
    )
    return "".join(out)


def interval_panels(
    panels: Sequence[Panel], lang: str, title: str, legend: Sequence[tuple[str, str]] = ()
) -> str:
    """Side-by-side panels of bars with interval whiskers; the row labels (from the first panel) are shared.

    Panels must list the same rows in the same order (e.g. decode and prefill per quant).
    """
    if not panels:
        raise ValueError("interval_panels needs at least one panel")
    n_rows = len(panels[0].rows)
    if any(len(p.rows) != n_rows for p in panels):
        raise ValueError("all panels must have the same rows")
    labels_w = _label_width([r.label for r in panels[0].rows], 50, 220)
    other_w = (WIDTH_PX - labels_w) / len(panels)
    body, x = [], 0.0
    for i, p in enumerate(panels):
        w = other_w + (labels_w if i == 0 else 0)
        body.append(_panel_svg(p, x, w, 4, labels_w, lang, show_labels=(i == 0)))
        x += w
    height = 4 + 22 + n_rows * ROW_PX + 4 + 30
    leg = ""
    if legend:
        leg, lh = _legend(legend, labels_w, height + 6)
        height += lh + 6
    return _svg_open(height, title, "chart-bars") + "".join(body) + leg + "</svg>"


def bar_panels(panels: Sequence[Panel], lang: str, title: str) -> str:
    """Side-by-side panels of plain bars sharing row labels (hardware comparison); same contract as above."""
    return interval_panels(panels, lang, title)
