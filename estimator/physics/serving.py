"""Serving at concurrency: TTFT, TPOT and throughput of an engine answering many requests at once.

Units: seconds, bytes, FLOP, tokens; ``*_tok_s`` tokens per second.

**Load.**  ``concurrency`` C clients each send a request of ``isl`` prompt tokens asking for ``osl`` output
tokens and send the next one as soon as it is answered (a closed loop: ``vllm bench serve --max-concurrency
C``, mode ``"serve"``); or C requests handed over at once and timed to the last token (offline
``LLM.generate``, mode ``"batch"``).

**Engine.**  Its profile's ``SchedulerSpec`` (estimator.engines): steps of at most B = ``max_batched_tokens``
tokens, at most S = ``max_seqs`` running requests, graph-captured step sizes, and whether a step mixes prompt
chunks with decode tokens (vLLM V1, llama-server) or runs prefill batches as steps of their own (SGLang).  The
KV pool holds K = ``kv_capacity_tokens`` tokens (estimator.physics.memory; unbounded when the engine sizes
the cache per slot); a recurrent hybrid whose state has a pool of its own (SGLang) runs at most the requests
that pool admits (``pool_capacity``: S = min(S, state_max_requests)).

**One step** carrying n_d decode tokens (one per request in its decode phase) and u prompt tokens is the
decode step formula of estimator.physics.speed (``speed.step_s``) applied to the step's features
(``step_features``)::

    T       = n_d + u;  the GEMMs compute pad(ceil(T)) rows when the engine captured a graph of that size
    weights = dense bytes x replicas + routed-expert bytes x (1 - (1 - k/E)^T) / bw_rel_moe
              (expert union, as decode; bw_rel_moe <= 1: the grouped GEMMs of a MoE layer, a few rows per
              expert, stream their weights at a lower fraction of the bandwidth than one dense GEMM)
    KV      = n_d x kv_read(depth) x N / kv_ways x bw_eff / kv_bw_eff              (read at the KV efficiency)
    FLOPs   = pad(T) x (dense + expert / flops_rel_moe) FLOPs per token,  GEMM rate = peak(format) x flops_eff
              (x flops_rel_fp4 for 4-bit float weights)
    t(n_d,u)= step_s(...)          [t_fixed + t_layer L + moe_route L_moe + max(t_mem, t_comp) + all-reduces]
              + t_seq_s x n_d + (n_d attn_decode / attn_decode_eff + u attn_prompt / attn_eff) / (N x peak)
              (peak: the bf16 rate; two attention efficiencies, since a decode kernel reads one query per
              request against the cache, an MLA decode multiplying its absorbed form on the few heads one
              device holds, and a prompt chunk is a dense attention; a set without attn_decode_eff, the
              decode step's, charges both at attn_eff)
    all-reduces = 2 L x (t_allreduce_s + 2 (N - 1) / N x T x hidden x 2 B / (link one way x link_eff))
              (link_eff <= 1, fitted per engine: the share of the link's rate the engine's all-reduce reaches;
              a set that does not carry it, the decode step's, uses the whole link)

depth = isl + osl / 2, the mean depth of a decoding request; N devices (tensor / expert parallel; ``replicas``
counts copies of the dense weights under attention data parallelism).  An engine that does not mix runs the
prompt chunk as a step of its own: t(n_d, 0) + t(0, u) in place of t(n_d, u) (t(0, u) alone when nothing
decodes: a lone request's prefill is not charged an empty decode step).

**Steady state of the closed loop** (``FIXED_POINT_ROUNDS`` rounds from TPOT = t(n_run, 0), TTFT_s =
t(0, isl))::

    n_run  = min(C, S, floor(K / (isl + s_kv osl)))    requests holding KV; the other C - n_run wait
             (s_kv = 1/2: blocks are taken as a request grows; 1: the engine admits a request only when the
             pool holds its whole prompt + output, SchedulerSpec.reserves_whole_request: TensorRT-LLM)
    life   = TTFT_s + (osl - 1) TPOT                   seconds a running request lives
    share  = (osl - 1) TPOT / life                     of its life a request spends decoding
    n_d    = max(n_run x share, 1)                     decode tokens per step
    p      = (n_run - 1) / life x isl x TPOT           other requests' prompt tokens per decode step
    room   = B - n_d (mixing) | B (not mixing)
    u      = min(max(p, min(isl, room)), room)         prompt tokens of a step that carries prompt
    f      = min(p / u, 1)                             share of steps that carry prompt
    TPOT   = (1 - f) t(n_d, 0) + f t(n_d, u)           mean step a decoding request sees
    TTFT_s = ttft_fixed_s + min(n_run - 1, 1) TPOT / 2 + chunks(isl, room)
    chunks(x, room) = floor(x / room) t(n_o, room) + [rem > 0] t(n_o, rem),  rem = x - floor(x / room) room,
             n_o = (n_run - 1) share: the prompt's full chunks and one step with the rest (an 8,192-token
             prompt under an 8,192-token budget with two requests decoding is one step of 8,190 prompt
             tokens and one of 2, not two full steps)

Queueing (TTFT = TTFT_s + wait_slot + wait_prompts)::

    lam          = n_run / life                          requests finished (and arriving) per second
    wait_slot    = (C - n_run) / lam                     clients beyond the running set (Little's law)
    wait_prompts = queue_share x (n_run - 1) x isl / 2 / r_p        behind the other requests' prompts
    r_p          = c / t(n_b, c)                         prompt tokens per second of a prompt-heavy step,
                   n_b = (n_run - 1) / 2, c = min(room at n_b, (n_run - 1) isl)

``queue_share`` (fitted, in (0, 1]) is how bunched the arrivals are: 1 when every request of a benchmark's
equal-length cohort arrives together (the start of a run, and the waves that follow while the cohort stays
in step), small when arrivals are spread out.

**Lock-step cohort** (serve mode with equal-length requests, ``ServingLoad.equal_lengths``, on an engine whose
prefill batches pause decoding, ``mixes_prefill`` False: SGLang).  The scheduler runs a prefill batch whenever
prompts wait and decodes only when none does, so the C equal-length requests of a closed-loop benchmark are
prefilled together, decode together, finish at the same step and are replaced together: the loop never
spreads out.  Per wave of n_run requests::

    n_b     = ceil(n_run isl / B)                      prefill batches of t_b = t(0, n_run isl / n_b)
    j       = (min(ceil(isl / B), n_b) + n_b) / 2       mean batch after which a request has its first token
    TTFT    = ttft_fixed_s + j t_b + (C - n_run) wave / n_run
    TPOT    = t(n_run, 0) + (n_b - j) t_b / (osl - 1)   decode steps, plus the wait of a request prefilled
                                                        early for the rest of the cohort's prompts
    wave    = n_b t_b + (osl - 1) t(n_run, 0);  output_tok_s = n_run osl / (ttft_fixed_s + wave)

Against the staggered steady state above, prefill no longer lands on the decode steps (TPOT falls) and every
request waits for the cohort's prompts (TTFT rises): the published SGLang rows of Qwen3-32B on H100 have
1.1-1.8x shorter TPOT and 2-7x longer TTFT than vLLM's at the same TP, concurrency and lengths.  With lengths
that vary from request to request (``equal_lengths`` False) the cohort breaks up and new prompts interrupt
decoding: the staggered form above (SGLang's MI300X ``bench_serving`` rows: 1,000-token prompts at 256
clients answered in 0.34 s, where a cohort would wait seconds).

Outputs: ``output_tok_s`` = lam x osl (all clients together), ``per_user_tok_s`` = 1 / TPOT (the decode speed
one client sees), ``e2e_s`` = TTFT + (osl - 1) TPOT.

**Batch mode**: n_run as above, waves = ceil(C / n_run); each wave prefills n_run x isl tokens in
steps of at most B (chunks(n_run isl, B) with nothing decoding), then decodes osl - 1 steps of t(n_run, 0);
e2e = ttft_fixed_s + waves x (prefill + decode); TTFT = ttft_fixed_s + the first wave's prefill;
output_tok_s = C x osl / e2e.

The free parameters (``serving_params``): a calibrated serving set carries them all (estimator.physics.
coefficients, phase ``serving``: the schema-2 model's serving fit with basis ``device`` / ``family``, or a
schema-1 group of the device's family and engine), and so does an uncalibrated one (the serving fit's
covariates, basis ``pooled``; a schema-1 pooled set of the same vendor / kind) when the device's decode set is
not calibrated either; otherwise the step's efficiencies and overheads are the device's decode / prefill
values (``speed.merged_params``) and only the serving terms (t_seq_s, ttft_fixed_s, queue_share, kv_bw_eff =
bw_eff, flops_rel_fp4, flops_rel_moe) come from the serving set or the prior.

Scalars on the report path (no numpy); the feature fields may be numpy arrays of one shape (calibration
evaluates many points at once), in which case the helpers below switch to numpy element-wise operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from estimator.engines import get_engine
from estimator.engines.base import EngineProfile, SchedulerSpec
from estimator.physics import speed
from estimator.physics.coefficients import CoefficientSet, CoefficientTable
from estimator.physics.counts import attention_flops, matmul_params, n_moe_layers, routed_active_params
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

FIXED_POINT_ROUNDS = 4
SERVE, BATCH = "serve", "batch"
# A lone request: at most this many clients in serve mode hardly queue, so their TTFT is the request's own
# prefill; its interval ("ttft_lone", from those points' held-out residuals) is far narrower than the TTFT
# interval of every concurrency, whose queueing it does not have.
LONE_CONCURRENCY = 4
FP4_FORMATS = ("NVFP4", "MXFP4")  # 4-bit float weights: GEMM rate = FP8 peak x flops_rel_fp4
# Step efficiencies and overheads a serving set may carry; absent ones come from the decode / prefill sets.
STEP_PARAMS = (
    "bw_eff", "bw_rel_moe", "flops_eff", "attn_eff", "t_fixed_s", "t_layer_s", "t_allreduce_s", "moe_route_s",
    "link_eff", "attn_decode_eff",
)  # fmt: skip


# ------------------------------------------------------------------------------ scalar-or-array helpers
def _arr(*xs) -> bool:
    return any(hasattr(x, "shape") for x in xs)


def _np():
    import numpy as np  # only when arrays come in (calibration); never on the report path

    return np


def _min(a, b):
    return _np().minimum(a, b) if _arr(a, b) else min(a, b)


def _max(a, b):
    return _np().maximum(a, b) if _arr(a, b) else max(a, b)


def _ceil(x):
    return _np().ceil(x) if _arr(x) else float(math.ceil(x))


def _floor(x):
    return _np().floor(x) if _arr(x) else float(math.floor(x))


def _pad(tokens, sizes: tuple[int, ...]):
    """Rows a step of ``tokens`` (ceil) computes: the next captured graph size, or itself beyond them."""
    t = _ceil(tokens)
    if not sizes:
        return t
    if _arr(t):
        np = _np()
        g = np.asarray(sizes, dtype=float)
        idx = np.minimum(np.searchsorted(g, t), len(g) - 1)
        return np.where(t <= g[-1], g[idx], t)
    for s in sizes:
        if s >= t:
            return float(s)
    return t


# ------------------------------------------------------------------------------------------- features
@dataclass(frozen=True)
class ServingLoad:
    """The load: ``concurrency`` clients, ``isl`` prompt / ``osl`` output tokens per request, mode
    ``"serve"`` (closed loop) or ``"batch"`` (all at once, timed to the last token); ``equal_lengths``: every
    request has exactly isl / osl tokens (a fixed-length benchmark: an engine that does not mix keeps its
    clients in a lock-step cohort), False when lengths vary (random-length datasets, real traffic)."""

    concurrency: int
    isl: int
    osl: int
    mode: str = SERVE
    equal_lengths: bool = True


@dataclass(frozen=True, slots=True)
class ServingFeatures:
    """Everything the step formula and the queue need for one (model, format, device, workload, load).

    Bytes: dense_bytes (weights every step reads: all but the routed experts), routed_bytes (all routed
    experts), kv_bytes_per_seq (KV a decoding request reads per step at depth isl + osl/2, total over the
    devices, counted per device share: x N / kv_ways).  FLOP: matmul_flops (2 x matmul params per token),
    attn_decode (one decode token at that depth), attn_prompt (per prompt token, mean over the prompt).
    Device: bandwidth_bs (datasheet B/s), gemm_flops_s (datasheet GEMM rate of the format, FLOP/s; 0 when
    unknown: CPUs, then the set's flops_abs_tflops), attn_flops_s (bf16 rate), link_bs (one direction of the
    interconnect).  Scheduler: max_batched_tokens, max_seqs, kv_output_share, mixes_prefill, graph_sizes;
    kv_capacity_tokens (inf when unbounded).  Numeric fields may be numpy arrays of one shape (calibration).
    """

    dense_bytes: float
    routed_bytes: float
    routed_share: float  # k / E of one token (0 for a dense model)
    kv_bytes_per_seq: float
    matmul_flops: float
    expert_flops: float  # the routed-expert part of matmul_flops
    attn_decode: float
    attn_prompt: float
    n_layers: float
    n_moe_layers: float
    hidden_size: float
    n_devices: float
    replicas: float
    fp8: bool
    fp4: float  # 1.0 for 4-bit float weights (NVFP4 / MXFP4), else 0.0
    bandwidth_bs: float
    gemm_flops_s: float
    attn_flops_s: float
    link_bs: float
    kv_capacity_tokens: float
    max_batched_tokens: float
    max_seqs: float
    kv_output_share: float  # of the output tokens a running request holds in the KV pool: 0.5, or 1.0
    mixes_prefill: bool
    graph_sizes: tuple[int, ...]
    concurrency: float
    isl: float
    osl: float
    batch_mode: bool
    engine: str
    equal_lengths: bool = True
    dense_prompt_keys: float = 0.0  # DSA prompts of at most this many keys run dense (EngineProfile)


def kv_share(model: ModelSpec, n_devices: int, split: str = "tp") -> float:
    """N / kv_ways on N > 1 tensor-parallel devices (1 on one device): the factor by which a sequence's KV
    read counts in ``ServingFeatures.kv_bytes_per_seq`` when each device reads its share.  kv_ways = the
    devices the KV heads split over: min(N, n_kv_heads), 1 for MLA (its latent cache is replicated).  Under
    attention data parallelism (split ``dp``) one device reads a sequence's whole KV: 1."""
    n = max(int(n_devices), 1)
    if n == 1 or split == "dp":
        return 1.0
    return n / (1 if model.mla is not None else min(n, max(1, model.n_kv_heads)))


