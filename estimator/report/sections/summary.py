"""The answer first: the summary at the top of every report (and all of ``report --brief``) — what is sized on
what, the memory verdict, decode with an empty context and with the KV cache half full, prefill and time to
first token, and what a million output tokens cost — plus the report's ``notes`` (what the request did on the
user's behalf).  Rendered only: its numbers are the other sections'.

Speed labels say where the cache is: the speed section's decode is tg128 from an empty context; its
aggregate (and, at concurrency 1, the one stream it is) is measured with the KV cache half full (n_ctx / 2
tokens per sequence), which is why the two differ.
"""

from __future__ import annotations

import math

from estimator.engines import get_engine
from estimator.render.blocks import Block, both, gib, pct, tok, usd
from estimator.render.htmlkit import Ctx, card, e, verdict
from estimator.render.i18n import fmt_int, t
from estimator.report.units import Build, Unit
from estimator.specs import GIB, Workload


def _seconds(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x * 1000:,.0f} ms" if x < 1 else f"{x:,.2f} s"


# weight formats whose bytes differ by less than this share are one precision with other scales
SAME_BITS = 0.02


def best_fitting_format(d: dict) -> dict | None:
    """The quantization matrix's row of the largest format (most weight bytes: the most bits) that fits and
    runs on the sized engine, for a configuration that does not fit, preferring among formats of one
    precision (``SAME_BITS``) the one the engine serves from the published checkpoint (``from_published``);
    F32 is never the answer, and a row of the sized format itself never is (it does not fit).  None when
    none fits."""
    if (d.get("memory") or {}).get("verdict") != "does not fit":
        return None
    engine = (d.get("workload") or {}).get("engine")
    rows = [
        r
        for r in d.get("quant_matrix") or ()
        if r.get("verdict") == "fits"
        and r.get("support") in ("native", "fallback")
        and (engine in (r.get("engines") or ()) or r["quant"].endswith("(GGUF file)"))
        and r["quant"] not in ("F32", d.get("quant"))
        and r.get("weights_bytes")
    ]
    if not rows:
        return None
    # formats within SAME_BITS of the largest differ by their scales only (FP8 and FP8-BLOCK): the one the
    # engine serves from the published checkpoint (FP8 quantized at load time, not a block-scaled checkpoint
    # someone must publish) is the answer a user can act on
    top = max(r["weights_bytes"] for r in rows)
    near = [r for r in rows if r["weights_bytes"] >= top * (1 - SAME_BITS)]
    return max(near, key=lambda r: (bool(r.get("from_published")), r["weights_bytes"]))


def starts_line(d: dict) -> str | None:
    """For an engine that reserves its memory (vLLM, SGLang, TensorRT-LLM) and does not fit only because the
    requested sequences' KV exceeds its pool: it starts all the same (its pool holds at least one sequence of
    n_ctx tokens) and serves ``max_concurrency`` full-length sequences at once, so that many slots fit and
    more clients wait for one.  None otherwise."""
    mem, w = d.get("memory") or {}, d["workload"]
    profile = get_engine(w["engine"])
    most, cap = mem.get("max_concurrency"), mem.get("kv_capacity_tokens")
    asked = int(w.get("concurrency") or 1)  # the sequences the memory is sized for (sizing.memory_sequences)
    if not profile.reserves_memory or mem.get("verdict") != "does not fit" or not most or not cap:
        return None
    if most >= asked:
        return None
    return (
        f"{profile.label} starts: its KV pool holds {cap:,} tokens, {most:,} sequences of {w['n_ctx']:,} "
        f"tokens at once; with --concurrency {most} it fits, and more clients wait for a free slot."
    )


