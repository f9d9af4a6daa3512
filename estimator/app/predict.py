"""The prediction interface used by calibration and the CI backtest: one case per row, stdlib csv only.

Input columns (llama-bench semantics):

* ``model`` (catalog id, HF id or path), ``hardware`` (catalog id; empty or ``custom`` plus the columns
  ``bandwidth_gbs``, ``memory_gib``, ``tflops``, ``family`` [, ``vendor``, ``kind``, ``host_bandwidth_gbs``,
  ``interconnect_gbs``, ``cpu_cores``, ``cpu_clock_ghz``, ``measured_as``] for a device outside the
  catalog; ``measured_as`` is the device key of a detected host's own runs, ``"<host>:<device name>"``, so
  its calibrated effects answer when the coefficients hold them), ``n_devices``
  (1), ``engine`` (llama.cpp),
  ``quant`` (empty: a .gguf model's own tensors, else the engine's default for the model as in ``report``,
  ``EngineProfile.default_quant_for``; ``gguf``: the file's own tensors), ``kv_dtype``
  (f16), ``n_prompt``, ``n_gen``, ``n_depth`` (0), ``batch`` (1, concurrent
  sequences), ``n_ctx`` (default n_prompt + n_gen + n_depth, like llama-bench), ``flash_attn`` (1; 1/0,
  on/off or auto); optional ``split`` (tp|pp|dp; default: the engine's own, llama.cpp pp / vLLM tp; dp =
  attention data parallelism of vLLM / SGLang / TensorRT-LLM, estimator.physics.memory),
  ``n_ubatch``, ``n_batch``, ``offload_bytes``, ``moe_offload_layers``, and the llama.cpp KV switches
  ``swa_full`` (0: sliding-window layers hold window cells; 1: --swa-full), ``kv_unified`` (1: the ``batch``
  sequences share one cache, --kv-unified; 0: one stream per sequence) and ``kv_pad`` (0: current builds'
  256-cell padding; 32 for builds of May 2024 - Oct 2025 without flash attention); ``n_layers``: run only
  the model's first N layers, the depth-reduced proxy the harness measures (``ModelSpec.depth_proxy``; a
  GGUF model then needs a ``quant``); default every layer.
* Every other column passes through untouched.

Output adds OUTPUT_COLUMNS:

* memory (bytes, from estimator.physics.memory): weights_bytes, kv_bytes, runtime_bytes, total_bytes, and fits
  (``true`` unless the verdict is "does not fit").  For an engine that reserves memory (vLLM, SGLang,
  TensorRT-LLM): kv_capacity_tokens (the KV pool in tokens of context, sliding-window layers as the engine
  lays them out) and max_concurrency (sequences of n_ctx tokens it holds at once); where the engine's
  startup log is reproduced (vLLM), startup_kv_tokens and startup_max_concurrency: what it logs ("KV cache
  size", "Maximum concurrency for n_ctx tokens per request"; an admission bound, below max_concurrency for
  sliding-window models).  compute_bytes: the engine's compute buffers (part of runtime_bytes); with a
  calibrated coefficients file that has a band for the engine (``memory_bands``, the device kind's where it
  has one): compute_bytes_hi and total_bytes_hi, the compute buffers and the total with them at the band's
  95th percentile of measured / estimated, and tight (``true`` when it fits but a device's headroom is under
  that excess); empty without a band.  compute_replayed: ``true`` when the compute buffers are the engine's
  own graph replayed through its allocator (llama.cpp on a CPU, for the architectures
  estimator.engines.llama_cpp_graph builds), not the formula; then there is no spread to band:
  compute_bytes_hi and total_bytes_hi equal compute_bytes and total_bytes, and tight is ``false``.
* prefill_tok_s (n_prompt > 0): batch x n_prompt / prefill time, prompt on top of n_depth (pp{n_prompt}).
* decode_tok_s (n_gen > 0): batch / mean step time over n_gen tokens from depth n_depth + n_prompt
  (tg{n_gen}; with batch > 1 this is the aggregate over all sequences).
* ttft_s (n_prompt > 0): prefill time + one decode step.
* A serving engine (vLLM, SGLang, TensorRT-LLM) whose decode / prefill set for the device is not calibrated
  while its serving set comes from the serving fit (calibrated or pooled) is timed on the serving fit's step
  instead (estimator.physics.stream): decode steps are the serving model's t(B, 0), the prefill its prompt
  chunks, ttft_s = ttft_fixed_s + prefill; the intervals are the serving set's TPOT / TTFT intervals and
  ``coefficients`` says "serving fit".
* *_lo / *_hi: the coefficient set's interval; coefficients: the set label(s); calibrated: every set used was
  calibrated.  support: native | fallback | unsupported | unlisted (estimator.physics.support; a fallback is
  predicted on its fallback path, an unsupported row is predicted on the device's native path and says so
  here).  error: empty, or why this row could not be predicted (its other outputs are then empty).
* optional input ``backend``: the engine's backend (default: the engine profile's for the device).

Serving mode (estimator.physics.serving): a row with a ``concurrency`` column (C >= 1) is a serving benchmark:
C clients each sending requests of ``n_prompt`` prompt tokens (ISL) for ``n_gen`` output tokens (OSL) and the
next one when answered (``vllm bench serve --max-concurrency C``); optional ``mode`` = ``serve`` (default) or
``batch`` (C requests at once, offline ``LLM.generate``, timed to the last token); optional ``lengths`` =
``spread`` (default: lengths that vary around n_prompt / n_gen, real traffic and random-length benchmarks:
the staggered steady state) or ``fixed`` (every request exactly that long, a fixed-length benchmark; an engine
that does not mix prompts into decode steps, SGLang, then serves its clients in a lock-step cohort);
``batch``, ``n_depth`` are
ignored; ``offload_bytes`` / ``moe_offload_layers`` make the row an error (the serving model reads every
weight from device memory).  Memory is sized for C sequences of n_ctx.  Outputs instead of the llama-bench
speeds:

* ttft_s: mean time to first token under that load (queueing included), seconds;
* tpot_s: mean time per output token after the first, seconds;
* output_tok_s: output tokens per second of all clients together; per_user_tok_s: 1 / tpot_s;
* each with _lo / _hi from the serving set's intervals (TTFT and TPOT intervals of ln(measured / predicted)
  time; the throughputs take the TPOT interval inverted); e2e_s: TTFT + (OSL - 1) x TPOT.
prefill_tok_s / decode_tok_s stay empty on serving rows.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from estimator.engines import ENGINES, engines_for, get_engine
from estimator.physics import speed, stream, support
from estimator.physics.coefficients import CoefficientTable, load_coefficients
from estimator.physics.limits import check_split
from estimator.specs import LENGTHS, SPLITS, HardwareSpec, QuantSpec, SpecError, Workload, equal_lengths
from estimator.validate import MODEL_BOUNDS, check_number, parse_number

MAX_CASES_BYTES = 64 * 2**20  # a CASES.csv larger than this is refused before it is read

def _opt_int(x: float | None) -> str:
    """A count as a cell: empty when there is none."""
    return "" if x is None else str(int(x))


OUTPUT_COLUMNS = (
    "weights_bytes",
    "kv_bytes",
    "runtime_bytes",
    "total_bytes",
    "fits",
    "prefill_tok_s",
    "decode_tok_s",
    "ttft_s",
    "prefill_tok_s_lo",
    "prefill_tok_s_hi",
    "decode_tok_s_lo",
    "decode_tok_s_hi",
    "coefficients",
    "calibrated",
    "support",
    "error",
    # serving mode (rows with a concurrency column)
    "ttft_s_lo",
    "ttft_s_hi",
    "tpot_s",
    "tpot_s_lo",
    "tpot_s_hi",
    "e2e_s",
    "output_tok_s",
    "output_tok_s_lo",
    "output_tok_s_hi",
    "per_user_tok_s",
    "per_user_tok_s_lo",
    "per_user_tok_s_hi",
    # KV pool of an engine that reserves memory, and what vLLM logs at startup
    "kv_capacity_tokens",
    "max_concurrency",
    "startup_kv_tokens",
    "startup_max_concurrency",
    # the compute buffers and how sure they are (coefficients.json memory_bands)
    "compute_bytes",
    "compute_bytes_hi",
    "total_bytes_hi",
    "tight",
    "compute_replayed",
)
SERVING_COLUMNS = ("concurrency", "mode", "lengths")
REQUIRED_COLUMNS = ("model", "hardware", "n_prompt", "n_gen")
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def _text(row: dict, key: str, default: str = "") -> str:
    v = row.get(key)
    return default if v is None or str(v).strip() == "" else str(v).strip()


def _int(row: dict, key: str, default: int | None = None) -> int:
    """An integer cell ("512", "512.0" or "1e3") inside ``estimator.validate.BOUNDS[key]``; empty -> default;
    SpecError naming the column and its range otherwise."""
    raw = _text(row, key)
    if raw == "":
        if default is None:
            raise SpecError(f"column {key!r} is required")
        return default
    return int(parse_number(raw, key, f"column {key!r}"))


def _float(row: dict, key: str) -> float | None:
    """A number cell inside ``BOUNDS[key]`` (finite, positive device figures); empty -> None."""
    raw = _text(row, key)
    if raw == "":
        return None
    return float(parse_number(raw, key, f"column {key!r}"))


def _bool(row: dict, key: str, default: bool) -> bool:
    raw = _text(row, key).lower()
    if raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SpecError(f"column {key!r}: {raw!r} is not a boolean (use 1/0 or true/false)")


def custom_hardware(row: dict) -> HardwareSpec:
    """A device outside the catalog from the row's bandwidth_gbs / memory_gib / tflops / family columns
    (optional: kind, vendor, hardware_name, host_bandwidth_gbs, interconnect_gbs; a CPU's cpu_cores,
    cpu_clock_ghz, GHz, and cpu_isa, its ISA features space-separated (``HardwareSpec.cpu_isa``); measured_as,
    the device key of a detected host's own runs)."""
    from estimator.catalog.resolve import resolve_hardware

    family = _text(row, "family", "custom")
    hw = resolve_hardware(
        "custom",
        memory_gib=_float(row, "memory_gib"),
        bandwidth_gbs=_float(row, "bandwidth_gbs"),
        tflops=_float(row, "tflops"),
        family=family,
        kind=_text(row, "kind") or None,  # None: the family's kind (a cpu-* family: "cpu"), else "gpu"
        name=_text(row, "hardware_name") or None,
        host_bandwidth_gbs=_float(row, "host_bandwidth_gbs"),
    )
    extra = {
        "vendor": _text(row, "vendor"),
        "interconnect_gbs": _float(row, "interconnect_gbs"),
        "measured_as": _text(row, "measured_as"),
    }
    if hw.kind == "cpu":  # the cores x clock of the GEMM rate's covariate (estimator.physics.covariates)
        cores = _float(row, "cpu_cores")
        extra.update(cpu_cores=int(cores) if cores else None, cpu_clock_ghz=_float(row, "cpu_clock_ghz"))
        extra["cpu_isa"] = tuple(sorted(_text(row, "cpu_isa").split()))
    return replace(hw, **{k: v for k, v in extra.items() if v})


class _Resolver:
    """Caches resolved models / hardware / quants across rows (a GGUF path is parsed once)."""

    def __init__(self) -> None:
        self._models: dict[str, Any] = {}
        self._hw: dict[str, HardwareSpec] = {}

    def model(self, arg: str):
        """The model a row names: exact ids only (no forgiving match), as the repository named
        (``catalog.data.as_named``: an alias of a quantized re-upload is that format by default)."""
        from estimator.catalog.data import as_named, is_model_id
        from estimator.catalog.resolve import resolve_model

        if arg not in self._models:
            spec = resolve_model(arg)
            self._models[arg] = as_named(spec, arg) if is_model_id(arg) else spec
        return self._models[arg]

    def hardware(self, row: dict) -> HardwareSpec:
        from estimator.catalog.resolve import resolve_hardware

        arg = _text(row, "hardware")
        if arg in ("", "custom"):
            return custom_hardware(row)
        if arg not in self._hw:
            self._hw[arg] = resolve_hardware(arg)
        return self._hw[arg]


def row_workload(row: dict) -> Workload:
    """The Workload a row describes (n_ctx defaults to n_prompt + n_gen + n_depth, like llama-bench)."""
    n_prompt, n_gen = _int(row, "n_prompt"), _int(row, "n_gen")
    n_depth = _int(row, "n_depth", 0)
    if n_prompt + n_gen == 0:
        raise SpecError("n_prompt and n_gen are both 0: nothing to predict")
    n_ctx = _int(row, "n_ctx", 0) or check_number(
        n_prompt + n_gen + n_depth, "n_ctx", "column 'n_ctx' (by default n_prompt + n_gen + n_depth)"
    )
    engine = _text(row, "engine", "llama.cpp").lower()
    default = get_engine(engine).default_split if engine in ENGINES else "tp"  # unknown: predict_one says so
    split = (_text(row, "split", "") or default).lower()
    if split not in SPLITS:
        raise SpecError(f"column 'split': {split!r} is not {', '.join(SPLITS[:-1])} or {SPLITS[-1]}")
    if engine in ENGINES:
        check_split(engine, split, "column 'split' dp")
    base = Workload()
    return Workload(
        n_ctx=n_ctx,
        kv_dtype=_text(row, "kv_dtype", "f16").lower(),
        n_seq=_int(row, "batch", 1),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        n_batch=_int(row, "n_batch", base.n_batch),
        n_ubatch=_int(row, "n_ubatch", base.n_ubatch),
        flash_attn=_flash_attn(row, engine),
        engine=engine,
        n_devices=_int(row, "n_devices", 1),
        split=split,
        offload_bytes=_int(row, "offload_bytes", 0),
        moe_offload_layers=_int(row, "moe_offload_layers", 0),
        concurrency=_int(row, "batch", 1),
        backend=_text(row, "backend", ""),
        swa_full=_bool(row, "swa_full", base.swa_full),
        kv_unified=_bool(row, "kv_unified", base.kv_unified),
        kv_pad=_int(row, "kv_pad", base.kv_pad),
    )


def _flash_attn(row: dict, engine: str) -> bool:
    """The ``flash_attn`` column: 1/0/true/false/on/off, or ``auto`` (the engine profile resolves it)."""
    if _text(row, "flash_attn").lower() == "auto":
        return get_engine(engine).flash_attn_for("auto") if engine in ENGINES else True
    return _bool(row, "flash_attn", True)


def _num(x: float) -> str:
    return repr(float(x))


def predict_one(row: dict, table: CoefficientTable, resolver: _Resolver | None = None) -> dict[str, str]:
    """The OUTPUT_COLUMNS values of one row (strings, empty where not applicable).  Raises on bad input."""
    from estimator.physics.memory import banded_compute, estimate_memory
    from estimator.physics.quant import get_quant

    resolver = resolver or _Resolver()
    wl = row_workload(row)
    serving_row = _text(row, "concurrency") != ""
    if serving_row:
        conc = _int(row, "concurrency")
        if wl.n_prompt < 1 or wl.n_gen < 1:
            raise SpecError("a serving row needs n_prompt (input tokens) and n_gen (output tokens) >= 1")
        if wl.offload_bytes > 0 or wl.moe_offload_layers > 0:
            raise SpecError(
                "a serving row with weights in host RAM (offload_bytes / moe_offload_layers) is not "
                "estimated: the serving model reads every weight from device memory"
            )
        wl = replace(wl, n_seq=conc, concurrency=conc, n_depth=0)
    model = resolver.model(_text(row, "model"))
    if _text(row, "n_layers"):
        model = model.depth_proxy(
            int(parse_number(_text(row, "n_layers"), MODEL_BOUNDS["n_layers"], "column 'n_layers'"))
        )
    hardware = resolver.hardware(row)
    qtext = _text(row, "quant")
    if wl.engine not in ENGINES:
        raise SpecError(f"unknown engine {wl.engine!r}; one of {', '.join(ENGINES)}")
    if model.gguf_tensors is not None and qtext.lower() in ("", "gguf"):
        quant = QuantSpec(name="GGUF", default_type="f16", description="the GGUF file's own tensor types")
    else:  # empty: the engine's default for the model, as `report` without --quant
        quant = get_quant(qtext or get_engine(wl.engine).default_quant_for(model))
    quant = get_engine(wl.engine).weight_format(quant)  # the layout the engine loads (vLLM MXFP4 checkpoints)
    if not get_engine(wl.engine).runs(quant):
        engines = ", ".join(engines_for(quant))
        raise SpecError(f"quant {quant.name} is not available on {wl.engine} (engines: {engines})")
    # a GGUF model is one quant: its exact tensor bytes are used (weight_breakdown with quant None)
    mem_quant = None if model.gguf_tensors is not None else quant
    mem = estimate_memory(model, mem_quant, hardware, wl, table.memory_for(wl.engine))
    out = {c: "" for c in OUTPUT_COLUMNS}
    out.update(
        weights_bytes=str(int(mem.weights_bytes)),
        kv_bytes=str(int(mem.kv_bytes)),
        runtime_bytes=str(int(mem.runtime_bytes)),
        total_bytes=str(int(mem.total_bytes)),
        fits="false" if mem.verdict == "does not fit" else "true",
        kv_capacity_tokens=_opt_int(mem.kv_capacity_tokens),
        max_concurrency=_opt_int(mem.max_concurrency),
        startup_kv_tokens="" if mem.startup_kv is None else str(int(mem.startup_kv.kv_cache_tokens)),
        startup_max_concurrency="" if mem.startup_kv is None else f"{mem.startup_kv.max_concurrency:.4g}",
        compute_bytes=str(int(mem.compute_bytes)),
        compute_replayed="true" if mem.compute_replayed else "false",
    )
    calibrated_memory = mem.coefficients != "prior"  # a band describes the file's own coefficients only
    band = table.memory_band(wl.engine, "compute_bytes", hardware.kind) if calibrated_memory else None
    if mem.compute_replayed:  # the engine's own figure: nothing to band
        out.update(compute_bytes_hi=str(int(mem.compute_bytes)), total_bytes_hi=str(int(mem.total_bytes)),
                   tight="false")  # fmt: skip
    elif band is not None and mem.compute_bytes:
        banded = banded_compute(mem, band)
        out.update(
            compute_bytes_hi=str(banded.compute_hi_bytes),
            total_bytes_hi=str(banded.total_hi_bytes),
            tight="true" if banded.tight else "false",
        )
    if serving_row:  # serving is estimated on the device's native path (no fallback serving model)
        out.update(_serving_outputs(row, model, quant, hardware, replace(wl, n_seq=1), table))
        out["support"] = support.judge(model, mem_quant, hardware, wl).status
        return out
    sets = stream.speed_sets(table, model, mem_quant, hardware, wl)
    swl = sets.workload(wl)
    used = []
    if wl.n_prompt > 0:
        pre = speed.prefill_estimate(speed.prefill_features(model, quant, swl), hardware, sets)
        depth = wl.n_depth + wl.n_prompt
        first = speed.decode_features(model, quant, replace(swl, n_seq=1), depth)
        t_first = speed.decode_estimate(first, hardware, sets).time_s
        out.update(prefill_tok_s=_num(pre.tok_s), prefill_tok_s_lo=_num(pre.lo_tok_s))
        ttft = speed.first_token_s(sets, pre.time_s, t_first)
        out.update(prefill_tok_s_hi=_num(pre.hi_tok_s), ttft_s=_num(ttft))
        used.append(("prefill", pre))
    if wl.n_gen > 0:
        depth = wl.n_depth + wl.n_prompt
        feats = speed.tg_features(model, quant, swl, depth, wl.n_gen)
        dec = speed.decode_estimate(feats, hardware, sets, wl.n_seq)
        out.update(decode_tok_s=_num(dec.tok_s), decode_tok_s_lo=_num(dec.lo_tok_s))
        out.update(decode_tok_s_hi=_num(dec.hi_tok_s))
        used.append(("decode", dec))
    labels = {e.coefficients for _, e in used}
    out["coefficients"] = (
        labels.pop() if len(labels) == 1 else "; ".join(f"{phase}: {e.coefficients}" for phase, e in used)
    )
    out["calibrated"] = "true" if all(e.calibrated for _, e in used) else "false"
    verdict = sets.path.verdict if sets.path is not None else support.judge(model, mem_quant, hardware, wl)
    out["support"] = verdict.status
    return out


def _serving_outputs(row: dict, model, quant, hardware, wl: Workload, table: CoefficientTable) -> dict:
    """The serving-mode outputs of a row (module doc): estimator.physics.serving at its load."""
    from estimator.physics import serving

    mode = _text(row, "mode", serving.SERVE).lower()
    if mode not in (serving.SERVE, serving.BATCH):
        raise SpecError(f"column 'mode': {mode!r} is not serve or batch")
    equal = equal_lengths(_text(row, "lengths", LENGTHS[0]), "column 'lengths'")
    load = serving.ServingLoad(
        int(wl.concurrency), int(wl.n_prompt), int(wl.n_gen), mode, equal_lengths=equal
    )
    (e,) = serving.estimate_serving(model, quant, hardware, wl, [load], table)
    return {
        "ttft_s": _num(e.ttft_s),
        "ttft_s_lo": _num(e.ttft_lo_s),
        "ttft_s_hi": _num(e.ttft_hi_s),
        "tpot_s": _num(e.tpot_s),
        "tpot_s_lo": _num(e.tpot_lo_s),
        "tpot_s_hi": _num(e.tpot_hi_s),
        "e2e_s": _num(e.e2e_s),
        "output_tok_s": _num(e.output_tok_s),
        "output_tok_s_lo": _num(e.output_lo_tok_s),
        "output_tok_s_hi": _num(e.output_hi_tok_s),
        "per_user_tok_s": _num(e.per_user_tok_s),
        "per_user_tok_s_lo": _num(e.per_user_lo_tok_s),
        "per_user_tok_s_hi": _num(e.per_user_hi_tok_s),
        "coefficients": e.coefficients,
        "calibrated": "true" if e.calibrated else "false",
    }


def predict_rows(rows: list[dict], table: CoefficientTable | None = None) -> list[dict]:
    """Predict every row; a bad row gets its ``error`` set and empty outputs, the others are still predicted.

    Raises SpecError up front only when a row carries a column named like an output (it would be lost).
    """
    for i, row in enumerate(rows):
        clash = [c for c in OUTPUT_COLUMNS if c in row]
        if clash:
            raise SpecError(
                f"row {i + 1}: input column(s) {', '.join(clash)} clash with output columns; rename"
            )
    table = table if table is not None else load_coefficients()
    resolver = _Resolver()
    result = []
    for row in rows:
        out = dict(row)
        try:
            out.update(predict_one(row, table, resolver))
        except Exception as e:  # noqa: BLE001 - a bad row must never stop the others
            msg = str(e) if isinstance(e, SpecError | ValueError) else f"{type(e).__name__}: {e}"
            out.update({c: "" for c in OUTPUT_COLUMNS})
            out["error"] = msg.splitlines()[0] if msg else type(e).__name__
        result.append(out)
    return result


def read_cases(in_path: str | Path) -> tuple[list[str], list[dict]]:
    """(header, rows) of a CASES.csv: a regular file of at most MAX_CASES_BYTES, UTF-8 with or without a
    byte-order mark (Excel writes one), LF or CRLF line ends.  SpecError for anything else."""
    from estimator.catalog.files import read_text

    text = read_text(in_path, MAX_CASES_BYTES, encoding="utf-8-sig")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = list(reader.fieldnames or [])
        rows = list(reader)
    except csv.Error as e:
        raise SpecError(f"{in_path}: not a readable CSV ({e})") from None
    return header, rows


def predict_csv(
    in_path: str | Path,
    out_path: str | Path | None = None,
    table: CoefficientTable | None = None,
    write: Callable[[Callable[[TextIO], None], str | None], None] | None = None,
) -> int:
    """Read cases from ``in_path``, write predictions to ``out_path`` (stdout when None).

    ``write(content, out_path)`` writes (the CLI passes its own); by default ``out_path`` is replaced through
    the atomic writer (``estimator.app.output.write_output``: a failure leaves the old file or none).
    Returns the number of rows with an error.  Raises SpecError for an unreadable file or missing columns."""
    header, rows = read_cases(in_path)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SpecError(f"{in_path}: missing column(s) {', '.join(missing)}")
    results = predict_rows(rows, table)
    fields = header + [c for c in OUTPUT_COLUMNS if c not in header]

    def content(fh: TextIO) -> None:
        _write(fh, fields, results)

    if write is not None:
        write(content, None if out_path is None else str(out_path))
    elif out_path is None:
        content(sys.stdout)
    else:
        from estimator.app.output import write_output

        write_output(out_path, content)
    return sum(1 for r in results if r["error"])


def _write(fh, fields: list[str], rows: list[dict]) -> None:
    w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
