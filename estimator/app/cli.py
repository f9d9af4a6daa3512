"""``python -m estimator``: report | predict | list | fit.

Bad input (unknown id, missing config key, impossible context, unknown quant, unreadable or non-GGUF file)
exits with code 2 and one line on stderr, never a traceback: SpecError and OSError are caught here, at the
boundary.  Heavy modules are imported inside the subcommand that needs them, so ``report`` starts fast
(no numpy / scipy / pandas / engine import on its path).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from estimator.engines import ENGINES
from estimator.physics import covariates as cov
from estimator.specs import LENGTHS, SPLITS, SpecError, Workload
from estimator.validate import parse_number

FORMATS = ("text", "json", "markdown", "html")


class UsageError(Exception):
    """Bad command-line usage (argparse) — reported as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


def _number(name: str) -> Callable[[str], int | float]:
    """An argparse type: a number inside ``estimator.validate.BOUNDS[name]`` (finite, in range); the message
    names the range (argparse prefixes the option)."""

    def parse(text: str) -> int | float:
        try:
            return parse_number(text, name, "value")
        except SpecError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("value ")) from None

    parse.__name__ = name  # argparse names the type in its messages
    return parse


# the device figures a user may give: custom, or overrides of a catalog / detected device
_CPU_REF = f"default: detected, else {cov.CPU_REFERENCE_CORES} cores x {cov.CPU_DEFAULT_CLOCK_GHZ:g} GHz"
_HARDWARE_FIGURES = (
    ("memory_gib", "device memory, GiB (2^30 B): custom, or overrides the catalog's"),
    ("bandwidth_gbs", "device bandwidth, GB/s (10^9 B/s): custom, or overrides the catalog's"),
    ("tflops", "dense bf16 TFLOPS: custom, or overrides the catalog's"),
    ("cpu_cores", f"a CPU's physical cores (with its clock, they scale prefill; {_CPU_REF})"),
    ("cpu_clock_ghz", f"a CPU's maximum clock, GHz (10^9 Hz; {_CPU_REF})"),
)


def _add_hardware_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hardware",
        required=True,
        help="catalog id or a name it is made of ('4090', 'h100 pcie'); 'auto' = this machine (NVIDIA GPUs, "
        "Apple silicon or the CPU); or 'custom' with --memory-gib/--bandwidth-gbs",
    )
    for rule, text in _HARDWARE_FIGURES:  # each checked against its estimator.validate.BOUNDS entry
        p.add_argument("--" + rule.replace("_", "-"), type=_number(rule), help=text)
    p.add_argument("--family", help="hardware family (selects calibrated coefficients); a catalog family")
    p.add_argument(
        "--kind",
        choices=("gpu", "unified", "cpu", "npu"),
        help="custom: what the device is (default: the kind of its --family's devices, else gpu)",
    )
    p.add_argument(
        "--wired-limit-mb",
        type=_number("wired_limit_mb"),
        help="Apple: the GPU memory limit set with sysctl iogpu.wired_limit_mb (default: macOS's own)",
    )


