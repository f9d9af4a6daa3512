"""End-to-end latency of published runs, predicted by the estimator: llama-bench ``-pg`` (prompt + generate of
one sequence) and vLLM offline batches (B requests submitted at once, ``LLM.generate``).

Both are a prefill followed by n_gen decode steps, so the estimator's own functions predict them::

    t_e2e = prefill_s(B x n_prompt tokens at depth 0, n_batch / n_ubatch of the run)
            + n_gen x mean decode step of B sequences over depths n_prompt .. n_prompt + n_gen - 1

where a run of ``-b 1`` prefills one token per pass: its prefill is n_prompt decode steps over depths
0 .. n_prompt - 1 (``estimator.physics.speed``, "one token per pass").

with the coefficients of a cross-validation fold turned into a schema-2 model section
(``pipeline.model_section``) and looked up exactly as the estimator looks up results/coefficients.json
(``estimator.physics.speed.merged_params``).  The error says how well the speed model predicts a
measurement of another kind.  One kind is also fitted: a ``-b 1`` run of one device is decode steps only, and
is the decode evidence of a device without a tg record (calibration.features.one_token_run_point; the Intel
Max 1550 with llama.cpp SYCL).  Such points are ``fitted``: the *full* scheme predicts them in sample, the
cross-validation folds out of sample; ``summary`` reports the rows that are not fitted on their own.
vLLM serving at a concurrency with arrival rates is not an offline batch and is left to the serving model.
vLLM rows are predicted with the decode / prefill fit's sets, not with the serving step that times vLLM's
single stream in reports (estimator.physics.stream): every vLLM e2e row is a build before 0.8.0 (V0), whose
scheduler the serving step does not describe.  Tried: their offline batches through the serving model's batch
mode with the shipped fit moved the median 50.3 % -> 53.3 % (GH200 29 % -> 20 %, MI300X one GPU 50 % -> 66 %).

Which records: ``e2e_latency_s`` of ``llama.cpp`` rows built by ``llama-bench -pg`` and ``vllm`` rows of an
offline batch-latency benchmark (``build_info``); the throughput rows of the same tests (total_tok_s) are
the same measurement and are not counted twice.  llama-bench's ``-b`` (n_batch, which caps n_ubatch) is the
published ``batch_raw`` ``n_batch N`` where the record has no n_batch.  A run that asked an engine which
stops a sequence at the model's context for more tokens than that context is not predicted
(``calibration.features.check_context``): it generated fewer tokens than it states.

Each run is predicted as it was built, as the speed cross-validation predicts its points: a llama.cpp run
whose source dates its build to 2024 (``calibration.dataset.record_era``) takes the fit's ``build`` terms
(``as_built``: its decode steps x ``decode.build_scale``, its prompt GEMMs at ``prefill.flops_eff`` with the
``build=2024`` coefficient and at ``bw_eff / build_scale``, calibration.features.phase_seconds), where a
report predicts a current build.  ``summary`` gives the full fit's figure both ways (``full`` as built,
``full_current`` as a current build: what a report would have said of the same run).

A run of a build older than its engine profile describes (a 2024 llama.cpp, vLLM before V1) also takes the
as-built terms of its (engine, backend, build) stratum (calibration.asbuilt: a time scale, grouped-KV
attention, a compute floor, multi-device terms), fitted on that stratum's runs by ``predict_schemes``: all of
them for ``full``, those outside the held-out group under each scheme; ``full_no_terms`` keeps the speed model
alone.  The estimator never applies them.

Error per record: ape = |t_pred / t_meas - 1| of the latency (the ratio of times, as for speeds).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from calibration import asbuilt
from calibration.dataset import Dataset, Rejection, is_e2e, record_build, record_era
from calibration.features import Resolver, as_built_prefill, e2e_specs, point_family
from calibration.validate import ape_stats


@dataclass(frozen=True)
class LatencyPoint:
    """One end-to-end latency record with what the estimator needs to predict it."""

    model: object
    quant: object
    hardware: object
    workload: object  # estimator.specs.Workload: n_seq = B, n_prompt, n_gen, n_batch, n_ubatch, n_devices
    measured_s: float
    device: str
    family: str
    engine: str
    backend: str
    model_id: str
    batch: int
    where: str
    prefill: object = None  # speed.PrefillFeatures (built once)
    decode: object = None  # list of speed.DecodeFeatures of the n_gen steps
    build: str = ""  # the engine build (calibration.dataset.record_build; "" when nobody states it)
    fitted: bool = False  # also a decode point of the speed fit (calibration.features.one_token_run_point)
    era: str = ""  # calibration.dataset.record_era: "2024" for a llama.cpp build its source dates to 2024

    @property
    def stratum(self) -> str:
        """calibration.asbuilt.stratum of the run ("" for a build its engine profile describes)."""
        return asbuilt.stratum(self.engine, self.backend, self.build, self.era)


@dataclass(frozen=True)
class LatencyResult:
    point: LatencyPoint
    predicted_s: float
    scheme: str
    basis: str  # the decode set's basis (device | family | pooled)
    terms: dict | None = None  # the as-built terms of the run's stratum it used (calibration.asbuilt)

    @property
    def ape(self) -> float:
        return abs(self.predicted_s / self.point.measured_s - 1.0)


def latency_points(
    ds: Dataset, resolver: Resolver | None = None
) -> tuple[list[LatencyPoint], list[Rejection]]:
    """The end-to-end latency records of the dataset (module doc) with their features, and the records
    whose features failed."""
    from estimator.physics import speed
    from estimator.specs import SpecError

    resolver = resolver or Resolver()
    out, rejected = [], []
    for lr in ds.serving_records:
        r = lr.record
        if not is_e2e(r):
            continue
        try:
            model, quant, hw, wl = e2e_specs(resolver, r)
            b = wl.n_seq
            pre = as_built_prefill(speed.prefill_features(model, quant, wl), model, quant, hw, r.engine,
                                   record_era(r))
            dec = speed.tg_features(model, quant, wl, int(r.n_prompt), max(int(r.n_gen), 1))
            out.append(
                LatencyPoint(
                    model, quant, hw, wl, float(r.e2e_latency_s), _device(r), point_family(r, hw), r.engine,
                    r.backend, r.model_id, b, lr.where, pre, dec, record_build(r), era=record_era(r),
                )
            )  # fmt: skip
        except (SpecError, KeyError, ValueError, ZeroDivisionError) as exc:
            rejected.append(Rejection(lr.file, lr.line, r.record_id, f"e2e features: {exc}"))
    return out, rejected


def _device(r) -> str:
    from calibration.dataset import device_key

    return device_key(r)


def predict_s(lp: LatencyPoint, table, as_built: bool = True) -> tuple[float, str]:
    """(seconds, basis) of one latency point with a coefficient table (the estimator's lookup); ``as_built``:
    with the build terms of the point's era (module doc), else as a current build (what a report says).
    Without the as-built terms of calibration.asbuilt (``predict_schemes`` adds those)."""
    comp, basis = run_components(lp, table, as_built)
    return comp.t_model_s, basis


def run_components(lp: LatencyPoint, table, as_built: bool = True) -> tuple[asbuilt.RunComponents, str]:
    """(what calibration.asbuilt's terms act on, basis) of one latency point with a coefficient table:
    the modelled seconds (``predict_s``), the run's FLOPs, the GEMM rate the speed model gives it (datasheet
    peak x flops_eff x tensor-parallel devices), its grouped-KV attention layer-tokens and, over more than
    one device, its layer-passes (calibration.asbuilt module doc)."""
    from estimator.physics import speed

    dec, _pre, dparams, pparams = speed.merged_params(table, lp.hardware, lp.engine, lp.backend or None)
    step = 1.0
    if as_built and lp.era:
        dparams, pparams, step = era_params(table.model, lp.era, dparams, pparams)
    f = lp.prefill
    t_pre = speed.prompt_s(f, lp.hardware, pparams, dparams)  # decode steps for -b 1
    if f.decode_steps:
        t_pre *= step
    n_gen = lp.workload.n_gen
    t_dec = speed.decode_step_s(lp.decode, lp.hardware, dparams) * n_gen * step
    steps = list(f.decode_steps)
    flops = sum(s.flops for s in steps) / len(steps) * f.tokens if steps else f.flops + f.attn_flops
    flops += sum(s.flops for s in lp.decode) / len(lp.decode) * n_gen
    tp = f.n_devices if f.split == "tp" else 1
    device = speed.device_rates(lp.hardware, lp.engine, f.fp8, f.backend)
    peak = speed.gemm_peak_s(device.peak_flops_s, pparams)
    rate = math.nan if peak is None else peak * pparams.get("flops_eff", 1.0) * tp
    m, p = lp.model, int(lp.workload.n_prompt)
    depths = n_gen * (p + (n_gen - 1) / 2) + (p * (p - 1) / 2 if steps else 0.0)  # cached tokens, summed
    gqa = lp.batch * m.n_layers * depths / tp if m.n_kv_heads < m.n_heads else 0.0
    passes = n_gen + (f.tokens if steps else f.n_passes)
    multi = f.n_devices > 1
    comp = asbuilt.RunComponents(t_model_s=t_pre + t_dec, flops=float(flops), gemm_flops_s=float(rate),
                                 gqa_layer_tokens=float(gqa),
                                 multi_layer_passes=float(m.n_layers * passes) if multi else 0.0,
                                 multi=multi)  # fmt: skip
    return comp, dec.basis or dec.source


def era_params(model: dict | None, era: str, dparams: dict, pparams: dict) -> tuple[dict, dict, float]:
    """(decode params, prefill params, step factor) of a build of ``era`` from a current build's: every
    fitted parameter with the ``build`` covariate group moves by its ``build=<era>`` coefficient in its
    transformed space (calibration.hierarchy.build_covariates), decode borrows the moved prefill
    ``flops_eff``, prefill streams its weights at ``bw_eff / build_scale``, and the step factor is
    ``decode.build_scale`` (1 for a current build) - the terms calibration.features.phase_seconds applies to
    the era's points in the fit."""
    from calibration.features import older_build_bw_eff
    from calibration.hierarchy import build_covariates
    from estimator.physics.coefficients import from_eta, param, to_eta
    from estimator.physics.speed import BORROW_FROM_PREFILL

    dp, pp = dict(dparams), dict(pparams)
    x = build_covariates(era, ("build",))
    for entry in (model or {}).get("params", []):
        phase, name = entry["key"].split(".", 1)
        p = param(phase, name)
        target = dp if phase == "decode" else pp if phase == "prefill" else None
        if target is None or "build" not in p.covariates or name not in target:
            continue
        delta = sum(float(entry.get("beta", {}).get(c, 0.0)) * v for c, v in x.items())
        target[name] = float(from_eta(p, to_eta(p, target[name]) + delta))
    dp.update({k: pp[k] for k in BORROW_FROM_PREFILL if k in pp})
    step = float(dp.get("build_scale", 1.0))
    if "bw_eff" in pp:
        pp["bw_eff"] = older_build_bw_eff(pp["bw_eff"], step)
    return dp, pp, step


def table_for(model_section: dict):
    """A CoefficientTable holding one schema-2 model section (and the shipped prior)."""
    from estimator.physics.coefficients import CoefficientTable, load_prior

    prior = load_prior()
    return CoefficientTable(groups=(), pooled=(), prior=tuple(prior["pooled"]), memory={}, path="<fold>",
                            model=model_section)  # fmt: skip


def predict_schemes(points: list[LatencyPoint], sf) -> dict[str, list[LatencyResult]]:
    """Predictions of every latency point under the full fit and under each cross-validation scheme (the
    fold that holds out the point's device / model / family; the full fit when no fold does, i.e. nothing
    of that group was fitted), as built:

    * "full": the shipped coefficients with the as-built terms of the run's stratum fitted on all of the
      stratum's runs (calibration.asbuilt: in sample for the runs of older builds);
    * "full_no_terms": the same without as-built terms (the speed model and its era terms alone);
    * "full_current": the shipped coefficients, every run as a current build (what a report would say);
    * each scheme: the fold's coefficients with as-built terms fitted on the stratum's runs outside the
      fold (the held-out device / model / family never enters them).  Those terms are fitted on the full
      fit's components of the other runs (one component pass, not one per fold): the full speed fit saw the
      held-out group's speed points, which moves the other runs' modelled seconds by little."""
    from calibration.pipeline import model_section

    full = table_for(model_section(sf.state, sf.points))
    comps = [run_components(lp, full) for lp in points]  # (components, basis)
    strata = [lp.stratum for lp in points]
    keys = {"lodo": lambda lp: lp.device, "lomo": lambda lp: lp.model_id, "lofo": lambda lp: lp.family}
    assert set(keys) >= set(sf.states), "a scheme whose fold fits are kept needs its latency fold key"
    folds: dict[tuple[str, str], dict[str, dict[str, float]]] = {("", ""): fit_strata(points, comps)}

    def terms_for(stratum: str, scheme: str = "", fold: str = "") -> dict[str, float] | None:
        if not stratum:
            return None
        if (scheme, fold) not in folds:
            folds[scheme, fold] = fit_strata(points, comps, lambda lp: keys[scheme](lp) != fold)
        return folds[scheme, fold].get(stratum)

    out: dict[str, list[LatencyResult]] = defaultdict(list)
    for lp, (comp, basis), st in zip(points, comps, strata, strict=True):
        terms = terms_for(st)
        out["full"].append(LatencyResult(lp, asbuilt.apply_terms(terms, comp), "full", basis, terms))
        out["full_no_terms"].append(LatencyResult(lp, comp.t_model_s, "full_no_terms", basis))
        t, basis_c = predict_s(lp, full, as_built=False)
        out["full_current"].append(LatencyResult(lp, t, "full_current", basis_c))
    for scheme, states in sf.states.items():
        tables: dict[str, object] = {}
        for lp, st in zip(points, strata, strict=True):
            fold = keys[scheme](lp)
            state = states.get(fold)
            if state is None:
                table = full
            else:
                if fold not in tables:
                    tables[fold] = table_for(model_section(state, state.train))
                table = tables[fold]
            comp, basis = run_components(lp, table)
            terms = terms_for(st, scheme, fold)
            out[scheme].append(LatencyResult(lp, asbuilt.apply_terms(terms, comp), scheme, basis, terms))
    return dict(out)


def fit_strata(points: list[LatencyPoint], comps: list[tuple], keep=None) -> dict[str, dict[str, float]]:
    """The as-built terms of each stratum (calibration.asbuilt) from the runs ``keep`` accepts (all when
    None); ``comps``: ``run_components`` of each point, in order."""
    runs: dict[str, list[int]] = defaultdict(list)
    for i, lp in enumerate(points):
        if lp.stratum and (keep is None or keep(lp)):
            runs[lp.stratum].append(i)
    return {st: asbuilt.fit_terms([comps[i][0] for i in idx], [points[i].measured_s for i in idx])
            for st, idx in runs.items()}  # fmt: skip


def summary(held: dict[str, list[LatencyResult]]) -> dict:
    """Per scheme: n, median and p90 APE of the latency, overall, of the rows not fitted (``not_fitted``) and
    per engine; for the full fit also per
    (engine, device, device count, basis, build) with the median ln(predicted / measured) and whether the
    build is older than the one the engine profile describes (``EngineProfile.describes_build``: vLLM's V0
    engine; the estimator predicts the profile's engine, so such rows measure an older program) and the
    same without as-built terms; ``terms``: the full fit's as-built terms per stratum (calibration.asbuilt)
    with its runs and devices."""
    from estimator.engines import ENGINES, get_engine

    bare = {id(r.point): r for r in held.get("full_no_terms", [])}

    def median_lr(rs: list[LatencyResult]) -> float:
        return float(sorted(math.log(r.predicted_s / r.point.measured_s) for r in rs)[len(rs) // 2])

    out = {}
    for scheme, rs in held.items():
        med, p90 = ape_stats([r.ape for r in rs])
        entry = {"n": len(rs), "median_ape": _r(med), "p90_ape": _r(p90), "by_engine": {}}
        unfitted = [r.ape for r in rs if not r.point.fitted]
        m, q = ape_stats(unfitted)
        entry["not_fitted"] = {"n": len(unfitted), "median_ape": _r(m), "p90_ape": _r(q)}
        for eng in sorted({r.point.engine for r in rs}):
            m, q = ape_stats([r.ape for r in rs if r.point.engine == eng])
            entry["by_engine"][eng] = {"n": sum(r.point.engine == eng for r in rs), "median_ape": _r(m),
                                       "p90_ape": _r(q)}  # fmt: skip
        if scheme == "full":
            groups: dict[tuple, list[LatencyResult]] = defaultdict(list)
            for r in rs:
                key = (r.point.engine, r.point.device, r.point.workload.n_devices, r.basis, r.point.build)
                groups[key].append(r)
            entry["by_device"] = [
                {"engine": k[0], "device": k[1], "n_devices": k[2], "basis": k[3], "build": k[4],
                 "older_than_profile": k[0] in ENGINES and not get_engine(k[0]).describes_build(k[4]),
                 "n": len(g), "n_fitted": sum(r.point.fitted for r in g),
                 "median_ape": _r(ape_stats([r.ape for r in g])[0]),
                 "median_log_ratio": _r(median_lr(g)),
                 "median_log_ratio_no_terms": (_r(median_lr([bare[id(r.point)] for r in g]))
                                               if all(id(r.point) in bare for r in g) else None)}
                for k, g in sorted(groups.items())
            ]  # fmt: skip
            strata: dict[str, list[LatencyResult]] = defaultdict(list)
            for r in rs:
                if r.terms is not None:
                    strata[r.point.stratum].append(r)
            entry["terms"] = {
                st: {"n": len(g), "devices": sorted({r.point.device for r in g}),
                     **{k: _r(v) for k, v in g[0].terms.items()}, "reads": asbuilt.describe(g[0].terms)}
                for st, g in sorted(strata.items())
            }  # fmt: skip
        out[scheme] = entry
    return out


def _r(x):
    return None if x is None or not math.isfinite(x) else float(f"{x:.4g}")
