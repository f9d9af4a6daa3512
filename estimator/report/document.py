"""The sizing report as a document: built from its sections (``estimator.report.sections.UNITS``), turned into
its JSON form, and rendered as text, Markdown or HTML from that JSON form.

``report_to_dict`` is the JSON format (``schema/report.schema.json``, documented in docs/report.md) that
every renderer renders from, so every format shows the same numbers.  Units live in field names
(``*_bytes``, ``*_s``, ``*_tok_s``, ``*_gbs``, ``*_usd``); renderers convert to GiB (2^30 B) and GB (10^9 B)
and label which.  Every speed figure carries the label of the coefficient set it came from and whether that
set is calibrated; memory figures are estimates from the estimator's formulas.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from estimator import __version__
from estimator.catalog.measured import MeasuredMatches, find_measured
from estimator.render.blocks import Block
from estimator.render.htmlkit import Ctx
from estimator.render.i18n import check_lang, t
from estimator.report.sections import UNITS
from estimator.report.units import Build, ReportOptions
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Report:
    """A built report: its header fields and one value per section key, in report order."""

    schema_version: int
    fitbench_version: str
    generated_utc: str
    sections: dict[str, Any]


def build_report(
    model: ModelSpec,
    hardware: HardwareSpec,
    quant: QuantSpec,
    workload: Workload,
    table,
    options: ReportOptions | None = None,
) -> Report:
    """Every section for one configuration (pure: no I/O beyond what ``options`` already holds).

    Raises SpecError for a workload the model cannot take (``validate_workload``).
    """
    from estimator.physics.limits import validate_workload

    options = options or ReportOptions()
    request_warnings = options.request_notes + validate_workload(model, workload, options.allow_overlong)
    b = Build(model, hardware, quant, workload, table, options, UNITS, request_warnings)
    sections = {u.key: b.get(u.key) for u in UNITS if u.key is not None}
    now = _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()
    return Report(SCHEMA_VERSION, __version__, now, sections)


def _plain(value):
    """Records (dataclasses, NamedTuples) -> dicts, tuples -> lists, recursively; other values unchanged
    (JSON-ready; NaN -> None)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {k: _plain(v) for k, v in zip(value._fields, value, strict=True)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def report_to_dict(report: Report) -> dict:
    """The JSON form of a report: the header fields, then every section in report order.

    Stable: documented by ``estimator/schema/report.schema.json`` (``schema_version`` 1).
    """
    head = {
        "schema_version": report.schema_version,
        "fitbench_version": report.fitbench_version,
        "generated_utc": report.generated_utc,
    }
    return {**head, **{k: _plain(v) for k, v in report.sections.items()}}


# ------------------------------------------------------------------------------------------------ renderings
def blocks(d: dict) -> list[Block]:
    """The text / Markdown blocks of a report dict, in report order (the first is the summary)."""
    return [b for u in UNITS if u.text is not None and (b := u.text(d)) is not None]


def to_text(d: dict, width: int | None = None) -> str:
    """The terminal report as plain text (files, pipes, tests)."""
    from estimator.render.text import DEFAULT_WIDTH, layout, lines_text

    return lines_text(layout(blocks(d), width or DEFAULT_WIDTH))


def print_text(d: dict, console: Console) -> None:
    """The report through a rich console, at its width, with colours on a terminal."""
    from estimator.render.text import layout, print_lines

    print_lines(layout(blocks(d), console.width), console)


def to_markdown(d: dict) -> str:
    """GitHub-flavoured Markdown of a report dict."""
    from estimator.render.markdown import render_markdown

    return render_markdown(blocks(d))


def to_json(d: dict) -> str:
    """The report dict as JSON text."""
    from estimator.render.json import render_json

    return render_json(d)


def measured_for(report: dict[str, Any], results_dir: str | Path | None) -> MeasuredMatches | None:
    """Measured runs matching the report's model, hardware and quant (None when no results dir is given)."""
    if results_dir is None:
        return None
    model = report.get("model") or {}
    workload = report.get("workload") or {}
    hardware = report.get("hardware") or {}
    return find_measured(
        results_dir,
        [model.get("id", ""), model.get("hf_id") or ""],
        hardware.get("id", ""),
        str(report.get("quant", "")),
        engine=str(workload.get("engine", "llama.cpp")),
        kv_dtype=str(workload.get("kv_dtype", "f16")),
        n_devices=int(workload.get("n_devices") or 1),
    )


def to_fragment(
    d: dict, lang: str = "en", results_dir: str | Path | None = None, measured: MeasuredMatches | None = None
) -> str:
    """The report as an HTML fragment (one ``<article class="fb-report">``), without the stylesheet.

    Measured runs from ``results_dir`` appear beside the estimates; chart series come from ``chart_data``.
    """
    from estimator.render.html import article

    check_lang(lang)
    if measured is None:
        measured = measured_for(d, results_dir)
    ctx = Ctx(d, lang, measured, dict(d.get("chart_data") or {}))
    return article([u.html(ctx) for u in UNITS if u.html is not None], lang, d.get("schema_version", ""))


def to_html(
    d: dict, lang: str = "en", results_dir: str | Path | None = None, measured: MeasuredMatches | None = None
) -> str:
    """A complete, self-contained HTML document of the report (inline CSS and SVG, no scripts)."""
    from estimator.render.html import document

    model = (d.get("model") or {}).get("name", "")
    hardware = (d.get("hardware") or {}).get("name", "")
    title = f"{t('title', lang)} — {t('title_on', lang, model=model, hardware=hardware)}"
    return document(to_fragment(d, lang, results_dir, measured), title, lang)


def generate_schema() -> dict:
    """The JSON Schema of ``report_to_dict``, from the section record types; ``schema/report.schema.json``
    must equal it (a test checks), so a field change cannot slip past the documented schema."""
    from estimator.render.json import type_schema

    props: dict[str, Any] = {
        "schema_version": {"const": SCHEMA_VERSION},
        "fitbench_version": {"type": "string"},
        "generated_utc": {"type": "string"},
    }
    props.update({u.key: type_schema(u.type) for u in UNITS if u.key is not None})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://fitbench.invalid/schema/report.schema.json",
        "title": "fitbench sizing report (python -m estimator report --format json)",
        "description": "Units are in key names: *_bytes bytes, *_s seconds, *_tok_s tokens/s, "
        "*_gbs 10^9 B/s, "
        "*_usd US dollars, *_w watts. Speeds are estimates; 'coefficients' names the set used.",
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }
