"""Can the engine actually run it there?  The one decision, from the support table.

``judge(model, quant, hardware, workload)`` asks ``estimator.catalog.support`` (estimator/data/support.csv)
about every part of a configuration on the backend the engine uses for the device
(``EngineProfile.backend_for``: the workload's ``backend``, else the profile's default for the device's
family, vendor / kind) and returns a ``SupportVerdict``:

* the device at all (``device`` rows: no backend, unsupported GPU generations, vLLM's CPU-only macOS build),
  the backend's maturity (``backend`` rows) and the model family (``model`` rows);
* every storage type of the weight matrices a token reads (``WeightBreakdown.matmul_bytes_by_type``):
  native, ``weight_only`` (dequantized in the kernel), ``host_cpu`` (the matmuls run on the host CPU) or
  unsupported;
* the KV dtype (``kv``) and the features a configuration uses (``feature``): flash attention; with more
  than one device ``multi_device`` and the split's ``tensor_parallel`` / ``pipeline_parallel`` /
  ``attention_data_parallel``; with routed
  experts in host RAM (``Workload.moe_offload_layers``) ``moe_offload``; with routed experts whose storage
  type runs on the device ``moe_experts`` (``moe_experts:type=<type>``: e.g. CANN's F16 MUL_MAT_ID copies each
  token's experts before its matmul, fallback ``expert_copy``).  A feature is also asked under the
  configuration's conditions (``tensor_parallel:arch=<model_type>``, ``...:flash_attn=on|off``; see
  estimator.catalog.support), and every answer that is not native is a finding.

``status``: ``unsupported`` when any part cannot run, else ``fallback`` when any part runs on a fallback,
else ``native``; ``unlisted`` when the table has no backend for the device (the engine's native path is
assumed and the report says so).  ``host_share`` is the share of the per-token matmul bytes whose matmuls run
on the host CPU (1.0 for ``cpu_backend``); ``estimator.physics.fallback`` turns it into the speed path.

``runs(...)`` is the predicate every judging caller uses (recommendations, the quant matrix, ``fit``, launch
commands): False exactly when the verdict is ``unsupported``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from estimator.catalog import support as table
from estimator.engines import get_engine
from estimator.physics.quant import as_listed, catalog_quant
from estimator.physics.weights import class_types, weight_breakdown
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

NATIVE, FALLBACK, UNSUPPORTED, UNLISTED = "native", "fallback", "unsupported", "unlisted"
# what each fallback means, in report words
FALLBACK_WORDS = {
    "host_cpu": "host CPU fallback",
    "weight_only": "weight-only fallback (dequantized in the kernel, 16-bit compute)",
    "flash_attn_off": "off (attention runs without it)",
    "cpu_backend": "CPU cores only, not the accelerator",
    "host_copy": "copies between devices go through host memory",
    "expert_copy": "each token's selected experts are copied before their matmul",
}


@dataclass(frozen=True)
class Finding:
    """One part of a configuration that is not simply native: what (subject, item), how (status,
    fallback), the fact's note, confidence, since and source, and ``message`` (one line for the report)."""

    subject: str
    item: str
    status: str
    fallback: str
    message: str
    note: str
    confidence: str
    since: str
    source: str


@dataclass(frozen=True)
class SupportVerdict:
    """What the support table says about one configuration (see module doc).

    host_types: weight storage types whose matmuls run on the host CPU; host_share: their share of the
    per-token matmul bytes (0..1); host_kv: attention over the KV cache runs on the host CPU; cpu_backend: the
    whole engine runs on the host's CPU cores; weight_only: some weights run weight-only; flash_attn: whether
    flash attention runs (False when asked for but falling back); expert_copy: the device copies each token's
    routed experts before multiplying them (``estimator.physics.fallback`` adds the traffic).
    """

    engine: str
    backend: str
    family: str
    status: str
    maturity: str
    findings: tuple[Finding, ...] = ()
    host_types: tuple[str, ...] = ()
    host_share: float = 0.0
    host_kv: bool = False
    cpu_backend: bool = False
    weight_only: bool = False
    flash_attn: bool = True
    expert_copy: bool = False

    @property
    def runs(self) -> bool:
        """False when the engine cannot run the configuration on this device at all."""
        return self.status != UNSUPPORTED

    @property
    def uses_host(self) -> bool:
        """True when part of the work runs on the host CPU (the speed path changes)."""
        return self.cpu_backend or self.host_kv or self.host_share > 0


