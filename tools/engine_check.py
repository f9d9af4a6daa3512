#!/usr/bin/env python3
"""How well the serving fit predicts the serving records of an engine it does not fit (docs/calibration.md,
"Serving at concurrency": TensorRT-LLM).

An engine whose profile has a scheduler (``EngineProfile.scheduler``) but whose records are not points of the
serving fit (``fits_serving`` False) is timed in reports by the serving model with the fit's terms for its
device and engine (``estimator.physics.serving.serving_params``: no engine term of its own, the pooled
covariates of its vendor).  Its records are therefore out of sample: this tool predicts every TTFT / TPOT
point of such an engine with a coefficients file, as a report would, and prints a Markdown table per
(metric, device): points, median absolute percentage error of the time, median ln(predicted / measured)
and the share of measured times inside the interval the report shows (the set's nominal 90 % interval).
Usage (from the repository root)::

    python tools/engine_check.py [--engine trtllm] [--results results] [--coefficients FILE]
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    from calibration import serving
    from calibration.dataset import load_dataset
    from estimator.catalog.data import get_hardware
    from estimator.engines import get_engine
    from estimator.physics import serving as sv
    from estimator.physics.coefficients import load_coefficients

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="trtllm")
    ap.add_argument("--results", default="results")
    ap.add_argument("--coefficients", default=None)
    args = ap.parse_args(argv)
    if get_engine(args.engine).fits_serving:
        ap.error(f"{args.engine}: its records are points of the serving fit (not out of sample)")

    points, _ = serving.serving_points(load_dataset(args.results), engines=(args.engine,))
    table = load_coefficients(args.coefficients)
    rows: dict[tuple[str, str], list[tuple[float, bool]]] = defaultdict(list)
    for p in points:
        metric = p.extra["metric"]
        sp = sv.serving_params(table, get_hardware(p.device), args.engine)
        predicted = sv.metric_s(p.features, sp.params, metric)
        lone = p.extra["mode"] == sv.SERVE and p.extra["concurrency"] <= sv.LONE_CONCURRENCY
        which = sv.ttft_metric(sp.cset, lone) if metric == "ttft" else metric
        lo, hi = sp.cset.metric_interval(which, predicted)
        row = (math.log(predicted / p.measured_s), lo <= p.measured_s <= hi)
        rows[(metric, p.device)].append(row)
        rows[(metric, "all")].append(row)
    print("| metric | device | n | median error | median ln(pred / meas) | inside the interval |")
    print("|---|---|---:|---:|---:|---:|")
    for (metric, device), vals in sorted(rows.items()):
        err = statistics.median(abs(math.exp(-lr) - 1.0) for lr, _ in vals)
        bias = statistics.median(lr for lr, _ in vals)
        inside = sum(ok for _, ok in vals) / len(vals)
        print(f"| {metric} | {device} | {len(vals)} | {err:.1%} | {bias:+.2f} | {inside:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