def speed_lines(d: dict) -> list[str]:
    """Decode (empty context, then half-full cache at the concurrency), prefill and TTFT, one line each."""
    sp, w = d.get("speed"), d["workload"]
    if not sp:
        if (d.get("support") or {}).get("status") == "unsupported":
            return ["Speed: none — the engine cannot run this configuration on this device (see Support)."]
        return ["Speed: no estimate (the device lacks the bandwidth or TFLOPS figures the physics needs)."]
    dec, agg, pre = sp["decode"], sp["aggregate"], sp["prefill"]
    half = w["n_ctx"] // 2
    if sp["concurrency"] > 1:
        busy = (
            f"{tok(agg['tok_s'])} tok/s in total at concurrency {sp['concurrency']} with the KV cache half "
            f"full ({half:,} tokens each), {tok(sp['per_sequence_tok_s'])} per sequence"
        )
    else:
        busy = f"{tok(agg['tok_s'])} tok/s with the KV cache half full ({half:,} tokens)"
    lines = []
    mem = d.get("memory") or {}
    if mem.get("verdict") == "does not fit":
        start = starts_line(d)
        if start:
            lines.append(start)
        if mem.get("kv_dtype_fit"):
            lines.append(
                f"With --kv-dtype {mem['kv_dtype_fit']} it fits: {gib(mem['kv_dtype_fit_total_bytes'])} "
                f"GiB in all (KV cache {gib(mem['kv_dtype_fit_kv_bytes'])} GiB), the weights as asked."
            )
        best = best_fitting_format(d)
        if best is not None:
            f = best.get("decode") or {}
            fb = ", on a fallback" if best.get("support") == "fallback" else ""
            speed = (
                f"; decode {tok(f['tok_s'])} tok/s ({tok(f['lo_tok_s'])}–{tok(f['hi_tok_s'])}) one stream, "
                "empty context"
                if f
                else ""
            )
            lines.append(
                f"Fits as {best['quant']}: {gib(best['total_bytes'])} GiB in all{fb}{speed} (the largest "
                "format of the quantization matrix that fits)."
            )
        k, moe = mem.get("moe_offload_layers"), sp.get("moe_offload_decode")
        if k and moe:
            lines.append(
                f"With --n-cpu-moe {k} it fits (the routed experts of {k} layers in host RAM, "
                f"{gib(mem['moe_offload_host_bytes'])} GiB): decode {tok(moe['tok_s'])} tok/s "
                f"({tok(moe['lo_tok_s'])}–{tok(moe['hi_tok_s'])}) one stream, empty context."
            )
        dp = mem.get("attention_dp_total_bytes")
        if dp:
            w = d["workload"]
            flags = get_engine(w["engine"]).attention_dp_flags.replace("N", str(w["n_devices"]))
            most = mem.get("attention_dp_max_concurrency")
            most = f", up to {most:,} sequences of {w['n_ctx']:,} tokens" if most else ""
            lines.append(
                f"With --split dp it fits ({flags}: attention data parallel, routed experts "
                f"expert-parallel): {gib(dp)} GiB in all{most}; each device holds the KV cache of its own "
                "sequences only."
            )
        # rounded up to 0.1 GiB, so the suggested offload does fit
        off = math.ceil(mem["min_offload_bytes"] / GIB * 10) / 10 if mem.get("min_offload_bytes") else None
        tail = f"; --offload-gib {off:.1f} sizes the least host offload that fits." if off else "."
        if start:  # the weights are in device memory; what does not fit is every sequence at once
            lines.append(
                f"As if they fit at once: the total at concurrency {sp['concurrency']} below assumes every "
                "sequence's KV cache in the pool."
            )
        else:
            assumed = "As if it fit: these speeds and the cost assume every weight in device memory"
            lines.append(assumed + tail)
    return lines + [
        f"Decode: {tok(dec['tok_s'])} tok/s ({tok(dec['lo_tok_s'])}–{tok(dec['hi_tok_s'])}) one stream, "
        f"empty context; {busy}.",
        f"Prefill: {tok(pre['tok_s'])} tok/s (pp{sp['prefill_prompt_tokens']}); time to first token "
        f"{_seconds(sp['ttft_s'])} for a {sp['ttft_prompt_tokens']:,}-token prompt.",
        f"Speeds are estimates ({dec['coefficients']}).",
    ]


def cost_line(d: dict) -> str:
    """The hourly rate with where it came from, and USD per 1M output tokens with the throughput it is priced
    at and why (``cost.aggregate_basis``: the serving point within the SLO, the decode of the sequences)."""
    c = d.get("cost") or {}
    if c.get("usd_per_hour") is None:
        return "Cost: no hourly rate for this device (--usd-per-hour sets one)."
    if c["rate_origin"] == "--usd-per-hour":
        src = f"set with --usd-per-hour {c['usd_per_hour']:g}"
    elif c.get("rate_provider"):
        src = (
            f"{c['rate_provider']} {c['rate_instance']}, {c['rate_origin']}, verified "
            f"{c['rate_verified_date']}"
        )
    else:
        src = c["rate_origin"]
    per = c.get("usd_per_1m_output_tokens")
    tail = f" -> {usd(per)} per 1M output tokens" if per is not None else ""
    if per is not None and c.get("aggregate_basis") and c.get("aggregate_tok_s"):
        tail += f" at {c['aggregate_tok_s']:,.0f} tok/s: {c['aggregate_basis']}"
    return f"Cost: {usd(c['usd_per_hour'])}/h ({src}){tail}."


