"""Which catalog model a llama.cpp measurement ran, from llama.cpp's own description of the model.

llama-bench names the model it ran twice: ``model_type``, llama.cpp's ``llama_model_desc`` text
"{architecture} {size label} {file type}" ("llama 8B Q4_0", "qwen3moe 30B.A3B Q4_K - Medium"), and
``model_n_params``, the exact parameter count of the GGUF's tensors.  Published tables copy the description
(issue threads paste llama-bench's markdown) and sometimes the count in billions.  The file name
(``model_filename``) is whatever the user called the file.

A description names a catalog model when exactly one *geometry* of the catalog fits it:

* the architecture: the catalog models whose llama.cpp architecture (``harness.synth.GGUF_ARCH``, the
  HF model_type -> ``general.architecture`` map the GGUF writer uses: Mistral and Mixtral are ``llama``) is
  the description's first word;
* the size: an "8x7B" label keeps the MoE models of 8 experts; with a parameter count, the models whose
  tensor inventory (``estimator.physics.weights``) holds that many parameters (within ``tol``: llama-bench's
  count is exact, 0.01 % by default, which parts Mistral 7B v0.3 from v0.1 by its 768 more tokens; a
  published "8.03" B is good to 0.005 B); without one, the models within x0.75 .. x1.35 of the size label
  (llama.cpp's labels are nominal: Gemma's "2B" has 2.51 B parameters, Llama 2's "7B" 6.74 B);
* one geometry: the survivors differ in nothing that sizes a run (``harness.provenance.model_fingerprint``
  with the context limit set aside: Llama 3 8B and Llama 3.1 8B differ only in it).  The entry with the
  longest context stands for its geometry (a run at 16k tokens of depth proves the checkpoint's context is at
  least that), ties in catalog order.

A llama-bench row's file name settles the rest where it names a fit (``_named_by``): which of two
geometries ran ("Mistral-7B-Instruct-v0.2.Q4_0.gguf"), and which entry of one geometry the record takes.

Speed and memory depend on the geometry, not on which fine-tune of it ran, so a record takes that entry's id
and says so (``extra.mapped``).  No match or several geometries: SpecError naming the candidates.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from estimator.specs import ModelSpec, SpecError

# llama.cpp's size label (llm_type_name): "8B", "1.5B", "135M", "30B.A3B", "8x7B", "?B"; the number before
# any ".A" (active) part, times the expert count of an "NxM" label.
_LABEL = re.compile(r"^(?:(\d+)x)?(\d+(?:\.\d+)?)([KMBT])(?:\.A\d+(?:\.\d+)?[KMBT])?$")
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
# How far a nominal size label may be from the parameter count of the checkpoint it labels (x).
LABEL_BAND = (0.75, 1.35)


def parse_desc(desc: str) -> tuple[str, float | None, int, str] | None:
    """("llama", 8e9, 0, "Q4_0") of a llama_model_desc text: architecture, nominal size (None for "?B"),
    expert count of an "8x7B" label (0 otherwise), file type; None when the second word is no size label."""
    parts = desc.strip().split(" ", 2)
    if len(parts) < 2:
        return None
    if parts[1] == "?B":
        size, experts = None, 0
    elif m := _LABEL.match(parts[1]):
        experts = int(m.group(1) or 0)
        size = float(m.group(2)) * _SCALE[m.group(3)] * max(experts, 1)
    else:
        return None
    return parts[0], size, experts, parts[2].strip() if len(parts) > 2 else ""


@lru_cache(maxsize=1)
def _catalog() -> tuple[tuple[ModelSpec, str, int, str], ...]:
    """(spec, llama.cpp architecture, parameter count, geometry key) of every sizable catalog model that
    llama.cpp's GGUF names an architecture for, in catalog order."""
    from estimator.catalog.data import all_models
    from harness.provenance import model_fingerprint
    from harness.synth import gguf_arch

    out = []
    for m in all_models():
        try:
            arch = gguf_arch(m)
        except SpecError:
            continue
        out.append((m, arch, param_count(m), model_fingerprint(replace(m, max_context=0))))
    return tuple(out)


