"""Turn a command-line argument into a ModelSpec or HardwareSpec.

``resolve_model(arg)``: a path ending in .gguf -> GGUF loader; an existing file or folder -> config.json
loader; otherwise a catalog id or Hugging Face id (case-insensitive).  Unknown ids raise SpecError naming the
three closest ids.  ``resolve_model_noted`` is the forgiving form the report uses: a name that is not an id
("Qwen/Qwen3-30B-A3B-Instruct-2507") maps to the catalog entry its tokens name, with a note
(``estimator.catalog.names``).

``resolve_hardware(arg, ...)``: a catalog id, or ``custom`` built from the keyword figures; figures given with
a catalog id override the catalog's (and say so in ``HardwareSpec.notes``).  ``forgiving=True`` (the report,
``fit``, the page) also accepts names the catalog id is made of ("4090", "h100 pcie"); the harness keeps exact
ids.  Apple devices get their GPU working set (``estimator.catalog.data.apple_working_set_bytes``).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from estimator.specs import GIB, HardwareSpec, ModelSpec, SpecError
from estimator.validate import check_number

_KINDS = ("gpu", "unified", "cpu", "npu")


def resolve_model_noted(arg: str | Path) -> tuple[ModelSpec, tuple[str, ...]]:
    """(ModelSpec, notes) of a path or a model name; a name that is not a catalog id / HF id / alias maps to
    the entry its tokens name and the note says so.  A repository named that way ("org/name") is that
    repository (``hf_id``: what a launch command serves), in the format its name states
    (``names.stated_format``: "...-FP8" is an FP8 checkpoint, "...-AWQ" an AWQ one), else its entry's."""
    s = str(arg).strip()
    p = Path(s).expanduser()
    if not s or s.lower().endswith(".gguf") or p.is_dir() or p.is_file():
        return resolve_model(arg), ()
    from estimator.catalog.data import as_named, find_model, get_model

    entry, note = find_model(s)
    return as_named(get_model(entry["id"]), s), (note,) if note else ()


def resolve_model(arg: str | Path) -> ModelSpec:
    """ModelSpec from a catalog id, HF id, config.json path or folder, or .gguf path."""
    s = str(arg).strip()
    if not s:
        raise SpecError("empty model argument")
    p = Path(s).expanduser()
    if s.lower().endswith(".gguf"):
        from estimator.catalog.ggufmodel import load_gguf

        return load_gguf(p)
    if p.is_dir() or (p.suffix.lower() == ".json" and os.path.lexists(p)):  # the loader refuses a FIFO
        from estimator.catalog.hfconfig import load_hf_config

        return load_hf_config(p)
    from estimator.catalog.data import get_model

    return get_model(s)


def _known_family(family: str | None) -> str | None:
    """``family`` when it is a family of the hardware catalog (or "custom"); SpecError naming them
    otherwise."""
    if family is None:
        return None
    from estimator.catalog.data import hardware_families

    known = hardware_families()
    if family != "custom" and family not in known:
        raise SpecError(f"unknown hardware family {family!r}; known families: {', '.join(known)}")
    return family


def resolve_hardware(
    arg: str,
    *,
    memory_gib: float | None = None,
    bandwidth_gbs: float | None = None,
    tflops: float | None = None,
    family: str | None = None,
    kind: str | None = None,
    name: str | None = None,
    host_bandwidth_gbs: float | None = None,
    wired_limit_mb: int | None = None,
    forgiving: bool = False,
) -> HardwareSpec:
    """HardwareSpec from a catalog id, or ``custom`` (needs memory_gib and bandwidth_gbs; tflops optional;
    ``kind`` None: the family's kind, ``estimator.catalog.data.family_kind``, else "gpu").

    memory_gib is in GiB (2^30 B), bandwidth_gbs in 10^9 B/s, tflops dense bf16 10^12 FLOP/s; wired_limit_mb
    is an Apple machine's ``iogpu.wired_limit_mb`` (MB = 2^20 B).  With a catalog id the given figures replace
    the catalog's (``override_hardware``).  ``forgiving`` (what a person typed: the report, ``fit``, the page)
    also takes names a catalog id is made of and refuses a family that is not a catalog family, naming them;
    without it (the harness, ``predict`` CSVs) ids are exact and any family is kept.
    """
    s = str(arg).strip()
    if forgiving:  # a person typed it: a family no coefficient set can have is a typo
        family = _known_family(family)
    if any(v is not None and v <= 0 for v in (memory_gib, bandwidth_gbs, tflops)):
        raise SpecError("hardware figures (--memory-gib, --bandwidth-gbs, --tflops) must be positive")
    if wired_limit_mb is not None and wired_limit_mb < 0:
        raise SpecError(f"--wired-limit-mb must be >= 0, got {wired_limit_mb}")
    if s.lower() != "custom":
        from estimator.catalog.data import find_hardware, get_hardware

        note = None
        if forgiving:
            entry, note = find_hardware(s)
            s = entry["id"]
        spec = get_hardware(s)
        spec = override_hardware(spec, memory_gib, bandwidth_gbs, tflops, family, wired_limit_mb)
        return replace(spec, notes=(note, *spec.notes)) if note else spec
    missing = [k for k, v in (("memory_gib", memory_gib), ("bandwidth_gbs", bandwidth_gbs)) if v is None]
    if missing:
        raise SpecError(
            f"--hardware custom needs {' and '.join('--' + m.replace('_', '-') for m in missing)}"
        )
    for key, value in (
        ("memory_gib", memory_gib),
        ("bandwidth_gbs", bandwidth_gbs),
        ("tflops", tflops),
        ("host_bandwidth_gbs", host_bandwidth_gbs),
    ):
        if value is not None:  # finite and inside estimator.validate.BOUNDS (1e308 GiB cannot overflow)
            check_number(value, key, "--" + key.replace("_", "-"))
    if kind is None:  # a CPU family describes a CPU: its GEMM rate and memory pool are not a GPU's
        from estimator.catalog.data import family_kind

        kind = family_kind(family) or "gpu"
    if kind not in _KINDS:
        raise SpecError(f"unknown hardware kind {kind!r}; one of {', '.join(_KINDS)}")
    if wired_limit_mb:
        raise SpecError("--wired-limit-mb applies to Apple devices (a catalog id such as apple-m3-max)")
    return HardwareSpec(
        id="custom",
        name=name or f"custom {memory_gib:g} GiB / {bandwidth_gbs:g} GB/s",
        vendor="custom",
        family=family or "custom",
        kind=kind,
        memory_bytes=int(round(memory_gib * GIB)),
        bandwidth_gbs=float(bandwidth_gbs),
        bf16_tflops=float(tflops) if tflops else None,
        host_bandwidth_gbs=host_bandwidth_gbs or (bandwidth_gbs if kind in ("unified", "cpu") else None),
        status="custom",
        source="user-supplied figures",
    )


