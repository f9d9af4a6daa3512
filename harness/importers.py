"""Foreign measurements -> RunRecords: llama-bench JSON / JSONL / CSV, vLLM bench latency / throughput JSON,
the normalized published measurements (reference/published/published_measurements*.csv) and the serving
points at concurrency of aiconfigurator's silicon_sample.csv (reference/published/serving_silicon.csv).

Every importer parses and validates the whole file first and returns the records; the caller appends them in
one atomic write, so a malformed file never leaves half its rows in results/.  Errors are ImportFormatError
with ``FILE:LINE: what``.  Unknown extra keys are kept (llama-bench's schema drifts between versions); the
whole source row is stored in ``extra["raw"]``, so nothing is lost.

Units: GiB figures become bytes (x 2^30); tokens/s stay tokens/s; vLLM latencies stay seconds.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

from estimator.specs import HardwareSpec, ModelSpec, SpecError
from harness.import_common import ImportContext, ImportFormatError, _base, _err, _finish
from harness.import_published import PUBLISHED_COLUMNS, PUBLISHED_METRICS, PUBLISHED_QUALITY, import_published
from harness.import_serving import import_serving_silicon
from harness.provenance import git_sha, model_fingerprint
from harness.records import RunRecord
from harness.safe_files import read_or_raise
from harness.store import short_hash

__all__ = [
    "FORMATS", "PUBLISHED_COLUMNS", "PUBLISHED_METRICS", "PUBLISHED_QUALITY", "ImportContext",
    "ImportFormatError", "detect_format", "import_file", "import_llama_bench", "import_vllm_bench",
    "llama_bench_record", "quant_from_model_type",
]  # fmt: skip

FORMATS = ("auto", "llama-bench", "vllm-bench", "published", "serving-silicon")
VLLM_LATENCY_DEFAULTS = {"input_len": 32, "output_len": 128, "batch_size": 8}  # `vllm bench latency` defaults


_LB_INT = ("n_prompt", "n_gen", "n_depth", "n_threads", "n_batch", "n_ubatch", "n_gpu_layers", "build_number",
           "model_size", "model_n_params", "avg_ns", "stddev_ns")  # fmt: skip
_LB_FLOAT = ("avg_ts", "stddev_ts")
_LB_REQUIRED = ("n_prompt", "n_gen", "avg_ts")


def quant_from_model_type(model_type: str) -> str:
    """llama_model_desc "llama 8B Q4_K - Medium" -> "Q4_K_M"; "llama ?B F16" -> "F16"; "" when absent."""
    parts = model_type.split(" ", 2)
    if len(parts) < 3:
        return ""
    ftype = parts[2].strip()
    base, _, variant = ftype.partition(" - ")
    base = base.strip().replace(" ", "_")
    suffix = {"Small": "_S", "Medium": "_M", "Large": "_L"}.get(variant.strip(), "")
    return (base + suffix).upper()


def _coerce_lb(obj: dict, path: Path, line: int) -> dict:
    out = dict(obj)
    try:
        for k in _LB_INT:
            if k in out and out[k] not in ("", None):
                v = out[k]
                out[k] = int(v) if not isinstance(v, bool) else int(v)
        for k in _LB_FLOAT:
            if k in out and out[k] not in ("", None):
                out[k] = float(out[k])
    except (TypeError, ValueError) as exc:
        raise _err(path, line, f"bad value ({exc})") from None
    if not math.isfinite(out["avg_ts"]) or out["avg_ts"] <= 0:
        raise _err(path, line, f"avg_ts = {out['avg_ts']} is not a positive number of tokens/s")
    std = out.get("stddev_ts")
    if isinstance(std, float) and (not math.isfinite(std) or std < 0):
        raise _err(path, line, f"stddev_ts = {std} is not a non-negative number of tokens/s")
    for k in ("samples_ns", "samples_ts"):
        v = out.get(k)
        if v in ("", None):
            out[k] = []
            continue
        if isinstance(v, str):  # a CSV cell: "1 2 3" or "[1, 2, 3]"
            v = [x for x in re.split(r"[\s,\[\]]+", v) if x]
        if not isinstance(v, list):
            raise _err(path, line, f"{k} is not a list of numbers")
        try:
            vals = [float(x) for x in v if not isinstance(x, bool)]
        except (TypeError, ValueError):
            vals = []
        if len(vals) != len(v) or not all(math.isfinite(x) and x > 0 for x in vals):
            raise _err(path, line, f"{k} holds a value that is not a positive number")
        out[k] = vals
    out["flash_attn"] = _lb_flash_attn(out.get("flash_attn"), path, line)
    return out


def _lb_flash_attn(value: object, path: Path, line: int) -> int | None:
    """llama-bench flash_attn across versions -> 1 on, 0 off, -1 auto, None unstated.

    Before mid-2025 a bool (JSON true/false, CSV "0"/"1"); since then an int (-1 auto, 0, 1)."""
    if value in ("", None):
        return None
    text = str(value).strip().lower()  # True -> "true", 1 -> "1"
    known = {"true": 1, "false": 0, "on": 1, "off": 0, "1": 1, "0": 0, "-1": -1, "auto": -1}
    if text not in known:
        raise _err(path, line, f"flash_attn = {value!r} is not a llama-bench flash-attention value")
    return known[text]


# llama-bench before the `backends` field (added late 2024) flagged each backend with a bool column.
_LB_OLD_BACKEND_FLAGS = (("cuda", "CUDA"), ("metal", "Metal"), ("vulkan", "Vulkan"), ("sycl", "SYCL"),
                         ("kompute", "Kompute"), ("rpc", "RPC"))  # fmt: skip


def _lb_backend(o: dict) -> str:
    """The ``backends`` field, or the old schema's per-backend flags ("CPU" when none is set), or ""."""
    if o.get("backends") not in (None, ""):
        return str(o["backends"])
    flags = [(k, name) for k, name in _LB_OLD_BACKEND_FLAGS if k in o]
    if not flags:
        return ""
    on = [name for k, name in flags if str(o[k]).strip().lower() in ("true", "1")]
    return ",".join(on) or "CPU"


