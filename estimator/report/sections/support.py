"""Engine support: can the engine run this configuration on this device, natively or on a fallback, and
what that does to the speed (estimator.physics.support.judge, estimator.physics.fallback; every fact with
its public source, estimator/data/support.csv)."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.physics import speed as speed_mod
from estimator.physics.support import Finding, describe, judge
from estimator.render.blocks import Block
from estimator.render.htmlkit import Ctx, e, link, section
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class SupportSection:
    """The verdict for the sized configuration.

    status: native | fallback | unsupported | unlisted; backend: the engine's backend on the device;
    maturity: the backend's (mature | developing | experimental, "" unlisted); headline: one line;
    speed_path: how the speed section estimates a fallback ("" when native).
    """

    engine: str
    backend: str
    status: str
    maturity: str
    headline: str
    findings: tuple[Finding, ...]  # estimator.physics.support.Finding, as judged
    speed_path: str


def build(b: Build) -> SupportSection:
    v = judge(b.model, b.quant, b.hardware, b.workload)
    path = ""
    if v.status == "fallback":
        sets = b.sizing.sets(b.quant, b.hardware, b.workload)
        path = speed_mod.fallback_note(sets) if sets.path is not None else ""
    return SupportSection(
        engine=v.engine,
        backend=v.backend,
        status=v.status,
        maturity=v.maturity,
        headline=describe(v, b.quant.name, b.hardware.name),
        findings=v.findings,
        speed_path=path,
    )


def text(d: dict) -> Block:
    s = d["support"]
    blk = Block("support", "Engine support")
    blk.lines.append(s["headline"] + ".")
    if s["maturity"]:
        blk.lines.append(f"Backend {s['backend'] or '–'}: {s['maturity']}.")
    if s["speed_path"]:
        blk.lines.append(f"Speed is estimated on the {s['speed_path']}.")
    for f in s["findings"]:
        since = f" (since {f['since']})" if f["since"] else ""
        blk.notes.append(f"{f['message']} — {f['note']}{since} [{f['confidence']}: {f['source']}]")
    return blk


def html(ctx: Ctx) -> str:
    s = ctx.get("support") or {}
    items = "".join(
        f"<li>{e(f.get('message'))} — {e(f.get('note'))} "
        f'<span class="note">[{e(f.get("confidence"))}] {link(f.get("source"))}</span></li>'
        for f in s.get("findings") or []
    )
    path = f'<p class="note">{e(s.get("speed_path"))}</p>' if s.get("speed_path") else ""
    head = f'<p class="support-{e(s.get("status"))}">{e(s.get("headline"))}</p>'
    body = f'{head}{path}<ul class="notes">{items}</ul>'
    return section("support", ctx.t("sec_support"), body)


UNIT = Unit(key="support", type=SupportSection, build=build, text=text, html=html)
