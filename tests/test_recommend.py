"""Recommendation picks with a hand-made memory model (fits when the device memory covers a fixed need)."""

from dataclasses import dataclass

from estimator.catalog.rates import CloudRate
from estimator.report.recommend import Sizer, cheapest_fit, recommend
from estimator.specs import FULL, GIB, HardwareSpec, ModelSpec, QuantSpec, Workload

MODEL = ModelSpec(
    id="m",
    name="m",
    architecture="llama",
    hidden_size=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=4,
    head_dim=16,
    intermediate_size=128,
    vocab_size=100,
    max_context=4096,
    layer_types=(FULL,) * 2,
)
QUANT = QuantSpec(name="Q4_K_M", default_type="q4_K")
NEED = 100 * GIB


def hw(id_, mem_gib, bw, price, kind="gpu", link=64.0):
    return HardwareSpec(
        id=id_,
        name=id_.upper(),
        vendor="v",
        family="f",
        kind=kind,
        memory_bytes=mem_gib * GIB,
        bandwidth_gbs=bw,
        bf16_tflops=100.0,
        price_usd=price,
        interconnect_gbs=link if kind in ("gpu", "npu") else None,
    )


CATALOG = (
    hw("small", 24, 1000, 1500),
    hw("mid", 80, 2000, 15000),
    hw("big", 192, 5300, 15000),
    hw("huge", 288, 8000, 40000),
    hw("cheapbig", 128, 273, 4000),
    hw("cpu", 1024, 400, 5000, "cpu"),
)


@dataclass
class Mem:
    total_bytes: int
    headroom_bytes: int
    verdict: str


def memory_fn(model, quant, h, wl):
    usable = int(h.memory_bytes * wl.n_devices * 0.95)
    return Mem(NEED, usable - NEED, "fits" if usable >= NEED else "does not fit")


def speed_fn(model, quant, h, wl):
    return h.bandwidth_gbs * wl.n_devices / 100.0


def sizer():
    return Sizer(MODEL, QUANT, Workload(), memory_fn, speed_fn, floor_bytes=90 * GIB)


def test_picks():
    rates = (
        CloudRate("P", "1x huge", "huge", 1, 5.0, "h", "2026-01-01", "u"),
        CloudRate("Q", "2x mid", "mid", 2, 4.0, "h", "2026-01-01", "u"),
    )
    r = recommend(sizer(), CATALOG[1], CATALOG, rates)
    assert (r.best_single.hardware_id, r.best_single.n_devices) == ("huge", 1)  # fastest single that fits
    assert (r.best_value.hardware_id, r.best_value.n_devices) == ("cheapbig", 1)  # $4,000
    assert r.most_memory_per_dollar.hardware_id == "cheapbig"  # 32 GiB per 1,000 USD
    assert (r.multi_device.hardware_id, r.multi_device.n_devices) == (
        "mid",
        2,
    )  # chosen device, fewest n >= 2
    assert (r.cheapest_cloud.hardware_id, r.cheapest_cloud.usd_per_hour) == ("mid", 4.0)
    assert r.best_value.required_bytes == NEED and r.best_single.decode_tok_s == 80.0


def test_cpu_excluded_and_nothing_fits():
    global NEED
    old, NEED = NEED, 5000 * GIB
    try:
        r = recommend(sizer(), CATALOG[0], CATALOG, ())
        assert r.best_single is None and r.best_value is None and r.multi_device is None
        assert any("no single" in n for n in r.notes)
    finally:
        NEED = old


def test_cheapest_fit_prefers_price_over_count():
    c = cheapest_fit(sizer(), list(CATALOG))
    assert (c.hardware_id, c.n_devices, c.purchase_usd) == ("cheapbig", 1, 4000)
    c8 = cheapest_fit(sizer(), [CATALOG[0]])  # 4 x 24 GiB x 0.95 = 91 GiB < 100 GiB: n = 8
    assert (c8.hardware_id, c8.n_devices) == ("small", 8)


def test_only_combinable_devices_are_multiplied():
    """Unified-memory machines and devices without an interconnect are never suggested 2, 4 or 8 at a time."""
    from estimator.report.recommend import can_combine

    mac = hw("mac", 64, 800, 1000, kind="unified")  # 2 x 64 GiB would hold 100 GiB, and be the cheapest
    lone = hw("lone", 32, 900, 500, link=None)  # a GPU without an interconnect
    pool = (mac, lone, hw("mid", 80, 2000, 15000))
    assert not can_combine(mac) and not can_combine(lone) and can_combine(pool[2])
    c = cheapest_fit(sizer(), list(pool))
    assert (c.hardware_id, c.n_devices) == ("mid", 2)
    r = recommend(sizer(), mac, pool, (CloudRate("P", "2x mac", "mac", 2, 1.0, "h", "2026-01-01", "u"),))
    assert (r.multi_device.hardware_id, r.multi_device.n_devices) == ("mid", 2)
    assert r.cheapest_cloud is None  # the 2 x mac offer is not a configuration that can hold the model
    assert any("cannot be combined" in n for n in r.notes)
    assert not sizer().fits(pool[2], 16)  # at most 8 devices


def test_device_notes_follow_the_device():
    from estimator.report.recommend import DEVICE_NOTES, device_notes

    duo = hw("atlas-300i-duo-96gb", 96, 408, 1500, kind="npu")
    r = recommend(sizer(), duo, (duo,), ())
    assert (r.multi_device.hardware_id, r.multi_device.n_devices) == ("atlas-300i-duo-96gb", 2)
    assert DEVICE_NOTES["atlas-300i-duo-96gb"] in r.notes and "48 GB" in DEVICE_NOTES["atlas-300i-duo-96gb"]
    assert device_notes(["mid", "atlas-300i-duo-96gb", "atlas-300i-duo-96gb"]) == [
        DEVICE_NOTES["atlas-300i-duo-96gb"]
    ]
