"""Importer of the normalized published measurements (reference/published/published_measurements.csv).

One record per CSV row; the metric fills exactly one measurement field (GiB -> bytes x 2^30, tokens/s stay
tokens/s); the quality flag, notes and every other column are kept in ``extra``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from estimator.specs import GIB, ModelSpec, SpecError
from harness.import_common import ImportContext, _base, _err, _finish, csv_rows
from harness.provenance import git_sha, model_fingerprint
from harness.records import RunRecord
from harness.store import short_hash

PUBLISHED_COLUMNS = (
    "row_id", "source_url", "source_group", "engine", "backend", "hardware_id", "hardware_name", "n_gpus",
    "model_id", "model_name", "quant", "model_size_gib", "n_prompt", "n_gen", "n_depth", "n_ubatch", "batch",
    "flash_attn", "metric", "value", "unit", "quality", "notes",
)  # fmt: skip
PUBLISHED_QUALITY = ("ok", "legacy", "aggregate", "rounded", "suspect", "approximate")
# published metric -> (RunRecord field, factor to its unit, accepted unit prefix); *_bytes fields are rounded
# to whole bytes, every other field stays a float.
PUBLISHED_METRICS = {
    "pp_tps": ("prefill_tok_s", 1.0, "tokens/s"),
    "tg_tps": ("decode_tok_s", 1.0, ""),  # "tokens/s" or "output tokens/s (aggregate ...)"
    "weights_gib": ("weights_bytes", GIB, "GiB"),
    "kv_gib": ("kv_bytes", GIB, "GiB"),
    "compute_buffer_gib": ("compute_bytes", GIB, "GiB"),
    "total_gib": ("device_total_bytes", GIB, ""),  # some sources say "GB (as reported ...)"; kept in extra
    # serving / offline-batch metrics (published_measurements_2.csv, schema 2 fields)
    "e2e_latency_s": ("e2e_latency_s", 1.0, "s ("),  # wall time of the whole run / request
    "total_tps": ("total_tok_s", 1.0, "tokens/s"),  # (input + output) tokens / wall time
    "output_tps": ("output_tok_s", 1.0, "output tokens/s"),
    "ttft_ms": ("ttft_s", 1e-3, "ms"),  # mean time to first token
    "ttft_s": ("ttft_s", 1.0, "s ("),  # batch latency with output length 1
    "tpot_ms": ("tpot_s", 1e-3, "ms"),
    "itl_ms": ("itl_s", 1e-3, "ms"),
}
_SERVING_METRICS = frozenset({"output_tps", "ttft_ms", "tpot_ms", "itl_ms"})


def _opt_int(value: str, path: Path, line: int, col: str) -> int | None:
    if value.strip() == "":
        return None
    try:
        f = float(value)
    except ValueError:
        raise _err(path, line, f"{col} = {value!r} is not a number") from None
    if not f.is_integer():
        raise _err(path, line, f"{col} = {value!r} is not an integer")
    return int(f)


# published columns stored elsewhere in the record (source, value field, extra keys), not repeated in extra
_PUB_PROMOTED = {"source_url", "notes", "quality", "metric", "unit", "source_group", "value"}


class _Lookups:
    """Cached catalog look-ups: hardware family and model fingerprint by id ("" when unknown), and the catalog
    id of a published device / model name (through the catalog's documented aliases)."""

    def __init__(self, ctx: ImportContext) -> None:
        self.ctx, self.hw, self.models, self.names, self.descs = ctx, {}, {}, {}, {}

    def hardware_id(self, name: str) -> tuple[str, str]:
        """(catalog id, family) of a published device name or id; ("", "") when the catalog has none."""
        return self.hardware_match(name)[:2]

    def hardware_match(self, name: str) -> tuple[str, str, str]:
        """(catalog id, family, how) of a published device name or id: how = "alias" (a catalog id or a
        documented alias, exact) or "name" (the one catalog device the name's tokens name,
        ``ctx.match_hardware_name``: "NVIDIA GeForce RTX 3060 Ti" -> rtx-3060-ti); ("", "", "") when the
        catalog has none or the name fits several devices ("RTX 3080": the 10 or the 12 GB card?)."""
        if name not in self.names:
            found = ("", "", "")
            ways = (("alias", self.ctx.resolve_hardware), ("name", self.ctx.match_hardware_name))
            for how, resolve in ways:
                if not name or resolve is None:
                    continue
                try:
                    spec = resolve(name)
                except (SpecError, KeyError, ValueError):
                    continue
                found = (spec.id, spec.family, how)
                break
            self.names[name] = found
        return self.names[name]

    def model_alias(self, name: str) -> dict | None:
        """The catalog alias entry {alias, quant, note} when ``name`` is an alias of a catalog model."""
        if not name or self.ctx.resolve_model is None:
            return None
        from estimator.catalog.data import model_entry

        try:
            entry = model_entry(name)
        except SpecError:
            return None
        return next((a for a in entry.get("aliases") or () if a["alias"].lower() == name.lower()), None)

    def model_desc(self, name: str, params_b: str) -> tuple[ModelSpec | None, str]:
        """(catalog model, note) of a published model_name that is llama.cpp's description of the model
        ("llama 8B Q4_0", pasted from llama-bench; harness.model_match) with the published parameter count
        in billions where stated (good to half its last digit); (None, "") when the catalog is not at hand or
        the name is no description of one catalog geometry."""
        key = (name, params_b)
        if key not in self.descs:
            found: tuple[ModelSpec | None, str] = (None, "")
            if name and self.ctx.resolve_model is not None:
                from harness.model_match import match_desc

                n_params = tol = None
                if re.fullmatch(r"\d+(\.\d+)?", params_b):
                    n_params = float(params_b) * 1e9
                    tol = 0.51 * 10.0 ** -len(params_b.partition(".")[2]) * 1e9
                try:
                    found = match_desc(name, n_params, tol)
                except SpecError:
                    pass
            self.descs[key] = found
        return self.descs[key]

    def family(self, hw_id: str) -> tuple[str, str]:
        """(family, kind) of a catalog hardware id; ("", "") for an empty id (hardware not stated).
        SpecError for an id the catalog does not know (its message suggests the nearest ids)."""
        if hw_id not in self.hw:
            spec = None
            if hw_id and self.ctx.resolve_hardware is not None:
                try:
                    spec = self.ctx.resolve_hardware(hw_id)
                except (KeyError, ValueError) as exc:  # SpecError is a ValueError
                    self.hw[hw_id] = exc
            if hw_id not in self.hw:
                self.hw[hw_id] = (spec.family, spec.kind) if spec else ("", "")
        found = self.hw[hw_id]
        if isinstance(found, Exception):
            raise SpecError(str(found).splitlines()[0] if str(found) else f"unknown hardware_id {hw_id!r}")
        return found

    def model(self, model_id: str) -> ModelSpec | None:
        if model_id not in self.models:
            spec = None
            if model_id and self.ctx.resolve_model is not None:
                try:
                    spec = self.ctx.resolve_model(model_id)
                except (SpecError, KeyError, ValueError, OSError):
                    spec = None
            self.models[model_id] = spec
        return self.models[model_id]


def _published_flash_attn(value: str, path: Path, line: int) -> bool | None:
    """Published flash_attn cell: "" unstated, else 0 / 1."""
    if value == "":
        return None
    if value not in ("0", "1", "0.0", "1.0"):
        raise _err(path, line, f"flash_attn = {value!r} is not 0, 1 or empty")
    return value.startswith("1")


def published_record(
    r: dict, path: Path, line: int, ctx: ImportContext, look: _Lookups, sha: str
) -> RunRecord:
    """One row of published_measurements.csv -> RunRecord; the metric fills exactly one measurement field."""
    metric = r["metric"].strip()
    if metric not in PUBLISHED_METRICS:
        raise _err(path, line, f"unknown metric {metric!r} (known: {', '.join(PUBLISHED_METRICS)})")
    field_name, factor, unit_prefix = PUBLISHED_METRICS[metric]
    unit = r["unit"].strip()
    if unit_prefix and not unit.startswith(unit_prefix):
        raise _err(path, line, f"metric {metric} has unit {unit!r}, expected {unit_prefix!r}")
    try:
        value = float(r["value"])
    except ValueError:
        raise _err(path, line, f"value {r['value']!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise _err(path, line, f"value {value} is not a finite non-negative number")
    quality = r["quality"].strip()
    if quality not in PUBLISHED_QUALITY:
        raise _err(path, line, f"quality {quality!r} not in {PUBLISHED_QUALITY}")
    if not r["source_url"].strip():
        raise _err(path, line, "empty source_url")
    hw_id, model_id = r["hardware_id"].strip(), r["model_id"].strip()
    mapped: dict = {}
    if not hw_id and r.get("hardware_name", "").strip():  # a device the catalog knows by the published name
        name = r["hardware_name"].strip()
        hw_id, _, how = look.hardware_match(name)
        if how == "alias":
            mapped["hardware_id"] = f"catalog alias of hardware_name {name!r}"
        elif how == "name":
            mapped["hardware_id"] = f"the one catalog device hardware_name {name!r} names (token match)"
    if not model_id and "/" in r.get("model_name", ""):  # model_name is an HF id the catalog resolves
        m = look.model(r["model_name"].strip())
        if m is not None:
            model_id = m.hf_id
            mapped["model_id"] = f"catalog entry of model_name {r['model_name'].strip()!r}"
    elif not model_id and look.model_alias(r.get("model_name", "").strip()) is not None:
        model_id = look.model(r["model_name"].strip()).hf_id
        mapped["model_id"] = f"catalog alias of model_name {r['model_name'].strip()!r}"
    elif not model_id:  # llama-bench's description of the model ("llama 8B Q4_0") and its parameter count
        spec, note = look.model_desc(r.get("model_name", "").strip(), r.get("params_b", "").strip())
        if spec is not None:
            model_id = spec.hf_id or spec.id
            mapped["model_id"] = note
    try:
        family, _ = look.family(hw_id)
    except SpecError as exc:
        raise _err(path, line, f"hardware_id: {exc}") from None
    model = look.model(model_id)
    fa = r["flash_attn"].strip()
    n_ctx_match = re.search(r"n_ctx\s*=\s*(\d+)", r.get("notes", "") + " " + r.get("test", ""))
    ints = {
        c: _opt_int(r[c], path, line, c)
        for c in ("n_gpus", "n_prompt", "n_gen", "n_depth", "n_ubatch", "batch")
    }
    row = _base(ctx, sha)
    row.update(
        record_id=short_hash({"published_row": r["row_id"], "url": r["source_url"], "metric": metric}, 24),
        source=r["source_url"].strip(),
        engine=r["engine"].strip() or "other",
        engine_version="",
        build_info=r.get("engine_raw", "").strip(),
        backend=r["backend"].strip(),
        device_name=r["hardware_name"].strip(),
        hardware_id=hw_id,
        hardware_family=family,
        n_devices=ints["n_gpus"] or 1,
        model_id=model_id,
        model_fingerprint=model_fingerprint(model) if model else "",
        n_layers_real=model.n_layers if model else 0,
        n_layers_measured=model.n_layers if model else 0,
        quant=r["quant"].strip(),
        n_prompt=ints["n_prompt"] or 0,
        n_gen=ints["n_gen"] or 0,
        n_depth=ints["n_depth"] or 0,
        batch=ints["batch"] or 0,  # 0 = not stated (memory rows, saturated serving rows)
        n_ctx=int(n_ctx_match.group(1)) if n_ctx_match else 0,  # 0 = not stated
        kv_dtype="",
        flash_attn=_published_flash_attn(fa, path, line),
        n_threads=None,
        n_batch=None,
        n_ubatch=ints["n_ubatch"],
        n_gpu_layers=None,
        extra={"published": {k: v for k, v in r.items() if v not in ("", None) and k not in _PUB_PROMOTED},
               "quality": quality,
               "notes": r.get("notes", ""), "metric": metric, "unit": unit, "source_group": r["source_group"],
               "unstated": [c for c in ("n_prompt", "n_gen", "n_depth", "batch") if ints[c] is None]},
    )  # fmt: skip
    row["extra"].update(source_file=path.name, source_line=line)  # where the row came from
    if mapped:
        row["extra"]["mapped"] = mapped
    if metric in _SERVING_METRICS and ints["batch"]:
        row["concurrency"] = ints["batch"]  # serving rows: batch = the benchmark's max-concurrency
    row[field_name] = int(round(value * factor)) if field_name.endswith("_bytes") else value * factor
    return _finish(row, path, line)


def import_published(path: Path, text: str, ctx: ImportContext) -> list[RunRecord]:
    look, sha = _Lookups(ctx), git_sha()
    rows = csv_rows(path, text, PUBLISHED_COLUMNS, "the published-measurements CSV")
    return [published_record(r, path, line, ctx, look, sha) for r, line in rows]
