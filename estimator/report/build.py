"""Section builders of the sizing report (the dataclasses live in ``estimator.report.model``).

Each builder calls the physics (``estimator.physics.memory``, ``estimator.physics.kv``,
``estimator.physics.weights``,
``estimator.physics.speed``) with scalar arguments: no numpy/scipy/pandas, so
``python -m estimator report`` starts fast.
Calls are memoised per (quant, device, count, context, KV dtype) because the quant matrix, the context table,
the multi-device table and the recommendations ask for overlapping configurations.
"""

from __future__ import annotations

import os
from dataclasses import replace

from estimator.engines import engine_names, engines_for, engines_with_kv, get_engine
from estimator.physics import speed as speed_mod
from estimator.physics.cost import estimate_cost
from estimator.physics.finetune import estimate_all
from estimator.physics.kv import kv_cache
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import QUANTS, get_quant
from estimator.physics.weights import weight_breakdown
from estimator.report.chart_data import chart_data
from estimator.report.model import (
    KV_OPTIONS,
    MEMORY_BASIS,
    CoefficientsInfo,
    ContextRow,
    DeviceRow,
    FinetuneRow,
    KVOption,
    KVSection,
    MemorySection,
    MultiDeviceSection,
    OffloadSection,
    QuantRow,
    ReportOptions,
    ScalingRow,
    SpeedFigure,
    SpeedSection,
    launch_entry,
    model_facts,
)
from estimator.report.recommend import (
    COUNTS,
    Candidate,
    Sizer,
    can_combine,
    cheapest_fit,
    device_notes,
    eligible,
    recommend,
)
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

# Fine-tuning: fraction of device memory a training job may use (framework reserve); an assumption.
FT_USABLE_FRACTION = 0.95
_SIZING_ERRORS = (SpecError, ValueError, ArithmeticError)


