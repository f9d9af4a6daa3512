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
from collections import Counter
from functools import lru_cache
from pathlib import Path

from estimator.catalog import names
from estimator.specs import CHECKPOINT_QUANTS, FORMAT_DTYPES, GIB, HardwareSpec, ModelSpec, SpecError

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


def find_model(name: str) -> tuple[dict, str | None]:
    """(catalog entry, note) for a model name: an id, HF id or alias, else the entry its tokens name
    (``estimator.catalog.names``: "Qwen/Qwen3-30B-A3B-Instruct-2507" -> qwen3-30b-a3b).  The note says how a
    name that is not the entry's own id or HF id was mapped (None otherwise).  SpecError when the name is
    ambiguous or unknown (naming the closest ids)."""
    raw = _models_raw()
    entries = [(mid, [mid, m.get("hf_id") or "", m.get("name") or ""]) for mid, m in raw.items()]
    hit = names.match(name, entries, _model_aliases(), "model", model=True)
    if hit is None:
        cands = list(raw) + [m["hf_id"] for m in raw.values() if m.get("hf_id")]
        raise SpecError(f"unknown model {name!r}; closest: {', '.join(nearest(name, cands))}")
    mid, by_tokens = hit
    m = raw[mid]
    label = f"{mid} ({m['name']}" + (f", {m['hf_id']})" if m.get("hf_id") else ")")
    key = str(name).strip().lower()
    if by_tokens:
        fmt = names.stated_format(name)
        return m, (
            f"model {name!r} is not a catalog id: sized as {label}, the base architecture its name points to "
            "(Instruct / chat / dated releases share it; the maximum context is the catalog entry's and a "
            "release may allow more: give its config.json to size that)"
            + (f"; its name states a {fmt} checkpoint" if fmt else "")
        )
    if key not in (mid.lower(), (m.get("hf_id") or "").lower()):
        alias = next((a for a in m.get("aliases") or () if a["alias"].lower() == key), None)
        why = f": {alias['note']}" if alias else ""
        return m, f"model {name!r} is sized as catalog entry {label}{why}"
    return m, None


def model_entry(model_id: str) -> dict:
    """Raw catalog entry (id, hf_id, license, sizable, config, source, reference cross-check fields ...) of an
    exact id, HF id or alias; SpecError naming the closest ids (``find_model`` is the forgiving lookup)."""
    key = _model_aliases().get(str(model_id).strip().lower())
    if key is None:
        cands = list(_models_raw()) + [m["hf_id"] for m in _models_raw().values() if m.get("hf_id")]
        raise SpecError(f"unknown model {model_id!r}; closest: {', '.join(nearest(model_id, cands))}")
    return _models_raw()[key]


def is_model_id(arg: str) -> bool:
    return str(arg).strip().lower() in _model_aliases()


@lru_cache(maxsize=256)
def get_model(model_id: str) -> ModelSpec:
    """ModelSpec of a catalog model (short id, HF id or alias: the entry's own repository and format, see
    ``as_named`` for the repository a user named); SpecError if unknown or not sizable."""
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
    # the checkpoint the entry's hf_id names (tools/catalog/checkpoints.json where the config.json copy behind
    # the geometry is another file's): what a checkpoint engine loads when no format is asked for
    native = spec.native_dtype
    wq = m.get("weight_quantization")
    if wq in CHECKPOINT_QUANTS:
        native = wq
    from dataclasses import replace

    return replace(spec, native_dtype=native, notes=spec.notes + notes)


def as_named(spec: ModelSpec, name: str) -> ModelSpec:
    """The catalog architecture ``spec`` as the repository ``name`` publishes it, for a user who named that
    repository (the report, ``predict``): a catalog alias "org/name" (tools/catalog/model_aliases.json) is
    that repository (``hf_id``) in the format it states (``quant``: NVIDIA's NVFP4 repositories, Qwen's -FP8
    ones; ``native_dtype``), else in the entry's (a dated release such as DeepSeek-V3.1); another "org/name"
    that is not the entry's own id is that repository in the format its name states
    (``names.stated_format``), else in the entry's.  The catalog itself
    (``get_model``, what records and calibration key on) keeps the entry's own repository."""
    from dataclasses import replace

    s = str(name).strip()
    key = s.lower()
    if key in (spec.id.lower(), (spec.hf_id or "").lower()) or "/" not in s:
        return spec
    m = _models_raw()[spec.id]
    alias = next((a for a in m.get("aliases") or () if a["alias"].lower() == key), None)
    if alias is not None:  # a catalog alias: its repository, in the format it states, else the entry's
        native = FORMAT_DTYPES.get(alias.get("quant") or "", spec.native_dtype)
        return replace(spec, hf_id=alias["alias"], native_dtype=native)
    return replace(spec, hf_id=s, native_dtype=names.stated_format(s) or spec.native_dtype)


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


