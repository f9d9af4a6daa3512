"""Sweep plans: a TOML file -> validated points, checked before anything runs.

Format (see docs/harness.md for a full example)::

    name = "cpu-quick"            # default: the file stem
    description = "..."
    timeout_s = 300               # per point (child process wall time)
    build_timeout_s = 1800        # per synthetic model build

    [[sweep]]                     # one or more grids; top-level axis keys are defaults for every [[sweep]]
    engines = ["llama.cpp"]
    models = ["Qwen/Qwen3-0.6B", { id = "Qwen/Qwen3-30B-A3B", layers = 2 }]
    quants = ["Q8_0", "Q4_K_M"]
    layers = 4                    # depth-reduced proxy (same widths, K layers); 0 or absent = real depth
    contexts = [1024]             # n_ctx per sequence
    prompt_lengths = [128, 512]   # prefill tests pp{n}; [] with gen_lengths = [] = a memory-only point,
                                  # [] alone = decode tests only
    gen_lengths = [32]            # decode tests tg{n}
    depths = [0, 512]             # tokens already in the KV cache
    concurrencies = [1]           # batched decode (vLLM)
    serving_concurrencies = []    # serving tests (vLLM): C clients in a closed loop, ISL x OSL = prompt x gen
    serving_requests_per_client = 4
    repetitions = 3
    kv_dtypes = ["f16"]
    flash_attn = [false]
    threads = [2]                 # 0 = the runner's default
    n_batch = 2048
    n_ubatch = 512
    n_gpu_layers = -1
    engine_options = { }          # passed to the runner untouched
    device_kinds = ["H100"]       # where it runs (Ray executor): nodes with resource accelerator_type:H100;
                                  # absent = any node.  A list is an axis: one point per kind
    gpus = 1                      # GPUs the point needs (Ray num_gpus); 0 = none (CPU points)

A point is one engine x model x quant x context x kv dtype x flash-attn x threads (x device kind)
combination; it carries the lists of prompt lengths, gen lengths, depths and concurrencies, measured by one
child process.  ``device_kinds`` and ``gpus`` say where a point may run and what it holds while it runs: the
Ray executor turns them into task resources (harness.executors.ray_cluster); the local executor measures every
point on this machine whatever they say.
Unknown engines, models, quants or keys raise PlanError naming the entry (and the nearest ids) before any run.
So do (issue 14) a ``name`` that could not be a file name as it is (``estimator.validate.check_name``: no
separators, no ``..``; it names the records file under results/runs), a scalar where a list is expected, an
engine option no engine of the group reads (``runners.base.ENGINE_OPTIONS``) or of the wrong type, a timeout
that is not a finite number of seconds up to ``MAX_TIMEOUT_S``, a count outside ``PLAN_BOUNDS`` (repetitions,
threads, batch sizes, lengths) and a context above the model's own maximum.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path

from estimator.engines import engines_for, get_engine
from estimator.specs import ModelSpec, QuantSpec, SpecError
from estimator.validate import MAX_CONTEXT, MAX_LAYERS, MAX_SEQUENCES, check_name
from runners.base import ENGINE_OPTIONS, REGISTRY, PointSpec

KV_DTYPES = ("f16", "bf16", "f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "fp8", "auto")

_LIST_INT = ("contexts", "prompt_lengths", "gen_lengths", "depths", "concurrencies", "serving_concurrencies")
# both prompt and gen lengths empty: a memory-only point; no serving concurrencies: no serving tests
_MAY_BE_EMPTY = ("prompt_lengths", "gen_lengths", "serving_concurrencies")
_AXIS_KEYS = {
    "engines", "models", "quants", "layers", "contexts", "prompt_lengths", "gen_lengths", "depths",
    "concurrencies", "repetitions", "kv_dtypes", "flash_attn", "threads", "n_batch", "n_ubatch",
    "n_gpu_layers", "engine_options", "timeout_s", "seed", "device_kinds", "gpus", "serving_concurrencies",
    "serving_requests_per_client",
}  # fmt: skip
_TOP_KEYS = _AXIS_KEYS | {"name", "description", "build_timeout_s", "sweep"}
_DEFAULTS: dict = {
    "layers": 0,
    "contexts": [2048],
    "prompt_lengths": [512],
    "gen_lengths": [128],
    "depths": [0],
    "concurrencies": [1],
    "repetitions": 3,
    "kv_dtypes": ["f16"],
    "flash_attn": [False],
    "threads": [0],
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_gpu_layers": -1,
    "engine_options": {},
    "timeout_s": 600,
    "seed": 0,
    "serving_concurrencies": [],
    "serving_requests_per_client": 4,
    "device_kinds": [""],
    "gpus": 0,
}
# a device kind names a Ray resource (accelerator_type:<kind>): letters, digits, '.', '_', '-'
_DEVICE_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


# PointSpec fields added after points were first recorded (serving tests, records schema 2): at their default
# they stay out of a point's key (PlannedPoint.key_body), so the keys of older records still match.
KEY_FIELDS_ADDED = ("serving_concurrencies", "serving_requests_per_client")
_SPEC_DEFAULTS = {
    f.name: list(f.default) if isinstance(f.default, tuple) else f.default
    for f in dataclasses.fields(PointSpec)
    if f.name in KEY_FIELDS_ADDED
}
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a point or a model build that needs more than a week is a mistake
# Upper bounds of the plan's counts (lower bounds are checked where each is read).
PLAN_BOUNDS: dict[str, int] = {
    "contexts": MAX_CONTEXT,
    "prompt_lengths": MAX_CONTEXT,
    "gen_lengths": MAX_CONTEXT,
    "depths": MAX_CONTEXT,
    "concurrencies": MAX_SEQUENCES,
    "serving_concurrencies": MAX_SEQUENCES,
    "serving_requests_per_client": 100_000,
    "repetitions": 1000,
    "threads": 4096,
    "n_batch": MAX_CONTEXT,
    "n_ubatch": MAX_CONTEXT,
    "n_gpu_layers": MAX_LAYERS,
    "seed": 2**32 - 1,
    "layers": MAX_LAYERS,
}


class PlanError(ValueError):
    """A plan that cannot run; the message names the file and the entry."""


@dataclass(frozen=True)
class Catalog:
    """Where plan entries are checked: model / quant resolvers and the known engines."""

    resolve_model: Callable[[str], ModelSpec]
    get_quant: Callable[[str], QuantSpec]
    engines: tuple[str, ...] = tuple(REGISTRY)


def default_catalog() -> Catalog:
    """The estimator's catalog (estimator.catalog.resolve.resolve_model,
    estimator.physics.quant.get_quant)."""
    try:
        from estimator.catalog.resolve import resolve_model
        from estimator.physics.quant import get_quant
    except ImportError as exc:
        raise PlanError(
            f"the estimator catalog is not available ({exc}); cannot check plan entries"
        ) from None
    return Catalog(resolve_model=resolve_model, get_quant=get_quant)


@dataclass(frozen=True)
class PlannedPoint:
    """One point of a plan.  ``spec.model_path`` is empty until the sweep builds the model file."""

    index: int
    group: int
    engine: str
    model_ref: str  # as written in the plan
    model: ModelSpec  # the real model (full depth)
    quant: str
    n_layers: int  # layers built and measured (== model.n_layers when not depth-reduced)
    spec: PointSpec
    timeout_s: float
    device_kind: str = ""  # node kind the point must run on ("" = any); see harness.executors.ray_cluster
    gpus: float = 0  # GPUs the point holds while it runs (Ray num_gpus)

    @property
    def label(self) -> str:
        s = self.spec
        depth = "" if self.n_layers == self.model.n_layers else f" L{self.n_layers}/{self.model.n_layers}"
        where = f" @{self.device_kind}" if self.device_kind else ""
        return (
            f"{self.engine} {self.model.id}{depth} {self.quant} "
            f"ctx{s.n_ctx} kv={s.kv_dtype} fa={int(s.flash_attn)}{where}"
        )

    def key_body(self, fingerprint: str) -> dict:
        """What identifies the point (without host / engine version, which harness.store.point_key adds).
        The device kind and GPU count enter only when set, and the PointSpec fields of KEY_FIELDS_ADDED only
        when not at their default, so points of plans without them keep their keys (``--resume`` skips what
        an older fitbench recorded)."""
        from harness.provenance import spec_to_dict

        spec = spec_to_dict(replace(self.spec, model_path=""))
        for name in KEY_FIELDS_ADDED:
            if spec.get(name) == _SPEC_DEFAULTS[name]:
                del spec[name]
        body = {
            "model_id": self.model.id,
            "fingerprint": fingerprint,
            "quant": self.quant,
            "n_layers": self.n_layers,
            "spec": spec,
        }
        if self.device_kind:
            body["device_kind"] = self.device_kind
        if self.gpus:
            body["gpus"] = self.gpus
        return body


@dataclass(frozen=True)
class Plan:
    name: str
    description: str
    path: str
    sha256: str
    build_timeout_s: float
    points: tuple[PlannedPoint, ...] = field(default_factory=tuple)

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.engine for p in self.points))


def with_engine_options(plan: Plan, engine: str, options: dict) -> Plan:
    """``plan`` with ``options`` added to the ``engine_options`` of every point of ``engine`` (over the plan's
    own): ``python -m harness measure --engine-option ENGINE:KEY=VALUE``, for a setting one host needs and the
    plan's other hosts do not (llama.cpp's ``repack = false`` where its AMX buffer crashes,
    estimator.engines.llama_cpp).  The options are checked as the plan's are; they are part of each point's
    spec, so of its key and its records (``extra.engine_options``)."""
    where = f"--engine-option {engine}"
    if engine not in REGISTRY:
        raise PlanError(f"{where}: unknown engine{_nearest(engine, REGISTRY)}")
    _check_engine_options(options, [engine], where)
    if engine not in plan.engines:
        raise PlanError(
            f"{where}: plan {plan.name} has no {engine} point (engines: {', '.join(plan.engines)})"
        )
    points = tuple(
        replace(p, spec=replace(p.spec, engine_options={**p.spec.engine_options, **options}))
        if p.engine == engine
        else p
        for p in plan.points
    )
    return replace(plan, points=points)


def _nearest(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    near = difflib.get_close_matches(word, sorted(choices), n=3, cutoff=0.5)
    return f" (nearest: {', '.join(near)})" if near else ""


def _as_list(value: object, where: str, may_be_empty: bool = False) -> list:
    if not isinstance(value, list):
        raise PlanError(f"{where}: expected a list (write [{value!r}]), got {value!r}")
    if not value and not may_be_empty:
        raise PlanError(f"{where}: empty list")
    return value


def _int(value: object, where: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{where}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise PlanError(f"{where}: must be >= {minimum}, got {value}")
    key = where.rsplit(".", 1)[-1].split("[", 1)[0]
    if key in PLAN_BOUNDS and value > PLAN_BOUNDS[key]:
        raise PlanError(f"{where}: must be <= {PLAN_BOUNDS[key]}, got {value}")
    return value


def _seconds(value: object, where: str) -> float:
    """A finite, positive number of seconds up to MAX_TIMEOUT_S."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_TIMEOUT_S  # also refuses nan and inf
    ):
        raise PlanError(
            f"{where}: expected a positive number of seconds up to {MAX_TIMEOUT_S:g}, got {value!r}"
        )
    return float(value)


