"""Launch commands: every engine profile's command line for the sized configuration
(``EngineProfile.launch``); the chosen engine's is exact, the others say what they cannot reproduce."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.engines import engine_names, get_engine
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


def build(b: Build) -> tuple[LaunchEntry, ...]:
    weights = int(b.memory.weights_bytes)
    out = []
    for name in engine_names():
        c = get_engine(name).launch(b.model, b.quant, b.workload, weights)
        out.append(LaunchEntry(engine=c.engine, argv=c.argv, text=c.text, exact=c.exact, notes=c.notes))
    return tuple(out)


def text(d: dict) -> Block:
    s = Block("launch", "Launch commands")
    for cmd in d["launch"]:
        label = cmd["engine"] + ("" if cmd["exact"] else " (not an exact match; see notes)")
        s.code.append((label, cmd["text"]))
        s.notes += [f"{cmd['engine']}: {n}" for n in cmd["notes"]]
    return s


def html(ctx: Ctx) -> str:
    out = []
    for cmd in ctx.get("launch") or []:
        notes = "".join(f"<li>{e(n)}</li>" for n in cmd.get("notes", []))
        out.append(
            f"<h3>{e(cmd.get('engine'))}</h3>"
            f'<pre data-engine="{e(cmd.get("engine"))}">{e(cmd.get("text"))}</pre>'
            f'<ul class="notes">{notes}</ul>'
        )
    return section("launch", ctx.t("sec_launch"), "".join(out))


UNIT = Unit(key="launch", type=tuple[LaunchEntry, ...], build=build, text=text, html=html)
