"""Hostile and careless inputs to the command lines, each with the outcome it must have (issue 14, issue 17).

Each case runs ``python -m estimator|harness ...`` (or a shell line) in a child process, with a timeout and a
4 GiB address-space limit, and is classified:

* ``clean``: the expected outcome — ``error``: exit 2 with one line on stderr starting ``error:`` (a warning
  line before it is allowed); ``ok``: exit 0 (and ``forbid`` not in the output);
* ``traceback``: a Python traceback on stderr;
* ``hang``: still running at the timeout (killed);
* ``wrong``: a silent wrong answer — an input that must be refused was accepted (exit 0), a valid one refused,
  or forbidden text (raw ``<script>``) in the output;
* ``unclean``: any other exit (several error lines, exit 1, a signal).

``tests/test_hostile_inputs.py`` requires every case to be clean; ``python tests/hostile_cases.py [ROOT]``
prints the counts for the tree at ROOT (default: this one), so the same cases measure a tree before and after
a change.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMORY_LIMIT_BYTES = 4 * 2**30
REPORT = ("estimator", "report", "--model", "qwen3-0.6b", "--hardware", "rtx-4090", "--quant", "Q8_0")
CUSTOM = ("--hardware", "custom", "--memory-gib", "24", "--bandwidth-gbs", "1000")


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]  # after ``python -m``; ``{tmp}`` is the case's scratch folder
    expect: str  # "error" | "ok"
    setup: Callable[[Path], None] | None = None
    shell: str = ""  # run this shell line instead ({py} = the interpreter, {tmp} = the scratch folder)
    forbid: tuple[str, ...] = ()  # text that must not be in stdout or in {tmp}/out
    check: Callable[[str], str] | None = None  # {tmp}/out -> what is wrong with it ("" when right)
    timeout_s: float = 60.0
    env: dict = field(default_factory=dict)


# --- setups -------------------------------------------------------------------------------------------------

BASE_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


def config(**changes) -> Callable[[Path], None]:
    """Write {tmp}/m/config.json: BASE_CONFIG with ``changes`` (a value of ``...`` removes the key)."""

    def setup(tmp: Path) -> None:
        cfg = {**BASE_CONFIG, **changes}
        cfg = {k: v for k, v in cfg.items() if v is not ...}
        (tmp / "m").mkdir()
        (tmp / "m" / "config.json").write_text(json.dumps(cfg))

    return setup


def raw_config(text: str | bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / "m").mkdir()
        p = tmp / "m" / "config.json"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def gguf_file(**kw) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.gguf_files import write_tiny_gguf

        write_tiny_gguf(tmp / "m.gguf", **kw)

    return setup


def corrupt_gguf(offset: int, data: bytes) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        gguf_file()(tmp)
        p = tmp / "m.gguf"
        b = bytearray(p.read_bytes())
        b[offset : offset + len(data)] = data
        p.write_bytes(bytes(b))

    return setup


def csv_file(text: str | bytes, name: str = "c.csv") -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / name).write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


def fifo(name: str) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(tmp / name)

    return setup


def folder(name: str) -> Callable[[Path], None]:
    return lambda tmp: (tmp / name).mkdir(parents=True)


def sparse(name: str, size: int) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        with open(tmp / name, "wb") as fh:
            fh.truncate(size)

    return setup


def runs(lines: list[str | bytes]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        (tmp / "runs").mkdir()
        body = b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines)
        (tmp / "runs" / "a.jsonl").write_bytes(body)

    return setup


PLAN_BODY = """
[[sweep]]
engines = ["llama.cpp"]
models = ["qwen3-0.6b"]
quants = ["Q8_0"]
contexts = [1024]
prompt_lengths = [128]
gen_lengths = [32]
"""


def plan(head: str = "", body: str = PLAN_BODY, before: Callable[[Path], None] | None = None):
    def setup(tmp: Path) -> None:
        if before:
            before(tmp)
        (tmp / "p.toml").write_text(head + "\n" + body)

    return setup


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        for s in setups:
            s(tmp)

    return setup


def no_html_outside_code(*tags: str) -> Callable[[str], str]:
    """A Markdown check: none of ``tags`` outside fenced code (commands are shown literally inside fences)."""

    def check(out: str) -> str:
        import re

        if not out:
            return "no output written"
        prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1\s*$", "", out)
        hit = [t for t in tags if t in prose]
        return f"raw {hit[0]!r} outside code" if hit else ""

    return check


def error_cell_naming(column: str) -> Callable[[str], str]:
    """A predict output check: the first row's error names ``column``, the second row is predicted."""

    def check(out: str) -> str:
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(out)))
        if len(rows) != 2:
            return f"{len(rows)} output rows, expected 2"
        if column not in rows[0]["error"]:
            return f"error cell {rows[0]['error'][:120]!r} does not name {column}"
        if rows[1]["error"] or not rows[1]["decode_tok_s"]:
            return f"the good row was not predicted ({rows[1]['error'][:120]!r})"
        return ""

    return check


