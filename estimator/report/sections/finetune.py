"""Fine-tuning memory (estimated from formulas, estimator.physics.finetune): QLoRA, LoRA and full fine-tuning,
whether each fits the selected devices, whether the fine-tuning stack runs it there (the support table's
``finetune`` facts: estimator.physics.support.judge_finetune) and the cheapest catalog configuration that
holds it and runs it."""

from __future__ import annotations

from dataclasses import dataclass

from estimator.physics.finetune import estimate_all
from estimator.physics.support import judge_finetune
from estimator.render import i18n
from estimator.render.blocks import Block, Table, cand_cell, gb, gib, params
from estimator.render.htmlkit import Ctx, e, link, section, table
from estimator.render.i18n import t
from estimator.report.recommend import COUNTS, Candidate, can_combine, eligible
from estimator.report.units import Build, Unit
from estimator.specs import HardwareSpec

# Fraction of device memory a training job may use (framework reserve); an assumption.
FT_USABLE_FRACTION = 0.95
# the "runs on the selected device" cell of each judge_finetune status
RUNS_WORDS = {"native": "yes", "unsupported": "no", "unlisted": "not listed"}


@dataclass(frozen=True)
class FinetuneRow:
    """One method's memory (bytes), whether it fits the selected devices (memory only), whether it runs there
    (``runs_selected``: native | unsupported | unlisted, with the fact's message, note, confidence and source
    when it is not native), the cheapest catalog configuration that fits and runs it."""

    method: str
    label: str
    weights_bytes: int
    adapter_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    trainable_params: int
    fits_selected: bool
    runs_selected: str
    support_message: str
    support_note: str
    support_confidence: str
    support_source: str
    recommended: Candidate | None
    assumptions: tuple[str, ...]


def _ft_fits(total_bytes: int, hw: HardwareSpec, n: int) -> bool:
    """A training job sharded evenly over n devices fits when total / n <= FT_USABLE_FRACTION x memory."""
    return bool(hw.memory_bytes) and total_bytes / n <= FT_USABLE_FRACTION * hw.memory_bytes


def build(b: Build) -> tuple[FinetuneRow, ...]:
    hw, options = b.hardware, b.options
    pool = sorted(
        (
            (h.price_usd * n, h, n)
            for h in eligible(options.hardware_catalog)
            if h.price_usd
            for n in COUNTS
            if n == 1 or can_combine(h)
        ),
        key=lambda x: (x[0], x[1].id),
    )
    rows = []
    overhead = int(b.memory.overhead_bytes)
    for est in estimate_all(b.model, b.weights.n_params_total, options.finetune, overhead):
        rec = None
        for price, h, n in pool:
            if _ft_fits(est.total_bytes, h, n) and judge_finetune(h, est.method).runs:
                rec = Candidate(
                    hardware_id=h.id,
                    hardware_name=h.name,
                    n_devices=n,
                    memory_bytes=h.memory_bytes * n,
                    required_bytes=est.total_bytes,
                    headroom_bytes=int(FT_USABLE_FRACTION * h.memory_bytes * n) - est.total_bytes,
                    purchase_usd=price,
                    usd_per_hour=None,
                    rate_provider=None,
                    decode_tok_s=None,
                    reason=f"cheapest configuration with {FT_USABLE_FRACTION:.0%} of memory >= total "
                    "(sharded evenly) whose PyTorch backend runs the method",
                )
                break
        sup = judge_finetune(hw, est.method)
        rows.append(
            FinetuneRow(
                method=est.method,
                label=est.label,
                weights_bytes=est.weights_bytes,
                adapter_bytes=est.adapter_bytes,
                gradients_bytes=est.gradients_bytes,
                optimizer_bytes=est.optimizer_bytes,
                activations_bytes=est.activations_bytes,
                overhead_bytes=est.overhead_bytes,
                total_bytes=est.total_bytes,
                trainable_params=est.trainable_params,
                fits_selected=_ft_fits(est.total_bytes, hw, b.workload.n_devices),
                runs_selected=sup.status,
                support_message=sup.message,
                support_note=sup.note if not sup.runs else "",
                support_confidence=sup.confidence if not sup.runs else "",
                support_source=sup.source if not sup.runs else "",
                recommended=rec,
                assumptions=est.assumptions,
            )
        )
    return tuple(rows)


