"""GitHub-flavoured Markdown of a list of ``estimator.render.blocks.Block``: the first block is the document
title (``#``), the others sections (``##``); tables become pipe tables (cell pipes escaped), commands fenced
``bash`` code."""

from __future__ import annotations

from estimator.render.blocks import Block


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: list[Block]) -> str:
    """GitHub-flavoured Markdown of a list of blocks (the first is the document title)."""
    out: list[str] = []
    for i, s in enumerate(blocks):
        out.append(("# " if i == 0 else "## ") + s.title)
        out.append("")
        for line in s.lines:
            out.append(line)
            out.append("")
        for t in s.tables:
            if t.caption:
                out += [f"*{t.caption}*", ""]
            out.append("| " + " | ".join(_md_cell(h) for h in t.headers) + " |")
            out.append("|" + "|".join("---" for _ in t.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
        for label, text in s.code:
            out += [f"{label}:", "", "```bash", text, "```", ""]
        for line in s.notes:
            out += [line, ""]
    return "\n".join(out).rstrip() + "\n"
