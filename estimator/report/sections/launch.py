"""Launch commands: every engine profile's command line for the sized configuration
(``EngineProfile.launch``); the chosen engine's is exact, the others say what they cannot reproduce.  A
command is printed only where the engine runs the configuration on this device (estimator.physics.support:
none for ``unsupported``, with the fallback said for ``fallback``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from estimator.engines import engine_names, get_engine
from estimator.physics import support as support_mod
from estimator.render.blocks import Block
from estimator.render.htmlkit import Ctx, e, section
from estimator.report.units import Build, Unit


@dataclass(frozen=True)
class LaunchEntry:
    """One engine's command: argv, shell text, whether it reproduces the configuration exactly, notes."""

    engine: str
    argv: tuple[str, ...]
    text: str
    exact: bool
    notes: tuple[str, ...]
    support: str = "native"  # estimator.physics.support status of this engine on the device


def build(b: Build) -> tuple[LaunchEntry, ...]:
    weights = int(b.memory.weights_bytes)
    out = []
    for name in engine_names():
        wl = get_engine(name).adopt(b.workload)  # another engine: its backend, without switches it lacks
        v = support_mod.judge(b.model, b.quant, b.hardware, wl)
        if not v.runs:
            line = support_mod.describe(v, b.quant.name, b.hardware.id)
            out.append(LaunchEntry(name, (), "", False, (f"no command: {line}",), v.status))
            continue
        fa_off = b.workload.flash_attn and not v.flash_attn
        run = replace(b.workload, flash_attn=False) if fa_off else b.workload
        c = get_engine(name).launch(b.model, b.quant, run, weights)  # flash attention off where it falls back
        notes = c.notes
        if v.status == support_mod.FALLBACK:
            notes = (support_mod.describe(v, b.quant.name, b.hardware.id), *notes)
        out.append(LaunchEntry(c.engine, c.argv, c.text, c.exact, notes, v.status))
    return tuple(out)


def text(d: dict) -> Block:
    s = Block("launch", "Launch commands")
    for cmd in d["launch"]:
        label = cmd["engine"] + ("" if cmd["exact"] else " (not an exact match; see notes)")
        if cmd["text"]:
            s.code.append((label, cmd["text"]))
        s.notes += [f"{cmd['engine']}: {n}" for n in cmd["notes"]]
    return s


def html(ctx: Ctx) -> str:
    out = []
    for cmd in ctx.get("launch") or []:
        notes = "".join(f"<li>{e(n)}</li>" for n in cmd.get("notes", []))
        pre = (
            f'<pre data-engine="{e(cmd.get("engine"))}">{e(cmd.get("text"))}</pre>' if cmd.get("text") else ""
        )
        out.append(f"<h3>{e(cmd.get('engine'))}</h3>{pre}" f'<ul class="notes">{notes}</ul>')
    return section("launch", ctx.t("sec_launch"), "".join(out))


UNIT = Unit(key="launch", type=tuple[LaunchEntry, ...], build=build, text=text, html=html)
