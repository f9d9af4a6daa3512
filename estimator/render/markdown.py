"""GitHub-flavoured Markdown of a list of ``estimator.render.blocks.Block``: the first block is the document
title (``#``), the others sections (``##``); tables become pipe tables, commands fenced ``bash`` code.

Every piece of text outside code is escaped (``md_text``): ``&``, ``<`` and ``>`` become entities, so a model
name or a file path such as ``<script>…</script>`` or ``<svg onload=…>`` (a GGUF's ``general.name`` is
whatever its author wrote) renders as text and never as HTML where Markdown is shown; table cells also escape
``|`` and fold line breaks.  Commands stay literal (they are meant to be copied) inside a fence longer than
any run of backticks they hold, so no command can close its fence early.
"""

from __future__ import annotations

import re

from estimator.render.blocks import Block

_BACKTICKS = re.compile(r"`+")


def md_text(text: str) -> str:
    """Text with ``&``, ``<`` and ``>`` as entities (no raw HTML can pass)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _md_cell(text: str) -> str:
    return md_text(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_line(text: str) -> str:
    return md_text(text).replace("\r", " ").replace("\n", " ")


def _fence(code: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(code)), default=0)
    return "`" * max(3, longest + 1)


def render_markdown(blocks: list[Block]) -> str:
    """GitHub-flavoured Markdown of a list of blocks (the first is the document title)."""
    out: list[str] = []
    for i, s in enumerate(blocks):
        out.append(("# " if i == 0 else "## ") + _md_line(s.title))
        out.append("")
        for line in s.lines:
            out.append(md_text(line))
            out.append("")
        for t in s.tables:
            if t.caption:
                out += [f"*{_md_line(t.caption)}*", ""]
            out.append("| " + " | ".join(_md_cell(h) for h in t.headers) + " |")
            out.append("|" + "|".join("---" for _ in t.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
        for label, text in s.code:
            fence = _fence(text)
            out += [f"{_md_line(label)}:", "", f"{fence}bash", text, fence, ""]
        for line in s.notes:
            out += [md_text(line), ""]
    return "\n".join(out).rstrip() + "\n"