def _add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=ENGINES, default="llama.cpp")
    p.add_argument("--kv-dtype", default="f16", help="f16 | bf16 | f32 | q8_0 | q4_0 | fp8")
    p.add_argument(
        "--ctx",
        type=_number("ctx"),
        default=None,
        help="context tokens per sequence (default 8192, or the model's maximum when smaller)",
    )
    p.add_argument(
        "--devices",
        type=_number("devices"),
        default=None,
        help="device count (default 1; auto: every GPU found)",
    )
    p.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="tp = tensor parallel (llama.cpp -sm tensor), pp = pipeline / layer split "
        "(llama.cpp -sm layer), dp = attention data parallel with expert-parallel MoE (vLLM "
        "--data-parallel-size N --enable-expert-parallel, SGLang --enable-dp-attention: each device "
        "holds its own sequences' KV and every non-expert weight); default: the engine's own "
        "(llama.cpp pp, vLLM tp)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        "--mem-fraction-static",
        "--kv-cache-free-gpu-memory-fraction",
        type=_number("gpu_memory_utilization"),
        default=None,
        help="fraction of device memory an engine that reserves memory takes (vLLM --gpu-memory-utilization, "
        "SGLang --mem-fraction-static; TensorRT-LLM --kv_cache_free_gpu_memory_fraction: of the memory left "
        "after weights and buffers); default: the engine's own",
    )
    p.add_argument(
        "--backend",
        default="",
        help="the engine's backend (llama.cpp: CUDA, ROCm, Metal, Vulkan, SYCL, CANN, CPU, ...); default: "
        "the engine's own for the device (estimator/data/support.csv says what runs where)",
    )
    p.add_argument(
        "--flash-attn",
        choices=("on", "off", "auto"),
        default="auto",
        help="flash attention (llama.cpp -fa; default auto = what the engine picks): off adds the F32 "
        "attention scores to the compute buffer and forbids a quantized V cache",
    )
    p.add_argument(
        "--ubatch",
        type=_number("n_ubatch"),
        default=Workload.n_ubatch,
        help=f"tokens per micro-batch (llama.cpp -ub, default {Workload.n_ubatch}): sizes the compute "
        "buffers and the sliding-window cache",
    )
    p.add_argument(
        "--swa-full",
        action="store_true",
        help="llama.cpp --swa-full: sliding-window layers keep a cache of the full context",
    )
    p.add_argument(
        "--kv-unified",
        action=argparse.BooleanOptionalAction,
        default=Workload.kv_unified,
        help="llama.cpp --kv-unified: the --concurrency sequences share one KV buffer (default); "
        "--no-kv-unified gives each its own stream of --ctx cells",
    )
    p.add_argument(
        "--kv-pad",
        type=_number("kv_pad"),
        default=0,
        help="KV cell padding of an older llama.cpp build: 256 with flash attention and 32 without for "
        "builds of May 2024 - Oct 2025, 1 for the few unpadded ones; default 0 = the current build's 256",
    )
    p.add_argument(
        "--coefficients", help="coefficients JSON (default: results/coefficients.json, else the prior)"
    )


