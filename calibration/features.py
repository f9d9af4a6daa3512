"""Dataset rows -> SpeedPoints whose features come from the estimator's own physics.

For each usable record the model (``estimator.catalog.resolve.resolve_model``, depth-reduced to
``n_layers_measured`` when the run used a proxy with fewer layers), the quant
(``estimator.physics.quant.get_quant``), the hardware (catalog via
``estimator.catalog.resolve.resolve_hardware``, or the
spec detected on the host, ``extra["detected"]``) and the workload are rebuilt, and
``estimator.physics.speed.tg_features`` / ``prefill_features`` give the features (frozen dataclasses).  The
prediction function of each phase is ``estimator.physics.speed.decode_step_s`` / ``prefill_s``, and the free
parameters come from the estimator's parameter table (``estimator.physics.coefficients.PARAMS``): one model.

Measured times (seconds):
  decode   t_step = batch / decode_tok_s (decode_tok_s = tokens/s over all sequences, the
           llama-bench / batched-bench convention).  The prediction is the mean step over tg{n_gen} from
           n_depth (llama-bench averages over the generated tokens), taken at the estimator's midpoint
           depths.  For batch 1 the step time is affine in the features, so the features are averaged
           once over those depths (``speed.mean_features``, exact); batch > 1 keeps one per depth.
  prefill  t = batch * n_prompt / prefill_tok_s.  A prompt prefilled one token per pass (n_batch or n_ubatch
           1, llama-bench -b 1) is n_prompt decode steps: a decode point of step 1 / prefill_tok_s over the
           prompt's depths (``extra["one_token_prefill"]``), as the estimator predicts it.
A record whose features cannot be computed (unknown model, quant or device, no bandwidth) is a Rejection, and
so is a phase whose repetition samples disagree by more than MAX_SAMPLE_SPREAD x (max / min): the speed of
that phase is left out (its memory figures are still used), and so is a point faster than the device's
datasheet roof allows by more than ROOF_FACTOR x (``beyond_roof``: a run that did not do the work it states).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from calibration.dataset import (
    Dataset,
    LoadedRecord,
    Rejection,
    is_e2e,
    record_era,
    record_settings,
    record_source,
    stated_n_batch,
)
from estimator.engines import ENGINES, get_engine
from estimator.physics.coefficients import detected_family
from estimator.specs import HardwareSpec, ModelSpec, SpecError, Workload

# Repetitions of one point on an undisturbed device agree within a few percent (llama-bench style samples,
# shared/reference/methods.md A5).  A point whose fastest repetition is more than this many times its slowest
# measured interference (other processes on the cores), not the device: its speed is left out (and listed).
MAX_SAMPLE_SPREAD = 2.0
# No cache, boost clock or rounding takes a run past twice its device's datasheet roof: a decode step of one
# device streams its weights and KV at most at the datasheet bandwidth (measured points reach <= 0.9 of it;
# a detected host's copy probe <= 1.15), a prefill runs its FLOPs at most at the datasheet GEMM rate
# (<= 0.95 of it).  A point beyond ROOF_FACTOR x that roof measured something else than the work its record
# states (e.g. llama-bench at a context the device could not hold, which returns without generating): its
# speed is left out with the reason (``beyond_roof``).
ROOF_FACTOR = 2.0


@dataclass(frozen=True)
class SpeedPoint:
    """One measured time (seconds) with its estimator features and hardware, plus identity for grouping/CV."""

    features: object  # estimator.physics.speed PrefillFeatures, or a list of DecodeFeatures (tg depths)
    hardware: object  # estimator.specs.HardwareSpec
    measured_s: float
    phase: str
    family: str
    engine: str
    backend: str
    device: str
    model: str
    where: str = ""
    record_id: str = ""
    vendor: str = ""
    kind: str = ""
    n_devices: int = 1
    extra: dict = field(default_factory=dict)
    era: str = ""  # calibration.dataset.record_era: "2024" for a build of 2024, "" for a current one
    settings: str = ""  # calibration.dataset.record_settings: "no_repack" for a --no-repack run, "" default
    origin: str = ""  # the record's: "measured" (a fitbench run) | "imported" (published)
    source: str = ""  # calibration.dataset.record_source: the published source, "" for a fitbench run

    @property
    def stratum(self) -> str:
        """The noise / error group of the point: its phase, or ``serving.<metric>`` for a serving point
        (``extra["metric"]``: ttft | tpot), which has its own noise scale, errors and intervals."""
        metric = self.extra.get("metric")
        return f"{self.phase}.{metric}" if metric else self.phase

    @property
    def noise_group(self) -> str:
        """The group whose residuals set the point's noise scale in the fit (calibration.fit): its stratum,
        and ``<stratum>:own`` for fitbench's own runs (origin "measured").  Own runs repeat one host's
        synthetic proxies over many shapes, so what the model misses there (a kernel path of one CPU) is a
        misfit of hundreds of points that would otherwise widen the published points' noise scale and loosen
        their fit (docs/calibration.md "llama.cpp's AMX prompt path").  Errors and intervals stay per
        stratum."""
        return f"{self.stratum}:own" if self.origin == "measured" else self.stratum


def _speed():
    from estimator.physics import speed

    return speed


def _detected(rec) -> dict | None:
    det = rec.extra.get("detected") if isinstance(rec.extra, dict) else None
    return det if isinstance(det, dict) else None


def _probe_gbs(det: dict) -> float | None:
    return det.get("host_bandwidth_probe_gbs") or det.get("bandwidth_gbs") or None


def detected_host_basis(records) -> dict[str, tuple[float | None, float | None]]:
    """{device key: (GB/s, GHz)} of every host outside the catalog: the medians of the copy probes and of the
    clocks its speed records carry (records without a speed, memory-only points among them, are left out:
    the older of those stored the nominal clock of a VM's /proc/cpuinfo).  One host is one device, so every
    record of it is fitted at these figures: a sweep's detection reads a VM's probe and clock at one moment
    (a Xeon guest read 27.0 GB/s and 4.06 GHz for one sweep, 23.9 GB/s and 3.53 GHz for the next, both while
    idle), and two sweeps of one host fitted at their own readings would have the fit explain that noise as a
    speed difference."""
    import statistics

    from calibration.dataset import device_key

    probes: dict[str, list[float]] = {}
    clocks: dict[str, list[float]] = {}
    for rec in records:
        det = _detected(rec)
        if rec.hardware_id or det is None or (rec.decode_tok_s is None and rec.prefill_tok_s is None):
            continue
        key = device_key(rec)
        bw = _probe_gbs(det)
        if bw:
            probes.setdefault(key, []).append(float(bw))
        if det.get("cpu_clock_ghz"):
            clocks.setdefault(key, []).append(float(det["cpu_clock_ghz"]))
    return {
        key: (statistics.median(probes[key]) if key in probes else None,
              statistics.median(clocks[key]) if key in clocks else None)
        for key in probes.keys() | clocks.keys()
    }  # fmt: skip


def hardware_from_detected(rec, basis: tuple[float | None, float | None] | None = None) -> HardwareSpec:
    """HardwareSpec of a host that is not in the catalog, from ``extra["detected"]`` (harness.hwdetect);
    ``basis``: (GB/s, GHz) of the host over all its records (``detected_host_basis``), which replace this
    record's own probe and clock where given."""
    det = _detected(rec)
    if det is None:
        raise SpecError("hardware_id is empty and the record has no extra['detected'] spec")
    bw_basis, clock_basis = basis or (None, None)
    bw = bw_basis or _probe_gbs(det)
    if not bw:
        raise SpecError(
            "detected spec has no bandwidth probe (extra['detected']['host_bandwidth_probe_gbs'])"
        )
    from estimator.catalog.detect import CpuInfo, detected_cpu_spec

    family = rec.hardware_family or det.get("cpu_family", "")
    cpu = CpuInfo(
        model_name=det.get("cpu_model") or rec.device_name,
        machine=det.get("machine", ""),
        physical_cores=det.get("physical_cores") or None,
        logical_cpus=det.get("logical_cpus") or None,
        ram_bytes=det.get("ram_bytes"),
        isa=tuple(det.get("isa") or ()),
        family=family,
        clock_ghz=clock_basis or det.get("cpu_clock_ghz") or None,
    )
    source = f"detected on {rec.host} (bandwidth = copy probe)"
    return detected_cpu_spec(cpu, float(bw), family, source=source)


@dataclass
class Resolver:
    """Caching resolvers for model / quant / hardware (injectable for tests)."""

    model: Callable[[str], ModelSpec] | None = None
    hardware: Callable[[str], HardwareSpec] | None = None
    quant: Callable[[str], object] | None = None
    # {device key: (GB/s, GHz)} of the hosts outside the catalog (``detected_host_basis``); speed_points fills
    # it from its dataset when empty
    host_basis: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def __post_init__(self):
        if self.model is None or self.hardware is None:
            from estimator.catalog import resolve

            self.model = self.model or resolve.resolve_model
            self.hardware = self.hardware or resolve.resolve_hardware
        if self.quant is None:
            from estimator.physics.quant import get_quant

            self.quant = get_quant
        self._cache: dict = {}

    def _get(self, kind: str, key: str, fn):
        ck = (kind, key)
        if ck not in self._cache:
            try:
                self._cache[ck] = fn(key)
            except (SpecError, KeyError, ValueError, FileNotFoundError) as exc:
                self._cache[ck] = exc
        val = self._cache[ck]
        if isinstance(val, Exception):
            raise SpecError(f"{kind} {key!r}: {val}")
        return val

    def spec_for(self, rec) -> tuple[ModelSpec, object, HardwareSpec]:
        if not rec.model_id:  # an import whose model the catalog lacks: say which one
            extra = rec.extra if isinstance(rec.extra, dict) else {}
            named = (extra.get("published") or {}).get("model_name") or ""
            said = f"the source names {named!r}, " if named else ""
            raise SpecError(f"model not stated: {said}which the catalog does not hold")
        model = self._get("model", rec.model_id, self.model)
        if rec.n_layers_measured < model.n_layers:
            m = rec.n_layers_measured
            model = dataclasses.replace(
                model, n_layers=m, layer_types=model.layer_types[:m], gguf_tensors=None
            )
        quant = self._get("quant", rec.quant, self.quant)
        if rec.engine in ENGINES:  # the layout the engine loads (vLLM / SGLang MXFP4 checkpoints)
            quant = get_engine(rec.engine).weight_format(quant)
        hw = (
            self._get("hardware", rec.hardware_id, self.hardware)
            if rec.hardware_id
            else hardware_from_detected(rec, self.host_basis.get(_device(rec)))
        )
        return model, quant, hw


def workload_for(rec) -> Workload:
    """The estimator Workload of a record; the split, when the record does not state it, is the engine
    profile's default (llama.cpp layer split -> 'pp', vLLM -> 'tp'; an engine without a profile -> 'tp')."""
    split = rec.extra.get("split") if isinstance(rec.extra, dict) else None
    if split not in ("tp", "pp"):
        split = get_engine(rec.engine).default_split if rec.engine in ENGINES else "tp"
    n_ctx = rec.n_ctx or max(rec.n_depth + rec.n_prompt + rec.n_gen, 1)
    # n_batch not stated: llama-bench's 2048, or the stated n_ubatch when larger (llama.cpp caps n_ubatch at
    # n_batch, so a stated larger ubatch implies n_batch >= n_ubatch).
    n_batch = rec.n_batch or max(2048, rec.n_ubatch or 0)
    backend = ""  # the record's backend when the engine knows it (else the profile's default for the device)
    if rec.engine in ENGINES and rec.backend:
        names = {b.lower(): b for b in get_engine(rec.engine).backend_names()}
        backend = names.get(rec.backend.lower(), "")
    # llama.cpp KV options a run stated (engine_options of its plan): --swa-full, one stream per sequence
    opts = rec.extra.get("engine_options") if isinstance(rec.extra, dict) else None
    opts = opts if isinstance(opts, dict) else {}
    return Workload(
        n_ctx=n_ctx,
        kv_dtype=rec.kv_dtype or "f16",
        n_seq=rec.batch,
        n_prompt=rec.n_prompt,
        n_gen=rec.n_gen,
        n_depth=rec.n_depth,
        n_batch=n_batch,
        n_ubatch=rec.n_ubatch or 512,
        flash_attn=bool(rec.flash_attn),
        engine=rec.engine,
        n_devices=rec.n_devices,
        split=split,
        backend=backend,
        swa_full=bool(opts.get("swa_full", False)),
        kv_unified=bool(opts.get("kv_unified", True)),
    )


def point_family(rec, hw: HardwareSpec | None = None) -> str:
    """The calibration group family of a record.

    A catalogued device uses its hardware family.  A host that is not in the catalog (hardware_id "", spec
    from extra["detected"]) forms its own group, ``"<family> (detected host <device>)"``: its bandwidth is
    a copy probe measured on the host, not a datasheet peak, and its core count / compute rate is not
    catalogued, so its efficiencies are on a different basis from the catalogued devices of the same ISA
    family and must not be pooled with them at the family level (the gate then holds it out
    leave-one-model-out).
    """
    fam = rec.hardware_family or (hw.family if hw is not None else "")
    if rec.hardware_id:
        return fam
    return detected_family(fam, _device(rec))


def _point(lr: LoadedRecord, phase: str, features, hw: HardwareSpec, measured_s: float) -> SpeedPoint:
    r = lr.record
    return SpeedPoint(
        features=features,
        hardware=hw,
        measured_s=measured_s,
        phase=phase,
        family=point_family(r, hw),
        engine=r.engine,
        backend=r.backend,
        device=_device(r),
        model=r.model_id,
        where=lr.where,
        record_id=r.record_id,
        vendor=hw.vendor or "",
        kind=hw.kind or "",
        n_devices=r.n_devices,
        extra={
            "quant": r.quant,
            "n_prompt": r.n_prompt,
            "n_gen": r.n_gen,
            "n_depth": r.n_depth,
            "batch": r.batch,
            "model_bytes": None,
        },
        era=record_era(r),
        settings=record_settings(r),
        origin=r.origin,
        source=record_source(r),
    )


def fallback_on_host(model, quant, hw: HardwareSpec, wl: Workload) -> str:
    """Why a record is left out of the device fits: its configuration runs (partly) on the host CPU by the
    support table (estimator.physics.support / fallback), so its speed measures that fallback, not the
    device's efficiencies; "" for a record of the device's own path.  Such records are evidence for the
    support table and its fallback intervals (tests/test_support.py), not points of the family's fit."""
    if wl.engine not in ENGINES:
        return ""
    from estimator.physics import fallback, support

    path = fallback.speed_path(model, quant, hw, wl)
    if path is None or path.host is None:
        return ""
    line = support.describe(path.verdict, quant.name, hw.id)
    return f"runs on a support fallback ({line}): evidence for the support table, not for {hw.family}"


def _device(r) -> str:
    from calibration.dataset import device_key

    return device_key(r)


def speed_points(ds: Dataset, resolver: Resolver | None = None) -> tuple[list[SpeedPoint], list[Rejection]]:
    """Decode and prefill SpeedPoints of every usable record, plus the records whose features failed."""
    sp = _speed()
    resolver = resolver or Resolver()
    if not resolver.host_basis:
        resolver.host_basis.update(detected_host_basis(lr.record for lr in ds.records))
    points: list[SpeedPoint] = []
    rejected: list[Rejection] = []
    for lr in ds.records:
        r = lr.record
        if r.decode_tok_s is None and r.prefill_tok_s is None:
            continue
        try:
            model, quant, hw, wl = record_specs(resolver, r)
            on_host = fallback_on_host(model, quant, hw, wl)
            if on_host:
                rejected.append(Rejection(lr.file, lr.line, r.record_id, on_host))
                continue
            for phase, samples in (("prefill", r.prefill_samples_tok_s), ("decode", r.decode_samples_tok_s)):
                spread = sample_spread(samples)
                if spread is not None and spread > MAX_SAMPLE_SPREAD:
                    why = (
                        f"{phase} repetitions disagree {spread:.1f}x (max/min of {len(samples)} samples > "
                        f"{MAX_SAMPLE_SPREAD:g}): the device was not measured undisturbed; speed left out"
                    )
                    rejected.append(Rejection(lr.file, lr.line, r.record_id, why))
            if r.decode_tok_s is not None and _stable(r.decode_samples_tok_s):
                feats = sp.tg_features(model, quant, wl, r.n_depth, r.n_gen)
                # one sequence: the step is affine in the features, so their mean gives the mean step exactly
                f = [sp.mean_features(feats)] if r.batch == 1 else feats
                p = _point(lr, "decode", f, hw, r.batch / r.decode_tok_s)
                p.extra["model_bytes"] = feats[0].weight_bytes
                _keep(p, points, rejected, lr)
            if r.prefill_tok_s is not None and _stable(r.prefill_samples_tok_s):
                f = sp.prefill_features(model, quant, wl)
                if f.decode_steps:  # one token per pass (-b 1): decode steps, a decode point
                    if r.batch != 1:
                        raise SpecError("one token per pass for several sequences is not modelled")
                    p = _point(lr, "decode", [sp.mean_features(f.decode_steps)], hw, 1.0 / r.prefill_tok_s)
                    p.extra.update(model_bytes=f.decode_steps[0].weight_bytes, one_token_prefill=True)
                    _keep(p, points, rejected, lr)
                    continue
                f = as_built_prefill(f, model, quant, hw, r.engine, record_era(r))
                # a build that dequantized to F16 ran cuBLAS, which the model describes on every family
                unmodelled = "" if f.dequant_bytes else sp.unmodelled_prefill(model, quant, hw, r.engine)
                if unmodelled:  # the decode of such a record stays fitted
                    why = f"{unmodelled}; not fitted (its error is reported out of sample)"
                    rejected.append(Rejection(lr.file, lr.line, r.record_id, why))
                    continue
                if hw.kind != "cpu" and not has_datasheet_peak(hw, r.engine, f.backend):
                    raise SpecError(f"device {hw.id!r} has no datasheet TFLOPS; its prefill cannot be fitted")
                p = _point(lr, "prefill", f, hw, r.batch * r.n_prompt / r.prefill_tok_s)
                p.extra["model_bytes"] = f.weight_bytes
                _keep(p, points, rejected, lr)
        except (SpecError, KeyError, ValueError, ZeroDivisionError) as exc:
            rejected.append(Rejection(lr.file, lr.line, r.record_id, f"features: {exc}"))
    measured = {decode_unit(p) for p in points if p.phase == "decode"}
    for lr in ds.serving_records:
        try:
            p = one_token_run_point(lr, resolver)
        except (SpecError, KeyError, ValueError, ZeroDivisionError):
            continue  # the end-to-end check (calibration.latency) lists the record with its reason
        if isinstance(p, str):
            rejected.append(Rejection(lr.file, lr.line, lr.record.record_id, p))
        elif p is not None and decode_unit(p) not in measured:
            _keep(p, points, rejected, lr)
    return points, rejected


def beyond_roof(p: SpeedPoint) -> str:
    """Why a point's measured time is too short for the work its features state ("" when it is not).

    decode (one device, nothing read from the host): (weight_bytes + kv_bytes) of the mean step / measured
    step > ROOF_FACTOR x bandwidth_gbs x ``speed.stream_roof`` x 1e9 B/s (a detected host's copy probe,
    which moves by tens of percent between runs on a shared host, counts as the datasheet it stands ~0.85
    of).  prefill (one device with a datasheet GEMM rate): (GEMM + attention FLOPs) / measured time >
    ROOF_FACTOR x the datasheet TFLOPS its engine and backend run at (``covariates.datasheet_tflops``) x
    1e12.  Several devices and host reads are not checked (their roofs add up in ways the check would have
    to model)."""
    from estimator.physics.covariates import datasheet_tflops

    hw = p.hardware
    if p.n_devices != 1 or p.measured_s <= 0:
        return ""
    if p.phase == "decode":
        feats = list(p.features)
        if any(f.host_bytes for f in feats) or not hw.bandwidth_gbs:
            return ""
        moved = sum(f.weight_bytes + f.kv_bytes for f in feats) / len(feats) / p.measured_s
        stream = _speed().stream_roof(hw)
        roof, unit = float(hw.bandwidth_gbs) * 1e9 * stream, 1e9
        what = "GB/s of its datasheet bandwidth" if stream == 1.0 else "GB/s (its copy probe / 0.85)"
    else:
        f = p.features
        peak = datasheet_tflops(hw, f.fp8, p.engine, p.backend)
        if f.host_bytes or not peak:
            return ""
        moved = (f.flops + f.attn_flops) / p.measured_s
        roof, unit, what = float(peak) * 1e12, 1e12, "TFLOPS of its datasheet GEMM rate"
    if moved <= ROOF_FACTOR * roof:
        return ""
    ratio, moved_s, roof_s = moved / roof, _fig(moved / unit), _fig(roof / unit)
    return (
        f"{p.phase} at {ratio:.1f}x the device's roof ({moved_s} against {roof_s} {what}): faster than the "
        "hardware can do the work the record states (e.g. a run at a context the device could not hold); "
        "speed left out"
    )


def _fig(x: float) -> str:
    """A figure in three significant digits, with thousands separators from 100 up."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _keep(p: SpeedPoint, points: list[SpeedPoint], rejected: list[Rejection], lr: LoadedRecord) -> None:
    """Append ``p`` to ``points``, or its record to ``rejected`` when ``beyond_roof`` says why not."""
    why = beyond_roof(p)
    if why:
        rejected.append(Rejection(lr.file, lr.line, lr.record.record_id, why))
    else:
        points.append(p)


def decode_unit(p: SpeedPoint) -> tuple[str, str, str]:
    """(device, engine, backend) of a point: the unit whose decode evidence ``one_token_run_point`` fills."""
    return (p.device, p.engine, p.backend)


def one_token_run_point(lr: LoadedRecord, resolver: Resolver) -> SpeedPoint | str | None:
    """The decode point of an end-to-end run that is decode steps only, else None (a Rejection's reason when
    it runs on a support fallback).

    llama-bench ``-pg P,G -b 1`` of one sequence prefills its prompt one token per pass
    (``PrefillFeatures.decode_steps``: each pass reads the weights and KV and runs the output head, as a
    decode step does) and then generates G tokens, so the run is P + G decode steps at depths 0 .. P + G - 1:
    a decode point of step ``e2e_latency_s / (P + G)`` whose features are ``tg_features`` from depth 0 over
    P + G tokens (``extra["one_token_run"]``).  Runs with larger batches (prompt GEMMs), of several devices
    (layer split: the builds that published them scale in ways no transfer term describes, e.g. 5x slower
    on two Intel Max than on one) and vLLM offline batches are not such points; they stay the end-to-end check
    only (calibration.latency).

    ``speed_points`` adds these points only for a (device, engine, backend) without a direct decode
    measurement (tg, or a -b 1 prompt): they are the decode evidence of a device that has no other (the
    Intel Max 1550 with llama.cpp SYCL), and a single repetition of a mixed test does not override llama-bench
    tg records.  (With the MI300X's runs fitted next to its tg record the shared shrinkage scales moved and
    the prefill gate went from 14.6 % to 15.5 %; docs/calibration.md.)"""
    r = lr.record
    if not is_e2e(r) or r.batch != 1 or not r.n_prompt or r.n_devices != 1:
        return None
    sp = _speed()
    model, quant, hw, wl = e2e_specs(resolver, r)
    if not sp.prefill_features(model, quant, wl).decode_steps:
        return None
    on_host = fallback_on_host(model, quant, hw, wl)
    if on_host:
        return on_host
    n_steps = int(r.n_prompt) + max(int(r.n_gen), 0)
    feats = sp.tg_features(model, quant, wl, 0, n_steps)
    p = _point(lr, "decode", [sp.mean_features(feats)], hw, float(r.e2e_latency_s) / n_steps)
    p.extra.update(model_bytes=feats[0].weight_bytes, one_token_run=True)
    return p


def e2e_specs(resolver: Resolver, rec):
    """(model, quant, hardware, workload) of an end-to-end run: the record's workload from depth 0 with its
    B = ``batch`` sequences and the n_batch it states (``stated_n_batch``: llama-bench -b, which caps
    n_ubatch)."""
    model, quant, hw, wl = record_specs(resolver, rec)
    check_context(model, rec)
    n_batch = stated_n_batch(rec)
    if n_batch:
        wl = dataclasses.replace(wl, n_batch=n_batch)
    return model, quant, hw, dataclasses.replace(wl, n_seq=max(int(rec.batch), 1), n_depth=0)


def check_context(model: ModelSpec, rec) -> None:
    """SpecError when the record's engine stops a sequence at the model's context length
    (``EngineProfile.stops_at_model_context``: vLLM, SGLang) and the run asked for more tokens than that
    (n_depth + n_prompt + n_gen > max_context): it generated fewer tokens than it states, so its time does not
    measure its stated workload."""
    if rec.engine not in ENGINES or not get_engine(rec.engine).stops_at_model_context:
        return
    asked = int(rec.n_depth or 0) + int(rec.n_prompt or 0) + int(rec.n_gen or 0)
    if asked > model.max_context:
        depth = f"{rec.n_depth} + " if rec.n_depth else ""
        raise SpecError(
            f"{depth}{rec.n_prompt} + {rec.n_gen} tokens exceed {model.id}'s context of {model.max_context}: "
            f"{get_engine(rec.engine).label} stops a sequence there, so the run generated fewer tokens than "
            "it states"
        )


def record_specs(resolver: Resolver, rec):
    """(model, quant, hardware, workload) of a record; SpecError when one is unknown or the device has no
    bandwidth (nothing of its speed can be predicted)."""
    model, quant, hw = resolver.spec_for(rec)
    if not hw.bandwidth_gbs:
        raise SpecError(f"device {hw.id!r} has no bandwidth in the catalog")
    return model, quant, hw, workload_for(rec)


def has_datasheet_peak(hw: HardwareSpec, engine: str, backend: str | None = "") -> bool:
    """True when ``estimator.physics.speed.peak_tflops`` has a datasheet rate for this device, engine and
    backend ('' = the engine's default)."""
    try:
        _speed().peak_tflops(hw, {}, False, engine, backend)
    except ValueError:
        return False
    return True


def sample_spread(samples) -> float | None:
    """max / min of the repetition samples (tokens/s), None with fewer than 2 samples."""
    xs = [float(x) for x in samples or ()]
    if len(xs) < 2 or min(xs) <= 0:
        return None
    return max(xs) / min(xs)


def _stable(samples) -> bool:
    spread = sample_spread(samples)
    return spread is None or spread <= MAX_SAMPLE_SPREAD


# ------------------------------------------------------------------------------ vectorised evaluation
# The fit evaluates every point of a phase at once: the features of all points stacked field by field into
# numpy arrays, and the same estimator formulas (speed.step_s / speed.prefill_time on speed.rates_for_decode
# / rates_for_prefill) applied to them.  Tests check point for point against decode_step_s / prefill_s.

BUILD_SCALE = "decode.build_scale"


def older_build_bw_eff(bw_eff, build_scale):
    """The bw_eff a prompt of an older build streams its weights at: the decode bw_eff it borrows is a current
    build's, and that build's steps are ``build_scale`` x longer (scalars or numpy arrays)."""
    return bw_eff / build_scale


# Parameters each phase's time needs, by the name the formulas read -> the parameter table key that supplies
# it (the other phase's parameters are borrowed as estimator.physics.speed.merged_params borrows them).
def phase_inputs(phase: str, keys) -> dict[str, str]:
    """{param name the phase's formula reads: table key ``phase.name``} for the fitted keys ``keys``.  Prefill
    also reads ``decode.build_scale``: the decode bw_eff it borrows is a current build's, and a record of an
    older build streams its weights at bw_eff / build_scale (the estimator, which predicts current builds,
    borrows bw_eff alone)."""
    sp = _speed()
    other = "prefill" if phase == "decode" else "decode"
    borrow = sp.BORROW_FROM_PREFILL if phase == "decode" else sp.BORROW_FROM_DECODE
    out = {}
    for key in keys:
        ph, name = key.split(".", 1)
        if ph == phase or (ph == other and name in borrow) or (phase == "prefill" and key == BUILD_SCALE):
            out[name] = key
    return out


@dataclass
class PhaseArrays:
    """The points of one phase, stacked: ``index`` into the point list, ``unit`` (row of the design),
    ``log_measured`` = ln(measured seconds), ``features`` (array fields), ``device`` (speed.DeviceRates with
    array fields; peak NaN where not catalogued) and ``absolute`` (no datasheet peak: flops_eff is 1).
    Decode keeps one row per tg depth of a batched point: ``owner`` maps rows to points, ``count`` the rows
    of each point (the step time of a point is the mean over its rows)."""

    phase: str
    index: object
    unit: object
    log_measured: object
    features: object
    device: object
    absolute: object
    owner: object = None
    count: object = None

    @property
    def strata(self) -> list[str]:
        """The noise group of every point (calibration.fit.TimeModel): the phase."""
        return [self.phase] * len(self.index)

    @property
    def row_unit(self) -> object:
        """Design row per evaluation row (the parameters ``phase_seconds`` takes are per point)."""
        return self.unit


_DECODE_NUM = ("weight_bytes", "kv_bytes", "host_bytes", "expert_union_bytes", "flops_per_token", "batch",
               "n_layers", "n_moe_layers", "hidden_size", "n_devices")  # fmt: skip
_PREFILL_NUM = ("tokens", "flops", "expert_flops", "gemm_outputs", "expert_gemm_outputs", "attn_flops",
                "kq_bytes", "weight_bytes", "host_bytes", "n_passes", "ubatch_tokens", "pipeline_factor",
                "n_layers", "n_moe_layers", "hidden_size", "n_devices", "dequant_bytes",
                "expert_rows")  # fmt: skip


def _stack(cls, rows: list, numeric) -> object:
    import numpy as np

    cols = {}
    for f in dataclasses.fields(cls):
        vals = [getattr(r, f.name) for r in rows]
        cols[f.name] = np.asarray(vals, dtype=float) if f.name in numeric else np.asarray(vals)
    return cls(**cols)


def _device_arrays(rows: list) -> object:
    import numpy as np

    sp = _speed()
    out = {}
    for f in dataclasses.fields(sp.DeviceRates):
        out[f.name] = np.asarray([np.nan if getattr(r, f.name) is None else getattr(r, f.name) for r in rows],
                                 dtype=float)  # fmt: skip
    return sp.DeviceRates(**out)


def stack_phase(points, phase: str, unit_of) -> PhaseArrays | None:
    """The points of ``phase`` stacked (see PhaseArrays); ``unit_of(point) -> int``; None without points."""
    import numpy as np

    sp = _speed()
    idx = [i for i, p in enumerate(points) if p.phase == phase]
    if not idx:
        return None
    rows, dev, owner = [], [], []
    for k, i in enumerate(idx):
        p = points[i]
        feats = p.features if isinstance(p.features, list) else [p.features]
        f0 = feats[0]
        d = sp.device_rates(p.hardware, f0.engine, f0.fp8, f0.backend)
        rows += feats
        dev += [d] * len(feats)
        owner += [k] * len(feats)
    pts = [points[i] for i in idx]
    absolute = np.array([is_absolute_device(p) for p in pts])
    if phase == "decode":
        feats = _stack(sp.DecodeFeatures, rows, _DECODE_NUM)
        owner_a = np.asarray(owner)
        device = _device_arrays(dev)
    else:
        feats = _stack(sp.PrefillFeatures, rows, _PREFILL_NUM)
        owner_a = None
        device = _device_arrays(dev)
    return PhaseArrays(
        phase=phase,
        index=np.asarray(idx),
        unit=np.asarray([unit_of(p) for p in pts]),
        log_measured=np.log([p.measured_s for p in pts]),
        features=feats,
        device=device,
        absolute=absolute,
        owner=owner_a,
        count=None if owner_a is None else np.bincount(owner_a, minlength=len(idx)).astype(float),
    )


def as_built_prefill(f, model, quant, hw, engine: str, era: str):
    """The prefill features ``f`` as a build of ``era`` ran them: quantized GEMMs dequantized to F16 + BLAS
    where the engine profile says that build did (``EngineProfile.dequantizes_gemm``: llama.cpp CUDA before
    mid-2024, passes over 32 tokens on tensor-core GPUs; ``speed.dequant_gemm_features``), else ``f``.  A
    current build (era "") is always ``f``: what the estimator predicts."""
    from estimator.engines import ENGINES, get_engine

    if not era or engine not in ENGINES or not f.tokens:
        return f
    if not get_engine(engine).dequantizes_gemm(era, f.backend, hw.family, int(f.ubatch_tokens)):
        return f
    return _speed().dequant_gemm_features(f, model, quant)


def phase_seconds(arr: PhaseArrays, params: dict) -> object:
    """Seconds of every point of ``arr`` from per-point parameter arrays ``params`` (names as the phase's
    formula reads them, estimator.physics.speed): decode = mean step over each point's rows."""
    import numpy as np

    sp = _speed()
    params = dict(params)
    if "flops_eff" in params:  # devices without a datasheet peak: the fitted absolute rate, eff 1
        params["flops_eff"] = np.where(arr.absolute, 1.0, params["flops_eff"])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if arr.phase == "decode":
            rows = {k: v[arr.owner] for k, v in params.items()}
            rates = sp.rates_for_decode(arr.device, rows, arr.features.kernel_class)
            t = sp.step_s(arr.features, rates)
            if "build_scale" in rows:  # a record of an older build (its build covariate), 1 otherwise
                t = t * rows["build_scale"]
            return np.bincount(arr.owner, weights=t, minlength=len(arr.index)) / arr.count
        if "build_scale" in params and "bw_eff" in params:  # an older build streams its weights slower
            params["bw_eff"] = older_build_bw_eff(params["bw_eff"], params["build_scale"])
        rates = sp.rates_for_prefill(arr.device, params, arr.features.kernel_class)
        return sp.prefill_time(arr.features, rates)


def is_absolute_device(p: SpeedPoint) -> bool:
    """True when the point's device has no datasheet GEMM peak for its engine (CPUs): its prefill (and the
    compute roof of batched decode) runs at the fitted flops_abs_tflops (a CPU's scales with its cores x
    clock: covariate ``cpu_size``) with flops_eff 1."""
    return p.kind == "cpu" or not has_datasheet_peak(p.hardware, p.engine, p.backend)
