"""HTML report: the numbers shown equal the JSON report's (dense, MoE, MLA and sliding-window models).

Every number the renderer takes from the report carries ``data-path`` (its JSON path), ``data-value`` and
``data-fmt``; the test resolves each path in the real ``report_to_dict`` output and checks the raw value and
the text shown (re-formatted with ``estimator.render.i18n``).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from estimator.catalog.measured import SCHEMA_VERSION as MEASURED_SCHEMA
from estimator.render import i18n
from estimator.render.htmlkit import FORMATS, lookup
from estimator.report.document import to_html as render_html

MODELS = {
    "dense": "llama-3.1-8b",
    "moe": "qwen3-30b-a3b",
    "mla": "deepseek-v3",
    "sliding": "gemma-3-27b",
}
REQUIRED_PATHS = (
    "memory.total_bytes",
    "memory.weights_bytes",
    "memory.kv_bytes",
    "memory.usable_bytes",
    "memory.headroom_bytes",
    "memory.utilization",
    "kv.kv_bytes",
    "model.params_total",
    "model.params_active",
    "speed.decode.tok_s",
    "speed.decode.lo_tok_s",
    "speed.prefill.tok_s",
    "speed.ttft_s",
    "context_scaling.0.total_bytes",
    "quant_matrix.0.weights_bytes",
    "memory.per_device.0.weights_bytes",
)


def build(model: str, hardware: str = "h100-80gb-sxm", quant: str = "Q4_K_M", ctx: int = 8192, **kw) -> dict:
    """The real report dict, through the same code path as ``python -m estimator report --format json``."""
    from estimator.app.serve import ReportParams, estimator_report

    params = dict(
        model=model,
        hardware=hardware,
        quant=quant,
        ctx=ctx,
        kv="f16",
        devices=1,
        concurrency=1,
        offload_gib=0.0,
        engine="llama.cpp",
        lang="en",
    )
    params.update(kw)
    return estimator_report(ReportParams(**params))


class NumberCollector(HTMLParser):
    """Collects (path, fmt, raw value, text) of every ``data-path`` number span, and element ids / tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.numbers: list[dict] = []
        self.section_ids: list[str] = []
        self.verdicts: list[tuple[str, str]] = []
        self.tags: set[str] = set()
        self.external: list[str] = []
        self._open: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "section" and "id" in a:
            self.section_ids.append(a["id"])
        for key in ("src", "href"):
            if tag in ("script", "link", "img", "iframe") and (a.get(key) or "").startswith(("http", "//")):
                self.external.append(a[key])
        if "data-path" in a and "data-fmt" in a:
            self._open.append(
                {"path": a["data-path"], "fmt": a["data-fmt"], "raw": a["data-value"], "text": ""}
            )
        elif "data-path" in a and tag == "span" and "verdict" in (a.get("class") or ""):
            self.verdicts.append((a["data-path"], a["data-value"]))

    def handle_data(self, data):
        for item in self._open:
            item["text"] += data

    def handle_endtag(self, tag):
        if tag == "span" and self._open:
            self.numbers.append(self._open.pop())


def parse(html: str) -> NumberCollector:
    c = NumberCollector()
    c.feed(html)
    c.close()
    return c


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    report = build(MODELS[request.param])
    return request.param, report


@pytest.mark.parametrize("lang", ["en", "es"])
def test_numbers_shown_equal_json(case, lang):
    kind, report = case
    report = json.loads(json.dumps(report))  # exactly what --format json carries
    html = render_html(report, lang)
    c = parse(html)
    assert len(c.numbers) > 80, f"{kind}: only {len(c.numbers)} tagged numbers"
    shown = {n["path"] for n in c.numbers}
    missing = [p for p in REQUIRED_PATHS if p not in shown]
    assert not missing, f"{kind}: key numbers not shown: {missing}"
    for n in c.numbers:
        value = lookup(report, n["path"])
        if value is None:
            assert n["raw"] == "" and n["text"] == "—", n
            continue
        assert float(n["raw"]) == pytest.approx(float(value), rel=0, abs=0), n  # raw value is the JSON value
        assert n["text"] == FORMATS[n["fmt"]](value, lang), n  # text is that value formatted for the language
    for path, verdict in c.verdicts:
        assert lookup(report, path) == verdict


