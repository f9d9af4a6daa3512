"""Cost formulas against hand-computed values, and the dated rate table."""

import pytest

from estimator.catalog.rates import CloudRate, load_cloud_rates
from estimator.physics.cost import (
    DAYS_PER_MONTH,
    break_even_months,
    estimate_cost,
    pick_rate,
    usd_per_million_tokens,
)
from estimator.specs import HardwareSpec, SpecError

HW = HardwareSpec(
    id="mi325x",
    name="Instinct MI325X",
    vendor="AMD",
    family="amd-cdna3",
    kind="gpu",
    memory_bytes=256 * 2**30,
    bandwidth_gbs=6000.0,
    bf16_tflops=1307.0,
    tdp_w=1000.0,
    price_usd=21000.0,
)
RATES = (
    CloudRate("DO", "1x MI325X", "mi325x", 1, 3.80, "per-second", "2026-11-04", "https://x"),
    CloudRate("V", "8x MI325X", "mi325x", 8, 24.0, "hourly", "2026-11-04", "https://y"),
)


def test_usd_per_million_tokens_hand_computed():
    # $3.80/h at 31.8 tok/s: 3.80 / (31.8 * 3600) * 1e6 = 33.19 $/1M (the seed page's figure)
    assert usd_per_million_tokens(3.80, 31.8) == pytest.approx(33.194, rel=1e-4)
    with pytest.raises(ValueError):
        usd_per_million_tokens(1.0, 0.0)


def test_break_even_hand_computed():
    assert break_even_months(21000, 462.08, 21.28) == pytest.approx(21000 / 440.80)
    assert break_even_months(1000, 10, 20) is None


def test_pick_rate_exact_and_scaled():
    usd, row, scaled = pick_rate(RATES, "mi325x", 8)
    assert (usd, scaled) == (24.0, False)
    usd, row, scaled = pick_rate(RATES, "mi325x", 2)
    assert scaled and usd == pytest.approx(6.0)  # 24/8 per device is cheaper than 3.80
    assert pick_rate(RATES, "h100", 1) is None


def test_estimate_cost_full():
    c = estimate_cost(
        HW, 1, decode_tok_s=30.0, aggregate_tok_s=120.0, rates=RATES, hours_per_day=4, kwh_price_usd=0.175
    )
    hours = 4 * DAYS_PER_MONTH
    assert c.usd_per_hour == 3.80 and c.rate_origin == "cloud rate" and c.rate_verified_date == "2026-11-04"
    assert c.usd_per_1m_output_tokens == pytest.approx(3.80 / (120 * 3600) * 1e6)
    assert c.usd_per_1m_output_tokens_single_stream == pytest.approx(3.80 / (30 * 3600) * 1e6)
    assert c.rental_usd_per_month == pytest.approx(3.80 * hours)
    assert c.electricity_usd_per_month == pytest.approx(1.0 * hours * 0.175)
    assert c.break_even_months == pytest.approx(21000 / (3.80 * hours - 0.175 * hours))
    assert c.purchase_origin == "catalog price x N"


def test_overrides_and_missing():
    c = estimate_cost(HW, 2, 10.0, 10.0, rates=(), usd_per_hour=5.0, purchase_usd=1000.0)
    assert c.rate_origin == "--usd-per-hour" and c.purchase_usd == 1000.0 and c.power_w == 2000.0
    bare = HardwareSpec(
        id="x",
        name="x",
        vendor="v",
        family="f",
        kind="gpu",
        memory_bytes=1,
        bandwidth_gbs=1.0,
        bf16_tflops=1.0,
    )
    c = estimate_cost(bare, 1, 10.0, 10.0, rates=RATES)
    assert c.usd_per_hour is None and c.usd_per_1m_output_tokens is None and c.break_even_months is None
    assert any("--usd-per-hour" in n for n in c.notes) and any("--purchase-usd" in n for n in c.notes)


@pytest.mark.parametrize(
    "kw",
    [
        {"hours_per_day": 0},
        {"hours_per_day": 25},
        {"kwh_price_usd": -1},
        {"usd_per_hour": 0},
        {"purchase_usd": -5},
    ],
)
def test_bad_cost_input(kw):
    with pytest.raises(SpecError):
        estimate_cost(HW, 1, 1.0, 1.0, **kw)


def test_shipped_rate_table_is_dated_and_sourced():
    rates = load_cloud_rates()
    assert len(rates) >= 4
    for r in rates:
        assert r.source_url and len(r.verified_date) == 10 and r.usd_per_hour > 0


def test_bad_rate_table(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("provider,instance\nA,B\n")
    with pytest.raises(SpecError, match="missing column"):
        load_cloud_rates(p)
    p.write_text(
        "provider,instance,hardware_id,n_devices,usd_per_hour,billing,verified_date,source_url,"
        "source_note\nA,B,h,x,1,b,2026-01-01,u,\n"
    )
    with pytest.raises(SpecError, match=":2:"):
        load_cloud_rates(p)
