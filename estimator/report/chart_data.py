"""The report's ``chart_data`` section: series the HTML charts draw (docs/html.md), from the same memoised
physics calls as the tables (``estimator.report.build.Physics``).

* ``context_by_kv``: ``{kv_dtype: ((n_ctx, total_bytes), ...)}`` — total memory over all devices at each
  context of the context-scaling table, for the chosen KV dtype (the table's own numbers) and every other
  dtype of ``KV_OPTIONS`` the engine supports (those sized with flash attention on, as the KV section does).
* ``prefill_by_quant``: ``{quant: SpeedFigure}`` — prefill tok/s (pp512) with its interval for every row of
  the quant matrix that has a decode speed, from the same coefficient sets (the selected quant equals the
  speed section's prefill).
* ``hardware_comparison``: every catalog configuration that holds the model at the chosen quant, context and
  KV dtype (verdict "fits", no offload): each device alone when one fits, else, for devices that can be
  combined (``recommend.can_combine``), the smallest of 2, 4, 8 that fits; plus the chosen configuration.
  Each with estimated single-stream decode tok/s, an hourly cost and USD per 1M output tokens at that speed.

Hourly cost (``rate_origin``): the cheapest cloud-rate row for that device and count (``"cloud rate"``, or
``"cloud rate, scaled per device"`` from another count, as ``estimator.physics.cost.pick_rate``); otherwise
``"amortised purchase + power"`` = catalog price x N / (AMORTISE_YEARS x 365.25 x hours_per_day) + TDP x N /
1000 x kWh price, i.e. the purchase spread over the active hours of AMORTISE_YEARS (an assumption, said in
``notes``); ``"none"`` when neither is known.  ``usd_per_1m_output_tokens = usd_per_hour / (tok_s x 3600) x
10^6`` (``estimator.physics.cost.usd_per_million_tokens``).
"""

from __future__ import annotations

from dataclasses import replace

from estimator.engines import get_engine
from estimator.physics.cost import pick_rate, usd_per_million_tokens
from estimator.report.model import KV_OPTIONS, ChartData, ContextRow, HardwareOption, QuantRow, ReportOptions
from estimator.report.recommend import COUNTS, can_combine, eligible
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

AMORTISE_YEARS = 3.0  # assumption: a common straight-line depreciation period for accelerators
_ERRORS = (ValueError, ArithmeticError)  # SpecError is a ValueError


def context_by_kv(ph, quant: QuantSpec, hw: HardwareSpec, wl: Workload, rows: tuple[ContextRow, ...]) -> dict:
    """Total bytes at each context of ``rows`` per KV dtype the engine supports (chosen dtype first)."""
    out: dict[str, tuple[tuple[int, int], ...]] = {wl.kv_dtype: tuple((r.n_ctx, r.total_bytes) for r in rows)}
    for dt in KV_OPTIONS:
        if dt in out or dt not in get_engine(wl.engine).kv_dtypes:
            continue
        try:
            pts = tuple(
                (
                    r.n_ctx,
                    int(
                        ph.memory(
                            quant, hw, replace(wl, n_ctx=r.n_ctx, kv_dtype=dt, flash_attn=True)
                        ).total_bytes
                    ),
                )
                for r in rows
            )
        except _ERRORS:
            continue
        out[dt] = pts
    return out


def prefill_by_quant(ph, hw: HardwareSpec, wl: Workload, quant_rows: tuple[QuantRow, ...]) -> dict:
    """Prefill figure per quant-matrix row that has a decode figure (same device, workload, coefficients)."""
    from estimator.physics.quant import QUANTS, get_quant

    out = {}
    for r in quant_rows:
        if r.decode is None:
            continue
        q = QUANTS.get(r.quant) or get_quant(r.quant)
        try:
            out[r.quant] = ph.prefill(q, hw, wl)
        except _ERRORS:
            continue
    return out


