"""Importer of measured serving points at concurrency: reference/published/serving_silicon.csv (S12).

The file is ai-dynamo/aiconfigurator's ``silicon_sample.csv`` (one row per measured configuration; its own
columns).  One RunRecord per row, schema 2 serving fields filled:

* engine = ``backend`` as measured (vllm | sglang | trtllm), engine_version = ``backend_version``,
  build_info = the container image named in ``silicon_data_source``;
* device: ``system`` (h100_sxm, b200_sxm, gb200) -> catalog id through the catalog's device aliases;
* model: ``model_path`` -> catalog entry (directly or through a documented alias, which may also name the
  checkpoint's weight format); the published id stays in ``extra["published"]["model_path"]``;
* quant: ``precision`` fp8 -> FP8 (per-tensor) or FP8-BLOCK when ``gemm_quant_mode`` / ``moe_quant_mode`` say
  fp8_block; fp4 -> NVFP4 (the source: "fp4 = NVFP4"); bf16 -> BF16; empty (and no gemm / moe quant mode)
  -> the checkpoint's own dtype when it is bf16 and ``model_path`` names the catalog model or an alias that
  names no other weight format (vLLM, SGLang and TensorRT-LLM serve a checkpoint in its config.json dtype
  unless asked to quantize; ``extra["quant_note"]`` says it was assumed), else "" (not stated);
* workload: n_prompt = ``isl``, n_gen = ``osl`` (per request), concurrency = ``silicon_concurrency`` of
  ``silicon_data_source`` (the benchmark's request concurrency; ``batch_size`` equals it, or it times the
  attention-DP size, on every row that states both; ``batch_size`` is kept in extra), batch = concurrency;
* layout: agg rows fill tp / pp / attention-dp / moe-tp / moe-ep sizes (a size of 0 in the source = not
  stated); disagg rows keep the prefill_* / decode_* worker layouts in ``extra["disagg"]``;
  n_devices = pp x max(tp, moe_tp x moe_ep) per engine instance (vLLM spells its DP x TP world as
  moe_ep = tp x dp, TensorRT-LLM / SGLang keep attention DP inside tp), summed over the disagg workers;
* request lengths: ``extra["request_lengths"] = "fixed"``: each row is one ISL x OSL configuration of
  equal-length requests (its id says e.g. ``1024x1024``; the SGLang rows' TTFT / TPOT show the lock-step
  cohort that only equal lengths keep, estimator.physics.serving);
* measurements: ttft_s = ``silicon_ttft_ms`` / 1000 and tpot_s = ``silicon_tpot_ms`` / 1000 (means under that
  steady concurrency: TTFT includes queueing behind other requests' prefill);
* timestamp_utc = the ``measured=`` date of ``silicon_data_source`` (else the import's --timestamp).

Every record keeps its source URL (``source``), the file and line (``extra["source_file"]``,
``extra["source_line"]``) and the whole row (``extra["published"]``).  Linear in the number of rows.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from harness.import_common import ImportContext, _base, _err, _finish, csv_rows
from harness.import_published import _Lookups
from harness.provenance import git_sha, model_fingerprint
from harness.records import RunRecord
from harness.store import short_hash

SERVING_COLUMNS = (
    "source_url", "id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
    "precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size",
    "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms",
)  # fmt: skip
SERVING_ENGINES = ("vllm", "sglang", "trtllm")
_LAYOUT = (
    "batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size",
)  # fmt: skip
_PRECISION = {"fp4": "NVFP4", "bf16": "BF16", "": ""}
_IMAGE = re.compile(r"^(?:image=)?([\w.-]+(?:[/#][\w.-]+)+:[\w.-]+)$")


def _num(r: dict, col: str, path: Path, line: int) -> float | None:
    v = (r.get(col) or "").strip()
    if v == "":
        return None
    try:
        f = float(v)
    except ValueError:
        raise _err(path, line, f"{col} = {v!r} is not a number") from None
    if not math.isfinite(f) or f < 0:
        raise _err(path, line, f"{col} = {v!r} is not a finite non-negative number")
    return f


def _size(r: dict, col: str, path: Path, line: int) -> int | None:
    """A parallel size: an integer >= 1, None when blank or 0 (= not stated in this source)."""
    f = _num(r, col, path, line)
    if f is None or f == 0:
        return None
    if not f.is_integer():
        raise _err(path, line, f"{col} = {f} is not an integer")
    return int(f)


def parse_data_source(text: str) -> dict:
    """``silicon_data_source`` "k=v; k=v; image" -> dict (an unkeyed container image becomes ``image``)."""
    out: dict = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if eq and " " not in key:
            out[key.strip()] = value.strip()
        elif _IMAGE.match(part):
            out["image"] = part
        else:
            out.setdefault("other", []).append(part)
    if "image" in out and (m := _IMAGE.match(out["image"])):
        out["image"] = m.group(1)
    return out


def _quant(r: dict, path: Path, line: int) -> str:
    p = r["precision"].strip().lower()
    if p == "fp8":
        modes = {r["gemm_quant_mode"].strip().lower(), r["moe_quant_mode"].strip().lower()}
        return "FP8-BLOCK" if "fp8_block" in modes else "FP8"
    if p not in _PRECISION:
        raise _err(path, line, f"precision {p!r} not one of fp8, fp4, bf16 or empty")
    return _PRECISION[p]


def checkpoint_quant(r: dict, model, alias: dict | None) -> str:
    """The quant of a row whose precision is empty: "BF16" when no gemm / moe quant mode is stated either and
    the checkpoint served is a bf16 catalog model (``model_path`` is its id or an alias naming no other weight
    format); "" otherwise (not stated)."""
    if model is None or r["gemm_quant_mode"].strip() or r["moe_quant_mode"].strip():
        return ""
    if alias is not None and alias.get("quant"):
        return ""
    return "BF16" if model.native_dtype == "bf16" else ""


def _devices(layout: dict) -> int | None:
    """GPUs of one engine instance: pp x max(tp, moe_tp x moe_ep) (see the module doc)."""
    tp, pp = layout.get("tp_size"), layout.get("pp_size") or 1
    moe = (layout.get("moe_tp_size") or 1) * (layout.get("moe_ep_size") or 1)
    if tp is None:
        return None
    return pp * max(tp, moe)


def _layout(r: dict, prefix: str, path: Path, line: int) -> dict:
    return {k: _size(r, prefix + k, path, line) for k in _LAYOUT if prefix + k in r}


def serving_record(
    r: dict, path: Path, line: int, ctx: ImportContext, look: _Lookups, sha: str
) -> RunRecord:
    """One row of serving_silicon.csv -> RunRecord (schema 2 serving fields)."""
    url = r["source_url"].strip()
    if not url:
        raise _err(path, line, "empty source_url")
    engine = r["backend"].strip().lower()
    if engine not in SERVING_ENGINES:
        raise _err(path, line, f"backend {engine!r} not one of {', '.join(SERVING_ENGINES)}")
    mode = r["mode"].strip()
    if mode not in ("agg", "disagg"):
        raise _err(path, line, f"mode {mode!r} is neither agg nor disagg")
    ttft_ms, tpot_ms = _num(r, "silicon_ttft_ms", path, line), _num(r, "silicon_tpot_ms", path, line)
    if not ttft_ms or not tpot_ms:
        raise _err(path, line, "silicon_ttft_ms and silicon_tpot_ms must be positive numbers of milliseconds")
    isl, osl = _size(r, "isl", path, line), _size(r, "osl", path, line)
    if not isl or not osl:
        raise _err(path, line, "isl and osl must be positive token counts")
    src = parse_data_source(r["silicon_data_source"])
    conc_text = src.get("silicon_concurrency")
    batch_size = _num(r, "batch_size", path, line)
    if conc_text is not None:
        if not conc_text.isdigit() or int(conc_text) < 1:
            raise _err(path, line, f"silicon_concurrency = {conc_text!r} is not a positive integer")
        concurrency: int | None = int(conc_text)
    else:  # no silicon_concurrency: the agg batch size is the concurrency (the source's column meaning)
        concurrency = int(batch_size) if batch_size and mode == "agg" else None
    system = r["system"].strip()
    hw_id, family = look.hardware_id(system)
    model = look.model(r["model_path"].strip())
    alias = look.model_alias(r["model_path"].strip())
    quant = _quant(r, path, line)
    assumed = "" if quant else checkpoint_quant(r, model, alias)
    agg = _layout(r, "", path, line) if mode == "agg" else {}
    extra: dict = {
        "source_file": path.name, "source_line": line, "quality": "ok", "metric": "serving",
        "published": {k: v for k, v in r.items() if v not in ("", None) and k != "source_url"},
        "silicon_data_source": src, "batch_size": batch_size, "request_lengths": "fixed",
        "notes": "TTFT / TPOT are means under steady concurrency; TTFT includes queueing behind other "
                 "requests' prefill. KV-cache dtype not stated.",
    }  # fmt: skip
    if mode == "disagg":
        workers = {ph: _layout(r, f"{ph}_", path, line) for ph in ("prefill", "decode")}
        extra["disagg"] = workers
        per = {ph: _devices(w) for ph, w in workers.items()}
        n_dev = sum((w.get("num_workers") or 1) * (per[ph] or 1) for ph, w in workers.items())
        if any(w.get("num_workers") is None for w in workers.values()) or None in per.values():
            extra["n_devices_note"] = "worker counts or sizes not all stated: 1 worker / 1 GPU assumed there"
    else:
        n_dev = _devices(agg) or 1
    if alias is not None:
        extra["model_alias"] = alias
    if assumed:
        quant = assumed
        extra["quant_note"] = (
            f"precision not stated in the source: the checkpoint's own dtype ({assumed}) assumed (an engine "
            "serves a checkpoint in its config.json dtype unless asked to quantize)"
        )
        extra["quant_assumed"] = True
    elif not r["precision"].strip():
        extra["quant_note"] = "precision not stated in the source"
    if hw_id == "":
        extra["hardware_note"] = f"system {system!r} has no catalog device"
    row = _base(ctx, sha)
    measured = src.get("measured", "")
    row.update(
        record_id=short_hash({"serving_silicon_id": r["id"], "url": url}, 24),
        timestamp_utc=_iso(measured) or row["timestamp_utc"],
        source=url,
        engine=engine,
        engine_version=r["backend_version"].strip(),
        build_info=src.get("image", ""),
        backend="CUDA",
        device_name=system,
        hardware_id=hw_id,
        hardware_family=family,
        n_devices=n_dev,
        model_id=model.hf_id if model else r["model_path"].strip(),
        model_fingerprint=model_fingerprint(model) if model else "",
        n_layers_real=model.n_layers if model else 0,
        n_layers_measured=model.n_layers if model else 0,
        quant=quant,
        n_prompt=isl,
        n_gen=osl,
        n_depth=0,
        batch=concurrency or 0,
        n_ctx=0,
        kv_dtype="",
        flash_attn=None,
        n_threads=None,
        n_batch=None,
        n_ubatch=None,
        n_gpu_layers=None,
        concurrency=concurrency,
        serving_mode=mode,
        tp_size=agg.get("tp_size"),
        pp_size=agg.get("pp_size"),
        dp_size=agg.get("attention_dp_size"),
        ep_size=agg.get("moe_ep_size"),
        moe_tp_size=agg.get("moe_tp_size"),
        ttft_s=ttft_ms / 1000.0,
        tpot_s=tpot_ms / 1000.0,
        extra=extra,
    )
    return _finish(row, path, line)


def _iso(measured: str) -> str:
    """"2026-04-22T00:00:00.000Z" -> "2026-04-22T00:00:00Z"; a bare date "2026-03-17" (some rows give only the
    day) -> "2026-03-17T00:00:00Z"; "" stays ""."""
    text = re.sub(r"\.\d+Z$", "Z", measured.strip())
    return f"{text}T00:00:00Z" if re.fullmatch(r"\d{4}-\d\d-\d\d", text) else text


def import_serving_silicon(path: Path, text: str, ctx: ImportContext) -> list[RunRecord]:
    look, sha = _Lookups(ctx), git_sha()
    rows = csv_rows(path, text, SERVING_COLUMNS, "aiconfigurator's silicon_sample CSV")
    return [serving_record(r, path, line, ctx, look, sha) for r, line in rows]