def _check_engine_options(options: object, engines: list[str], where: str) -> dict:
    """The group's ``engine_options``: a table whose every option is read by one of ``engines`` (their
    ``runners.base.ENGINE_OPTIONS``) and has that option's type (finite, non-negative numbers).  Not checked
    when ``$FITBENCH_RUNNER_CMD`` replaces the runners (a test double reads options of its own)."""
    if not isinstance(options, dict):
        raise PlanError(f"{where}: expected a table")
    if os.environ.get("FITBENCH_RUNNER_CMD"):  # the sweep's test hook swaps our runners for another program,
        return options  # whose options are its own (harness.sweep)
    known = {k: t for e in engines for k, t in ENGINE_OPTIONS.get(e, {}).items()}
    for key, value in options.items():
        if key not in known:
            raise PlanError(
                f"{where}.{key}: no engine of this sweep ({', '.join(engines)}) reads this option"
                f"{_nearest(key, known)}"
            )
        kind = known[key]
        ok = (
            isinstance(value, bool)
            if kind is bool
            else isinstance(value, str)
            if kind is str
            else (
                not isinstance(value, bool)
                and isinstance(value, int if kind is int else int | float)
                and math.isfinite(value)
                and value >= 0
            )
        )
        if not ok:
            raise PlanError(f"{where}.{key}: expected {kind.__name__}, got {value!r}")
    return options


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise PlanError(f"{where}: unknown key {key!r}{_nearest(key, allowed)}")


