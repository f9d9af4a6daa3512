"""``python -m estimator``: report | predict | list | fit.

Bad input (unknown id, missing config key, impossible context, unknown quant, unreadable or non-GGUF file)
exits with code 2 and one line on stderr, never a traceback: SpecError and OSError are caught here, at the
boundary.  Heavy modules are imported inside the subcommand that needs them, so ``report`` starts fast
(no numpy / scipy / pandas / engine import on its path).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from estimator.engines import ENGINES
from estimator.specs import SpecError

FORMATS = ("text", "json", "markdown", "html")
# Quality order for ``fit``: the first format that fits is the "best quant that fits".
FIT_QUANTS = ("BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "Q2_K")


class UsageError(Exception):
    """Bad command-line usage (argparse) — reported as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    return v


def _float(text: str) -> float:
    """A finite number: every float option (GiB, GB/s, TFLOPS, fractions, USD, hours) rejects nan / inf."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def _add_hardware_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hardware", required=True, help="catalog id, or 'custom' with --memory-gib/--bandwidth-gbs"
    )
    p.add_argument("--memory-gib", type=_float, help="custom device memory, GiB (2^30 B)")
    p.add_argument("--bandwidth-gbs", type=_float, help="custom device bandwidth, GB/s (10^9 B/s)")
    p.add_argument("--tflops", type=_float, help="custom dense bf16 TFLOPS")
    p.add_argument("--family", help="custom hardware family (selects calibrated coefficients)")


def _add_workload_args(p: argparse.ArgumentParser, ctx_default: int = 8192) -> None:
    p.add_argument("--engine", choices=ENGINES, default="llama.cpp")
    p.add_argument("--kv-dtype", default="f16", help="f16 | bf16 | f32 | q8_0 | q4_0 | fp8")
    p.add_argument("--ctx", type=_positive_int, default=ctx_default, help="context tokens per sequence")
    p.add_argument("--devices", type=_positive_int, default=1)
    p.add_argument(
        "--split",
        choices=("tp", "pp"),
        default=None,
        help="tp = tensor parallel (llama.cpp -sm row), pp = pipeline / layer split (llama.cpp -sm layer); "
        "default: the engine's own (llama.cpp pp, vLLM tp)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=_float,
        default=None,
        help="fraction of device memory an engine that reserves memory takes (vLLM --gpu-memory-utilization, "
        "SGLang --mem-fraction-static); default: the engine's own",
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
        "--quant", default=None, help="weight format (default: Q4_K_M for llama.cpp, BF16 for vLLM)"
    )
    _add_workload_args(r)
    r.add_argument("--concurrency", type=_positive_int, default=1, help="sequences decoding together")
    r.add_argument("--offload-gib", type=_float, default=0.0, help="weights kept in host RAM, GiB")
    r.add_argument("--n-cpu-moe", type=_positive_int, default=0, help="MoE experts of N layers in host RAM")
    r.add_argument("--usd-per-hour", type=_float, help="hourly price of the whole configuration (USD)")
    r.add_argument(
        "--hours-per-day", type=_float, default=4.0, help="active hours per day (cost, break-even)"
    )
    r.add_argument(
        "--kwh-price", type=_float, default=0.15, help="electricity price, USD/kWh (default assumed)"
    )
    r.add_argument("--purchase-usd", type=_float, help="purchase price of the whole configuration (USD)")
    r.add_argument("--ft-rank", type=_positive_int, default=16, help="LoRA rank for the fine-tuning section")
    r.add_argument("--ft-seq-len", type=_positive_int, default=2048, help="fine-tuning sequence length")
    r.add_argument("--ft-micro-batch", type=_positive_int, default=1, help="fine-tuning micro-batch")
    r.add_argument("--allow-overlong", action="store_true", help="allow a context above the model maximum")
    r.add_argument("--isl", type=_positive_int, default=1024, help="serving: prompt tokens per request")
    r.add_argument("--osl", type=_positive_int, default=1024, help="serving: output tokens per request")
    r.add_argument(
        "--slo-ttft-ms", type=_float, default=2000.0, help="serving objective: mean time to first token, ms"
    )
    r.add_argument(
        "--slo-tpot-ms", type=_float, default=100.0, help="serving objective: mean time per output token, ms"
    )
    r.add_argument("--format", choices=FORMATS, default="text")
    r.add_argument("-o", "--output", help="write the report to this file")
    r.add_argument("--lang", choices=("en", "es"), default="en", help="language of the html report")
    r.add_argument("--results", default="results/runs", help="measured runs shown beside estimates (html)")

    p = sub.add_parser("predict", help="predict a CSV of cases (llama-bench semantics)")
    p.add_argument("cases", help="CASES.csv")
    p.add_argument("-o", "--output", help="OUT.csv (default: stdout)")
    p.add_argument("--coefficients", help="coefficients JSON")

    ls = sub.add_parser("list", help="list catalog models, hardware or quant formats")
    ls.add_argument("what", choices=("models", "hardware", "quants"))
    ls.add_argument("--format", choices=("text", "json", "csv"), default="text")
    ls.add_argument("-o", "--output")

    f = sub.add_parser("fit", help="every catalog model with the best quant that fits on a device")
    _add_hardware_args(f)
    _add_workload_args(f)
    f.add_argument("--format", choices=("text", "json", "csv"), default="text")
    f.add_argument("-o", "--output")

    srv = sub.add_parser("serve", help="local sizing page (http://127.0.0.1:8765/)")
    if serve_args:
        from estimator.app.serve import build_arg_parser  # http.server & co: only when serving

        build_arg_parser(srv)
    return parser


def _hardware(args):
    from estimator.report.request import resolve_device

    return resolve_device(args.hardware, args.memory_gib, args.bandwidth_gbs, args.tflops, args.family)


def _table(path: str | None):
    from estimator.physics.coefficients import load_coefficients

    return load_coefficients(path)


def _workload(args, **extra):
    from estimator.report.request import make_workload

    wl = make_workload(
        args.engine, args.kv_dtype, args.ctx, args.devices, args.split, args.gpu_memory_utilization, **extra
    )
    return wl


def _write(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


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
        usd_per_hour=args.usd_per_hour,
        hours_per_day=args.hours_per_day,
        kwh_price=args.kwh_price,
        purchase_usd=args.purchase_usd,
        ft_rank=args.ft_rank,
        ft_seq_len=args.ft_seq_len,
        ft_micro_batch=args.ft_micro_batch,
        allow_overlong=args.allow_overlong,
        coefficients=args.coefficients,
        isl=args.isl,
        osl=args.osl,
        slo_ttft_ms=args.slo_ttft_ms,
        slo_tpot_ms=args.slo_tpot_ms,
    )


def cmd_report(args) -> int:
    from estimator.report import document
    from estimator.report.request import make_report

    d = document.report_to_dict(make_report(report_request(args)))
    for w in d["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    if args.format == "json":
        _write(document.to_json(d), args.output)
    elif args.format == "markdown":
        _write(document.to_markdown(d), args.output)
    elif args.format == "html":
        _write(document.to_html(d, args.lang, results_dir=args.results), args.output)
    elif args.output or not sys.stdout.isatty():
        _write(document.to_text(d, _text_width(args.output)), args.output)
    else:  # an interactive terminal: rich for colour and the real width
        from rich.console import Console

        document.print_text(d, Console())
    return 0


def _text_width(output: str | None) -> int:
    """Columns for plain text: $COLUMNS when set (a pipe from a terminal), else the renderer's default."""
    import os

    from estimator.render.text import DEFAULT_WIDTH

    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and not output else DEFAULT_WIDTH


