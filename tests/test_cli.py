"""`python -m estimator` in a subprocess: exit codes and one-line messages for bad input; formats and -o."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest

REPORT = ["report", "--model", "qwen3-0.6b", "--hardware", "rtx-4090", "--quant", "Q8_0"]


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "estimator", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def one_line_error(p):
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def test_unknown_model_names_three_closest():
    line = one_line_error(run("report", "--model", "glm-4.6x", "--hardware", "mi300x"))
    assert "glm-4.6x" in line and line.count(",") >= 2


def test_unknown_hardware():
    line = one_line_error(run("report", "--model", "glm-4.5", "--hardware", "mi300z"))
    assert "mi300z" in line and "mi300x" in line


@pytest.mark.parametrize(
    "ctx, word", [("0", "between 1 and"), ("-5", "between 1 and"), ("10000000", "allow-overlong")]
)
def test_bad_context(ctx, word):
    assert word in one_line_error(run(*REPORT, "--ctx", ctx))


def test_overlong_allowed_with_warning(tmp_path):
    p = run(
        *REPORT, "--ctx", "100000", "--allow-overlong", "--format", "json", "-o", str(tmp_path / "r.json")
    )
    assert p.returncode == 0, p.stderr
    assert "above the model's maximum" in p.stderr
    assert json.loads((tmp_path / "r.json").read_text())["workload"]["n_ctx"] == 100000


def test_unknown_quant():
    assert "Q4_K_X" in one_line_error(run(*REPORT[:-1], "Q4_K_X"))


def test_not_gguf_and_truncated_gguf(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf file at all")
    one_line_error(run("report", "--model", str(bad), "--hardware", "rtx-4090"))
    trunc = tmp_path / "t.gguf"
    trunc.write_bytes(b"GGUF\x03\x00\x00\x00\x10")
    one_line_error(run("report", "--model", str(trunc), "--hardware", "rtx-4090"))
    one_line_error(run("report", "--model", str(tmp_path / "missing.gguf"), "--hardware", "rtx-4090"))


def test_config_missing_key(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    line = one_line_error(run("report", "--model", str(tmp_path), "--hardware", "rtx-4090"))
    assert "config.json" in line


def test_usage_errors_are_one_line():
    one_line_error(run("report", "--model", "qwen3-0.6b"))  # --hardware missing
    one_line_error(run("report", *REPORT[1:], "--devices", "x"))
    one_line_error(run("report", *REPORT[1:], "--n-cpu-moe", "4"))  # dense model
    one_line_error(run("report", "--model", "glm-4.5", "--hardware", "custom", "--memory-gib", "48"))


def test_formats_and_output(tmp_path):
    for fmt, needle in (
        ("json", '"schema_version"'),
        ("markdown", "## Launch commands"),
        ("text", "llama-server"),
    ):
        out = tmp_path / f"r.{fmt}"
        p = run(*REPORT, "--format", fmt, "-o", str(out))
        assert p.returncode == 0, p.stderr
        assert needle in out.read_text()
    p = run(*REPORT, "--format", "json")
    assert json.loads(p.stdout)["model"]["id"] == "qwen3-0.6b"


def test_custom_hardware_report():
    p = run(
        "report",
        "--model",
        "qwen3-0.6b",
        "--hardware",
        "custom",
        "--memory-gib",
        "16",
        "--bandwidth-gbs",
        "500",
        "--tflops",
        "50",
        "--family",
        "custom",
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["hardware"]["memory_bytes"] == 16 * 2**30


@pytest.mark.parametrize("what", ["models", "hardware", "quants"])
def test_list(what):
    p = run("list", what, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert len(rows) > 10 and ("id" in rows[0] or "name" in rows[0])
    assert run("list", what, "--format", "csv").stdout.count("\n") == len(rows) + 1


def test_fit():
    p = run("fit", "--hardware", "rtx-4090", "--ctx", "4096", "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    fitting = [r for r in rows if r["verdict"] == "fits"]
    assert fitting and all(r["headroom_gib"] >= 0 for r in fitting)
    sizes = [r["params_total_b"] for r in fitting]
    assert sizes == sorted(sizes, reverse=True)  # largest model first (issue 13: 7)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert any(r["verdict"] == "does not fit" for r in rows)  # e.g. Llama-3.1-405B on one 24 GB card
    assert all(r["params_total_b"] and r["params_total_b"] > 0 for r in rows)  # counted parameters, 10^9
    text = run("fit", "--hardware", "rtx-4090", "--ctx", "4096").stdout
    assert "largest first" in text and "smollm2-135m" in text and "\x1b[" not in text
    assert "[1] " in text  # coefficient labels as numbered footnotes


@pytest.mark.parametrize(
    "args, word",
    [
        (("--ctx", "0"), "between 1 and 16777216"),
        (("--ctx", "-100"), "between 1 and 16777216"),
        (("--kv-dtype", "q5_k"), "q5_k"),
        (("--devices", "0"), "between 1 and 1024"),
        (("--engine", "vllm", "--gpu-memory-utilization", "2"), "utilization"),
    ],
)
def test_fit_bad_workload_is_an_error_not_a_table_of_does_not_fit(args, word):
    assert word in one_line_error(run("fit", "--hardware", "rtx-4090", *args, "--format", "csv"))


@pytest.mark.parametrize(
    "option, value",
    [("--offload-gib", "nan"), ("--offload-gib", "inf"), ("--usd-per-hour", "nan"), ("--kwh-price", "inf")],
)
def test_non_finite_numbers_are_usage_errors(option, value):
    assert "finite" in one_line_error(run(*REPORT, option, value))
    line = one_line_error(
        run("report", "--model", "qwen3-0.6b", "--hardware", "custom", "--memory-gib", "inf",
            "--bandwidth-gbs", "100")
    )  # fmt: skip
    assert "finite" in line


def test_list_text_is_a_table_and_json_keeps_every_column():
    text = run("list", "hardware").stdout
    assert "GB/s" in text and "h200-141gb-sxm" in text and "name:" not in text
    rows = json.loads(run("list", "hardware", "--format", "json").stdout)
    assert {"name", "vendor", "tdp_w", "fp8_tflops"} <= set(rows[0])


def test_predict(tmp_path):
    cases = tmp_path / "c.csv"
    cases.write_text(
        "model,hardware,engine,quant,n_prompt,n_gen,tag\n"
        "qwen3-0.6b,rtx-4090,llama.cpp,Q8_0,512,0,a\nnope,rtx-4090,llama.cpp,Q8_0,0,128,b\n"
    )
    out = tmp_path / "o.csv"
    p = run("predict", str(cases), "-o", str(out))
    assert p.returncode == 0, p.stderr
    import csv

    rows = list(csv.DictReader(out.open()))
    assert [r["tag"] for r in rows] == ["a", "b"]  # extra columns pass through, bad rows kept
    assert float(rows[0]["prefill_tok_s"]) > 0 and not rows[0]["error"] and rows[1]["error"]
    assert one_line_error(run("predict", str(tmp_path / "missing.csv")))


def test_report_path_stays_light(tmp_path):
    """The report path imports no numpy / scipy / pandas / engine, nor the serve stack (start-up budget)."""
    code = (
        "import sys; from estimator.app.cli import main; "
        f"rc = main([*{REPORT!r}, '-o', {str(tmp_path / 'r.txt')!r}]); "
        "heavy = ('numpy', 'scipy', 'pandas', 'http.server', 'estimator.app.serve', "
        "'estimator.physics.matrix', 'gguf'); "
        "print(rc, [m for m in heavy if m in sys.modules])"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == "0 []", p.stdout


def test_text_to_a_pipe_is_plain_and_fits_its_width():
    import os

    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.run(
        [sys.executable, "-m", "estimator", *REPORT], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, p.stderr
    assert "\x1b[" not in p.stdout and "llama-server" in p.stdout
    wide = [x for x in p.stdout.splitlines() if len(x) > 80]
    assert not wide, wide


def test_serve_help_is_one_subcommand_away():
    p = run("serve", "--help")
    assert p.returncode == 0 and "--port" in p.stdout
    one_line_error(run("serve", "--port", "x"))


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--n-cpu-moe", "4"], "--n-cpu-moe is a llama.cpp option"),
        (["--kv-dtype", "q8_0"], "no q8_0 KV cache"),
    ],
)
def test_vllm_refuses_llama_cpp_only_options(extra, needle):
    p = run("report", "--model", "qwen3-30b-a3b", "--hardware", "rtx-4090", "--engine", "vllm", *extra)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_default_context_is_clamped_for_a_4k_model():
    """issue 13: 4 — the default --ctx 8192 used to exit 2 for Llama 2 (whose maximum is 4096, not 2048)."""
    p = run("report", "--model", "llama-2-7b", "--hardware", "rtx-4090", "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["workload"]["n_ctx"] == 4096 and d["model"]["max_context"] == 4096
    assert any("default 8,192 tokens is above llama-2-7b's maximum" in n for n in d["notes"])
    line = one_line_error(run("report", "--model", "llama-2-7b", "--hardware", "rtx-4090", "--ctx", "8192"))
    assert "maximum of 4096" in line  # a context the user typed is never changed


def test_default_context_holds_one_serving_request():
    """Without --ctx the context is the larger of 8,192 and --isl + --osl (an engine's max_model_len must hold
    a whole request): 8,192-token prompts used to be capped to 4,096 in the serving section.  Clamped to the
    model's maximum with its own note; a context the user typed is kept (the serving section caps the
    requests then)."""
    from estimator.catalog.data import get_model
    from estimator.render.translate import tr
    from estimator.report.request import DEFAULT_CTX, ReportRequest

    qwen, llama2 = get_model("qwen3-30b-a3b"), get_model("llama-2-7b")
    base = ReportRequest(model="qwen3-30b-a3b", hardware="h100-sxm", engine="vllm")
    assert base.context(qwen) == (DEFAULT_CTX, ())
    ctx, (note,) = replace(base, isl=8192, osl=1024).context(qwen)
    assert ctx == 9216
    assert "one serving request of --isl 8192 + --osl 1024" in note and "default 8,192 tokens" in note
    assert tr(note).startswith("contexto: se dimensiona a 9,216 tokens, una petición de servicio")
    ctx, (note,) = replace(base, isl=8192, osl=1024).context(llama2)
    assert ctx == 4096 and note.startswith("context: one serving request is above llama-2-7b's maximum")
    assert tr(note).startswith("contexto: una petición de servicio supera el máximo de llama-2-7b")
    assert replace(base, isl=8192, ctx=4096).context(qwen) == (4096, ())


def test_sglang_users_spell_the_memory_fraction_as_sglang_does():
    """--mem-fraction-static is --gpu-memory-utilization under SGLang's name: bounded the same, and the SGLang
    launch command carries it."""
    sglang = [*REPORT, "--quant", "BF16", "--engine", "sglang", "--mem-fraction-static"]
    assert "at most 1" in one_line_error(run(*sglang, "2"))
    doc = json.loads(run(*sglang, "0.8", "--format", "json").stdout)
    (sg,) = [c["argv"] for c in doc["launch"] if c["engine"] == "sglang"]
    assert sg[sg.index("--mem-fraction-static") + 1] == "0.8"


@pytest.mark.parametrize("hardware", ["mi300x", "rtx-4090", "h100-sxm"])
def test_speed_labels_count_in_the_singular_for_one(hardware):
    """'(1 run)', never '(1 runs)' / '(1 ejecuciones)' (the MI300X's llama.cpp basis is one published run)."""
    import re

    for lang in ("en", "es"):
        out = run("report", "--model", "glm-4.5", "--hardware", hardware, "--lang", lang).stdout
        assert not re.search(r"\b1 (runs|points|ejecuciones|puntos)\b", out), out