def describe(v: SupportVerdict, quant: str, device: str) -> str:
    """One line for reports, e.g. 'Q4_K_M on <device> with llama.cpp (CANN) runs on a fallback: the q4_K and
    q6_K matmuls (100% of the weight bytes read per token) run on the host CPU; flash attention is off'."""
    label = get_engine(v.engine).label
    backend = f" ({v.backend})" if v.backend and v.backend != "none" else ""
    where = f"{quant} on {device} with {label}{backend}"
    if v.status == NATIVE:
        return f"{where}: runs natively"
    if v.status == UNLISTED:
        return f"{where}: no {label} backend for this device in the support table; native speed assumed"
    clauses: list[str] = []
    weights = [f for f in v.findings if f.subject == "weights"]
    for status, fallback, words in (
        (UNSUPPORTED, "", "have no kernels on this backend"),
        (
            FALLBACK,
            "host_cpu",
            f"({v.host_share:.0%} of the weight bytes read per token) run on the host CPU",
        ),
        (FALLBACK, "weight_only", "run weight-only (dequantized in the kernel, 16-bit compute)"),
    ):
        types = [f.item for f in weights if f.status == status and f.fallback == fallback]
        if types:
            clauses.append(f"the {' and '.join(types)} matmuls {words}")
    for f in v.findings:
        if f.subject != "weights":
            clauses.append(f.message)
    clauses.sort(key=lambda c: 0 if "not supported" in c or "no kernels" in c else 1)
    verb = "runs on a fallback" if v.status == FALLBACK else "does not run"
    return f"{where} {verb}: " + "; ".join(clauses)


def _finding(fact: table.SupportFact, subject: str, item: str, what: str) -> Finding:
    how = FALLBACK_WORDS.get(fact.fallback, "") if fact.status == FALLBACK else "not supported"
    if fact.confidence == "uncertain":
        how += " (uncertain)"
    return Finding(
        subject=subject,
        item=item,
        status=fact.status,
        fallback=fact.fallback,
        message=f"{what}: {how}",
        note=fact.note,
        confidence=fact.confidence,
        since=fact.since,
        source=fact.source,
    )


# the feature item each split uses (Workload.split), and how a finding names it
SPLIT_FEATURES = {"tp": "tensor_parallel", "pp": "pipeline_parallel", "dp": "attention_data_parallel"}
SPLIT_WORDS = {
    "tp": "tensor parallelism",
    "pp": "the layer (pipeline) split",
    "dp": "attention data parallelism",
}
# how a finding names the condition a fact holds under (estimator.catalog.support: feature:key=value)
_CONDITION_WORDS = {"arch": "for {} models", "flash_attn": "with flash attention {}", "type": "stored as {}"}


def _features(
    engine: str,
    backend: str,
    family: str,
    feature: str,
    conditions: tuple[tuple[str, str], ...],
    what: str,
) -> list[Finding]:
    """Findings of a feature the configuration uses: the plain item and the item under each of its
    ``conditions`` ((key, value), e.g. ("arch", "deepseek_v3") -> ``feature:arch=deepseek_v3``), every fact
    that is not native."""
    out = []
    asked = [(feature, what)] + [
        (f"{feature}:{key}={value}", f"{what} {_CONDITION_WORDS[key].format(value)}")
        for key, value in conditions
    ]
    for item, words in asked:
        fact = table.find(engine, backend, family, "feature", item)
        if fact is not None and fact.status != NATIVE:
            out.append(_finding(fact, "feature", item, words))
    return out


def _status(findings: list[Finding]) -> str:
    if any(f.status == UNSUPPORTED for f in findings):
        return UNSUPPORTED
    return FALLBACK if findings else NATIVE


def judge(
    model: ModelSpec, quant: QuantSpec | None, hardware: HardwareSpec, workload: Workload
) -> SupportVerdict:
    """The SupportVerdict of a configuration (module doc); ``quant`` None = a GGUF file's own tensors."""
    profile = get_engine(workload.engine)
    backend = profile.backend_for(hardware, workload.backend)
    types = _matmul_types(model, quant)
    return _judge(
        profile.name,
        profile.label,
        backend,
        hardware.family,
        hardware.vendor or "",
        hardware.kind,
        model.architecture,
        types,
        workload.kv_dtype.lower(),
        bool(workload.flash_attn),
        max(int(workload.n_devices), 1),
        workload.split,
        max(int(workload.moe_offload_layers), 0),
        _expert_types(model, quant),
    )


