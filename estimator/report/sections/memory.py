"""Memory: weights, KV cache and state, engine buffers and device context overhead per device, against
usable memory, with the verdict (fits / fits with offload / does not fit) and, for an engine that reserves
memory, the KV pool's capacity (estimator.physics.memory)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from estimator.engines import get_engine
from estimator.physics.memory import DeviceMemory, banded_compute
from estimator.render import charts
from estimator.render.blocks import Block, Table, both, gb, gib, pct
from estimator.render.htmlkit import Ctx, card, e, figure, section, table, verdict
from estimator.render.i18n import t
from estimator.report.recommend import device_notes
from estimator.report.units import Build, Unit

MEMORY_BASIS = (
    "estimated: architecture formulas (weights per tensor class, KV per layer kind, engine buffers)"
)
REPLAYED_BASIS = "compute buffers replayed: the engine's own graph through its allocator"


@dataclass(frozen=True)
class ComputeBand:
    """How far the engine's own compute buffers were from this estimate: results/coefficients.json
    ``memory_bands`` (calibration.memory_fit.memory_bands), ratios measured / estimated over ``n`` distinct
    measured configurations, applied to this configuration's compute buffers (bytes, all devices)."""

    n: int
    median_error: float  # median |measured / estimated - 1|
    within_5pct: float  # share of the n within 5 %
    ratio_lo: float  # 5th percentile of measured / estimated
    ratio_hi: float  # 95th percentile
    ratio_max: float  # the largest seen
    compute_bytes: int  # this estimate's compute buffers (part of runtime_bytes)
    compute_hi_bytes: int  # compute_bytes x ratio_hi
    compute_max_bytes: int  # compute_bytes x ratio_max
    # it fits, but on some device the headroom is smaller than compute_hi_bytes - compute_bytes (per device)
    tight: bool
    exact_command: str  # a command printing the engine's own figure for this point ("" when none)
    basis: str
    scope: str  # the device kind the band was measured on ("gpu", "cpu" ...), "all" when pooled over kinds


@dataclass(frozen=True)
class MemorySection:
    """Memory of the sized configuration; totals over all devices (bytes)."""

    weights_bytes: int
    kv_bytes: int
    runtime_bytes: int
    overhead_bytes: int
    total_bytes: int
    physical_bytes: int  # n_devices x device memory
    usable_bytes: int
    headroom_bytes: int
    utilization: float
    verdict: str  # fits | fits with offload | does not fit
    host_bytes: int
    kv_capacity_tokens: int | None
    max_concurrency: int | None
    # what the engine logs at startup (vLLM: "KV cache size: N tokens", "Maximum concurrency for n_ctx
    # tokens per request: X"; estimator.physics.memory.MemoryEstimate.startup_kv), None when it logs none we
    # reproduce; its max concurrency is an admission bound, below max_concurrency for sliding-window models
    startup_kv_tokens: int | None
    startup_max_concurrency: float | None
    # the most running requests a recurrent hybrid's own state pool admits (SGLang: --mamba-full-memory-ratio;
    # estimator.physics.memory.MemoryEstimate.state_max_requests), part of max_concurrency; None when the
    # engine keeps the state in its KV pool or the model has none
    state_max_requests: int | None
    min_offload_bytes: int  # least host offload that would make it fit (0 when it fits)
    # when it does not fit: the fewest layers of routed experts in host RAM (llama.cpp --n-cpu-moe) that make
    # it fit, and the host RAM that needs (Build.expert_offload); None otherwise
    moe_offload_layers: int | None
    moe_offload_host_bytes: int | None
    # when it does not fit: the least lossy cheaper KV dtype that makes it fit (Build.kv_dtype_fit), its total
    # and its KV cache; None otherwise
    kv_dtype_fit: str | None
    kv_dtype_fit_total_bytes: int | None
    kv_dtype_fit_kv_bytes: int | None
    # when a tensor-parallel configuration does not fit and attention data parallelism (--split dp) makes it
    # fit (Build.attention_dp): its total over all devices and its max concurrency; None otherwise
    attention_dp_total_bytes: int | None
    attention_dp_max_concurrency: int | None
    per_device: tuple[DeviceMemory, ...]
    basis: str
    notes: tuple[str, ...]
    # the spread of the engine's own compute buffers around this estimate; None when the coefficients file
    # has none for the engine (the prior, engines without measured buffers) or the buffers are replayed
    compute_band: ComputeBand | None = None
    # the compute buffers are the engine's own graph replayed through its allocator, not the formula
    # (MemoryEstimate.compute_replayed)
    compute_replayed: bool = False


