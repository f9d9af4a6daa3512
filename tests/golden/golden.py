"""Golden outputs of the estimator CLI: reports of varied configurations and ``predict`` over many cases.

They prove that a refactor changes no number (``tests/test_golden.py`` compares, timestamps aside).  A change
that is meant to alter outputs regenerates them, and its commit says why:

    python tests/golden/golden.py            # rewrite tests/golden/out/*
    python tests/golden/golden.py --check    # compare only (what the test does)

Every case runs ``python -m estimator`` in a child process from the repository root with the coefficients
pinned to ``tests/golden/coefficients.json`` (a copy of a results/coefficients.json), so a refit of
results/ does not move the golden numbers.  Input files: ``gemma3-12b/config.json`` here (the catalog's
config) and the tiny GGUF (a 2-layer llama written with gguf.GGUFWriter by
``tests.gguf_files.golden_tiny_llama`` into the model cache, not kept in git); its path is written
``<tiny-llama.gguf>`` in the outputs.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
if str(ROOT) not in sys.path:  # run as a script: tests.gguf_files and harness from this checkout
    sys.path.insert(0, str(ROOT))

from tests.gguf_files import golden_tiny_llama, golden_tiny_llama_path  # noqa: E402

OUT = HERE / "out"
REL = HERE.relative_to(ROOT)
COEF = str(REL / "coefficients.json")
NO_RUNS = str(REL / "no-runs")  # does not exist: HTML reports show no measured runs

# (name, format, arguments after `report`; {here} is this folder, {no_runs} a folder that does not exist,
# {tiny} the tiny GGUF written into the model cache: tests.gguf_files.golden_tiny_llama)
REPORTS: tuple[tuple[str, str, str], ...] = (
    ("glm45-mi300x", "json", "--model glm-4.5 --hardware mi300x --quant Q4_K_M --ctx 8192"),
    ("glm45-mi300x", "text", "--model glm-4.5 --hardware mi300x --quant Q4_K_M --ctx 8192"),
    ("glm45-mi300x", "markdown", "--model glm-4.5 --hardware mi300x --ctx 8192"),
    ("glm45-mi300x", "html", "--model glm-4.5 --hardware mi300x --results {no_runs}"),
    ("dsv3-h200x8-mla", "json",
     "--model deepseek-v3 --hardware h200-141gb-sxm --devices 8 --quant Q4_K_M --ctx 32768 "
     "--kv-dtype q8_0"),
    ("dsv3-h200x8-mla", "markdown",
     "--model deepseek-v3 --hardware h200-141gb-sxm --devices 8 --quant Q4_K_M --ctx 32768 "
     "--kv-dtype q8_0"),
    ("qwen3moe-4090-ncpumoe", "json", "--model Qwen/Qwen3-30B-A3B --hardware rtx-4090 --n-cpu-moe 24"),
    ("qwen3moe-4090-ncpumoe", "text", "--model Qwen/Qwen3-30B-A3B --hardware rtx-4090 --n-cpu-moe 24"),
    ("config-custom-vllm", "json",
     "--model {here}/gemma3-12b/config.json --hardware custom --memory-gib 48 --bandwidth-gbs "
     "864 --tflops 362 --family nvidia-ada --engine vllm"),
    ("gguf-tiny-3090", "json", "--model {tiny} --hardware rtx-3090 --ctx 256"),
    ("gguf-tiny-3090", "markdown", "--model {tiny} --hardware rtx-3090 --ctx 256"),
    ("gemma3-27b-swa-3090", "json", "--model gemma-3-27b --hardware rtx-3090 --ctx 32768 --kv-dtype q8_0"),
    ("qwen3next-hybrid-h100", "json",
     "--model qwen3-next-80b-a3b --hardware h100-80gb-sxm --ctx 65536 --concurrency 4"),
    ("llama70b-2x3090-pp", "json", "--model llama-3.1-70b --hardware rtx-3090 --devices 2"),
    ("llama70b-2x3090-tp", "text",
     "--model llama-3.1-70b --hardware rtx-3090 --devices 2 --split tp --quant IQ4_XS"),
    ("llama70b-vllm-h100x4-fp8", "json",
     "--model llama-3.1-70b --hardware h100-80gb-sxm --devices 4 --engine vllm --quant FP8 "
     "--kv-dtype fp8 --concurrency 32"),
    ("llama70b-vllm-h100x4-fp8", "html",
     "--model llama-3.1-70b --hardware h100-80gb-sxm --devices 4 --engine vllm --quant FP8 "
     "--kv-dtype fp8 --concurrency 32 --lang es --results {no_runs}"),
    ("gptoss120b-mxfp4-h100", "json",
     "--model gpt-oss-120b --hardware h100-80gb-sxm --quant MXFP4 --ctx 131072"),
    ("llama8b-m3max-conc4", "json",
     "--model llama-3.1-8b --hardware apple-m3-max --ctx 32768 --concurrency 4 --quant Q8_0"),
    ("llama70b-4090-offload", "json", "--model llama-3.1-70b --hardware rtx-4090 --offload-gib 20"),
    ("nemotron-mamba-b200", "json", "--model nemotron-3-super-120b-a12b --hardware b200 --ctx 16384"),
    ("kimik2-mi355x-x8", "json", "--model kimi-k2 --hardware mi355x --devices 8 --quant Q2_K --ctx 65536"),
    ("llama4-scout-chunked", "json",
     "--model llama-4-scout-17b-16e --hardware h100-nvl-94gb --ctx 131072 --quant Q4_K_S"),
    ("qwen3-32b-vllm-h200-conc64", "json",
     "--model qwen3-32b --hardware h200-141gb-sxm --engine vllm --concurrency 64 --ctx 16384 "
     "--gpu-memory-utilization 0.9"),
    ("qwen3-06b-custom-notflops", "json",
     "--model qwen3-0.6b --hardware custom --memory-gib 8 --bandwidth-gbs 120"),
    ("money-options", "json",
     "--model mixtral-8x7b --hardware a100-80gb-sxm --usd-per-hour 2.5 --hours-per-day 10 "
     "--kwh-price 0.3 --purchase-usd 15000 --ft-rank 64 --ft-seq-len 4096 --ft-micro-batch 2"),
    ("llama2-overlong-cpu", "json",
     "--model llama-2-7b --hardware ryzen-9-7950x --ctx 8192 --allow-overlong --quant Q4_0"),
    ("gemma4-31b-5090-q4kv", "json", "--model gemma-4-31b --hardware rtx-5090 --ctx 65536 --kv-dtype q4_0"),
    ("dsv2lite-vllm-pp", "json",
     "--model deepseek-v2-lite-16b --hardware l40s --devices 2 --split pp --engine vllm --quant "
     "AWQ-INT4"),
    # issue 13: a GGUF re-sized in a named format, an overridden Apple device, the Spanish text report
    ("gguf-tiny-3090-resized", "json",
     "--model {tiny} --hardware rtx-3090 --ctx 256 --quant Q4_K_M"),
    ("llama70b-m3max-64gb", "json", "--model llama-3.1-70b --hardware apple-m3-max --memory-gib 64"),
    ("llama70b-2x3090-es", "text", "--model llama-3.1-70b --hardware rtx-3090 --devices 2 --lang es"),
)
# Bad input: the one-line error and exit code are part of the behaviour.
ERRORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("unknown-model", ("report", "--model", "llama-9", "--hardware", "rtx-4090")),
    ("unknown-hardware", ("report", "--model", "llama-3.1-8b", "--hardware", "rtx-9999")),
    ("vllm-q8-kv", ("report", "--model", "llama-3.1-8b", "--hardware", "h100-80gb-sxm", "--engine", "vllm",
                    "--kv-dtype", "q8_0")),
    ("overlong", ("report", "--model", "llama-2-7b", "--hardware", "rtx-4090", "--ctx", "8192")),
    ("ambiguous-hardware", ("report", "--model", "qwen3-30b-a3b", "--hardware", "h100")),
    ("unknown-family", ("report", "--model", "qwen3-0.6b", "--hardware", "custom", "--memory-gib", "8",
                        "--bandwidth-gbs", "100", "--family", "nvidia-adda")),
)
OTHERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("fit-4090-16k.json", ("fit", "--hardware", "rtx-4090", "--ctx", "16384", "--format", "json")),
    ("fit-m3max-vllm.csv", ("fit", "--hardware", "apple-m3-max", "--engine", "vllm", "--format", "csv")),
    ("fit-3090x2.txt", ("fit", "--hardware", "rtx-3090", "--devices", "2", "--ctx", "8192")),
    ("list-quants.json", ("list", "quants", "--format", "json")),
    ("predict.csv", ("predict", str(REL / "predict_cases.csv"))),
    ("brief-qwen3-instruct-4090.txt", ("report", "--model", "Qwen/Qwen3-30B-A3B-Instruct-2507", "--hardware",
                                       "4090", "--ctx", "32768", "--brief")),
    ("fit-m3max-64gb.json", ("fit", "--hardware", "apple-m3-max", "--memory-gib", "64", "--min-tok-s", "5",
                             "--top", "15", "--format", "json")),
    ("fit-4090-moe-offload.txt", ("fit", "--hardware", "rtx-4090", "--moe", "--ctx", "16384")),
)
# The report's generation time (UTC, "+00:00"); dated inputs such as the coefficients' "...Z" stay.
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")


def normalise(text: str) -> str:
    """Output with its generation time and the tiny GGUF's cache path replaced (what may differ between runs
    and machines)."""
    return _STAMP.sub("<time>", text).replace(str(golden_tiny_llama_path()), "<tiny-llama.gguf>")


def _run(argv: list[str]) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "estimator", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)},
        timeout=300,
    )
    return proc.returncode, proc.stdout, proc.stderr


def outputs() -> dict[str, str]:
    """name -> normalised output of every golden case."""
    got: dict[str, str] = {}
    ext = {"json": "json", "text": "txt", "markdown": "md", "html": "html"}
    tiny = golden_tiny_llama()
    with tempfile.TemporaryDirectory() as tmp:
        for name, fmt, args in REPORTS:
            out = Path(tmp) / f"{name}.{ext[fmt]}"
            argv = args.format(here=REL, no_runs=NO_RUNS, tiny=tiny).split()
            rc, _, err = _run(["report", *argv, "--coefficients", COEF, "--format", fmt, "-o", str(out)])
            text = out.read_text(encoding="utf-8") if out.exists() else ""
            got[f"{name}.{ext[fmt]}"] = normalise(f"exit {rc}\n{err}---\n{text}")
        for name, argv in ERRORS:
            rc, out, err = _run([*argv, "--coefficients", COEF])
            got[f"error-{name}.txt"] = f"exit {rc}\n{err}---\n{out}"
        for name, argv in OTHERS:
            if argv[0] == "predict":  # its cases name the tiny GGUF as <tiny-llama.gguf>: resolved in a copy
                cases = Path(tmp) / "predict_cases.csv"
                cases.write_text((ROOT / argv[1]).read_text().replace("<tiny-llama.gguf>", str(tiny)))
                argv = (argv[0], str(cases), *argv[2:])
            rc, out, err = _run([*argv, "--coefficients", COEF] if argv[0] != "list" else list(argv))
            got[name] = normalise(f"exit {rc}\n{err}---\n{out}")
    return got


def check() -> list[str]:
    """Differences against tests/golden/out (empty when identical)."""
    problems = []
    got = outputs()
    for name, text in got.items():
        path = OUT / name
        want = path.read_text(encoding="utf-8") if path.exists() else None
        if want is None:
            problems.append(f"{name}: no golden file")
        elif want != text:
            diff = difflib.unified_diff(
                want.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=1
            )
            problems.append(f"{name}:\n" + "\n".join(list(diff)[:40]))
    extra = sorted({p.name for p in OUT.glob("*")} - set(got))
    problems += [f"{n}: golden file without a case" for n in extra]
    return problems


def main(argv: list[str]) -> int:
    if "--check" in argv:
        problems = check()
        print("\n".join(problems) or "golden outputs identical")
        return 1 if problems else 0
    got = outputs()  # every case first: a failing run leaves the old golden files in place
    OUT.mkdir(exist_ok=True)
    for p in OUT.glob("*"):
        p.unlink()
    for name, text in got.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(list(OUT.glob('*')))} golden files to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
