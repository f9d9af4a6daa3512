"""JSON rendering: a report dict serialised, the shipped schema, and JSON Schema for annotated record types.

The report schema (``schema/report.schema.json``, JSON Schema draft 2020-12) pins every key, its type and unit
(in the key name); it is generated from the section records (``estimator.report.document.generate_schema``,
built with ``type_schema``) and ``schema_version`` changes whenever a key is renamed or removed (adding an
optional key keeps the version).
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


def type_schema(tp) -> dict:
    """JSON Schema of one annotated type (int, float, str, bool, optional, tuple, dict, dataclass or
    NamedTuple record)."""
    import dataclasses
    import types
    import typing

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = type_schema(args[0]) if len(args) == 1 else {"anyOf": [type_schema(a) for a in args]}
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is tuple or origin is list:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(typing.get_args(tp)[1])}
    if tp is tuple:
        return {"type": "array"}
    names = None
    if dataclasses.is_dataclass(tp):
        names = [f.name for f in dataclasses.fields(tp)]
    elif isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields"):  # NamedTuple record
        names = list(tp._fields)
    if names is not None:
        hints = typing.get_type_hints(tp)
        props = {name: type_schema(hints[name]) for name in names}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    simple = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema mapping for {tp!r}")
