"""The configuration being sized: the weight format, the device as catalogued and the workload (data only:
the summary, the header and every table show them)."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class HardwareFacts:
    """The device (bytes, 10^9 B/s, 10^12 FLOP/s, W, USD) and where its figures come from."""

    id: str
    name: str
    vendor: str
    family: str
    kind: str
    memory_bytes: int | None
    bandwidth_gbs: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    tdp_w: float | None
    price_usd: float | None
    interconnect_gbs: float | None
    host_bandwidth_gbs: float | None
    cpu_cores: int | None  # a CPU's physical cores (None: not a CPU, or unknown)
    cpu_clock_ghz: float | None  # its maximum clock, 10^9 Hz
    status: str
    source: str


@dataclass(frozen=True)
class ConfigFacts:
    """The workload: engine, weight format, KV dtype, context, devices and split, concurrency, offload."""

    engine: str
    quant: str
    quant_description: str
    kv_dtype: str
    n_ctx: int
    n_devices: int
    split: str
    concurrency: int
    offload_bytes: int
    moe_offload_layers: int
    gpu_memory_utilization: float
    flash_attn: bool
    n_ubatch: int
    swa_full: bool
    kv_unified: bool
    kv_pad: int


def hardware(b: Build) -> HardwareFacts:
    hw = b.hardware
    return HardwareFacts(
        id=hw.id,
        name=hw.name,
        vendor=hw.vendor,
        family=hw.family,
        kind=hw.kind,
        memory_bytes=hw.memory_bytes,
        bandwidth_gbs=hw.bandwidth_gbs,
        bf16_tflops=hw.bf16_tflops,
        fp8_tflops=hw.fp8_tflops,
        tdp_w=hw.tdp_w,
        price_usd=hw.price_usd,
        interconnect_gbs=hw.interconnect_gbs,
        host_bandwidth_gbs=hw.host_bandwidth_gbs,
        cpu_cores=hw.cpu_cores,
        cpu_clock_ghz=hw.cpu_clock_ghz,
        status=hw.status,
        source=hw.source,
    )


def workload(b: Build) -> ConfigFacts:
    w = b.workload
    return ConfigFacts(
        engine=w.engine,
        quant=b.quant.name,
        quant_description=b.quant.description,
        kv_dtype=w.kv_dtype,
        n_ctx=w.n_ctx,
        n_devices=w.n_devices,
        split=w.split,
        concurrency=w.concurrency,
        offload_bytes=w.offload_bytes,
        moe_offload_layers=w.moe_offload_layers,
        gpu_memory_utilization=w.gpu_memory_utilization,
        flash_attn=w.flash_attn,
        n_ubatch=w.n_ubatch,
        swa_full=w.swa_full,
        kv_unified=w.kv_unified,
        kv_pad=w.kv_pad,
    )


QUANT = Unit(key="quant", type=str, build=lambda b: b.quant.name)
HARDWARE = Unit(key="hardware", type=HardwareFacts, build=hardware)
WORKLOAD = Unit(key="workload", type=ConfigFacts, build=workload)
