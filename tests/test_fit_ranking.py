"""``fit`` ranks like a user chooses (issue 13: 7): largest model in its best format that meets --min-tok-s
and --min-headroom-gib, --top, filters, MoE expert offload when nothing else fits, models whose maximum
context is below --ctx left out."""

from __future__ import annotations

import json

from estimator.catalog.data import get_model
from estimator.report.document import report_to_dict
from estimator.report.fit import FIT_QUANTS
from estimator.report.request import ReportRequest, make_report
from tests.estimator_cli import run


def fit(*args) -> tuple[list[dict], str]:
    p = run("fit", *args, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def test_what_runs_on_my_64_gb_m3_max():
    rows, notes = fit("--hardware", "m3 max", "--memory-gib", "64", "--top", "5", "--min-tok-s", "5")
    assert len(rows) == 5 and "showing the top 5" in notes
    assert all(r["meets"] and r["decode_tok_s"] >= 5 for r in rows)
    sizes = [r["params_total_b"] for r in rows]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 60  # a 70B-class model leads, not a 0.1B one


def test_the_pick_is_the_best_format_that_meets_the_speed():
    rows, _ = fit(
        "--hardware", "rtx-3090", "--devices", "2", "--min-tok-s", "15", "--model-family", "llama-3.1"
    )
    by = {r["model"]: r for r in rows}
    pick = by["llama-3.1-70b"]
    assert pick["meets"] and pick["decode_tok_s"] >= 15
    better = [q for q in FIT_QUANTS[: FIT_QUANTS.index(pick["best_quant"])] if q != "FP8"]  # not llama.cpp's
    for q in better:  # every better format either does not fit or is slower than asked
        d = report_to_dict(
            make_report(ReportRequest(model="llama-3.1-70b", hardware="rtx-3090", devices=2, quant=q))
        )
        assert d["memory"]["verdict"] != "fits" or d["speed"]["decode"]["tok_s"] < 15


def test_headroom_criterion():
    rows, _ = fit("--hardware", "rtx-4090", "--min-headroom-gib", "4", "--dense")
    assert all(r["headroom_gib"] >= 4 for r in rows if r["meets"])
    assert all("headroom" in r["misses"] for r in rows if r["verdict"] == "fits" and not r["meets"])


def test_filters():
    rows, notes = fit("--hardware", "h100 pcie", "--model-family", "qwen")
    assert rows and all("qwen" in (r["model"] + get_model(r["model"]).architecture) for r in rows)
    assert "filtered out" in notes
    assert all(
        "apache" in (r["license"] or "").lower()
        for r in fit("--hardware", "rtx-4090", "--license", "apache")[0]
    )
    assert all(r["moe"] for r in fit("--hardware", "rtx-4090", "--moe")[0])
    assert not any(r["moe"] for r in fit("--hardware", "rtx-4090", "--dense")[0])


def test_moe_expert_offload_when_nothing_else_fits():
    rows, _ = fit("--hardware", "rtx-4090", "--moe", "--ctx", "16384")
    r = next(x for x in rows if x["model"] == "qwen3-235b-a22b")
    assert r["verdict"] == "fits with offload" and r["n_cpu_moe"] and r["host_gib"] > 50
    k, q = r["n_cpu_moe"], r["best_quant"]
    base = dict(model="qwen3-235b-a22b", hardware="rtx-4090", ctx=16384, quant=q)
    assert (
        report_to_dict(make_report(ReportRequest(**base, n_cpu_moe=k)))["memory"]["verdict"] != "does not fit"
    )
    assert (
        report_to_dict(make_report(ReportRequest(**base, n_cpu_moe=k - 1)))["memory"]["verdict"]
        == "does not fit"
    )
    # rows that fit without offload and meet the criteria come first
    first_offload = next(i for i, x in enumerate(rows) if x["n_cpu_moe"])
    assert all(x["verdict"] == "fits" for x in rows[:first_offload])


def test_context_below_the_asked_is_left_out_and_the_default_is_clamped():
    rows, notes = fit("--hardware", "rtx-4090", "--ctx", "32768")
    ids = {r["model"] for r in rows}
    assert "llama-2-7b" not in ids and "mixtral-8x7b" in ids
    assert "left out" in notes and "llama-2-7b" in notes
    rows, _ = fit("--hardware", "rtx-4090")  # default 8,192: a 4K model is sized at its 4,096
    assert "llama-2-7b" in {r["model"] for r in rows}
