"""Memory estimate per device: weights + KV/state + runtime + context overhead vs usable memory.

Placement (full offload, llama.cpp ``-ngl 999``):
* discrete devices (gpu / npu): with an engine whose profile says ``embedding_on_host`` (llama.cpp keeps the
  input layer on the CPU) the token embedding stays in host RAM and a tied embedding is duplicated on the
  device as the output head; the output buffer and the host-side compute buffer are host RAM;
* unified / cpu: one memory pool, so everything counts on the device.

Multi-device (``workload.n_devices`` = N):
* ``tp`` (llama.cpp ``-sm tensor`` / vLLM tensor parallel): matrices split N ways, 1-D tensors (norms, biases)
  replicated; KV split over min(N, n_kv_heads) ways (KV heads are replicated beyond that; the MLA latent is
  shared by all heads and replicated on every device); recurrent state split N ways; runtime and context
  overhead on every device;
* ``pp`` (layer split): device d holds layers [d*L/N, (d+1)*L/N) with their weights, KV and state; the output
  head and final norm sit on the last device; runtime and context overhead on every device;
* ``dp`` (attention data parallelism, vLLM ``--data-parallel-size N --enable-expert-parallel``, SGLang
  ``--enable-dp-attention``, TensorRT-LLM ``enable_attention_dp``): every device runs attention for its own
  ceil(n_seq / N) sequences, so it holds their whole KV and state (all heads: an MLA latent cache is no longer
  replicated N times) and every weight that is not a routed expert (attention, embeddings, head, dense FFN,
  shared experts: replicated, vLLM's layout; SGLang splits the dense FFN over the devices by default, a few GB
  less on DeepSeek-V3); routed experts are split N ways (expert parallel).  Of a dense model each device holds
  a whole replica.  A reserving engine's KV capacity is N devices' pools.

Offload: ``workload.offload_bytes`` of weights move to host RAM (spread evenly over the devices), and
``moe_offload_layers`` = k moves the routed experts of layers 0..k-1 to host RAM (llama.cpp ``--n-cpu-moe
k``).  A CPU device has no host to move them to (refused: ``CPU_OFFLOAD_ERROR``).  On unified memory the
offloaded weights leave the GPU working set but not the RAM: device totals + host bytes must stay within
max(usable_fraction_cpu x memory, the working-set limit) per device, else "does not fit"
(``UNIFIED_RAM_NOTE``) and no offload is suggested.

Usable memory per device = usable_fraction(kind) x memory (prior in estimator/physics/runtime.py), or the
device's GPU working-set limit when it has one (Apple: ``runtime.usable_device_bytes``).  Verdict:
"fits"
when every device's total <= usable; "fits with offload" when that holds only thanks to a requested offload;
otherwise "does not fit", with ``min_offload_bytes`` = the weight bytes that would have to leave the devices.

Engines that reserve memory up front (profile ``reserves_memory``: vLLM): each device reserves
gpu_memory_utilization x memory; weights, activation peak, CUDA graphs and the context overhead come out of it
and the KV cache gets the rest; an engine whose fraction is of the memory left free after them (profile
``reserves_free_memory``: TensorRT-LLM) gives the KV cache that fraction of M - fixed, so a device offers
fixed + fraction x (M - fixed) (``runtime.reserved_usable_bytes``).  kv_capacity_tokens = KV budget / KV bytes
per token at n_ctx (windowed layers at the cells the engine's ``kv_layout`` gives them per full-layer cell:
vLLM / TensorRT-LLM the window plus a block, SGLang its SWA ratio); max_concurrency = floor(capacity /
n_ctx).  It fits when the KV budget holds n_seq sequences of n_ctx tokens.  ``startup_kv``: the figures the
engine logs at startup for that budget (``EngineProfile.startup_kv`` on ``kv.cache_layers``: vLLM's block
manager, whose concurrency is an admission bound below max_concurrency for sliding-window models).  For a
recurrent hybrid without windowed layers the block manager's figures are the capacity too: a running request
of n_ctx tokens holds whole attention blocks (vLLM: 544 tokens for Qwen3-Next on a GPU) and a state page
padded to one block per state group, which the per-token division above does not see.  An engine that gives
the state a pool of its own (``EngineProfile.state_pool``: SGLang) leaves the KV the rest of the budget and
caps the running requests (``state_max_requests``).  In both cases n_seq above max_concurrency does not fit,
whatever the bytes (a note names the engine's limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import get_engine
from estimator.engines.base import StartupKV, StateDemand
from estimator.physics.kv import cache_layers, kv_cache, kv_cache_for, layer_token_bytes, state_bytes_per_seq
from estimator.physics.runtime import coerce, reserved_usable_bytes, runtime_buffers, usable_device_bytes
from estimator.physics.weights import weight_breakdown
from estimator.specs import (
    CHUNKED,
    FULL,
    GIB,
    SLIDING,
    SPLITS,
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    SpecError,
    Workload,
)

# A CPU device's memory is the host RAM: offloading weights to "host RAM" moves them nowhere (llama.cpp's
# --n-cpu-moe and -ngl do nothing in a CPU-only run).
CPU_OFFLOAD_ERROR = (
    "{name} is a CPU: its weights are in host RAM already, so --offload-gib / --n-cpu-moe free no memory; "
    "a smaller quant, a shorter context or a cheaper KV cache type does"
)
CPU_DOES_NOT_FIT_NOTE = (
    "on a CPU the host RAM is the device memory, so no offload frees any of it (llama.cpp's default "
    "mmap can still page a larger model file in from disk, at the disk's speed, which this estimate does not "
    "model)"
)

UNIFIED_RAM = "unified memory:"  # how the note below starts (the report's warning quotes the note)
UNIFIED_RAM_NOTE = (
    UNIFIED_RAM + " the GPU's working set and the weights offloaded to the CPU side share one RAM, of which "
    "{p}% ({g:,.2f} GiB) is left to a process; this needs {need:,.2f} GiB"
)


@dataclass(frozen=True)
class DeviceMemory:
    """One device's share (bytes)."""

    index: int
    weights_bytes: int
    kv_bytes: int
    runtime_bytes: int
    overhead_bytes: int
    total_bytes: int
    usable_bytes: int
    headroom_bytes: int
    utilization: float


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one configuration; totals are sums over devices (bytes).  host_bytes: host RAM needed for
    what stays off the devices (token embedding, output buffer, offloaded weights)."""

    weights_bytes: int
    kv_bytes: int
    runtime_bytes: int
    overhead_bytes: int
    total_bytes: int
    per_device: tuple[DeviceMemory, ...]
    usable_bytes: int
    headroom_bytes: int
    utilization: float
    verdict: str
    host_bytes: int
    kv_capacity_tokens: int | None
    max_concurrency: int | None
    min_offload_bytes: int
    engine: str
    coefficients: str
    notes: tuple[str, ...] = ()
    # the KV figures the engine logs at startup (EngineProfile.startup_kv: vLLM's block manager), None when
    # it logs none we reproduce
    startup_kv: StartupKV | None = None
    # most running requests a recurrent hybrid's own state pool admits (EngineProfile.state_pool: SGLang),
    # None when the state lives in the KV pool
    state_max_requests: int | None = None
    # the engine's compute buffers on the devices, part of runtime_bytes (RuntimeEstimate.compute_bytes x N)
    compute_bytes: int = 0
    # those buffers are the engine's graph replayed through its allocator (RuntimeEstimate.compute_replayed)
    compute_replayed: bool = False


@dataclass(frozen=True)
class KVSavings:
    """KV bytes at f16 and at each cheaper dtype, with the saving (bytes) vs f16."""

    n_ctx: int
    engine: str
    f16_bytes: int
    bytes_by_dtype: dict[str, int]
    saving_bytes: dict[str, int]


def _norm_bytes(model: ModelSpec, quant) -> int:
    wb = weight_breakdown(model, quant)
    return wb.by_class_bytes.get("norm", 0) + wb.by_class_bytes.get("bias", 0)


def estimate_memory(
    model: ModelSpec, quant: QuantSpec | str | None, hardware: HardwareSpec, workload: Workload, coeffs=None
) -> MemoryEstimate:
    """Per-device memory breakdown, usable memory, headroom and verdict (module docstring has the rules)."""
    wl = workload
    n = int(wl.n_devices)
    if n < 1:
        raise SpecError(f"number of devices must be >= 1 (got {n})")
    if wl.split not in SPLITS:
        raise SpecError(f"unknown split {wl.split!r}; one of {', '.join(SPLITS)}")
    if not hardware.memory_bytes:
        raise SpecError(f"hardware {hardware.id!r} has no memory size in the catalog")
    c = coerce(coeffs, wl.engine)
    wb = weight_breakdown(model, quant)
    kv = kv_cache_for(model, wl)
    rt = runtime_buffers(model, quant if not isinstance(quant, str) else None, hardware, wl, c)
    discrete = hardware.kind in ("gpu", "npu")
    on_cpu = hardware.kind == "cpu"
    if on_cpu and (wl.offload_bytes or wl.moe_offload_layers):
        raise SpecError(CPU_OFFLOAD_ERROR.format(name=hardware.name or hardware.id))
    notes: list[str] = []

    # weights on devices vs host
    host = 0
    dev_weights_total = wb.total_bytes
    profile = get_engine(wl.engine)
    embd_on_host = profile.embedding_on_host and discrete
    if embd_on_host:  # the input layer: token table(s), Gemma 4's per-layer table too
        host += wb.lookup_bytes
        dev_weights_total -= wb.lookup_bytes
        if model.tie_embeddings:
            dev_weights_total += wb.token_embd_bytes  # duplicated as the output head
    moe_off = 0
    if wl.moe_offload_layers:
        moe_off = sum(wb.per_layer_routed_bytes[: int(wl.moe_offload_layers)])
    off = int(wl.offload_bytes) + moe_off
    if off > dev_weights_total:
        raise SpecError(f"offload of {off} bytes exceeds the {dev_weights_total} weight bytes on the devices")
    host += off

    # per-device split
    per_w: list[float] = []
    per_kv: list[float] = []
    if n == 1:
        per_w, per_kv = [dev_weights_total - off], [kv.total_bytes]
    elif wl.split == "dp":
        routed = wb.routed_expert_bytes
        per_w = [dev_weights_total - routed + (routed - off) / n] * n
        local = kv_cache_for(model, wl, -(-int(wl.n_seq) // n)).total_bytes  # ceil(n_seq / N) sequences
        per_kv = [local] * n
    elif wl.split == "tp":
        rep = _norm_bytes(model, quant)
        per_w = [(dev_weights_total - rep - off) / n + rep] * n
        attn_kv = kv.total_bytes - kv.state_bytes
        ways = 1 if model.mla is not None else min(n, max(1, model.n_kv_heads))
        per_kv = [attn_kv / ways + kv.state_bytes / n] * n
    else:
        bounds = [(d * model.n_layers // n, (d + 1) * model.n_layers // n) for d in range(n)]
        layer_w = wb.per_layer_bytes
        head = dev_weights_total - sum(layer_w)  # output head, final norm (+ embedding when on the device)
        # the layers that hold a cache of their kind (a KV-shared layer holds none: ModelSpec.kv_shared)
        kinds = [k if not model.kv_shared(i) else "" for i, k in enumerate(model.layer_types)]
        for d, (lo, hi) in enumerate(bounds):
            w = sum(layer_w[lo:hi]) + (head if d == n - 1 else 0)
            w -= sum(wb.per_layer_routed_bytes[max(lo, 0) : min(hi, int(wl.moe_offload_layers))])
            per_w.append(w - int(wl.offload_bytes) / n)
            share = 0.0
            for kind, b in kv.by_kind_bytes.items():
                tot = kinds.count(kind)
                share += b * (kinds[lo:hi].count(kind) / tot if tot else 0)
            per_kv.append(share)

    runtime_dev = rt.compute_bytes + (0 if discrete else rt.output_bytes + rt.host_compute_bytes)
    if discrete:
        host += rt.output_bytes + rt.host_compute_bytes
    overhead = rt.context_overhead_bytes
    kv_cap = max_conc = startup = state_cap = admits = None
    if profile.reserves_memory:
        fixed = [w + runtime_dev + overhead for w in per_w]
        frac, of_free = wl.gpu_memory_utilization, profile.reserves_free_memory
        usable_of = [int(reserved_usable_bytes(hardware, c, frac, f, of_free)) for f in fixed]
        kv_budget = min(u - f for u, f in zip(usable_of, fixed, strict=True))
        per_tok = _kv_bytes_per_pool_token(model, wl, n)
        pools = n if wl.split == "dp" else 1  # each device's pool holds its own sequences
        split = None
        if model.state is not None and kv_budget > 0:
            state = sum(state_bytes_per_seq(model, wl.engine).values())
            demand = StateDemand(state // (1 if wl.split == "dp" else n), wl, per_tok or 0.0, model)
            split = profile.state_pool(int(kv_budget), demand)
        attn_budget = kv_budget if split is None else split[0]
        per_pool = max(0, int(attn_budget // per_tok)) if per_tok else None
        kv_cap = None if per_pool is None else pools * per_pool
        max_conc = None if per_pool is None else pools * (per_pool // int(wl.n_ctx))
        if split is not None:
            state_cap = pools * split[1]
            admits = "a state pool of its own"
            max_conc = None if max_conc is None else min(max_conc, state_cap)
        if kv_budget > 0:
            ways = n if wl.split == "tp" else 1
            layers = cache_layers(model, wl.kv_dtype, wl.engine, ways)
            per_rank = profile.startup_kv(layers, int(wl.n_ctx), int(kv_budget), hardware, wl)
            # dp: each rank logs its own pool's figures, so the instance logs no one figure
            startup = per_rank if wl.split != "dp" else None
            if per_rank is not None and model.state is not None and not any(x.span for x in layers):
                # a hybrid without windowed layers holds at n_ctx what it is admitted with: whole attention
                # blocks and a padded state page per state group (more with the prefix cache): the block
                # manager's figure is the steady state too, per pool
                kv_cap, max_conc = pools * per_rank.kv_cache_tokens, pools * int(per_rank.max_concurrency)
                admits = "whole attention blocks and a padded state page per request"
    else:
        usable_of = [usable_device_bytes(hardware, c)] * n
    devices = []
    for d in range(n):
        usable_dev = usable_of[d]
        tot = int(per_w[d]) + int(per_kv[d]) + runtime_dev + overhead
        devices.append(
            DeviceMemory(
                d,
                int(per_w[d]),
                int(per_kv[d]),
                runtime_dev,
                overhead,
                tot,
                usable_dev,
                usable_dev - tot,
                tot / usable_dev if usable_dev else float("inf"),
            )
        )
    total = sum(x.total_bytes for x in devices)
    usable = sum(x.usable_bytes for x in devices)
    fits = all(x.total_bytes <= x.usable_bytes for x in devices)
    overflow = sum(max(0, x.total_bytes - x.usable_bytes) for x in devices)
    # unified memory: the GPU's working set and what is offloaded to the CPU side share one RAM, of which a
    # process gets the CPU kind's usable fraction (the rest is the system's), or the working-set limit where
    # that was raised above it (iogpu.wired_limit_mb)
    unified = hardware.kind == "unified"
    mem_bytes = float(hardware.memory_bytes)
    per_ram = max(c.usable_fraction_cpu * mem_bytes, float(hardware.gpu_working_set_bytes or 0))
    ram = per_ram * n if unified else 0.0
    if fits and admits and max_conc is not None and wl.n_seq > max_conc:
        # the bytes add up, but the engine admits fewer requests: a hybrid's state is held per request
        verdict, min_off = "does not fit", 0
        notes.append(
            f"{profile.label} admits at most {max_conc:,} sequences of {int(wl.n_ctx):,} tokens here: the "
            f"recurrent state takes {admits}"
        )
    elif unified and total + host > ram:  # no offload frees any of the one RAM
        verdict, min_off = "does not fit", 0
        notes.append(
            UNIFIED_RAM_NOTE.format(
                p=round(100 * per_ram / mem_bytes), g=ram / GIB, need=(total + host) / GIB
            )
        )
    elif fits:
        verdict = "fits with offload" if off else "fits"
        min_off = 0
    elif on_cpu:  # the host RAM is the device's memory: no offload frees any of it
        verdict, min_off = "does not fit", 0
        notes.append(CPU_DOES_NOT_FIT_NOTE)
    else:
        verdict = "does not fit"
        min_off = overflow if overflow <= sum(x.weights_bytes for x in devices) else -1
        if min_off < 0:
            notes.append("even with every weight in host RAM the KV cache and buffers do not fit")
    if rt.coefficients == "prior":
        notes.append(
            "runtime buffers and context overhead from the uncalibrated prior (estimator/physics/runtime.py)"
        )
    return MemoryEstimate(
        weights_bytes=sum(x.weights_bytes for x in devices),
        kv_bytes=sum(x.kv_bytes for x in devices),
        runtime_bytes=runtime_dev * n,
        overhead_bytes=overhead * n,
        total_bytes=total,
        per_device=tuple(devices),
        usable_bytes=usable,
        headroom_bytes=usable - total,
        utilization=total / usable if usable else float("inf"),
        verdict=verdict,
        host_bytes=host,
        kv_capacity_tokens=kv_cap,
        max_concurrency=max_conc,
        state_max_requests=state_cap,
        min_offload_bytes=max(0, min_off),
        engine=wl.engine,
        coefficients=rt.coefficients,
        notes=tuple(notes),
        startup_kv=startup,
        compute_bytes=int(rt.compute_bytes) * n,
        compute_replayed=rt.compute_replayed,
    )


@dataclass(frozen=True)
class BandedCompute:
    """A MemoryEstimate's compute buffers under a measured band (coefficients.json ``memory_bands``: ratios
    of the engine's own buffers to the estimate), bytes over all devices."""

    compute_hi_bytes: int  # compute_bytes x the band's 95th-percentile ratio
    compute_max_bytes: int  # compute_bytes x its largest ratio
    total_hi_bytes: int  # total_bytes with the compute buffers at the 95th percentile
    # it fits, but on some device the headroom is smaller than that device's 95th-percentile excess
    tight: bool


