"""One chart style for every fitbench figure: the HTML report's SVG charts and calibration's matplotlib PNGs.

Colours are the Okabe-Ito palette (distinguishable with the common colour-vision deficiencies; Okabe & Ito,
"Color Universal Design", https://jfly.uni-koeln.de/color/).  Each memory component and each verdict has a
fixed colour, so a reader learns them once.

Nothing here imports matplotlib: ``matplotlib_rc()`` returns a plain dict that calibration passes to
``matplotlib.rcParams.update`` (or ``plt.rc_context``).
"""

from __future__ import annotations

# --- palette (Okabe-Ito) -----------------------------------------------------------------------------------
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"
GREY = "#8C8C8C"

# Ordered series colours (line / bar series without a fixed meaning).
SERIES: tuple[str, ...] = (BLUE, ORANGE, BLUISH_GREEN, REDDISH_PURPLE, SKY_BLUE, VERMILLION, YELLOW, BLACK)

# Memory components (stacked bars): same colour in every chart and table legend.
MEMORY_COLORS: dict[str, str] = {
    "weights": BLUE,
    "kv": ORANGE,
    "runtime": BLUISH_GREEN,
    "overhead": REDDISH_PURPLE,
    "host": GREY,
}

# Fit verdicts.
VERDICT_COLORS: dict[str, str] = {
    "fits": BLUISH_GREEN,
    "fits with offload": ORANGE,
    "does not fit": VERMILLION,
}

# Lines and marks.
LIMIT_COLOR = VERMILLION  # usable-memory limit line
MEASURED_COLOR = BLACK  # measured points drawn over estimates
INTERVAL_COLOR = "#333333"  # whiskers of prediction intervals
GRID_COLOR = "#E5E5E5"
AXIS_COLOR = "#666666"
TEXT_COLOR = "#1A1A1A"
MUTED_TEXT_COLOR = "#5A5A5A"
BACKGROUND = "#FFFFFF"
PANEL_BACKGROUND = "#F7F7F7"

def _luminance(hex_color: str) -> float:
    """WCAG relative luminance of an ``#RRGGBB`` colour (0 black .. 1 white)."""
    h = hex_color.lstrip("#")
    channels = [int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG contrast ratio of two ``#RRGGBB`` colours (1 .. 21)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(fill: str) -> str:
    """The text colour (TEXT_COLOR or white) with the higher contrast on ``fill``: value labels drawn inside a
    bar stay readable on every bar colour (dark on orange / yellow / sky blue, white on blue / vermillion)."""
    return max((TEXT_COLOR, BACKGROUND), key=lambda c: contrast_ratio(c, fill))


# --- fonts -------------------------------------------------------------------------------------------------
# CSS stack for HTML/SVG (no web fonts: the report must render offline).
FONT_STACK = (
    'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif'
)
MONO_STACK = 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace'
# matplotlib font family list (DejaVu Sans ships with matplotlib, so the fallback always exists).
MPL_FONT_FAMILY: tuple[str, ...] = ("DejaVu Sans",)

FONT_SIZE_PX = 12  # axis labels and tick labels in SVG charts
TITLE_SIZE_PX = 14
SMALL_SIZE_PX = 10
PT_PER_PX = 0.75  # CSS: 1 px = 1/96 inch, 1 pt = 1/72 inch


def matplotlib_rc() -> dict[str, object]:
    """rcParams giving matplotlib figures the same look as the HTML charts (palette, fonts, light grid)."""
    return {
        "axes.prop_cycle": _cycler_literal(),
        "font.family": "sans-serif",
        "font.sans-serif": list(MPL_FONT_FAMILY),
        "font.size": FONT_SIZE_PX * PT_PER_PX,  # 12 px SVG text = 9 pt
        "axes.titlesize": TITLE_SIZE_PX * PT_PER_PX,
        "axes.edgecolor": AXIS_COLOR,
        "axes.labelcolor": TEXT_COLOR,
        "axes.grid": True,
        "axes.axisbelow": True,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "grid.color": GRID_COLOR,
        "grid.linewidth": 0.8,
        "xtick.color": AXIS_COLOR,
        "ytick.color": AXIS_COLOR,
        "text.color": TEXT_COLOR,
        "figure.facecolor": BACKGROUND,
        "axes.facecolor": BACKGROUND,
        "legend.frameon": False,
        "savefig.dpi": 110,
        "savefig.bbox": "tight",
    }


def _cycler_literal() -> object:
    """A matplotlib cycler over SERIES when matplotlib is importable, else the plain list of colours."""
    try:
        from cycler import cycler  # installed with matplotlib; kept lazy so the estimator never needs it
    except ImportError:  # pragma: no cover - matplotlib (and cycler) are dependencies of fitbench
        return list(SERIES)
    return cycler(color=list(SERIES))