def dp_ranks(workload: Workload) -> int:
    """Attention-data-parallel ranks of a workload: its N devices under split ``dp``, else 1."""
    return max(int(workload.n_devices), 1) if workload.split == "dp" else 1


def ranked_scheduler(
    profile: EngineProfile, hardware: HardwareSpec, workload: Workload, ranks: int
) -> SchedulerSpec:
    """The scheduler of an instance of ``ranks`` attention-data-parallel ranks, as one step: the profile's
    ``scheduler`` per rank; where each rank schedules on its own (``EngineProfile.dp_rank_schedulers``) the
    instance step holds ranks x the token budget and ranks x the running requests, and a step of T tokens
    pads to ranks x a captured size (each rank pads its T / ranks tokens)."""
    sched = profile.scheduler(hardware, workload)
    if ranks <= 1 or not profile.dp_rank_schedulers:
        return sched
    return replace(
        sched,
        max_batched_tokens=sched.max_batched_tokens * ranks,
        max_seqs=sched.max_seqs * ranks,
        graph_sizes=tuple(g * ranks for g in sched.graph_sizes),
        source=f"{sched.source}; {ranks} data-parallel ranks, each scheduling its own budget",
    )


def serving_features(
    model: ModelSpec,
    quant: QuantSpec,
    hardware: HardwareSpec,
    workload: Workload,
    load: ServingLoad,
    kv_capacity_tokens: float | None = None,
    replicas: int | None = None,
    state_max_requests: int | None = None,
) -> ServingFeatures:
    """The ServingFeatures of a configuration under ``load`` (``workload.n_devices`` devices, tensor
    parallel, or attention data parallel under split ``dp``; ``kv_capacity_tokens`` from the memory physics,
    None = unbounded).  ``replicas``: copies of the dense weights a step reads (attention data parallelism);
    None = N under split ``dp``, else 1.  ``state_max_requests``: the running requests a hybrid's own state
    pool admits (``pool_capacity``), a bound on the scheduler's max_seqs."""
    if load.concurrency < 1 or load.isl < 1 or load.osl < 1:
        raise SpecError("serving needs concurrency, input and output tokens >= 1")
    if not hardware.bandwidth_gbs:
        raise SpecError(f"{hardware.id}: memory bandwidth unknown; serving speed cannot be estimated")
    quant = get_engine(workload.engine).weight_format(quant)
    wb = speed.breakdown(model, quant)
    routed = float(wb.routed_expert_bytes)
    share = model.moe.n_experts_used / model.moe.n_experts if model.moe and routed else 0.0
    dense = float(wb.active_bytes_per_token) - routed * share
    n = max(int(workload.n_devices), 1)
    depth = load.isl + load.osl / 2.0
    kv = speed.kv_read_at(model, depth, workload.kv_dtype, workload.engine)
    kv *= kv_share(model, n, workload.split)
    if replicas is None:
        replicas = dp_ranks(workload)
    fp8 = speed.is_fp8(quant) or quant.name.upper() in FP4_FORMATS
    try:
        gemm = speed.peak_tflops(hardware, {}, fp8, workload.engine, workload.backend) * 1e12
    except ValueError:
        gemm = 0.0
    attn = (hardware.bf16_tflops or 0.0) * 1e12 or gemm
    sched = ranked_scheduler(get_engine(workload.engine), hardware, workload, max(int(replicas), 1))
    sparse = get_engine(workload.engine).sparse_attention
    dense_upto = get_engine(workload.engine).dense_prompt_keys(model, hardware)
    return ServingFeatures(
        dense_bytes=dense,
        routed_bytes=routed,
        routed_share=share,
        kv_bytes_per_seq=float(kv),
        matmul_flops=float(2 * matmul_params(model, wb.n_params_active)),
        expert_flops=float(2 * routed_active_params(model)) if routed else 0.0,
        attn_decode=float(speed.attn_flops_at(model, depth, workload.engine)),
        attn_prompt=float(attention_flops(model, 0, load.isl, sparse=sparse, dense_upto=dense_upto))
        / load.isl,
        n_layers=float(model.n_layers),
        n_moe_layers=float(n_moe_layers(model)),
        hidden_size=float(model.hidden_size),
        n_devices=float(n),
        replicas=float(max(int(replicas), 1)),
        fp8=fp8,
        fp4=1.0 if quant.name.upper() in FP4_FORMATS else 0.0,
        bandwidth_bs=float(hardware.bandwidth_gbs) * 1e9,
        gemm_flops_s=gemm,
        attn_flops_s=attn,
        link_bs=0.5 * (hardware.interconnect_gbs or speed.DEFAULT_INTERCONNECT_GBS) * 1e9,
        kv_capacity_tokens=float(kv_capacity_tokens) if kv_capacity_tokens is not None else math.inf,
        max_batched_tokens=float(sched.max_batched_tokens),
        max_seqs=float(
            sched.max_seqs if state_max_requests is None else min(sched.max_seqs, state_max_requests)
        ),
        kv_output_share=1.0 if sched.reserves_whole_request else 0.5,
        mixes_prefill=sched.mixes_prefill,
        graph_sizes=tuple(sched.graph_sizes),
        concurrency=float(load.concurrency),
        isl=float(load.isl),
        osl=float(load.osl),
        batch_mode=load.mode == BATCH,
        engine=workload.engine,
        equal_lengths=load.equal_lengths,
        dense_prompt_keys=float(dense_upto),
    )


