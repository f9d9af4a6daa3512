"""HTML polish (issue 13: 8): a quant table that fits the page, a hardware chart of the top 20 with a
filterable table of all, axis labels that do not collide, value labels readable on every bar colour, and
``--lang es`` in every visible string of the HTML and of the text report."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from estimator.render import charts, style
from estimator.render.translate import es_numbers, tr
from estimator.report.document import report_to_dict, to_fragment, to_text
from estimator.report.request import ReportRequest, make_report
from tests.estimator_cli import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def glm() -> dict:
    return report_to_dict(make_report(ReportRequest(model="glm-4.5", hardware="mi300x")))


def visible_text(fragment: str) -> list[str]:
    body = re.sub(r"<(svg|pre|style)\b.*?</\1>", "", fragment, flags=re.S)
    return [html.unescape(x).strip() for x in re.split(r"<[^>]+>", body) if x.strip()]


def test_quant_table_is_narrow(glm):
    frag = to_fragment(glm, "en")
    quant = frag.split('id="quant"')[1].split("</section>")[0]
    heads = re.findall(r"<th[^>]*>(.*?)</th>", quant)
    assert (
        "Total (GB)" not in heads and "KV cache (GiB)" not in heads
    )  # KV is one line above: same in every row
    assert "KV cache in every row" in quant
    cells = re.findall(r'<span class="nowrap" title="([^"]+)">(\d+)×&nbsp;([\w.-]+)</span>', quant)
    assert cells and all(
        name and hid for name, _, hid in cells
    )  # "4× atlas-300i-duo-96gb", the name as title
    assert '<div class="table-wrap"><table>' in quant  # wide on a phone: it scrolls in its own box


def test_hardware_chart_top_20_and_all_in_a_filterable_table(glm):
    items = glm["chart_data"]["hardware_comparison"]
    assert len(items) > 40
    frag = to_fragment(glm, "en")
    cost = frag.split('id="cost"')[1].split("</section>")[0]
    svg = cost.split("<svg")[1].split("</svg>")[0]
    assert len(re.findall(r'<rect[^>]*fill="#0072B2"', svg)) <= 21  # decode bars: the 20 fastest (+ chosen)
    assert f"All {len(items)} configurations that fit" in cost
    rows = re.findall(r'<tr class="kind-(\w+)', cost)
    assert len(rows) == len(items) and set(rows) <= {"gpu", "npu", "unified", "cpu"}
    for kind in set(rows):  # a CSS-only filter: one radio per kind, before the table
        assert (
            f'id="hwf-{kind}"' in cost
            and f"#hwf-{kind}:checked ~ .table-wrap" in (ROOT / "estimator/web/report.css").read_text()
        )


def test_axis_labels_do_not_collide():
    labels = charts.spaced_labels([(x, f"{x * 1000:,.0f}") for x in range(0, 200, 10)], 0, 200)
    spans = []
    for x, text, anchor in labels:
        w = charts._text_px(text)
        left = x - w / 2 if anchor == "middle" else x if anchor == "start" else x - w
        spans.append((left, left + w))
        assert 0 <= left and left + w <= 200
    assert all(b[0] >= a[1] + 4 for a, b in zip(spans, spans[1:], strict=False))
    assert 2 <= len(labels) < 20  # dense ticks are thinned, not overprinted


def test_value_labels_readable_on_every_bar_colour():
    for color in (*style.SERIES, *style.MEMORY_COLORS.values(), *style.VERDICT_COLORS.values()):
        assert style.contrast_ratio(style.text_on(color), color) >= 4.5, color
    rows = [charts.IntervalRow("a", 100.0), charts.IntervalRow("b", 99.0)]  # long bars: labels drawn inside
    svg = charts.bar_panels([charts.Panel("p", rows, "tok/s", style.ORANGE)], "en", "t")
    inside = re.findall(r'<text [^>]*text-anchor="end" fill="([^"]+)"[^>]*>9\d', svg)
    assert inside and set(inside) == {style.text_on(style.ORANGE)} != {style.BACKGROUND}


def test_spanish_html_translates_what_it_shows(glm):
    frag = to_fragment(glm, "es")
    texts = visible_text(frag)
    joined = "\n".join(texts)
    for es in (
        "k-quant de 4 bits",
        "estimado: fórmulas de la arquitectura",
        "calibrado",
        "contexto vacío",
        "caché KV a medias",
        "no cabe",
        "la amortización cuenta solo la compra",
    ):
        assert es in joined, es
    for en in (
        "4-bit k-quant",
        "estimated: architecture formulas",
        "empty context",
        "does not fit",
        "break-even counts device purchase",
        "speed figures come from",
    ):
        assert en not in joined, en


def test_spanish_text_report():
    d = report_to_dict(make_report(ReportRequest(model="llama-3.1-70b", hardware="rtx-3090", devices=2)))
    text = to_text(d, 100, "es")
    total_en = f"{d['memory']['total_bytes'] / 2**30:,.2f} GiB"  # the total, as English writes it
    total_es = total_en.replace(",", "_").replace(".", ",").replace("_", ".")
    for es in (
        "Veredicto: cabe",
        "Memoria: pesos",
        "un flujo, contexto vacío",
        "Matriz de cuantización a 8.192",
        "Velocidad (estimada)",
        "Costo",
        "Comandos de lanzamiento",
        total_es,
    ):
        assert es in text, es
    assert "Verdict:" not in text and total_en not in text
    p = cli("report --model qwen3-0.6b --hardware rtx-4090 --lang es --brief")
    assert p.returncode == 0 and "Veredicto:" in p.stdout and "Decode:" in p.stdout


def test_spanish_numbers_leave_ids_alone():
    assert es_numbers("llama-3.1-70b on Llama 3.1: 1,234.5 GiB, $0.150/kWh, 16.0 (10.7–19.5) tok/s") == (
        "llama-3.1-70b on Llama 3.1: 1.234,5 GiB, $0,150/kWh, 16,0 (10,7–19,5) tok/s"
    )
    assert (
        tr("warning: fits only with 8.35 GiB in host RAM")
        == "advertencia: cabe solo con 8.35 GiB en la RAM del host"
    )
    assert tr("a free-form catalog note stays English") == "a free-form catalog note stays English"