def option_words(w: dict) -> list[str]:
    """The sized workload's memory options that differ from the engine's defaults, in llama.cpp's words
    (flash attention off, a micro-batch other than 512, --swa-full, one KV stream per sequence, a padding)."""
    words = []
    if not w.get("flash_attn", True):
        words.append("flash attention off")
    if w.get("n_ubatch", Workload.n_ubatch) != Workload.n_ubatch:
        words.append(f"micro-batch {w['n_ubatch']:,} tokens")
    if w.get("swa_full"):
        words.append("full-size sliding-window cache (--swa-full)")
    if not w.get("kv_unified", True) and w.get("concurrency", 1) > 1:
        words.append("one KV stream per sequence (no --kv-unified)")
    if w.get("kv_pad"):
        words.append(f"KV cells padded to {w['kv_pad']}")
    return words


def text(d: dict) -> Block:
    """The summary panel: configuration, verdict, memory, speeds, cost, then notes and warnings."""
    m, w, mem, hw = d["model"], d["workload"], d["memory"], d["hardware"]
    s = Block("summary", f"{m['name']} on {w['n_devices']} x {hw['name']}")
    s.lines.append(
        f"{d['quant']} weights, {w['n_ctx']:,} tokens of context, KV {w['kv_dtype']}, engine {w['engine']}, "
        f"split {w['split']}, concurrency {w['concurrency']}."
    )
    options = option_words(w)
    if options:
        s.lines.append(f"Options: {', '.join(options)}.")
    s.lines.append(
        f"Verdict: **{mem['verdict']}** — needs {both(mem['total_bytes'])} of {both(mem['usable_bytes'])} "
        f"usable ({pct(mem['utilization'])} utilisation, headroom {gib(mem['headroom_bytes'])} GiB)."
    )
    band = mem.get("compute_band") or {}
    if band.get("tight"):
        more = band["compute_hi_bytes"] - band["compute_bytes"]
        s.lines.append(
            f"Tight: the compute buffers may take {gib(more)} GiB "
            "more (95th percentile of the engine's measured buffers), more than the headroom; see Memory."
        )
    sup = d.get("support") or {}
    if sup.get("status") in ("fallback", "unsupported"):
        s.lines.append(f"Support: {sup['headline']}.")
    s.lines.append(
        f"Memory: weights {gib(mem['weights_bytes'])} GiB, KV cache {gib(mem['kv_bytes'])} GiB, runtime "
        f"{gib(mem['runtime_bytes'])} GiB, overhead {gib(mem['overhead_bytes'])} GiB"
        + (f", host RAM {gib(mem['host_bytes'])} GiB." if mem["host_bytes"] else ".")
    )
    s.lines += speed_lines(d)
    s.lines.append(cost_line(d))
    s.lines += [f"note: {n}" for n in d.get("notes") or ()]
    s.lines += [f"warning: {x}" for x in d.get("warnings") or ()]
    return s


