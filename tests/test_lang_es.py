"""``report --lang es`` is Spanish everywhere (issue 13: 8): every format that takes ``--lang`` (text,
``--brief``, Markdown, HTML, the warnings on stderr) over a varied set of configurations — three engines, a
support fallback and an unsupported format, memory switches, tensor parallelism, MoE and host offload, serving
flags, custom and overridden hardware, a GGUF file and a config.json — shows no English words of its own.

The check is generic: the rendered text (commands, URLs and the catalog's own data — names, notes, sources,
cited support facts, which are quoted as published — taken out) must hold none of ``ENGLISH``, words of
English prose and of the report's vocabulary that Spanish does not use.  A new English sentence anywhere in
a report fails it; ids, flags and paths (words with ``-``, ``_``, ``/``, ``.``, digits) are not words here.
"""

from __future__ import annotations

import csv
import html
import json
import re
from functools import cache
from pathlib import Path

import pytest

from estimator.engines.base import MXFP4_CHECKPOINT
from estimator.physics.quant import QUANTS
from estimator.physics.support import FALLBACK_WORDS
from estimator.render.translate import QUANTS_ES, es_numbers, tr
from estimator.report.document import blocks, report_to_dict, to_brief, to_fragment, to_markdown, to_text
from estimator.report.request import ReportRequest, make_report
from tests.estimator_cli import cli
from tests.gguf_files import golden_tiny_llama

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
TINY_GGUF = str(golden_tiny_llama())  # written into the model cache (tests.gguf_files)

# Words of English prose and of the report's own vocabulary that a Spanish report does not use.  Loanwords
# the Spanish report keeps on purpose (prefill, decode, offload, prompt, batch, backend, kernel, host, slots,
# tokens, bytes, hardware, checkpoint, embeddings) are not here.
ENGLISH = frozenset(
    """
    the of and with for from on is are was be by not does do per only when this that these those which than
    into without each every its it has have there here at or to an as if but so can cannot could would should
    how what where while within about after before first then also same all any some more less most other
    others else instead between through because above below we you your
    run runs running fit fits sized assumed estimated estimate measured calibrated uncalibrated pooled basis
    natively fallback mature developing device devices weights weight memory speed cost cache layers layer
    heads hidden window sliding experts routed shared dense full hybrid linear chunked scheduler defaults
    graphs verified unknown never active interval residuals held leave engine support requests request
    clients client output stream selected cheapest recommended options quantization wide bound widened
    matmuls context price rate cloud hours month months throughput aggregate family families covariates
    points catalog default maximum warning note none yes model models attention state split file
    source since reported assessment uncertain schema unified
    """.split()
)
# A word: letters (and inner apostrophes); ids, flags, paths and numbers are skipped whole.
_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_ID = re.compile(r"[-_/.=<>`0-9@#$%+]")
_PUNCT = ".,;:!?()[]{}\"'«»—–*|"