def banded_compute(mem: MemoryEstimate, band: dict) -> BandedCompute:
    """``mem``'s compute buffers at ``band``'s 95th-percentile and largest ratios (``ratio_p95``,
    ``ratio_max``), the total with the former, and whether the fit is tight: a device's headroom under
    (ratio_p95 - 1) x its compute buffers (the devices hold equal compute buffers)."""
    hi, top = float(band["ratio_p95"]), float(band["ratio_max"])
    excess = (hi - 1.0) * mem.compute_bytes
    per_dev = excess / max(1, len(mem.per_device))
    return BandedCompute(
        compute_hi_bytes=int(mem.compute_bytes * hi),
        compute_max_bytes=int(mem.compute_bytes * top),
        total_hi_bytes=int(mem.total_bytes + max(0.0, excess)),
        tight=mem.verdict != "does not fit" and any(0 <= d.headroom_bytes < per_dev for d in mem.per_device),
    )


def _kv_bytes_per_pool_token(model: ModelSpec, wl: Workload, n: int) -> float:
    """KV bytes per token of one sequence on one device at n_ctx: a full layer's token, and a windowed layer's
    cells as the engine lays them out per full-layer cell (its ``kv_layout``: vLLM / TensorRT-LLM the window
    plus one block of n_ctx, SGLang's hybrid pool ``--swa-full-tokens-ratio`` of the full layers' tokens);
    under ``dp`` the device that runs the sequence holds it whole."""
    per = layer_token_bytes(model, wl.kv_dtype, wl.engine)
    layout = get_engine(wl.engine).kv_layout(
        model, int(wl.n_ctx), 1, int(wl.n_ubatch), swa_full=wl.swa_full, unified=wl.kv_unified, pad=wl.kv_pad
    )
    share = min(1.0, layout.windowed / layout.full) if layout.full else 1.0
    b = per[FULL] + (per[SLIDING] + per[CHUNKED]) * share
    if n > 1 and wl.split == "tp":
        b /= 1 if model.mla is not None else min(n, max(1, model.n_kv_heads))
    elif n > 1 and wl.split == "pp":
        b /= n
    return b  # dp: a device holds its sequences' whole rows


def kv_savings(
    model: ModelSpec,
    n_ctx: int,
    engine: str = "llama.cpp",
    n_seq: int = 1,
    dtypes: tuple[str, ...] | None = None,
) -> KVSavings:
    """KV cache at f16 vs the cheaper dtypes the engine offers (its profile's ``cheaper_kv_dtypes``)."""
    dtypes = dtypes or get_engine(engine).cheaper_kv_dtypes
    f16 = kv_cache(model, n_ctx, "f16", n_seq, engine).total_bytes
    by = {dt: kv_cache(model, n_ctx, dt, n_seq, engine, flash_attn=True).total_bytes for dt in dtypes}
    return KVSavings(n_ctx, engine, f16, by, {dt: f16 - b for dt, b in by.items()})


__all__ = ["DeviceMemory", "KVSavings", "MemoryEstimate", "estimate_memory", "kv_savings"]