def build_parser(serve_args: bool = True) -> argparse.ArgumentParser:
    """The ``python -m estimator`` parser.

    ``serve_args=False`` leaves the ``serve`` subcommand's options out, so building the parser does not import
    ``estimator.app.serve`` (http.server, email, ...): ``main`` passes it for every other subcommand, which
    keeps
    ``report`` start-up light.
    """
    parser = _Parser(prog="python -m estimator", description="fitbench sizing estimator")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    r = sub.add_parser("report", help="full sizing report for one model on one device")
    r.add_argument("--model", required=True, help="catalog id, HF id, config.json path/folder, or .gguf path")
    _add_hardware_args(r)
    r.add_argument(
        "--quant",
        default=None,
        help="weight format (default: a .gguf file's own tensors; else for vLLM / SGLang / TensorRT-LLM the "
        "format the model is published in (BF16, FP8-BLOCK, MXFP4 ...), for llama.cpp Q4_K_M (MXFP4 for "
        "gpt-oss); 'gguf' = the file's own)",
    )
    _add_workload_args(r)
    r.add_argument(
        "--concurrency", type=_number("concurrency"), default=1, help="sequences decoding together"
    )
    r.add_argument(
        "--offload-gib", type=_number("offload_gib"), default=0.0, help="weights kept in host RAM, GiB"
    )
    r.add_argument(
        "--n-cpu-moe", type=_number("n_cpu_moe"), default=0, help="MoE experts of N layers in host RAM"
    )
    r.add_argument(
        "--usd-per-hour", type=_number("usd_per_hour"), help="hourly price of the whole configuration (USD)"
    )
    r.add_argument(
        "--hours-per-day",
        type=_number("hours_per_day"),
        default=4.0,
        help="active hours per day (cost, break-even)",
    )
    r.add_argument(
        "--kwh-price",
        type=_number("kwh_price"),
        default=0.15,
        help="electricity price, USD/kWh (default assumed)",
    )
    r.add_argument(
        "--purchase-usd", type=_number("purchase_usd"), help="purchase price of the whole configuration (USD)"
    )
    r.add_argument(
        "--ft-rank", type=_number("ft_rank"), default=16, help="LoRA rank for the fine-tuning section"
    )
    r.add_argument(
        "--ft-seq-len", type=_number("ft_seq_len"), default=2048, help="fine-tuning sequence length"
    )
    r.add_argument(
        "--ft-micro-batch", type=_number("ft_micro_batch"), default=1, help="fine-tuning micro-batch"
    )
    r.add_argument("--allow-overlong", action="store_true", help="allow a context above the model maximum")
    r.add_argument("--isl", type=_number("isl"), default=1024, help="serving: prompt tokens per request")
    r.add_argument("--osl", type=_number("osl"), default=1024, help="serving: output tokens per request")
    r.add_argument(
        "--lengths",
        choices=LENGTHS,
        default=LENGTHS[0],
        help="serving: lengths that vary around --isl / --osl (spread, the default: real traffic, "
        "random-length benchmarks) or every request exactly that long (fixed, a fixed-length benchmark); "
        "decides SGLang's regime (staggered or lock-step cohort)",
    )
    r.add_argument(
        "--slo-ttft-ms",
        type=_number("slo_ttft_ms"),
        default=2000.0,
        help="serving objective: mean time to first token, ms",
    )
    r.add_argument(
        "--slo-tpot-ms",
        type=_number("slo_tpot_ms"),
        default=100.0,
        help="serving objective: mean time per output token, ms",
    )
    r.add_argument("--format", choices=FORMATS, default="text")
    r.add_argument(
        "--brief",
        action="store_true",
        help="text: the answer only (verdict, memory, decode / prefill / TTFT, cost, notes), ~10 lines",
    )
    r.add_argument("-o", "--output", help="write the report to this file")
    r.add_argument(
        "--lang",
        choices=("en", "es"),
        default="en",
        help="language of the report (text, --brief, Markdown, HTML, warnings)",
    )
    r.add_argument("--results", default="results/runs", help="measured runs shown beside estimates (html)")

    p = sub.add_parser("predict", help="predict a CSV of cases (llama-bench semantics)")
    p.add_argument("cases", help="CASES.csv")
    p.add_argument("-o", "--output", help="OUT.csv (default: stdout)")
    p.add_argument("--coefficients", help="coefficients JSON")

    ls = sub.add_parser("list", help="list catalog models, hardware or quant formats")
    ls.add_argument("what", choices=("models", "hardware", "quants"))
    ls.add_argument("--format", choices=("text", "json", "csv"), default="text")
    ls.add_argument("-o", "--output")

    f = sub.add_parser(
        "fit", help="catalog models that run on a device, largest first, each in its best format that fits"
    )
    _add_hardware_args(f)
    _add_workload_args(f)
    f.add_argument(
        "--min-tok-s", type=_number("min_tok_s"), default=0.0, help="least single-stream decode tok/s (est.)"
    )
    f.add_argument(
        "--min-headroom-gib",
        type=_number("min_headroom_gib"),
        default=0.0,
        help="least free usable memory, GiB",
    )
    f.add_argument("--top", type=_number("top"), help="show the first N rows")
    f.add_argument(
        "--model-family", help="only models whose id, HF id or architecture contains this (e.g. qwen, llama)"
    )
    f.add_argument("--license", help="only models whose license contains this (e.g. apache, mit)")
    moe = f.add_mutually_exclusive_group()
    moe.add_argument("--moe", action="store_const", const=True, dest="moe", help="mixture-of-experts only")
    moe.add_argument("--dense", action="store_const", const=False, dest="moe", help="dense models only")
    f.add_argument("--format", choices=("text", "json", "csv"), default="text")
    f.add_argument("-o", "--output")

    srv = sub.add_parser("serve", help="local sizing page (http://127.0.0.1:8765/)")
    if serve_args:
        from estimator.app.serve import build_arg_parser  # http.server & co: only when serving

        build_arg_parser(srv)
    return parser


def _hardware(args):
    """(device, count) of the hardware options (``estimator.report.request.resolve_device``)."""
    from estimator.report.request import resolve_device

    return resolve_device(
        args.hardware,
        args.memory_gib,
        args.bandwidth_gbs,
        args.tflops,
        args.family,
        args.wired_limit_mb,
        args.devices,
        kind=args.kind,
        cpu_cores=args.cpu_cores,
        cpu_clock_ghz=args.cpu_clock_ghz,
    )


def _table(path: str | None):
    from estimator.physics.coefficients import load_coefficients

    return load_coefficients(path)


def _workload(args, devices: int, **extra):
    from estimator.engines import get_engine
    from estimator.report.request import DEFAULT_CTX, make_workload

    ctx = DEFAULT_CTX if args.ctx is None else args.ctx
    return make_workload(
        args.engine, args.kv_dtype, ctx, devices, args.split, args.gpu_memory_utilization,
        backend=args.backend, flash_attn=get_engine(args.engine).flash_attn_for(args.flash_attn),
        n_ubatch=args.ubatch, n_batch=max(Workload.n_batch, args.ubatch), swa_full=args.swa_full,
        kv_unified=args.kv_unified, kv_pad=args.kv_pad, **extra,
    )  # fmt: skip


class StdoutClosed(SpecError):
    """Standard output was closed when the command started (``cmd >&-``) and no ``-o FILE`` was given."""


