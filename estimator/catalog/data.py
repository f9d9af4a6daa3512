"""Model and hardware catalogs (estimator/data/models.json, hardware.json), parsed lazily and cached.

Built by tools/build_catalog.py from ../shared/reference.  No pandas / numpy here: the report path loads one
JSON
per catalog (a few ms).  Ids are case-insensitive; a model also resolves by its Hugging Face id.

Hardware memory: the source lists marketed GB, which on GDDR / HBM parts is physically binary ("80 GB" = 80
GiB,
reference/hardware.md section 2), so ``memory_bytes = memory_gb * 2**30``.  CPU rows give platform memory.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path

from estimator.specs import GIB, HardwareSpec, ModelSpec, SpecError

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


@lru_cache(maxsize=1)
def _models_raw() -> dict[str, dict]:
    data = json.loads((DATA_DIR / "models.json").read_text())
    return {m["id"]: m for m in data["models"]}


@lru_cache(maxsize=1)
def _model_aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for mid, m in _models_raw().items():
        out[mid.lower()] = mid
        if m.get("hf_id"):
            out.setdefault(m["hf_id"].lower(), mid)
    for mid, m in _models_raw().items():  # ids that name this architecture (tools/catalog/model_aliases.json)
        for a in m.get("aliases") or ():
            out.setdefault(a["alias"].lower(), mid)
    return out


@lru_cache(maxsize=1)
def _hardware_raw() -> dict[str, dict]:
    data = json.loads((DATA_DIR / "hardware.json").read_text())
    return {d["id"]: d for d in data["devices"]}


def model_ids() -> list[str]:
    """All catalog model ids, in catalog order."""
    return list(_models_raw())


def hardware_ids() -> list[str]:
    """All catalog device ids, in catalog order."""
    return list(_hardware_raw())


def nearest(name: str, choices: list[str], n: int = 3) -> list[str]:
    """The ``n`` closest ids (difflib ratio on lower-cased strings)."""
    low = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(name).lower(), list(low), n=n, cutoff=0.0)
    return [low[h] for h in hits]


def model_entry(model_id: str) -> dict:
    """Raw catalog entry (id, hf_id, license, sizable, config, source, reference cross-check fields ...)."""
    key = _model_aliases().get(str(model_id).strip().lower())
    if key is None:
        cands = list(_models_raw()) + [m["hf_id"] for m in _models_raw().values() if m.get("hf_id")]
        raise SpecError(f"unknown model {model_id!r}; closest: {', '.join(nearest(model_id, cands))}")
    return _models_raw()[key]


def is_model_id(arg: str) -> bool:
    return str(arg).strip().lower() in _model_aliases()


@lru_cache(maxsize=256)
def get_model(model_id: str) -> ModelSpec:
    """ModelSpec of a catalog model (short id or HF id); SpecError if unknown or not sizable."""
    from estimator.catalog.hfconfig import spec_from_config

    m = model_entry(model_id)
    if not m["sizable"]:
        raise SpecError(f"model {m['id']!r} is listed but not sizable: {m['unsizable_reason']}")
    notes = tuple(m.get("notes") or ())
    spec = spec_from_config(
        m["config"],
        f"catalog:{m['id']} ({m['config_source']})",
        id=m["id"],
        name=m["name"],
        hf_id=m["hf_id"],
        license=m.get("license"),
        source=m.get("source") or "",
        verified=bool(m.get("verified")),
        published_total_params=m.get("published_total_params"),
        published_active_params=m.get("published_active_params"),
    )
    native = spec.native_dtype
    wq = m.get("weight_quantization")
    if wq in ("fp8", "mxfp4"):
        native = wq
    from dataclasses import replace

    return replace(spec, native_dtype=native, notes=spec.notes + notes)


def all_models(sizable_only: bool = True) -> list[ModelSpec]:
    """Every (sizable) catalog model as a ModelSpec."""
    return [get_model(mid) for mid, m in _models_raw().items() if m["sizable"] or not sizable_only]


@lru_cache(maxsize=1)
def _hardware_aliases() -> dict[str, str]:
    """Lower-cased device id or published name (tools/catalog/hardware_aliases.csv) -> device id."""
    out = {k.lower(): k for k in _hardware_raw()}
    for k, d in _hardware_raw().items():
        for a in d.get("aliases") or ():
            out.setdefault(a["alias"].lower(), k)
    return out


def hardware_entry(hw_id: str) -> dict:
    raw = _hardware_raw()
    key = _hardware_aliases().get(str(hw_id).strip().lower())
    if key is None:
        raise SpecError(f"unknown hardware {hw_id!r}; closest: {', '.join(nearest(hw_id, list(raw)))}")
    return raw[key]


@lru_cache(maxsize=512)
def get_hardware(hw_id: str) -> HardwareSpec:
    """HardwareSpec of a catalog device; SpecError naming the three closest ids when unknown."""
    d = hardware_entry(hw_id)
    mem = d.get("memory_gb")
    return HardwareSpec(
        id=d["id"],
        name=d["name"],
        vendor=d["vendor"],
        family=d["family"],
        kind=d["kind"],
        memory_bytes=int(round(mem * GIB)) if mem else None,
        bandwidth_gbs=d.get("bandwidth_gbs"),
        bf16_tflops=d.get("bf16_tflops"),
        fp8_tflops=d.get("fp8_tflops"),
        int8_tops=d.get("int8_tops"),
        tdp_w=d.get("tdp_w"),
        interconnect_gbs=d.get("interconnect_gbs"),
        price_usd=d.get("price_usd"),
        year=d.get("year"),
        host_bandwidth_gbs=d.get("host_bandwidth_gbs"),
        memory_type=d.get("memory_type"),
        n_dies=int(d.get("n_dies") or 1),
        bandwidth_measured_gbs=d.get("bandwidth_measured_gbs"),
        status=d.get("status") or "unverified",
        source=d.get("source") or "",
    )


def all_hardware() -> list[HardwareSpec]:
    return [get_hardware(h) for h in _hardware_raw()]