def _resolve_model_ref(ref: str, plan_dir: Path, catalog: Catalog, where: str) -> ModelSpec:
    candidate = Path(ref)
    if not candidate.is_absolute() and not candidate.exists() and (plan_dir / ref).exists():
        ref = str(plan_dir / ref)
    try:
        return catalog.resolve_model(ref)
    except (SpecError, KeyError, FileNotFoundError, ValueError) as exc:
        raise PlanError(f"{where} {ref!r}: {exc}") from None


def _check_buildable(engine: str, model: ModelSpec, n_layers: int, where: str) -> None:
    """The synthetic-model builder must know the architecture: a GGUF writer for an engine that loads GGUF, a
    config.json of that depth for vLLM's dummy load (``harness.synth.hf_config``: e.g. a Gemma 4 proxy must
    end on a full layer)."""
    try:
        from harness.synth import gguf_arch, hf_config
    except ImportError:  # builder not installed: the build step will report it per point
        return
    try:
        if get_engine(engine).container == "gguf":
            gguf_arch(model)
        elif engine == "vllm":
            hf_config(model, n_layers)
    except SpecError as exc:
        what = "a synthetic GGUF for llama.cpp" if engine != "vllm" else "a config.json for vLLM's dummy load"
        raise PlanError(f"{where}: cannot build {what}: {exc}") from None