def _expert_types(model: ModelSpec, quant: QuantSpec | None) -> tuple[str, ...]:
    """Storage types of the routed experts' matrices (empty without routed experts).  judge() runs once per
    device in recommendations, so a catalog format's (or a GGUF file's) answer is cached per model; a custom
    QuantSpec (its per-class ``types`` dict is unhashable) is typed each time."""
    if model.moe is None:
        return ()
    quant = as_listed(quant) if quant is not None else None
    if quant is None or catalog_quant(quant.name) is quant:
        return _cached_expert_types(model, quant.name if quant is not None else None)
    return _types_of_experts(model, quant)


@lru_cache(maxsize=4096)
def _cached_expert_types(model: ModelSpec, quant_name: str | None) -> tuple[str, ...]:
    return _types_of_experts(model, catalog_quant(quant_name) if quant_name is not None else None)


def _types_of_experts(model: ModelSpec, quant: QuantSpec | None) -> tuple[str, ...]:
    by_class = class_types(model, quant)  # routed classes: ffn_{gate,up,down,gate_up}_exps
    return tuple(sorted({t for c, types in by_class.items() if "_exps" in c for t in types}))


def runs(model: ModelSpec, quant: QuantSpec | None, hardware: HardwareSpec, workload: Workload) -> bool:
    """The predicate: can ``workload.engine`` run this model in this format on this device at all?"""
    return judge(model, quant, hardware, workload).runs


def _matmul_types(model: ModelSpec, quant: QuantSpec | None) -> tuple[tuple[str, float], ...]:
    """(storage type, per-token matmul bytes) of the weights, largest first."""
    wb = weight_breakdown(model, quant) if quant is not None else weight_breakdown(model, None)
    return tuple(sorted(((t, float(b)) for t, b in wb.matmul_bytes_by_type.items() if b > 0),
                        key=lambda x: -x[1]))  # fmt: skip


@lru_cache(maxsize=4096)
def _judge(
    engine: str,
    label: str,
    backend: str,
    family: str,
    vendor: str,
    kind: str,
    architecture: str,
    types: tuple[tuple[str, float], ...],
    kv_dtype: str,
    flash_attn: bool,
    n_devices: int,
    split: str,
    moe_offload_layers: int,
    expert_types: tuple[str, ...] = (),
) -> SupportVerdict:
    if not backend:
        return SupportVerdict(engine, "", family, UNLISTED, "")
    findings: list[Finding] = []
    device = table.find(engine, backend, family, "device")
    if device is not None and device.status != NATIVE:
        findings.append(_finding(device, "device", family, f"{label} on {family} ({backend})"))
    if backend == "none":
        if device is None:  # a profile says "none" but the table has no row: say so plainly
            return SupportVerdict(engine, backend, family, UNSUPPORTED, "")
        return SupportVerdict(engine, backend, family, UNSUPPORTED, "", tuple(findings))
    back = table.find(engine, backend, family, "backend")
    maturity = back.maturity if back is not None else ""
    cpu_backend = device is not None and device.fallback == "cpu_backend"

    fam = table.find(engine, backend, family, "model", architecture)
    if fam is not None and fam.status != NATIVE:
        findings.append(_finding(fam, "model", architecture, f"{architecture} models"))

    total = sum(b for _, b in types) or 1.0
    host_types, host_bytes, weight_only = [], 0.0, False
    for t, nbytes in types:
        fact = table.find(engine, backend, family, "weights", t)
        if fact is None or fact.status == NATIVE:
            continue
        share = nbytes / total
        what = f"{t} matmuls ({share:.0%} of the weight bytes read per token)"
        findings.append(_finding(fact, "weights", t, what))
        if fact.fallback == "host_cpu":
            host_types.append(t)
            host_bytes += nbytes
        weight_only |= fact.fallback == "weight_only"

    kv = table.find(engine, backend, family, "kv", kv_dtype)
    host_kv = False
    if kv is not None and kv.status != NATIVE:
        findings.append(_finding(kv, "kv", kv_dtype, f"attention over the {kv_dtype} KV cache"))
        host_kv = kv.fallback == "host_cpu"

    fa_on = flash_attn
    if flash_attn:
        fa = table.find(engine, backend, family, "feature", "flash_attn")
        if fa is not None and fa.status != NATIVE:
            findings.append(_finding(fa, "feature", "flash_attn", "flash attention"))
            fa_on = fa.fallback not in ("flash_attn_off", "host_cpu") and fa.status != UNSUPPORTED
    if n_devices > 1:
        md = table.find(engine, backend, family, "feature", "multi_device")
        if md is not None and md.status != NATIVE:
            findings.append(_finding(md, "feature", "multi_device", f"{n_devices} devices"))
        what = f"{SPLIT_WORDS[split]} over {n_devices} devices"
        conditions = (("arch", architecture), ("flash_attn", "on" if flash_attn else "off"))
        findings += _features(engine, backend, family, SPLIT_FEATURES[split], conditions, what)
    if moe_offload_layers > 0:
        what = f"routed experts of {moe_offload_layers} layers in host RAM (--n-cpu-moe)"
        findings += _features(engine, backend, family, "moe_offload", (("arch", architecture),), what)

    expert_copy = False
    on_host = {h.lower() for h in host_types}
    for t in (t for t in expert_types if t not in on_host and not cpu_backend):
        found = _features(engine, backend, family, "moe_experts", (("type", t),), "routed experts")
        findings += found
        expert_copy |= any(f.fallback == "expert_copy" for f in found)

    share = 1.0 if cpu_backend else min(host_bytes / total, 1.0)
    return SupportVerdict(
        engine=engine,
        backend=backend,
        family=family,
        status=_status(findings),
        maturity=maturity,
        findings=tuple(findings),
        host_types=tuple(host_types),
        host_share=share,
        host_kv=host_kv,
        cpu_backend=cpu_backend,
        weight_only=weight_only,
        flash_attn=fa_on,
        expert_copy=expert_copy,
    )


