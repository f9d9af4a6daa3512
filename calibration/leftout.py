"""Records left out of a fit, grouped by cause: equal reasons that differ only in the values they name
(a device id, a quant, a count) are one cause.

A reason's variable parts are its quoted strings ('...' or "..."), its numbers and the candidate list after
"closest:"; the rest is its pattern.  Reasons with one pattern form one group; a part that is the same in
every reason of the group is shown as it is, a part that varies as "…", and the first reason's varying
values are the group's example (with where that record is).  ``python -m calibration fit`` prints the groups
as a table; the calibration report still lists every record with its FILE:LINE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from calibration.dataset import Rejection

VARYING = "…"
_PARTS = re.compile(r"'[^']*'|\"[^\"]*\"|(?<=closest: )[^;]+|\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Cause:
    """One group of left-out records: the reason with its varying parts as "…", how many, and an example
    (the first record's varying values and where it is)."""

    reason: str
    count: int
    example: str
    where: str


def _split(reason: str) -> tuple[str, list[str]]:
    """(pattern with every variable part replaced by a marker, the variable parts in order)."""
    parts = _PARTS.findall(reason)
    return _PARTS.sub("\0", reason), parts


def group(rejections: Iterable[Rejection]) -> list[Cause]:
    """The causes of ``rejections``, most records first (then by reason)."""
    groups: dict[str, list[tuple[Rejection, list[str]]]] = {}
    for rej in rejections:
        pattern, parts = _split(rej.reason)
        groups.setdefault(pattern, []).append((rej, parts))
    out = []
    for pattern, members in groups.items():
        columns = list(zip(*(parts for _, parts in members), strict=True))
        constant = [len(set(col)) == 1 for col in columns]
        first, first_parts = members[0]
        shown = [p if same else VARYING for p, same in zip(first_parts, constant, strict=True)]
        pieces = pattern.split("\0")
        reason = pieces[0] + "".join(s + rest for s, rest in zip(shown, pieces[1:], strict=True))
        varying = [p for p, same in zip(first_parts, constant, strict=True) if not same]
        example = ", ".join(dict.fromkeys(varying))
        out.append(Cause(reason, len(members), example, f"{first.file}:{first.line}"))
    return sorted(out, key=lambda c: (-c.count, c.reason))


def render(rejections: list[Rejection], console, listed: str = "", verbose: bool = False) -> None:
    """The count of records left out and the table of their causes (rich); with ``verbose`` every record.
    ``listed``: where the full list is ("each with its file:line in results/calibration/calibration.md")."""
    from rich.table import Table

    if not rejections:
        return
    where = f" ({listed})" if listed else ""
    if verbose:
        console.print(f"{len(rejections)} records left out:", markup=False)
        for rej in rejections:
            console.print(f"  {rej}", markup=False, highlight=False)
        return
    causes = group(rejections)
    title = f"{len(rejections)} records left out, {len(causes)} causes{where}"
    table = Table(title=title, title_justify="left")
    table.add_column("records", justify="right")
    table.add_column("reason", overflow="fold")
    table.add_column("for example", overflow="fold")
    for c in causes:
        example = f"{c.example} ({c.where})" if c.example else c.where
        table.add_row(str(c.count), c.reason, example)
    console.print(table)
