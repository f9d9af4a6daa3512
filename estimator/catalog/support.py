"""The support table: what an engine runs on a backend and device, and how (``estimator/data/support.csv``).

One row is one public fact, kept with the URL it was read from::

    engine, backend, devices, subject, item, status, fallback, maturity, since, confidence, note, source

* ``engine``: a name of ``estimator.engines.ENGINES``, or ``peft`` for the fine-tuning stack (transformers +
  PEFT on PyTorch, bitsandbytes for the QLoRA base: what ``estimator.physics.finetune`` sizes).  ``backend``:
  the engine's backend as the profiles name it (``CUDA``, ``ROCm``, ``Metal``, ``Vulkan``, ``SYCL``,
  ``CANN``, ``CPU``, ``XPU``, ``Ascend`` ...; for ``peft`` PyTorch's device backends ``CUDA``, ``ROCm``,
  ``MPS``, ``XPU``, ``HPU``, ``NPU``, ``CPU``), ``|``-separated alternatives, ``*`` any, ``none`` = no
  backend at all.  ``devices``: hardware families of
  the catalog (``|``-separated) or ``*``.
* ``subject`` / ``item``: what the fact is about — ``weights`` (a storage type of the weight matrices:
  ``q4_K``, ``f16``, ``fp8``, ``nvfp4`` ..., as ``estimator.physics.quant`` names them), ``kv`` (a KV dtype),
  ``feature`` (below), ``device`` (the device at all), ``model`` (a model architecture, HF ``model_type``),
  ``backend`` (the backend itself; carries ``maturity``), ``finetune`` (a fine-tuning method of the ``peft``
  stack: ``qlora``, ``lora``, ``full``; native or unsupported, never a fallback).  Items are ``|``-separated,
  case-insensitive shell patterns (``*`` = any).
* ``feature`` items: ``flash_attn``; ``multi_device`` (more than one device, any split);
  ``tensor_parallel`` / ``pipeline_parallel`` (``Workload.split`` tp / pp over more than one device: llama.cpp
  ``-sm tensor`` / ``-sm layer``, vLLM and SGLang ``--tensor-parallel-size`` / ``--pipeline-parallel-size``);
  ``moe_offload`` (routed-expert tensors of some layers kept in host RAM with their matmuls on the host CPU,
  what ``Workload.moe_offload_layers`` sizes: llama.cpp ``--n-cpu-moe``).  A feature item may carry one
  condition, ``feature:key=value``, for a fact that holds only under it: ``arch=<model_type>`` (the model
  architecture), ``flash_attn=on|off`` (the requested switch) or ``type=<storage type>`` (``moe_experts``:
  the routed experts' type), e.g. ``tensor_parallel:arch=deepseek_v3``;
  the judge asks for the plain item and for each condition of the configuration and reports every one that
  is not native.
* ``status``: ``native`` | ``fallback`` | ``unsupported``; ``fallback`` names the fallback: ``host_cpu``
  (the matmuls / ops run on the host CPU), ``weight_only`` (weights dequantized inside the kernel, compute at
  the 16-bit rate), ``flash_attn_off`` (attention runs without flash attention), ``cpu_backend`` (the engine
  runs on the host's CPU cores instead of the accelerator), ``host_copy`` (device-to-device copies go through
  host memory), ``expert_copy`` (the device copies each token's selected experts before multiplying them).
* ``maturity`` (``backend`` rows): ``mature`` | ``developing`` | ``experimental``; uncalibrated predictions
  on a less mature backend get wider intervals (estimator.physics.fallback).
* ``since``: the version / date from which the fact holds, when the source says; ``confidence``: ``source``
  (engine code or docs), ``reported`` (an issue, PR or maintainer statement), ``assessment`` (our
  classification of what the cited page says), ``uncertain`` (inferred: the source does not state it).

Lookup (``find``): among the rows matching (engine, backend, family, subject, item) the most specific wins —
an exact device family beats ``*``, then an exact item beats a pattern, then an exact backend beats ``*``;
equally specific rows keep file order (the first wins).  No row: the combination is not in the table (the
caller treats it as native and says it is unlisted).  Read with the stdlib ``csv`` module, once per process.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from estimator.specs import SpecError

SUPPORT_PATH = Path(__file__).resolve().parent.parent / "data" / "support.csv"

COLUMNS = (
    "engine",
    "backend",
    "devices",
    "subject",
    "item",
    "status",
    "fallback",
    "maturity",
    "since",
    "confidence",
    "note",
    "source",
)
SUBJECTS = ("backend", "device", "model", "weights", "kv", "feature", "finetune")
STATUSES = ("native", "fallback", "unsupported")
FALLBACKS = ("host_cpu", "weight_only", "flash_attn_off", "cpu_backend", "host_copy", "expert_copy")
MATURITIES = ("mature", "developing", "experimental")
CONFIDENCES = ("source", "reported", "assessment", "uncertain")


@dataclass(frozen=True)
class SupportFact:
    """One row of the support table (see module doc); ``line`` is its line in the file."""

    engine: str
    backends: tuple[str, ...]
    devices: tuple[str, ...]
    subject: str
    items: tuple[str, ...]
    status: str
    fallback: str
    maturity: str
    since: str
    confidence: str
    note: str
    source: str
    line: int = 0

    def matches(self, engine: str, backend: str, family: str, subject: str, item: str) -> bool:
        """True when this row speaks about (engine, backend, family, subject, item)."""
        return (
            self.engine == engine
            and self.subject == subject
            and ("*" in self.backends or backend in self.backends)
            and ("*" in self.devices or family in self.devices)
            and any(fnmatchcase(item.lower(), pattern) for pattern in self.items)
        )

    def specificity(self, backend: str, family: str, item: str) -> tuple[bool, bool, bool]:
        """(exact device, exact item, exact backend): larger is more specific."""
        return (family in self.devices, item.lower() in self.items, backend in self.backends)


def _split(text: str, lower: bool = False) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split("|") if p.strip())
    return tuple(p.lower() for p in parts) if lower else parts


def _fact(row: dict, where: str, line: int) -> SupportFact:
    if any(row.get(c) is None for c in COLUMNS):
        raise SpecError(f"{where}:{line}: a row needs all of {', '.join(COLUMNS)}")
    f = SupportFact(
        engine=row["engine"].strip(),
        backends=_split(row["backend"]),
        devices=_split(row["devices"]),
        subject=row["subject"].strip(),
        items=_split(row["item"], lower=True),
        status=row["status"].strip(),
        fallback=row["fallback"].strip(),
        maturity=row["maturity"].strip(),
        since=row["since"].strip(),
        confidence=row["confidence"].strip(),
        note=row["note"].strip(),
        source=row["source"].strip(),
        line=line,
    )
    problems = []
    if f.subject not in SUBJECTS:
        problems.append(f"subject {f.subject!r} not one of {SUBJECTS}")
    if f.status not in STATUSES:
        problems.append(f"status {f.status!r} not one of {STATUSES}")
    if (f.status == "fallback") != bool(f.fallback) or (f.fallback and f.fallback not in FALLBACKS):
        problems.append(f"fallback {f.fallback!r}: a fallback row names one of {FALLBACKS}, others none")
    if (f.subject == "backend") != bool(f.maturity) or (f.maturity and f.maturity not in MATURITIES):
        problems.append(f"maturity {f.maturity!r}: backend rows name one of {MATURITIES}, others none")
    if f.subject == "finetune" and f.status == "fallback":
        problems.append("a finetune fact is native or unsupported (training has no fallback path)")
    if f.confidence not in CONFIDENCES:
        problems.append(f"confidence {f.confidence!r} not one of {CONFIDENCES}")
    if not f.source.startswith("https://") or not f.note:
        problems.append("every fact needs a note and an https source")
    if not (f.engine and f.backends and f.devices and f.items):
        problems.append("engine, backend, devices and item must not be empty")
    if problems:
        raise SpecError(f"{where}:{line}: {'; '.join(problems)}")
    return f


def read_support(path: str | Path | None = None) -> tuple[SupportFact, ...]:
    """Every fact of the support table; SpecError naming file and line for a bad row."""
    p = Path(path) if path is not None else SUPPORT_PATH
    with p.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise SpecError(f"{p}: missing column(s) {', '.join(missing)}")
        return tuple(_fact(row, str(p), line) for line, row in enumerate(reader, start=2))


@lru_cache(maxsize=1)
def support_facts() -> tuple[SupportFact, ...]:
    """The shipped support table (read once)."""
    return read_support()


@lru_cache(maxsize=1)
def _by_topic() -> dict[tuple[str, str], tuple[SupportFact, ...]]:
    """The support table's rows by (engine, subject), in table order (what ``find`` scans)."""
    out: dict[tuple[str, str], list[SupportFact]] = {}
    for f in support_facts():
        out.setdefault((f.engine, f.subject), []).append(f)
    return {k: tuple(v) for k, v in out.items()}


@lru_cache(maxsize=8192)
def find(engine: str, backend: str, family: str, subject: str, item: str = "*") -> SupportFact | None:
    """The most specific fact about (engine, backend, family, subject, item), or None (see module doc)."""
    best, best_key = None, None
    for f in _by_topic().get((engine, subject), ()):
        if not f.matches(engine, backend, family, subject, item):
            continue
        key = f.specificity(backend, family, item)
        if best_key is None or key > best_key:
            best, best_key = f, key
    return best
