"""The CI gate: held-out error of the estimator on every stored ``ok`` record, interval coverage, and
coefficients freshness.

Speed (calibration.validate; every fold refits the whole model, its scales included):
  * the gate scheme: each decode/prefill point predicted with coefficients fitted WITHOUT its device
    (leave-one-device-out); a family with a single device falls back to leave-one-model-out;
  * leave-one-family-out: each point predicted without any point of its family (what an unmeasured family
    gets);
  * coverage of the nominal 90 % intervals out of sample, under leave-one-device-out and leave-one-family-out.
Serving (calibration.serving, the same model structure and schemes): every TTFT / TPOT point of a vLLM /
SGLang serving benchmark held out by the gate scheme; the overall medians of both are gated, the other
schemes and the coverage of the serving intervals are reported.
Memory: weights+KV (exact physics, no fitted terms) and total device memory (fitted runtime terms, held out
by device; only records whose total means what the estimator predicts, see calibration.memory_fit), one
sample per distinct measurement.
Fails (exit 1) when an overall median absolute percentage error exceeds THRESHOLDS, when a coverage leaves
COVERAGE_BAND, or when results/coefficients.json is missing or stale (its input_hash differs from the hash
of the records now in results/).  Thresholds may be tightened as the fit improves, never loosened.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from calibration.dataset import DEFAULT_QUALITIES, load_dataset
from calibration.validate import ape_stats

# Overall median absolute percentage error allowed, as fractions ("decode" / "prefill": the gate scheme;
# "... lofo": leave-one-family-out).  tpot / ttft: the serving model's held-out error by the gate scheme
# (calibration.serving), set from its first cross-validation (issue 9; gate medians 18.7 % / 33.8 % then,
# 20 % / 35 %), tightened with the Qwen3-32B BF16 rows and serving.moe_route_s (17.6 % / 33.3 %), and again
# when each measurement came to count once (calibration.dataset.Republished: 17.6 % / 27.4 %), to 17 % / 28 %
# with a prompt's remainder chunk, the engine-free KV rate and the all-reduce's link efficiency (16.1 % /
# 26.5 %), and TPOT to 15 % with the engine-free per-request and all-reduce terms and the engine-wide MoE
# terms (13.4 % / 26.9 %), TPOT to 14 % with the decode attention's own efficiency (12.9 % / 26.9 %); the
# issue's targets are 12 % / 25 % (held out by device: 11.6 % / 24.1 % now).
THRESHOLDS: dict[str, float] = {
    "decode": 0.10,
    "prefill": 0.15,
    "decode lofo": 0.15,
    "prefill lofo": 0.25,
    "weights+kv": 0.01,
    "total": 0.05,
    "tpot": 0.14,
    "ttft": 0.28,
}
# Out-of-sample coverage of the nominal 90 % speed intervals must lie in this band under these schemes.
COVERAGE_BAND = (0.85, 0.95)
COVERAGE_SCHEMES = ("lodo", "lofo")
# leave-one-family-out is gated when the records hold at least this many families (with fewer, a held-out
# family is predicted from one or two others or from the prior alone, which measures nothing)
MIN_FAMILIES_FOR_LOFO = 3


@dataclass(frozen=True)
class GateRow:
    family: str
    engine: str
    backend: str
    metric: str
    n: int
    median_ape: float | None
    p90_ape: float | None
    scheme: str


@dataclass
class CheckResult:
    rows: list[GateRow] = field(default_factory=list)
    overall: dict[str, tuple[int, float | None, float | None]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # (phase, scheme, n, median, p90, coverage per held-out group, coverage per point)
    schemes: list[tuple] = field(default_factory=list)
    e2e: dict = field(default_factory=dict)
    n_records: int = 0
    n_rejected: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures


def read_coefficients_header(path: Path) -> dict | None:
    """The stored coefficients document, or None when the file does not exist."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable coefficients file ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a coefficients document (a JSON object expected)")
    from estimator.physics.coefficients import SCHEMA_VERSION

    if doc.get("schema_version") != SCHEMA_VERSION:  # an older file cannot be stale-checked: refit
        raise ValueError(
            f"{path}: coefficients schema_version {doc.get('schema_version')!r}; this fitbench reads "
            f"{SCHEMA_VERSION} (re-run `make calibrate`)"
        )
    qf = doc.get("quality_filter", [])
    if not isinstance(qf, list) or not all(isinstance(q, str) for q in qf):
        raise ValueError(f"{path}: quality_filter must be a list of quality flags")
    return doc


