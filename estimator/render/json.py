"""JSON rendering of a report: ``report_to_dict`` serialised, documented by ``schema/report.schema.json``.

The schema (JSON Schema draft 2020-12) pins every key, its type and unit (in the key name); ``schema_version``
changes whenever a key is renamed or removed (adding an optional key keeps the version).
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "report.schema.json"


def render_json(d: dict, indent: int | None = 2) -> str:
    """The report dict as JSON text (UTF-8, keys in report order, trailing newline)."""
    return json.dumps(d, indent=indent, ensure_ascii=False, allow_nan=False) + "\n"


def load_schema() -> dict:
    """The JSON Schema of ``--format json``."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _type_schema(tp) -> dict:
    """JSON Schema of one annotated type (int, float, str, bool, optional, tuple, dict, dataclass or
    NamedTuple record)."""
    import dataclasses
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = _type_schema(args[0]) if len(args) == 1 else {"anyOf": [_type_schema(a) for a in args]}
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is tuple or origin is list:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return {"type": "array", "items": _type_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(typing.get_args(tp)[1])}
    if tp is tuple:
        return {"type": "array"}
    names = None
    if dataclasses.is_dataclass(tp):
        names = [f.name for f in dataclasses.fields(tp)]
    elif isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):  # NamedTuple record
        names = list(tp._fields)
    if names is not None:
        hints = typing.get_type_hints(tp)
        props = {name: _type_schema(hints[name]) for name in names}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    simple = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema mapping for {tp!r}")


def generate_schema() -> dict:
    """The schema derived from the Report dataclasses; ``schema/report.schema.json`` must equal it (a test
    checks), so a field change cannot slip past the documented schema."""
    from estimator.report.model import SCHEMA_VERSION, Report

    body = _type_schema(Report)
    body["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://fitbench.invalid/schema/report.schema.json",
        "title": "fitbench sizing report (python -m estimator report --format json)",
        "description": "Units are in key names: *_bytes bytes, *_s seconds, *_tok_s tokens/s, "
        "*_gbs 10^9 B/s, "
        "*_usd US dollars, *_w watts. Speeds are estimates; 'coefficients' names the set used.",
        **body,
    }
