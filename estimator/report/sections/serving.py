"""Serving at concurrency (estimated): TTFT, TPOT and output throughput of the sized configuration when it
answers many clients at once, over a sweep of concurrencies, and the largest concurrency that meets the
latency objective (estimator.physics.serving).

Load: clients each send requests of ``options.serving_isl`` prompt tokens for ``options.serving_osl`` output
tokens and the next one when answered (``vllm bench serve --max-concurrency C``); both are capped so that a
request fits the context.  Sweep: concurrencies 1, 2, 4, ... up to the engine's running-request limit (at
least the sized concurrency).  The SLO point: the largest concurrency C whose TTFT <= ``slo_ttft_s`` and TPOT
<= ``slo_tpot_s``, found on the sweep and refined by bisection between its neighbours (TTFT and TPOT grow with
C).  The cost section prices output tokens at that point.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import get_engine
from estimator.physics import serving as serving_mod
from estimator.render import charts
from estimator.render.blocks import Block, Table, tok
from estimator.render.htmlkit import Ctx, card, e, figure, section, table
from estimator.render.i18n import fmt_int, t
from estimator.report.sizing import SIZING_ERRORS, memory_sequences
from estimator.report.units import Build, Unit

SWEEP_MAX = 4096  # no sweep beyond this many clients
# an engine whose prefill batches pause decoding serves equal-length clients in lock step
# (estimator.physics.serving, "Lock-step cohort")
COHORT_NOTE = (
    "every request has exactly these lengths (--lengths fixed), so the engine prefills the clients' "
    "requests together before it decodes them: TTFT includes the whole cohort's prompts and TPOT is "
    "plain decode steps (with lengths that vary, prompts interrupt decoding: shorter TTFT, longer "
    "TPOT)"
)
SPREAD_NOTE = (
    "request lengths vary (--lengths spread), so new prompts keep arriving and the engine pauses decoding to "
    "prefill them: TPOT includes the other requests' prompts (with exactly equal lengths the clients move in "
    "lock step: longer TTFT, shorter TPOT)"
)
OFFLOAD_NOTE = (
    "the configuration keeps weights in host RAM, and the serving model reads every weight from device "
    "memory (a batch's offloaded layers run on the host CPU or are copied over the link at every step); "
    "the cost is priced at the speed section's decode"
)
_BISECT_STEPS = 12


@dataclass(frozen=True)
class ServingRow:
    """One load of the sweep (seconds, tokens/s; intervals from the serving set, see physics.serving)."""

    concurrency: int
    ttft_s: float
    ttft_lo_s: float
    ttft_hi_s: float
    tpot_s: float
    tpot_lo_s: float
    tpot_hi_s: float
    output_tok_s: float
    output_lo_tok_s: float
    output_hi_tok_s: float
    per_user_tok_s: float
    running: float
    kv_limited: bool
    meets_slo: bool


@dataclass(frozen=True)
class ServingSection:
    """The concurrency sweep, the SLO operating point (None when even one client misses the SLO) and the
    scheduler and coefficients behind them."""

    engine: str
    isl: int
    osl: int
    slo_ttft_s: float
    slo_tpot_s: float
    rows: tuple[ServingRow, ...]
    slo_point: ServingRow | None
    max_batched_tokens: int
    max_seqs: int
    mixes_prefill: bool
    scheduler_source: str
    kv_capacity_tokens: int | None
    coefficients: str
    calibrated: bool
    notes: tuple[str, ...]


def _row(est: serving_mod.ServingEstimate, slo_ttft_s: float, slo_tpot_s: float) -> ServingRow:
    return ServingRow(
        concurrency=est.concurrency,
        ttft_s=est.ttft_s,
        ttft_lo_s=est.ttft_lo_s,
        ttft_hi_s=est.ttft_hi_s,
        tpot_s=est.tpot_s,
        tpot_lo_s=est.tpot_lo_s,
        tpot_hi_s=est.tpot_hi_s,
        output_tok_s=est.output_tok_s,
        output_lo_tok_s=est.output_lo_tok_s,
        output_hi_tok_s=est.output_hi_tok_s,
        per_user_tok_s=est.per_user_tok_s,
        running=est.running,
        kv_limited=est.kv_limited,
        meets_slo=est.ttft_s <= slo_ttft_s and est.tpot_s <= slo_tpot_s,
    )


def lengths(isl: int, osl: int, n_ctx: int) -> tuple[int, int]:
    """Request lengths that fit a context of n_ctx tokens: at most half of it for each side."""
    if isl + osl <= n_ctx:
        return isl, osl
    isl2 = max(1, min(isl, n_ctx // 2))
    return isl2, max(1, min(osl, n_ctx - isl2))


def sweep_concurrencies(limit: int, sized: int) -> list[int]:
    """1, 2, 4, ... up to ``limit`` (and ``limit`` itself), plus the sized concurrency."""
    out, c = [], 1
    while c < limit:
        out.append(c)
        c *= 2
    out.append(limit)
    if sized <= limit:
        out.append(sized)
    return sorted(set(out))


def build(b: Build) -> ServingSection | None:
    """The sweep and the SLO point, or None when the device lacks the figures the speed physics needs."""
    o, wl = b.options, b.workload
    isl, osl = lengths(o.serving_isl, o.serving_osl, int(wl.n_ctx))
    profile = get_engine(wl.engine)
    sched = serving_mod.ranked_scheduler(profile, b.hardware, wl, serving_mod.dp_ranks(wl))
    limit = min(max(sched.max_seqs, int(wl.concurrency)), SWEEP_MAX)
    serve_wl = replace(wl, n_seq=1)
    try:
        sp = serving_mod.serving_params(b.table, b.hardware, wl.engine)
        cap, state_cap = serving_mod.pool_capacity(b.model, b.quant, b.hardware, serve_wl, b.table)
        as_if = b.memory.verdict == "does not fit" and cap is not None and cap <= 0
        if as_if:  # weights and buffers leave no pool: as if it fit (the speed section's figures too)
            cap = None
        first = serving_mod.serving_features(
            b.model,
            b.quant,
            b.hardware,
            serve_wl,
            serving_mod.ServingLoad(1, isl, osl, equal_lengths=o.serving_equal_lengths),
            cap,
            state_max_requests=state_cap,
        )
    except SIZING_ERRORS:
        return None
    if wl.offload_bytes > 0 or wl.moe_offload_layers > 0:
        # not estimated: the serving model reads every weight from device memory, and a batch's offloaded
        # layers run where llama.cpp / vLLM put them (the host CPU, or copies over the link per step)
        return ServingSection(
            engine=wl.engine, isl=isl, osl=osl, slo_ttft_s=o.slo_ttft_s, slo_tpot_s=o.slo_tpot_s, rows=(),
            slo_point=None, max_batched_tokens=sched.max_batched_tokens, max_seqs=sched.max_seqs,
            mixes_prefill=sched.mixes_prefill, scheduler_source=sched.source, kv_capacity_tokens=cap,
            coefficients=sp.label, calibrated=sp.calibrated, notes=(OFFLOAD_NOTE,),
        )  # fmt: skip
    cache: dict[int, ServingRow] = {}

    def at(c: int) -> ServingRow:
        if c not in cache:
            f = replace(first, concurrency=float(c))
            est = serving_mod.with_intervals(serving_mod.point(f, sp.params), sp)
            cache[c] = _row(est, o.slo_ttft_s, o.slo_tpot_s)
        return cache[c]

    try:
        rows = [at(c) for c in sweep_concurrencies(limit, int(wl.concurrency))]
        slo = _slo_point(rows, at)
    except SIZING_ERRORS:
        return None
    client = profile.bench_client or "a closed-loop client of C connections"
    notes = [
        f"requests of {isl:,} prompt + {osl:,} output tokens; clients send the next request when answered "
        f"({client}); TTFT includes queueing behind other requests",
        f"scheduler: {sched.source}",
    ]
    if not sched.mixes_prefill:
        notes.append(COHORT_NOTE if o.serving_equal_lengths else SPREAD_NOTE)
    if (isl, osl) != (o.serving_isl, o.serving_osl):
        notes.append(f"request lengths capped to the {int(wl.n_ctx):,}-token context")
    if cap is not None:
        notes.append(
            f"the KV pool holds {cap:,} tokens: about {max(int(cap // (isl + osl / 2)), 0):,} requests run "
            "at once, the others wait for a slot"
        )
    if "ttft_lone" in sp.cset.intervals:
        notes.append(
            f"TTFT intervals up to {serving_mod.LONE_CONCURRENCY} clients are those of lone requests "
            "(held-out TTFTs of such runs); above, of every concurrency, queueing included: wider"
        )
    if slo is None:
        notes.append("no concurrency meets the latency objective, not even one client")
    if as_if:
        notes.append(
            "the configuration does not fit in memory: these figures assume it would, with a KV pool as "
            "large as the clients need"
        )
    elif b.memory.verdict == "does not fit" and cap is None:  # KV sized per slot (llama-server)
        notes.append("the configuration does not fit in memory: these figures assume it would")
    elif b.memory.verdict == "does not fit":  # the pool exists; the sized sequences' KV overflows it
        notes.append(
            f"the KV cache of {memory_sequences(wl):,} sequences of {int(wl.n_ctx):,} tokens does not fit: "
            "these figures are of the pool the engine reserves, which runs fewer requests at once"
        )
    if not sp.calibrated:
        notes.append(
            "serving figures from uncalibrated coefficients for this engine and family: wide interval"
        )
    return ServingSection(
        engine=wl.engine,
        isl=isl,
        osl=osl,
        slo_ttft_s=o.slo_ttft_s,
        slo_tpot_s=o.slo_tpot_s,
        rows=tuple(rows),
        slo_point=slo,
        max_batched_tokens=sched.max_batched_tokens,
        max_seqs=sched.max_seqs,
        mixes_prefill=sched.mixes_prefill,
        scheduler_source=sched.source,
        kv_capacity_tokens=cap,
        coefficients=sp.label,
        calibrated=sp.calibrated,
        notes=tuple(notes),
    )


def _slo_point(rows: list[ServingRow], at) -> ServingRow | None:
    """The largest concurrency meeting the SLO: the last passing sweep point, refined by bisection up to the
    next (failing) sweep point."""
    passing = [r for r in rows if r.meets_slo]
    if not passing:
        return None
    best = passing[-1]
    later = [r for r in rows if r.concurrency > best.concurrency and not r.meets_slo]
    if not later:
        return best
    lo, hi = best.concurrency, later[0].concurrency
    for _ in range(_BISECT_STEPS):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        if at(mid).meets_slo:
            lo = mid
        else:
            hi = mid
    return at(lo)


# ------------------------------------------------------------------------------------------ renderings
def _ms(s: float) -> str:
    return f"{s * 1000:,.0f}" if s >= 0.1 else f"{s * 1000:,.1f}"


def text(d: dict) -> Block:
    sv = d.get("serving")
    s = Block("serving", "Serving at concurrency (estimated)")
    if not sv:
        s.lines.append("No serving estimate for this device (missing bandwidth or TFLOPS).")
        return s
    if not sv["rows"]:  # declined (OFFLOAD_NOTE): the reason is the note
        s.lines += [f"No serving estimate: {n}." for n in sv["notes"]]
        return s
    p = sv["slo_point"]
    slo = f"TTFT <= {_ms(sv['slo_ttft_s'])} ms and TPOT <= {_ms(sv['slo_tpot_s'])} ms"
    if p:
        s.lines.append(
            f"Largest concurrency meeting {slo}: {p['concurrency']:,} "
            f"client{'' if p['concurrency'] == 1 else 's'}, {tok(p['output_tok_s'])} "
            f"output tok/s in all ({tok(p['per_user_tok_s'])} tok/s per client), TTFT {_ms(p['ttft_s'])} ms, "
            f"TPOT {_ms(p['tpot_s'])} ms."
        )
    else:
        s.lines.append(f"No concurrency meets {slo}.")
    rows = [
        [
            f"{r['concurrency']:,}",
            f"{_ms(r['ttft_s'])} ({_ms(r['ttft_lo_s'])}–{_ms(r['ttft_hi_s'])})",
            f"{_ms(r['tpot_s'])} ({_ms(r['tpot_lo_s'])}–{_ms(r['tpot_hi_s'])})",
            f"{tok(r['output_tok_s'])} ({tok(r['output_lo_tok_s'])}–{tok(r['output_hi_tok_s'])})",
            tok(r["per_user_tok_s"]),
            f"{r['running']:,.0f}" + (" (KV)" if r["kv_limited"] else ""),
            "yes" if r["meets_slo"] else "no",
        ]
        for r in sv["rows"]
    ]
    head = ["clients", "TTFT ms", "TPOT ms", "output tok/s", "tok/s per client", "running", "meets SLO"]
    s.tables.append(Table(head, rows))
    s.lines.append(f"Coefficients: {sv['coefficients']}.")
    s.notes += [f"note: {n}" for n in sv["notes"]]
    return s


def html(ctx: Ctx) -> str:
    sv = ctx.get("serving")
    if not sv:
        return section("serving", ctx.t("sec_serving"), f'<p class="note">{ctx.t("no_data")}</p>')
    if not sv["rows"]:  # declined (OFFLOAD_NOTE)
        body = "".join(f'<p class="note">{e(n)}</p>' for n in sv["notes"])
        return section("serving", ctx.t("sec_serving"), body)
    # translate_html localizes an English number followed by its unit (ms, tokens) once: those go in English,
    # the prompt length (no unit after it) in the page's language
    slo_txt = ctx.t(
        "slo_text", ttft=_ms(sv["slo_ttft_s"]), tpot=_ms(sv["slo_tpot_s"]), isl=fmt_int(sv["isl"], ctx.lang),
        osl=fmt_int(sv["osl"]),
    )  # fmt: skip
    if sv["slo_point"]:
        p = "serving.slo_point"
        cards = "".join(
            [
                card(ctx.t("slo_concurrency"), ctx.num(f"{p}.concurrency", "int"), slo_txt),
                card(
                    ctx.t("output_throughput"),
                    ctx.num(f"{p}.output_tok_s", "tok_s"),
                    f"{ctx.t('per_user')}: {ctx.num(f'{p}.per_user_tok_s', 'tok_s')}",
                ),
                card("TTFT", ctx.num(f"{p}.ttft_s", "seconds"), f"TPOT {ctx.num(f'{p}.tpot_s', 'seconds')}"),
            ]
        )
    else:
        cards = card(ctx.t("slo_concurrency"), "—", ctx.t("slo_none") + " " + slo_txt)
    rows, cls = [], []
    for i, r in enumerate(sv["rows"]):
        q = f"serving.rows.{i}"
        rows.append(
            [
                ctx.num(f"{q}.concurrency", "int"),
                ctx.num(f"{q}.ttft_s", "seconds"),
                ctx.num(f"{q}.tpot_s", "seconds"),
                ctx.num(f"{q}.output_tok_s", "tok_s"),
                ctx.num(f"{q}.per_user_tok_s", "tok_s"),
                ctx.num(f"{q}.running", "int") + (" KV" if r["kv_limited"] else ""),
                ctx.t("yes") if r["meets_slo"] else ctx.t("no"),
            ]
        )
        cls.append("" if r["meets_slo"] else "over")
    head = [
        ctx.t("clients"), "TTFT", "TPOT", ctx.t("output_throughput"), ctx.t("per_user"), ctx.t("running"),
        ctx.t("meets_slo"),
    ]  # fmt: skip
    notes = "".join(
        f"<li>{e(n)}</li>" for n in [f"{ctx.t('coefficients')}: {sv['coefficients']}", *sv["notes"]]
    )
    return section(
        "serving",
        ctx.t("sec_serving"),
        f'<div class="cards">{cards}</div>'
        + _charts(ctx, sv)
        + table(head, rows, {0, 1, 2, 3, 4, 5}, cls)
        + f'<ul class="notes">{notes}</ul>',
    )


def _charts(ctx: Ctx, sv: dict) -> str:
    """Output throughput, TPOT and TTFT against the number of clients (log2 x), SLO limits dashed."""
    rows = sv["rows"]

    def series(key: str, scale: float = 1.0) -> list[tuple[float, float]]:
        return [(float(r["concurrency"]), r[key] * scale) for r in rows]

    lang = ctx.lang

    def fmt_x(v: float) -> str:
        return fmt_int(v, lang)

    out = charts.line_chart(
        [(t("output_throughput", lang), series("output_tok_s"))], lang, t("chart_serving_tok", lang), fmt_x,
        "tok/s",
    )  # fmt: skip
    out += charts.line_chart(
        [("TPOT", series("tpot_s", 1000.0))], lang, t("chart_serving_tpot", lang), fmt_x, "ms",
        (sv["slo_tpot_s"] * 1000.0, "SLO"),
    )  # fmt: skip
    out += charts.line_chart(
        [("TTFT", series("ttft_s", 1000.0))], lang, t("chart_serving_ttft", lang), fmt_x, "ms",
        (sv["slo_ttft_s"] * 1000.0, "SLO"),
    )  # fmt: skip
    return figure(out, sv["coefficients"])


UNIT = Unit(key="serving", type=ServingSection | None, build=build, text=text, html=html)
