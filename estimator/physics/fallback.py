"""The speed path a support verdict implies: which share of the work runs on the device, which on the host
CPU, how often a forward pass switches between them, and how wide the interval must be.

``speed_path(model, quant, hardware, workload)`` reads ``estimator.physics.support.judge`` and returns
``None`` for the device's native path, else a ``SpeedPath``; ``estimator.physics.speed`` applies it (its
``decode_step_s`` / ``prefill_s`` stay the only time formulas: the device part and the host part are each
timed by them, on their own hardware and coefficient set).

Host CPU fallback (llama.cpp keeps the matrices whose type the backend refuses in host RAM and runs their
matmuls on the CPU):

    t = t_device(features x (1 - s)) + t_host(features x s) + n_switch x t_split_s

* s = ``host_share``: the share of the per-token matmul bytes whose type falls back (``support``); the host
  part reads them at the host's memory bandwidth with the host CPU's coefficient set, the device part reads
  the rest (and the KV cache, unless attention falls back too).
* the host: ``host_device(hardware)``, a CPU with the catalog's ``host_bandwidth_gbs`` (for a discrete GPU /
  NPU the catalog's ASSUMED 89.6 GB/s = dual-channel DDR5-5600; a unified-memory machine's own bandwidth) and
  no datasheet TFLOPS, so the CPU coefficient sets apply (calibrated pooled ``cpu`` sets, else the CPU prior).
  ASSUMPTION: the host of an NPU card is a desktop-class CPU; a server host with more memory channels reads
  faster, a slow or busy host slower (the interval covers both).
* n_switch: 2 x host segments per pass.  Per layer, the host runs up to three segments: the attention input
  projections (q/k/v), the output projection, and the FFN (gate/up and down merge: the activation between
  them has no weight and runs where its inputs are); rope and attention stay on the device (the KV cache is
  there) and the norms too (their weights are device tensors).  The output head adds one segment per pass
  when its type falls back; attention over a KV cache the device cannot read adds one per layer.
* ``t_split_s`` (coefficients PARAMS, decode; never fitted): ASSUMPTION 0.5 ms per switch = a stream
  synchronisation, two small copies over PCIe and the relaunch of a device segment's operators without graph
  capture.  Its uncertainty enters the interval as x1/3 .. x3.

Expert copy (``expert_copy``: llama.cpp's CANN MUL_MAT_ID for F16 / F32 experts): for every token the
device gathers that token's n_used experts into a scratch buffer (IndexSelect) and multiplies them there
(BatchMatMul), so each token's routed experts cross memory three times (read, write, read back) instead of
the batch reading the union of its experts once:

    device weight bytes += max(0, EXPERT_COPY_PASSES x tokens x routed_token_bytes - routed union bytes)

with tokens = the decode batch or a prefill pass's ubatch tokens and routed_token_bytes = routed expert
bytes x n_used / n_experts (one token's experts).  Decode of one sequence reads its experts 3x; a 512-token
prefill pass reads 512 tokens' experts 3x instead of (nearly) all experts once.

``cpu_backend`` (vLLM's macOS build: CPU cores only): the whole model on ``host_device``; no device part.
``flash_attn_off``: the path's ``flash_attn`` is False, so the features are built without flash attention
(llama.cpp materialises the KQ scores in prefill).  ``weight_only``: no FP8 tensor rate for the weights.

Intervals: an uncalibrated prediction on a less mature backend (support ``backend`` rows) widens its lower
bound by the maturity's widening (ln units); every fallback path is uncalibrated by construction.  The
coefficients file carries it where calibration could measure it (``model.maturity``: how far below the
pooled interval the speeds of backends held out one at a time fall, calibration.maturity); otherwise the
shipped ``MATURITY_LOG_LO`` applies: ASSUMPTION, developing -0.35 (x0.70) and experimental -1.0 (x0.37), the
latter for backends with one measured family at most (OpenCL on Adreno, CANN on the 310P).  The published
Atlas 300I Duo rows (shared/reference/published S13: Qwen3-4B Q4_K_M 2.45 tok/s on 8x 310P3,
gemma-4-26B-A4B ~8 / 7 / 6 tok/s) fall inside the fallback intervals (tests/test_support.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from estimator.physics.coefficients import param
from estimator.physics.support import SupportVerdict, judge
from estimator.physics.weights import class_types, weight_breakdown
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

DEFAULT_HOST_BANDWIDTH_GBS = 89.6  # dual-channel DDR5-5600 (the catalog's host assumption)
DEFAULT_T_SPLIT_S = param("decode", "t_split_s").default
SPLIT_FACTOR = 3.0  # t_split_s is known to x1/3 .. x3
EXPERT_COPY_PASSES = 3.0  # IndexSelect reads and writes each selected expert, BatchMatMul reads it back
# extra ln-units below the interval of an uncalibrated prediction, by backend maturity ("" = not listed)
MATURITY_LOG_LO = {"mature": 0.0, "developing": -0.35, "experimental": -1.0, "": -0.35}

# matmul tensor classes by host segment (see module doc)
_SEGMENTS = {
    "attn_in": ("attn_q", "attn_k", "attn_v", "attn_qkv", "attn_q_a", "attn_q_b", "attn_kv_a_mqa",
                "attn_kv_b"),
    "attn_out": ("attn_output",),
    "ffn": ("ffn_gate", "ffn_up", "ffn_down", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps",
            "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"),
}  # fmt: skip


@dataclass(frozen=True)
class SpeedPath:
    """How a configuration that is not simply native runs (module doc).

    host: the host CPU device (None when nothing runs there); host_share: share of the matmul bytes on the
    host; host_kv: attention over the KV cache on the host; device_part: False when everything runs on the
    host (cpu_backend); switches_per_layer / switches_per_pass: device<->host switches of one forward pass;
    flash_attn / weight_only: the effective workload flag and whether FP8 tensor rates are off;
    routed_token_bytes: one token's routed expert bytes when the device copies them per token (expert copy),
    else 0.
    """

    verdict: SupportVerdict
    host: HardwareSpec | None
    host_share: float
    host_kv: bool
    device_part: bool
    switches_per_layer: int
    switches_per_pass: int
    flash_attn: bool
    weight_only: bool
    routed_token_bytes: float = 0.0

    def workload(self, wl: Workload) -> Workload:
        """The workload the engine really runs (flash attention off when it falls back)."""
        return wl if wl.flash_attn == self.flash_attn else replace(wl, flash_attn=self.flash_attn)

    def switches(self, n_layers: int) -> int:
        """Device<->host switches of one forward pass (decode step or prefill ubatch pass)."""
        return self.switches_per_layer * n_layers + self.switches_per_pass


def host_device(hardware: HardwareSpec) -> HardwareSpec:
    """The host CPU a fallback runs on: kind cpu, the device's host bandwidth (module doc: an assumption for
    discrete devices), no datasheet TFLOPS (the CPU coefficient sets carry an effective rate)."""
    bw = hardware.host_bandwidth_gbs or DEFAULT_HOST_BANDWIDTH_GBS
    return HardwareSpec(
        id=f"host-of-{hardware.id}",
        name=f"host CPU of {hardware.name} (assumed {bw:g} GB/s)",
        vendor="",
        family="host-cpu",
        kind="cpu",
        memory_bytes=None,
        bandwidth_gbs=bw,
        bf16_tflops=None,
        host_bandwidth_gbs=bw,
        status="assumed",
        source="estimator.physics.fallback.host_device (assumption)",
    )


def _segments(model: ModelSpec, quant: QuantSpec | None, host_types: tuple[str, ...]) -> tuple[int, int]:
    """(host segments per layer, per pass) for the matmuls of ``host_types`` (module doc)."""
    host = {t.lower() for t in host_types}
    types = class_types(model, quant)
    per_layer = sum(1 for classes in _SEGMENTS.values() if any(types.get(c, set()) & host for c in classes))
    # the output head: a recipe types it as "output" (a tied embedding takes that type too); a GGUF file of a
    # tied model has no output tensor, its token_embd is the head
    head = types.get("output") or types.get("token_embd", set())
    return per_layer, int(bool(head & host))


def speed_path(model: ModelSpec, quant: QuantSpec | None, hardware: HardwareSpec, workload: Workload):
    """The SpeedPath of a configuration, or None when it runs natively (or is unlisted / unsupported: the
    device's native path is then the only one to estimate, and the report says the rest)."""
    v = judge(model, quant, hardware, workload)
    if v.status != "fallback":
        return None
    flash_attn = v.flash_attn if workload.flash_attn else False
    if not (v.uses_host or v.weight_only or flash_attn != workload.flash_attn or v.expert_copy):
        return None  # e.g. host_copy between devices: a note, no change to the speed physics
    per_layer, per_pass = (0, 0) if v.cpu_backend else _segments(model, quant, v.host_types)
    if v.host_kv and not v.cpu_backend:
        per_layer += 1
    return SpeedPath(
        verdict=v,
        host=host_device(hardware) if v.uses_host else None,
        host_share=v.host_share,
        host_kv=v.host_kv or v.cpu_backend,
        device_part=not v.cpu_backend,
        switches_per_layer=2 * per_layer,
        switches_per_pass=2 * per_pass,
        flash_attn=flash_attn,
        weight_only=v.weight_only,
        routed_token_bytes=_routed_token_bytes(model, quant) if v.expert_copy else 0.0,
    )


def _routed_token_bytes(model: ModelSpec, quant: QuantSpec | None) -> float:
    """Bytes of one token's routed experts: routed expert bytes x n_used / n_experts."""
    if model.moe is None or not model.moe.n_experts:
        return 0.0
    wb = weight_breakdown(model, quant)
    return float(wb.routed_expert_bytes) * model.moe.n_experts_used / model.moe.n_experts


def _copy_extra(path: SpeedPath, tokens: float, union_bytes: float) -> float:
    """Device bytes the per-token expert copy adds to a pass over ``tokens`` tokens (module doc)."""
    if not path.routed_token_bytes:
        return 0.0
    return max(0.0, EXPERT_COPY_PASSES * tokens * path.routed_token_bytes - union_bytes)


def split_decode(f, path: SpeedPath):
    """(device features, host features or None) of one decode step's ``DecodeFeatures`` (module doc)."""
    s = path.host_share
    dev = replace(
        f,
        weight_bytes=f.weight_bytes * (1.0 - s) + _copy_extra(path, f.batch, f.expert_union_bytes),
        expert_union_bytes=f.expert_union_bytes * (1.0 - s),
        kv_bytes=0.0 if path.host_kv else f.kv_bytes,
        flops_per_token=f.flops_per_token * (1.0 - s),
        fp8=f.fp8 and not path.weight_only,
    )
    if path.host is None:
        return dev, None
    host = replace(
        f,
        weight_bytes=f.weight_bytes * s,
        expert_union_bytes=f.expert_union_bytes * s,
        kv_bytes=f.kv_bytes if path.host_kv else 0.0,
        host_bytes=0.0,
        flops_per_token=f.flops_per_token * s,
        n_devices=1,
        split="tp",
        fp8=False,
    )
    return dev, host


def split_prefill(f, path: SpeedPath):
    """(device features, host features or None) of a ``PrefillFeatures`` (module doc)."""
    s = path.host_share
    attn_dev = 0.0 if path.host_kv else 1.0
    dev = replace(
        f,
        flops=f.flops * (1.0 - s),
        expert_flops=f.expert_flops * (1.0 - s),
        gemm_outputs=f.gemm_outputs * (1.0 - s),
        expert_gemm_outputs=f.expert_gemm_outputs * (1.0 - s),
        weight_bytes=f.weight_bytes * (1.0 - s) + _copy_extra(path, f.ubatch_tokens, f.expert_union_bytes),
        attn_flops=f.attn_flops * attn_dev,
        kq_bytes=f.kq_bytes * attn_dev,
        fp8=f.fp8 and not path.weight_only,
    )
    if path.host is None:
        return dev, None
    host = replace(
        f,
        flops=f.flops * s,
        expert_flops=f.expert_flops * s,
        gemm_outputs=f.gemm_outputs * s,
        expert_gemm_outputs=f.expert_gemm_outputs * s,
        weight_bytes=f.weight_bytes * s,
        attn_flops=f.attn_flops * (1.0 - attn_dev),
        kq_bytes=f.kq_bytes * (1.0 - attn_dev),
        host_bytes=0.0,
        pipeline_factor=1.0,
        n_devices=1,
        split="tp",
        fp8=False,
    )
    return dev, host


def maturity_log_lo(
    verdict: SupportVerdict | None, calibrated: Callable[[str], float | None] | None = None
) -> float:
    """Extra ln-units below an uncalibrated interval for the verdict's backend maturity (0 when native on a
    mature backend or when no verdict is known).  ``calibrated(maturity)``: the coefficients file's widening
    (``CoefficientTable.maturity_log_lo``: leave-one-backend-out, calibration.maturity), used where it has
    one; else ``MATURITY_LOG_LO``."""
    if verdict is None or verdict.status in ("unlisted",):
        return 0.0
    if verdict.maturity == "mature":
        return MATURITY_LOG_LO["mature"]
    fitted = calibrated(verdict.maturity) if calibrated is not None and verdict.maturity else None
    return fitted if fitted is not None else MATURITY_LOG_LO.get(verdict.maturity, MATURITY_LOG_LO[""])