# The configurations (ReportRequest fields); ``hardware="auto"`` is left out (it depends on the machine).
CASES: dict[str, dict] = {
    "llama.cpp, calibrated device": dict(model="llama-3.1-8b", hardware="rtx-4090"),
    "llama.cpp on an AMX CPU: the crash note, the CPU rate": dict(
        model="llama-3.1-8b", hardware="xeon-platinum-8480-plus", quant="Q4_K_M"
    ),
    "llama.cpp, quantized prefill not modelled (Hopper)": dict(
        model="llama-3.1-8b", hardware="h200-141gb-sxm"
    ),
    "vLLM NVFP4 weight-only fallback": dict(
        model="qwen3-0.6b", hardware="h100-sxm", quant="NVFP4", engine="vllm"
    ),
    "vLLM NVFP4 unsupported on ROCm": dict(
        model="llama-3.1-8b", hardware="mi300x", quant="NVFP4", engine="vllm"
    ),
    "flash attention off, --swa-full": dict(
        model="gemma-3-27b", hardware="rtx-4090", flash_attn="off", swa_full=True
    ),
    "8 devices, tensor parallel": dict(
        model="llama-3.1-70b", hardware="h100-sxm", devices=8, split="tp", engine="vllm"
    ),
    "MoE experts on the CPU": dict(model="qwen3-30b-a3b", hardware="rtx-4090", n_cpu_moe=20),
    "vLLM startup figures of a sliding-window model": dict(
        model="gemma-3-27b", hardware="h100-sxm", engine="vllm", ctx=32768
    ),
    "serving flags, vLLM": dict(
        model="llama-3.1-8b", hardware="h100-sxm", engine="vllm", isl=1024, osl=256, slo_ttft_ms=500
    ),
    "SGLang": dict(
        model="qwen3-8b", hardware="h100-sxm", engine="sglang", isl=1024, osl=256, slo_ttft_ms=500
    ),
    "SGLang hybrid beyond its state pool": dict(
        model="qwen3-next-80b-a3b", hardware="h200", engine="sglang", quant="FP8", ctx=32768, concurrency=45
    ),
    "vLLM hybrid at its block manager's capacity": dict(
        model="qwen3-next-80b-a3b", hardware="h200", engine="vllm", quant="FP8", ctx=32768, concurrency=66
    ),
    "decode calibrated, prefill not (Intel Max, SYCL)": dict(
        model="llama-3.1-8b", hardware="intel-max-1550", quant="F16", backend="SYCL"
    ),
    "custom hardware": dict(model="llama-3.1-8b", hardware="custom", memory_gib=24, bandwidth_gbs=900),
    "custom hardware, no TFLOPS": dict(
        model="qwen3-0.6b", hardware="custom", memory_gib=8, bandwidth_gbs=120
    ),
    "hybrid linear attention, no llama.cpp GGUF": dict(model="qwen3-next-80b-a3b", hardware="mi300x"),
    "llama.cpp on CANN, host CPU fallback": dict(model="qwen3-8b", hardware="atlas-300i-duo-96gb"),
    "llama.cpp on CANN, F16 experts copied per token": dict(
        model="gemma-4-26b-a4b", hardware="atlas-300i-duo-96gb", quant="F16"
    ),
    "vLLM on Apple: CPU cores only": dict(model="llama-3.1-8b", hardware="apple-m3-max", engine="vllm"),
    "Apple override, two unified devices": dict(
        model="llama-3.1-8b", hardware="apple-m3-max", memory_gib=64, devices=2
    ),
    "does not fit, host offload": dict(model="llama-3.1-70b", hardware="rtx-4090", offload_gib=20),
    "does not fit at all": dict(model="llama-3.1-405b", hardware="rtx-3060-12gb"),
    "HF id, q8_0 KV": dict(
        model="Qwen/Qwen3-30B-A3B-Instruct-2507", hardware="4090", ctx=32768, kv_dtype="q8_0"
    ),
    "MLA, 8 devices": dict(
        model="deepseek-v3", hardware="h200-141gb-sxm", devices=8, quant="Q4_K_M", ctx=32768, kv_dtype="q8_0"
    ),
    "chunked attention": dict(
        model="llama-4-scout-17b-16e", hardware="h100-nvl-94gb", ctx=131072, quant="Q4_K_S"
    ),
    "mamba hybrid": dict(model="nemotron-3-super-120b-a12b", hardware="b200", ctx=16384),
    "overlong context on a CPU": dict(
        model="llama-2-7b", hardware="ryzen-9-7950x", ctx=8192, allow_overlong=True, quant="Q4_0"
    ),
    "default context clamped": dict(model="llama-2-7b", hardware="rtx-4090"),
    "money and fine-tuning options": dict(
        model="mixtral-8x7b",
        hardware="a100-80gb-sxm",
        usd_per_hour=2.5,
        hours_per_day=10,
        kwh_price=0.3,
        purchase_usd=15000,
        ft_rank=64,
        ft_seq_len=4096,
        ft_micro_batch=2,
    ),
    "not a llama.cpp format": dict(model="llama-3.1-8b", hardware="rtx-4090", quant="FP8"),
    "llama.cpp slots, memory switches": dict(
        model="llama-3.1-8b", hardware="rtx-4090", concurrency=4, kv_unified=False, kv_pad=256, ubatch=1024
    ),
    "vLLM AWQ with host offload": dict(
        model="llama-3.1-8b", hardware="rtx-4090", engine="vllm", quant="AWQ-INT4", offload_gib=2
    ),
    "vLLM MXFP4 checkpoint": dict(
        model="gpt-oss-120b", hardware="h100-80gb-sxm", quant="MXFP4", ctx=131072, engine="vllm"
    ),
    "fp8 KV on llama.cpp": dict(model="llama-3.1-8b", hardware="rtx-4090", kv_dtype="fp8"),
    "overridden figures and family": dict(
        model="llama-3.1-8b", hardware="rtx-4090", bandwidth_gbs=900, tflops=100, family="nvidia-ampere"
    ),
    "Apple wired limit": dict(model="qwen3-8b", hardware="apple-m3-max", wired_limit_mb=100000),
    "SGLang FP8 from bf16": dict(model="llama-3.1-8b", hardware="rtx-4090", engine="sglang", quant="FP8"),
    "request lengths capped": dict(model="llama-3.1-8b", hardware="rtx-4090", isl=100000, osl=1000),
    "no concurrency meets the SLO": dict(
        model="llama-3.1-405b", hardware="rtx-4090", engine="vllm", isl=1024, osl=256, slo_ttft_ms=50
    ),
    "shipped prior coefficients": dict(
        model="llama-3.1-8b",
        hardware="rtx-4090",
        coefficients=str(ROOT / "estimator/data/prior_coefficients.json"),
    ),
    "Gaudi, vLLM": dict(model="qwen3-8b", hardware="gaudi-3", engine="vllm"),
    # the published FP8 format by default, --trust-remote-code notes, llama.cpp's refused tensor parallelism
    # a k-quant recipe whose rows are not whole blocks (the fallback note)
    "Gemma 4 26B-A4B, Q4_K_M fallback": dict(model="gemma-4-26b-a4b", hardware="rtx-4090"),
    # does not fit: the largest format that fits, the expert offload that fits
    "Llama 3.1 70B on a 4090": dict(model="llama-3.1-70b", hardware="rtx-4090"),
    "gpt-oss-120b on a 4090": dict(model="gpt-oss-120b", hardware="rtx-4090"),
    "Kimi K2, SGLang, 8 devices": dict(
        model="kimi-k2", hardware="h200-141gb-sxm", engine="sglang", devices=8
    ),
    # tensor parallelism does not fit (the MLA latent cache on every device), attention data parallelism does
    "DeepSeek-R1, SGLang, 8 devices, 128 clients": dict(
        model="deepseek-r1", hardware="h200-141gb-sxm", engine="sglang", devices=8, concurrency=128
    ),
    "DeepSeek-R1, TensorRT-LLM, attention data parallel": dict(
        model="deepseek-r1", hardware="b200", engine="trtllm", devices=8, concurrency=64, split="dp"
    ),
    # the f16 cache does not fit, q8_0 does
    "Gemma 3 27B at 131K on a 3090": dict(model="gemma-3-27b", hardware="rtx-3090", ctx=131072),
    "GGUF file": dict(model=TINY_GGUF, hardware="rtx-3090", ctx=256),
    "GGUF file re-sized": dict(
        model=TINY_GGUF, hardware="rtx-3090", ctx=256, quant="Q4_K_M"
    ),
    "config.json, custom hardware, vLLM": dict(
        model=str(GOLDEN / "gemma3-12b" / "config.json"),
        hardware="custom",
        memory_gib=48,
        bandwidth_gbs=864,
        tflops=362,
        family="nvidia-ada",
        engine="vllm",
    ),
}