def runtime_basis(label: str, table, engine: str) -> str:
    """Where the runtime-buffer coefficients came from, honestly: the shipped prior (uncalibrated) or the
    calibrated coefficients file (its path), from ``RuntimeEstimate.coefficients`` ("prior" / "custom")."""
    if label == "prior":
        return "prior (uncalibrated)"
    path = getattr(table, "path", None)
    if path and table.memory_for(engine):
        rel = os.path.relpath(path)
        return f"calibrated ({path if rel.startswith('..') else rel})"
    return "custom (not from the coefficients file)"


def model_arg(model) -> str:
    """How ``python -m harness memory-fit`` names the model: its catalog id ("" for a model the catalog does
    not hold: a config.json or GGUF the user passed)."""
    from estimator.catalog.data import is_model_id

    return model.id if model.gguf_path is None and is_model_id(model.id) else ""


def compute_band(b: Build) -> ComputeBand | None:
    """The ComputeBand of the configuration: the calibrated file's band for the engine's compute buffers,
    when the runtime coefficients are that file's (a band says nothing about other coefficients)."""
    m, wl = b.memory, b.workload
    if m.compute_replayed:  # no formula, so no formula's spread
        return None
    if not m.compute_bytes or not runtime_basis(m.coefficients, b.table, wl.engine).startswith("calibrated"):
        return None
    band = b.table.memory_band(wl.engine, "compute_bytes", b.hardware.kind)
    if band is None:
        return None
    banded = banded_compute(m, band)
    arg = model_arg(b.model)
    command = get_engine(wl.engine).exact_buffers_command(arg, b.model, wl) if arg else ""
    return ComputeBand(
        n=int(band["n"]),
        median_error=float(band["median_ape"]),
        within_5pct=float(band["within_5pct"]),
        ratio_lo=float(band["ratio_p05"]),
        ratio_hi=float(band["ratio_p95"]),
        ratio_max=float(band["ratio_max"]),
        compute_bytes=int(m.compute_bytes),
        compute_hi_bytes=banded.compute_hi_bytes,
        compute_max_bytes=banded.compute_max_bytes,
        tight=banded.tight,
        exact_command=command,
        basis=str(band.get("basis", "")),
        scope=str(band.get("scope", "all")),
    )


KIND_WORDS = {"gpu": "GPUs", "cpu": "CPUs", "unified": "unified-memory devices", "npu": "NPUs"}


def band_lines(band: dict, engine: str) -> list[str]:
    """What the compute band says, in words: the measured spread, this configuration's buffers at its 95th
    percentile, a tight fit, and the command that prints the engine's own figure."""
    label = get_engine(engine).label
    lines = [
        f"Compute buffers: {label}'s own were {band['ratio_lo']:.2f}-{band['ratio_hi']:.2f} x this estimate "
        f"for 90% of {band['n']:,} measured configurations"
        + (f" on {KIND_WORDS.get(band['scope'], band['scope'])}" if band.get("scope", "all") != "all" else "")
        + f" ({band['within_5pct']:.0%} within 5%, up to "
        f"{band['ratio_max']:.2f} x; in sample): {gib(band['compute_bytes'])} GiB here, "
        f"{gib(band['compute_hi_bytes'])} GiB at the 95th percentile, "
        f"{gib(band['compute_max_bytes'])} GiB at the largest."
    ]
    if band["tight"]:
        lines.append(
            "Tight: the headroom is smaller than the compute buffers' 95th-percentile excess; check the "
            "engine's own figure before relying on this fit."
        )
    if band["exact_command"]:
        scope = get_engine(engine).exact_buffers_scope
        where = f" ({scope})" if scope else ""
        lines.append(f"{label}'s own figure for this point{where}: {band['exact_command']}")
    return lines


