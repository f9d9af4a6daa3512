"""KV cache at the chosen context and dtype (per layer kind, bytes per token of context, fixed state), and
the same configuration with every KV dtype the report compares (``KV_OPTIONS``; sized with flash attention
on), with the engines that offer each (their profiles' ``kv_dtypes``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import engines_with_kv
from estimator.physics.kv import kv_cache_for
from estimator.render import i18n
from estimator.render.blocks import Block, Table, both, fit_cell, gb, gib
from estimator.render.htmlkit import Ctx, card, e, section, table, verdict
from estimator.report.sizing import SIZING_ERRORS, memory_sequences
from estimator.report.units import Build, Unit

KV_OPTIONS = ("f16", "q8_0", "fp8", "q4_0")


@dataclass(frozen=True)
class KVOption:
    """One KV dtype: its KV bytes, the saving against the chosen dtype (negative: costs more), the total and
    the verdict."""

    kv_dtype: str
    kv_bytes: int
    saving_bytes: int  # vs the chosen KV dtype (negative: costs more)
    total_bytes: int
    verdict: str
    engines: tuple[str, ...]


@dataclass(frozen=True)
class KVSection:
    """KV cache and state of the sized configuration (bytes) and the dtype options."""

    kv_dtype: str
    n_ctx: int
    n_seq: int
    kv_bytes: int
    bytes_per_token: int
    state_bytes: int
    by_kind_bytes: dict[str, int]
    options: tuple[KVOption, ...]


def build(b: Build) -> KVSection:
    wl, m = b.workload, b.memory
    n_seq = memory_sequences(wl)
    kv = kv_cache_for(b.model, wl, n_seq=n_seq)
    options = []
    for dt in KV_OPTIONS:
        try:
            mo = b.sizing.memory(b.quant, b.hardware, replace(wl, kv_dtype=dt, flash_attn=True))
        except SIZING_ERRORS:
            continue
        options.append(
            KVOption(
                kv_dtype=dt,
                kv_bytes=int(mo.kv_bytes),
                saving_bytes=int(m.kv_bytes - mo.kv_bytes),
                total_bytes=int(mo.total_bytes),
                verdict=mo.verdict,
                engines=engines_with_kv(dt),
            )
        )
    return KVSection(
        kv_dtype=wl.kv_dtype,
        n_ctx=wl.n_ctx,
        n_seq=n_seq,
        kv_bytes=int(kv.total_bytes),
        bytes_per_token=int(kv.bytes_per_token),
        state_bytes=int(kv.state_bytes),
        by_kind_bytes={k: int(v) for k, v in kv.by_kind_bytes.items()},
        options=tuple(options),
    )


def text(d: dict) -> Block:
    kv = d["kv"]
    s = Block("kv", f"KV cache at {kv['n_ctx']:,} tokens x {kv['n_seq']} sequence(s), {kv['kv_dtype']}")
    kinds = ", ".join(f"{k} {gib(v)} GiB" for k, v in kv["by_kind_bytes"].items())
    s.lines.append(
        f"{both(kv['kv_bytes'])} ({kinds}); {kv['bytes_per_token']:,} bytes per token of context "
        f"(full-attention layers); fixed state {both(kv['state_bytes'])}."
    )
    rows = [
        [o["kv_dtype"], gib(o["kv_bytes"]), gib(o["saving_bytes"]), gib(o["total_bytes"]),
         gb(o["total_bytes"]), fit_cell(o["verdict"]), ", ".join(o["engines"])]
        for o in kv["options"]
    ]  # fmt: skip
    heads = ["KV dtype", "KV GiB", "saves GiB", "total GiB", "total GB", "fits", "engines"]
    s.tables.append(Table(heads, rows))
    return s


def html(ctx: Ctx) -> str:
    head = [
        ctx.t("kv_dtype"),
        ctx.t("kv_gib"),
        ctx.t("kv_saving", dtype=""),
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("engine"),
    ]
    rows, cls = [], []
    for i, o in enumerate(ctx.get("kv.options") or []):
        p = f"kv.options.{i}"
        rows.append(
            [
                e(o.get("kv_dtype")),
                ctx.num(f"{p}.kv_bytes"),
                ctx.num(f"{p}.saving_bytes"),
                ctx.num(f"{p}.total_bytes"),
                verdict(ctx, f"{p}.verdict"),
                e(", ".join(o.get("engines", []))),
            ]
        )
        cls.append("current" if o.get("kv_dtype") == ctx.get("kv.kv_dtype") else "")
    kinds = ", ".join(
        f"{k}: {i18n.fmt_gib(v, ctx.lang)}" for k, v in (ctx.get("kv.by_kind_bytes") or {}).items()
    )
    cards = "".join(
        [
            card(
                # the number in English: translate_html localizes the fragment's text once
                ctx.t("kv_at_ctx", ctx=i18n.fmt_int(ctx.get("kv.n_ctx")), dtype=ctx.get("kv.kv_dtype")),
                ctx.num("kv.kv_bytes"),
                e(kinds),
            ),
            card(
                ctx.t("kv_per_token"),
                ctx.num("kv.bytes_per_token", "int"),
                f"state: {ctx.num('kv.state_bytes', 'gib')}",
            ),
        ]
    )
    return section(
        "kv", ctx.t("sec_kv"), f'<div class="cards">{cards}</div>' + table(head, rows, {1, 2, 3}, cls)
    )


UNIT = Unit(key="kv", type=KVSection, build=build, text=text, html=html)
