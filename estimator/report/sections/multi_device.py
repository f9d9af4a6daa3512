"""Multi-device and offload: the configuration on 1, 2, 4 and 8 devices (devices that can be combined only),
and
the decode cost of the host-RAM offload the user asked for."""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.physics import speed as speed_mod
from estimator.render.blocks import Block, Table, fit_cell, gib, tok
from estimator.render.htmlkit import Ctx, e, section, table, verdict
from estimator.report.recommend import COUNTS, can_combine
from estimator.report.sizing import SIZING_ERRORS
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class ScalingRow:
    """The configuration on n_devices devices: bytes per device and in all, verdict, decode and aggregate
    tok/s."""

    n_devices: int
    split: str
    per_device_total_bytes: int
    total_bytes: int
    verdict: str
    decode_tok_s: float | None
    aggregate_tok_s: float | None


@dataclass(frozen=True)
class OffloadSection:
    """Requested host-RAM offload: bytes, host bandwidth (10^9 B/s) and decode with / without it."""

    offload_bytes: int
    moe_offload_layers: int
    host_bytes: int
    host_bandwidth_gbs: float | None
    decode_tok_s_all_on_device: float | None
    decode_tok_s_with_offload: float | None
    slowdown: float | None  # all-on-device tok/s / with-offload tok/s


@dataclass(frozen=True)
class MultiDeviceSection:
    """The device-count table, the offload figures and notes."""

    split: str
    rows: tuple[ScalingRow, ...]
    offload: OffloadSection
    notes: tuple[str, ...]


def build(b: Build) -> MultiDeviceSection:
    quant, hw, wl, ph = b.quant, b.hardware, b.workload, b.sizing
    rows = []
    notes: list[str] = []
    counts = set(COUNTS) | {wl.n_devices}
    if not can_combine(hw):
        counts = {1, wl.n_devices}
        notes.append(
            f"{hw.id} ({hw.kind}) cannot be combined for tensor / pipeline parallelism: no 2-, 4- or "
            "8-device rows (discrete GPUs / NPUs with an interconnect only)"
        )
    for n in sorted(counts):
        w = replace(wl, n_devices=n)
        try:
            mm = ph.memory(quant, hw, w)
            dec = ph.decode(quant, hw, w).tok_s
            agg = ph.aggregate_tok_s(quant, hw, w)
        except SIZING_ERRORS:
            continue
        per_dev = max((int(d.total_bytes) for d in mm.per_device), default=int(mm.total_bytes))
        rows.append(
            ScalingRow(
                n_devices=n,
                split=wl.split,
                per_device_total_bytes=per_dev,
                total_bytes=int(mm.total_bytes),
                verdict=mm.verdict,
                decode_tok_s=dec,
                aggregate_tok_s=agg,
            )
        )
    with_off = all_on = slowdown = None
    if wl.offload_bytes or wl.moe_offload_layers:
        try:
            with_off = ph.decode(quant, hw, wl).tok_s
            all_on = ph.decode(quant, hw, replace(wl, offload_bytes=0, moe_offload_layers=0)).tok_s
            slowdown = all_on / with_off if with_off else None
        except SIZING_ERRORS:
            pass
    off = OffloadSection(
        offload_bytes=int(wl.offload_bytes),
        moe_offload_layers=int(wl.moe_offload_layers),
        host_bytes=int(b.memory.host_bytes or 0),
        host_bandwidth_gbs=_offload_read_gbs(hw, wl),
        decode_tok_s_all_on_device=all_on,
        decode_tok_s_with_offload=with_off,
        slowdown=slowdown,
    )
    return MultiDeviceSection(split=wl.split, rows=tuple(rows), offload=off, notes=tuple(notes))