def replay_line(engine: str) -> str:
    """What replayed compute buffers are (``MemorySection.compute_replayed``)."""
    profile = get_engine(engine)
    scope = f" ({profile.exact_buffers_scope})" if profile.exact_buffers_scope else ""
    return (
        f"Compute buffers: {profile.label}'s own graph for this configuration, replayed through its "
        f"allocator{scope}: the engine's figure, not a formula, so no band applies."
    )


def build(b: Build) -> MemorySection:
    m, hw = b.memory, b.hardware
    runtime = runtime_basis(m.coefficients, b.table, b.workload.engine) if m.coefficients else ""
    return MemorySection(
        weights_bytes=int(m.weights_bytes),
        kv_bytes=int(m.kv_bytes),
        runtime_bytes=int(m.runtime_bytes),
        overhead_bytes=int(m.overhead_bytes),
        total_bytes=int(m.total_bytes),
        physical_bytes=int((hw.memory_bytes or 0) * b.workload.n_devices),
        usable_bytes=int(m.usable_bytes),
        headroom_bytes=int(m.headroom_bytes),
        utilization=float(m.utilization),
        verdict=m.verdict,
        host_bytes=int(m.host_bytes or 0),
        kv_capacity_tokens=None if m.kv_capacity_tokens is None else int(m.kv_capacity_tokens),
        max_concurrency=None if m.max_concurrency is None else int(m.max_concurrency),
        startup_kv_tokens=None if m.startup_kv is None else int(m.startup_kv.kv_cache_tokens),
        startup_max_concurrency=None if m.startup_kv is None else round(m.startup_kv.max_concurrency, 2),
        state_max_requests=None if m.state_max_requests is None else int(m.state_max_requests),
        min_offload_bytes=int(m.min_offload_bytes or 0),
        moe_offload_layers=None if b.expert_offload is None else int(b.expert_offload[0]),
        moe_offload_host_bytes=None if b.expert_offload is None else int(b.expert_offload[1].host_bytes or 0),
        kv_dtype_fit=None if b.kv_dtype_fit is None else b.kv_dtype_fit[0],
        kv_dtype_fit_total_bytes=None if b.kv_dtype_fit is None else int(b.kv_dtype_fit[1].total_bytes),
        kv_dtype_fit_kv_bytes=None if b.kv_dtype_fit is None else int(b.kv_dtype_fit[1].kv_bytes),
        attention_dp_total_bytes=None if b.attention_dp is None else int(b.attention_dp.total_bytes),
        attention_dp_max_concurrency=None if b.attention_dp is None else b.attention_dp.max_concurrency,
        per_device=tuple(m.per_device),
        basis=MEMORY_BASIS
        + (f"; {REPLAYED_BASIS}" if m.compute_replayed else "")
        + (f"; runtime coefficients: {runtime}" if runtime else ""),
        notes=tuple(m.notes) + tuple(device_notes([hw.id])),
        compute_band=compute_band(b),
        compute_replayed=m.compute_replayed,
    )


