"""Serving cost: USD per 1M output tokens from an hourly rate, and rent-vs-buy break-even.

Formulas (units in names):

* ``usd_per_1m_tokens = usd_per_hour / (tok_s * 3600) * 1e6`` — the rate over the tokens made in an hour; the
  report prices its aggregate at the serving operating point (the largest concurrency within the latency
  objective, estimator.report.sections.serving).
* ``hours_per_month = hours_per_day * DAYS_PER_MONTH`` with ``DAYS_PER_MONTH = 365.25 / 12 = 30.4375``.
* ``rental_usd_per_month = usd_per_hour * hours_per_month`` (renting only for the active hours).
* ``power_w = tdp_w * n_devices`` (device TDP only, no host; an upper bound for a busy device).
* ``electricity_usd_per_month = power_w / 1000 * hours_per_month * kwh_price_usd``.
* ``break_even_months = purchase_usd / (rental_usd_per_month - electricity_usd_per_month)``; ``None`` (never)
  when owning costs as much per month in electricity as renting.  Ignores the host machine, hosting,
  depreciation/resale and cost of capital; the report says so.

Cloud rates (``estimator.catalog.rates``) are dated rows of public offers with their source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from estimator.catalog.rates import CloudRate
from estimator.specs import HardwareSpec, SpecError

DAYS_PER_MONTH = 365.25 / 12
DEFAULT_HOURS_PER_DAY = 4.0
# Assumed electricity price (USD/kWh) when --kwh-price is not given; a round figure, not a sourced tariff.
DEFAULT_KWH_PRICE_USD = 0.15
RATES_PATH = Path(__file__).resolve().parent.parent / "data" / "cloud_rates.csv"


@dataclass(frozen=True)
class CostEstimate:
    """Cost figures for one configuration; every ``None`` means "unknown", never zero.

    ``rate_origin`` is ``"--usd-per-hour"``, ``"cloud rate"`` (exact instance in the table),
    ``"cloud rate, scaled per device"`` (a rate for another device count, scaled linearly) or ``"none"``.
    """

    usd_per_hour: float | None
    rate_origin: str
    rate_provider: str | None
    rate_instance: str | None
    rate_verified_date: str | None
    rate_source_url: str | None
    decode_tok_s: float | None
    aggregate_tok_s: float | None
    usd_per_1m_output_tokens: float | None  # at the aggregate throughput (concurrency)
    usd_per_1m_output_tokens_single_stream: float | None
    purchase_usd: float | None
    purchase_origin: str  # "catalog price x N" | "--purchase-usd" | "none"
    power_w: float | None
    hours_per_day: float
    hours_per_month: float
    kwh_price_usd: float
    rental_usd_per_month: float | None
    electricity_usd_per_month: float | None
    break_even_months: float | None
    notes: tuple[str, ...] = ()
    # what ``aggregate_tok_s`` is: output tokens/s of the serving model (estimator.physics.serving) at
    # ``aggregate_concurrency`` clients, the largest concurrency within the report's latency objective
    aggregate_concurrency: int | None = None
    aggregate_basis: str = ""


def usd_per_million_tokens(usd_per_hour: float, tok_s: float) -> float:
    """USD per 10^6 tokens at ``tok_s`` tokens/s for a machine costing ``usd_per_hour``."""
    if tok_s <= 0:
        raise ValueError("tok_s must be > 0")
    return usd_per_hour / (tok_s * 3600.0) * 1e6


def pick_rate(
    rates: tuple[CloudRate, ...], hardware_id: str, n_devices: int
) -> tuple[float, CloudRate, bool] | None:
    """Cheapest rate for ``n_devices`` x ``hardware_id``: (usd_per_hour, row, scaled).

    An exact device-count match wins; otherwise the cheapest per-device rate of that device is scaled
    linearly to ``n_devices`` (``scaled=True``).  ``None`` when the table has no row for the device.
    """
    same = [r for r in rates if r.hardware_id == hardware_id]
    if not same:
        return None
    exact = [r for r in same if r.n_devices == n_devices]
    if exact:
        best = min(exact, key=lambda r: r.usd_per_hour)
        return best.usd_per_hour, best, False
    best = min(same, key=lambda r: r.usd_per_device_hour)
    return best.usd_per_device_hour * n_devices, best, True


def break_even_months(
    purchase_usd: float, rental_usd_per_month: float, electricity_usd_per_month: float
) -> float | None:
    """Months until buying beats renting: purchase / (rent - electricity); None when it never does."""
    saving = rental_usd_per_month - electricity_usd_per_month
    if saving <= 0:
        return None
    return purchase_usd / saving


def estimate_cost(
    hardware: HardwareSpec,
    n_devices: int,
    decode_tok_s: float | None,
    aggregate_tok_s: float | None,
    rates: tuple[CloudRate, ...] = (),
    usd_per_hour: float | None = None,
    hours_per_day: float = DEFAULT_HOURS_PER_DAY,
    kwh_price_usd: float = DEFAULT_KWH_PRICE_USD,
    purchase_usd: float | None = None,
    aggregate_concurrency: int | None = None,
    aggregate_basis: str = "",
) -> CostEstimate:
    """Cost per 1M output tokens and rent-vs-buy for ``n_devices`` x ``hardware`` (see module doc).

    ``usd_per_hour`` / ``purchase_usd`` override the table / catalog price for the whole configuration;
    ``aggregate_concurrency`` / ``aggregate_basis`` say where ``aggregate_tok_s`` comes from.
    """
    if n_devices < 1:
        raise SpecError("n_devices must be >= 1")
    if not 0 < hours_per_day <= 24:
        raise SpecError(f"hours per day must be in (0, 24], got {hours_per_day}")
    if kwh_price_usd < 0:
        raise SpecError(f"electricity price must be >= 0 USD/kWh, got {kwh_price_usd}")
    if usd_per_hour is not None and usd_per_hour <= 0:
        raise SpecError(f"--usd-per-hour must be > 0, got {usd_per_hour}")
    if purchase_usd is not None and purchase_usd <= 0:
        raise SpecError(f"--purchase-usd must be > 0, got {purchase_usd}")
    notes: list[str] = []
    provider = instance = verified = url = None
    if usd_per_hour is not None:
        rate, origin = usd_per_hour, "--usd-per-hour"
    else:
        picked = pick_rate(rates, hardware.id, n_devices)
        if picked is None:
            rate, origin = None, "none"
            notes.append(f"no cloud rate for {hardware.id} in the rate table; pass --usd-per-hour for a cost")
        else:
            rate, row, scaled = picked
            origin = "cloud rate, scaled per device" if scaled else "cloud rate"
            provider, instance, verified, url = row.provider, row.instance, row.verified_date, row.source_url
            if scaled:
                notes.append(
                    f"rate scaled linearly from {row.n_devices}x offer '{row.instance}' "
                    f"to {n_devices} devices"
                )
    hours_per_month = hours_per_day * DAYS_PER_MONTH

    def per_m(tok_s: float | None) -> float | None:
        return usd_per_million_tokens(rate, tok_s) if rate is not None and tok_s and tok_s > 0 else None

    if purchase_usd is not None:
        purchase, p_origin = float(purchase_usd), "--purchase-usd"
    elif hardware.price_usd:
        purchase, p_origin = hardware.price_usd * n_devices, "catalog price x N"
    else:
        purchase, p_origin = None, "none"
        notes.append(
            f"no purchase price for {hardware.id} in the catalog; pass --purchase-usd for break-even"
        )
    power_w = hardware.tdp_w * n_devices if hardware.tdp_w else None
    electricity = power_w / 1000.0 * hours_per_month * kwh_price_usd if power_w is not None else None
    if power_w is None:
        notes.append(f"no TDP for {hardware.id} in the catalog; electricity is not counted")
    rental = rate * hours_per_month if rate is not None else None
    be = None
    if purchase is not None and rental is not None:
        be = break_even_months(purchase, rental, electricity or 0.0)
        if be is None:
            notes.append("renting costs no more than the electricity of owning: buying never breaks even")
    notes.append("break-even counts device purchase and device electricity only (no host, hosting or resale)")
    return CostEstimate(
        rate,
        origin,
        provider,
        instance,
        verified,
        url,
        decode_tok_s,
        aggregate_tok_s,
        per_m(aggregate_tok_s),
        per_m(decode_tok_s),
        purchase,
        p_origin,
        power_w,
        float(hours_per_day),
        hours_per_month,
        float(kwh_price_usd),
        rental,
        electricity,
        be,
        tuple(notes),
        aggregate_concurrency,
        aggregate_basis,
    )
