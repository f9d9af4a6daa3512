"""The sizing page of ``python -m estimator serve``: a form plus the server-rendered report fragment.

The page is one HTML document with the report stylesheet and ``web/page.js`` inline (no external files).  The
script only collects the form, calls ``/fragment`` and swaps the HTML in; the sizing happens on the server.
Select options come from the estimator's catalogs (model ids, hardware ids, quant formats).
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from pathlib import Path
from typing import Any

from estimator.app.params import DEFAULTS
from estimator.engines import ENGINES
from estimator.physics import covariates as cov
from estimator.render.html import css
from estimator.render.i18n import LANGS, t

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
KV_DTYPES = ("f16", "bf16", "q8_0", "q4_0", "fp8")
LANG_NAMES = {"en": "English", "es": "Español"}


@lru_cache(maxsize=1)
def options() -> dict[str, list[tuple[str, str]]]:
    """(value, label) choices of each select, from the estimator's catalogs."""
    from estimator.catalog.data import hardware_entry, hardware_families, hardware_ids, model_entry, model_ids
    from estimator.physics.quant import QUANTS

    models = [(m, f"{model_entry(m).get('name') or m} ({m})") for m in model_ids()]
    hardware = []
    for h in hardware_ids():
        entry = hardware_entry(h)
        mem = entry.get("memory_gb")
        hardware.append((h, f"{entry.get('name') or h}" + (f" ({mem:g} GB)" if mem else "")))
    return {
        "model": sorted(models, key=lambda x: x[1].lower()),
        "hardware": hardware,
        "quant": [(q, q) for q in QUANTS],
        "kv": [(k, k) for k in KV_DTYPES],
        "engine": [(e, e) for e in ENGINES],
        "lang": [(lang, LANG_NAMES[lang]) for lang in LANGS],
        "family": [("", "—"), *((f, f) for f in hardware_families())],
    }


def _select(name: str, label: str, choices: list[tuple[str, str]], value: str) -> str:
    opts = "".join(
        f'<option value="{escape(v)}"{" selected" if v == value else ""}>{escape(lab)}</option>'
        for v, lab in choices
    )
    if value and value not in {v for v, _ in choices}:  # keep an id typed into the URL visible (e.g. a path)
        opts += f'<option value="{escape(value)}" selected>{escape(value)}</option>'
    return f'<label>{escape(label)}<select name="{name}" id="f-{name}">{opts}</select></label>'


def _number(name: str, label: str, value: Any, lo: float, step: str = "1", placeholder: str = "") -> str:
    """A number field; with a ``placeholder`` it is optional (empty = the default the placeholder names)."""
    extra = f' placeholder="{escape(placeholder)}"' if placeholder else " required"
    return (
        f'<label>{escape(label)}<input type="number" name="{name}" id="f-{name}" '
        f'value="{escape(str(value))}" '
        f'min="{lo:g}" step="{step}" inputmode="decimal"{extra}></label>'
    )


def _custom_fields(values: dict[str, str], lang: str, opts: dict) -> str:
    """Custom hardware: memory, bandwidth, TFLOPS, family and a CPU's cores and clock (``hardware=custom``;
    with a catalog device they override its figures).  Hidden unless custom is chosen or a figure is given;
    the script shows them."""
    figures = ("memory_gib", "bandwidth_gbs", "tflops", "cpu_cores", "cpu_clock_ghz")
    shown = values["hardware"] == "custom" or any(values[k] for k in figures)
    # a CPU left blank stands at the cores x clock covariate's reference (estimator.physics.covariates)
    ref_cores, ref_clock = f"{cov.CPU_REFERENCE_CORES}", f"{cov.CPU_DEFAULT_CLOCK_GHZ:g}"
    fields = "".join(
        [
            _number("memory_gib", t("memory_gib", lang), values["memory_gib"], 0, "any", "GiB"),
            _number("bandwidth_gbs", t("bandwidth_gbs", lang), values["bandwidth_gbs"], 0, "any", "GB/s"),
            _number("tflops", t("tflops", lang), values["tflops"], 0, "any", "TFLOPS"),
            _select("family", t("family", lang), opts["family"], values["family"]),
            _number("cpu_cores", t("cpu_cores", lang), values["cpu_cores"], 1, "1", ref_cores),
            _number("cpu_clock_ghz", t("cpu_clock_ghz", lang), values["cpu_clock_ghz"], 0, "any", ref_clock),
        ]
    )
    return (
        f'<fieldset id="fb-custom" class="custom-hw"{"" if shown else " hidden"}>'
        f"<legend>{escape(t('custom_hw', lang))}</legend>{fields}</fieldset>"
    )


def page_html(params: Any, lang: str, fragment: str, error: str = "") -> str:
    """The full page; ``params`` is a ``ReportParams`` (None for an invalid query: defaults shown)."""
    values = dict(DEFAULTS) if params is None else params.query()
    values["lang"] = lang
    opts = options()
    form = "".join(
        [
            _select("model", t("model", lang), opts["model"], values["model"]),
            _select(
                "hardware",
                t("hardware", lang),
                [("auto", t("hw_auto", lang)), ("custom", t("hw_custom", lang)), *opts["hardware"]],
                values["hardware"],
            ),
            _select(
                "quant", t("quant", lang), [("", t("quant_default", lang)), *opts["quant"]], values["quant"]
            ),
            _number("ctx", t("context", lang), values["ctx"], 1, "1", t("ctx_default", lang)),
            _select("kv", t("kv_dtype", lang), opts["kv"], values["kv"]),
            _number("devices", t("devices", lang), values["devices"], 1),
            _number("concurrency", t("concurrency", lang), values["concurrency"], 1),
            _number("offload_gib", t("offload", lang), values["offload_gib"], 0, "any"),
            _select("engine", t("engine", lang), opts["engine"], values["engine"]),
            _number("isl", t("isl", lang), values["isl"], 1),
            _number("osl", t("osl", lang), values["osl"], 1),
            _number("slo_ttft_ms", t("slo_ttft_ms", lang), values["slo_ttft_ms"], 0, "any"),
            _number("slo_tpot_ms", t("slo_tpot_ms", lang), values["slo_tpot_ms"], 0, "any"),
            _select("lang", t("language", lang), opts["lang"], lang),
            _custom_fields(values, lang, opts),
            f'<button type="submit" id="fb-update">{escape(t("update", lang))}</button>',
        ]
    )
    query = "&".join(f"{k}={escape(str(v))}" for k, v in values.items())
    script = (WEB_DIR / "page.js").read_text(encoding="utf-8")
    page_css = (WEB_DIR / "page.css").read_text(encoding="utf-8")
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(t('page_title', lang))}</title><style>{css()}{page_css}</style></head>"
        '<body style="margin:1rem"><div class="fb-page">'
        f'<div class="topbar"><h1 style="font-size:1.2rem">{escape(t("page_title", lang))}</h1>'
        f'<span><span class="status" id="fb-status" data-loading="{escape(t("loading", lang))}"></span> '
        f'<a id="fb-json" href="/api/report?{query}">{escape(t("json_link", lang))}</a></span></div>'
        f'<form id="fb-form" method="get" action="/">{form}</form>'
        f'<div class="error" id="fb-error" role="alert"{"" if error else " hidden"}>{escape(error)}</div>'
        f'<div id="fb-report">{fragment}</div></div>'
        f"<script>{script}</script></body></html>\n"
    )
