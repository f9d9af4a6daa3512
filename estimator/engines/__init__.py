"""Engine profiles: everything that differs between inference engines lives here, one module per engine.

``get_engine(name)`` returns the profile (``estimator.engines.base.EngineProfile``); ``ENGINES`` is the one
registry, name -> ``"module:attribute"`` of the profile, imported on first use.  Adding an engine is a new
module here plus one line below (docs/ARCHITECTURE.md, "Add an engine").
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

from estimator.specs import QuantSpec, SpecError

if TYPE_CHECKING:
    from estimator.engines.base import EngineProfile

ENGINES: dict[str, str] = {
    "llama.cpp": "estimator.engines.llama_cpp:PROFILE",
    "vllm": "estimator.engines.vllm:PROFILE",
    "sglang": "estimator.engines.sglang:PROFILE",
    "trtllm": "estimator.engines.trtllm:PROFILE",
}


def engine_names() -> tuple[str, ...]:
    """Every engine the estimator sizes, in registry order."""
    return tuple(ENGINES)


@cache
def get_engine(name: str) -> EngineProfile:
    """The profile of engine ``name``; SpecError listing the known engines when unknown."""
    target = ENGINES.get(name)
    if target is None:
        raise SpecError(f"unknown engine {name!r}; one of {', '.join(ENGINES)}")
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def engines_for(quant: QuantSpec) -> tuple[str, ...]:
    """The engines that load weights in ``quant``'s format, in registry order."""
    return tuple(e for e in ENGINES if get_engine(e).runs(quant))


def engines_with_kv(kv_dtype: str) -> tuple[str, ...]:
    """The engines that offer a KV cache of ``kv_dtype``, in registry order."""
    return tuple(e for e in ENGINES if kv_dtype in get_engine(e).kv_dtypes)