def _lb_hardware(o: dict, backend: str, ctx: ImportContext) -> tuple[HardwareSpec | None, str]:
    """(catalog device, how it was found) of a llama-bench row imported without ``--hardware``: its one GPU
    (``gpu_info``; a CPU-only row: ``cpu_info``) by the names the host detection maps (NVIDIA's device names
    and their slugs, CPU model strings: ``estimator.catalog.detect``), else, for a GPU, the one catalog device
    its name's tokens name (``ctx.match_hardware_name``, bins not assumed: "Apple M3 Max" has 30 or 40 GPU
    cores).  (None, "") without the catalog, for
    several GPUs (which of them ran, and split how, the row does not say) or for a name that fits no single
    device."""
    if ctx.resolve_hardware is None:
        return None, ""
    from estimator.catalog.detect import cpu_catalog_candidates, gpu_catalog_candidates

    gpu = str(o.get("gpu_info") or "").strip()
    on_cpu = backend in ("", "CPU") or not gpu
    name = str(o.get("cpu_info") or "").strip() if on_cpu else gpu
    if not name or (not on_cpu and "," in gpu):
        return None, ""
    if on_cpu:
        cands = cpu_catalog_candidates(name)
    else:  # CUDA's device name is NVML's
        cands = gpu_catalog_candidates(name, None) if name.upper().startswith("NVIDIA") else []
    for cand in cands:
        try:
            return ctx.resolve_hardware(cand), f"{'cpu' if on_cpu else 'gpu'}_info {name!r}"
        except (SpecError, KeyError, ValueError):
            continue
    if not on_cpu and ctx.match_hardware_name is not None:
        try:  # "AMD Radeon RX 7900 XTX (RADV NAVI31)": the driver's note is no part of the name
            spec = ctx.match_hardware_name(re.sub(r"\s*\(.*\)\s*$", "", name))
        except (SpecError, KeyError, ValueError):
            return None, ""
        return spec, f"gpu_info {name!r} (token match)"
    return None, ""


def _lb_model(o: dict, ctx: ImportContext, path: Path, line: int) -> tuple[ModelSpec | None, str]:
    """(catalog model, how it was found) of a llama-bench row: ``ctx.model`` (``--model``) when given, else
    the one catalog geometry that llama.cpp's description ``model_type`` and the exact ``model_n_params``
    name, its entry named by ``model_filename`` where the file name names one (harness.model_match);
    (None, "") without the catalog or without a single fit (the row keeps its
    ``model_filename`` as model_id, which calibration cannot use).  A ``--model`` whose parameter count is
    more than 2 % off the row's ``model_n_params`` is an error: the file ran another model."""
    from harness.model_match import match_desc, param_count

    n = o.get("model_n_params")
    if ctx.model is not None:
        have = param_count(ctx.model)
        if n and abs(have - n) > 0.02 * n:
            what = f"the row's model ({o.get('model_type', '?')}) {n / 1e9:.2f} B"
            raise _err(path, line, f"--model {ctx.model.id} has {have / 1e9:.2f} B parameters, {what}: "
                       "not the model this row ran")  # fmt: skip
        return ctx.model, "--model"
    if ctx.resolve_model is None:
        return None, ""
    try:
        desc, file_name = str(o.get("model_type") or ""), str(o.get("model_filename") or "")
        return match_desc(desc, float(n) if n else None, file_name=file_name)
    except SpecError:
        return None, ""