def _stdout():
    """sys.stdout, or StdoutClosed when the process was started without one."""
    if sys.stdout is None:
        raise StdoutClosed("standard output is closed; write to a file with -o FILE")
    return sys.stdout


def _interactive() -> bool:
    """True when standard output is a terminal (False when it is a file, a pipe, or closed)."""
    return sys.stdout is not None and sys.stdout.isatty()


def _warn(message: str, lang: str = "en") -> None:
    """``warning: MESSAGE`` on stderr, in ``lang`` (the report's --lang)."""
    if sys.stderr is None:  # started with stderr closed: warnings have nowhere to go
        return
    line = f"warning: {message}"
    if lang != "en":
        from estimator.render.translate import tr

        line = tr(line, lang)
    print(line, file=sys.stderr)


def _write(content, output: str | None) -> None:
    """``content`` (text, or a function writing to a text file) to ``output`` through the atomic writer
    (estimator.app.output), or to standard output."""
    if output:
        from estimator.app.output import write_output

        try:
            write_output(output, content)
        except OSError as exc:
            raise SpecError(f"cannot write {exc.filename or output}: {exc.strerror or exc}") from None
    elif callable(content):
        content(_stdout())
    else:
        _stdout().write(content)


def report_request(args):
    """The ``ReportRequest`` of parsed ``report`` arguments (validation and defaults live there)."""
    from estimator.report.request import ReportRequest

    return ReportRequest(
        model=args.model,
        hardware=args.hardware,
        quant=args.quant,
        engine=args.engine,
        kv_dtype=args.kv_dtype,
        ctx=args.ctx,
        devices=args.devices,
        split=args.split,
        concurrency=args.concurrency,
        offload_gib=args.offload_gib,
        n_cpu_moe=args.n_cpu_moe,
        gpu_memory_utilization=args.gpu_memory_utilization,
        memory_gib=args.memory_gib,
        bandwidth_gbs=args.bandwidth_gbs,
        tflops=args.tflops,
        family=args.family,
        kind=args.kind,
        cpu_cores=args.cpu_cores,
        cpu_clock_ghz=args.cpu_clock_ghz,
        wired_limit_mb=args.wired_limit_mb,
        usd_per_hour=args.usd_per_hour,
        hours_per_day=args.hours_per_day,
        kwh_price=args.kwh_price,
        purchase_usd=args.purchase_usd,
        ft_rank=args.ft_rank,
        ft_seq_len=args.ft_seq_len,
        ft_micro_batch=args.ft_micro_batch,
        allow_overlong=args.allow_overlong,
        coefficients=args.coefficients,
        backend=args.backend,
        flash_attn=args.flash_attn,
        ubatch=args.ubatch,
        swa_full=args.swa_full,
        kv_unified=args.kv_unified,
        kv_pad=args.kv_pad,
        isl=args.isl,
        osl=args.osl,
        lengths=args.lengths,
        slo_ttft_ms=args.slo_ttft_ms,
        slo_tpot_ms=args.slo_tpot_ms,
    )


def cmd_report(args) -> int:
    from estimator.report import document
    from estimator.report.request import make_report

    if args.brief and args.format != "text":
        raise UsageError(f"--brief is a text output; it cannot be combined with --format {args.format}")
    d = document.report_to_dict(make_report(report_request(args)))
    if not args.brief:  # the brief answer carries its warnings itself
        for w in d["warnings"]:
            _warn(w, args.lang)
    if args.brief and (args.output or not _interactive()):
        _write(document.to_brief(d, _text_width(args.output), args.lang), args.output)
    elif args.format == "json":
        _write(document.to_json(d), args.output)
    elif args.format == "markdown":
        _write(document.to_markdown(d, args.lang), args.output)
    elif args.format == "html":
        _write(document.to_html(d, args.lang, results_dir=args.results), args.output)
    elif args.output or not _interactive():
        _write(document.to_text(d, _text_width(args.output), args.lang), args.output)
    else:  # an interactive terminal: rich for colour and the real width
        from rich.console import Console

        document.print_text(d, Console(), brief=args.brief, lang=args.lang)
    return 0


def _text_width(output: str | None) -> int:
    """Columns for plain text: $COLUMNS when set (a pipe from a terminal), else the renderer's default."""
    import os

    from estimator.render.text import DEFAULT_WIDTH

    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and not output else DEFAULT_WIDTH


