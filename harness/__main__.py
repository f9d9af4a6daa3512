"""``python -m harness``: measure a plan, import foreign results, list what results/ holds.

    python -m harness measure --plan plans/cpu-quick.toml [--results results] [--resume | --repeat]
                              [--executor local|ray [--address auto|HOST:PORT|ray://HOST:PORT]]
    python -m harness check-plan --plan plans/cpu-full.toml
    python -m harness import FILE [--format auto|llama-bench|vllm-bench|published|serving-silicon]
                                  [--hardware ID|local]
                                  [--source URL] [--results results] [--timestamp ISO]
                                  [--input-len N --output-len N --batch-size N]   (vLLM bench latency)
    python -m harness ls [--results results]
    python -m harness show [--results results] [--model M] [--hardware H] [--family F] [--engine E]
                           [--quant Q] [--status S] [--test pp|tg|mem|serve] [--plan P] [--file F]
                           [--last N] [--format text|json|csv]   (the records, one row each)
    python -m harness build-model --model ID --quant Q --engine E --layers K [--shape-only]
                                  (the sweep's build child)
    python -m harness consistency [--results results] [--format table|json] [--tolerance 0.01]
                                  [--coefficients FILE]   (engine memory vs estimator; 1 = out of tolerance)
    python -m harness memory-fit --model ID --ctx N [--ubatch 512] [--fa on|off] [--kv-dtype f16] [--n-seq S]
                                 [--no-kv-unified] [--swa-full] [--coefficients FILE] [--format table|json]
                                 (llama.cpp's own memory-fit pass for a full-depth model vs the estimator)

Bad input exits 2 with one line on stderr (a target that is not a regular file, a damaged record naming its
FILE:LINE, a full disk); Ctrl-C or SIGTERM exits 130 (an interrupted sweep resumes with --resume).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from harness.importers import FORMATS
from harness.records import RecordError

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def _fail(message: str) -> int:
    sys.stderr.write(f"error: {message.splitlines()[0] if message else 'failed'}\n")
    return EXIT_BAD_INPUT


def _engine_options(items: list[str]) -> dict[str, dict]:
    """``--engine-option ENGINE:KEY=VALUE`` arguments -> {engine: {key: value}}; VALUE is read as a TOML value
    (true / false, numbers, a quoted string), as the plan's ``engine_options`` are, a bare word as a string.
    Raises PlanError naming the argument it cannot read."""
    import tomllib

    from harness.plan import PlanError

    out: dict[str, dict] = {}
    for item in items:
        engine, colon, assignment = item.partition(":")
        key, eq, text = assignment.partition("=")
        if not (colon and eq and engine.strip() and key.strip() and text.strip()):
            raise PlanError(
                f"--engine-option {item!r}: expected ENGINE:KEY=VALUE, e.g. llama.cpp:repack=false"
            )
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        out.setdefault(engine.strip(), {})[key.strip()] = value
    return out


def cmd_measure(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harness.executors import make_sweep
    from harness.plan import PlanError, load_plan, with_engine_options
    from harness.sweep import SweepInterrupted, SweepRefused

    console = Console(stderr=True)
    if args.retry_failed and not args.resume:
        return _fail("--retry-failed needs --resume")
    if args.executor != "ray" and (args.address or args.ship_code or args.node_wait_s is not None):
        return _fail("--address, --node-wait-s and --ship-code need --executor ray")
    if args.node_wait_s is not None and args.node_wait_s < 0:
        return _fail("--node-wait-s must be >= 0")
    try:
        plan = load_plan(args.plan)
        for engine, options in _engine_options(args.engine_option or []).items():
            plan = with_engine_options(plan, engine, options)
    except PlanError as exc:
        return _fail(str(exc))
    console.print(f"plan [bold]{plan.name}[/]: {len(plan.points)} points, engines {', '.join(plan.engines)}")
    cluster = {}  # the Ray executor's options
    if args.executor == "ray":
        cluster = {"address": args.address or "auto", "ship_code": args.ship_code}
        if args.node_wait_s is not None:
            cluster["node_wait_s"] = args.node_wait_s
    sweep = make_sweep(
        args.executor,
        plan,
        args.results,
        **cluster,
        resume=args.resume,
        repeat=args.repeat,
        retry_failed=args.retry_failed,
        cache_dir=args.cache,
        console=console,
        show_progress=not args.no_progress,
    )
    try:
        s = sweep.run()
    except SweepRefused as exc:
        return _fail(str(exc))
    except SweepInterrupted:
        console.print("[yellow]interrupted[/]: finished points are stored; re-run with --resume to continue")
        return 130
    except RecordError as exc:
        return _fail(f"results store is damaged: {exc}")
    except OSError as exc:  # a full disk or a vanished folder while storing a point
        where = f" in {exc.filename}" if exc.filename else ""
        return _fail(
            f"cannot store records{where}: {exc.strerror or exc}; the points stored before are kept "
            "(free space, then re-run with --resume)"
        )
    status = ", ".join(f"{n} {k}" for k, n in sorted(s.record_status.items())) or "no new records"
    console.print(
        f"{s.points_run} points run, {s.points_resumed} already recorded, {s.elapsed_s:.0f} s; "
        f"records: {status} -> {s.records_path}"
    )
    return 0


def cmd_check_plan(args: argparse.Namespace) -> int:
    from harness.plan import PlanError, load_plan

    try:
        plan = load_plan(args.plan)
    except PlanError as exc:
        return _fail(str(exc))
    models = sorted({p.model.id for p in plan.points})
    archs = sorted({p.model.architecture for p in plan.points})
    quants = sorted({p.quant for p in plan.points})
    print(
        f"{plan.path}: ok - {len(plan.points)} points; engines {', '.join(plan.engines)}; "
        f"{len(models)} models ({len(archs)} architectures: {', '.join(archs)}); quants {', '.join(quants)}"
    )
    return 0


def _published_device(name: str):
    """The one catalog device a published device name names by its tokens (estimator.catalog.names), a
    bin only where the name states it ("Apple M3 Max" without its GPU-core count is ambiguous); SpecError
    otherwise."""
    from estimator.catalog.data import find_hardware, get_hardware

    return get_hardware(find_hardware(name, full_chip=False)[0]["id"])


def cmd_import(args: argparse.Namespace) -> int:
    from estimator.specs import SpecError
    from harness.importers import ImportContext, ImportFormatError, import_file
    from harness.records import parse_timestamp
    from harness.safe_files import FileRefused
    from harness.store import append_new, import_target

    if args.timestamp is not None:
        try:
            parse_timestamp(args.timestamp)
        except ValueError as exc:
            return _fail(f"--timestamp {exc}")

    try:
        from estimator.catalog.resolve import resolve_hardware, resolve_model
    except ImportError:
        resolve_hardware = resolve_model = None
    hardware, device, host = None, "", ""
    if args.hardware == "local":
        from harness.hwdetect import detect_host, hardware_spec_for

        info = detect_host(probe_bandwidth=False)
        hardware, device, host = hardware_spec_for(info), info.device_name, info.host
        hardware = hardware if info.hardware_id else _with_family(hardware, info.hardware_family)
    elif args.hardware:
        if resolve_hardware is None:
            return _fail("--hardware needs the estimator catalog (estimator.catalog.resolve)")
        try:
            hardware = resolve_hardware(args.hardware)
        except SpecError as exc:
            return _fail(f"--hardware {args.hardware}: {exc}")
    model = None
    if args.model:
        if resolve_model is None:
            return _fail("--model needs the estimator catalog (estimator.catalog.resolve)")
        try:
            model = resolve_model(args.model)
        except (SpecError, OSError) as exc:
            return _fail(f"--model {args.model}: {exc}")
    for name in ("input_len", "output_len", "batch_size"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            return _fail(f"--{name.replace('_', '-')} must be >= 1")
    ctx = ImportContext(
        source=args.source or str(args.file),
        hardware=hardware,
        device_name=device,
        host=host,
        timestamp_utc=args.timestamp or "",
        input_len=args.input_len,
        output_len=args.output_len,
        batch_size=args.batch_size,
        resolve_hardware=resolve_hardware,
        resolve_model=resolve_model,
        model=model,
        match_hardware_name=_published_device if resolve_hardware else None,
    )
    try:
        fmt, records = import_file(args.file, args.format, ctx)
    except ImportFormatError as exc:
        return _fail(str(exc))
    target = Path(args.out) if args.out else import_target(args.results, fmt, args.file)
    try:
        added, present = append_new(target, records)
    except FileRefused as exc:
        return _fail(f"cannot write: {exc}")
    except RecordError as exc:
        return _fail(f"{target}: {exc}")
    except OSError as exc:
        return _fail(f"cannot write {target}: {exc.strerror or exc}")
    print(f"imported {added} {fmt} records into {target} ({present} already present)")
    no_family = sum(1 for r in records if not r.hardware_family)
    if no_family:
        sys.stderr.write(
            f"warning: {no_family} of {len(records)} records have no hardware family (no catalog "
            "hardware_id; pass --hardware ID or add it to the catalog): calibration cannot use them\n"
        )
    no_model = [r for r in records if not r.model_fingerprint]
    if no_model:
        said = Counter(_stated_model(r) for r in no_model).most_common(3)
        why = {
            "llama-bench": "no single catalog geometry has that llama.cpp architecture and parameter count; "
            "pass --model ID",
            "vllm-bench": "the JSON does not name it, or the catalog does not know the name; pass --model ID",
        }.get(fmt, "the catalog does not know the model named, or the name fits several")
        sys.stderr.write(
            f"warning: {len(no_model)} of {len(records)} records name no catalog model "
            f"({', '.join(f'{name!r} x{n}' for name, n in said)}: {why}): calibration cannot use them\n"
        )
    return 0


def _stated_model(rec) -> str:
    """How an imported record names its model: llama-bench's description, the published model name, else the
    model id ("not stated" when none)."""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    raw, pub = extra.get("raw") or {}, extra.get("published") or {}
    stated = (raw.get("model_type") if isinstance(raw, dict) else "") or pub.get("model_name") or rec.model_id
    return str(stated or "not stated")


def _with_family(spec, family: str):
    from dataclasses import replace

    return replace(spec, family=family, id="")


def cmd_ls(args: argparse.Namespace) -> int:
    from harness.store import render_listing

    if not Path(args.results).is_dir():
        return _fail(f"{args.results}: no such results folder")
    try:
        return render_listing(args.results)
    except RecordError as exc:
        return _fail(str(exc))


def cmd_show(args: argparse.Namespace) -> int:
    from harness.show import FIELDS, Filters, ShowError, run_cli

    filters = Filters({name: getattr(args, name) for name in FIELDS}, args.last)
    try:
        return run_cli(args.results, filters, args.format)
    except ShowError as exc:
        return _fail(str(exc))


def cmd_build_model(args: argparse.Namespace) -> int:
    """Build (or find in the cache) a synthetic model and print its path on the last stdout line."""
    from estimator.catalog.resolve import resolve_model
    from estimator.specs import SpecError
    from harness.safe_files import FileRefused
    from harness.synth import synthetic_model

    try:
        model = resolve_model(args.model)
        path = synthetic_model(
            model, args.quant, args.engine, args.layers or None, args.cache, seed=args.seed,
            shape_only=args.shape_only,
        )  # fmt: skip
    except (SpecError, FileRefused) as exc:
        return _fail(str(exc))
    except OSError as exc:  # a full disk: the .part file is already removed
        return _fail(f"cannot write the model {exc.filename or ''}: {exc.strerror or exc}")
    print(path)
    return 0


def cmd_consistency(args: argparse.Namespace) -> int:
    """Engine weights / KV / compute buffers of own llama.cpp runs vs the estimator (harness.consistency)."""
    from harness.consistency import run_cli

    return run_cli(args.results, args.format, args.tolerance, args.coefficients)


def cmd_memory_fit(args: argparse.Namespace) -> int:
    """llama.cpp's memory-fit pass on a data-less copy of a model, next to the estimator (harness.memfit)."""
    import json

    from estimator.catalog.resolve import resolve_model
    from estimator.specs import SpecError
    from estimator.validate import MAX_CONTEXT, MAX_SEQUENCES
    from harness.memfit import MemoryFitError, point_spec, render, run_memory_fit

    limits = (("--ctx", args.ctx, MAX_CONTEXT), ("--ubatch", args.ubatch, MAX_CONTEXT))
    for name, value, top in (*limits, ("--n-seq", args.n_seq, MAX_SEQUENCES)):
        if not 1 <= value <= top:
            return _fail(f"{name} {value}: expected 1 to {top:,}")
    from estimator.physics.coefficients import DEFAULT_PATH, load_coefficients

    mem, label = None, "prior"
    coefficients = args.coefficients or (str(DEFAULT_PATH) if DEFAULT_PATH.is_file() else None)
    try:
        model = resolve_model(args.model)
        if coefficients:
            mem, label = load_coefficients(coefficients).memory_for("llama.cpp") or None, coefficients
        spec = point_spec(
            args.ctx, args.ubatch, args.ubatch, args.fa == "on", args.kv_dtype, args.n_seq,
            not args.no_kv_unified, args.swa_full,
        )  # fmt: skip
        fit = run_memory_fit(model, spec, args.cache, mem_coeffs=mem, coefficients_label=label)
    except (SpecError, MemoryFitError, ValueError, OSError) as exc:
        return _fail(str(exc))
    if args.format == "json":
        print(json.dumps(fit.to_dict(), indent=2))
    else:
        render(fit)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m harness", description="fitbench harness: sweeps, imports, listings")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    m = sub.add_parser("measure", help="run a sweep plan on this machine or on a Ray cluster")
    m.add_argument("--plan", required=True)
    m.add_argument("--results", default="results")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help="skip points already recorded for this host/engine")
    g.add_argument("--repeat", action="store_true", help="measure recorded points again (new records)")
    m.add_argument(
        "--retry-failed",
        action="store_true",
        help="with --resume: measure again points whose records are all failed or skipped "
        "(the failed records stay in the file as history)",
    )
    m.add_argument(
        "--engine-option",
        action="append",
        metavar="ENGINE:KEY=VALUE",
        help="add an engine option to every point of that engine (repeatable), e.g. llama.cpp:repack=false "
        "(llama.cpp --no-repack, for hosts where its AMX buffer crashes)",
    )
    m.add_argument("--cache", default=None, help="synthetic model cache (default ~/.cache/fitbench/models)")
    m.add_argument("--no-progress", action="store_true")
    m.add_argument(
        "--executor",
        default="local",
        choices=["local", "ray"],
        help="where points run: this machine (default) or a Ray cluster (pip install -e '.[cluster]')",
    )
    m.add_argument(
        "--address", default=None, help="Ray cluster: auto (default), HOST:PORT or ray://HOST:PORT"
    )
    m.add_argument(
        "--node-wait-s",
        type=float,
        default=None,
        help="Ray: how long a point waits for a node able to run it after nodes left (default 120)",
    )
    m.add_argument(
        "--ship-code", action="store_true", help="Ray: send this checkout to the nodes (Ray working_dir)"
    )
    m.set_defaults(func=cmd_measure)

    c = sub.add_parser("check-plan", help="validate a plan without running it")
    c.add_argument("--plan", required=True)
    c.set_defaults(func=cmd_check_plan)

    i = sub.add_parser("import", help="import llama-bench / vLLM bench / published / serving results")
    i.add_argument("file")
    i.add_argument("--format", default="auto", choices=list(FORMATS))
    i.add_argument("--hardware", default=None, help="catalog id of the machine, or 'local' for this one")
    i.add_argument("--source", default=None, help="source URL or description (default: the file path)")
    i.add_argument("--results", default="results")
    i.add_argument(
        "--out", default=None, help="target JSONL (default: one file per source, harness.store.import_target)"
    )
    i.add_argument("--timestamp", default=None, help="timestamp_utc for rows that carry none (default now)")
    i.add_argument(
        "--model",
        default=None,
        help="catalog model every llama-bench row ran (default: the one catalog geometry llama-bench's "
        "model_type and model_n_params name)",
    )
    i.add_argument("--input-len", type=int, default=None, help="vLLM bench latency --input-len")
    i.add_argument("--output-len", type=int, default=None, help="vLLM bench latency --output-len")
    i.add_argument("--batch-size", type=int, default=None, help="vLLM bench latency --batch-size")
    i.set_defaults(func=cmd_import)

    ls = sub.add_parser("ls", help="summarise results/ per hardware family, engine and model")
    ls.add_argument("--results", default="results")
    ls.set_defaults(func=cmd_ls)

    sh = sub.add_parser("show", help="the stored records, one row each (filters, text / json / csv)")
    sh.add_argument("--results", default="results")
    for name, what in (
        ("model", "model id"),
        ("hardware", "catalog id or device name"),
        ("family", "hardware family"),
        ("engine", "engine (llama.cpp, vllm, ...)"),
        ("quant", "quant (Q4_K_M, BF16, ...)"),
        ("status", "ok, failed or skipped"),
        ("test", "pp, tg, mem or serve"),
        ("plan", "plan name of an own sweep"),
        ("file", "records file under runs/ (name or stem, e.g. published)"),
    ):
        sh.add_argument(f"--{name}", default=None, help=f"{what}; a glob or a comma-separated list")
    sh.add_argument("--last", type=int, default=None, help="only the N newest records left by the filters")
    sh.add_argument("--format", default="text", choices=["text", "json", "csv"])
    sh.set_defaults(func=cmd_show)

    b = sub.add_parser("build-model", help="(internal) build a cached synthetic model, print its path")
    b.add_argument("--model", required=True)
    b.add_argument("--quant", required=True)
    b.add_argument("--engine", required=True)
    b.add_argument("--layers", type=int, default=0)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--cache", default=None)
    b.add_argument(
        "--shape-only", action="store_true", help="a data-less GGUF for llama.cpp's memory-fit pass"
    )
    b.set_defaults(func=cmd_build_model)

    cs = sub.add_parser("consistency", help="llama.cpp memory parsed from the engine vs the estimator")
    cs.add_argument("--results", default="results")
    cs.add_argument("--format", default="table", choices=["table", "json"])
    cs.add_argument("--tolerance", type=float, default=0.01, help="weights / KV tolerance (fraction)")
    cs.add_argument("--coefficients", default=None, help="coefficients.json for the compute estimate")
    cs.set_defaults(func=cmd_consistency)

    mf = sub.add_parser("memory-fit", help="llama.cpp's own memory-fit pass for a model vs the estimator")
    mf.add_argument("--model", required=True, help="catalog id, config.json or HF folder")
    mf.add_argument("--ctx", type=int, required=True, help="context cells per sequence")
    mf.add_argument("--ubatch", type=int, default=512, help="n_ubatch (n_batch is set to it)")
    mf.add_argument("--fa", choices=["on", "off"], default="on", help="flash attention")
    from runners.llama_cpp import KV_TYPES  # the cache types the runner accepts

    mf.add_argument("--kv-dtype", default="f16", choices=KV_TYPES, help="KV cache type")
    mf.add_argument("--n-seq", type=int, default=1, help="sequences (llama.cpp -np)")
    mf.add_argument("--no-kv-unified", action="store_true", help="one KV stream per sequence")
    mf.add_argument("--swa-full", action="store_true", help="full-size sliding-window cache")
    mf.add_argument(
        "--coefficients", default=None, help="estimator coefficients (default results/coefficients.json)"
    )
    mf.add_argument("--cache", default=None, help="synthetic model cache (default ~/.cache/fitbench/models)")
    mf.add_argument("--format", default="table", choices=["table", "json"])
    mf.set_defaults(func=cmd_memory_fit)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand.  SIGTERM and Ctrl-C unwind alike (temporary files removed, children killed;
    ``estimator.app.interrupt``) and every command exits 130 on either, without a traceback."""
    from estimator.app.interrupt import EXIT_INTERRUPTED, interrupts_unwind

    args = build_parser().parse_args(argv)
    try:
        with interrupts_unwind():
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