def find_hardware(name: str, full_chip: bool = True) -> tuple[dict, str | None]:
    """(catalog entry, note) for a device name: an id or alias, else the device its tokens name
    (``estimator.catalog.names``: "4090" -> rtx-4090; "h100" is ambiguous and names the H100 variants;
    ``full_chip`` False: "apple m3 max" is ambiguous between its GPU-core bins instead of the full chip).
    SpecError when ambiguous or unknown (naming the closest ids)."""
    raw = _hardware_raw()
    entries = [  # the name with its vendor too: "apple-m4-max" names the MacBook Pro M4 Max
        (hid, [hid, d.get("name") or "", f"{d.get('vendor') or ''} {d.get('name') or ''}",
               *(a["alias"] for a in d.get("aliases") or ())])
        for hid, d in raw.items()
    ]  # fmt: skip
    hit = names.match(name, entries, _hardware_aliases(), "hardware", full_chip=full_chip)
    if hit is None:
        raise SpecError(f"unknown hardware {name!r}; closest: {', '.join(nearest(name, list(raw)))}")
    hid, by_tokens = hit
    note = f"hardware {name!r} is catalog device {hid} ({raw[hid]['name']})" if by_tokens else None
    return raw[hid], note


def hardware_entry(hw_id: str) -> dict:
    """Raw catalog entry of an exact device id or alias; SpecError naming the closest ids (``find_hardware``
    is the forgiving lookup)."""
    raw = _hardware_raw()
    key = _hardware_aliases().get(str(hw_id).strip().lower())
    if key is None:
        raise SpecError(f"unknown hardware {hw_id!r}; closest: {', '.join(nearest(hw_id, list(raw)))}")
    return raw[key]


APPLE_SMALL_RAM_BYTES = 36 * GIB


def apple_working_set_bytes(memory_bytes: int, wired_limit_mb: int | None = None) -> int:
    """The memory an Apple GPU may use (bytes): ``iogpu.wired_limit_mb`` x 2^20 when the user raised it (0 or
    None: the default), else macOS's default Metal working set (``recommendedMaxWorkingSetSize``): about 3/4
    of RAM on machines with more than 36 GiB (a 128 GB Mac reports ~96 GB, a 64 GB one ~48 GB) and about 2/3
    on smaller ones (a 32 GB Mac ~21-24 GB, an 8 GB one ~5.3 GB).  An assumption from users' reports, not an
    Apple specification: https://stencel.io/posts/apple-silicon-limitations-with-usage-on-local-llm%20.html ,
    https://github.com/gpustack/gpustack/issues/1375 ; newer macOS releases report more (~84% of 128 GB).
    """
    if wired_limit_mb:
        return int(wired_limit_mb) * 2**20
    return int(memory_bytes * (2 / 3 if memory_bytes <= APPLE_SMALL_RAM_BYTES else 3 / 4))


def is_apple_gpu(vendor: str | None, kind: str) -> bool:
    """An Apple silicon GPU (unified memory with a Metal working-set limit)."""
    return (vendor or "").lower() == "apple" and kind == "unified"


@lru_cache(maxsize=512)
def get_hardware(hw_id: str) -> HardwareSpec:
    """HardwareSpec of a catalog device; SpecError naming the three closest ids when unknown.  Apple devices
    carry the default GPU working set of their memory (``apple_working_set_bytes``)."""
    d = hardware_entry(hw_id)
    mem = d.get("memory_gb")
    mem_bytes = int(round(mem * GIB)) if mem else None
    apple = is_apple_gpu(d["vendor"], d["kind"]) and mem_bytes
    return HardwareSpec(
        id=d["id"],
        name=d["name"],
        vendor=d["vendor"],
        family=d["family"],
        kind=d["kind"],
        memory_bytes=mem_bytes,
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
        cpu_cores=d.get("cpu_cores"),
        cpu_clock_ghz=d.get("cpu_clock_ghz"),
        cpu_isa=tuple(d.get("cpu_isa") or ()),
        vector_fp16_tflops=d.get("vector_fp16_tflops"),
        status=d.get("status") or "unverified",
        source=d.get("source") or "",
        gpu_working_set_bytes=apple_working_set_bytes(mem_bytes) if apple else None,
    )


def hardware_families() -> list[str]:
    """Every family of the hardware catalog (the calibration's groups), sorted."""
    return sorted({d["family"] for d in _hardware_raw().values()})


def family_kind(family: str | None) -> str | None:
    """The device kind ("gpu" | "unified" | "cpu" | "npu") of a hardware family: the kind of every catalog
    device of that family, the most common one where they differ (nvidia-blackwell: GPUs and the unified
    DGX Spark), a ``cpu-*`` family outside the catalog "cpu"; None when unknown."""
    kinds = Counter(d.get("kind", "gpu") for d in _hardware_raw().values() if d["family"] == family)
    if kinds:
        return kinds.most_common(1)[0][0]
    return "cpu" if family and family.startswith("cpu") else None


def all_hardware() -> list[HardwareSpec]:
    return [get_hardware(h) for h in _hardware_raw()]