# ------------------------------------------------------------------------------------------- fine-tuning
# The fine-tuning stack whose memory estimator.physics.finetune sizes: transformers + PEFT on PyTorch, with
# bitsandbytes for QLoRA's NF4 base.  Its backend on a device is PyTorch's device backend for the vendor and
# kind ((vendor, kind, backend); "*" any kind; first match wins); a device no entry names has none listed.
TRAINING_STACK = "peft"
TRAINING_BACKENDS: tuple[tuple[str, str, str], ...] = (
    ("*", "cpu", "CPU"),
    ("nvidia", "*", "CUDA"),
    ("amd", "*", "ROCm"),
    ("apple", "*", "MPS"),
    ("intel", "npu", "HPU"),  # Gaudi
    ("intel", "*", "XPU"),
    ("huawei", "*", "NPU"),  # torch_npu
)


@dataclass(frozen=True)
class FinetuneSupport:
    """Whether a fine-tuning method runs on a device with the ``peft`` stack (module doc of
    estimator.catalog.support): ``status`` native | unsupported | unlisted (no backend or no fact for the
    device), ``backend`` (PyTorch's, "" when none), ``message`` (what does not run where, for reports; ""
    when native), and the fact's ``note`` (why), ``confidence`` and ``source`` ("" when unlisted)."""

    method: str
    backend: str
    status: str
    message: str
    note: str = ""
    confidence: str = ""
    source: str = ""

    @property
    def runs(self) -> bool:
        """True only when a sourced fact says the method runs there."""
        return self.status == NATIVE


def training_backend(hardware: HardwareSpec) -> str:
    """PyTorch's device backend for ``hardware`` (TRAINING_BACKENDS), "" when none is listed."""
    vendor = (hardware.vendor or "").lower()
    for v, kind, backend in TRAINING_BACKENDS:
        if v in ("*", vendor) and kind in ("*", hardware.kind):
            return backend
    return ""


def judge_finetune(hardware: HardwareSpec, method: str) -> FinetuneSupport:
    """Can ``method`` (qlora | lora | full) run on ``hardware`` with the fine-tuning stack?  From the support
    table's ``finetune`` facts of the device's training backend (the most specific fact wins).  The message
    does not name the method (a report lists the methods it holds for)."""
    backend = training_backend(hardware)
    if not backend:
        where = f"{hardware.vendor or 'this vendor'} {hardware.kind} devices"
        return FinetuneSupport(method, "", UNLISTED, f"no PyTorch training backend is listed for {where}")
    fact = table.find(TRAINING_STACK, backend, hardware.family, "finetune", method)
    if fact is None:
        message = f"no fact on PyTorch {backend} for {hardware.family}"
        return FinetuneSupport(method, backend, UNLISTED, message)
    if fact.status == NATIVE:
        return FinetuneSupport(method, backend, NATIVE, "", fact.note, fact.confidence, fact.source)
    message = f"does not run on {hardware.name} (PyTorch {backend})"
    return FinetuneSupport(method, backend, fact.status, message, fact.note, fact.confidence, fact.source)