def override_hardware(
    spec: HardwareSpec,
    memory_gib: float | None = None,
    bandwidth_gbs: float | None = None,
    tflops: float | None = None,
    family: str | None = None,
    wired_limit_mb: int | None = None,
) -> HardwareSpec:
    """A catalog device with the user's figures in place of the catalog's, each change said in ``notes``.

    Memory re-derives an Apple device's GPU working set; bandwidth also sets the host bandwidth of a unified /
    CPU device (one memory pool); TFLOPS replaces the dense bf16 rate and drops the catalog's FP8 / INT8
    rates (the speed model would prefer them); the catalog's price stays (it is the catalogued part's).
    """
    from estimator.catalog.data import apple_working_set_bytes, is_apple_gpu

    changes: dict = {}
    notes: list[str] = []
    if memory_gib is not None:
        old = (spec.memory_bytes or 0) / GIB
        changes["memory_bytes"] = int(round(memory_gib * GIB))
        notes.append(
            f"memory {memory_gib:g} GiB (--memory-gib) instead of the catalog's {old:g} GiB; the purchase "
            "price is the catalogued part's"
        )
    if bandwidth_gbs is not None:
        changes["bandwidth_gbs"] = float(bandwidth_gbs)
        if spec.kind in ("unified", "cpu"):
            changes["host_bandwidth_gbs"] = float(bandwidth_gbs)
        notes.append(f"bandwidth {bandwidth_gbs:g} GB/s (--bandwidth-gbs) instead of the catalog's "
                     f"{spec.bandwidth_gbs or 0:g} GB/s")  # fmt: skip
    if tflops is not None:
        changes.update(bf16_tflops=float(tflops), fp8_tflops=None, int8_tops=None)
        notes.append(f"{tflops:g} dense bf16 TFLOPS (--tflops) instead of the catalog's "
                     f"{spec.bf16_tflops or 0:g}; its FP8 / INT8 rates are not used")  # fmt: skip
    if family is not None and family != spec.family:
        changes["family"] = family
        notes.append(f"coefficients of family {family} (--family) instead of {spec.family}")
    apple = is_apple_gpu(spec.vendor, spec.kind)
    if wired_limit_mb is not None and not apple:
        raise SpecError(f"--wired-limit-mb applies to Apple devices; {spec.id} is not one")
    if apple and ("memory_bytes" in changes or wired_limit_mb):
        mem = changes.get("memory_bytes", spec.memory_bytes) or 0
        ws = apple_working_set_bytes(mem, wired_limit_mb)
        changes["gpu_working_set_bytes"] = ws
        how = (
            f"iogpu.wired_limit_mb = {wired_limit_mb}" if wired_limit_mb else "macOS's default for its memory"
        )
        notes.append(f"GPU working set {ws / GIB:.1f} GiB ({how})")
    if not changes:
        return spec
    label = ", ".join(
        x
        for x in (
            f"{memory_gib:g} GiB" if memory_gib is not None else "",
            f"{bandwidth_gbs:g} GB/s" if bandwidth_gbs is not None else "",
            f"{tflops:g} TFLOPS" if tflops is not None else "",
        )
        if x
    )
    name = f"{spec.name} ({label})" if label else spec.name
    return replace(spec, name=name, status="overridden", notes=(*spec.notes, *notes), **changes)
