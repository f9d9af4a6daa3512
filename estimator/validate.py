"""The estimator's one validation layer for what comes from outside: numbers, JSON text, model specs, names.

Every boundary — the command line (``estimator.app.cli``), the page's query parameters
(``estimator.app.params``), ``predict`` rows (``estimator.app.predict``), config.json
(``estimator.catalog.hfconfig``), GGUF metadata (``estimator.catalog.ggufmodel``), custom hardware
(``estimator.catalog.resolve``) and the request API (``estimator.report.request``) — checks its input here, so
one table decides what is accepted and every refusal reads the same: one line naming the field (as that
boundary spells it: ``--devices``, ``parameter 'devices'``, ``column 'n_devices'``,
``FILE: num_hidden_layers``) and the value, with the allowed range.  The CLI exits 2 with it, the page answers
400, ``predict`` writes it in the row's ``error`` cell and goes on.  The messages are ``SpecError`` (a
``ValueError``), which every boundary already catches.

What is checked:

* **finite and in range** (``BOUNDS``, ``check_number``, ``parse_number``): NaN and infinities never pass;
  every count has an upper bound (devices <= ``MAX_DEVICES``, context <= ``MAX_CONTEXT`` tokens, ...), so no
  input can make the estimator build a list per device or per token until memory runs out;
* **JSON text** (``parse_json``): NaN / Infinity literals, numbers that overflow a float, integers of more
  than ``MAX_INT_DIGITS`` digits and nesting deeper than ``MAX_JSON_DEPTH`` are refused before anything reads
  the value;
* **model architecture** (``check_model``): every size of a ``ModelSpec`` in range (``MODEL_BOUNDS``) and
  consistent (at least one layer, top-k <= experts, a window for windowed layers, dense layers that exist);
* **names that become paths** (``check_name``): no separators, no ``..``, nothing hidden, bounded length.

This module is pure (no file or network access) and imports only ``estimator.specs``, so every layer above
may use it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, SLIDING, ModelSpec, SpecError

MAX_DEVICES = 1024  # devices in one configuration (the page's limit since it existed)
MAX_CONTEXT = 2**24  # tokens per sequence a workload may ask for (16,777,216; Llama 4 Scout: 10,485,760)
MAX_MODEL_CONTEXT = 2**31 - 1  # a model's own maximum (engines keep positions in int32)
MAX_SEQUENCES = 65536  # concurrent sequences / batch
MAX_LAYERS = 4096
MAX_WIDTH = 2**24  # hidden, FFN and vocabulary widths (elements)
MAX_HEADS = 2**16
MAX_EXPERTS = 2**16
MAX_MEMORY_GIB = 2.0**20  # 1 PiB of device or offloaded memory, GiB
MAX_BYTES = 2**50  # 1 PiB in bytes (the harness's records use the same bound)
MAX_RATE = 1e7  # GB/s or TFLOPS of one device (today's best: ~8,000 GB/s, ~2,500 dense bf16 TFLOPS)
MIN_FIGURE = 1e-3  # smallest custom device figure (GiB, GB/s, TFLOPS): below it every time is ~infinite
MAX_USD = 1e12
MAX_INT_DIGITS = 30  # digits of an integer literal in JSON (2^64 has 20)
MAX_JSON_DEPTH = 64  # nesting of JSON arrays / objects (config.json files use 3)
MAX_TEXT_NUMBER = 100  # characters of a number typed as text


@dataclass(frozen=True)
class Bound:
    """An allowed range: ``lo <= value <= hi`` (``lo < value`` when ``lo_open``); ``integer``: whole numbers
    only."""

    lo: float
    hi: float
    integer: bool = True
    lo_open: bool = False

    def text(self) -> str:
        """'between 1 and 1024' / 'above 0 and at most 1'."""
        lo, hi = _fmt(self.lo), _fmt(self.hi)
        return f"above {lo} and at most {hi}" if self.lo_open else f"between {lo} and {hi}"

    def holds(self, value: float) -> bool:
        return (self.lo < value if self.lo_open else self.lo <= value) and value <= self.hi


def _fmt(x: float) -> str:
    if float(x).is_integer() and abs(x) < 1e16:
        return str(int(x))
    return f"{x:g}"


# One table for every number a user types: the CLI option, the page parameter and the predict column of the
# same quantity share their bound (names: the CLI's spelling without dashes, predict's column names).
BOUNDS: dict[str, Bound] = {
    # workload
    "devices": Bound(1, MAX_DEVICES),
    "ctx": Bound(1, MAX_CONTEXT),
    "concurrency": Bound(1, MAX_SEQUENCES),
    "n_cpu_moe": Bound(0, MAX_LAYERS),
    "offload_gib": Bound(0, MAX_MEMORY_GIB, integer=False),
    "gpu_memory_utilization": Bound(0, 1, integer=False, lo_open=True),
    # a device outside the catalog
    "memory_gib": Bound(MIN_FIGURE, MAX_MEMORY_GIB, integer=False),
    "bandwidth_gbs": Bound(MIN_FIGURE, MAX_RATE, integer=False),
    "tflops": Bound(MIN_FIGURE, MAX_RATE, integer=False),
    "host_bandwidth_gbs": Bound(MIN_FIGURE, MAX_RATE, integer=False),
    "interconnect_gbs": Bound(MIN_FIGURE, MAX_RATE, integer=False),
    "cpu_cores": Bound(1, 100_000),  # a CPU's physical cores
    "cpu_clock_ghz": Bound(MIN_FIGURE, 100, integer=False),  # its maximum clock, 10^9 Hz
    "wired_limit_mb": Bound(1, MAX_MEMORY_GIB * 1024),  # Apple iogpu.wired_limit_mb
    # money and fine-tuning
    "usd_per_hour": Bound(0, 1e6, integer=False),
    "hours_per_day": Bound(0, 24, integer=False),
    "kwh_price": Bound(0, 1e3, integer=False),
    "purchase_usd": Bound(0, MAX_USD, integer=False),
    "ft_rank": Bound(1, MAX_SEQUENCES),
    "ft_seq_len": Bound(1, MAX_CONTEXT),
    "ft_micro_batch": Bound(1, MAX_SEQUENCES),
    # serving: tokens per request and the latency objective (ms)
    "isl": Bound(1, MAX_CONTEXT),
    "osl": Bound(1, MAX_CONTEXT),
    "slo_ttft_ms": Bound(0, 1e9, integer=False, lo_open=True),
    "slo_tpot_ms": Bound(0, 1e9, integer=False, lo_open=True),
    # fit's criteria
    "min_tok_s": Bound(0, MAX_RATE, integer=False),
    "min_headroom_gib": Bound(0, MAX_MEMORY_GIB, integer=False),
    "top": Bound(1, 1_000_000),
    # predict columns (llama-bench semantics)
    "n_devices": Bound(1, MAX_DEVICES),
    "n_prompt": Bound(0, MAX_CONTEXT),
    "n_gen": Bound(0, MAX_CONTEXT),
    "n_depth": Bound(0, MAX_CONTEXT),
    "n_ctx": Bound(1, MAX_CONTEXT),
    "batch": Bound(1, MAX_SEQUENCES),
    "n_batch": Bound(1, MAX_CONTEXT),
    "n_ubatch": Bound(1, MAX_CONTEXT),
    "offload_bytes": Bound(0, MAX_BYTES),
    "moe_offload_layers": Bound(0, MAX_LAYERS),
    "kv_pad": Bound(0, 4096),  # KV cell padding of a llama.cpp build (0 = the current build's own)
}


def bound(name: str) -> Bound:
    """The bound of ``name`` (a key of BOUNDS)."""
    return BOUNDS[name]


def _shown(value: object) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_number(value: object, rule: Bound | str, label: str) -> int | float:
    """``value`` if it is a finite number inside ``rule`` (a Bound or a BOUNDS name), else SpecError naming
    ``label`` and the range.  Booleans are not numbers; for an integer rule a whole float (``512.0``) is
    accepted and returned as ``int``."""
    b = BOUNDS[rule] if isinstance(rule, str) else rule
    kind = "an integer" if b.integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(f"{label} must be {kind} {b.text()}, got {_shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{label} must be {b.text()} (a finite number), got {_shown(value)}")
    if b.integer and isinstance(value, float):
        if not value.is_integer():
            raise SpecError(f"{label} must be a whole number {b.text()}, got {_shown(value)}")
        value = int(value)
    if not b.holds(value):
        raise SpecError(f"{label} must be {b.text()}, got {_shown(value)}")
    return value


def parse_number(text: str, rule: Bound | str, label: str) -> int | float:
    """A number typed as text (an option, a query parameter, a CSV cell), checked by ``check_number``.

    Integers may be written ``512``, ``512.0``, ``1e3`` or ``1_000``; text longer than MAX_TEXT_NUMBER
    characters, and anything ``float`` cannot read, is refused naming ``label``."""
    b = BOUNDS[rule] if isinstance(rule, str) else rule
    raw = str(text).strip().replace("_", "")
    kind = "an integer" if b.integer else "a number"
    if not raw or len(raw) > MAX_TEXT_NUMBER:
        raise SpecError(f"{label} must be {kind} {b.text()}, got {_shown(text)}")
    try:
        value: int | float = int(raw)
    except ValueError:
        try:
            value = float(raw)
        except ValueError:
            raise SpecError(f"{label} must be {kind} {b.text()}, got {_shown(text)}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{label} must be {b.text()} (a finite number), got {_shown(text)}")
    return check_number(value, b, label)


# --- JSON ---------------------------------------------------------------------------------------------------


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _int_literal(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-'))} digits (more than {MAX_INT_DIGITS})")
    return int(text)


def _float_literal(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} overflows a number")
    return value


def json_depth(value: object) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[1]`` is 1), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d + 1)
            stack.extend((x, d + 1) for x in v if isinstance(x, dict | list))
    return deepest


def parse_json(text: str, where: str, max_depth: int = MAX_JSON_DEPTH) -> object:
    """Strict JSON: SpecError (``where: not valid JSON (...)``) for bad syntax, NaN / Infinity, a float that
    overflows, an integer of more than MAX_INT_DIGITS digits, or nesting deeper than ``max_depth``."""
    try:
        value = json.loads(
            text, parse_constant=_no_constant, parse_int=_int_literal, parse_float=_float_literal
        )
    except RecursionError:
        raise SpecError(f"{where}: not valid JSON (nested deeper than {max_depth} levels)") from None
    except ValueError as exc:  # JSONDecodeError and the literal checks above
        raise SpecError(f"{where}: not valid JSON ({' '.join(str(exc).split())})") from None
    if json_depth(value) > max_depth:
        raise SpecError(f"{where}: not valid JSON (nested deeper than {max_depth} levels)")
    return value


# --- key tables of the model loaders (config.json, GGUF metadata) -------------------------------------------

# Ranges the loaders' key tables share: counts of layers, widths, heads, experts, windows in tokens.
COUNT = Bound(0, MAX_LAYERS)
WIDTH = Bound(0, MAX_WIDTH)
HEADS = Bound(0, MAX_HEADS)
EXPERTS = Bound(0, MAX_EXPERTS)
WINDOW = Bound(0, MAX_MODEL_CONTEXT)
NUMBER, PER_LAYER, LIST = "number", "per-layer", "list"  # one number; one or one per layer; a list


def check_fields(values: dict, table: dict[str, tuple[Bound, str]], where: str) -> None:
    """Every key of ``table`` that ``values`` holds (not None) is checked: NUMBER one number in range;
    PER_LAYER that or a non-empty list of at most MAX_LAYERS of them; LIST a list (maybe empty) of them.
    SpecError ``where: key must be ...`` (``where: key[i] ...`` for a list entry) otherwise."""
    for key, (rule, shape) in table.items():
        value = values.get(key)
        if value is None:
            continue
        if isinstance(value, list) and shape in (PER_LAYER, LIST):
            if shape == PER_LAYER and not value:
                raise SpecError(f"{where}: {key} is an empty list")
            if len(value) > MAX_LAYERS:
                raise SpecError(f"{where}: {key} has {len(value)} entries (more than {MAX_LAYERS})")
            for i, v in enumerate(value):
                check_number(v, rule, f"{where}: {key}[{i}]")
        elif shape == LIST:
            raise SpecError(f"{where}: {key} must be a list of integers, got {_shown(value)}")
        else:
            check_number(value, rule, f"{where}: {key}")


# --- model architecture -------------------------------------------------------------------------------------

# ModelSpec field -> its range (an architecture outside these is not a model anyone runs).
MODEL_BOUNDS: dict[str, Bound] = {
    "n_layers": Bound(1, MAX_LAYERS),
    "hidden_size": Bound(1, MAX_WIDTH),
    "n_heads": Bound(0, MAX_HEADS),
    "n_kv_heads": Bound(0, MAX_HEADS),
    "head_dim": Bound(0, MAX_HEADS),
    "intermediate_size": Bound(0, MAX_WIDTH),
    "vocab_size": Bound(1, MAX_WIDTH),
    "max_context": Bound(1, MAX_MODEL_CONTEXT),
    "window": Bound(1, MAX_MODEL_CONTEXT),
    "global_head_dim": Bound(1, MAX_HEADS),
    "global_n_kv_heads": Bound(1, MAX_HEADS),
    "per_layer_input": Bound(0, MAX_HEADS),
    "n_kv_shared_layers": Bound(0, MAX_LAYERS),
    "moe.n_experts": Bound(2, MAX_EXPERTS),
    "moe.n_experts_used": Bound(1, MAX_EXPERTS),
    "moe.expert_ff": Bound(1, MAX_WIDTH),
    "moe.n_shared_experts": Bound(0, MAX_EXPERTS),
    "moe.shared_ff": Bound(0, MAX_WIDTH),
    "moe.latent_size": Bound(0, MAX_WIDTH),
    "mla.kv_lora_rank": Bound(1, MAX_WIDTH),
    "mla.qk_rope_head_dim": Bound(0, MAX_HEADS),
    "mla.qk_nope_head_dim": Bound(0, MAX_HEADS),
    "mla.v_head_dim": Bound(1, MAX_HEADS),
    "mla.q_lora_rank": Bound(1, MAX_WIDTH),
    "state.recurrent_elems": Bound(0, MAX_BYTES),
    "state.conv_elems": Bound(0, MAX_BYTES),
}
_ATTENTION = (FULL, SLIDING, CHUNKED)


def check_model(spec: ModelSpec, where: str) -> ModelSpec:
    """``spec`` if its architecture is in range and consistent, else SpecError naming ``where`` (the file or
    catalog id) and the field.  Consistent: as many layer kinds as layers; heads, KV heads and a head size
    where some layer attends (KV heads at most the heads); a window for sliding / chunked layers; a state
    geometry for linear-attention / SSM layers; top-k at most the experts; dense layers that exist; KV-shared
    layers after at least one layer with its own cache."""
    for name, rule in MODEL_BOUNDS.items():
        part, _, attr = name.rpartition(".")
        holder = getattr(spec, part) if part else spec
        value = getattr(holder, attr) if holder is not None else None
        if value is not None:
            check_number(value, rule, f"{where}: {name}")
    if len(spec.layer_types) != spec.n_layers:
        raise SpecError(f"{where}: {len(spec.layer_types)} layer kinds for {spec.n_layers} layers")
    if any(k in _ATTENTION for k in spec.layer_types):
        for name in ("n_heads", "n_kv_heads", "head_dim"):
            if getattr(spec, name) < 1:
                raise SpecError(f"{where}: {name} must be at least 1 for a model with attention layers, "
                                f"got {getattr(spec, name)}")  # fmt: skip
        if spec.n_kv_heads > spec.n_heads:
            raise SpecError(
                f"{where}: n_kv_heads ({spec.n_kv_heads}) is above the attention heads ({spec.n_heads})"
            )
    if spec.n_kv_shared_layers >= spec.n_layers:
        raise SpecError(
            f"{where}: {spec.n_kv_shared_layers} KV-shared layers leave no layer of the {spec.n_layers} to "
            "share from"
        )
    if any(k in (SLIDING, CHUNKED) for k in spec.layer_types) and not spec.window:
        raise SpecError(f"{where}: sliding or chunked layers without a window size")
    if any(k in (LINEAR, MAMBA) for k in spec.layer_types) and spec.state is None:
        raise SpecError(f"{where}: linear-attention or SSM layers without their state geometry")
    moe = spec.moe
    if moe is not None:
        if moe.n_experts_used > moe.n_experts:
            raise SpecError(
                f"{where}: experts used per token ({moe.n_experts_used}) is above the experts "
                f"({moe.n_experts})"
            )
        if moe.n_shared_experts and not moe.shared_ff:
            raise SpecError(f"{where}: {moe.n_shared_experts} shared expert(s) of width 0")
        bad = [i for i in moe.dense_layers if not 0 <= i < spec.n_layers]
        if bad:
            raise SpecError(f"{where}: dense layer {bad[0]} is not one of the {spec.n_layers} layers")
    return spec


# --- names that become file names ---------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME_CHARS = 100


def check_name(value: object, label: str) -> str:
    """``value`` if it can be used as one file-name component as it is: a string of letters, digits, ``.``,
    ``_`` and ``-`` that starts with a letter or digit, holds no ``..`` and has at most MAX_NAME_CHARS
    characters; SpecError naming ``label`` otherwise (never silently rewritten: two different names must not
    become one file)."""
    if not isinstance(value, str):
        raise SpecError(f"{label} must be a text name, got {_shown(value)}")
    if not value:
        raise SpecError(f"{label} must not be empty")
    if len(value) > MAX_NAME_CHARS or not _NAME.fullmatch(value) or ".." in value:
        raise SpecError(
            f"{label} {_shown(value)} is not a usable name (letters, digits, '.', '_', '-'; starting with a "
            f"letter or digit; no '..'; at most {MAX_NAME_CHARS} characters)"
        )
    return value
