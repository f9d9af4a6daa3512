"""Provenance and warnings: the coefficients file behind every speed, the report's warnings (in one fixed
order),
the model's notes, and the footer (fitbench version, schema, generation time)."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import engines_for, get_engine
from estimator.physics import stream
from estimator.physics.coefficients import COVARIATES_LABEL
from estimator.physics.memory import UNIFIED_RAM
from estimator.render.blocks import Block
from estimator.render.htmlkit import Ctx, e, section
from estimator.report.recommend import can_combine
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class CoefficientsInfo:
    """The coefficients file the speeds came from (path, created, hash of its input records)."""

    path: str | None
    calibrated_file: bool
    created_utc: str | None
    input_hash: str | None


def coefficients(b: Build) -> CoefficientsInfo:
    table = b.table
    return CoefficientsInfo(
        path=getattr(table, "path", None),
        calibrated_file=bool(getattr(table, "calibrated", False)),
        created_utc=getattr(table, "created_utc", None),
        input_hash=getattr(table, "input_hash", None),
    )


def warnings(b: Build) -> tuple[str, ...]:
    """The report's warnings, each once, in this order: the request's own, a weight format the engine does not
    load, a configuration that runs on a fallback or not at all (support), speed that could not be estimated
    or is uncalibrated, a configuration that does not fit, devices
    that
    cannot be combined."""
    wl, quant, hw, m = b.workload, b.quant, b.hardware, b.memory
    out = list(b.request_warnings)
    if not get_engine(wl.engine).runs(quant):
        out.append(f"{quant.name} is not a {wl.engine} format (formats of {', '.join(engines_for(quant))})")
    sup = b.get("support")
    if sup.status in ("fallback", "unsupported"):
        out.append(sup.headline)
    spd = b.get("speed")
    if spd is None:
        out.append(f"no speed estimate for {hw.id}: {b.speed_error}")
    elif not spd.decode.calibrated and not spd.prefill.calibrated:
        out.append(
            f"speed figures come from {_pool(spd.decode.coefficients)}: no calibrated coefficients for "
            f"{hw.family}/{wl.engine}"
        )
    elif spd.decode.calibrated and b.sizing.sets(quant, hw, wl).unmodelled:  # the notes say why
        out.append(
            f"prefill of {quant.name} weights is not modelled on {hw.family}/{wl.engine} (see the notes): "
            "its figures have a wide interval (decode is calibrated)"
        )
    elif not spd.calibrated:  # one phase measured, the other not
        todo, done = ("prefill", "decode") if spd.decode.calibrated else ("decode", "prefill")
        pool = _pool((spd.prefill if todo == "prefill" else spd.decode).coefficients)
        out.append(
            f"{todo} figures come from {pool}: no calibrated {todo} coefficients for "
            f"{hw.family}/{wl.engine} ({done} is calibrated)"
        )
    if (
        spd is not None
        and not (hw.bf16_tflops or hw.fp8_tflops or hw.int8_tops)
        and not spd.prefill.calibrated
    ):
        flops = b.sizing.sets(quant, hw, wl).pparams.get("flops_abs_tflops")
        if hw.kind == "cpu" and hw.cpu_cores and hw.cpu_clock_ghz:  # the rate follows its cores x clock
            out.append(
                f"{hw.id} has no TFLOPS figure: prefill and time to first token use a CPU rate fitted on "
                f"measured CPUs and scaled to its {hw.cpu_cores} cores x {hw.cpu_clock_ghz:g} GHz, "
                f"{flops or 0:.3g} TFLOPS (estimated; --tflops gives a measured one)"
            )
        else:
            out.append(
                f"{hw.id} has no TFLOPS figure: prefill and time to first token assume the coefficient set's "
                f"typical {flops or 0:g} TFLOPS, not this device's (--tflops gives it)"
            )
    ram = next((x for x in m.notes if x.startswith(UNIFIED_RAM)), None)  # memory.UNIFIED_RAM_NOTE
    if m.verdict == "does not fit" and m.total_bytes <= m.usable_bytes and m.max_concurrency is not None:
        out.append(
            f"does not fit: {b.model.id} at {quant.name} on {wl.n_devices} x {hw.id}: "
            f"{get_engine(wl.engine).label} admits at most {m.max_concurrency:,} sequences of "
            f"{int(wl.n_ctx):,} tokens"
        )
    elif m.verdict == "does not fit" and ram:
        out.append(f"does not fit: {b.model.id} at {quant.name} on {wl.n_devices} x {hw.id}: {ram}")
    elif m.verdict == "does not fit":
        out.append(
            f"does not fit: {b.model.id} at {quant.name} needs more than the usable memory of "
            f"{wl.n_devices} x {hw.id}"
        )
    elif m.verdict != "fits":
        out.append(f"fits only with {m.host_bytes / 2**30:.2f} GiB in host RAM")
    if wl.n_devices > 1 and not can_combine(hw):
        out.append(
            f"{hw.id} is a {hw.kind} device: several of them cannot be combined for tensor / pipeline "
            f"parallelism; the {wl.n_devices}-device figures assume they could"
        )
    return tuple(dict.fromkeys(out))


def _pool(label: str) -> str:
    """What an uncalibrated speed comes from: the serving fit's pool (a serving engine's single stream,
    estimator.physics.stream), the calibrated model's covariates of devices like this one (a family nobody
    measured, schema 2), or the pooled prior of the decode / prefill fit."""
    if label.startswith(stream.LABEL_PREFIX):
        return "the serving fit's pool"
    if f"{COVARIATES_LABEL}: " in label:
        return "the covariates of devices like it"
    return "the pooled prior"


def text(d: dict) -> Block:
    c = d["coefficients"]
    s = Block("notes", "Warnings and provenance")
    s.lines += [f"warning: {w}" for w in d["warnings"]]
    src = c["path"] or "shipped prior (estimator/data/prior_coefficients.json)"
    s.lines.append(f"coefficients: {src}" + (f", created {c['created_utc']}" if c["created_utc"] else ""))
    s.lines.append(
        f"fitbench {d['fitbench_version']}, report schema {d['schema_version']}, generated "
        f"{d['generated_utc']}.  GiB = 2^30 bytes, GB = 10^9 bytes."
    )
    return s


def notes(ctx: Ctx) -> str:
    items = [*(ctx.get("warnings") or []), *(ctx.get("model.notes") or [])]
    if not items:
        return ""
    return section(
        "notes",
        ctx.t("sec_notes"),
        '<ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in items) + "</ul>",
    )


def footer(ctx: Ctx) -> str:
    coef = ctx.get("coefficients") or {}
    src = coef.get("path") or "prior"
    return (
        f"<footer>{ctx.t('generated', version=ctx.get('fitbench_version', ''))} · "
        f"{e(ctx.get('generated_utc'))}"
        f" · {ctx.t('coefficients')}: {e(src)} {e(coef.get('created_utc') or '')} · schema "
        f"{e(ctx.get('schema_version'))}</footer>"
    )


def html(ctx: Ctx) -> str:
    """Warnings and model notes, then the footer."""
    return notes(ctx) + footer(ctx)


COEFFICIENTS = Unit(key="coefficients", type=CoefficientsInfo, build=coefficients)
WARNINGS = Unit(key="warnings", type=tuple[str, ...], build=warnings, text=text, html=html)
