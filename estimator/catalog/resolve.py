"""Turn a command-line argument into a ModelSpec or HardwareSpec.

``resolve_model(arg)``: a path ending in .gguf -> GGUF loader; an existing file or folder -> config.json
loader;
otherwise a catalog id or Hugging Face id (case-insensitive).  Unknown ids raise SpecError naming the three
closest ids.  ``resolve_hardware(arg, ...)``: a catalog id, or ``custom`` built from the keyword figures.
"""

from __future__ import annotations

import os
from pathlib import Path

from estimator.specs import GIB, HardwareSpec, ModelSpec, SpecError
from estimator.validate import check_number

_KINDS = ("gpu", "unified", "cpu", "npu")


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


def resolve_hardware(
    arg: str,
    *,
    memory_gib: float | None = None,
    bandwidth_gbs: float | None = None,
    tflops: float | None = None,
    family: str | None = None,
    kind: str = "gpu",
    name: str | None = None,
    host_bandwidth_gbs: float | None = None,
) -> HardwareSpec:
    """HardwareSpec from a catalog id, or ``custom`` (needs memory_gib and bandwidth_gbs; tflops optional).

    memory_gib is in GiB (2^30 B), bandwidth_gbs in 10^9 B/s, tflops dense bf16 10^12 FLOP/s.
    """
    s = str(arg).strip()
    if s.lower() != "custom":
        from estimator.catalog.data import get_hardware

        return get_hardware(s)
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
    if kind not in _KINDS:
        raise SpecError(f"unknown hardware kind {kind!r}; one of {', '.join(_KINDS)}")
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