# ------------------------------------------------------------------------------------------ the step
def rates(f: ServingFeatures, params: dict) -> speed.DecodeRates:
    """The DecodeRates of ``speed.step_s`` from the features' device figures and a serving set's params
    (as ``speed.decode_rates`` builds them from a HardwareSpec; the GEMM rate x flops_rel_fp4 for 4-bit float
    weights; a device without a datasheet rate uses flops_abs_tflops; the link x link_eff, 1 when the set
    does not carry it)."""
    gemm = f.gemm_flops_s
    if not _arr(gemm) and not gemm:
        gemm = params.get("flops_abs_tflops", 0.5) * 1e12
    rel = params.get("flops_rel_fp4", 1.0)
    fp4_factor = 1.0 + f.fp4 * (rel - 1.0)
    return speed.DecodeRates(
        bw_bs=f.bandwidth_bs * params["bw_eff"],
        host_bw_bs=1.0,  # serving steps read no host weights
        flops_s=gemm * params["flops_eff"] * fp4_factor,
        link_bs=f.link_bs * params.get("link_eff", 1.0),
        t_fixed_s=params["t_fixed_s"],
        t_layer_s=params["t_layer_s"],
        moe_route_s=params.get("moe_route_s", 0.0),
        t_allreduce_s=params.get("t_allreduce_s", speed.DEFAULT_T_ALLREDUCE_S),
    )