# --- HTML --------------------------------------------------------------------------------------------------
def _cards(ctx: Ctx) -> str:
    """Verdict, memory, decode, time to first token and cost per 1M tokens, side by side."""
    cards = [
        card(
            ctx.t("sec_verdict"),
            verdict(ctx, "memory.verdict"),
            f"{ctx.t('headroom')}: {ctx.num('memory.headroom_bytes', 'gib')}"
            + (f" · {ctx.t('tight')}" if ctx.get("memory.compute_band.tight") else ""),
        ),
        card(
            ctx.t("required"),
            ctx.num("memory.total_bytes", "gib"),
            f"{ctx.t('usable')}: {ctx.num('memory.usable_bytes', 'gib')} · "
            f"{ctx.num('memory.utilization', 'pct')}",
        ),
    ]
    if ctx.get("speed") is not None:
        half = (ctx.get("workload.n_ctx") or 0) // 2
        unfit = ctx.get("memory.verdict") == "does not fit"
        # one stream of an engine that starts (starts_line) is real: only the sequences at once do not fit
        as_if = unfit and starts_line(ctx.report) is None
        cards.append(
            card(
                f"{ctx.t('decode')} · {ctx.t('empty_context')}"
                + (f" · {ctx.t('if_it_fit')}" if as_if else ""),
                ctx.num("speed.decode.tok_s", "tok_s"),
                ctx.t("kv_half_full", n=fmt_int(half))  # English: translate_html localizes the number
                + f": {ctx.num('speed.aggregate.tok_s', 'tok_s')}"
                + (
                    f" ({ctx.t('aggregate', n=ctx.get('speed.concurrency'))})"
                    if (ctx.get("speed.concurrency") or 1) > 1
                    else ""
                ),
            )
        )
        if unfit and not as_if:  # the engine starts: its pool holds max_concurrency sequences at once
            most = ctx.get("memory.max_concurrency")
            cards.append(
                card(
                    ctx.t("engine_starts", e=get_engine(ctx.get("workload.engine")).label, n=most),
                    ctx.num("memory.kv_capacity_tokens", "int"),
                    # English numbers: translate_html localizes them
                    ctx.t("at_once", n=fmt_int(most), c=fmt_int(ctx.get("workload.n_ctx"))),
                )
            )
        best = best_fitting_format(ctx.report) if unfit else None
        if best is not None and best.get("decode"):
            i = ctx.get("quant_matrix").index(best)
            cards.append(
                card(
                    ctx.t("fits_as", q=best["quant"]),
                    ctx.num(f"quant_matrix.{i}.decode.tok_s", "tok_s"),
                    ctx.t("largest_fitting", g=gib(best["total_bytes"])),
                )
            )
        k = ctx.get("memory.moe_offload_layers")
        if unfit and k and ctx.get("speed.moe_offload_decode") is not None:
            cards.append(
                card(
                    ctx.t("with_moe_offload", k=k),
                    ctx.num("speed.moe_offload_decode.tok_s", "tok_s"),
                    f"{ctx.t('experts_in_host')}: {ctx.num('memory.moe_offload_host_bytes', 'gib')}",
                )
            )
        if unfit and ctx.get("memory.kv_dtype_fit"):
            cards.append(
                card(
                    ctx.t("with_kv_dtype", k=e(ctx.get("memory.kv_dtype_fit"))),
                    ctx.num("memory.kv_dtype_fit_total_bytes", "gib"),
                    f"{ctx.t('kv')}: {ctx.num('memory.kv_dtype_fit_kv_bytes', 'gib')}",
                )
            )
        if unfit and ctx.get("memory.attention_dp_total_bytes"):
            most = ctx.get("memory.attention_dp_max_concurrency")
            cards.append(
                card(
                    ctx.t("with_attention_dp"),
                    ctx.num("memory.attention_dp_total_bytes", "gib"),
                    ctx.t("attention_dp_sub", n=fmt_int(most) if most else "?"),
                )
            )
        cards.append(
            card(
                ctx.t("ttft"),
                ctx.num("speed.ttft_s", "seconds"),
                f"{ctx.t('prefill')}: {ctx.num('speed.prefill.tok_s', 'tok_s')}",
            )
        )
    rate = ctx.get("cost.usd_per_hour")
    cards.append(
        card(
            ctx.t("cost_per_1m"),
            ctx.num("cost.usd_per_1m_output_tokens", "usd"),
            (f"{ctx.t('usd_per_hour')}: {ctx.num('cost.usd_per_hour', 'usd')}" if rate is not None else "")
            + (f" · {e(ctx.get('cost.rate_provider'))}" if ctx.get("cost.rate_provider") else ""),
        )
    )
    return f'<div class="cards summary-cards">{"".join(cards)}</div>'


def html(ctx: Ctx) -> str:
    """The page header: title, the configuration, the answer as cards, and the report's notes."""
    model, hw = ctx.get("model.name", ""), ctx.get("hardware.name", "")
    n = ctx.get("workload.n_devices", 1) or 1
    hw_label = f"{n}× {hw}" if n > 1 else hw
    lede = (
        f"{e(ctx.get('quant'))} · {ctx.t('context')}: {ctx.num('workload.n_ctx', 'int')} · "
        f"KV {e(ctx.get('workload.kv_dtype'))} · {e(ctx.get('workload.engine'))}"
        + "".join(f' · <span class="option">{e(x)}</span>' for x in option_words(ctx.get("workload") or {}))
    )
    notes = "".join(f"<li>{e(x)}</li>" for x in ctx.get("notes") or ())
    return (
        f"<header><h1>{e(t('title_on', ctx.lang, model=model, hardware=hw_label))}</h1>"
        f'<p class="lede">{lede}</p>{_cards(ctx)}'
        + (f'<ul class="notes request-notes">{notes}</ul>' if notes else "")
        + f'<p class="note">{ctx.t("estimated_note")} {ctx.t("units_note")}</p></header>'
    )


def notes(b: Build) -> tuple[str, ...]:
    """What the request did on the user's behalf (``ReportOptions.notes``) and how the device differs from
    its catalog row (``HardwareSpec.notes``), each once."""
    return tuple(dict.fromkeys((*b.options.notes, *b.hardware.notes)))


UNIT = Unit(key=None, text=text, html=html)
NOTES = Unit(key="notes", type=tuple[str, ...], build=notes)