def cmd_predict(args) -> int:
    from estimator.app.predict import predict_csv

    n_bad = predict_csv(args.cases, args.output, _table(args.coefficients), write=_write)
    if n_bad:
        _warn(f"{n_bad} row(s) could not be predicted (see the 'error' column)")
    return 0


def cmd_list(args) -> int:
    from estimator.report.listing import list_rows

    headers, rows = list_rows(args.what)
    return _emit_rows(headers, rows, args.format, args.output, title=f"catalog {args.what}", view=args.what)


def cmd_fit(args) -> int:
    from estimator.report.fit import FitQuery, fit_rows

    if args.min_tok_s < 0 or args.min_headroom_gib < 0:
        raise UsageError("--min-tok-s and --min-headroom-gib must be >= 0")
    if args.top is not None and args.top < 1:
        raise UsageError(f"--top must be >= 1, got {args.top}")
    hw, devices = _hardware(args)
    query = FitQuery(
        min_tok_s=args.min_tok_s,
        min_headroom_gib=args.min_headroom_gib,
        family=args.model_family,
        license=args.license,
        moe=args.moe,
        top=args.top,
        ctx_given=args.ctx is not None,
    )
    wl = _workload(args, devices)
    headers, rows, notes = fit_rows(hw, wl, _table(args.coefficients), query)
    crit = "".join(
        x
        for x in (
            f", >= {args.min_tok_s:g} tok/s" if args.min_tok_s else "",
            f", >= {args.min_headroom_gib:g} GiB free" if args.min_headroom_gib else "",
        )
    )
    title = (
        f"models on {devices} x {hw.name} ({hw.id}) at {wl.n_ctx:,} tokens ({args.engine}, KV "
        f"{args.kv_dtype}{crit}): largest first, each in its best format that fits"
    )
    notes = [f"note: {n}" for n in (*hw.notes, *notes)]
    return _emit_rows(headers, rows, args.format, args.output, title=title, view="fit", notes=notes)


def _emit_rows(
    headers: list[str],
    rows: list[list],
    fmt: str,
    output: str | None,
    title: str,
    view: str,
    notes: list[str] | None = None,
) -> int:
    """Rows as JSON / CSV (``notes`` on stderr) or the terminal table (``notes`` under it)."""
    if fmt in ("json", "csv"):
        for n in notes or ():
            print(n, file=sys.stderr)
    if fmt == "json":
        import json

        _write(json.dumps([dict(zip(headers, r, strict=True)) for r in rows], indent=2) + "\n", output)
    elif fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(headers)
        w.writerows(rows)
        _write(buf.getvalue(), output)
    else:  # the report's compact table layout; rich only for an interactive terminal
        from estimator.render.blocks import Table
        from estimator.render.text import lines_text, print_lines, table_lines
        from estimator.report.listing import text_view

        heads, view_rows, footnotes = text_view(view, headers, rows)
        notes = [*footnotes, *(notes or ())]
        cells = [["–" if v is None else str(v) for v in r] for r in view_rows]
        table = Table(heads, cells, title)
        if output or not _interactive():
            lines = table_lines(table, 160 if output else _text_width(None))
            _write(lines_text(lines) + "".join(n + "\n" for n in notes), output)
        else:
            from rich.console import Console

            console = Console()
            print_lines(table_lines(table, console.width), console)
            for n in notes:
                console.print(n, highlight=False, markup=False)
    return 0


def cmd_serve(args) -> int:
    from estimator.app.serve import serve_main

    return serve_main(args)


COMMANDS = {
    "report": cmd_report,
    "predict": cmd_predict,
    "list": cmd_list,
    "fit": cmd_fit,
    "serve": cmd_serve,
}


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a Unix tool whose reader went away


def _error(message: str) -> int:
    if sys.stderr is not None:
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _quiet_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so the interpreter's final flush of a stdout whose reader went
    away does not print 'Exception ignored ... BrokenPipeError'."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code: 2 on bad input (one line on stderr, never a traceback), 130 on
    Ctrl-C or SIGTERM (temporary output files removed), 141 quietly when the reader of standard output went
    away (``report | head``), like other Unix tools."""
    from estimator.app.interrupt import EXIT_INTERRUPTED, interrupts_unwind

    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(serve_args=argv[:1] == ["serve"]).parse_args(argv)
        with interrupts_unwind():
            code = COMMANDS[args.command](args)
        if sys.stdout is not None:
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except UsageError as exc:
        return _error(str(exc))
    except SpecError as exc:
        return _error(str(exc))
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        where = f"{exc.filename} " if getattr(exc, "filename", None) else ""
        return _error(f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