def text(d: dict) -> Block:
    mem, w, hw = d["memory"], d["workload"], d["hardware"]
    s = Block("memory", f"Memory ({w['n_devices']} x {hw['id']})")
    s.lines.append(f"Basis: {mem['basis']}.")
    rows = [
        ["Weights", gib(mem["weights_bytes"]), gb(mem["weights_bytes"])],
        ["KV cache and state", gib(mem["kv_bytes"]), gb(mem["kv_bytes"])],
        ["Engine runtime / compute buffers", gib(mem["runtime_bytes"]), gb(mem["runtime_bytes"])],
        ["Device context overhead", gib(mem["overhead_bytes"]), gb(mem["overhead_bytes"])],
        ["Total on device(s)", gib(mem["total_bytes"]), gb(mem["total_bytes"])],
        ["Physical device memory", gib(mem["physical_bytes"]), gb(mem["physical_bytes"])],
        ["Usable device memory", gib(mem["usable_bytes"]), gb(mem["usable_bytes"])],
        ["Headroom", gib(mem["headroom_bytes"]), gb(mem["headroom_bytes"])],
    ]
    if mem["host_bytes"]:
        h = mem["host_bytes"]
        rows.append(["Host RAM (offloaded weights, host buffers)", gib(h), gb(h)])
    s.tables.append(Table(["component", "GiB", "GB"], rows))
    s.lines.append(f"Utilisation {pct(mem['utilization'])}; verdict: **{mem['verdict']}**.")
    if mem.get("compute_band"):
        s.lines += band_lines(mem["compute_band"], w["engine"])
    if mem.get("compute_replayed"):
        s.lines.append(replay_line(w["engine"]))
    if mem["min_offload_bytes"]:
        s.lines.append(f"Least host offload that would make it fit: {both(mem['min_offload_bytes'])}.")
    if mem.get("moe_offload_layers"):
        s.lines.append(
            f"Least expert offload that makes it fit: --n-cpu-moe {mem['moe_offload_layers']} (the routed "
            f"experts of {mem['moe_offload_layers']} layers in host RAM: "
            f"{both(mem['moe_offload_host_bytes'])} of host RAM)."
        )
    s.notes += [f"note: {n}" for n in mem["notes"]]
    if mem["kv_capacity_tokens"] is not None:
        s.lines.append(
            f"KV capacity {mem['kv_capacity_tokens']:,} tokens; max concurrency at {w['n_ctx']:,} tokens: "
            f"{mem['max_concurrency']}."
        )
    if mem.get("startup_kv_tokens") is not None:
        s.lines.append(startup_line(mem, w))
    if mem.get("state_max_requests") is not None:
        s.lines.append(state_line(mem, w))
    if len(mem["per_device"]) > 1:
        keys = ("weights", "kv", "runtime", "overhead", "total", "usable", "headroom")
        rows = [
            [str(r["index"]), *(gib(r[f"{k}_bytes"]) for k in keys), pct(r["utilization"])]
            for r in mem["per_device"]
        ]
        heads = ["device", *(f"{'KV' if k == 'kv' else k} GiB" for k in keys), "used"]
        s.tables.append(Table(heads, rows, "per device"))
    return s


def state_line(mem: dict, w: dict) -> str:
    """A hybrid whose engine keeps the recurrent state in a pool of its own (SGLang): the running requests
    that pool admits, and that the KV capacity is what it leaves."""
    return (
        f"{get_engine(w['engine']).label} keeps the recurrent state in a pool of its own: at most "
        f"{mem['state_max_requests']:,} running requests; the KV capacity above is what that pool leaves."
    )


def startup_line(mem: dict, w: dict) -> str:
    """What the engine logs at startup, and why its concurrency can be below the steady state's."""
    conc, steady = mem["startup_max_concurrency"], mem.get("max_concurrency")
    line = (
        f"{get_engine(w['engine']).label}'s startup log: KV cache size {mem['startup_kv_tokens']:,} tokens; "
        f"maximum concurrency for {w['n_ctx']:,} tokens per request: {conc:.2f}x (its admission bound)."
    )
    if steady is not None and conc < 0.95 * steady:
        line += (
            f" Below the {steady} above: it counts each sliding-window or chunked-attention layer with "
            "every token up to the prompt chunks in flight past its window; running requests hold only "
            "their windows."
        )
    return line


