"""Format-neutral document blocks and number formats shared by the text and Markdown renderers.

A ``Block`` is one section of a document (title, prose lines with ``**bold**``, tables of strings, shell
commands, notes); ``estimator.render.text`` lays blocks out for a terminal and ``estimator.render.markdown``
writes them as GitHub Markdown.  The number formats name their unit: GiB = 2^30 bytes, GB = 10^9 bytes;
``tok`` keeps three significant figures of a tokens/s figure; "–" stands for an unknown value.
"""

from __future__ import annotations

GIB = 2**30
MIB = 2**20
GB = 10**9
MB = 10**6


class Table:
    """A table of strings (plain class, not a dataclass: no code generation at import)."""

    __slots__ = ("headers", "rows", "caption")

    def __init__(self, headers: list[str], rows: list[list[str]], caption: str = ""):
        self.headers, self.rows, self.caption = headers, rows, caption


class Block:
    """One section of a document: a key, a title, prose lines, tables, shell commands (label, text) and notes
    shown after them.  Text and Markdown render the same blocks, so both show the same numbers."""

    __slots__ = ("key", "title", "lines", "tables", "code", "notes")

    def __init__(
        self,
        key: str,
        title: str,
        lines: list[str] | None = None,
        tables: list[Table] | None = None,
        code: list[tuple[str, str]] | None = None,
        notes: list[str] | None = None,
    ):
        self.key, self.title = key, title
        self.lines = lines if lines is not None else []
        self.tables = tables if tables is not None else []
        self.code = code if code is not None else []
        self.notes = notes if notes is not None else []


def gib(b: float | None) -> str:
    return "–" if b is None else f"{b / GIB:,.2f}"


def gb(b: float | None) -> str:
    return "–" if b is None else f"{b / GB:,.2f}"


def both(b: float | None) -> str:
    """Bytes in GiB (2^30) and GB (10^9); a non-zero amount that would print as 0.00 GiB in MiB (2^20) and MB
    (10^6) instead (a 4 MB offload is not "0.00 GiB")."""
    if b is None:
        return "–"
    if 0 < b < 0.005 * GIB:
        return f"{b / MIB:,.2f} MiB ({b / MB:,.2f} MB)"
    return f"{b / GIB:,.2f} GiB ({b / GB:,.2f} GB)"


def usd(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"${x:,.{digits}f}"


def tok(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 10 else f"{x:,.2f}"


def speed_cell(f: dict | None) -> str:
    return "–" if not f else f"{tok(f['tok_s'])} ({tok(f['lo_tok_s'])}–{tok(f['hi_tok_s'])})"


def params(n: float | None) -> str:
    """A parameter count in M (10^6) or, from 10^9, B (10^9)."""
    if n is None:
        return "–"
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:,.1f}%"


def cand_cell(c: dict | None) -> str:
    """A catalog configuration as "4× h100-80gb-sxm" (its price is in the recommendations)."""
    if not c:
        return "none (more than 8 of any catalog device)"
    return f"{c['n_devices']}× {c['hardware_id']}"


FIT_WORDS = {"fits": "yes", "fits with offload": "offload", "does not fit": "no"}


def fit_cell(verdict: str | None) -> str:
    """A memory verdict in a table's "fits" column: yes / offload / no."""
    return FIT_WORDS.get(verdict or "", verdict or "–")