def step_features(f: ServingFeatures, n_decode, n_prompt, params: dict) -> speed.DecodeFeatures:
    """The decode-step features of a step carrying ``n_decode`` decode and ``n_prompt`` prompt tokens."""
    tokens = n_decode + n_prompt
    union = f.routed_bytes * (1.0 - (1.0 - f.routed_share) ** tokens)
    kv_scale = params["bw_eff"] / params.get("kv_bw_eff", params["bw_eff"])
    return speed.DecodeFeatures(
        weight_bytes=f.dense_bytes * f.replicas + union / params.get("bw_rel_moe", 1.0),
        kv_bytes=n_decode * f.kv_bytes_per_seq * kv_scale,
        host_bytes=0.0,
        expert_union_bytes=union,
        flops_per_token=f.matmul_flops + f.expert_flops * (1.0 / params.get("flops_rel_moe", 1.0) - 1.0),
        batch=_pad(tokens, f.graph_sizes),
        n_layers=f.n_layers,
        n_moe_layers=f.n_moe_layers,
        hidden_size=f.hidden_size,
        n_devices=f.n_devices,
        split="tp",
        fp8=f.fp8,
        engine=f.engine,
    )


def mixed_step_s(f: ServingFeatures, n_decode, n_prompt, params: dict, r: speed.DecodeRates | None = None):
    """Seconds of one step with ``n_decode`` decode tokens and ``n_prompt`` prompt tokens (module doc)."""
    r = r or rates(f, params)
    t = speed.step_s(step_features(f, n_decode, n_prompt, params), r)
    attn_rate = f.attn_flops_s
    if not _arr(attn_rate) and not attn_rate:  # no datasheet rate (CPUs): the set's effective TFLOPS
        attn_rate = params.get("flops_abs_tflops", 0.5) * 1e12
    attn_eff = params.get("attn_eff", 0.3)
    decode_eff = params.get("attn_decode_eff", attn_eff)
    flops = n_decode * f.attn_decode / decode_eff + n_prompt * f.attn_prompt / attn_eff
    attn = flops / (f.n_devices * attn_rate)
    return t + params.get("t_seq_s", 0.0) * n_decode + attn