def hourly_cost(hw: HardwareSpec, n: int, options: ReportOptions) -> tuple[float | None, str, str | None]:
    """(usd_per_hour, rate_origin, provider) of n x hw: a cloud rate when the table has one, else the
    amortised purchase plus electricity (module doc), else (None, "none", None)."""
    picked = pick_rate(options.rates, hw.id, n)
    if picked is not None:
        usd, row, scaled = picked
        return usd, ("cloud rate, scaled per device" if scaled else "cloud rate"), row.provider
    if not hw.price_usd:
        return None, "none", None
    hours = AMORTISE_YEARS * 365.25 * options.hours_per_day
    power_usd = (hw.tdp_w or 0.0) * n / 1000.0 * options.kwh_price_usd
    return hw.price_usd * n / hours + power_usd, "amortised purchase + power", None


def _option(
    ph, quant: QuantSpec, hw: HardwareSpec, n: int, wl: Workload, m, options: ReportOptions, selected: bool
) -> HardwareOption:
    try:
        tok_s: float | None = ph.decode(quant, hw, wl).tok_s
    except _ERRORS:
        tok_s = None
    usd, origin, provider = hourly_cost(hw, n, options)
    return HardwareOption(
        hw.id,
        hw.name,
        hw.kind,
        n,
        int((hw.memory_bytes or 0) * n),
        int(m.total_bytes),
        int(m.headroom_bytes),
        tok_s,
        usd,
        origin,
        provider,
        hw.price_usd * n if hw.price_usd else None,
        hw.tdp_w * n if hw.tdp_w else None,
        usd_per_million_tokens(usd, tok_s) if usd and tok_s else None,
        selected,
    )


def hardware_comparison(
    ph, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload, options: ReportOptions, floor: int
) -> tuple[HardwareOption, ...]:
    """The fitting configurations of the module doc, fastest first (no speed last)."""
    base = replace(wl, offload_bytes=0, moe_offload_layers=0)

    def fits(h: HardwareSpec, n: int):
        if (h.memory_bytes or 0) * n < floor:  # cannot hold weights + KV: skip the memory call
            return None
        w = replace(base, n_devices=n)
        try:
            m = ph.memory(quant, h, w)
        except _ERRORS:
            return None
        return (m, w) if m.verdict == "fits" else None

    out: list[HardwareOption] = []
    seen: set[tuple[str, int]] = set()
    chosen = fits(hw, wl.n_devices) if not (wl.offload_bytes or wl.moe_offload_layers) else None
    if chosen is not None:
        out.append(_option(ph, quant, hw, wl.n_devices, chosen[1], chosen[0], options, True))
        seen.add((hw.id, wl.n_devices))
    for h in eligible(options.hardware_catalog):
        for n in COUNTS if can_combine(h) else (1,):
            got = fits(h, n)
            if got is not None:
                if (h.id, n) not in seen:
                    out.append(_option(ph, quant, h, n, got[1], got[0], options, False))
                    seen.add((h.id, n))
                break
    return tuple(sorted(out, key=lambda o: (not o.selected, -(o.decode_tok_s or -1.0), o.hardware_id)))


def chart_data(
    ph,
    model: ModelSpec,
    quant: QuantSpec,
    hw: HardwareSpec,
    wl: Workload,
    options: ReportOptions,
    context_rows: tuple[ContextRow, ...],
    quant_rows: tuple[QuantRow, ...],
    floor: int,
) -> ChartData:
    """All three series (module doc) and the notes that qualify them."""
    notes = [
        "hardware_comparison: configurations that fit without offload; decode is single-stream, estimated",
        f"amortised purchase + power: catalog price over {AMORTISE_YEARS:g} years of "
        f"{options.hours_per_day:g} active hours a day (assumption) plus device TDP at "
        f"{options.kwh_price_usd:g} USD/kWh",
    ]
    return ChartData(
        context_by_kv(ph, quant, hw, wl, context_rows),
        prefill_by_quant(ph, hw, wl, quant_rows),
        hardware_comparison(ph, model, quant, hw, wl, options, floor),
        tuple(notes),
    )
