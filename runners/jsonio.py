"""JSON (de)serialisation of the runner contracts: PointSpec in, Measurement out (stdlib only).

Tuples are written as JSON lists and read back as tuples; unknown or missing keys raise ValueError naming
them,
so a child process never measures a half-understood spec and a parent never reads a half-understood result.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import MISSING, asdict, fields
from pathlib import Path

from runners.base import Measurement, PointSpec, Test


def _check_keys(cls, raw: dict, what: str) -> None:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(raw).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ValueError(f"{what}: unknown key(s): {', '.join(unknown)}")
    missing = sorted(
        f.name
        for f in fields(cls)
        if f.default is MISSING and f.default_factory is MISSING and f.name not in raw
    )
    if missing:
        raise ValueError(f"{what}: missing key(s): {', '.join(missing)}")


def _tupled(cls, raw: dict) -> dict:
    out = dict(raw)
    for f in fields(cls):
        if f.name in out and isinstance(out[f.name], list) and "tuple" in str(f.type):
            out[f.name] = tuple(out[f.name])
    return out


def pointspec_from_dict(raw: dict) -> PointSpec:
    """PointSpec from its JSON object (lists become tuples); ValueError on unknown/missing keys or bad
    values."""
    _check_keys(PointSpec, raw, "point spec")
    spec = PointSpec(**_tupled(PointSpec, raw))
    if not isinstance(spec.n_ctx, int) or spec.n_ctx <= 0:
        raise ValueError(f"point spec: n_ctx must be a positive integer, got {spec.n_ctx!r}")
    for name in ("prompt_lengths", "gen_lengths", "depths", "concurrencies", "serving_concurrencies"):
        values = getattr(spec, name)
        if not all(isinstance(v, int) and v >= 0 for v in values):
            raise ValueError(f"point spec: {name} must be non-negative integers, got {list(values)!r}")
    if not isinstance(spec.repetitions, int) or spec.repetitions < 1:
        raise ValueError(f"point spec: repetitions must be >= 1, got {spec.repetitions!r}")
    if not isinstance(spec.serving_requests_per_client, int) or spec.serving_requests_per_client < 1:
        raise ValueError(
            f"point spec: serving_requests_per_client must be >= 1, got {spec.serving_requests_per_client!r}"
        )
    return spec


def pointspec_to_dict(spec: PointSpec) -> dict:
    return asdict(spec)


def measurement_to_dict(m: Measurement) -> dict:
    return asdict(m)


def measurement_from_dict(raw: dict) -> Measurement:
    """Measurement from JSON (tests: a list of Test objects)."""
    _check_keys(Measurement, raw, "measurement")
    raw = _tupled(Measurement, raw)
    tests = []
    for i, t in enumerate(raw.get("tests", ())):
        _check_keys(Test, t, f"measurement test {i}")
        tests.append(Test(**_tupled(Test, t)))
    raw["tests"] = tuple(tests)
    return Measurement(**raw)


def write_json_atomic(obj, path: str | os.PathLike) -> Path:
    """Write JSON to a temporary file in the target folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