def _prompt_step_s(f: ServingFeatures, n_decode, n_prompt, params, r):
    """A step that carries prompt: mixed, or a prefill step of its own after the decode step (no mixing;
    no decode step when nothing decodes: a lone request, an offline batch's prefill)."""
    if f.mixes_prefill:
        return mixed_step_s(f, n_decode, n_prompt, params, r)
    decode = (n_decode > 0) * mixed_step_s(f, n_decode, 0.0, params, r)
    return decode + mixed_step_s(f, 0.0, n_prompt, params, r)


def chunks_s(f: ServingFeatures, n_decode, tokens, room, params, r):
    """Seconds of the steps that carry ``tokens`` prompt tokens in chunks of at most ``room`` each:
    floor(tokens / room) full chunks and one step with the remainder (none when it divides), each step
    with ``n_decode`` decode tokens beside it (``step`` = mixed_step_s for a mixing engine, a decode step
    then a prefill step otherwise)::

        t = floor(tokens / room) x step(n_decode, room) + [rem > 0] x step(n_decode, rem),
        rem = tokens - floor(tokens / room) x room

    (an 8,192-token prompt under vLLM's 8,192-token budget with three requests decoding takes one step of
    8,189 prompt tokens and one of 3, not two of 8,189)."""
    full = _floor(tokens / room)
    rem = tokens - full * room
    tail = _prompt_step_s(f, n_decode, rem, params, r)
    return full * _prompt_step_s(f, n_decode, room, params, r) + (rem > 0) * tail


