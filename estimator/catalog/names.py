"""Forgiving names: what a user types for a model or a device, matched to a catalog id.

Both catalogs are matched the same way, in this order:

1. an exact id, Hugging Face id or catalog alias (case-insensitive): that entry, no note (an alias gets a note
   saying which entry it names and why);
2. the name's **tokens**: lower case, split at ``- _ / space``; device names also at letter/digit boundaries
   ("RTX4090" -> rtx, 4090; "H100" -> h, 100); for models an organisation prefix ("meta-llama/") and variant
   tokens (instruct, chat, it, hf, base, gguf, thinking, pt and dates such as 2507 or 0414) are dropped on
   both sides, so an Instruct / chat / dated release names its base architecture's entry; so are the format
   tokens of a quantized re-upload (fp8, nvfp4, fp4, mxfp4, awq: ``stated_format`` keeps what they say).
   The entries one of whose names (the id, the Hugging Face id, the display name or an alias) holds all of
   the name's tokens are candidates; the one whose id has the fewest tokens beyond them wins ("4090" ->
   rtx-4090 rather than rtx-4090-d).  A memory size ("12gb": 12, gb) or a GPU core count ("30c": 30, c) in
   a device id that the name does not state does not count: they tell bins of one chip apart, so "3060" is
   rtx-3060-12gb rather than rtx-3060-ti, "apple m4" is apple-m4-10c rather than the M4 Pro, and "4060 ti"
   asks which of the 8 / 16 GB cards.  Among bins tied that way the full chip, whose id states no core count,
   wins ("m3 max" is apple-m3-max, not apple-m3-max-30c).
   A tie is ambiguous: SpecError listing the candidates ("h100" -> h100-80gb-sxm, h100-80gb-pcie,
   h100-nvl-94gb: which one?).  A match by tokens carries a note the report shows.
3. nothing: SpecError naming the three closest ids.

Pure functions over the catalog dicts (``estimator.catalog.data``); no I/O of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from estimator.specs import SpecError

# tokens that name a release of an architecture rather than the architecture (dropped for models)
VARIANT_TOKENS = frozenset({"instruct", "chat", "it", "hf", "base", "gguf", "thinking", "pt"})
# tokens of a quantized re-upload's name -> the checkpoint dtype they state (ModelSpec.native_dtype; dropped
# for matching like the variant tokens): "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "nvidia/...-FP4" (NVIDIA's
# FP4 repositories are ModelOpt NVFP4), "Qwen/Qwen3-32B-AWQ"; "dynamic" only qualifies FP8 ("-FP8-dynamic")
FORMAT_TOKENS = {"fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4", "awq": "awq"}
_FORMAT_QUALIFIERS = frozenset({"dynamic"})
_DATE = re.compile(r"^(\d{4}|\d{6}|\d{8})$")  # 2507, 0414, 240620, 20240620
_SPLIT = re.compile(r"[\s_/\-]+")
_BOUNDARY = re.compile(r"(?<=[a-z])(?=\d)|(?<=\d)(?=[a-z])")


def tokens(name: str, model: bool = False) -> tuple[str, ...]:
    """The matching tokens of a name (module doc, step 2), in order, without repeats.  Model names keep
    letter-digit runs whole ("30b", "a3b", "qwen3"); device names split them ("rtx4090" -> rtx, 4090)."""
    s = str(name).strip().lower()
    if model and "/" in s:
        s = s.split("/", 1)[1]
    out: list[str] = []
    for part in _SPLIT.split(s):
        if not part:
            continue
        if model and (part in VARIANT_TOKENS or part in FORMAT_TOKENS or _DATE.match(part)):
            continue
        if model and part in _FORMAT_QUALIFIERS and "fp8" in s:
            continue
        # keep version numbers whole ("3.1", "v0.3"); split letters from digits elsewhere ("rtx4090")
        pieces = [part] if model or re.fullmatch(r"v?\d+(\.\d+)+", part) else _BOUNDARY.split(part)
        out += [p for p in pieces if p and p != "."]
    return tuple(dict.fromkeys(out))


def _qualifiers(eid: str, model: bool) -> dict[str, set[str]]:
    """The tokens of a device id that qualify a chip rather than name one: {"gb": its memory size, "c": its
    GPU core count} ("rtx-3060-12gb": 12, gb; "apple-m3-max-30c": 30, c); empty for models."""
    seq = tokens(eid, model)
    out: dict[str, set[str]] = {}
    for i, t in enumerate(seq):
        if not model and t in ("gb", "c") and i and seq[i - 1].isdigit():
            out.setdefault(t, set()).update({seq[i - 1], t})
    return out


def _beyond(eid: str, want: set[str], model: bool) -> int:
    """How many tokens of the id ``eid`` the name's ``want`` lacks, its qualifiers (``_qualifiers``) not
    counted."""
    quals = set().union(*_qualifiers(eid, model).values())
    return len(set(tokens(eid, model)) - want - quals)


def stated_format(name: str) -> str | None:
    """The checkpoint dtype a model name states with a format token (``FORMAT_TOKENS``), None without one;
    SpecError when it states two ("...-FP8-AWQ")."""
    s = str(name).strip().lower().rsplit("/", 1)[-1]
    found = {FORMAT_TOKENS[p] for p in _SPLIT.split(s) if p in FORMAT_TOKENS}
    if len(found) > 1:
        raise SpecError(f"model {name!r} names two weight formats ({', '.join(sorted(found))}); name one")
    return found.pop() if found else None


def match(
    name: str,
    entries: Iterable[tuple[str, Iterable[str]]],
    exact: dict[str, str],
    what: str,
    model: bool = False,
    full_chip: bool = True,
) -> tuple[str, bool] | None:
    """(catalog id, matched by tokens) for ``name``, None when nothing matches.  ``full_chip`` False: bins of
    one chip that the name does not tell apart stay ambiguous (a published row that does not state its bin),
    where a person's typed name gets the full chip.

    ``entries``: (id, the names it is known by); ``exact``: lower-cased id / HF id / alias -> id.  SpecError
    when the name is ambiguous (module doc).
    """
    key = str(name).strip().lower()
    if key in exact:
        return exact[key], False
    want = set(tokens(name, model))
    if not want:
        return None
    best: dict[str, int] = {}
    for eid, names in entries:
        if any(want <= set(tokens(n, model)) for n in (eid, *names)):
            best[eid] = _beyond(eid, want, model)  # extra tokens of the id itself
    if not best:
        return None
    low = min(best.values())
    winners = [eid for eid, x in best.items() if x == low]
    full = [eid for eid in winners if "c" not in _qualifiers(eid, model)]
    if full_chip and len(winners) > 1 and len(full) == 1:  # bins of one chip: the full chip
        winners = full
    if len(winners) > 1:
        others = sorted((x, eid) for eid, x in best.items() if x != low)
        also = f" (also: {', '.join(eid for _, eid in others[:5])})" if others else ""
        listed = ", ".join(winners)
        raise SpecError(
            f"{what} {name!r} matches {len(winners)} catalog entries: {listed}{also}; name one of them"
        )
    return winners[0], True
