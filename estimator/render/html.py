"""Self-contained HTML documents: the report stylesheet and the page around a fragment.

No network at view time: no external CSS, fonts, scripts or images (charts are inline SVG,
``estimator.render.charts``).  ``article`` wraps section fragments into one ``<article class="fb-report">``
(what the local page swaps in); ``document`` wraps an article into a complete page with the stylesheet.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from estimator.render import style

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


def article(fragments: list[str], lang: str, schema_version: object) -> str:
    """Section fragments as one ``<article class="fb-report">``."""
    return (
        f'<article class="fb-report" lang="{lang}" data-schema-version="{escape(str(schema_version))}">'
        + "".join(fragments)
        + "</article>"
    )


def document(body: str, title: str, lang: str) -> str:
    """A complete, self-contained HTML page (inline CSS, no scripts) around ``body``."""
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{css()}</style></head>"
        f'<body style="margin:1rem">{body}</body></html>\n'
    )