# -------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class ServingPoint:
    """Predicted serving figures at one load (seconds, tokens/s), before intervals.

    running: requests holding KV at once (<= concurrency); kv_limited: the KV pool (not the clients or the
    engine's request limit) bounds ``running``; decode_tokens: mean decode tokens per step.
    """

    concurrency: int
    isl: int
    osl: int
    mode: str
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tok_s: float
    per_user_tok_s: float
    running: float
    decode_tokens: float
    kv_limited: bool


def _running(f: ServingFeatures):
    per_seq = f.isl + f.osl * f.kv_output_share
    cap = (
        _max(_floor(f.kv_capacity_tokens / per_seq), 1.0)
        if _arr(f.kv_capacity_tokens)
        else (
            max(math.floor(f.kv_capacity_tokens / per_seq), 1.0)
            if math.isfinite(f.kv_capacity_tokens)
            else math.inf
        )
    )
    return _min(_min(f.concurrency, f.max_seqs), cap), cap


def _kv_limited(f: ServingFeatures, cap):
    """True where the KV pool, not the clients or the engine's request limit, bounds the running requests."""
    return cap < _min(f.concurrency, f.max_seqs)


def solve(f: ServingFeatures, params: dict) -> dict:
    """ttft_s, tpot_s, e2e_s, output_tok_s, running, decode_tokens, kv_limited of the load (module doc).

    Values are numbers, or arrays when the features hold arrays.
    """
    r = rates(f, params)
    n_run, cap = _running(f)
    isl, osl, budget = f.isl, f.osl, f.max_batched_tokens
    fixed = params.get("ttft_fixed_s", 0.0)
    if f.batch_mode:
        prefill = chunks_s(f, 0.0, n_run * isl, budget, params, r)
        tpot = mixed_step_s(f, n_run, 0.0, params, r)
        waves = _ceil(f.concurrency / n_run)
        e2e = fixed + waves * (prefill + (osl - 1) * tpot)
        return {
            "ttft_s": fixed + prefill,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "output_tok_s": f.concurrency * osl / e2e,
            "running": n_run,
            "decode_tokens": n_run,
            "kv_limited": _kv_limited(f, cap),
        }
    if not f.mixes_prefill and f.equal_lengths:
        return _cohort(f, params, r, n_run, cap)
    others = n_run - 1.0
    tpot = mixed_step_s(f, n_run, 0.0, params, r)
    ttft_s = fixed + mixed_step_s(f, 0.0, isl, params, r)
    n_d = n_run
    for _ in range(FIXED_POINT_ROUNDS):
        life = ttft_s + (osl - 1.0) * tpot
        share = (osl - 1.0) * tpot / life
        n_d = _max(n_run * share, 1.0)
        room = _max(budget - n_d, 1.0) if f.mixes_prefill else budget
        p = others / life * isl * tpot
        u = _min(_max(p, _min(isl, room)), room)
        frac = _min(p / u, 1.0)
        tpot = (1.0 - frac) * mixed_step_s(f, n_d, 0.0, params, r) + frac * _prompt_step_s(
            f, n_d, u, params, r
        )
        ttft_s = fixed + _min(others, 1.0) * tpot / 2.0 + chunks_s(f, others * share, isl, room, params, r)
    life = ttft_s + (osl - 1.0) * tpot
    lam = n_run / life
    wait_slot = _max(f.concurrency - n_run, 0.0) / lam
    n_b = others / 2.0
    room_b = _max(budget - n_b, 1.0) if f.mixes_prefill else budget
    c = _max(_min(room_b, others * isl), 1.0)
    rate_p = c / _prompt_step_s(f, n_b, c, params, r)
    wait_prompts = params.get("queue_share", 0.5) * others * isl / 2.0 / rate_p
    ttft = ttft_s + wait_slot + wait_prompts
    return {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": ttft + (osl - 1.0) * tpot,
        "output_tok_s": lam * osl,
        "running": n_run,
        "decode_tokens": n_d,
        "kv_limited": _kv_limited(f, cap),
    }


