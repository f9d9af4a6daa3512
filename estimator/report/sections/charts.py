"""The report's ``chart_data`` section: series the HTML charts draw (docs/html.md), from the same memoised
physics calls as the tables (``estimator.report.sizing.Sizing``).

* ``context_by_kv``: ``{kv_dtype: ((n_ctx, total_bytes), ...)}`` — total memory over all devices at each
  context of the context-scaling table, for the chosen KV dtype (the table's own numbers) and every other
  dtype of ``KV_OPTIONS`` the engine supports (those sized with flash attention on, as the KV section does).
* ``prefill_by_quant``: ``{quant: SpeedFigure}`` — prefill tok/s (pp512) with its interval for every row of
  the quant matrix that has a decode speed, from the same coefficient sets (the selected quant equals the
  speed section's prefill).
* ``hardware_comparison``: every catalog configuration that holds the model at the chosen quant, context and
  KV dtype (verdict "fits", no offload): each device alone when one fits, else, for devices that can be
  combined (``recommend.can_combine``), the smallest of 2, 4, 8 that fits; plus the chosen configuration.
  Configurations the engine cannot run on the device (estimator.physics.support) are left out; a fallback's
  speed is its fallback path's.  Each with estimated single-stream decode tok/s, an hourly cost and USD per
  1M output tokens at that speed.

Hourly cost (``rate_origin``): the cheapest cloud-rate row for that device and count (``"cloud rate"``, or
``"cloud rate, scaled per device"`` from another count, as ``estimator.physics.cost.pick_rate``); otherwise
``"amortised purchase + power"`` = catalog price x N / (AMORTISE_YEARS x 365.25 x hours_per_day) + TDP x N /
1000 x kWh price, i.e. the purchase spread over the active hours of AMORTISE_YEARS (an assumption, said in
``notes``); ``"none"`` when neither is known.  ``usd_per_1m_output_tokens = usd_per_hour / (tok_s x 3600) x
10^6`` (``estimator.physics.cost.usd_per_million_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import get_engine
from estimator.physics.cost import pick_rate, usd_per_million_tokens
from estimator.report.recommend import COUNTS, can_combine, eligible
from estimator.report.sections.context import ContextRow
from estimator.report.sections.kv import KV_OPTIONS
from estimator.report.sections.quants import QuantRow, row_quants
from estimator.report.sizing import SIZING_ERRORS, SpeedFigure
from estimator.report.units import Build, ReportOptions, Unit
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload


@dataclass(frozen=True)
class HardwareOption:
    """One configuration of ``chart_data.hardware_comparison``: bytes over all devices, estimated
    single-stream
    decode, an hourly cost and its origin, USD per 1M output tokens."""

    hardware_id: str
    hardware_name: str
    kind: str
    n_devices: int
    memory_bytes: int  # all devices together
    required_bytes: int  # estimated total over all devices
    headroom_bytes: int
    decode_tok_s: float | None  # single stream, estimated
    usd_per_hour: float | None
    # cloud rate | cloud rate, scaled per device | amortised purchase + power | --usd-per-hour (the chosen
    # configuration at the user's price) | none
    rate_origin: str
    rate_provider: str | None
    purchase_usd: float | None
    power_w: float | None
    usd_per_1m_output_tokens: float | None  # at decode_tok_s
    selected: bool


@dataclass(frozen=True)
class ChartData:
    """Series for the HTML charts (docs/html.md); totals are bytes over all devices."""

    context_by_kv: dict[str, tuple[tuple[int, int], ...]]  # kv dtype -> ((n_ctx, total_bytes), ...)
    prefill_by_quant: dict[str, SpeedFigure]
    hardware_comparison: tuple[HardwareOption, ...]
    notes: tuple[str, ...]


AMORTISE_YEARS = 3.0  # assumption: a common straight-line depreciation period for accelerators


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
        except SIZING_ERRORS:
            continue
        out[dt] = pts
    return out


def prefill_by_quant(b: Build, hw: HardwareSpec, wl: Workload, quant_rows: tuple[QuantRow, ...]) -> dict:
    """Prefill figure per quant-matrix row that has a decode figure (same device, workload, coefficients)."""
    specs = {q.name: q for q in row_quants(b)}
    out = {}
    for r in quant_rows:
        if r.decode is None:
            continue
        q = specs[r.quant]
        try:
            out[r.quant] = b.sizing_for(q).prefill(q, hw, wl)
        except SIZING_ERRORS:
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
    except SIZING_ERRORS:
        tok_s = None
    if selected and options.usd_per_hour is not None:  # the user's own price for the chosen configuration
        usd, origin, provider = options.usd_per_hour, "--usd-per-hour", None
    else:
        usd, origin, provider = hourly_cost(hw, n, options)
    return HardwareOption(
        hardware_id=hw.id,
        hardware_name=hw.name,
        kind=hw.kind,
        n_devices=n,
        memory_bytes=int((hw.memory_bytes or 0) * n),
        required_bytes=int(m.total_bytes),
        headroom_bytes=int(m.headroom_bytes),
        decode_tok_s=tok_s,
        usd_per_hour=usd,
        rate_origin=origin,
        rate_provider=provider,
        purchase_usd=hw.price_usd * n if hw.price_usd else None,
        power_w=hw.tdp_w * n if hw.tdp_w else None,
        usd_per_1m_output_tokens=usd_per_million_tokens(usd, tok_s) if usd and tok_s else None,
        selected=selected,
    )


def hardware_comparison(
    ph, model: ModelSpec, quant: QuantSpec, hw: HardwareSpec, wl: Workload, options: ReportOptions, floor: int
) -> tuple[HardwareOption, ...]:
    """The fitting configurations of the module doc, fastest first (no speed last)."""
    base = replace(wl, offload_bytes=0, moe_offload_layers=0)

    def fits(h: HardwareSpec, n: int):
        if (h.memory_bytes or 0) * n < floor:  # cannot hold weights + KV: skip the memory call
            return None
        w = replace(base, n_devices=n, backend=base.backend if h.id == hw.id else "")
        if not ph.support(quant, h, w).runs:  # the engine cannot run it on that device (support table)
            return None
        try:
            m = ph.memory(quant, h, w)
        except SIZING_ERRORS:
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


def build(b: Build) -> ChartData:
    """All three series (module doc) and the notes that qualify them."""
    options = b.options
    notes = [
        "hardware_comparison: configurations that fit without offload; decode is single-stream, estimated",
        f"amortised purchase + power: catalog price over {AMORTISE_YEARS:g} years of "
        f"{options.hours_per_day:g} active hours a day (assumption) plus device TDP at "
        f"{options.kwh_price_usd:g} USD/kWh",
    ]
    ph, quant, hw, wl = b.sizing, b.quant, b.hardware, b.workload
    return ChartData(
        context_by_kv=context_by_kv(ph, quant, hw, wl, b.get("context_scaling")),
        prefill_by_quant=prefill_by_quant(b, hw, wl, b.get("quant_matrix")),
        hardware_comparison=hardware_comparison(ph, b.model, quant, hw, wl, options, b.floor_bytes),
        notes=tuple(notes),
    )


UNIT = Unit(key="chart_data", type=ChartData, build=build)