_COMPONENTS = ("weights", "kv", "runtime", "overhead")


def html(ctx: Ctx) -> str:
    cards = "".join(
        [
            card(
                ctx.t("required"), ctx.num("memory.total_bytes", "gib"), ctx.num("memory.total_bytes", "gb")
            ),
            card(
                ctx.t("usable"),
                ctx.num("memory.usable_bytes", "gib"),
                f"{ctx.num('memory.physical_bytes', 'gib')} ({ctx.num('memory.physical_bytes', 'gb')})",
            ),
            card(
                ctx.t("headroom"),
                ctx.num("memory.headroom_bytes", "gib"),
                f"{ctx.num('memory.utilization', 'pct')} {ctx.t('utilization').lower()}",
            ),
            card(
                ctx.t("sec_verdict"),
                verdict(ctx, "memory.verdict"),
                f"{ctx.t('kv_capacity')}: {ctx.num('memory.kv_capacity_tokens', 'int')}",
            ),
        ]
    )
    head = [ctx.t("component"), ctx.t("total") + " (GiB)", ctx.t("total") + " (GB)"]
    devices = ctx.get("memory.per_device") or []
    for d in devices:
        head.append(f"{ctx.t('device')} {d.get('index', 0)} (GiB)")
    rows = []
    for comp in (*_COMPONENTS, "total"):
        row = [ctx.t(comp), ctx.num(f"memory.{comp}_bytes", "gib"), ctx.num(f"memory.{comp}_bytes", "gb")]
        row += [ctx.num(f"memory.per_device.{i}.{comp}_bytes", "gib") for i in range(len(devices))]
        rows.append(row)
    usable_row = [
        ctx.t("usable"),
        ctx.num("memory.usable_bytes", "gib"),
        ctx.num("memory.usable_bytes", "gb"),
    ]
    usable_row += [ctx.num(f"memory.per_device.{i}.usable_bytes", "gib") for i in range(len(devices))]
    rows.append(usable_row)
    if ctx.get("memory.host_bytes"):
        rows.append(
            [ctx.t("host"), ctx.num("memory.host_bytes", "gib"), ctx.num("memory.host_bytes", "gb")]
            + [""] * len(devices)
        )
    tbl = table(head, rows, set(range(1, len(head))))
    bars = [
        (
            f"{ctx.t('device')} {d.get('index', i)}",
            [(c, t(c, ctx.lang), d.get(f"{c}_bytes", 0) or 0) for c in _COMPONENTS],
            d.get("usable_bytes"),
        )
        for i, d in enumerate(devices)
    ]
    if ctx.get("memory.host_bytes"):
        bars.append(
            (t("host", ctx.lang), [("host", t("host", ctx.lang), ctx.get("memory.host_bytes"))], None)
        )
    chart = figure(
        charts.memory_stack_chart(bars, ctx.lang, t("chart_memory", ctx.lang), t("usable_limit", ctx.lang)),
        ctx.get("memory.basis", ""),
    )
    mem = ctx.get("memory") or {}
    startup = ""
    if mem.get("startup_kv_tokens") is not None:
        startup = f'<p class="note">{e(startup_line(mem, ctx.get("workload")))}</p>'
    if mem.get("state_max_requests") is not None:
        startup += f'<p class="note">{e(state_line(mem, ctx.get("workload")))}</p>'
    if mem.get("compute_band"):
        lines = band_lines(mem["compute_band"], ctx.get("workload")["engine"])
        startup += "".join(f'<p class="note">{e(x)}</p>' for x in lines)
    if mem.get("compute_replayed"):
        startup += f'<p class="note">{e(replay_line(ctx.get("workload")["engine"]))}</p>'
    return section("memory", ctx.t("sec_memory"), f'<div class="cards">{cards}</div>{startup}{chart}{tbl}')


UNIT = Unit(key="memory", type=MemorySection, build=build, text=text, html=html)