def _expand_group(g: dict, gi: int, plan_dir: Path, catalog: Catalog, start: int) -> list[PlannedPoint]:
    w = f"sweep[{gi}]"
    engines = [str(e) for e in _as_list(g.get("engines"), f"{w}.engines")] if "engines" in g else None
    if not engines:
        raise PlanError(f"{w}: no engines")
    for i, e in enumerate(engines):
        if e not in catalog.engines:
            raise PlanError(f"{w}.engines[{i}] {e!r}: unknown engine{_nearest(e, catalog.engines)}")
    if "models" not in g:
        raise PlanError(f"{w}: no models")
    if "quants" not in g:
        raise PlanError(f"{w}: no quants")
    default_layers = _int(g["layers"], f"{w}.layers", 0)
    models: list[tuple[str, ModelSpec, int]] = []
    for i, entry in enumerate(_as_list(g["models"], f"{w}.models")):
        mw = f"{w}.models[{i}]"
        layers = default_layers
        if isinstance(entry, dict):
            _check_keys(entry, {"id", "layers"}, mw)
            if "id" not in entry:
                raise PlanError(f"{mw}: a model table needs an 'id'")
            layers = _int(entry.get("layers", default_layers), f"{mw}.layers", 0)
            entry = entry["id"]
        if not isinstance(entry, str):
            raise PlanError(f"{mw}: expected a model id or {{id=..., layers=...}}, got {entry!r}")
        model = _resolve_model_ref(entry, plan_dir, catalog, mw)
        n = model.n_layers if layers in (0, None) else layers
        if n > model.n_layers:
            raise PlanError(f"{mw} {entry!r}: layers = {n} but the model has only {model.n_layers}")
        models.append((entry, model, n))
    quants = [str(q) for q in _as_list(g["quants"], f"{w}.quants")]
    quant_specs = {}
    for i, q in enumerate(quants):
        try:
            quant_specs[q] = catalog.get_quant(q)
        except (SpecError, KeyError, ValueError) as exc:
            raise PlanError(f"{w}.quants[{i}] {q!r}: {exc}") from None
    lists = {
        k: [_int(v, f"{w}.{k}[{i}]", 0) for i, v in enumerate(_as_list(g[k], f"{w}.{k}", k in _MAY_BE_EMPTY))]
        for k in _LIST_INT
    }
    lists.setdefault("serving_concurrencies", [])
    for k in ("contexts", "prompt_lengths", "gen_lengths", "concurrencies", "serving_concurrencies"):
        for i, v in enumerate(lists[k]):
            _int(v, f"{w}.{k}[{i}]", 1)
    serving_reqs = _int(g["serving_requests_per_client"], f"{w}.serving_requests_per_client", 1)
    if lists["serving_concurrencies"]:
        not_vllm = [e for e in engines if e != "vllm"]
        if not_vllm:
            raise PlanError(
                f"{w}.serving_concurrencies: serving tests need the vllm runner, not {not_vllm[0]}"
            )
        if not lists["prompt_lengths"] or not lists["gen_lengths"]:
            raise PlanError(f"{w}.serving_concurrencies: serving tests need prompt_lengths and gen_lengths")
        for i, ctx in enumerate(lists["contexts"]):
            if ctx < max(lists["prompt_lengths"]) + max(lists["gen_lengths"]):
                raise PlanError(
                    f"{w}.contexts[{i}] = {ctx}: smaller than a serving request (max prompt + max gen length)"
                )
    kv_dtypes = [str(k) for k in _as_list(g["kv_dtypes"], f"{w}.kv_dtypes")]
    for i, k in enumerate(kv_dtypes):
        if k not in KV_DTYPES:
            raise PlanError(f"{w}.kv_dtypes[{i}] {k!r}: unknown KV dtype{_nearest(k, KV_DTYPES)}")
    fas = _as_list(g["flash_attn"], f"{w}.flash_attn")
    if not all(isinstance(f, bool) for f in fas):
        raise PlanError(f"{w}.flash_attn: expected true/false values, got {fas!r}")
    threads = [_int(t, f"{w}.threads[{i}]", 0) for i, t in enumerate(_as_list(g["threads"], f"{w}.threads"))]
    reps = _int(g["repetitions"], f"{w}.repetitions", 1)
    timeout = _seconds(g["timeout_s"], f"{w}.timeout_s")
    _check_engine_options(g["engine_options"], engines, f"{w}.engine_options")
    # both empty: a memory-only point; one empty: a decode-only (or prefill-only) point, e.g. decode where a
    # build's prompt path cannot run (plans/cpu-amx-decode.toml)
    memory_only = not lists["prompt_lengths"] and not lists["gen_lengths"]
    if g["engine_options"].get("no_alloc") is True:  # llama.cpp's memory-fit pass: data-less F16 files
        if not memory_only:
            raise PlanError(f"{w}.engine_options.no_alloc: only for memory-only points (no lengths)")
        bad = [q for q in quants if str(q).upper() not in ("F16", "BF16")]
        if bad:
            raise PlanError(
                f"{w}.engine_options.no_alloc: the memory-fit pass reads no weight, so its file is F16 "
                f'(quants = ["F16"]), not {bad}'
            )
    if not lists["depths"]:
        raise PlanError(f"{w}.depths: needs at least one depth (0)")
    lengths = [*lists["prompt_lengths"], *lists["gen_lengths"], 0]
    need = max(lists["depths"]) + max(lengths)
    kinds = [str(k) for k in _as_list(g["device_kinds"], f"{w}.device_kinds")]
    for i, k in enumerate(kinds):
        if k and not _DEVICE_KIND.fullmatch(k):
            raise PlanError(f"{w}.device_kinds[{i}] {k!r}: use letters, digits, '.', '_' and '-' (e.g. H100)")
    gpus = g["gpus"]
    number = not isinstance(gpus, bool) and isinstance(gpus, int | float)
    if not number or not math.isfinite(gpus) or not 0 <= gpus <= 1024:
        raise PlanError(f"{w}.gpus: expected a number of GPUs between 0 and 1024, got {gpus!r}")
    for i, ctx in enumerate(lists["contexts"]):
        if ctx < need:
            raise PlanError(
                f"{w}.contexts[{i}] = {ctx}: smaller than max depth + max(prompt, gen) length = {need}"
            )
        for ref, model, _ in models:
            if ctx > model.max_context:
                raise PlanError(
                    f"{w}.contexts[{i}] = {ctx}: above {ref}'s maximum context of {model.max_context} tokens"
                )

    points = []
    for engine, (ref, model, n_layers), q, kind in product(engines, models, quants, kinds):
        _check_buildable(engine, model, n_layers, f"{w}.models {ref!r}")
        qspec = quant_specs[q]
        profile = get_engine(engine)
        if not profile.runs(qspec):
            raise PlanError(
                f"{w}.quants {q!r}: not available for engine {engine} "
                f"(engines: {', '.join(engines_for(qspec))})"
            )
        for i, k in enumerate(kv_dtypes):
            if not profile.accepts_kv(k):
                known = ", ".join(profile.kv_flags)
                raise PlanError(
                    f"{w}.kv_dtypes[{i}] {k!r}: {profile.label} has no {k} KV cache (one of {known})"
                )
        # an engine that picks its own attention backend (vLLM): a flash_attn axis would only measure the same
        # point twice
        engine_fas = fas if profile.flash_attn_option else [False]
        for ctx, kv, fa, th in product(lists["contexts"], kv_dtypes, engine_fas, threads):
            spec = PointSpec(
                model_path="",
                n_ctx=ctx,
                prompt_lengths=tuple(lists["prompt_lengths"]),
                gen_lengths=tuple(lists["gen_lengths"]),
                depths=tuple(lists["depths"]),
                concurrencies=tuple(lists["concurrencies"]),
                repetitions=reps,
                kv_dtype=kv,
                flash_attn=fa,
                n_threads=th or None,
                n_batch=_int(g["n_batch"], f"{w}.n_batch", 1),
                n_ubatch=_int(g["n_ubatch"], f"{w}.n_ubatch", 1),
                n_gpu_layers=_int(g["n_gpu_layers"], f"{w}.n_gpu_layers", -1),
                seed=_int(g["seed"], f"{w}.seed", 0),
                engine_options=dict(g["engine_options"]),
                serving_concurrencies=tuple(lists["serving_concurrencies"]),
                serving_requests_per_client=serving_reqs,
            )
            points.append(
                PlannedPoint(
                    index=start + len(points),
                    group=gi,
                    engine=engine,
                    model_ref=ref,
                    model=model,
                    quant=qspec.name or q,
                    n_layers=n_layers,
                    spec=spec,
                    timeout_s=float(timeout),
                    device_kind=kind,
                    gpus=gpus,
                )
            )
    return points