PREDICT_HEAD = "model,hardware,engine,quant,n_prompt,n_gen"
GOOD_ROW = "qwen3-0.6b,rtx-4090,llama.cpp,Q8_0,512,128"
XSS = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def _cases() -> list[Case]:
    c: list[Case] = []
    add = c.append
    # -- numbers on the command line -------------------------------------------------------------------------
    for opt, val in (
        ("--offload-gib", "1e300"), ("--offload-gib", "-1"), ("--devices", "1000000000000"),
        ("--devices", "-1"), ("--devices", "1e9"), ("--ctx", "99999999999999999999"), ("--ctx", "0"),
        ("--concurrency", "1000000000000"), ("--concurrency", "0"), ("--ft-rank", "1000000000000"),
        ("--ft-seq-len", "1000000000000000"), ("--ft-micro-batch", "0"), ("--hours-per-day", "25"),
        ("--hours-per-day", "-1"), ("--kwh-price", "-1"), ("--usd-per-hour", "-5"),
        ("--purchase-usd", "1e300"), ("--gpu-memory-utilization", "0"), ("--offload-gib", "nan"),
        ("--usd-per-hour", "inf"),
    ):  # fmt: skip
        add(Case(f"report {opt} {val}", (*REPORT, opt, val), "error"))
    add(
        Case(
            "report --ctx 2^40 --allow-overlong", (*REPORT, "--ctx", str(2**40), "--allow-overlong"), "error"
        )
    )
    add(Case("report --n-cpu-moe 1e12", ("estimator", "report", "--model", "qwen3-30b-a3b", "--hardware",
                                          "rtx-4090", "--n-cpu-moe", "1000000000000"), "error"))  # fmt: skip
    huge = ("--hardware", "custom", "--memory-gib", "1e308", "--bandwidth-gbs", "1e308", "--tflops", "1e308")
    add(Case("report custom 1e308", ("estimator", "report", "--model", "qwen3-0.6b", *huge), "error"))
    add(Case("fit custom 1e308", ("estimator", "fit", *huge), "error"))
    tiny = ("--hardware", "custom", "--memory-gib", "1e-300", "--bandwidth-gbs", "1e-300")
    add(Case("report custom 1e-300", ("estimator", "report", "--model", "qwen3-0.6b", *tiny), "error"))
    add(Case("fit --devices 1e9", ("estimator", "fit", "--hardware", "rtx-4090", "--devices", "1000000000"),
             "error"))  # fmt: skip
    add(Case("fit --ctx 1e15", ("estimator", "fit", "--hardware", "rtx-4090", "--ctx", "10" * 8), "error"))
    # -- standard output closed or broken --------------------------------------------------------------------
    add(Case("report >&- (stdout closed)", (), "error", shell="{py} -m estimator report --model qwen3-0.6b "
             "--hardware rtx-4090 >&-"))  # fmt: skip
    add(Case("report -o file >&- (stdout closed)", (), "ok", shell="{py} -m estimator report --model "
             "qwen3-0.6b"
             " --hardware rtx-4090 -o {tmp}/out >&-"))  # fmt: skip
    add(Case("report | head -c 100 (broken pipe)", (), "ok", shell="{py} -m estimator report "
             "--model qwen3-0.6b --hardware rtx-4090 --format html | head -c 100 >/dev/null; "
             "rc=${{PIPESTATUS[0]}}; [ $rc = 0 ] || [ $rc = 141 ]"))  # fmt: skip
    add(
        Case(
            "list models | head -c 10 (broken pipe)",
            (),
            "ok",
            shell="{py} -m estimator list models "
            "--format json | head -c 10 >/dev/null; rc=${{PIPESTATUS[0]}}; [ $rc = 0 ] || [ $rc = 141 ]",
        )
    )
    # -- config.json -----------------------------------------------------------------------------------------
    model = ("estimator", "report", "--model", "{tmp}/m", "--hardware", "rtx-4090", "--ctx", "1024")
    for name, setup in (
        ("num_attention_heads 0", config(num_attention_heads=0)),
        ("num_key_value_heads 0", config(num_key_value_heads=0)),
        ("num_key_value_heads > heads", config(num_key_value_heads=8)),
        ("hidden not divisible by heads", config(hidden_size=250)),
        ("num_hidden_layers 0", config(num_hidden_layers=0)),
        ("num_hidden_layers 1e12", config(num_hidden_layers=10**12)),
        ("hidden_size NaN", raw_config(json.dumps(BASE_CONFIG)[:-1] + ', "hidden_size": NaN}')),
        ("hidden_size Infinity", raw_config(json.dumps(BASE_CONFIG)[:-1] + ', "hidden_size": Infinity}')),
        ("hidden_size 1e999", raw_config(json.dumps(BASE_CONFIG)[:-1] + ', "hidden_size": 1e999}')),
        (
            "5001-digit integer",
            raw_config(json.dumps(BASE_CONFIG)[:-1] + ', "vocab_size": ' + "9" * 5001 + "}"),
        ),
        ("deeply nested", raw_config('{"a": ' + "[" * 100000 + "]" * 100000 + "}")),
        ("hidden_size string", config(hidden_size="abc")),
        ("hidden_size list", config(hidden_size=[1, 2])),
        ("hidden_size true", config(hidden_size=True)),
        ("hidden_size 256.5", config(hidden_size=256.5)),
        ("num_attention_heads []", config(num_attention_heads=[])),
        ("vocab_size 0", config(vocab_size=0)),
        ("max_position_embeddings -1", config(max_position_embeddings=-1)),
        ("intermediate_size -100", config(intermediate_size=-100)),
        ("head_dim -64", config(head_dim=-64)),
        ("negative sliding window", config(model_type="mistral", sliding_window=-5)),
        ("sliding_window_pattern -2", config(sliding_window=128, sliding_window_pattern=-2)),
        ("attention_chunk_size -1", config(attention_chunk_size=-1)),
        (
            "full_attention_interval -1",
            config(
                full_attention_interval=-1,
                linear_num_value_heads=4,
                linear_num_key_heads=2,
                linear_key_head_dim=16,
                linear_value_head_dim=16,
            ),
        ),  # fmt: skip
        ("full_attention_interval text", config(full_attention_interval="x")),
        ("top-k above experts", config(num_experts=8, num_experts_per_tok=16, moe_intermediate_size=64)),
        ("zero experts with top-k", config(num_experts=0, num_experts_per_tok=2, moe_intermediate_size=64)),
        (
            "first_k_dense_replace 1e12",
            config(
                n_routed_experts=8,
                num_experts_per_tok=2,
                moe_intermediate_size=64,
                first_k_dense_replace=10**12,
            ),
        ),
        (
            "mlp_only_layers out of range",
            config(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, mlp_only_layers=[999]),
        ),  # fmt: skip
        (
            "mlp_only_layers scalar",
            config(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64, mlp_only_layers=5),
        ),  # fmt: skip
        (
            "kv_lora_rank -1",
            config(kv_lora_rank=-1, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128),
        ),
        ("quantization_config string", config(quantization_config="fp8")),
        ("architectures number", config(architectures=5)),
        (
            "linear heads 1e12",
            config(
                full_attention_interval=4,
                num_hidden_layers=4,
                linear_num_value_heads=10**12,
                linear_num_key_heads=2,
                linear_key_head_dim=16,
                linear_value_head_dim=16,
            ),
        ),  # fmt: skip
        ("config is a list", raw_config("[1, 2]")),
        ("config not UTF-8", raw_config(b'{"hidden_size": "\xff"}')),
        ("config.json is a FIFO", both(folder("m"), fifo("m/config.json"))),
        ("config.json 20 MiB", both(folder("m"), sparse("m/config.json", 20 * 2**20))),
    ):
        add(Case(f"config.json: {name}", model, "error", setup))
    add(Case("config.json: valid", model, "ok", config()))
    # -- GGUF metadata ---------------------------------------------------------------------------------------
    gg = ("estimator", "report", "--model", "{tmp}/m.gguf", "--hardware", "rtx-4090")
    add(Case("GGUF context 2048, default --ctx", gg, "ok", gguf_file(context=2048)))
    add(Case("GGUF context 2048, --ctx 8192", (*gg, "--ctx", "8192"), "error", gguf_file(context=2048)))
    for name, kw in (
        ("head_count 0", dict(heads=0)),
        ("head_count_kv 0", dict(kv_heads=0)),
        ("block_count 0", dict(layers=0)),
        ("block_count 2^31", dict(layers=2**31)),
        ("no context_length", dict(context=None)),
        ("context_length 0", dict(context=0)),
        (
            "expert_used_count > expert_count",
            dict(extra={"llama.expert_count": 4, "llama.expert_used_count": 8}),
        ),
        ("sliding_window negative", dict(extra={"llama.attention.sliding_window": -4})),
        ("key_length string", dict(extra={"llama.attention.key_length": "sixteen"})),
        ("feed_forward_length with a negative", dict(extra={"llama.feed_forward_length": [1, -2]})),
    ):
        add(Case(f"GGUF: {name}", (*gg, "--ctx", "256"), "error", gguf_file(**kw)))
    add(
        Case(
            "GGUF: truncated header",
            (*gg, "--ctx", "256"),
            "error",
            lambda tmp: (gguf_file()(tmp), (tmp / "m.gguf").write_bytes((tmp / "m.gguf").read_bytes()[:200])),
        )
    )
    add(
        Case(
            "GGUF: n_kv 2^60", (*gg, "--ctx", "256"), "error", corrupt_gguf(16, (2**60).to_bytes(8, "little"))
        )
    )
    add(Case("GGUF: n_tensors 2^40", (*gg, "--ctx", "256"), "error",
             corrupt_gguf(8, (2**40).to_bytes(8, "little"))))  # fmt: skip
    add(Case("GGUF: a FIFO", (*gg, "--ctx", "256"), "error", fifo("m.gguf")))
    add(Case("GGUF: a folder", (*gg, "--ctx", "256"), "error", folder("m.gguf")))
    add(
        Case(
            "GGUF: script in the name (markdown)",
            (*gg, "--ctx", "256", "--format", "markdown", "-o", "{tmp}/out"),
            "ok",
            gguf_file(name=XSS),
            check=no_html_outside_code("<script", "<img"),
        )
    )
    add(
        Case(
            "path with <svg onload> (markdown)",
            (
                "estimator",
                "report",
                "--model",
                "{tmp}/<svg onload=x>",
                "--hardware",
                "rtx-4090",
                "--ctx",
                "1024",
                "--format",
                "markdown",
                "-o",
                "{tmp}/out",
            ),
            "ok",
            lambda tmp: config()(tmp) or (tmp / "m").rename(tmp / "<svg onload=x>"),
            check=no_html_outside_code("<svg"),
        )
    )
    # -- outputs ---------------------------------------------------------------------------------------------
    add(Case("report -o a FIFO", (*REPORT, "-o", "{tmp}/fifo"), "error", fifo("fifo"), timeout_s=20))
    add(Case("report -o a folder", (*REPORT, "-o", "{tmp}/d"), "error", folder("d")))
    add(Case("report -o /dev/null", (*REPORT, "-o", "/dev/null"), "error"))
    add(Case("list -o a FIFO", ("estimator", "list", "models", "-o", "{tmp}/fifo"), "error", fifo("fifo"),
             timeout_s=20))  # fmt: skip
    add(
        Case(
            "predict -o a FIFO",
            ("estimator", "predict", "{tmp}/c.csv", "-o", "{tmp}/fifo"),
            "error",
            both(csv_file(f"{PREDICT_HEAD}\n{GOOD_ROW}\n"), fifo("fifo")),
            timeout_s=20,
        )
    )
    add(Case("report --coefficients a FIFO", (*REPORT, "--coefficients", "{tmp}/fifo"), "error", fifo("fifo"),
             timeout_s=20))  # fmt: skip
    add(Case("report --coefficients /dev/zero", (*REPORT, "--coefficients", "/dev/zero"), "error",
             timeout_s=30))  # fmt: skip
    # -- predict ---------------------------------------------------------------------------------------------
    pr = ("estimator", "predict", "{tmp}/c.csv", "-o", "{tmp}/out")
    add(Case("predict: UTF-8 BOM", pr, "ok", csv_file("\ufeff" + f"{PREDICT_HEAD}\n{GOOD_ROW}\n")))
    add(Case("predict: CRLF", pr, "ok", csv_file(f"{PREDICT_HEAD}\r\n{GOOD_ROW}\r\n")))
    add(Case("predict: BOM + CRLF", pr, "ok", csv_file("\ufeff" + f"{PREDICT_HEAD}\r\n{GOOD_ROW}\r\n")))
    for name, extra_head, extra_cell in (
        ("n_devices 1e12", "n_devices", "1e12"),
        ("n_ctx 1e15", "n_ctx", "1e15"),
        ("n_depth 1e9", "n_depth", "1e9"),
        ("batch 1e9", "batch", "1000000000"),
        ("n_ubatch 1e12", "n_ubatch", "1e12"),
        ("offload_bytes 1e300", "offload_bytes", "1e300"),
        ("memory_gib 1e308 custom", "memory_gib", "1e308"),
    ):
        row = GOOD_ROW if name != "memory_gib 1e308 custom" else GOOD_ROW.replace("rtx-4090", "custom")
        body = f"{PREDICT_HEAD},{extra_head},bandwidth_gbs\n{row},{extra_cell},1000\n{GOOD_ROW},,\n"
        add(Case(f"predict: {name}", pr, "ok", csv_file(body), check=error_cell_naming(extra_head)))
    add(Case("predict: a FIFO", pr, "error", fifo("c.csv"), timeout_s=20))
    add(Case("predict: not UTF-8", pr, "error", csv_file(b"model,hardware,n_prompt,n_gen\n\xff,x,1,1\n")))
    add(Case("predict: 300 MiB", pr, "error", sparse("c.csv", 300 * 2**20)))
    add(
        Case(
            "predict: a huge field",
            pr,
            "error",
            csv_file(PREDICT_HEAD + "\n" + "x" * 200_000 + ",a,b,c,1,1\n"),
        )
    )
    # -- measured runs (report --format html --results D) ----------------------------------------------------
    html = (*REPORT, "--format", "html", "--results", "{tmp}/runs", "-o", "{tmp}/out")
    add(Case("runs: a non-UTF-8 line", html, "ok", runs([b'{"schema_version": 2, "model_id": "\xff"}'])))
    add(Case("runs: a FIFO x.jsonl", html, "ok", fifo("runs/x.jsonl"), timeout_s=30))
    add(Case("runs: decode_tok_s fast", html, "ok", runs([json.dumps(
        {"schema_version": 2, "status": "ok", "model_id": "qwen3-0.6b", "hardware_id": "rtx-4090",
         "quant": "Q8_0", "decode_tok_s": "fast", "n_devices": "fast"})])))  # fmt: skip
    add(Case("runs: n_devices a list", html, "ok", runs([json.dumps(
        {"schema_version": 2, "status": "ok", "model_id": "qwen3-0.6b", "hardware_id": "rtx-4090",
         "quant": "Q8_0", "decode_tok_s": 10.0, "n_devices": [1, 2], "n_depth": 1e300})])))  # fmt: skip
    # -- plans (harness check-plan) --------------------------------------------------------------------------
    cp = ("harness", "check-plan", "--plan", "{tmp}/p.toml")
    for name, setup in (
        ("name with path traversal", plan('name = "../../x"')),
        ("empty name", plan('name = ""')),
        ("integer name", plan("name = 5")),
        ("unknown engine option", plan("", PLAN_BODY + "engine_options = { bogus = 1 }\n")),
        ("engine option of the wrong type", plan("", PLAN_BODY + 'engine_options = { swa_full = "yes" }\n')),
        (
            "scalar where a list is expected",
            plan("", PLAN_BODY.replace("contexts = [1024]", "contexts = 1024")),
        ),
        ("infinite timeout", plan("timeout_s = inf")),
        ("NaN timeout", plan("timeout_s = nan")),
        ("infinite build timeout", plan("build_timeout_s = inf")),
        ("absurd repetitions", plan("repetitions = 1000000000")),
        ("context above the model's maximum", plan("", PLAN_BODY.replace("[1024]", "[1000000]"))),
        ("context above the cap", plan("", PLAN_BODY.replace("[1024]", "[100000000]"))),
        ("threads 1e12", plan("", PLAN_BODY + "threads = [1000000000000]\n")),
        ("n_batch 1e15", plan("", PLAN_BODY + "n_batch = 1000000000000000\n")),
        (
            "model with zero heads",
            plan("", PLAN_BODY.replace('"qwen3-0.6b"', '"m"'), config(num_attention_heads=0)),
        ),
        ("plan is a FIFO", fifo("p.toml")),
    ):
        add(Case(f"plan: {name}", cp, "error", setup, timeout_s=30))
    add(Case("plan: valid", cp, "ok", plan('name = "ok-plan"')))
    # -- serve -----------------------------------------------------------------------------------------------
    add(Case("serve --port 22", ("estimator", "serve", "--port", "22"), "error", timeout_s=10))
    add(Case("serve --port 99999", ("estimator", "serve", "--port", "99999"), "error", timeout_s=10))
    add(Case("serve --models-dir missing", ("estimator", "serve", "--port", "0", "--models-dir",
                                            "{tmp}/nope"), "error", timeout_s=10))  # fmt: skip
    return c


