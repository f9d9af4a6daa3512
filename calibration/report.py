"""Calibration report: Markdown + PNG plots (matplotlib, Agg) in results/calibration/.

Plots (held-out predictions, gate scheme: leave-one-device-out, single-device families leave-one-model-out):
  pred_vs_meas_<phase>.png   predicted vs measured tokens/s per family (log-log, y = x line, +-25 % band)
  residuals_<phase>.png      ln(measured / predicted) vs model weight bytes read (GiB = 2^30 B)
  (12 x 8 in at 150 dpi; one (colour, marker) pair and one legend entry per family, legend outside the axes)
Tables: headline errors per cross-validation scheme (LODO / LOMO / LOFO, gate) and by basis, interval
coverage out of sample, end-to-end latency, per family x phase error, serving at concurrency (TTFT / TPOT per
engine and scheme, records left out by reason), the model's covariate coefficients and shrinkage scales,
rejections.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import pandas as pd

from calibration import latency, maturity
from calibration.dataset import QUALITY_NOTES
from calibration.pipeline import Calibration, coefficients_document
from calibration.validate import ape_stats
from harness.safe_files import atomic_write, atomic_write_text

GIB = 2**30


def _held_frame(cal: Calibration) -> pd.DataFrame:
    rows = []
    for h in cal.speed.gate() if cal.speed is not None else []:
        p = h.point
        # tokens per measured time: the prompt tokens of a prefill, the sequences of a decode step
        n_tok = p.features.tokens if p.phase == "prefill" else int(p.extra.get("batch") or 1)
        rows.append(
            {
                "phase": p.phase,
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
                "basis": h.basis,
                "model_gib": (p.extra.get("model_bytes") or 0) / GIB,
            }
        )
    return pd.DataFrame(rows)


PLOT_SIZE_IN = (12.0, 8.0)  # figure size, inches
PLOT_DPI = 150  # -> 1800 x 1200 px
PLOT_MARKERS = "os^Dv<>PXhp*"  # with the 8 palette colours: 96 families told apart by (colour, marker)
BAND = 0.25  # the +-25 % band around y = x


def _plots(df: pd.DataFrame, out: Path) -> list[str]:
    """PNG plots in the HTML report's chart style (estimator.render.style: palette, fonts, light grid), 12 x 8
    in at 150 dpi.  Each family has its own (colour, marker) pair, the same in both plots of a phase: the
    palette's 8 colours, then the next marker for the next 8 families; the legend (one entry per family,
    plus the reference lines) sits outside the axes, in two columns past 44 entries.
    pred_vs_meas: predicted vs measured tokens/s (log-log), y = x and the +-25 % band; residuals:
    ln(measured / predicted) vs the weight bytes a pass reads (GiB), 0 and the +-25 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from estimator.render import style

    n_col = len(style.SERIES)
    names = []

    def legend(ax, n_entries: int) -> None:
        ncol = 1 if n_entries <= 44 else 2
        ax.figure.subplots_adjust(left=0.08, right=0.68 if ncol == 1 else 0.52, top=0.93, bottom=0.08)
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8, ncol=ncol,
                  markerscale=1.5, title="family (held out)", title_fontsize=9, frameon=False)  # fmt: skip

    with plt.rc_context(style.matplotlib_rc()):
        for phase, d in df.groupby("phase"):
            fams = sorted(d["family"].unique())
            marker = {f: PLOT_MARKERS[(i // n_col) % len(PLOT_MARKERS)] for i, f in enumerate(fams)}
            look = {
                f: {"color": style.SERIES[i % n_col], "marker": marker[f], "s": 28, "alpha": 0.85}
                for i, f in enumerate(fams)
            }
            fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
            lo = min(d["measured_tok_s"].min(), d["predicted_tok_s"].min()) / 1.5
            hi = max(d["measured_tok_s"].max(), d["predicted_tok_s"].max()) * 1.5
            x = [lo, hi]
            band = {"color": style.AXIS_COLOR, "alpha": 0.12, "lw": 0}
            ax.fill_between(x, [lo * (1 - BAND), hi * (1 - BAND)], [lo * (1 + BAND), hi * (1 + BAND)], **band,
                            label=f"±{BAND:.0%} of measured")  # fmt: skip
            ax.plot(x, x, color=style.AXIS_COLOR, lw=1.0, label="y = x (exact)")
            for fam in fams:
                g = d[d["family"] == fam]
                ax.scatter(g["measured_tok_s"], g["predicted_tok_s"], label=fam, **look[fam])
            ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
                   xlabel="measured speed (tokens/s)", ylabel="predicted speed, held out (tokens/s)",
                   title=f"{phase}: predicted vs measured ({len(d)} points, {len(fams)} families, "
                   "gate scheme)")  # fmt: skip
            legend(ax, len(fams) + 2)
            name = f"pred_vs_meas_{phase}.png"
            _save_png(fig, out / name)
            plt.close(fig)
            names.append(name)
            fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
            ax.axhspan(math.log(1 / (1 + BAND)), math.log(1 / (1 - BAND)), **band,
                       label=f"prediction ±{BAND:.0%}")  # fmt: skip
            ax.axhline(0, color=style.AXIS_COLOR, lw=1.0, label="0 (exact)")
            for fam in fams:
                g = d[d["family"] == fam]
                ax.scatter(g["model_gib"], g["log_ratio"], label=fam, **look[fam])
            ax.set(xscale="log", xlabel="weight bytes read per pass (GiB)",
                   ylabel="ln(measured / predicted) (0 = exact; > 0: predicted too slow)",
                   title=f"{phase}: held-out residuals vs model size ({len(d)} points)")  # fmt: skip
            legend(ax, len(fams) + 2)
            name = f"residuals_{phase}.png"
            _save_png(fig, out / name)
            plt.close(fig)
            names.append(name)
    return names


def _save_png(fig, path: Path) -> None:
    """One plot, written like every output (harness.safe_files.atomic_write: whole or not at all), the whole
    figure at PLOT_DPI (not cropped to its content: every plot has the same size)."""
    atomic_write(path, lambda fh: fig.savefig(fh, format="png", dpi=PLOT_DPI, bbox_inches=fig.bbox_inches))


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def ds_quality(cal: Calibration) -> list[tuple[str, int]]:
    """(quality flag, records left out for it) of the dataset."""
    return list(cal.dataset.excluded_quality.items())


def _scheme_lines(doc: dict) -> list[str]:
    model = doc.get("model", {})
    cv, cover = model.get("cv", {}), model.get("coverage", {})
    if not cv:
        return []
    lines = [
        "## Headline errors per cross-validation scheme",
        "",
        "Every fold refits the whole model (covariate coefficients, family and device effects, noise and "
        "shrinkage scales, the decode bw_eff the prefill memory term borrows).  **LODO** "
        "leave-one-device-out "
        "(a device nobody measured, its family known through other devices); **LOMO** leave-one-model-out "
        "(a model nobody measured on measured devices); **LOFO** leave-one-family-out (a device of a family "
        "nobody measured: covariates only); **gate** = LODO, or LOMO for a family with a single device.  "
        "Coverage: share of held-out points inside their nominal 90 % interval, the interval built without "
        "the point's group (device / family / model); *mean over groups* gives every held-out group one vote "
        "(what the gate checks: the intervals are for a new device or family), *points* every point one.",
        "",
        "| phase | scheme | n | median | p90 | coverage: mean over groups | coverage: points |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for phase, by in cv.items():
        for scheme in ("lodo", "lomo", "lofo", "gate"):
            e = by.get(scheme)
            if e:
                c = cover.get(phase, {}).get(scheme) or {}
                lines.append(
                    f"| {phase} | {scheme} | {e['n']} | {_pct(e['median_ape'])} | {_pct(e['p90_ape'])} "
                    f"| {_pct(c.get('groups'))} | {_pct(c.get('points'))} |"
                )
    lines += ["", "By basis (how far the held-out prediction was from calibrated data):", "",
              "| phase | scheme | basis | n | median | p90 |", "|---|---|---|---:|---:|---:|"]  # fmt: skip
    for phase, by in cv.items():
        for scheme in ("lodo", "lomo", "lofo"):
            for basis, e in by.get(scheme, {}).get("by_basis", {}).items():
                lines.append(f"| {phase} | {scheme} | {basis} | {e['n']} | {_pct(e['median_ape'])} | "
                             f"{_pct(e['p90_ape'])} |")  # fmt: skip
    lines += _origin_lines(cv)
    lines += _source_lines(cv)
    iv = model.get("intervals", {})
    if iv:
        lines += ["", "## Intervals by basis (split conformal, nominal 90 %)", "",
                  "| phase | basis | from | n residuals | ln interval | x interval "
                  "| coverage lodo / lofo / lomo |",
                  "|---|---|---|---:|---|---|---|"]  # fmt: skip
        for phase, by in iv.items():
            for basis, e in by.items():
                cov = e.get("coverage", {})
                covs = " / ".join(_pct((cov.get(s) or {}).get("groups")) for s in ("lodo", "lofo", "lomo"))
                lines.append(
                    f"| {phase} | {basis} | {e.get('scheme') or 'default'} | {e['n_residuals']} | "
                    f"[{e['log_lo']:.3f}, {e['log_hi']:.3f}] | x{math.exp(e['log_lo']):.2f} .. "
                    f"x{math.exp(e['log_hi']):.2f} | {covs} |"
                )
    e2e = model.get("e2e", {})
    if e2e:
        lines += ["", "## End-to-end latency (predicted by the estimator)", "",
                  "llama-bench -pg (prompt + generate, one sequence) and vLLM offline batches (B requests "
                  "at once): prefill of B x n_prompt tokens + n_gen decode steps of B sequences, each run as "
                  "built (a llama.cpp build its source dates to 2024 with the fit's build terms, as the "
                  "speed cross-validation predicts such points; calibration.latency).  *full*: the "
                  "coefficients as shipped; *full_current*: the same, every run as a current build (what a "
                  "report says); the schemes: the fold that holds out the record's device / model / family.  "
                  "A -b 1 run of one device is decode steps only and, for a device without a tg record, is "
                  "fitted as its decode evidence (calibration.features.one_token_run_point): *full* predicts "
                  "those rows in sample; *not fitted* are the rows no fit saw.  A run of a build older than "
                  "its engine profile describes also takes the as-built terms of its stratum (engine, "
                  "backend, build; calibration.asbuilt, table below), fitted on that stratum's runs: in "
                  "sample under *full*, without the held-out device / model / family under each scheme; "
                  "*full_no_terms*: the speed model alone.", "",
                  "| scheme | rows | n | median | p90 |", "|---|---|---:|---:|---:|"]  # fmt: skip
        for scheme, e in e2e.items():
            lines.append(f"| {scheme} | all | {e['n']} | {_pct(e['median_ape'])} | {_pct(e['p90_ape'])} |")
            nf = e.get("not_fitted")
            if nf and nf["n"] != e["n"]:
                cells = f"{nf['n']} | {_pct(nf['median_ape'])} | {_pct(nf['p90_ape'])}"
                lines.append(f"| {scheme} | not fitted | {cells} |")
            if scheme != "full":
                continue
            for eng, x in e["by_engine"].items():
                cells = f"{x['n']} | {_pct(x['median_ape'])} | {_pct(x['p90_ape'])}"
                lines.append(f"| {scheme} | {eng} | {cells} |")
        by_dev = e2e.get("full", {}).get("by_device", [])
        if by_dev:
            lines += ["", "Per device (full fit; ln(predicted / measured) < 0: predicted too fast; build: "
                      "the engine version the record or its source states, *older* when it predates the "
                      "engine the profile describes, e.g. vLLM before its V1 engine):", "",
                      "| engine | device | devices | basis | build | n | fitted | median "
                      "| median ln(pred/meas) | without as-built terms |",
                      "|---|---|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
            for d in by_dev:
                build = (d.get("build") or "-") + (" *older*" if d.get("older_than_profile") else "")
                head = f"| {d['engine']} | {d['device']} | {d['n_devices']} | {d['basis']} | {build} |"
                head += f" {d['n']} | {d.get('n_fitted', 0)} |"
                bare = d.get("median_log_ratio_no_terms")
                bare_cell = "-" if bare is None else f"{bare:+.2f}"
                lines.append(f"{head} {_pct(d['median_ape'])} | {d['median_log_ratio']:+.2f} | {bare_cell} |")
        terms = e2e.get("full", {}).get("terms", {})
        if terms:
            lines += ["", "As-built terms per stratum (full fit; calibration.asbuilt: t = max(e^a x t_model "
                      "+ g x grouped-KV layer-tokens + s x layer-passes on > 1 device, FLOPs / (rate x "
                      "e^-c)) x e^(m [> 1 device]); the estimator predicts current builds and never applies "
                      "them):", "",
                      "| stratum | runs | devices | a | g (us) | c | m | s (ms) | reads |",
                      "|---|---:|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
            for st, t in terms.items():
                lines.append(
                    f"| {st} | {t['n']} | {', '.join(t['devices'])} | {t['time_scale_ln']:+.3f} | "
                    f"{t['gqa_attention_us']:.3f} | {t['compute_deficit_ln']:.3f} | "
                    f"{t['multi_device_ln']:+.3f} | "
                    f"{t['multi_device_layer_ms']:.3f} | {t['reads']} |"
                )
    return lines + [""]


def _origin_lines(cv: dict) -> list[str]:
    """The headline errors split by where the points come from (``cv[phase][scheme]["by_origin"]``)."""
    def cov(e: dict) -> str:
        c = e.get("coverage")
        return f"{_pct(c['groups'])} / {_pct(c['points'])}" if c else "-"

    rows = [
        f"| {phase} | {scheme} | {origin} | {e['n']} | {_pct(e['median_ape'])} | {_pct(e['p90_ape'])} "
        f"| {cov(e)} |"
        for phase, by in cv.items()
        for scheme in ("lodo", "lomo", "lofo", "gate")
        for origin, e in by.get(scheme, {}).get("by_origin", {}).items()
    ]
    if not rows:
        return []
    return [
        "",
        "By origin: *imported* are the published measurements, *measured* fitbench's own runs (a detected "
        "host is a family of its own, so held out by device or family it is predicted from covariates "
        "alone).  An independent check on published devices compares with the imported rows; the headline "
        "above counts both.  Coverage: of the nominal 90 % intervals, mean over held-out groups / points, "
        "each point judged by the interval built without its group.",
        "",
        "| phase | scheme | origin | n | median | p90 | coverage: groups / points |",
        "|---|---|---|---:|---:|---:|---:|",
        *rows,
    ]


def _source_lines(cv: dict, scheme: str = "lodo") -> list[str]:
    """Held-out errors per published source under ``scheme`` (``cv[phase][scheme]["by_source"]``), with the
    median ln(predicted / measured time): the sources whose rows the predictions miss to one side."""
    rows = [
        f"| {phase} | {source} | {e['devices']} | {e['n']} | {_pct(e['median_ape'])} | "
        f"{e['median_log_ratio']:+.3f} |"
        for phase, by in cv.items()
        for source, e in by.get(scheme, {}).get("by_source", {}).items()
    ]
    if not rows:
        return []
    return [
        "",
        f"By source ({scheme.upper()}): each published source (sources.md's groups) and fitbench's own "
        "runs.  Median ln(predicted / measured time) > 0: predicted too slow.  A source far to one side "
        "with a small error spread has a build, a setting or a method of its own, which the estimate (a "
        "current build with llama-bench defaults) does not carry; an independent check of that source's "
        "held-back rows sees the same offset.",
        "",
        "| phase | source | devices | n | median error | median ln(pred / meas) |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
    ]


def _serving_lines(doc: dict) -> list[str]:
    """The serving section: the fit, its held-out errors per scheme, engine and metric against the gate,
    and the serving records left out by reason."""
    srv = doc.get("serving") or {}
    if not srv.get("n_points") and not srv.get("n_left_out"):
        return []
    from calibration.check import THRESHOLDS as gate  # the gate's own thresholds, not a copy

    n = srv.get("n_points", {})
    lines = [
        "## Serving at concurrency (TTFT, TPOT)",
        "",
        "Model: estimator.physics.serving (the mixed scheduler step on the decode step formula, the closed "
        "loop and the request queue); its parameters (the `serving.*` rows below) are fitted like decode and "
        "prefill, one model over (device, engine, backend) units with engine / vendor covariates and "
        "family / device effects (calibration/serving.py).  Points: "
        + ", ".join(f"{k} {v}" for k, v in n.items())
        + ".  Error = |t_meas / t_pred - 1| of the time; the strata serving.ttft / serving.tpot in the "
        "tables above are these points (intervals of ln(measured / predicted) time).  Gate (`python -m "
        f"calibration check`): overall median of the gate scheme, TPOT <= {100 * gate['tpot']:.0f} %, TTFT "
        f"<= {100 * gate['ttft']:.0f} %; the issue's targets are 12 % / 25 %.",
        "",
        "| scheme | engine / metric | n | median | p90 |",
        "|---|---|---:|---:|---:|",
    ]
    for scheme, rows in srv.get("cv", {}).items():
        for k, v in rows.items():
            lines.append(f"| {scheme} | {k} | {v['n']} | {_pct(v['median_ape'])} | {_pct(v['p90_ape'])} |")
    lines += ["", f"Serving records with TTFT / TPOT left out: {srv.get('n_left_out', 0)}.", ""]
    lines += [f"- {cnt} x {why}" for why, cnt in srv.get("left_out", {}).items()]
    return lines + [""]


def _maturity_lines(doc: dict, evidence: list[dict]) -> list[str]:
    """Leave-one-backend-out of the less mature backends, the widening it sets, and the records of those
    backends no fit saw, predicted out of sample (calibration.maturity)."""
    mat = doc.get("model", {}).get("maturity") or {}
    if not mat:
        return []
    lines = ["## New backends: leave-one-backend-out and the maturity widening", "",
             "Each less mature llama.cpp backend (support table: developing / experimental) is predicted by a"
             " fit without any point of it, its own backend covariate at the prior: what the estimator says "
             "of a backend nobody measured, through the maturity covariate learnt from the others.  "
             "*widening*: how far below the pooled interval's lower end such speeds fall (group-weighted 90 %"
             " bound, one vote per backend); the estimator widens an uncalibrated prediction on a backend of "
             "that maturity by it (estimator.physics.fallback).  Log ratio = ln(measured / predicted "
             "tokens/s).",
             "", "| maturity | backend held out | n | median error | median log ratio |",
             "|---|---|---:|---:|---:|"]  # fmt: skip
    for m, e in mat.items():
        for b, r in e.get("backends", {}).items():
            lines.append(f"| {m} | {b} | {r['n']} | {_pct(r['median_ape'])} | {r['median_log_ratio']:+.2f} |")
    lines += ["", "| maturity | widening (ln) | x lower bound | from | n |", "|---|---:|---:|---|---:|"]
    for m, e in mat.items():
        src = e.get("source", "")
        lines.append(f"| {m} | {e['log_lo']:+.3f} | x{math.exp(e['log_lo']):.2f} | "
                     f"{'leave-one-backend-out' if src == 'lobo' else 'shipped default (too few backends)'} "
                     f"| {e.get('n_residuals', 0)} |")  # fmt: skip
    rows = [r for r in evidence if "error" not in r]
    if rows:
        inside = sum(r["inside"] for r in rows)
        lines += ["", f"Records of these backends that no fit saw (quality flag not fitted, or a support "
                  f"fallback), predicted with these coefficients as a report does (tg at the record's "
                  f"depth, the interval the report shows): {inside} of {len(rows)} inside their interval.",
                  "", "| record | device x n | model, quant | path | measured tok/s | predicted (interval) "
                  "| inside | not fitted because |", "|---|---|---|---|---:|---|---|---|"]  # fmt: skip
        for r in rows:
            lines.append(
                f"| {r['where']} | {r['hardware']} x{r['n_devices']} | {r['model']} {r['quant']} "
                f"| {r['path']} | {r['measured_tok_s']:.3g} | {r['tok_s']:.3g} "
                f"({r['lo_tok_s']:.3g}-{r['hi_tok_s']:.3g}) | {'yes' if r['inside'] else 'no'} | {r['why']} |"
            )
    failed = [r for r in evidence if "error" in r]
    if failed:
        lines += ["", f"{len(failed)} such record(s) could not be predicted: "
                  + "; ".join(f"{r['where']} ({r['error']})" for r in failed)]  # fmt: skip
    return lines + [""]


def _band_lines(bands: dict) -> list[str]:
    """The memory bands (calibration.memory_fit.memory_bands) as a table: measured / estimated per engine
    and runtime term."""
    rows = [
        (e, t + (f" ({kind})" if kind else ""), b)
        for e, per in sorted(bands.items())
        for t, band in sorted(per.items())
        for kind, b in [("", band), *sorted((band.get("by_kind") or {}).items())]
    ]
    if not rows:
        return []
    out = [
        "",
        "How the engines' own buffers spread around the fitted estimate (measured / estimated, one ratio per "
        f"distinct measurement; {rows[0][2]['basis']}; per device kind where one has "
        "calibration.memory_fit.MIN_KIND_BAND or more); the estimator's reports quote the 5-95 % band of the "
        "device's kind, else the pooled one:",
        "",
        "| engine | term | n | median error | within 5 % | 5 % | 95 % | min | max |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e, t, b in rows:
        out.append(
            f"| {e} | {t} | {b['n']} | {b['median_ape']:.1%} | {b['within_5pct']:.1%} | "
            f"{b['ratio_p05']:.3f} | {b['ratio_p95']:.3f} | {b['ratio_min']:.3f} | {b['ratio_max']:.3f} |"
        )
    return out


def _model_lines(doc: dict) -> list[str]:
    model = doc.get("model", {})
    lines = ["## The model: covariate coefficients (eta units) and shrinkage scales", "",
             "eta = prior offset + sum beta x + family effect + device effect (docs/calibration.md); "
             f"noise scale sigma: {model.get('sigma')}.", "",
             "| parameter | tau family | tau device | coefficients |", "|---|---:|---:|---|"]  # fmt: skip
    for e in model.get("params", []):
        betas = ", ".join(f"{k}={v:+.3f}" for k, v in e["beta"].items() if v is not None and abs(v) >= 5e-3)
        tau = e.get("tau", {})
        lines.append(f"| {e['key']} | {tau.get('family', '-')} | {tau.get('device', '-')} | {betas} |")
    return lines + [""]


def render_markdown(
    cal: Calibration, doc: dict, df: pd.DataFrame, plots: list[str], evidence: list[dict] = ()
) -> str:
    """The calibration report; ``evidence``: calibration.maturity.evidence rows of the fit."""
    lines = [
        "# Calibration report",
        "",
        f"Records used: {len(cal.dataset.records)} (quality flags: {', '.join(cal.dataset.qualities)}); "
        f"left out: {len(cal.rejected)}; input hash `{cal.dataset.input_hash}`.",
        "",
        *[f"Not fitted: {n} record(s), {why}." for why, n in sorted(cal.dataset.excluded_kind.items())],
        *[f"Quality flag `{q}` not used: {n} record(s)" + (f" ({QUALITY_NOTES[q]})." if q in QUALITY_NOTES
                                                             else ".") for q, n in sorted(ds_quality(cal))],
        "",
        "Errors are absolute percentage errors of tokens/s (serving: of the TTFT / TPOT time), held out.  "
        "Speeds are estimated by estimator.physics.speed, serving figures by estimator.physics.serving, with "
        "the coefficients of results/coefficients.json (schema 2).",
        "",
        *_scheme_lines(doc),
        *_maturity_lines(doc, evidence),
        *_serving_lines(doc),
    ]
    if not df.empty:
        lines += [
            "## Error per family and phase (gate scheme)",
            "",
            "| family | engine | backend | phase | n | median | p90 | held out by |",
            "|---|---|---|---|---:|---:|---:|---|",
        ]
        agg = defaultdict(list)
        for r in df.itertuples():
            scheme = r.scheme if r.basis != "pooled" else f"{r.scheme} -> pooled"
            agg[(r.family, r.engine, r.backend, r.phase)].append((r.ape, scheme))
        for k in sorted(agg):
            med, p90 = ape_stats([a for a, _ in agg[k]])
            schemes = ", ".join(sorted({s for _, s in agg[k]}))
            lines.append(f"| {' | '.join(k)} | {len(agg[k])} | {_pct(med)} | {_pct(p90)} | {schemes} |")
        lines.append("")
    fams = doc.get("families", [])
    if fams:
        lines += ["## Error per family and phase, every scheme", "",
                  "| family | engine | backend | phase | n | devices | lodo | lomo | lofo |",
                  "|---|---|---|---|---:|---:|---|---|---|"]  # fmt: skip
        for f in fams:
            cells = [
                f"{_pct(f['cv'][s]['median_ape'])} / {_pct(f['cv'][s]['p90_ape'])}" if s in f["cv"] else "-"
                for s in ("lodo", "lomo", "lofo")
            ]
            head = f"| {f['family']} | {f['engine']} | {f['backend']} | {f['phase']} | {f['n_points']} |"
            lines.append(f"{head} {len(f['devices'])} | {' | '.join(cells)} |")
        lines.append("")
    lines += _model_lines(doc)
    if doc["uncalibrated"]:
        lines += ["", "## Uncalibrated families", ""]
        lines += [
            f"- {u['family']} / {u['engine']} / {u['backend']} / {u['phase']}: {u['reason']}"
            for u in doc["uncalibrated"]
        ]
    if cal.memory_notes:
        lines += ["", "## Memory terms", ""] + [f"- {n}" for n in cal.memory_notes]
        lines += _band_lines(cal.memory_bands)
    lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    if cal.rejected:
        lines += ["", "## Records left out", ""] + [f"- `{r}`" for r in cal.rejected]
    if cal.latency_rejected:
        lines += ["", "## End-to-end latency records not predicted", ""]
        lines += [f"- `{r}`" for r in cal.latency_rejected]
    return "\n".join(lines) + "\n"


def write_report(cal: Calibration, out: str | Path, doc: dict | None = None) -> Path:
    """Write calibration.md and the PNG plots into ``out``; returns the Markdown path.  ``doc``: the
    coefficients document of ``cal`` when the caller has it already."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = doc or coefficients_document(cal)
    df = _held_frame(cal)
    plots = _plots(df, out) if not df.empty else []
    path = out / "calibration.md"
    evidence: list[dict] = []
    if (doc.get("model") or {}).get("maturity"):  # the records of less mature backends no fit saw
        evidence = maturity.evidence(cal.dataset.records + cal.dataset.set_aside,
                                     latency.table_for(doc["model"]), cal.dataset.qualities)  # fmt: skip
    atomic_write_text(path, render_markdown(cal, doc, df, plots, evidence))
    return path