def llama_bench_record(obj: dict, path: Path, line: int, ctx: ImportContext, sha: str) -> RunRecord:
    """One llama-bench result object -> RunRecord (pp -> prefill, tg -> decode, pg -> extra only)."""
    if not isinstance(obj, dict):
        raise _err(path, line, "expected a JSON object (one llama-bench result)")
    missing = [k for k in _LB_REQUIRED if obj.get(k) in (None, "")]
    if missing:
        raise _err(path, line, f"not a llama-bench result: missing {', '.join(missing)}")
    o = _coerce_lb(obj, path, line)
    model, found_by = _lb_model(o, ctx, path, line)
    n_prompt, n_gen, n_depth = o["n_prompt"], o["n_gen"], int(o.get("n_depth") or 0)
    if n_prompt < 0 or n_gen < 0 or (n_prompt == 0 and n_gen == 0):
        raise _err(path, line, f"n_prompt={n_prompt}, n_gen={n_gen}: not a pp, tg or pg test")
    samples = tuple(o["samples_ts"])
    kind = "pp" if n_gen == 0 else "tg" if n_prompt == 0 else "pg"
    fa = o["flash_attn"]
    n_tokens_ctx = n_prompt + n_gen + n_depth
    row = _base(ctx, sha)
    backend = _lb_backend(o)
    hardware, hardware_how = (None, "") if ctx.hardware is not None else _lb_hardware(o, backend, ctx)
    if hardware is not None:
        row.update(hardware_id=hardware.id, hardware_family=hardware.family)
    commit = str(o.get("build_commit", ""))
    row.update(
        record_id=short_hash({"source": ctx.source, "row": obj}, 24),
        engine="llama.cpp",
        engine_version=commit,
        build_info=f"llama-bench build {o.get('build_number', '?')} ({commit})",
        backend=backend,
        device_name=ctx.device_name or str(o.get("gpu_info") or o.get("cpu_info") or row["device_name"]),
        model_id=model.hf_id or model.id if model else str(o.get("model_filename", "")),
        model_fingerprint=model_fingerprint(model) if model else "",
        n_layers_real=model.n_layers if model else 0,
        n_layers_measured=model.n_layers if model else 0,
        quant=quant_from_model_type(str(o.get("model_type", ""))),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        batch=1,
        n_ctx=-(-n_tokens_ctx // 256) * 256,  # llama-bench: n_ctx = n_prompt + n_gen + n_depth, padded to 256
        kv_dtype=str(o.get("type_k", "")),
        flash_attn=None if fa in (None, -1) else bool(fa),
        n_threads=o.get("n_threads"),
        n_batch=o.get("n_batch"),
        n_ubatch=o.get("n_ubatch"),
        n_gpu_layers=o.get("n_gpu_layers"),
        weights_bytes=o.get("model_size"),
        extra={"raw": obj, "test": f"{kind}{n_prompt if kind == 'pp' else n_gen}@d{n_depth}",
               "n_ctx_derived": "llama-bench n_ctx = n_prompt + n_gen + n_depth padded to 256"},
    )  # fmt: skip
    if ts := o.get("test_time"):
        row["timestamp_utc"] = str(ts)
    if o.get("model_n_params") is not None:
        row["extra"]["n_params"] = o["model_n_params"]
    mapped = {"model_id": found_by} if model is not None else {}
    if hardware is not None:
        mapped["hardware_id"] = hardware_how
    if mapped:
        row["extra"]["mapped"] = mapped
    if kind == "pp":
        row.update(
            prefill_tok_s=o["avg_ts"], prefill_tok_s_std=o.get("stddev_ts"), prefill_samples_tok_s=samples
        )
    elif kind == "tg":
        row.update(
            decode_tok_s=o["avg_ts"], decode_tok_s_std=o.get("stddev_ts"), decode_samples_tok_s=samples
        )
    else:
        row["extra"]["pg_tok_s"] = o["avg_ts"]
    return _finish(row, path, line)


class _LineCounter:
    """Line number of a position in ``text``, for positions visited in increasing order: each call counts
    only the newlines since the previous one, so numbering every row of a file is linear in its length
    (a ``text.count`` from the start per row made a 100k-row file quadratic)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def __call__(self, pos: int) -> int:
        if pos < self.pos:  # out of order (not used by the parser): count from the start
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _json_values_with_lines(text: str, path: Path) -> list[tuple[int, object]]:
    """Elements of a top-level JSON array (or the single value) with the line each starts on (linear time)."""
    dec = json.JSONDecoder()
    i = len(text) - len(text.lstrip())
    line_of = _LineCounter(text)
    if not text[i : i + 1] == "[":
        try:
            value, _ = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise _err(path, exc.lineno, f"not valid JSON ({exc.msg})") from None
        return [(line_of(i), value)]
    out, i = [], i + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            raise _err(path, line_of(i), "not valid JSON (unterminated array)")
        if text[i] == "]":
            return out
        try:
            value, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise _err(path, exc.lineno, f"not valid JSON ({exc.msg})") from None
        out.append((line_of(i), value))
        i = end


def import_llama_bench(path: Path, text: str, ctx: ImportContext, kind: str) -> list[RunRecord]:
    """kind: "json" (array), "jsonl" (one object per line) or "csv" (header row, quoted strings)."""
    sha = git_sha()
    if kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        if not reader.fieldnames or not set(_LB_REQUIRED) <= set(reader.fieldnames):
            raise _err(path, 1, f"CSV header lacks llama-bench fields {', '.join(_LB_REQUIRED)}")
        rows = []
        for obj in reader:
            if None in obj:
                raise _err(path, reader.line_num, "more cells than header fields")
            rows.append(llama_bench_record(obj, path, reader.line_num, ctx, sha))
        return rows
    if kind == "jsonl":
        out = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _err(path, lineno, f"not valid JSON ({exc.msg})") from None
            out.append(llama_bench_record(obj, path, lineno, ctx, sha))
        return out
    values = _json_values_with_lines(text, path)
    return [llama_bench_record(v, path, ln, ctx, sha) for ln, v in values]


# --- vLLM bench ----------------------------------------------------------------------------------------
def _catalog_model(name: str, ctx: ImportContext) -> ModelSpec | None:
    """The catalog model ``name`` (an id, HF id or alias) names; None without the catalog or a match."""
    if not name or ctx.resolve_model is None:
        return None
    try:
        return ctx.resolve_model(name)
    except (SpecError, KeyError, OSError):
        return None


def import_vllm_bench(path: Path, obj: object, ctx: ImportContext) -> list[RunRecord]:
    """`vllm bench latency --output-json` or `vllm bench throughput --output-json` -> one record.

    Neither JSON names its model: ``--model`` does (``ctx.model``), else a ``model_id`` key added to the
    file, when the catalog knows it.  Latency JSON does not state its workload: --input-len / --output-len /
    --batch-size supply it, else vLLM's defaults (32 / 128 / 8) are used and ``extra["workload_assumed"]``
    says so.  A latency sample is the wall time of one generate() of the whole batch (prefill + decode), so
    it fills neither prefill_tok_s nor decode_tok_s; ``extra["e2e_output_tok_s"]`` = batch x output_len /
    avg_latency_s.
    """
    if not isinstance(obj, dict):
        raise _err(path, 1, "expected a JSON object from `vllm bench latency|throughput --output-json`")
    row = _base(ctx, git_sha())
    model = ctx.model or _catalog_model(str(obj.get("model_id") or ""), ctx)
    given = {"input_len": ctx.input_len, "output_len": ctx.output_len, "batch_size": ctx.batch_size}
    wl = {k: v if v is not None else VLLM_LATENCY_DEFAULTS[k] for k, v in given.items()}
    extra: dict = {"raw": obj}
    if "avg_latency" in obj or "latencies" in obj:
        lat = obj.get("latencies")
        avg = obj.get("avg_latency")
        if not isinstance(lat, list) or not all(isinstance(x, int | float) for x in lat) or not lat:
            raise _err(path, 1, "'latencies' must be a non-empty list of seconds")
        if not isinstance(avg, int | float) or avg <= 0:
            raise _err(path, 1, "'avg_latency' must be a positive number of seconds")
        extra.update(bench="latency", avg_latency_s=avg, latencies_s=lat,
                     percentiles_s=obj.get("percentiles", {}),
                     e2e_output_tok_s=wl["batch_size"] * wl["output_len"] / avg)  # fmt: skip
        assumed = [k for k, v in given.items() if v is None]
        if assumed:
            extra["workload_assumed"] = f"vllm bench latency defaults for {', '.join(assumed)}"
    elif "tokens_per_second" in obj and "elapsed_time" in obj:
        for k in ("elapsed_time", "tokens_per_second"):
            if not isinstance(obj[k], int | float):
                raise _err(path, 1, f"{k!r} must be a number")
        extra.update(bench="throughput", elapsed_s=obj["elapsed_time"], total_tok_s=obj["tokens_per_second"],
                     requests_per_s=obj.get("requests_per_second"), num_requests=obj.get("num_requests"),
                     total_num_tokens=obj.get("total_num_tokens"))  # fmt: skip
        if ctx.batch_size is None:
            wl["batch_size"] = int(obj.get("num_requests") or 0)
    else:
        raise _err(
            path,
            1,
            "not vLLM bench output: needs avg_latency + latencies, or elapsed_time + tokens_per_second",
        )
    row.update(
        record_id=short_hash({"source": ctx.source, "row": obj, "workload": wl}, 24),
        engine="vllm",
        engine_version="",
        build_info="",
        backend="CPU" if ctx.hardware and ctx.hardware.kind == "cpu" else "",
        model_id=model.hf_id or model.id if model else str(obj.get("model_id", "")),
        model_fingerprint=model_fingerprint(model) if model else "",
        n_layers_real=model.n_layers if model else 0,
        n_layers_measured=model.n_layers if model else 0,
        quant="",
        n_prompt=wl["input_len"],
        n_gen=wl["output_len"],
        n_depth=0,
        batch=wl["batch_size"],
        n_ctx=0,
        kv_dtype="",
        flash_attn=None,
        n_threads=None,
        n_batch=None,
        n_ubatch=None,
        n_gpu_layers=None,
        extra=extra,
    )
    return [_finish(row, path, 1)]


# --- dispatch ------------------------------------------------------------------------------------------
def detect_format(path: Path, text: str) -> tuple[str, str]:
    """(format, variant): ("llama-bench", json|jsonl|csv), ("vllm-bench", "json"), ("published", "csv") or
    ("serving-silicon", "csv")."""
    head = text.lstrip()[:4096]
    if path.suffix.lower() == ".csv" or (head and head[0] not in "[{"):
        first = head.splitlines()[0] if head else ""
        if "metric" in first and "source_url" in first:
            return "published", "csv"
        if "silicon_ttft_ms" in first and "source_url" in first:
            return "serving-silicon", "csv"
        if "avg_ts" in first:
            return "llama-bench", "csv"
        raise _err(
            path, 1, "unrecognized CSV header (not llama-bench, published measurements or serving silicon)"
        )
    if head.startswith("["):
        return "llama-bench", "json"
    first_line = head.splitlines()[0] if head else ""
    if path.suffix.lower() == ".jsonl" or (first_line.strip().endswith("}") and "avg_ts" in first_line):
        return "llama-bench", "jsonl"
    if "avg_latency" in head or "tokens_per_second" in head:
        return "vllm-bench", "json"
    raise _err(path, 1, "unrecognized JSON (neither llama-bench results nor vLLM bench output)")


def import_file(
    path: str | Path, fmt: str = "auto", ctx: ImportContext | None = None
) -> tuple[str, list[RunRecord]]:
    """Parse a whole file; returns (format, records).  Raises ImportFormatError; writes nothing."""
    path = Path(path)
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    data = read_or_raise(path, ImportFormatError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _err(path, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})") from None
    if not text.strip():
        raise _err(path, 1, "empty file")
    ctx = ctx or ImportContext(source=str(path))
    if fmt == "auto":
        detected, variant = detect_format(path, text)
    elif fmt == "llama-bench":
        suffix = path.suffix.lower()
        first = text.lstrip()[:1]
        detected = fmt
        variant = "csv" if suffix == ".csv" or first not in "[{" else "json" if first == "[" else "jsonl"
    else:
        detected, variant = fmt, ""
    if detected == "llama-bench":
        return detected, import_llama_bench(path, text, ctx, variant or "json")
    if detected == "vllm-bench":
        values = _json_values_with_lines(text, path)
        return detected, import_vllm_bench(path, values[0][1], ctx)
    if detected == "serving-silicon":
        return detected, import_serving_silicon(path, text, ctx)
    return detected, import_published(path, text, ctx)
