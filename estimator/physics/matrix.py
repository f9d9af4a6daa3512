"""Vectorised sizing matrix: every model x device x quant x context at once (numpy).

Numbers equal the scalar path (estimator.physics.memory.estimate_memory and estimator.physics.speed's
decode_step_s of tg_features) point for point; tests/test_matrix.py checks that on random samples.  The
scalar physics is evaluated once per axis
combination that it depends on, then broadcast:

* weights per (model, quant): ``weight_breakdown`` -> bytes on each device (token embedding in host RAM on
  discrete devices under llama.cpp; tensor parallel: (weights - norms) / N + norms per device);
* KV per (model, context): ``kv_cache`` (per device: (attention KV) / ways + state / N, ways = 1 for MLA,
  else min(N, n_kv_heads));
* runtime per (model, context, device kind): ``runtime_buffers`` (compute buffer, and the output buffer on
  unified / CPU devices) + the device context overhead;
* usable per device: ``runtime.usable_device_bytes``: usable_fraction(kind) x memory, or the device's GPU
  working-set limit (Apple); an engine that reserves memory (vLLM / SGLang) takes gpu_memory_utilization of
  it, with the fraction capped at 1.

total_bytes = N x (floor(weights/dev) + floor(KV/dev) + runtime + overhead);
fits = per-device total <= usable; for an engine whose fraction is of the memory left free after weights and
buffers (TensorRT-LLM), fits = KV/dev <= fraction x (usable - fixed), fixed = the rest of the total.

decode_tok_s: 1 / mean decode step time of one sequence (tg{n_gen}) from ``workload.n_depth`` (or from the
context itself with ``decode_at_context=True``), using each device's decode coefficient set:
the step time is ``speed.step_s`` itself, applied to array features and the devices' stacked
``speed.DecodeRates`` (one formula for the scalar and the vectorised path).  Devices without bandwidth get
NaN; devices
without a
memory size never fit.  Only ``split="tp"`` (or one device) and no offload are supported here.

numpy is imported here; keep this module off the ``report`` path.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from estimator.engines import get_engine
from estimator.physics import speed
from estimator.physics.coefficients import CoefficientTable
from estimator.physics.kv import kv_cache_for
from estimator.physics.runtime import coerce, reserved_usable_bytes, runtime_buffers, usable_device_bytes
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

KINDS = ("gpu", "npu", "unified", "cpu")
DEFAULT_CONTEXTS = (4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True)
class Matrix:
    """Results on axes (model i, hardware j, quant k, context l).  Bytes are totals over n_devices devices.

    weights_bytes[i, j, k], kv_bytes[i, l], total_bytes[i, j, k, l] (int64), fits[i, j, k, l] (bool),
    decode_tok_s[i, j, k, l] (float64, NaN where the device lacks bandwidth), applicable[k] (engine supports
    the quant), within_context[i, l] (context <= the model's maximum), coefficients[j] (decode set label).
    """

    models: tuple[ModelSpec, ...]
    hardware: tuple[HardwareSpec, ...]
    quants: tuple[QuantSpec, ...]
    contexts: tuple[int, ...]
    workload: Workload
    weights_bytes: np.ndarray
    kv_bytes: np.ndarray
    total_bytes: np.ndarray
    fits: np.ndarray
    decode_tok_s: np.ndarray
    usable_bytes: np.ndarray
    applicable: np.ndarray
    within_context: np.ndarray
    coefficients: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return self.total_bytes.shape

    def point(self, i: int, j: int, k: int, l: int) -> dict:  # noqa: E741 - axis names
        """One cell as plain Python values."""
        tok_s = float(self.decode_tok_s[i, j, k, l])
        return {
            "model": self.models[i].id,
            "hardware": self.hardware[j].id,
            "quant": self.quants[k].name,
            "n_ctx": self.contexts[l],
            "weights_bytes": int(self.weights_bytes[i, j, k]),
            "kv_bytes": int(self.kv_bytes[i, l]),
            "total_bytes": int(self.total_bytes[i, j, k, l]),
            "fits": bool(self.fits[i, j, k, l]),
            "decode_tok_s": None if np.isnan(tok_s) else tok_s,
            "coefficients": self.coefficients[j],
        }


def _device_weights(model: ModelSpec, quant: QuantSpec, engine: str, n: int) -> tuple[float, float]:
    """(per-device weight bytes on a discrete device, on a unified/CPU device), before flooring."""
    from estimator.physics.memory import (
        _norm_bytes,  # the replicated 1-D tensors, same helper as the scalar path
    )
    from estimator.physics.weights import weight_breakdown

    wb = weight_breakdown(model, quant)
    out = []
    for discrete in (True, False):
        dev = wb.total_bytes
        if get_engine(engine).embedding_on_host and discrete:
            dev -= wb.lookup_bytes
            if model.tie_embeddings:
                dev += wb.token_embd_bytes
        if n > 1:
            rep = _norm_bytes(model, quant)
            dev = (dev - rep) / n + rep
        out.append(dev)
    return out[0], out[1]


def _kind_reference(kind: str) -> HardwareSpec:
    return HardwareSpec(
        id=f"ref-{kind}",
        name=kind,
        vendor="",
        family="",
        kind=kind,
        memory_bytes=1,
        bandwidth_gbs=1.0,
        bf16_tflops=1.0,
    )


def build_matrix(
    models,
    hardware,
    quants,
    contexts=DEFAULT_CONTEXTS,
    table: CoefficientTable | None = None,
    workload: Workload | None = None,
    decode_at_context: bool = False,
) -> Matrix:
    """Evaluate the whole grid.  ``workload`` supplies engine, kv_dtype, n_seq, n_devices, n_ubatch,
    flash_attn, n_gen, n_depth (its n_ctx is replaced by each context)."""
    from estimator.physics.coefficients import load_coefficients

    table = table if table is not None else load_coefficients()
    wl = workload or Workload()
    if wl.offload_bytes or wl.moe_offload_layers:
        raise SpecError("the matrix does not model offload; use the scalar estimator")
    n = max(int(wl.n_devices), 1)
    if n > 1 and wl.split != "tp":
        raise SpecError("the matrix supports tensor-parallel split only")
    models, hardware, quants = tuple(models), tuple(hardware), tuple(quants)
    contexts = tuple(int(c) for c in contexts)
    M, Q, C = len(models), len(quants), len(contexts)  # noqa: N806
    mem_c = coerce(table.memory_for(wl.engine), wl.engine)
    kind_idx = np.array([KINDS.index(h.kind) if h.kind in KINDS else 0 for h in hardware])
    discrete = np.isin(kind_idx, (0, 1))

    # --- memory ---------------------------------------------------------------------------------------
    w_dev = np.empty((M, Q, 2))  # [..., 0] discrete, [..., 1] unified / cpu
    for i, m in enumerate(models):
        for k, q in enumerate(quants):
            w_dev[i, k] = _device_weights(m, q, wl.engine, n)
    w_floor = np.floor(w_dev)
    w_per_hw = np.where(discrete[None, :, None], w_floor[:, None, :, 0], w_floor[:, None, :, 1])  # [M,H,Q]

    kv_dev = np.empty((M, C))
    rt_dev = np.empty((M, C, len(KINDS)))
    ovh = np.empty(len(KINDS))
    refs = [_kind_reference(kind) for kind in KINDS]
    for i, m in enumerate(models):
        for l, ctx in enumerate(contexts):  # noqa: E741
            cw = replace(wl, n_ctx=ctx)
            kv = kv_cache_for(m, cw)
            if n == 1:
                kv_dev[i, l] = kv.total_bytes
            else:
                ways = 1 if m.mla is not None else min(n, max(1, m.n_kv_heads))
                kv_dev[i, l] = (kv.total_bytes - kv.state_bytes) / ways + kv.state_bytes / n
            for kk, ref in enumerate(refs):
                rt = runtime_buffers(m, None, ref, cw, mem_c)
                disc = ref.kind in ("gpu", "npu")
                rt_dev[i, l, kk] = rt.compute_bytes + (0 if disc else rt.output_bytes + rt.host_compute_bytes)
                ovh[kk] = rt.context_overhead_bytes
    kv_floor = np.floor(kv_dev)
    rt_hw = rt_dev[:, :, kind_idx] + ovh[kind_idx][None, None, :]  # [M,C,H]
    per_dev = w_per_hw[:, :, :, None] + kv_floor[:, None, None, :] + rt_hw.transpose(0, 2, 1)[:, :, None, :]
    mem = np.array([float(h.memory_bytes or 0) for h in hardware])
    profile = get_engine(wl.engine)
    of_free = profile.reserves_memory and profile.reserves_free_memory
    reserve = wl.gpu_memory_utilization if profile.reserves_memory and not of_free else None
    usable = np.array([usable_device_bytes(h, mem_c, reserve) for h in hardware])
    usable = np.where(mem > 0, usable, -1).astype(np.float64)
    if of_free:  # the KV pool is a fraction of what weights and buffers leave
        fixed = per_dev - kv_floor[:, None, None, :]
        offered = np.stack(
            [reserved_usable_bytes(h, mem_c, wl.gpu_memory_utilization, fixed[:, j], True)
             for j, h in enumerate(hardware)],
            axis=1,
        )  # fmt: skip
        fits = (per_dev <= offered) & (usable > 0)[None, :, None, None]
    else:
        fits = per_dev <= usable[None, :, None, None]
    total = (per_dev * n).astype(np.int64)

    # --- decode speed ----------------------------------------------------------------------------------
    tok_s = _decode_tok_s(models, hardware, quants, contexts, table, wl, decode_at_context)

    return Matrix(
        models=models,
        hardware=hardware,
        quants=quants,
        contexts=contexts,
        workload=wl,
        weights_bytes=(w_per_hw * n).astype(np.int64),
        kv_bytes=(kv_floor * n).astype(np.int64),
        total_bytes=total,
        fits=fits,
        decode_tok_s=tok_s,
        usable_bytes=(usable * n).astype(np.int64),
        applicable=np.array([get_engine(wl.engine).runs(q) for q in quants]),
        within_context=np.array([[c <= m.max_context for c in contexts] for m in models]),
        coefficients=tuple(_label(table, h, wl.engine) for h in hardware),
    )


def _label(table: CoefficientTable, h: HardwareSpec, engine: str) -> str:
    return table.lookup(h, engine, "decode").label


def _stacked_rates(hardware, table, engine: str, fp8: bool, kernel_class: str) -> speed.DecodeRates:
    """The devices' ``speed.DecodeRates`` stacked field by field into arrays of shape [1, H, 1] (NaN where a
    device lacks the figure), so ``speed.step_s`` broadcasts over models and contexts."""
    rows = []
    for h in hardware:
        _, _, p, _ = speed.merged_params(table, h, engine)
        try:
            rows.append(speed.decode_rates(h, p, engine, fp8, kernel_class))
        except ValueError:  # no bandwidth: every figure of this device is NaN
            rows.append(None)
    cols = {}
    for name in ("bw_bs", "host_bw_bs", "flops_s", "link_bs", "t_fixed_s", "t_layer_s", "moe_route_s",
                 "t_allreduce_s", "weight_rel", "host_link_bs"):  # fmt: skip
        vals = [np.nan if r is None or getattr(r, name) is None else getattr(r, name) for r in rows]
        cols[name] = np.array(vals, dtype=float)[None, :, None]
    return speed.DecodeRates(**cols)


def _decode_tok_s(models, hardware, quants, contexts, table, wl, decode_at_context) -> np.ndarray:
    """Decode tok/s [M, H, Q, C] through ``speed.step_s`` on array features.

    The features of tg{n_gen} (``speed.tg_features``) are built once per model and context; the weight
    bytes a step reads (``speed.weights_read``) once per model and quant.  One sequence: the mean features of
    the tg depths (``speed.mean_features``, exact: no compute roof); several: the mean step over the depths.
    """
    M, H, Q, C = len(models), len(hardware), len(quants), len(contexts)  # noqa: N806
    b = max(int(wl.n_seq), 1)
    n_gen = max(int(wl.n_gen), 1)
    starts = list(contexts) if decode_at_context else [int(wl.n_depth)] * C
    out = np.empty((M, H, Q, C))
    if not (M and Q and C):
        return out
    tg = [[speed.tg_features(m, quants[0], wl, d, n_gen) for d in starts] for m in models]
    if b == 1:
        tg = [[[speed.mean_features(fs)] for fs in row] for row in tg]
    n_d = len(tg[0][0])

    def column(name: str, dd: int) -> np.ndarray:
        """One feature at depth index dd as an [M, 1, C] array."""
        return np.array([[getattr(fs[dd], name) for fs in row] for row in tg], dtype=float)[:, None, :]

    def per_model(fn) -> np.ndarray:
        return np.array([fn(m) for m in models], dtype=float)[:, None, None]

    for k, q in enumerate(quants):
        # the decode kernel class of each model's weights in this quant ([M, 1, 1] ratios of the sets)
        classes = [speed.engine_class(speed.decode_kernel_class(m, q), wl.engine) for m in models]
        by_class = {c: _stacked_rates(hardware, table, wl.engine, speed.is_fp8(q), c) for c in set(classes)}
        rates = by_class[classes[0]]
        if len(by_class) > 1:
            rel = np.concatenate([by_class[c].weight_rel for c in classes], axis=0)
            rates = replace(rates, weight_rel=rel)
        read = [speed.weights_read(m, q, b) for m in models]  # (device, host, union) bytes
        steps = np.zeros((M, H, C))
        for dd in range(n_d):
            f = replace(
                tg[0][0][dd],
                weight_bytes=np.array([r[0] for r in read])[:, None, None],
                host_bytes=np.array([r[1] for r in read])[:, None, None],
                kv_bytes=column("kv_bytes", dd),
                flops_per_token=column("flops_per_token", dd),
                n_layers=per_model(lambda m: m.n_layers),
                n_moe_layers=per_model(speed.n_moe_layers),
                hidden_size=per_model(lambda m: m.hidden_size),
            )
            with np.errstate(invalid="ignore", divide="ignore"):
                steps = steps + speed.step_s(f, rates)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, k, :] = 1.0 / (steps / n_d)
    return out


def fit_table(
    matrix: Matrix, hardware_id: str, n_ctx: int, quant_order: tuple[str, ...] | None = None
) -> list:
    """Per model: the first quant (in ``quant_order``, default the matrix order) that fits on the device at
    n_ctx, with total bytes, usable bytes and decode tok/s; fitting models first by decode speed."""
    j = [h.id for h in matrix.hardware].index(hardware_id)
    l = matrix.contexts.index(int(n_ctx))  # noqa: E741
    names = [q.name for q in matrix.quants]
    order = [names.index(q) for q in (quant_order or names) if q in names]
    rows = []
    for i, m in enumerate(matrix.models):
        best = next(
            (
                k
                for k in order
                if matrix.applicable[k] and matrix.within_context[i, l] and matrix.fits[i, j, k, l]
            ),
            None,
        )
        rows.append(matrix.point(i, j, best, l) if best is not None else {"model": m.id, "fits": False})
    rows.sort(key=lambda r: (not r["fits"], -(r.get("decode_tok_s") or 0.0), r["model"]))
    return rows