def staleness(ds_hash: str, doc: dict | None, path: Path, n_records: int) -> str | None:
    """A failure message when coefficients.json is missing or stale, else None."""
    if doc is None:
        return f"{path} is missing: run `make calibrate`" if n_records else None
    if doc.get("input_hash") != ds_hash:
        return (
            f"{path} is stale: its input_hash {doc.get('input_hash')} != {ds_hash} of the records in "
            "results/ (run `make calibrate` and commit the result)"
        )
    return None


def run_check(
    results: str | Path, coefficients: str | Path | None = None, resolver=None, cal=None
) -> CheckResult:
    """The gate of the records under ``results``.  ``cal``: their calibration with cross-validation when the
    caller has it already (``python -m calibration fit`` ends with this gate), so it is not run twice."""
    from calibration import memory_fit, pipeline, serving

    results = Path(results)
    path = Path(coefficients) if coefficients else results / "coefficients.json"
    doc = read_coefficients_header(path)
    qualities = tuple(doc.get("quality_filter", DEFAULT_QUALITIES)) if doc else DEFAULT_QUALITIES
    ds = load_dataset(results, qualities)
    out = CheckResult(n_records=len(ds.records))
    if qualities != DEFAULT_QUALITIES:
        out.notes.append(f"quality flags used by the stored fit: {', '.join(qualities)}")
    stale = staleness(ds.input_hash, doc, path, len(ds.records))
    if stale:
        out.failures.append(stale)
    cal = cal if cal is not None else pipeline.calibrate(ds, resolver, cv=True, memory=False)
    out.n_rejected = len(cal.rejected)
    samples: dict[tuple, list[float]] = defaultdict(list)
    schemes: dict[tuple, set[str]] = defaultdict(set)
    overall: dict[str, list[float]] = defaultdict(list)
    sf = cal.speed
    if sf is not None:
        for h in sf.gate():
            p = h.point
            key = (p.family, p.engine, p.backend, p.phase)
            samples[key].append(h.ape)
            schemes[key].add(h.scheme if h.basis != "pooled" else f"{h.scheme} -> pooled")
            overall[p.phase].append(h.ape)
        n_fam = len({p.family for p in sf.points})
        if n_fam >= MIN_FAMILIES_FOR_LOFO:
            for h in sf.held.get("lofo", []):
                overall[f"{h.point.phase} lofo"].append(h.ape)
        elif sf.held.get("lofo"):
            out.notes.append(f"leave-one-family-out not gated: {n_fam} famil(ies) < {MIN_FAMILIES_FOR_LOFO}")
        rows = scheme_rows(sf)
        out.schemes += rows
        for phase, s_name, _n, _med, _p90, cov, _cov_pts in rows:
            if s_name in COVERAGE_SCHEMES and cov is not None and not (
                COVERAGE_BAND[0] <= cov <= COVERAGE_BAND[1]
            ):
                out.failures.append(
                    f"{phase}: {s_name} coverage of the nominal 90 % interval {cov:.1%} (mean over "
                    f"held-out groups) is outside {COVERAGE_BAND[0]:.0%}-{COVERAGE_BAND[1]:.0%}"
                )
        if cal.latency_held:
            from calibration import latency

            out.e2e = latency.summary(cal.latency_held)
    srv = cal.serving
    if srv is not None:  # serving: TPOT and TTFT gated by the gate scheme; coverage reported, not gated
        for key, ape, scheme in serving.gate_samples(srv.gate()):
            samples[key].append(ape)
            schemes[key].add(scheme)
            if key[3] in serving.GATED_METRICS:
                overall[key[3]].append(ape)
        out.schemes += scheme_rows(srv)
    if cal.serving_rejected:
        out.notes.append(
            f"serving: {len(cal.serving_rejected)} record(s) with TTFT / TPOT left out (engines not fitted, "
            "disaggregated, unstated precision, > 8 devices, ...); the calibration report counts them by "
            "reason"
        )
    mem_rows, mem_notes = memory_fit.memory_gate(ds, resolver)
    out.notes += mem_notes
    for m in mem_rows:
        key = (m.family, m.engine, m.backend, m.metric)
        samples[key].append(m.ape)
        schemes[key].add(m.scheme)
        overall[m.metric].append(m.ape)
    for key in sorted(samples):
        med, p90 = ape_stats(samples[key])
        out.rows.append(GateRow(*key, len(samples[key]), med, p90, ", ".join(sorted(schemes[key]))))
    for metric, limit in THRESHOLDS.items():
        med, p90 = ape_stats(overall.get(metric, []))
        out.overall[metric] = (len(overall.get(metric, [])), med, p90)
        if med is not None and med > limit:
            out.failures.append(
                f"{metric}: overall held-out median error {med:.1%} exceeds the {limit:.0%} gate"
            )
    if cal.rejected:
        out.notes.append(
            f"{len(cal.rejected)} record(s) left out (missing/impossible values or no features); "
            "`python -m calibration report` lists them with file:line"
        )
    return out