def cmd_predict(args) -> int:
    from estimator.app.predict import predict_csv

    n_bad = predict_csv(args.cases, args.output, _table(args.coefficients))
    if n_bad:
        print(f"warning: {n_bad} row(s) could not be predicted (see the 'error' column)", file=sys.stderr)
    return 0


def cmd_list(args) -> int:
    from estimator.report.listing import list_rows

    headers, rows = list_rows(args.what)
    return _emit_rows(headers, rows, args.format, args.output, title=f"catalog {args.what}", view=args.what)


def cmd_fit(args) -> int:
    from estimator.report.listing import fit_rows

    hw = _hardware(args)
    headers, rows = fit_rows(hw, _workload(args), _table(args.coefficients), FIT_QUANTS)
    title = (
        f"models on {args.devices} x {hw.id} at {args.ctx:,} tokens ({args.engine}, KV {args.kv_dtype}): "
        "the highest-precision quant that fits, fastest first"
    )
    return _emit_rows(headers, rows, args.format, args.output, title=title, view="fit")


def _emit_rows(
    headers: list[str], rows: list[list], fmt: str, output: str | None, title: str, view: str
) -> int:
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

        heads, view_rows, notes = text_view(view, headers, rows)
        cells = [["–" if v is None else str(v) for v in r] for r in view_rows]
        table = Table(heads, cells, title)
        if output or not sys.stdout.isatty():
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


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 on bad input, with one line on stderr)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(serve_args=argv[:1] == ["serve"]).parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SpecError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
