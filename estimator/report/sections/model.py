"""Model facts: parameters counted from the architecture, attention design, layer kinds, widths, context,
license and where the architecture came from (config.json, catalog entry or GGUF file)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from estimator.render.blocks import Block, Table, params
from estimator.render.htmlkit import Ctx, e, link, section
from estimator.render.i18n import t
from estimator.report.units import Build, Unit
from estimator.specs import ModelSpec


@dataclass(frozen=True)
class ModelFacts:
    """The model as the report describes it (parameter counts: elements, counted from the architecture)."""

    id: str
    name: str
    hf_id: str | None
    architecture: str
    arch_class: str | None
    params_total: int
    params_active: int
    published_total_params: str | None
    published_active_params: str | None
    attention: str  # e.g. "MoE + GQA (8 KV heads)", "MLA", "hybrid: 12 full + 36 linear"
    layer_kinds: dict[str, int]
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    window: int | None
    max_context: int
    n_experts: int | None
    n_experts_used: int | None
    n_shared_experts: int | None
    license: str | None
    native_dtype: str
    source: str
    verified: bool
    from_gguf: bool
    notes: tuple[str, ...]


def attention_label(model: ModelSpec) -> str:
    """Human label of the attention design: MoE/dense + GQA/MHA/MQA/MLA + sliding/chunked/hybrid layers."""
    kinds = Counter(model.layer_types)
    if model.mla is not None:
        att = f"MLA (latent {model.mla.kv_lora_rank}+{model.mla.qk_rope_head_dim})"
    elif model.n_kv_heads == 1:
        att = "MQA"
    elif model.n_kv_heads < model.n_heads:
        att = f"GQA ({model.n_kv_heads} KV heads)"
    else:
        att = "MHA"
    parts = [("MoE" if model.moe else "dense") + " + " + att]
    if kinds.get("sliding"):
        parts.append(f"sliding window {model.window} on {kinds['sliding']} of {model.n_layers} layers")
    if kinds.get("chunked"):
        parts.append(f"chunked attention {model.window} on {kinds['chunked']} of {model.n_layers} layers")
    lin = kinds.get("linear", 0) + kinds.get("mamba", 0)
    if lin:
        parts.append(f"hybrid: {kinds.get('full', 0)} full-attention + {lin} linear/SSM layers")
    return "; ".join(parts)


def build(b: Build) -> ModelFacts:
    m, moe = b.model, b.model.moe
    return ModelFacts(
        id=m.id,
        name=m.name,
        hf_id=m.hf_id,
        architecture=m.architecture,
        arch_class=m.arch_class,
        params_total=int(b.weights.n_params_total),
        params_active=int(b.weights.n_params_active),
        published_total_params=m.published_total_params,
        published_active_params=m.published_active_params,
        attention=attention_label(m),
        layer_kinds=dict(Counter(m.layer_types)),
        n_layers=m.n_layers,
        hidden_size=m.hidden_size,
        n_heads=m.n_heads,
        n_kv_heads=m.n_kv_heads,
        head_dim=m.head_dim,
        window=m.window,
        max_context=m.max_context,
        n_experts=moe.n_experts if moe else None,
        n_experts_used=moe.n_experts_used if moe else None,
        n_shared_experts=moe.n_shared_experts if moe else None,
        license=m.license,
        native_dtype=m.native_dtype,
        source=m.source,
        verified=m.verified,
        from_gguf=m.gguf_tensors is not None,
        notes=tuple(m.notes),
    )


def text(d: dict) -> Block:
    m = d["model"]
    s = Block("model", "Model")
    kinds = ", ".join(f"{v} {k}" for k, v in m["layer_kinds"].items())
    moe = (
        f"{m['n_experts']} routed experts, {m['n_experts_used']} used per token, "
        f"{m['n_shared_experts']} shared"
        if m["n_experts"]
        else "dense"
    )
    pub = (
        f" (published: {m['published_total_params']} total"
        + (f", {m['published_active_params']} active)" if m["published_active_params"] else ")")
        if m["published_total_params"]
        else ""
    )
    rows = [
        ["id", f"{m['id']}" + (f" ({m['hf_id']})" if m["hf_id"] else "")],
        [
            "parameters",
            f"{params(m['params_total'])} total, {params(m['params_active'])} active per token "
            + ("(counted from the file's tensors)" if m["from_gguf"] else "(counted from the architecture)")
            + pub,
        ],
        ["architecture", f"{m['architecture']}" + (f" / {m['arch_class']}" if m["arch_class"] else "")],
        ["attention", m["attention"]],
        ["layers", f"{m['n_layers']} ({kinds})"],
        [
            "widths",
            f"hidden {m['hidden_size']}, {m['n_heads']} heads, {m['n_kv_heads']} KV heads, head_dim "
            f"{m['head_dim']}" + (f", window {m['window']}" if m["window"] else ""),
        ],
        ["feed-forward", moe],
        ["max context", f"{m['max_context']:,} tokens"],
        ["GGUF file type" if m["from_gguf"] else "native dtype", m["native_dtype"]],
        ["license", m["license"] or "unknown"],
        [
            "source",
            f"{m['source'] or 'unknown'} ({'verified' if m['verified'] else 'NOT verified'})"
            + (" — exact tensor bytes from the GGUF file" if m["from_gguf"] else ""),
        ],
    ]
    s.tables.append(Table(["fact", "value"], rows))
    s.notes += [f"note: {n}" for n in m["notes"]]
    return s


def html(ctx: Ctx) -> str:
    published = ctx.get("model.published_total_params")
    active_pub = ctx.get("model.published_active_params")
    rows = [
        (
            ctx.t("params_total"),
            ctx.num("model.params_total", "int")
            + (f' <span class="note">({e(published)})</span>' if published else ""),
        ),
        (
            ctx.t("params_active"),
            ctx.num("model.params_active", "int")
            + (f' <span class="note">({e(active_pub)})</span>' if active_pub else ""),
        ),
        (ctx.t("architecture"), e(f"{ctx.get('model.architecture')} ({ctx.get('model.arch_class') or '—'})")),
        (ctx.t("attention"), e(ctx.get("model.attention"))),
        (ctx.t("layers"), ctx.num("model.n_layers", "int")),
        (ctx.t("max_context"), ctx.num("model.max_context", "int")),
        (ctx.t("license"), e(ctx.get("model.license") or t("unknown", ctx.lang))),
        (ctx.t("source"), link(ctx.get("model.source", ""))),
    ]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return section("model", ctx.t("sec_model"), f'<dl class="facts">{dl}</dl>')


UNIT = Unit(key="model", type=ModelFacts, build=build, text=text, html=html)