def scheme_rows(sf) -> list[tuple]:
    """(stratum, scheme, n, median, p90, coverage per held-out group, coverage per point) of a fit
    (calibration.pipeline.SpeedFit), every stratum (decode, prefill; serving.ttft, serving.tpot) and scheme
    with held-out points."""
    from calibration import pipeline

    cover = pipeline.coverage_block(sf)
    rows = []
    for phase in sf.strata:
        for s_name in (*pipeline.SCHEMES, "gate"):
            hs = sf.gate() if s_name == "gate" else sf.held.get(s_name, [])
            apes = [h.ape for h in hs if h.point.stratum == phase]
            if not apes:
                continue
            med, p90 = ape_stats(apes)
            c = cover[phase].get(s_name)
            rows.append((phase, s_name, len(apes), med, p90, c["groups"] if c else None,
                         c["points"] if c else None))  # fmt: skip
    return rows


def render(result: CheckResult, console=None) -> None:
    """Print the per family x phase x metric table and the overall verdict with rich."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="Held-out absolute percentage error (speed: tokens/s; serving: seconds; memory: bytes)")
    for col in ("family", "engine", "backend", "metric", "n", "median", "p90", "held out by"):
        t.add_column(col, justify="right" if col in ("n", "median", "p90") else "left")

    def pct(x):
        return "-" if x is None else f"{x:.1%}"

    for r in result.rows:
        t.add_row(
            r.family, r.engine, r.backend, r.metric, str(r.n), pct(r.median_ape), pct(r.p90_ape), r.scheme
        )
    console.print(t)
    o = Table(title="Overall (gate: median must not exceed the threshold)")
    for col in ("metric", "n", "median", "p90", "threshold", "status"):
        o.add_column(col)
    for metric, limit in THRESHOLDS.items():
        n, med, p90 = result.overall.get(metric, (0, None, None))
        status = "no data" if med is None else ("ok" if med <= limit else "FAIL")
        o.add_row(metric, str(n), pct(med), pct(p90), f"{limit:.0%}", status)
    console.print(o)
    if result.schemes:
        title = (
            "Speed and serving per cross-validation scheme (coverage of the nominal 90 % interval, out of "
            "sample; serving coverage not gated)"
        )
        sc = Table(title=title)
        for col in ("phase", "scheme", "n", "median", "p90", "coverage (groups)", "coverage (points)"):
            sc.add_column(col)
        for phase, s_name, n, med, p90, cov, cov_pts in result.schemes:
            sc.add_row(phase, s_name, str(n), pct(med), pct(p90), pct(cov), pct(cov_pts))
        console.print(sc)
    if result.e2e:
        et = Table(
            title="End-to-end latency (llama-bench -pg, vLLM offline batches; predicted as built, with the "
            "as-built terms of an older build's stratum (calibration.asbuilt; in sample under full, without "
            "the held-out group under each scheme), full_no_terms: without them, full_current: as a current "
            "build; -b 1 runs of a device without a tg record are fitted as its decode steps)"
        )
        for col in ("scheme", "rows", "n", "median", "p90"):
            et.add_column(col)
        for s_name, entry in result.e2e.items():
            et.add_row(s_name, "all", str(entry["n"]), pct(entry["median_ape"]), pct(entry["p90_ape"]))
            nf = entry.get("not_fitted")
            if nf and nf["n"] != entry["n"]:
                et.add_row("", "not fitted", str(nf["n"]), pct(nf["median_ape"]), pct(nf["p90_ape"]))
            for eng, e in entry["by_engine"].items():
                et.add_row("", eng, str(e["n"]), pct(e["median_ape"]), pct(e["p90_ape"]))
        console.print(et)
    for n in result.notes:
        console.print(f"note: {n}")
    for f in result.failures:
        console.print(f"[bold red]FAIL[/]: {f}")
    if result.ok:
        console.print(f"[green]calibration check passed[/] ({result.n_records} records)")
