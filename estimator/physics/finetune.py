"""Fine-tuning memory: QLoRA (4-bit NF4 base), LoRA (16-bit base) and full fine-tuning (AdamW, mixed
precision).

All figures are estimates from the formulas below (no measured coefficients); bytes throughout.

Parameters
  ``P``      total parameters (from the weight breakdown); ``P_emb`` token-embedding + untied output-head
             parameters.
  ``P_lora`` LoRA parameters: ``sum over targeted linear layers of r * (n_in + n_out)``
             (A: n_in x r, B: r x n_out).

Base weights
  QLoRA:  ``(P - P_emb) * NF4_BITS / 8 + P_emb * 2`` with ``NF4_BITS = 4 + 8/64 + 32/(64*256) = 4.127``
          (NF4 with double-quantised absmax, blocks of 64 and 256, as in bitsandbytes);
          embeddings and head stay bf16.
  LoRA:   ``P * 2`` (bf16).
  Full:   ``P * 2`` (bf16 working copy).
Trainable state (AdamW)
  LoRA/QLoRA adapters in fp32: weights 4 + gradients 4 + Adam m 4 + v 4 = 16 bytes per adapter parameter.
  Full: bf16 gradients 2 + fp32 master weights 4 + m 4 + v 4 = 14 bytes per parameter (on top of the
        bf16 weights).
Activations (gradient checkpointing at every layer boundary, flash attention, no dropout)
  checkpoints:  ``n_layers * s * b * h * 2``;
  one layer recomputed: ``s * b * (4h + 2*q + 2*kv + 3*I) * 2`` (elements kept for backward: two norm in/outs,
  Q and attention output of width q = heads*head_dim, K and V of width kv, SwiGLU gate/up/product of width I;
  I = active FFN width, experts used + shared for MoE) — after Korthikanti et al. 2022, adapted to SwiGLU and
  flash attention;
  loss: ``s * b * vocab * 10`` (bf16 logits, fp32 upcast and fp32 gradient, unchunked — an upper bound).
Overhead: the device-context overhead passed in (framework/CUDA context), counted once.

Assumptions are returned with every estimate (rank, target modules, sequence length, micro-batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimator.specs import CHUNKED, FULL, LINEAR, MAMBA, SLIDING, ModelSpec, SpecError

NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)
ADAPTER_BYTES_PER_PARAM = 16  # fp32 weight + fp32 grad + AdamW m + v
FULL_STATE_BYTES_PER_PARAM = 14  # bf16 grad + fp32 master + m + v
LOSS_BYTES_PER_LOGIT = 10  # bf16 logits + fp32 upcast + fp32 grad
DEFAULT_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
METHODS = ("qlora", "lora", "full")


@dataclass(frozen=True)
class FinetuneConfig:
    """LoRA rank, targeted projections, sequence length (tokens) and micro-batch (sequences)."""

    rank: int = 16
    targets: tuple[str, ...] = DEFAULT_TARGETS
    seq_len: int = 2048
    micro_batch: int = 1
    include_routed_experts: bool = False


@dataclass(frozen=True)
class FinetuneEstimate:
    """Memory for one method, bytes.

    ``total_bytes`` = weights + adapters + gradients + optimizer + activations + overhead."""

    method: str  # qlora | lora | full
    label: str
    weights_bytes: int
    adapter_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    trainable_params: int
    assumptions: tuple[str, ...]


def _attn_shapes(model: ModelSpec, kind: str) -> list[tuple[str, int, int]]:
    """(target, n_in, n_out) of the attention projections of one layer of ``kind``."""
    h = model.hidden_size
    if kind in (FULL, SLIDING, CHUNKED):
        if model.mla is not None:
            m = model.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = (
                [("q", h, m.q_lora_rank), ("q", m.q_lora_rank, model.n_heads * qk)]
                if m.q_lora_rank
                else [("q", h, model.n_heads * qk)]
            )
            return q + [
                ("k", h, m.kv_lora_rank + m.qk_rope_head_dim),
                ("v", m.kv_lora_rank, model.n_heads * (m.qk_nope_head_dim + m.v_head_dim)),
                ("o", model.n_heads * m.v_head_dim, h),
            ]
        qd, kvd = model.n_heads * model.head_dim, model.n_kv_heads * model.head_dim
        return [("q", h, qd), ("k", h, kvd), ("v", h, kvd), ("o", qd, h)]
    if kind in (LINEAR, MAMBA):
        s = model.state
        kd = s.n_key_heads * s.key_head_dim if s and s.n_key_heads * s.key_head_dim else h
        vd = s.n_value_heads * s.value_head_dim if s and s.n_value_heads * s.value_head_dim else h
        return [("q", h, kd), ("k", h, kd), ("v", h, vd), ("o", vd, h)]
    return []


def _ffn_shapes(model: ModelSpec, layer: int, cfg: FinetuneConfig) -> list[tuple[str, int, int, int]]:
    """(target, n_in, n_out, count) of the FFN projections of one layer."""
    h, moe = model.hidden_size, model.moe
    if moe is None or layer in moe.dense_layers:
        i = model.intermediate_size
        return [("gate", h, i, 1), ("up", h, i, 1), ("down", i, h, 1)] if i else []
    out: list[tuple[str, int, int, int]] = []
    if moe.n_shared_experts and moe.shared_ff:
        n = moe.n_shared_experts
        out += [("gate", h, moe.shared_ff, n), ("up", h, moe.shared_ff, n), ("down", moe.shared_ff, h, n)]
    if cfg.include_routed_experts:
        n = moe.n_experts
        out += [("gate", h, moe.expert_ff, n), ("up", h, moe.expert_ff, n), ("down", moe.expert_ff, h, n)]
    return out


def lora_params(model: ModelSpec, cfg: FinetuneConfig) -> int:
    """LoRA parameters: ``r * (n_in + n_out)`` summed over every targeted projection of every layer."""
    total = 0
    for layer, kind in enumerate(model.layer_types):
        for tgt, n_in, n_out in _attn_shapes(model, kind):
            if tgt in cfg.targets:
                total += cfg.rank * (n_in + n_out)
        for tgt, n_in, n_out, count in _ffn_shapes(model, layer, cfg):
            if tgt in cfg.targets:
                total += cfg.rank * (n_in + n_out) * count
    return total


def embedding_params(model: ModelSpec) -> int:
    """Token-embedding plus (untied) output-head parameters: ``vocab * h * (1 or 2)``."""
    return model.vocab_size * model.hidden_size * (1 if model.tie_embeddings else 2)


def activation_bytes(model: ModelSpec, cfg: FinetuneConfig) -> int:
    """Peak activation bytes with per-layer gradient checkpointing (formula in the module doc)."""
    s, b, h = cfg.seq_len, cfg.micro_batch, model.hidden_size
    if model.mla is not None:
        q = model.n_heads * (model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim)
        kv = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    else:
        q, kv = model.n_heads * model.head_dim, model.n_kv_heads * model.head_dim
    moe = model.moe
    if moe is not None:
        i_act = max(
            moe.n_experts_used * moe.expert_ff + moe.n_shared_experts * moe.shared_ff, model.intermediate_size
        )
    else:
        i_act = model.intermediate_size
    checkpoints = model.n_layers * s * b * h * 2
    layer = s * b * (4 * h + 2 * q + 2 * kv + 3 * i_act) * 2
    loss = s * b * model.vocab_size * LOSS_BYTES_PER_LOGIT
    return checkpoints + layer + loss


def estimate_finetune(
    model: ModelSpec,
    n_params_total: int,
    method: str,
    cfg: FinetuneConfig | None = None,
    overhead_bytes: int = 0,
) -> FinetuneEstimate:
    """Memory for ``method`` in {"qlora", "lora", "full"} (formulas in the module doc)."""
    cfg = cfg or FinetuneConfig()
    if method not in METHODS:
        raise SpecError(f"unknown fine-tuning method {method!r}; expected one of {', '.join(METHODS)}")
    if cfg.rank < 1 or cfg.seq_len < 1 or cfg.micro_batch < 1:
        raise SpecError("fine-tuning rank, sequence length and micro-batch must be >= 1")
    if n_params_total <= 0:
        raise SpecError("n_params_total must be > 0")
    act = activation_bytes(model, cfg)
    common = (
        f"sequence length {cfg.seq_len} tokens, micro-batch {cfg.micro_batch}",
        "gradient checkpointing at every layer, flash attention, unchunked loss (upper bound)",
        "AdamW; estimated from formulas, no measured coefficients",
    )
    if method == "full":
        w = n_params_total * 2
        grads = n_params_total * 2
        opt = n_params_total * (FULL_STATE_BYTES_PER_PARAM - 2)
        return FinetuneEstimate(
            "full",
            "Full fine-tuning (bf16 mixed precision, AdamW)",
            w,
            0,
            grads,
            opt,
            act,
            overhead_bytes,
            w + grads + opt + act + overhead_bytes,
            n_params_total,
            ("bf16 weights + bf16 grads + fp32 master, m, v = 16 bytes/param",) + common,
        )
    n_lora = lora_params(model, cfg)
    emb = min(embedding_params(model), n_params_total)
    if method == "qlora":
        w = int((n_params_total - emb) * NF4_BITS / 8) + emb * 2
        label, base = "QLoRA (4-bit NF4 base)", f"NF4 base at {NF4_BITS:.3f} bits/param, embeddings/head bf16"
    else:
        w = n_params_total * 2
        label, base = "LoRA (16-bit base)", "bf16 base, 2 bytes/param"
    adapters = n_lora * 4
    grads = n_lora * 4
    opt = n_lora * 8
    experts = "routed experts included" if cfg.include_routed_experts else "routed experts not targeted"
    targets = f"rank {cfg.rank}, targets {','.join(cfg.targets)} ({experts}); adapters fp32, 16 bytes/param"
    return FinetuneEstimate(
        method,
        label,
        w,
        adapters,
        grads,
        opt,
        act,
        overhead_bytes,
        w + adapters + grads + opt + act + overhead_bytes,
        n_lora,
        (base, targets) + common,
    )


def estimate_all(
    model: ModelSpec, n_params_total: int, cfg: FinetuneConfig | None = None, overhead_bytes: int = 0
) -> tuple[FinetuneEstimate, ...]:
    """QLoRA, LoRA and full fine-tuning estimates, in that order."""
    return tuple(estimate_finetune(model, n_params_total, m, cfg, overhead_bytes) for m in METHODS)
