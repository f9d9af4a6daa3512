"""Terminal rendering of document blocks (``estimator.render.blocks.Block``): the same blocks the Markdown
renderer writes, laid out as compact fixed-width tables.

The layout is done here, in plain Python, for a given width: ``layout(blocks, width)`` returns lines of styled
segments (the first block as a framed panel).  ``lines_text`` joins them into plain text (``-o FILE``, pipes,
tests); ``print_lines`` prints them through a rich ``Console`` (colour, the real terminal width) when the
output is an interactive terminal.  Laying tables out here instead of with ``rich.table`` keeps ``python -m
estimator report`` fast (rich's table measuring cost ~60 ms per report) and lets a table that is too wide for
the terminal wrap its text columns, then fall back to one block per row, instead of folding every cell.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from estimator.render.blocks import Block, Table

if TYPE_CHECKING:  # rich is imported by the caller, only for a terminal
    from rich.console import Console

DEFAULT_WIDTH = 100  # columns for files and pipes (no terminal to ask)
MIN_WIDTH = 40
LONG_WORD = 12  # a longer word (id, URL, path) may be split, at a - or / if it has one, to keep the columns
Seg = tuple[str, str | None]  # (text, rich style or None)
Line = list[Seg]

VERDICT_STYLES = {
    "fits": "bold green",
    "fits with offload": "bold yellow",
    "offload": "bold yellow",
    "does not fit": "bold red",
    "no": "bold red",
    "yes": "green",
    # the same cells of a Spanish report (estimator.render.translate)
    "cabe": "bold green",
    "cabe con offload": "bold yellow",
    "no cabe": "bold red",
    "sí": "green",
}
_UNCALIBRATED = re.compile("(UNCALIBRATED|SIN CALIBRAR)")  # bold yellow wherever a line says it
# Right-aligned: plain numbers, money, percentages and numbers with a short unit ("1,234.5", "$15,000",
# "9.5%", "750 W", "100.3 M"), or a lone dash.
_NUMERIC = re.compile(r"^(?:[-+~]?\$?[\d][\d,.]*(?:%| ?(?:[KMBW]|ms|s|GiB|GB))?|–)$")
_GAP = "  "


def _plain(line: Line) -> str:
    return "".join(t for t, _ in line)


def _split_long(word: str, width: int) -> tuple[str, str]:
    """Head (at most ``width`` columns) and rest of a word too long for a line: after the last - / _ . , ;
    that fits when there is one (ids, URLs), else a hard cut."""
    cut = max((word.rfind(c, 0, width) for c in "-/_.,;"), default=-1)
    k = cut + 1 if cut >= width // 3 else width
    return word[:k], word[k:]


def _wrap(text: str, width: int) -> list[str]:
    """Greedy word wrap to ``width`` columns (a word longer than the width is split, at a - or / if any)."""
    width = max(width, 1)
    out: list[str] = []
    cur = ""
    for word in text.split(" "):
        while len(word) > width and not (cur and len(cur) + 1 + len(word) <= width):
            if cur:  # fill the current line with the word's head when it splits at a - or / there
                room = width - len(cur) - 1
                head, rest = _split_long(word, room) if room >= 3 else ("", word)
                if head and rest and head[-1] in "-/_.,;":
                    cur, word = f"{cur} {head}", rest
                out.append(cur)
                cur = ""
                continue
            head, word = _split_long(word, width)
            out.append(head)
        if not cur:
            cur = word
        elif len(cur) + 1 + len(word) <= width:
            cur += " " + word
        else:
            out.append(cur)
            cur = word
    out.append(cur)
    return out


def _prose(text: str, width: int, style: str | None = None) -> list[Line]:
    """A Markdown-ish line wrapped to ``width``: ``**x**`` bold, UNCALIBRATED (SIN CALIBRAR) bold yellow."""
    out: list[Line] = []
    bold = False
    for raw in _wrap(text, width) if text else [""]:
        line: Line = []
        parts = raw.split("**")
        for i, part in enumerate(parts):
            if i:
                bold = not bold
            if not part:
                continue
            st = "bold" if bold else style
            for j, chunk in enumerate(_UNCALIBRATED.split(part)):
                if chunk:
                    line.append((chunk, "bold yellow" if j % 2 else st))
        out.append(line)
    return out


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split(" ")), default=0)


def _header_floor(header: str) -> int:
    """Narrowest a header may get: its longest word, or for snake_case keys (``decode_lo_tok_s``) its longest
    ``_``-separated part with the underscore it breaks after."""
    return max((len(p) + 1 for w in header.split(" ") for p in w.split("_")), default=1) - (
        0 if "_" in header else 1
    )


def _numeric(text: str) -> bool:
    return bool(_NUMERIC.match(text))


def fit_widths(headers: list[str], rows: list[list[str]], width: int) -> list[int] | None:
    """Column widths that fit ``width``, or None when even the narrowest layout is too wide.

    Start from each column's natural width and narrow one column by one character at a time, choosing the
    column where that wraps the fewest body cells (a header that is wider than its cells wraps for free),
    the widest first among equals; a column never gets narrower than its longest header word or its
    longest cell word (capped at LONG_WORD: longer ids and URLs may be split)."""
    n = len(headers)
    cols = [[r[i] for r in rows] for i in range(n)]
    widths = [max([len(h)] + [len(c) for c in col]) for h, col in zip(headers, cols, strict=True)]
    floor = [
        max([_header_floor(h)] + [min(_longest_word(c), LONG_WORD) for c in col])
        for h, col in zip(headers, cols, strict=True)
    ]
    excess = sum(widths) + len(_GAP) * (n - 1) + 1 - width
    while excess > 0:
        shrinkable = [i for i in range(n) if widths[i] > floor[i]]
        if not shrinkable:
            return None
        i = min(shrinkable, key=lambda k: (sum(len(c) >= widths[k] for c in cols[k]), -widths[k], k))
        widths[i] -= 1
        excess -= 1
    return widths


def table_lines(t: Table, width: int) -> list[Line]:
    """One table laid out in ``width`` columns: wrapped header, a rule, rows (text cells wrap); one block per
    row ("header: value") when the columns cannot fit."""
    out: list[Line] = []
    if t.caption:
        out.append([(" " + t.caption, "italic")])
    widths = fit_widths(t.headers, t.rows, width)
    if widths is None:
        return out + _record_lines(t, width)
    right = [
        sum(_numeric(r[i]) for r in t.rows) * 2 > len(t.rows) if t.rows else False
        for i in range(len(t.headers))
    ]

    def physical(cells: list[str], style_of) -> list[Line]:
        wrapped = [_wrap(c, w) for c, w in zip(cells, widths, strict=True)]
        height = max(len(w) for w in wrapped)
        lines: list[Line] = []
        for k in range(height):
            line: Line = [(" ", None)]
            for i, w in enumerate(widths):
                part = wrapped[i][k] if k < len(wrapped[i]) else ""
                pad = w - len(part)
                text = (" " * pad + part) if right[i] else (part + " " * pad)
                if i:
                    line.append((_GAP, None))
                line.append((text, style_of(cells[i])))
            lines.append(_rstrip(line))
        return lines

    out += physical(t.headers, lambda _c: "bold")
    out.append([(" " + _GAP.join("─" * w for w in widths), "dim")])
    for row in t.rows:
        out += physical(row, VERDICT_STYLES.get)
    return out


def _rstrip(line: Line) -> Line:
    while line and not line[-1][0].strip():
        line.pop()
    if line:
        text, style = line[-1]
        line[-1] = (text.rstrip(), style)
    return line


def _record_lines(t: Table, width: int) -> list[Line]:
    """Fallback for a table too wide for the terminal: the first cell as a heading, then "header: value"."""
    out: list[Line] = []
    for row in t.rows:
        out.append([(" " + row[0], "bold")])
        for h, c in zip(t.headers[1:], row[1:], strict=True):
            first = True
            for part in _wrap(f"{h}: {c}", width - 5):
                out.append(
                    [("   " if first else "     ", None), (part, VERDICT_STYLES.get(c) if first else None)]
                )
                first = False
    return out


def _panel(s: Block, width: int) -> list[Line]:
    inner = max(MIN_WIDTH, width) - 4
    body: list[Line] = []
    for text in s.lines:
        body += _prose(text, inner)
    w = min(inner, max([len(_plain(x)) for x in body] + [len(s.title) + 3]))
    top = f"╭─ {s.title} " + "─" * max(0, w - len(s.title) - 1) + "╮"
    out: list[Line] = [[(top, "bold")]]
    for line in body:
        out.append([("│ ", None), *line, (" " * (w - len(_plain(line))) + " │", None)])
    out.append([("╰" + "─" * (w + 2) + "╯", None)])
    return out


def _section(s: Block, width: int) -> list[Line]:
    title = f"── {s.title} "
    out: list[Line] = [[], [(title, "bold"), ("─" * max(0, width - len(title)), "dim")]]
    for text in s.lines:
        out += _prose(text, width)
    for t in s.tables:
        out += table_lines(t, width)
    for label, text in s.code:
        out.append([(label, "bold")])
        out.append([(text, "cyan")])  # one line (copy-paste); the terminal wraps it
    for text in s.notes:
        out += _prose(text, width, "dim")
    return out


def layout(blocks: list[Block], width: int = DEFAULT_WIDTH) -> list[Line]:
    """Every block as styled lines no wider than ``width`` (shell commands excepted); the first block is a
    framed panel."""
    width = max(MIN_WIDTH, int(width))
    out: list[Line] = []
    for i, s in enumerate(blocks):
        out += _panel(s, width) if i == 0 else _section(s, width)
    return out


def lines_text(lines: list[Line]) -> str:
    """Styled lines as plain text."""
    return "\n".join(_plain(line) for line in lines) + "\n"


def print_lines(lines: list[Line], console: Console) -> None:
    """Styled lines through a rich ``console`` (colours on a terminal; no further wrapping)."""
    from rich.text import Text

    texts = [Text.assemble(*((t, s) if s else t for t, s in line)) for line in lines]
    console.print(Text("\n").join(texts), soft_wrap=True, highlight=False)
