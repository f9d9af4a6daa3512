#!/usr/bin/env python3
"""How well each single-stream path predicts the serving records of low concurrency (docs/speed-model.md,
"One stream of a serving engine"): the serving step (estimator.physics.stream, what reports use for vLLM /
SGLang on a GPU) against the decode / prefill fit's sets (``speed.speed_sets``, what they used before).

For every serving point of the results (calibration.serving.serving_points) in serve mode at concurrency 1,
4 or 8 with a coefficients file's sets:

* TPOT: the serving model's TPOT (concurrency C, prompt chunks included) against one decode step of C
  sequences at depth isl + osl / 2 with the decode fit's sets;
* TTFT (concurrency 1 and 4): the serving model's TTFT against the decode fit's prefill of isl tokens.

Both are in-sample for the serving fit when the coefficients are the shipped ones (it saw these points).
Prints a Markdown table (for the docs): the median absolute percentage error per (metric, engine, device)
and the median ln(predicted / measured) of the decode fit.  Usage (from the repository root)::

    python tools/stream_check.py [--results results] [--coefficients results/coefficients.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    from calibration.dataset import load_dataset
    from calibration.features import Resolver, workload_for
    from calibration.serving import _kv_dtype, serving_points
    from estimator.physics import serving as sv
    from estimator.physics import speed
    from estimator.physics.coefficients import load_coefficients

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--coefficients", default=None)
    args = ap.parse_args(argv)

    ds = load_dataset(args.results)
    points, _ = serving_points(ds)
    table = load_coefficients(args.coefficients)
    resolver = Resolver()
    records = {lr.record.record_id: lr.record for lr in ds.serving_records}
    rows: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for p in points:
        e = p.extra
        conc = e["concurrency"]
        if e["mode"] != sv.SERVE or conc not in (1, 4, 8) or (e["metric"] == "ttft" and conc == 8):
            continue
        r = dataclasses.replace(records[p.record_id], engine=p.engine)
        r = dataclasses.replace(r, kv_dtype=_kv_dtype(r))
        model, quant, hw = resolver.spec_for(r)
        sp = sv.serving_params(table, hw, p.engine)
        serving_s = sv.metric_s(p.features, sp.params, e["metric"])
        if e["metric"] == "tpot":
            wl = dataclasses.replace(workload_for(r), split="tp", n_seq=conc)
            sets = speed.speed_sets(table, model, quant, hw, wl)
            feats = speed.decode_features(model, quant, wl, r.n_prompt + r.n_gen / 2)
            fit_s = speed.decode_estimate(feats, hw, sets, conc).time_s
        else:
            wl = dataclasses.replace(workload_for(r), split="tp", n_seq=1, n_prompt=r.n_prompt, n_depth=0)
            sets = speed.speed_sets(table, model, quant, hw, wl)
            fit_s = speed.pp_path_estimate(model, quant, hw, wl, sets).time_s
        key = (e["metric"], p.engine, p.device)
        rows[key].append((math.log(float(serving_s) / p.measured_s), math.log(fit_s / p.measured_s)))

    print("| metric | engine | device | n | serving step | decode / prefill fit | fit: ln(pred/meas) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (metric, engine, device), v in sorted(rows.items()):
        step = statistics.median(abs(math.exp(a) - 1) for a, _ in v)
        fit = statistics.median(abs(math.exp(b) - 1) for _, b in v)
        bias = statistics.median(b for _, b in v)
        print(f"| {metric} | {engine} | {device} | {len(v)} | {step:.1%} | {fit:.1%} | {bias:+.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
