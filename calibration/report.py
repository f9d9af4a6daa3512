"""Calibration report: Markdown + PNG plots (matplotlib, Agg) in results/calibration/.

Plots (held-out predictions, gate scheme: leave-one-device-out, single-device families leave-one-model-out):
  pred_vs_meas_<phase>.png   predicted vs measured tokens/s per family (log-log, y = x line)
  residuals_<phase>.png      ln(measured / predicted) vs model weight bytes read (GiB = 2^30 B)
Tables: per family x phase error (median / p90 APE), fitted parameters with standard errors, rejections.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd

from calibration.pipeline import Calibration, coefficients_document
from calibration.validate import ape_stats
from harness.safe_files import atomic_write, atomic_write_text

GIB = 2**30


def _held_frame(cal: Calibration) -> pd.DataFrame:
    rows = []
    for pf in cal.fits:
        for h in pf.gate():
            p = h.point
            # tokens per measured time: the prompt tokens of a prefill, the sequences of a decode step
            n_tok = p.features.tokens if pf.phase == "prefill" else int(p.extra.get("batch") or 1)
            rows.append(
                {
                    "phase": pf.phase,
                    "family": p.family,
                    "engine": p.engine,
                    "backend": p.backend,
                    "device": p.device,
                    "model": p.model,
                    "measured_tok_s": n_tok / p.measured_s,
                    "predicted_tok_s": n_tok / h.predicted_s,
                    "log_ratio": h.log_ratio,
                    "ape": h.ape,
                    "scheme": h.scheme,
                    "level": h.level,
                    "model_gib": (p.extra.get("model_bytes") or 0) / GIB,
                }
            )
    return pd.DataFrame(rows)


def _plots(df: pd.DataFrame, out: Path) -> list[str]:
    """PNG plots in the HTML report's chart style (estimator.render.style: palette, fonts, light grid);
    families are
    told apart by colour and marker (the palette has 8 colours)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from estimator.render import style

    markers = "os^Dv<>P"
    names = []
    with plt.rc_context(style.matplotlib_rc()):
        for phase, d in df.groupby("phase"):
            fams = sorted(d["family"].unique())
            n_col = len(style.SERIES)
            look = {
                f: {"color": style.SERIES[i % n_col], "marker": markers[(i // n_col) % len(markers)]}
                for i, f in enumerate(fams)
            }
            fig, ax = plt.subplots(figsize=(7, 6))
            for fam, g in d.groupby("family"):
                ax.scatter(g["measured_tok_s"], g["predicted_tok_s"], s=12, label=fam, **look[fam])
            lo = min(d["measured_tok_s"].min(), d["predicted_tok_s"].min())
            hi = max(d["measured_tok_s"].max(), d["predicted_tok_s"].max())
            ax.plot([lo, hi], [lo, hi], color=style.AXIS_COLOR, lw=0.8)
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="measured tokens/s",
                ylabel="predicted tokens/s (held out)",
                title=f"{phase}: predicted vs measured",
            )
            ax.legend(fontsize=6, ncol=2)
            name = f"pred_vs_meas_{phase}.png"
            _save_png(fig, out / name)
            plt.close(fig)
            names.append(name)
            fig, ax = plt.subplots(figsize=(7, 4))
            for fam, g in d.groupby("family"):
                ax.scatter(g["model_gib"], g["log_ratio"], s=12, label=fam, **look[fam])
            ax.axhline(0, color=style.AXIS_COLOR, lw=0.8)
            ax.set(
                xscale="log",
                xlabel="weight bytes read per pass (GiB)",
                ylabel="ln(measured / predicted)",
                title=f"{phase}: held-out residuals vs model size",
            )
            name = f"residuals_{phase}.png"
            _save_png(fig, out / name)
            plt.close(fig)
            names.append(name)
    return names


def _save_png(fig, path: Path) -> None:
    """One plot, written like every output (harness.safe_files.atomic_write: whole or not at all)."""
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=80))


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def ds_quality(cal: Calibration) -> list[tuple[str, int]]:
    """(quality flag, records left out for it) of the dataset."""
    return list(cal.dataset.excluded_quality.items())


