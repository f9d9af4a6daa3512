"""Self-contained HTML sizing report: the JSON report (``report_to_dict``) rendered with inline CSS and SVG.

No network at view time: no external CSS, fonts, scripts or images.  The renderer reads only the JSON
report dict, so the file written by ``--format html``, the page of ``python -m estimator serve`` and
``--format json`` show the same numbers by construction.  Every number taken from the report is wrapped as
``<span class="num" data-path="memory.total_bytes" data-value="…">…</span>``: ``data-path`` is its path in
the JSON report, ``data-value`` the raw JSON value and the text the value formatted for the language (tests
compare all three).

Estimated speeds show their coefficient label (calibrated family and number of runs, or the pooled prior) and
interval; measured runs from ``results/runs/*.jsonl`` (``estimator.catalog.measured``) appear beside the
estimate with
their source.  GiB = 2^30 bytes, GB = 10^9 bytes; both are shown for the memory totals.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from estimator.catalog.measured import MeasuredMatches, find_measured
from estimator.render import charts, style
from estimator.render import html_sections as sec
from estimator.render import html_sections2 as sec2
from estimator.render.i18n import check_lang, t

WEB_DIR = Path(__file__).resolve().parent.parent / "web"


def css() -> str:
    """The report stylesheet with the palette and fonts of ``estimator.render.style`` filled in."""
    root = (
        ":root{"
        f"--font:{style.FONT_STACK};--mono:{style.MONO_STACK};--c-text:{style.TEXT_COLOR};"
        f"--c-muted:{style.MUTED_TEXT_COLOR};--c-grid:{style.GRID_COLOR};--c-panel:{style.PANEL_BACKGROUND};"
        f"--c-fits:{style.VERDICT_COLORS['fits']};--c-offload:{style.VERDICT_COLORS['fits with offload']};"
        f"--c-nofit:{style.VERDICT_COLORS['does not fit']};--c-link:{style.BLUE};"
        "}\n"
    )
    return root + (WEB_DIR / "report.css").read_text(encoding="utf-8")


def measured_for(report: dict[str, Any], results_dir: str | Path | None) -> MeasuredMatches | None:
    """Measured runs matching the report's model, hardware and quant (None when no results dir is given)."""
    if results_dir is None:
        return None
    model = report.get("model") or {}
    workload = report.get("workload") or {}
    hardware = report.get("hardware") or {}
    return find_measured(
        results_dir,
        [model.get("id", ""), model.get("hf_id") or ""],
        hardware.get("id", ""),
        str(report.get("quant", "")),
        engine=str(workload.get("engine", "llama.cpp")),
        kv_dtype=str(workload.get("kv_dtype", "f16")),
        n_devices=int(workload.get("n_devices") or 1),
    )


def render_fragment(
    report: dict[str, Any],
    lang: str = "en",
    results_dir: str | Path | None = None,
    measured: MeasuredMatches | None = None,
) -> str:
    """The report as an HTML fragment (one ``<article class="fb-report">``), without the stylesheet."""
    check_lang(lang)
    if measured is None:
        measured = measured_for(report, results_dir)
    # Optional chart data beyond the sections (docs/html.md): context_by_kv, prefill_by_quant,
    # hardware_comparison.  Charts fall back to the sections' own numbers when it is absent.
    ctx = sec.Ctx(report, lang, measured, dict(report.get("chart_data") or {}))
    parts = [
        sec.header(ctx),
        sec.model_facts(ctx),
        sec.memory(ctx),
        sec.kv(ctx),
        sec.context_scaling(ctx),
        sec.quant_matrix(ctx),
        sec2.speed(ctx),
        sec2.multi_device(ctx),
        sec2.cost(ctx),
        sec2.finetune(ctx),
        sec2.recommended(ctx),
        sec2.launch(ctx),
        sec2.notes(ctx),
        sec2.footer(ctx),
    ]
    return (
        f'<article class="fb-report" lang="{lang}" '
        f'data-schema-version="{escape(str(report.get("schema_version", "")))}">'
        + "".join(parts)
        + "</article>"
    )


def render_html(
    report: dict[str, Any],
    lang: str = "en",
    results_dir: str | Path | None = None,
    measured: MeasuredMatches | None = None,
) -> str:
    """A complete, self-contained HTML document of the report (inline CSS and SVG, no scripts)."""
    fragment = render_fragment(report, lang, results_dir, measured)
    model = (report.get("model") or {}).get("name", "")
    hardware = (report.get("hardware") or {}).get("name", "")
    title = f"{t('title', lang)} — {t('title_on', lang, model=model, hardware=hardware)}"
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{css()}</style></head>"
        f'<body style="margin:1rem">{fragment}</body></html>\n'
    )


__all__ = ["css", "render_fragment", "render_html", "measured_for", "charts"]