def _cohort(f: ServingFeatures, params: dict, r: speed.DecodeRates, n_run, cap) -> dict:
    """Serve mode on an engine whose prefill batches pause decoding (module doc, "Lock-step cohort")."""
    isl, osl, budget = f.isl, f.osl, f.max_batched_tokens
    fixed = params.get("ttft_fixed_s", 0.0)
    n_batches = _ceil(n_run * isl / budget)
    t_batch = mixed_step_s(f, 0.0, n_run * isl / n_batches, params, r)
    mean_batch = (_min(_ceil(isl / budget), n_batches) + n_batches) / 2.0
    t_decode = mixed_step_s(f, n_run, 0.0, params, r)
    tpot = t_decode + (n_batches - mean_batch) * t_batch / _max(osl - 1.0, 1.0)
    wave = n_batches * t_batch + (osl - 1.0) * t_decode
    wait_slot = _max(f.concurrency - n_run, 0.0) * wave / n_run
    ttft = fixed + mean_batch * t_batch + wait_slot
    return {
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": ttft + (osl - 1.0) * tpot,
        "output_tok_s": n_run * osl / (fixed + wave),
        "running": n_run,
        "decode_tokens": n_run,
        "kv_limited": _kv_limited(f, cap),
    }


def metric_s(f: ServingFeatures, params: dict, metric: str):
    """One predicted time of ``solve``: ``"ttft"``, ``"tpot"`` or ``"e2e"`` (seconds)."""
    return solve(f, params)[metric + "_s"]


def point(f: ServingFeatures, params: dict) -> ServingPoint:
    """The ServingPoint of scalar features."""
    s = solve(f, params)
    return ServingPoint(
        concurrency=int(f.concurrency),
        isl=int(f.isl),
        osl=int(f.osl),
        mode=BATCH if f.batch_mode else SERVE,
        ttft_s=float(s["ttft_s"]),
        tpot_s=float(s["tpot_s"]),
        e2e_s=float(s["e2e_s"]),
        output_tok_s=float(s["output_tok_s"]),
        per_user_tok_s=1.0 / float(s["tpot_s"]),
        running=float(s["running"]),
        decode_tokens=float(s["decode_tokens"]),
        kv_limited=bool(s["kv_limited"]),
    )


# ------------------------------------------------------------------------------------- coefficients
@dataclass(frozen=True)
class ServingParams:
    """The parameters one configuration's serving figures use, and where they come from.

    cset: the serving coefficient set looked up (its intervals per metric); label: one line for reports;
    calibrated: True when a serving set of the device's family and engine was fitted.
    """

    params: dict
    cset: CoefficientSet
    label: str
    calibrated: bool


def serving_params(table: CoefficientTable, hardware: HardwareSpec, engine: str) -> ServingParams:
    """Serving params of a device and engine (module doc): a calibrated serving set as fitted; otherwise the
    step terms of the decode / prefill sets and the serving terms of the pooled serving set or the prior."""
    dec, pre, dparams, pparams = speed.merged_params(table, hardware, engine)
    base = {
        "bw_eff": dparams["bw_eff"],
        "kv_bw_eff": dparams["bw_eff"],
        "flops_eff": pparams["flops_eff"],
        "attn_eff": pparams["attn_eff"],
        "t_fixed_s": dparams["t_fixed_s"],
        "t_layer_s": dparams["t_layer_s"],
        "t_allreduce_s": float(dparams.get("t_allreduce_s", speed.DEFAULT_T_ALLREDUCE_S)),
        "moe_route_s": dparams.get("moe_route_s", 0.0),
    }
    if "flops_abs_tflops" in pparams:
        base["flops_abs_tflops"] = pparams["flops_abs_tflops"]
    sset = table.lookup(hardware, engine, "serving")
    if sset.source == "calibrated":
        return ServingParams({**base, **sset.params}, sset, sset.label, True)
    if sset.source == "pooled" and not dec.calibrated:  # the pool's serving fit beats the uncalibrated step
        return ServingParams({**base, **sset.params}, sset, sset.label, False)
    own = {k: v for k, v in sset.params.items() if k not in STEP_PARAMS}
    if "kv_bw_eff" not in (entry_params := own):
        entry_params["kv_bw_eff"] = base["bw_eff"]
    params = {**base, **entry_params}
    label = (
        f"serving terms: {sset.label}; step: decode {dec.label}, prefill {pre.label}"
        if dec.label != pre.label
        else f"serving terms: {sset.label}; step: {dec.label}"
    )
    return ServingParams(params, sset, label, False)


# ------------------------------------------------------------------------------------------ estimates
@dataclass(frozen=True)
class ServingEstimate:
    """A ServingPoint with intervals (the serving set's per-metric intervals of ln(measured / predicted)
    time; throughputs take the TPOT interval inverted) and the coefficients behind it."""

    concurrency: int
    isl: int
    osl: int
    mode: str
    ttft_s: float
    ttft_lo_s: float
    ttft_hi_s: float
    tpot_s: float
    tpot_lo_s: float
    tpot_hi_s: float
    e2e_s: float
    output_tok_s: float
    output_lo_tok_s: float
    output_hi_tok_s: float
    per_user_tok_s: float
    per_user_lo_tok_s: float
    per_user_hi_tok_s: float
    running: float
    kv_limited: bool
    coefficients: str
    calibrated: bool