class Physics:
    """Memoised memory / speed calls for one model and coefficient table.

    Decode: the features of tg{n_gen} (``speed.tg_features``) do not depend on the device, so they are built
    once per (quant, workload) and every device applies ``speed.decode_step_s`` to them: the same numbers as
    ``speed.estimate_speed`` at a fraction of the cost when many devices are sized.
    """

    def __init__(self, model: ModelSpec, table):
        self.model, self.table = model, table
        self._mem: dict = {}
        self._params: dict = {}
        self._feats: dict = {}
        self._decode: dict = {}

    def memory(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload):
        """Memory with the KV cache of ``memory_sequences(wl)`` sequences (what the launch commands
        allocate: llama-server ``-c n_ctx x -np``, vLLM ``--max-num-seqs``)."""
        wl = replace(wl, n_seq=memory_sequences(wl))
        key = (quant.name, hw, wl)
        if key not in self._mem:
            self._mem[key] = estimate_memory(self.model, quant, hw, wl, self.table.memory_for(wl.engine))
        return self._mem[key]

    def params(self, hw: HardwareSpec, engine: str):
        key = (hw, engine)
        if key not in self._params:
            self._params[key] = speed_mod.merged_params(self.table, hw, engine)
        return self._params[key]

    def _decode_features(self, quant: QuantSpec, wl: Workload) -> list:
        key = (quant.name, wl)
        if key not in self._feats:
            n_gen = max(int(wl.n_gen), 1)
            self._feats[key] = speed_mod.tg_features(self.model, quant, wl, int(wl.n_depth), n_gen)
        return self._feats[key]

    def decode(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> SpeedFigure:
        """Mean single-stream decode speed over wl.n_gen tokens from wl.n_depth (tg{n_gen})."""
        key = (quant.name, hw, wl)
        if key not in self._decode:
            dec, _, dparams, _ = self.params(hw, wl.engine)
            feats = self._decode_features(quant, wl)
            step = speed_mod.decode_step_s(feats, hw, dparams)
            self._decode[key] = figure(1.0 / step, dec)
        return self._decode[key]

    def decode_tok_s(self, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> float:
        return self.decode(quant, hw, wl).tok_s

    def prefill(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> SpeedFigure:
        """Prefill tok/s of B x n_prompt tokens (pp{n_prompt}, 512 if unset), as ``speed.estimate_speed``."""
        _, pre, _, pparams = self.params(hw, wl.engine)
        return from_estimate(speed_mod.pp_estimate(self.model, quant, hw, wl, pre, pparams))

    def aggregate_tok_s(self, quant: QuantSpec, hw: HardwareSpec, wl: Workload) -> float:
        """Total decode tok/s of wl.concurrency sequences with the KV cache at half of n_ctx."""
        _, _, dparams, _ = self.params(hw, wl.engine)
        return max(int(wl.concurrency), 1) / speed_mod.aggregate_step_s(self.model, quant, hw, wl, dparams)


def memory_sequences(wl: Workload) -> int:
    """Sequences the memory is sized for: ``max(n_seq, concurrency)``.  ``--concurrency N`` starts N slots
    (llama-server ``-np N`` with ``-c n_ctx x N``; vLLM ``--max-num-seqs N``), so the KV cache holds N
    sequences of n_ctx tokens each; speed keeps ``n_seq`` as the batch of its single-stream figures."""
    return max(int(wl.n_seq), int(wl.concurrency), 1)


def figure(tok_s: float, cset) -> SpeedFigure:
    lo, hi = cset.interval(tok_s)
    return SpeedFigure(tok_s, lo, hi, cset.label, bool(cset.calibrated), int(cset.n_points))


def from_estimate(e) -> SpeedFigure:
    return SpeedFigure(e.tok_s, e.lo_tok_s, e.hi_tok_s, e.coefficients, bool(e.calibrated), int(e.n_points))


def runtime_basis(label: str, table, engine: str) -> str:
    """Where the runtime-buffer coefficients came from, honestly: the shipped prior (uncalibrated) or the
    calibrated coefficients file (its path), from ``RuntimeEstimate.coefficients`` ("prior" / "custom")."""
    if label == "prior":
        return "prior (uncalibrated)"
    path = getattr(table, "path", None)
    if path and table.memory_for(engine):
        rel = os.path.relpath(path)
        return f"calibrated ({path if rel.startswith('..') else rel})"
    return "custom (not from the coefficients file)"


def memory_section(m, hw: HardwareSpec, n_devices: int, table=None, engine: str = "") -> MemorySection:
    rows = []
    for i, d in enumerate(getattr(m, "per_device", ()) or ()):
        g = lambda k, d=d: int(getattr(d, k, 0) or 0)  # noqa: E731
        rows.append(
            DeviceRow(
                int(getattr(d, "index", i)),
                g("weights_bytes"),
                g("kv_bytes"),
                g("runtime_bytes"),
                g("overhead_bytes"),
                g("total_bytes"),
                g("usable_bytes"),
                g("headroom_bytes"),
                float(getattr(d, "utilization", 0.0) or 0.0),
            )
        )
    cap = getattr(m, "kv_capacity_tokens", None)
    conc = getattr(m, "max_concurrency", None)
    label = getattr(m, "coefficients", "")
    basis = MEMORY_BASIS + (f"; runtime coefficients: {runtime_basis(label, table, engine)}" if label else "")
    notes = tuple(getattr(m, "notes", ()) or ()) + tuple(device_notes([hw.id]))
    return MemorySection(
        int(m.weights_bytes), int(m.kv_bytes), int(m.runtime_bytes), int(m.overhead_bytes),
        int(m.total_bytes), int((hw.memory_bytes or 0) * n_devices), int(m.usable_bytes),
        int(m.headroom_bytes), float(m.utilization), m.verdict, int(m.host_bytes or 0),
        int(cap) if cap is not None else None, int(conc) if conc is not None else None,
        int(getattr(m, "min_offload_bytes", 0) or 0), tuple(rows), basis, notes,
    )


def kv_section(
    ph: Physics, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload, m
) -> KVSection:
    n_seq = memory_sequences(wl)
    kv = kv_cache(
        model, wl.n_ctx, wl.kv_dtype, n_seq, wl.engine, n_ubatch=wl.n_ubatch, flash_attn=wl.flash_attn
    )
    options = []
    for dt in KV_OPTIONS:
        engines = engines_with_kv(dt)
        try:
            mo = ph.memory(quant, hw, replace(wl, kv_dtype=dt, flash_attn=True))
        except _SIZING_ERRORS:
            continue
        options.append(
            KVOption(
                dt, int(mo.kv_bytes), int(m.kv_bytes - mo.kv_bytes), int(mo.total_bytes), mo.verdict, engines
            )
        )
    return KVSection(
        wl.kv_dtype,
        wl.n_ctx,
        n_seq,
        int(kv.total_bytes),
        int(kv.bytes_per_token),
        int(kv.state_bytes),
        {k: int(v) for k, v in kv.by_kind_bytes.items()},
        tuple(options),
    )


def context_rows(
    ph: Physics, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload, contexts: tuple[int, ...]
) -> tuple[ContextRow, ...]:
    """Memory at each context of ``contexts`` up to the model maximum (plus the
    maximum and the chosen one)."""
    ctxs = sorted(
        {c for c in contexts if c <= model.max_context}
        | {wl.n_ctx}
        | ({model.max_context} if model.max_context < max(contexts) * 2 else set())
    )
    rows = []
    for c in ctxs:
        m = ph.memory(quant, hw, replace(wl, n_ctx=c))
        rows.append(
            ContextRow(
                c,
                int(m.kv_bytes),
                int(m.total_bytes),
                int(m.headroom_bytes),
                m.verdict,
                c > model.max_context,
            )
        )
    return tuple(rows)


def quant_rows(
    ph: Physics, model: ModelSpec, chosen: QuantSpec, hw: HardwareSpec, wl: Workload, options: ReportOptions
) -> tuple[QuantRow, ...]:
    names = options.quants or tuple(QUANTS)
    rows = []
    for name in names:
        q = get_quant(name)
        try:
            m = ph.memory(q, hw, wl)
            dec = ph.decode(q, hw, wl)
        except _SIZING_ERRORS as exc:
            none6 = (None,) * 6  # weights, KV, total, verdict, decode, cheapest fit
            sel = q.name == chosen.name
            rows.append(QuantRow(q.name, q.description, engines_for(q), *none6, sel, str(exc)))
            continue
        cheapest = None
        if options.hardware_catalog:
            sizer = Sizer(
                model,
                q,
                wl,
                lambda mm, qq, hh, ww: ph.memory(qq, hh, ww),
                None,
                int(m.weights_bytes + m.kv_bytes),
            )
            cheapest = cheapest_fit(sizer, eligible(options.hardware_catalog))
        rows.append(
            QuantRow(
                q.name,
                q.description,
                engines_for(q),
                int(m.weights_bytes),
                int(m.kv_bytes),
                int(m.total_bytes),
                m.verdict,
                dec,
                cheapest,
                q.name == chosen.name,
            )
        )
    return tuple(rows)


def speed_section(model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload, table) -> SpeedSection:
    s = speed_mod.estimate_speed(model, quant, hw, wl, table)
    calibrated = bool(s.decode.calibrated and s.prefill.calibrated)
    basis = (
        "estimated from calibrated coefficients"
        if calibrated
        else "estimated from the pooled prior (UNCALIBRATED for this hardware family): wide interval"
    )
    return SpeedSection(
        from_estimate(s.decode),
        from_estimate(s.prefill),
        int(wl.n_prompt),
        s.ttft_s,
        s.ttft_lo_s,
        s.ttft_hi_s,
        s.ttft_prompt_tokens,
        from_estimate(s.aggregate),
        s.concurrency,
        s.per_sequence_tok_s,
        calibrated,
        basis,
        tuple(s.notes),
    )


def multi_device(ph: Physics, quant: QuantSpec, hw: HardwareSpec, wl: Workload, m) -> MultiDeviceSection:
    rows = []
    notes: list[str] = []
    counts = set(COUNTS) | {wl.n_devices}
    if not can_combine(hw):
        counts = {1, wl.n_devices}
        notes.append(
            f"{hw.id} ({hw.kind}) cannot be combined for tensor / pipeline parallelism: no 2-, 4- or "
            "8-device rows (discrete GPUs / NPUs with an interconnect only)"
        )
    for n in sorted(counts):
        w = replace(wl, n_devices=n)
        try:
            mm = ph.memory(quant, hw, w)
            dec = ph.decode(quant, hw, w).tok_s
            agg = ph.aggregate_tok_s(quant, hw, w)
        except _SIZING_ERRORS:
            continue
        per_dev = max((int(getattr(d, "total_bytes", 0)) for d in mm.per_device), default=int(mm.total_bytes))
        rows.append(ScalingRow(n, wl.split, per_dev, int(mm.total_bytes), mm.verdict, dec, agg))
    with_off = all_on = slowdown = None
    if wl.offload_bytes or wl.moe_offload_layers:
        try:
            with_off = ph.decode(quant, hw, wl).tok_s
            all_on = ph.decode(quant, hw, replace(wl, offload_bytes=0, moe_offload_layers=0)).tok_s
            slowdown = all_on / with_off if with_off else None
        except _SIZING_ERRORS:
            pass
    host_bw = hw.host_bandwidth_gbs or speed_mod.DEFAULT_HOST_BANDWIDTH_GBS
    off = OffloadSection(
        int(wl.offload_bytes),
        int(wl.moe_offload_layers),
        int(m.host_bytes or 0),
        host_bw,
        all_on,
        with_off,
        slowdown,
    )
    return MultiDeviceSection(wl.split, tuple(rows), off, tuple(notes))


def _ft_fits(total_bytes: int, hw: HardwareSpec, n: int) -> bool:
    """A training job sharded evenly over n devices fits when total / n <= FT_USABLE_FRACTION x memory."""
    return bool(hw.memory_bytes) and total_bytes / n <= FT_USABLE_FRACTION * hw.memory_bytes


def finetune_rows(
    model: ModelSpec,
    n_params: int,
    hw: HardwareSpec,
    wl: Workload,
    overhead_bytes: int,
    options: ReportOptions,
) -> tuple[FinetuneRow, ...]:
    rows = []
    pool = sorted(
        (
            (h.price_usd * n, h, n)
            for h in eligible(options.hardware_catalog)
            if h.price_usd
            for n in COUNTS
            if n == 1 or can_combine(h)
        ),
        key=lambda x: (x[0], x[1].id),
    )
    for e in estimate_all(model, n_params, options.finetune, overhead_bytes):
        rec = None
        for price, h, n in pool:
            if _ft_fits(e.total_bytes, h, n):
                rec = Candidate(
                    h.id,
                    h.name,
                    n,
                    h.memory_bytes * n,
                    e.total_bytes,
                    int(FT_USABLE_FRACTION * h.memory_bytes * n) - e.total_bytes,
                    price,
                    None,
                    None,
                    None,
                    f"cheapest configuration with {FT_USABLE_FRACTION:.0%} of memory >= total "
                    "(sharded evenly)",
                )
                break
        rows.append(
            FinetuneRow(
                e.method,
                e.label,
                e.weights_bytes,
                e.adapter_bytes,
                e.gradients_bytes,
                e.optimizer_bytes,
                e.activations_bytes,
                e.overhead_bytes,
                e.total_bytes,
                e.trainable_params,
                _ft_fits(e.total_bytes, hw, wl.n_devices),
                rec,
                e.assumptions,
            )
        )
    return tuple(rows)


def build_sections(
    model: ModelSpec, hw: HardwareSpec, quant: QuantSpec, wl: Workload, table, options: ReportOptions
) -> dict:
    """Every section of the report except the hardware/config facts; keys are Report field names."""
    warnings: list[str] = []
    ph = Physics(model, table)
    wb = weight_breakdown(model, quant)
    m = ph.memory(quant, hw, wl)
    if not get_engine(wl.engine).runs(quant):
        formats = ", ".join(engines_for(quant))
        warnings.append(f"{quant.name} is not a {wl.engine} format (formats of {formats})")
    try:
        spd = speed_section(model, quant, hw, wl, table)
    except _SIZING_ERRORS as exc:
        spd = None
        warnings.append(f"no speed estimate for {hw.id}: {exc}")
    if spd is not None and not spd.calibrated:
        warnings.append(
            "speed figures come from the pooled prior: no calibrated coefficients for "
            f"{hw.family}/{wl.engine}"
        )
    if m.verdict != "fits":
        warnings.append(
            f"{m.verdict}: {model.id} at {quant.name} needs more than the usable memory of "
            f"{wl.n_devices} x {hw.id}"
            if m.verdict == "does not fit"
            else f"fits only with {m.host_bytes / 2**30:.2f} GiB in host RAM"
        )
    decode = spd.decode.tok_s if spd else None
    aggregate = spd.aggregate.tok_s if spd else None
    cost = estimate_cost(
        hw,
        wl.n_devices,
        decode,
        aggregate,
        options.rates,
        options.usd_per_hour,
        options.hours_per_day,
        options.kwh_price_usd,
        options.purchase_usd,
    )
    floor = int(m.weights_bytes + m.kv_bytes)
    ctx_rows = context_rows(ph, model, quant, hw, wl, options.contexts)
    q_rows = quant_rows(ph, model, quant, hw, wl, options)
    sizer = Sizer(model, quant, wl, lambda mm, qq, hh, ww: ph.memory(qq, hh, ww), ph.decode_tok_s, floor)
    recs = recommend(sizer, hw, options.hardware_catalog, options.rates)
    ft_rows = finetune_rows(model, wb.n_params_total, hw, wl, int(m.overhead_bytes), options)
    elsewhere = [r.cheapest_fit.hardware_id for r in q_rows if r.cheapest_fit is not None]
    elsewhere += [r.recommended.hardware_id for r in ft_rows if r.recommended is not None]
    extra = [n for n in device_notes(elsewhere) if n not in recs.notes]
    if extra:
        recs = recs._replace(notes=recs.notes + tuple(extra))
    if wl.n_devices > 1 and not can_combine(hw):
        warnings.append(
            f"{hw.id} is a {hw.kind} device: several of them cannot be combined for tensor / pipeline "
            f"parallelism; the {wl.n_devices}-device figures assume they could"
        )
    commands = [get_engine(e).launch(model, quant, wl, int(m.weights_bytes)) for e in engine_names()]
    cinfo = CoefficientsInfo(
        getattr(table, "path", None),
        bool(getattr(table, "calibrated", False)),
        getattr(table, "created_utc", None),
        getattr(table, "input_hash", None),
    )
    return dict(
        model=model_facts(model, wb.n_params_total, wb.n_params_active),
        memory=memory_section(m, hw, wl.n_devices, table, wl.engine),
        kv=kv_section(ph, model, quant, hw, wl, m),
        context_scaling=ctx_rows,
        quant_matrix=q_rows,
        speed=spd,
        multi_device=multi_device(ph, quant, hw, wl, m),
        cost=cost,
        finetune=ft_rows,
        recommendations=recs,
        launch=tuple(launch_entry(c) for c in commands),
        coefficients=cinfo,
        chart_data=chart_data(ph, model, quant, hw, wl, options, ctx_rows, q_rows, floor),
        warnings=warnings,
    )


__all__ = ["build_sections", "Physics", "FT_USABLE_FRACTION"]