CASES: tuple[Case, ...] = tuple(_cases())


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_case(case: Case, root: Path = ROOT) -> tuple[str, str]:
    """(classification, detail) of one case run against the tree at ``root``."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if case.setup:
            try:
                case.setup(tmp)
            except Exception as exc:  # noqa: BLE001 - reported as the case's outcome
                return "setup", f"{type(exc).__name__}: {exc}"
        env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "100", **case.env}
        if case.shell:
            cmd: list[str] | str = case.shell.format(py=sys.executable, tmp=tmp)
        else:
            cmd = [sys.executable, "-m", *(a.format(tmp=tmp) for a in case.argv)]
        try:
            p = subprocess.run(
                cmd, shell=bool(case.shell), executable="/bin/bash" if case.shell else None, cwd=root,
                env=env,
                capture_output=True, timeout=case.timeout_s, preexec_fn=_limit_memory,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return "hang", f"still running after {case.timeout_s:g} s"
        err = p.stderr.decode(errors="replace")
        out = p.stdout.decode(errors="replace")
        lines = [x for x in err.splitlines() if x.strip()]
        if "Traceback" in err:
            return "traceback", lines[-1] if lines else ""
        if case.expect == "error":
            if p.returncode == 0:
                return "wrong", "accepted (exit 0)"
            errors = [x for x in lines if not x.startswith("warning:")]
            ok = p.returncode == 2 and len(errors) == 1 and errors[0].startswith("error:")
            return ("clean", errors[0]) if ok else ("unclean", f"exit {p.returncode}: {err.strip()[:300]}")
        if p.returncode != 0:
            return ("wrong" if p.returncode == 2 else "unclean"), f"exit {p.returncode}: {err.strip()[:300]}"
        written = (tmp / "out").read_text(errors="replace") if (tmp / "out").is_file() else ""
        hit = [f for f in case.forbid if f in out or f in written]
        if hit:
            return "wrong", f"output holds {hit[0]!r}"
        problem = case.check(written) if case.check else ""
        return ("wrong", problem) if problem else ("clean", "")


def run_all(root: Path = ROOT, workers: int = 4) -> list[tuple[Case, str, str]]:
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda c: run_case(c, root), CASES))
    return [(c, *r) for c, r in zip(CASES, results, strict=True)]


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else ROOT
    results = run_all(root)
    counts = Counter(kind for _, kind, _ in results)
    for case, kind, detail in results:
        if kind != "clean" or "-v" in argv:
            print(f"{kind:9} {case.name}: {detail}")
    print(
        f"{len(results)} hostile cases against {root}: "
        + ", ".join(f"{n} {k}" for k, n in counts.most_common())
    )
    return 0 if counts.get("clean", 0) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