def parse_plan(text: str, path: str | Path = "<plan>", catalog: Catalog | None = None) -> Plan:
    """Parse and validate plan TOML text.  Raises PlanError naming the offending entry."""
    path = Path(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not valid TOML ({exc})") from None
    _check_keys(data, _TOP_KEYS, str(path))
    catalog = catalog if catalog is not None else default_catalog()
    top = {k: v for k, v in data.items() if k in _AXIS_KEYS}
    groups = data.get("sweep") or [{}]
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise PlanError(f"{path}: 'sweep' must be an array of tables ([[sweep]])")
    points: list[PlannedPoint] = []
    for gi, g in enumerate(groups):
        _check_keys(g, _AXIS_KEYS, f"{path}: sweep[{gi}]")
        merged = {**_DEFAULTS, **top, **g}
        try:
            points += _expand_group(merged, gi, path.parent, catalog, len(points))
        except PlanError as exc:
            raise PlanError(f"{path}: {exc}") from None
    build_timeout = _seconds(data.get("build_timeout_s", 1800), f"{path}: build_timeout_s")
    name = data.get("name", path.stem)
    try:  # the name becomes the records file's name under results/runs: used as it is or refused
        check_name(name, f"{path}: name")
    except SpecError as exc:
        raise PlanError(str(exc)) from None
    return Plan(
        name=name,
        description=str(data.get("description", "")),
        path=str(path),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        build_timeout_s=float(build_timeout),
        points=tuple(points),
    )


def load_plan(path: str | Path, catalog: Catalog | None = None) -> Plan:
    """Read and validate a plan file (PlanError when missing, unreadable, not a regular file — a FIFO is
    refused without blocking — or invalid)."""
    from harness.safe_files import FileRefused, read_regular_bytes

    path = Path(path)
    try:
        text = read_regular_bytes(path).decode("utf-8")
    except FileRefused as exc:
        raise PlanError(str(exc)) from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return parse_plan(text, path, catalog)