def _support_notes(ft: list[dict]) -> dict[tuple[str, str, str, str], list[str]]:
    """The methods that do not (or may not) run on the selected device, grouped by the fact that says so."""
    out: dict[tuple[str, str, str, str], list[str]] = {}
    for r in ft:
        if r.get("runs_selected", "native") != "native":
            key = (r["support_message"], r["support_note"], r["support_confidence"], r["support_source"])
            out.setdefault(key, []).append(r["method"])
    return out


def text(d: dict) -> Block:
    s = Block("finetune", "Fine-tuning memory (estimated from formulas)")
    ft = d["finetune"]
    parts = ("weights", "adapter", "gradients", "optimizer", "activations", "overhead", "total")
    name = {"adapter": "adapters"}
    rows = [[f"{name.get(k, k)} GiB", *(gib(r[f"{k}_bytes"]) for r in ft)] for k in parts]
    rows += [
        ["total GB", *(gb(r["total_bytes"]) for r in ft)],
        ["trainable params", *(params(r["trainable_params"]) for r in ft)],
        ["fits the selected devices", *("yes" if r["fits_selected"] else "no" for r in ft)],
        ["runs on the selected device", *(RUNS_WORDS[r["runs_selected"]] for r in ft)],
        ["cheapest catalog fit", *(cand_cell(r["recommended"]) for r in ft)],
    ]
    s.tables.append(Table(["", *(r["method"] for r in ft)], rows))
    for (message, note, confidence, source), methods in _support_notes(ft).items():
        why = f" — {note} [{confidence}: {source}]" if note else ""
        s.notes.append(f"{', '.join(methods)}: {message}{why}")
    for r in ft:
        s.notes.append(f"{r['method']} ({r['label']}): " + "; ".join(r["assumptions"]))
    return s


def html(ctx: Ctx) -> str:
    head = [
        ctx.t("ft_method"),
        ctx.t("weights_gib"),
        ctx.t("ft_grad_opt"),
        ctx.t("ft_act"),
        ctx.t("total_gib"),
        ctx.t("fit"),
        ctx.t("ft_runs"),
        ctx.t("sec_recommend"),
    ]
    rows = []
    for i, r in enumerate(ctx.get("finetune") or []):
        p = f"finetune.{i}"
        grad_opt = (
            (r.get("adapter_bytes", 0) or 0) + r.get("gradients_bytes", 0) + r.get("optimizer_bytes", 0)
        )
        rec = r.get("recommended")
        fits = t("fits" if r.get("fits_selected") else "does not fit", ctx.lang)
        rows.append(
            [
                f"<b>{e(r.get('label'))}</b>",
                ctx.num(f"{p}.weights_bytes"),
                e(i18n.fmt_gib(grad_opt, ctx.lang)),
                ctx.num(f"{p}.activations_bytes"),
                ctx.num(f"{p}.total_bytes"),
                e(fits),
                ctx.t(f"ft_runs_{r.get('runs_selected', 'unlisted')}"),
                e(f"{rec['n_devices']}× {rec['hardware_name']}") if rec else ctx.t("none_fits"),
            ]
        )
    support = "".join(
        f"<li>{e(', '.join(methods))}: {e(message)}"
        + (f' — {e(note)} <span class="note">[{e(confidence)}] {link(source)}</span>' if note else "")
        + "</li>"
        for (message, note, confidence, source), methods in _support_notes(ctx.get("finetune") or []).items()
    )
    notes = support + "".join(
        f"<li>{e(a)}</li>"
        for a in dict.fromkeys(a for r in ctx.get("finetune") or [] for a in r.get("assumptions", []))
    )
    return section(
        "finetune",
        ctx.t("sec_finetune"),
        table(head, rows, {1, 2, 3, 4}) + f'<ul class="notes">{notes}</ul>',
    )


UNIT = Unit(key="finetune", type=tuple[FinetuneRow, ...], build=build, text=text, html=html)