def render_markdown(cal: Calibration, doc: dict, df: pd.DataFrame, plots: list[str]) -> str:
    lines = [
        "# Calibration report",
        "",
        f"Records used: {len(cal.dataset.records)} (quality flags: {', '.join(cal.dataset.qualities)}); "
        f"left out: {len(cal.rejected)}; input hash `{cal.dataset.input_hash}`.",
        "",
        *[f"Not fitted: {n} record(s), {why}." for why, n in sorted(cal.dataset.excluded_kind.items())],
        *[f"Quality flag `{q}` not used: {n} record(s)." for q, n in sorted(ds_quality(cal))],
        "",
        "Errors are absolute percentage errors of tokens/s, held out: each point predicted by coefficients "
        "fitted without its device (leave-one-device-out); a family with a single device is held out by "
        "model (leave-one-model-out).  Speeds are estimated by estimator.physics.speed with the coefficients "
        "below.",
        "",
    ]
    if not df.empty:
        lines += [
            "## Error per family and phase",
            "",
            "| family | engine | backend | phase | n | median | p90 | held out by |",
            "|---|---|---|---|---:|---:|---:|---|",
        ]
        agg = defaultdict(list)
        for r in df.itertuples():
            agg[(r.family, r.engine, r.backend, r.phase)].append((r.ape, r.scheme))
        for k in sorted(agg):
            med, p90 = ape_stats([a for a, _ in agg[k]])
            schemes = ", ".join(sorted({s for _, s in agg[k]}))
            lines.append(f"| {' | '.join(k)} | {len(agg[k])} | {_pct(med)} | {_pct(p90)} | {schemes} |")
        for phase, d in df.groupby("phase"):
            med, p90 = ape_stats(d["ape"].tolist())
            lines.append(f"\nOverall {phase}: n = {len(d)}, median {_pct(med)}, p90 {_pct(p90)}.")
        lines.append("")
    lines += [
        "## Fitted parameters (per family; ± standard error from the Jacobian)",
        "",
        "| family | engine | backend | phase | n | devices | params | interval (ln) | coverage |",
        "|---|---|---|---|---:|---:|---|---|---:|",
    ]
    for g in doc["groups"]:
        ps = ", ".join(f"{k}={v:.3g}±{g['stderr'].get(k, float('nan')):.2g}" for k, v in g["params"].items())
        iv = g["interval"]
        lines.append(
            f"| {g['family']} | {g['engine']} | {g['backend']} | {g['phase']} | {g['n_points']} | "
            f"{len(g['devices'])} | {ps} | [{iv['log_lo']}, {iv['log_hi']}] | {iv.get('coverage')} |"
        )
    if cal.serving is not None:  # the serving phase (calibration.serving)
        from calibration.serving import markdown_section

        lines += markdown_section(cal.serving, doc)
    if doc["uncalibrated"]:
        lines += ["", "## Uncalibrated families", ""]
        lines += [
            f"- {u['family']} / {u['engine']} / {u['backend']} / {u['phase']}: {u['reason']}"
            for u in doc["uncalibrated"]
        ]
    if cal.memory_notes:
        lines += ["", "## Memory terms", ""] + [f"- {n}" for n in cal.memory_notes]
    lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    if cal.rejected:
        lines += ["", "## Records left out", ""] + [f"- `{r}`" for r in cal.rejected]
    return "\n".join(lines) + "\n"


def write_report(cal: Calibration, out: str | Path) -> Path:
    """Write calibration.md and the PNG plots into ``out``; returns the Markdown path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = coefficients_document(cal)
    df = _held_frame(cal)
    plots = _plots(df, out) if not df.empty else []
    path = out / "calibration.md"
    atomic_write_text(path, render_markdown(cal, doc, df, plots))
    return path
