"""Hardware recommendations: which catalog configurations (device x count) hold a sized configuration.

A *configuration* is ``n`` devices of one catalog id (n in ``COUNTS``, at most ``MAX_DEVICES`` = 8), sized
with the caller's memory function on the same workload with ``n_devices = n`` and no host offload.
It *fits* when the memory verdict is ``"fits"``.  Devices of kind ``cpu`` are left out
(they would hold anything in host RAM).  Only devices that can be combined for tensor / pipeline parallelism
(``can_combine``: discrete GPUs / NPUs with an interconnect) are suggested more than one at a time; a
unified-memory machine (Apple, APU) or a CPU box is always one.  ``DEVICE_NOTES`` qualify catalog devices
whose listed figures need a caveat (the Atlas 300I Duo card is two 48 GB chips).

Picks (each a ``Candidate``, or ``None`` when nothing fits):

* ``best_single``: one device that fits with the highest predicted decode tok/s; speed is predicted for the
  ``SPEED_TOP_K`` fitting devices with the highest memory bandwidth (decode is bandwidth-bound),
  so the pick is the fastest of those.
* ``best_value``: the fitting configuration with the lowest purchase price (catalog price x n); ties go to the
  higher aggregate bandwidth.
* ``most_memory_per_dollar``: the fitting configuration with the most memory per USD of purchase price.
* ``multi_device``: the chosen device with the fewest n >= 2 that fits; when it never fits, the cheapest
  multi-device configuration of any device.
* ``cheapest_cloud``: the cheapest offer of the cloud-rate table whose configuration fits.

For speed, configurations are first screened with a lower bound that needs no memory call: a configuration
cannot fit when ``n x memory_bytes < weights_bytes + kv_bytes`` of the reference estimate.

Support (estimator.physics.support, the one predicate): a configuration the engine cannot run there never
fits; one that runs on a fallback (matmuls on the host CPU, weight-only kernels, ...) is marked
(``Candidate.support`` and its reason), and the price-ranked picks (best value, multi-device, the quant
matrix's cheapest fit) take the cheapest configuration that runs on the device, one whose work falls back to
the host CPU only when nothing else fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from estimator.catalog.rates import CloudRate
from estimator.physics import support as support_mod
from estimator.specs import HardwareSpec, ModelSpec, QuantSpec, Workload

COUNTS = (1, 2, 4, 8)
MAX_DEVICES = max(COUNTS)
SPEED_TOP_K = 5
# Caveats on catalog figures, shown wherever the device appears in a report (source in each note).
DEVICE_NOTES = {
    "atlas-300i-duo-96gb": (
        "Atlas 300I Duo: one card is two Ascend 310P chips with 48 GB and ~204 GB/s each, not one 96 GB "
        "pool (shared/reference/hardware.md §4); the estimate treats the card as one device, so a model "
        "above 48 GB must in fact be split across its two chips like two devices"
    ),
}

MemoryFn = Callable[[ModelSpec, QuantSpec, HardwareSpec, Workload], object]  # -> MemoryEstimate
SpeedFn = Callable[[ModelSpec, QuantSpec, HardwareSpec, Workload], float | None]  # -> decode tok/s
SupportFn = Callable[[ModelSpec, QuantSpec, HardwareSpec, Workload], object]  # -> support.SupportVerdict


class Candidate(NamedTuple):
    """One configuration that fits: ``n_devices`` x ``hardware_id``; money in USD, memory in bytes."""

    hardware_id: str
    hardware_name: str
    n_devices: int
    memory_bytes: int  # all devices together
    required_bytes: int  # estimated total over all devices
    headroom_bytes: int
    purchase_usd: float | None
    usd_per_hour: float | None
    rate_provider: str | None
    decode_tok_s: float | None
    reason: str
    # native | fallback | unlisted (estimator.physics.support; never unsupported); "" = not judged
    # (fine-tuning picks)
    support: str = ""


class Recommendations(NamedTuple):
    best_single: Candidate | None
    best_value: Candidate | None
    most_memory_per_dollar: Candidate | None
    multi_device: Candidate | None
    cheapest_cloud: Candidate | None
    notes: tuple[str, ...] = ()


def can_combine(hw: HardwareSpec) -> bool:
    """Whether several of this device can serve one model with tensor / pipeline parallelism: a discrete GPU
    or NPU with a device interconnect.  Unified-memory machines (Apple, APUs) and CPU boxes are single
    systems: two of them are two computers, not one larger device."""
    return hw.kind in ("gpu", "npu") and bool(hw.interconnect_gbs)


def eligible(hardware: list[HardwareSpec] | tuple[HardwareSpec, ...]) -> list[HardwareSpec]:
    """Catalog devices that can be recommended: known memory and bandwidth, not a CPU."""
    return [h for h in hardware if h.memory_bytes and h.bandwidth_gbs and h.kind != "cpu"]


def _lower_bound_ok(hw: HardwareSpec, n: int, floor_bytes: int) -> bool:
    return (hw.memory_bytes or 0) * n >= floor_bytes


class Sizer:
    """Memoised memory/speed calls for one (model, quant, workload) over many configurations."""

    def __init__(
        self,
        model: ModelSpec,
        quant: QuantSpec,
        workload: Workload,
        memory_fn: MemoryFn,
        speed_fn: SpeedFn | None,
        floor_bytes: int,
        support_fn: SupportFn = support_mod.judge,
    ):
        self.model, self.quant, self.memory_fn, self.speed_fn = model, quant, memory_fn, speed_fn
        # every catalog device runs on its own default backend (a user's --backend names the sized device's)
        self.workload = replace(workload, offload_bytes=0, moe_offload_layers=0, backend="")
        self.floor_bytes = floor_bytes
        self.support_fn = support_fn
        self._mem: dict[tuple[str, int], object] = {}
        self._speed: dict[tuple[str, int], float | None] = {}
        self._support: dict[tuple[str, int], object] = {}

    def _wl(self, n: int) -> Workload:
        return replace(self.workload, n_devices=n)

    def memory(self, hw: HardwareSpec, n: int):
        key = (hw.id, n)
        if key not in self._mem:
            self._mem[key] = self.memory_fn(self.model, self.quant, hw, self._wl(n))
        return self._mem[key]

    def support(self, hw: HardwareSpec, n: int):
        """The support verdict of n x hw (estimator.physics.support)."""
        key = (hw.id, n)
        if key not in self._support:
            self._support[key] = self.support_fn(self.model, self.quant, hw, self._wl(n))
        return self._support[key]

    def on_device(self, hw: HardwareSpec, n: int) -> bool:
        """True unless part of the work falls back to the host CPU (a weight-only or flash-attention fallback
        stays on the device's path and only gets marked)."""
        return not self.support(hw, n).uses_host

    def fits(self, hw: HardwareSpec, n: int) -> bool:
        if n > MAX_DEVICES or (n > 1 and not can_combine(hw)):
            return False
        if not _lower_bound_ok(hw, n, self.floor_bytes):
            return False
        if not self.support(hw, n).runs:  # the engine cannot run it there: never a fit
            return False
        try:
            return self.memory(hw, n).verdict == "fits"
        except (ValueError, ArithmeticError):  # a device the physics cannot size (missing figures)
            return False

    def speed(self, hw: HardwareSpec, n: int) -> float | None:
        key = (hw.id, n)
        if key not in self._speed:
            try:
                self._speed[key] = (
                    self.speed_fn(self.model, self.quant, hw, self._wl(n)) if self.speed_fn else None
                )
            except (ValueError, ArithmeticError):
                self._speed[key] = None
        return self._speed[key]

    def candidate(
        self, hw: HardwareSpec, n: int, reason: str, rate: CloudRate | None = None, with_speed: bool = True
    ) -> Candidate:
        m = self.memory(hw, n)
        v = self.support(hw, n)
        if v.status == support_mod.FALLBACK:
            how = support_mod.describe(v, self.quant.name, hw.id).split(": ", 1)[1]
            reason += "; runs on a fallback: " + how
        return Candidate(
            hw.id,
            hw.name,
            n,
            (hw.memory_bytes or 0) * n,
            int(m.total_bytes),
            int(m.headroom_bytes),
            hw.price_usd * n if hw.price_usd else None,
            rate.usd_per_hour if rate else None,
            rate.provider if rate else None,
            self.speed(hw, n) if with_speed else None,
            reason,
            v.status,
        )


def cheapest_fit(
    sizer: Sizer, hardware: list[HardwareSpec], counts: tuple[int, ...] = COUNTS, with_speed: bool = False
) -> Candidate | None:
    """The fitting configuration with the lowest purchase price (devices without a price are skipped) that
    runs on the device (native, or a weight-only / flash-attention fallback, marked); one whose work falls
    back to the host CPU only when nothing else fits."""
    configs = sorted(
        (h.price_usd * n, -(h.bandwidth_gbs or 0) * n, h.id, n, h)
        for h in eligible(hardware)
        if h.price_usd
        for n in counts
        if n == 1 or can_combine(h)
    )
    first_host = None
    for price, _, _, n, hw in configs:
        if (first_host is None or sizer.on_device(hw, n)) and sizer.fits(hw, n):
            if sizer.on_device(hw, n):
                return sizer.candidate(
                    hw, n, f"lowest purchase price that fits (${price:,.0f})", with_speed=with_speed
                )
            first_host = (price, hw, n)
    if first_host is not None:
        price, hw, n = first_host
        reason = f"lowest purchase price that fits (${price:,.0f}); nothing fits without the host CPU"
        return sizer.candidate(hw, n, reason, with_speed=with_speed)
    return None


def recommend(
    sizer: Sizer,
    chosen: HardwareSpec,
    hardware: list[HardwareSpec] | tuple[HardwareSpec, ...],
    rates: tuple[CloudRate, ...] = (),
) -> Recommendations:
    """The five picks described in the module doc."""
    pool = eligible(list(hardware))
    by_id = {h.id: h for h in pool}
    notes: list[str] = []
    singles = sorted((h for h in pool if sizer.fits(h, 1)), key=lambda h: -(h.bandwidth_gbs or 0))
    best_single = None
    ranked = [(sizer.speed(h, 1), h) for h in singles[:SPEED_TOP_K]]
    ranked = [(s, h) for s, h in ranked if s is not None] or [(None, h) for h in singles[:1]]
    if ranked:
        s, h = max(ranked, key=lambda x: x[0] or 0.0)
        best_single = sizer.candidate(
            h, 1, f"fastest predicted decode of the {len(ranked)} highest-bandwidth single devices that fit"
        )
    else:
        notes.append("no single catalog device holds this configuration")
    best_value = cheapest_fit(sizer, pool, COUNTS, with_speed=True)
    per_dollar = None
    best_ratio = 0.0
    for h in pool:
        if not h.price_usd:
            continue
        for n in COUNTS:
            ratio = h.memory_bytes / h.price_usd  # same for every n; the smallest n that fits is kept
            if ratio > best_ratio and sizer.fits(h, n):
                best_ratio, per_dollar = ratio, (h, n)
                break
    most_mem = None
    if per_dollar:
        h, n = per_dollar
        most_mem = sizer.candidate(
            h, n, f"{h.memory_bytes / 2**30 / h.price_usd * 1000:.1f} GiB per 1,000 USD"
        )
    multi = None
    if not can_combine(chosen):
        notes.append(
            f"{chosen.id} ({chosen.kind}) cannot be combined for tensor / pipeline parallelism: "
            "the multi-device pick uses other devices"
        )
    elif chosen.id in by_id or (chosen.memory_bytes and chosen.bandwidth_gbs):
        for n in COUNTS[1:]:
            if sizer.fits(chosen, n):
                multi = sizer.candidate(chosen, n, f"fewest {chosen.id} devices (n >= 2) that fit")
                break
    if multi is None:
        multi = cheapest_fit(sizer, pool, COUNTS[1:], with_speed=True)
        if multi is not None:
            multi = multi._replace(reason="cheapest multi-device configuration that fits")
    cloud = None
    for r in sorted(rates, key=lambda r: r.usd_per_hour):
        hw = by_id.get(r.hardware_id)
        if hw is not None and sizer.fits(hw, r.n_devices):
            cloud = sizer.candidate(
                hw,
                r.n_devices,
                f"cheapest cloud offer that fits ({r.provider}, verified {r.verified_date})",
                rate=r,
            )
            break
    if cloud is None and rates:
        notes.append("no offer of the cloud-rate table holds this configuration")
    picked = [c.hardware_id for c in (best_single, best_value, most_mem, multi, cloud) if c is not None]
    notes += device_notes(picked)
    return Recommendations(best_single, best_value, most_mem, multi, cloud, tuple(notes))


def fb_mark(candidate: dict | None) -> str:
    """' fb' after a rendered candidate (JSON form) that runs on a support fallback, else ""."""
    return " fb" if candidate and candidate.get("support") == "fallback" else ""


def device_notes(hardware_ids) -> list[str]:
    """The ``DEVICE_NOTES`` of the devices among ``hardware_ids`` (each once, in first-seen order)."""
    return [DEVICE_NOTES[h] for h in dict.fromkeys(hardware_ids) if h in DEVICE_NOTES]