@cache
def catalog_strings() -> tuple[str, ...]:
    """The catalog's own text of more than one word (model, hardware and cloud-rate fields, the support
    table's notes and sources), as written, with Spanish number formats and escaped for Markdown, longest
    first: quoted as published, not translated."""
    found: set[str] = set()

    def walk(x) -> None:
        if isinstance(x, str):
            if " " in x.strip():  # names, notes, sources; not the one-word codes (status, maturity)
                found.update((x, es_numbers(x), html.escape(x, False), es_numbers(html.escape(x, False))))
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    data = ROOT / "estimator" / "data"
    for name in ("models.json", "hardware.json"):
        walk(json.loads((data / name).read_text()))
    for name in ("support.csv", "cloud_rates.csv"):
        with open(data / name, newline="") as f:
            walk(list(csv.DictReader(f)))
    return tuple(sorted(found, key=len, reverse=True))


def english_words(text: str) -> list[str]:
    """The ``ENGLISH`` words of ``text`` once the catalog's own strings and URLs are taken out."""
    for s in catalog_strings():
        if s in text:
            text = text.replace(s, " ")
    text = re.sub(r"https?://\S+", " ", text)
    out = []
    for token in _TOKEN.findall(text):
        token = token.strip(_PUNCT)
        if _ID.search(token):
            continue
        out += [w for w in _WORD.findall(token) if w.lower() in ENGLISH]
    return out


def visible_html(fragment: str) -> str:
    """The text a reader sees: text nodes outside commands, styles and scripts (SVG labels included)."""
    body = re.sub(r"<(pre|code|style|script)\b.*?</\1>", " ", fragment, flags=re.S)
    return "\n".join(html.unescape(x).strip() for x in re.split(r"<[^>]+>", body) if x.strip())


@cache
def report(case: str) -> dict:
    return report_to_dict(make_report(ReportRequest(**CASES[case])))


def offending(text: str) -> list[str]:
    """Lines of ``text`` with English words, each with the words found."""
    return [f"{sorted(set(w))}: {line.strip()}" for line in text.splitlines() if (w := english_words(line))]