def text(d: dict) -> Block:
    md, hw = d["multi_device"], d["hardware"]
    s = Block("multi_device", f"Multi-device ({md['split']} split) and offload")
    rows = [
        [f"{r['n_devices']}× {hw['id']}", gib(r["per_device_total_bytes"]), gib(r["total_bytes"]),
         fit_cell(r["verdict"]), tok(r["decode_tok_s"]), tok(r["aggregate_tok_s"])]
        for r in md["rows"]
    ]  # fmt: skip
    heads = ["devices", "per device GiB", "total GiB", "fits"]
    heads += ["decode tok/s (est.)", "aggregate tok/s (est.)"]
    s.tables.append(Table(heads, rows))
    s.notes += [f"note: {n}" for n in md["notes"]]
    o = md["offload"]
    if o["offload_bytes"] or o["moe_offload_layers"]:
        what = []
        if o["offload_bytes"]:
            what.append(f"{gib(o['offload_bytes'])} GiB of weights")
        if o["moe_offload_layers"]:
            what.append(f"routed experts of {o['moe_offload_layers']} layers")
        slow = f"{o['slowdown']:.2f}x slower" if o["slowdown"] else "unknown"
        s.lines.append(
            f"Offload: {' and '.join(what)} in host RAM ({gib(o['host_bytes'])} GiB, read at "
            f"{o['host_bandwidth_gbs']:,.1f} GB/s): decode {tok(o['decode_tok_s_with_offload'])} tok/s "
            f"vs {tok(o['decode_tok_s_all_on_device'])} all on device ({slow}, estimated)."
        )
    else:
        s.lines.append("No offload (use --offload-gib X or --n-cpu-moe N to size host-RAM offload).")
    return s


def _offload_read_gbs(hw, wl) -> float:
    """The bandwidth decode reads offloaded weights over, 10^9 B/s (before host_bw_eff): host RAM, or the
    links they cross when those are slower and the engine copies them to the devices at every forward pass
    (``EngineProfile.offload_over_link``: vLLM, SGLang; ``speed.offload_links``, as ``speed.host_read_bs``).
    """
    host = hw.host_bandwidth_gbs or speed_mod.DEFAULT_HOST_BANDWIDTH_GBS
    try:
        cap = speed_mod.device_rates(hw, wl.engine).decode_link_cap_bs
    except ValueError:  # no device bandwidth: the host figure alone
        return host
    return min(host, cap * speed_mod.offload_links(max(int(wl.n_devices), 1), wl.split) / 1e9)


def html(ctx: Ctx) -> str:
    head = [
        ctx.t("n_devices"),
        ctx.t("split"),
        ctx.t("device") + " (GiB)",
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("decode"),
        ctx.t("aggregate", n=ctx.get("workload.concurrency")),
    ]
    rows, cls = [], []
    for i, r in enumerate(ctx.get("multi_device.rows") or []):
        p = f"multi_device.rows.{i}"
        rows.append(
            [
                ctx.num(f"{p}.n_devices", "int"),
                e(r.get("split")),
                ctx.num(f"{p}.per_device_total_bytes"),
                ctx.num(f"{p}.total_bytes"),
                verdict(ctx, f"{p}.verdict"),
                ctx.num(f"{p}.decode_tok_s", "tok_s"),
                ctx.num(f"{p}.aggregate_tok_s", "tok_s"),
            ]
        )
        cls.append("current" if r.get("n_devices") == ctx.get("workload.n_devices") else "")
    o = "multi_device.offload"
    off = table(
        [ctx.t("offload_bytes"), ctx.t("host"), "host GB/s", ctx.t("decode"), ctx.t("offload_penalty")],
        [
            [
                ctx.num(f"{o}.offload_bytes"),
                ctx.num(f"{o}.host_bytes"),
                ctx.num(f"{o}.host_bandwidth_gbs", "num1"),
                f"{ctx.num(f'{o}.decode_tok_s_all_on_device', 'tok_s')} → "
                f"{ctx.num(f'{o}.decode_tok_s_with_offload', 'tok_s')}",
                ctx.num(f"{o}.slowdown", "num2") + "×",
            ]
        ],
        {0, 1, 2, 3, 4},
    )
    return section("multi", ctx.t("sec_multi"), table(head, rows, {0, 2, 3, 5, 6}, cls) + off)


UNIT = Unit(key="multi_device", type=MultiDeviceSection, build=build, text=text, html=html)
