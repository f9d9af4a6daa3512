"""Terminal rendering of the JSON report with rich: the same sections and numbers as the Markdown report
(``estimator.render_markdown.report_sections``), as rich tables.
rich is imported here only, lazily by the CLI.

Memory in GiB (2^30 B) and GB (10^9 B), labelled in the column headers; speeds labelled estimated.
"""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from estimator.render_markdown import report_sections

_VERDICT_STYLE = {"fits": "bold green", "fits with offload": "bold yellow", "does not fit": "bold red"}


def _line(text: str) -> str:
    """Markdown-ish line -> rich markup: **x** becomes bold; verdict words are coloured."""
    out = escape(text)
    parts = out.split("**")
    out = "".join(f"[bold]{p}[/bold]" if i % 2 else p for i, p in enumerate(parts))
    if "UNCALIBRATED" in out:
        out = out.replace("UNCALIBRATED", "[bold yellow]UNCALIBRATED[/bold yellow]")
    return out


def _cell(text: str) -> str:
    style = _VERDICT_STYLE.get(text)
    return f"[{style}]{escape(text)}[/{style}]" if style else escape(text)


def print_report(d: dict, console: Console) -> None:
    """Print every section of a report dict to ``console``."""
    for i, s in enumerate(report_sections(d)):
        if i == 0:
            console.print(Panel("\n".join(_line(x) for x in s.lines), title=escape(s.title), expand=False))
            continue
        console.rule(f"[bold]{escape(s.title)}[/bold]", align="left")
        for line in s.lines:
            console.print(_line(line))
        for t in s.tables:
            table = Table(
                box=box.SIMPLE_HEAVY,
                title=escape(t.caption) if t.caption else None,
                show_lines=False,
                title_justify="left",
            )
            for h in t.headers:
                table.add_column(escape(h), overflow="fold")
            for row in t.rows:
                table.add_row(*(_cell(c) for c in row))
            console.print(table)
        for label, text in s.code:
            console.print(f"[bold]{escape(label)}[/bold]")
            console.print(escape(text), style="cyan", soft_wrap=True)
        for line in s.notes:
            console.print(_line(line), style="dim")


def render_text(d: dict, width: int = 140) -> str:
    """The terminal report as plain text (for ``-o FILE`` and tests)."""
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, force_terminal=False)
    print_report(d, console)
    return console.export_text()