def _named_by(file_name: str, fits: list) -> list:
    """The fits one of whose names (id, HF id, display name) has all its tokens
    (``estimator.catalog.names.tokens``, variant words such as Instruct dropped) among the words of
    ``file_name`` (version numbers kept whole; the quant and extension words are extra and harmless):
    "Meta-Llama-3-8B-Instruct.Q4_0.gguf" names llama-3-8b and not llama-3.1-8b."""
    if not file_name:
        return []
    from estimator.catalog.names import tokens

    have = set(re.findall(r"v?\d+(?:\.\d+)+|[a-z0-9]+", Path(file_name).name.lower()))
    return [c for c in fits if any(set(tokens(n, model=True)) <= have for n in _names(c[0]) if n)]


def _names(m: ModelSpec) -> tuple[str, ...]:
    return (m.id, m.hf_id or "", m.name)


def param_count(model: ModelSpec) -> int:
    """Parameters in ``model``'s GGUF tensors (what llama-bench's model_n_params counts)."""
    from estimator.physics.weights import tensor_inventory

    return sum(t.n_elements for t in tensor_inventory(model))


def match_desc(
    desc: str, n_params: float | None = None, tol: float | None = None, file_name: str = ""
) -> tuple[ModelSpec, str]:
    """(catalog model, note) of the one geometry that llama.cpp description ``desc`` (and ``n_params``
    parameters, +- ``tol``; default 0.01 %: llama-bench's count is exact) names; SpecError when it names
    none or several.  ``file_name`` (llama-bench's model_filename) picks among the fits the entries it names
    (``_named_by``): it settles which of several geometries ran ("Mistral-7B-Instruct-v0.2.Q4_0.gguf") and
    which entry of one geometry the record takes.  The note says how the model was found, for
    ``extra.mapped``."""
    parsed = parse_desc(desc)
    if parsed is None:
        raise SpecError(f"{desc!r} is not a llama.cpp model description ('llama 8B Q4_0')")
    arch, size, experts, _ = parsed
    pool = [c for c in _catalog() if c[1] == arch]
    if not pool:
        raise SpecError(f"no catalog model has llama.cpp architecture {arch!r} ({desc!r})")
    if experts:  # an "8x7B" label (llama.cpp before mid-2024 labelled Mixtral so): MoE models of 8 experts
        pool = [c for c in pool if c[0].moe is not None and c[0].moe.n_experts == experts]
    if n_params is not None and n_params > 0:
        tol = 1e-4 * n_params if tol is None else tol
        fits = [c for c in pool if abs(c[2] - n_params) <= tol]
        how = f"{n_params / 1e9:.2f} B parameters"
    elif size is not None:
        fits = [c for c in pool if LABEL_BAND[0] * size <= c[2] <= LABEL_BAND[1] * size]
        how = "its size label"
    else:
        raise SpecError(f"{desc!r} states no size and no parameter count was given")
    if not fits:
        near = sorted(pool, key=lambda c: abs(c[2] - (n_params or size or 0)))[:3]
        raise SpecError(
            f"no catalog model of llama.cpp architecture {arch!r} has {how} ({desc!r}); nearest: "
            + ", ".join(f"{c[0].id} ({c[2] / 1e9:.2f} B)" for c in near)
        )
    named = _named_by(file_name, fits)
    if named and len({c[3] for c in named}) == 1:
        fits, how = named, f"{how}, file name {Path(file_name).name!r}"
    geometries = {c[3] for c in fits}
    if len(geometries) > 1:
        raise SpecError(
            f"{desc!r} ({how}) fits {len(geometries)} catalog geometries: "
            + ", ".join(f"{c[0].id} ({c[2] / 1e9:.2f} B)" for c in fits)
        )
    best = max(fits, key=lambda c: (c[0].max_context, -fits.index(c)))
    also = [c[0].hf_id or c[0].id for c in fits if c is not best]
    note = (
        f"llama.cpp model description {desc!r} ({how}): the catalog geometry of {best[0].hf_id or best[0].id}"
        + (f" (the same geometry: {', '.join(also)})" if also else "")
    )
    return best[0], note