@pytest.mark.parametrize("case", CASES)
def test_spanish_report_has_no_english(case):
    d = report(case)
    code = {x.strip() for b in blocks(d, "es") for _, c in b.code for x in c.splitlines()}
    shown = {
        "text": "\n".join(x for x in to_text(d, 10_000, "es").splitlines() if x.strip() not in code),
        "brief": to_brief(d, 10_000, "es"),
        "markdown": re.sub(r"```.*?```", " ", to_markdown(d, "es"), flags=re.S),
        "html": visible_html(to_fragment(d, "es", results_dir=ROOT / "results" / "runs")),
        # the launch commands' labels (the commands themselves are the engines' own words)
        "launch labels": "\n".join(label for b in blocks(d, "es") for label, _ in b.code),
    }
    bad = {fmt: lines for fmt, text in shown.items() if (lines := offending(text))}
    assert not bad, "\n".join(f"[{fmt}] {line}" for fmt, lines in bad.items() for line in lines[:20])


def test_the_check_finds_english():
    """The same check on the English report finds English (it can fail), and a data note is not a finding."""
    d = report("llama.cpp, calibrated device")
    assert len(offending(to_text(d, 10_000, "en"))) > 20
    assert english_words("Backend CUDA: mature.") == ["mature"]
    note = json.loads((ROOT / "estimator/data/models.json").read_text())["models"][0]["notes"][0]
    assert english_words(f"nota: {note}") == []
    assert english_words("--n-cpu-moe use_more_bits llama-3.1-8b nvidia-ada/llama.cpp") == []


def test_every_weight_format_and_fallback_has_spanish():
    """Each format's description (the catalog's and the engines' checkpoint formats) and each support
    fallback word has a Spanish rendering: a changed English description must bring its Spanish along."""
    missing = [q.name for q in (*QUANTS.values(), MXFP4_CHECKPOINT) if q.description not in QUANTS_ES]
    assert not missing
    assert all(tr(w) != w for w in FALLBACK_WORDS.values())


def test_every_profile_reason_and_cpu_note_has_spanish():
    """The engine profiles' reasons for a device or CPU path, which the speed notes quote (a changed reason
    must bring its Spanish along), and the notes that quote them: the CPU GEMM paths, the shader GEMMs of an
    Arc A-series card under Vulkan and the known crash with its workaround's fitted cost."""
    import math

    from estimator.catalog.resolve import resolve_hardware
    from estimator.engines import ENGINES, get_engine
    from estimator.physics.coefficients import CoefficientTable
    from estimator.physics.speed import cpu_crash_note, cpu_gemm_note, vector_gemm_note
    from estimator.render.translate import PROFILE_REASONS_ES

    reasons = {
        t[-1]
        for e in ENGINES
        for attr in ("vector_gemm", "cpu_gemm_fallback", "cpu_matrix_gemm", "cpu_crash_workarounds")
        for t in getattr(get_engine(e), attr)
    }
    assert reasons and not reasons - PROFILE_REASONS_ES.keys()
    spr, tr3970 = resolve_hardware("xeon-platinum-8480-plus"), resolve_hardware("threadripper-3970x")
    beta = {"setting=no_repack": math.log(1.5)}
    table = CoefficientTable((), (), (), {}, model={"params": [
        {"key": "decode.build_scale", "beta": beta},
        {"key": "decode.bw_rel_q8_0", "beta": {"setting=no_repack": math.log(1 / 1.2)}}]})  # fmt: skip
    notes = [cpu_crash_note(spr, "llama.cpp", table), cpu_crash_note(spr, "llama.cpp"),
             cpu_gemm_note(spr, "vllm"), cpu_gemm_note(tr3970, "vllm"),
             vector_gemm_note(resolve_hardware("arc-a310"), "llama.cpp", "Vulkan")]  # fmt: skip
    assert all(notes)
    for note in notes:
        assert english_words(tr(note)) == [], tr(note)
        assert english_words(note), note  # the check can fail


def test_cli_warnings_in_spanish():
    """``report --lang es`` writes its stderr warnings in Spanish too."""
    p = cli("report --model llama-3.1-8b --hardware mi300x --quant NVFP4 --engine vllm --lang es")
    assert p.returncode == 0, p.stderr
    assert "advertencia: NVFP4 en" in p.stderr and not offending(p.stderr), p.stderr


def test_spanish_html_numbers_are_localized_once():
    """Numbers the HTML builds into its own sentences read in Spanish form, not swapped back to English."""
    shown = visible_html(to_fragment(report("llama.cpp, calibrated device"), "es"))
    for es in (
        "Caché KV a 8.192 tokens (f16)",
        "caché KV a medias (4.096 tokens)",
        "peticiones de 1.024 + 1.024 tokens",
        "TTFT ≤ 2.000 ms",
    ):
        assert es in shown, es
    assert "8,192" not in shown and "4,096" not in shown