def test_sections_charts_and_self_contained(case):
    kind, report = case
    html = render_html(report, "en")
    c = parse(html)
    for sid in (
        "model",
        "memory",
        "kv",
        "context",
        "quant",
        "speed",
        "multi",
        "cost",
        "finetune",
        "recommend",
        "launch",
    ):
        assert sid in c.section_ids, f"{kind}: section {sid} missing"
    for chart in ("chart-memory", "chart-line", "chart-bars"):
        assert chart in html, f"{kind}: {chart} missing"
    assert html.count("<svg") >= 4
    assert "<script" not in html and not c.external, "the report must not load anything at view time"
    assert "http://www.w3.org/2000/svg" in html  # the only URL-like string needed (SVG namespace)
    # every speed figure says where its coefficients came from
    assert report["speed"]["decode"]["coefficients"] in html
    assert "GiB = 2^30 bytes, GB = 10^9 bytes" in html


def test_spanish_number_format_and_vocabulary():
    report = build("llama-3.1-8b")
    html = render_html(report, "es")
    total_gib = report["memory"]["total_bytes"] / 2**30
    assert i18n.fmt_num(total_gib, "es") + " GiB" in html
    assert "Desglose de asignación de memoria" in html and "Margen de seguridad" in html
    assert i18n.fmt_int(131072, "es") == "131.072"
    assert i18n.fmt_num(1234.56, "es") == "1.234,56" and i18n.fmt_num(1234.56, "en") == "1,234.56"


def test_model_kinds_differ_where_physics_says():
    """Sanity: the MLA model's KV is the latent size (issue 2's known answer), read from the JSON."""
    mla = build("deepseek-v3", hardware="h200-141gb-sxm")
    # 61 layers x (512 + 64) elements x 2 bytes x 8192 tokens (f16), issue 2's known answer: 0.536 GiB
    assert mla["kv"]["kv_bytes"] / 2**30 == pytest.approx(61 * 576 * 2 * 8192 / 2**30, rel=0.01)
    assert "MLA" in render_html(mla, "en")


def test_measured_run_shown_beside_estimate(tmp_path):
    report = build("llama-3.1-8b")
    row = {
        "record_id": "x",
        "schema_version": MEASURED_SCHEMA,
        "timestamp_utc": "2026-01-01T00:00:00Z",
        "origin": "imported",
        "source": "https://example.org/bench",
        "fitbench_git_sha": "",
        "host": "h",
        "engine": "llama.cpp",
        "engine_version": "b6000",
        "build_info": "",
        "backend": "CUDA",
        "device_name": "H100",
        "hardware_id": report["hardware"]["id"],
        "hardware_family": "",
        "n_devices": 1,
        "driver": "",
        "model_id": report["model"]["id"],
        "model_fingerprint": "",
        "n_layers_real": 32,
        "n_layers_measured": 32,
        "quant": "Q4_K_M",
        "synthetic_weights": False,
        "n_prompt": 0,
        "n_gen": 128,
        "n_depth": 0,
        "batch": 1,
        "n_ctx": 4096,
        "kv_dtype": "f16",
        "flash_attn": True,
        "n_threads": None,
        "n_batch": None,
        "n_ubatch": None,
        "n_gpu_layers": 99,
        "status": "ok",
        "decode_tok_s": 123.456,
    }
    proxy = dict(row, n_layers_measured=4, decode_tok_s=9876.5)  # depth-reduced proxy: must not be shown
    (tmp_path / "runs.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(proxy) + "\nnot json\n")
    html = render_html(report, "en", results_dir=tmp_path)
    assert 'data-measured="decode" data-value="123.456"' in html
    assert "https://example.org/bench" in html and "runs.jsonl:1" in html
    # the proxy's figure appears nowhere (a bare "9876" can occur inside any long float of the page)
    assert set(re.findall(r'data-measured="decode" data-value="([^"]+)"', html)) == {"123.456"}
    assert "9876.5" not in html and "9,876" not in html and "9,877" not in html


def test_measured_schema_matches_harness():
    from harness.records import SCHEMA_VERSION

    assert MEASURED_SCHEMA == SCHEMA_VERSION


def test_cli_html_output(tmp_path):
    from estimator.app.cli import main

    out = tmp_path / "report.html"
    rc = main(
        [
            "report",
            "--model",
            "llama-3.1-8b",
            "--hardware",
            "rtx-4090",
            "--format",
            "html",
            "--lang",
            "es",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and 'lang="es"' in text and "<svg" in text