def ttft_metric(cset: CoefficientSet, lone: bool) -> str:
    """The interval that covers a TTFT: ``ttft_lone`` for a lone request (``LONE_CONCURRENCY``) when the set
    carries it, else ``ttft``."""
    return "ttft_lone" if lone and "ttft_lone" in cset.intervals else "ttft"


def with_intervals(p: ServingPoint, sp: ServingParams) -> ServingEstimate:
    """The ServingEstimate of a point: time intervals from the set's ``ttft`` / ``tpot`` intervals (a lone
    request's TTFT: ``ttft_lone``, ``ttft_metric``)."""
    lone = p.mode == SERVE and p.concurrency <= LONE_CONCURRENCY
    t_lo, t_hi = sp.cset.metric_interval(ttft_metric(sp.cset, lone), p.ttft_s)
    d_lo, d_hi = sp.cset.metric_interval("tpot", p.tpot_s)
    return ServingEstimate(
        concurrency=p.concurrency,
        isl=p.isl,
        osl=p.osl,
        mode=p.mode,
        ttft_s=p.ttft_s,
        ttft_lo_s=t_lo,
        ttft_hi_s=t_hi,
        tpot_s=p.tpot_s,
        tpot_lo_s=d_lo,
        tpot_hi_s=d_hi,
        e2e_s=p.e2e_s,
        output_tok_s=p.output_tok_s,
        output_lo_tok_s=p.output_tok_s * p.tpot_s / d_hi,
        output_hi_tok_s=p.output_tok_s * p.tpot_s / d_lo,
        per_user_tok_s=p.per_user_tok_s,
        per_user_lo_tok_s=1.0 / d_hi,
        per_user_hi_tok_s=1.0 / d_lo,
        running=p.running,
        kv_limited=p.kv_limited,
        coefficients=sp.label,
        calibrated=sp.calibrated,
    )


def pool_capacity(
    model: ModelSpec, quant: QuantSpec, hardware: HardwareSpec, workload: Workload, table
) -> tuple[int | None, int | None]:
    """(KV pool tokens, most running requests a hybrid's own state pool admits) of an engine that reserves
    memory (estimator.physics.memory: ``kv_capacity_tokens``, ``state_max_requests``); None where unbounded
    (an engine that sizes its cache per slot; a state kept inside the KV pool)."""
    from estimator.physics.memory import estimate_memory

    if not get_engine(workload.engine).reserves_memory:
        return None, None
    quant = get_engine(workload.engine).weight_format(quant)
    mem = estimate_memory(
        model, quant, hardware, replace(workload, n_seq=1), table.memory_for(workload.engine)
    )
    return mem.kv_capacity_tokens, mem.state_max_requests


def estimate_serving(
    model: ModelSpec,
    quant: QuantSpec,
    hardware: HardwareSpec,
    workload: Workload,
    loads: list[ServingLoad] | tuple[ServingLoad, ...],
    table: CoefficientTable,
) -> list[ServingEstimate]:
    """Serving estimates of one configuration at each load (one coefficient lookup, one KV capacity)."""
    sp = serving_params(table, hardware, workload.engine)
    cap, state_cap = pool_capacity(model, quant, hardware, workload, table)
    out = []
    base = None
    for load in loads:
        if base is None:
            base = serving_features(model, quant, hardware, workload, load, cap, state_max_requests=state_cap)
            f = base
        else:
            f = _reload(base, model, workload, load)
        out.append(with_intervals(point(f, sp.params), sp))
    return out


def _reload(f: ServingFeatures, model: ModelSpec, workload: Workload, load: ServingLoad) -> ServingFeatures:
    """The features of another load: only the depth-dependent terms and the load change."""
    if (load.isl, load.osl) == (int(f.isl), int(f.osl)):
        return replace(
            f,
            concurrency=float(load.concurrency),
            batch_mode=load.mode == BATCH,
            equal_lengths=load.equal_lengths,
        )
    depth = load.isl + load.osl / 2.0
    kv = speed.kv_read_at(model, depth, workload.kv_dtype, workload.engine)
    kv *= kv_share(model, int(f.n_devices), workload.split)
    sparse = get_engine(workload.engine).sparse_attention
    return replace(
        f,
        kv_bytes_per_seq=float(kv),
        attn_decode=float(speed.attn_flops_at(model, depth, workload.engine)),
        attn_prompt=float(
            attention_flops(model, 0, load.isl, sparse=sparse, dense_upto=int(f.dense_prompt_keys))
        )
        / load.isl,
        concurrency=float(load.concurrency),
        isl=float(load.isl),
        osl=float(load.osl),
        batch_mode=load.mode == BATCH,
        equal_lengths=load.equal_lengths,
    )
