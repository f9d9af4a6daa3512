"""The CI gate: held-out errors vs thresholds, stale/missing coefficients, CLI exit codes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

pytest.importorskip("estimator.physics.speed")

from calibration import check  # noqa: E402
from calibration.__main__ import main  # noqa: E402
from tests.calibration_gen import base_record, generate, write_records  # noqa: E402

DEVICES = {
    "rtx-3090": "nvidia-ampere",
    "a100-80gb-pcie": "nvidia-ampere",
    "rtx-a6000": "nvidia-ampere",
    "rtx-4090": "nvidia-ada",
    "l40s": "nvidia-ada",
}
DEC = {
    "nvidia-ampere": {"bw_eff": 0.62, "t_layer_s": 2e-5, "t_fixed_s": 4e-4},
    "nvidia-ada": {"bw_eff": 0.7, "t_layer_s": 1.5e-5, "t_fixed_s": 3e-4},
}
PRE = {
    "nvidia-ampere": {"flops_eff": 0.45, "attn_eff": 0.3, "t_layer_s": 6e-5},
    "nvidia-ada": {"flops_eff": 0.35, "attn_eff": 0.3, "t_layer_s": 5e-5},
}
QUANTS = ("Q4_0", "Q8_0")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_records(root / "runs" / "gen.jsonl", generate(DEVICES, DEC, PRE, noise=0.03, quants=QUANTS))
    assert main(["fit", "--results", str(root)]) == 0
    return root


def test_fit_writes_a_versioned_document(results):
    doc = json.loads((results / "coefficients.json").read_text())
    assert doc["schema_version"] == 2 and doc["input_hash"].startswith("sha256:")
    model = doc["model"]
    assert set(model["families"]) == {"nvidia-ampere", "nvidia-ada"}
    assert set(model["devices"]) == set(DEVICES)
    keys = {e["key"] for e in model["params"]}
    assert {"decode.bw_eff", "prefill.flops_eff", "prefill.attn_eff"} <= keys
    for phase in ("decode", "prefill"):
        assert {"lodo", "lomo", "lofo", "gate"} <= set(model["cv"][phase])
        for basis in ("device", "family", "pooled"):
            iv = model["intervals"][phase][basis]
            assert iv["log_lo"] <= 0 <= iv["log_hi"], (phase, basis, iv)
    fams = {(f["family"], f["phase"]) for f in doc["families"]}
    assert fams == {(f, p) for f in ("nvidia-ampere", "nvidia-ada") for p in ("decode", "prefill")}
    from estimator.catalog.resolve import resolve_hardware
    from estimator.physics.coefficients import load_coefficients

    table = load_coefficients(results / "coefficients.json")  # the estimator reads what we write
    cset = table.lookup(resolve_hardware("rtx-3090"), "llama.cpp", "decode")
    assert cset.calibrated and cset.basis == "device"
    assert cset.params["bw_eff"] == pytest.approx(0.62, abs=0.03)
    # a device of the family nobody measured, and a device of a family nobody measured
    assert table.lookup(resolve_hardware("a40"), "llama.cpp", "decode").basis == "family"
    pooled = table.lookup(resolve_hardware("h100-80gb-sxm"), "llama.cpp", "prefill")
    assert pooled.basis == "pooled" and not pooled.calibrated and "interval" in pooled.interval_note


def test_cv_splits_the_headline_by_origin(results):
    """Every scheme's held-out errors are also given per record origin, and the origins add up to the whole;
    the report renders them (imported published rows apart from fitbench's own runs)."""
    from calibration import report

    model = json.loads((results / "coefficients.json").read_text())["model"]
    cv = model["cv"]
    for phase in ("decode", "prefill"):
        for scheme in ("lodo", "lomo", "lofo", "gate"):
            by = cv[phase][scheme]["by_origin"]
            assert set(by) == {"imported"}  # tests.calibration_gen writes imported records
            assert by["imported"]["n"] == cv[phase][scheme]["n"]
            assert by["imported"]["median_ape"] == cv[phase][scheme]["median_ape"]
            # one origin: its coverage is the scheme's (the gate is a mix of schemes: none)
            assert by["imported"].get("coverage") == model["coverage"][phase].get(scheme)
    cov = {"groups": 0.9, "points": 0.85, "n_groups": 3, "n_points": 3}
    two = {"decode": {"lodo": {"by_origin": {"imported": {"n": 3, "median_ape": 0.08, "p90_ape": 0.2,
                                                          "coverage": cov},
                                             "measured": {"n": 2, "median_ape": 0.3, "p90_ape": 0.5}}}}}
    lines = report._origin_lines(two)
    assert "| decode | lodo | imported | 3 | 8.0% | 20.0% | 90.0% / 85.0% |" in lines
    assert "| decode | lodo | measured | 2 | 30.0% | 50.0% | - |" in lines
    assert report._origin_lines({"decode": {"lodo": {}}}) == []


def test_cv_splits_the_headline_by_source(results):
    """Every scheme's held-out errors per published source add up to the whole, with the source's devices and
    median log ratio; the report renders them with the sign of the offset."""
    from calibration import report

    cv = json.loads((results / "coefficients.json").read_text())["model"]["cv"]
    for phase in ("decode", "prefill"):
        for scheme in ("lodo", "lomo", "lofo"):
            by = cv[phase][scheme]["by_source"]
            assert set(by) == {"generated"}  # the generated records' source (no source group)
            assert by["generated"]["n"] == cv[phase][scheme]["n"]
            assert by["generated"]["devices"] == len(DEVICES)
            assert isinstance(by["generated"]["median_log_ratio"], float)
        assert abs(cv[phase]["lodo"]["by_source"]["generated"]["median_log_ratio"]) < 0.1  # no offset
    board = {"n": 27, "median_ape": 0.092, "p90_ape": 0.2, "devices": 23, "median_log_ratio": 0.095}
    own = {"n": 87, "median_ape": 0.3, "p90_ape": 0.4, "devices": 2, "median_log_ratio": -0.25}
    two = {"decode": {"lodo": {"by_source": {"llama.cpp-15013": board, "fitbench runs": own}}}}
    lines = report._source_lines(two)
    assert "| decode | llama.cpp-15013 | 23 | 27 | 9.2% | +0.095 |" in lines
    assert "| decode | fitbench runs | 2 | 87 | 30.0% | -0.250 |" in lines
    assert report._source_lines({"decode": {"lodo": {"by_source": {}}}}) == []


def test_record_source_names_the_published_group():
    from calibration.dataset import record_source

    rec = base_record()
    assert record_source(rec) == "generated"
    assert record_source(replace(rec, extra={"source_group": "xiongjiedai"})) == "xiongjiedai"
    assert record_source(replace(rec, origin="measured", source="plans/cpu.toml")) == ""
    url = "https://github.com/ai-dynamo/aiconfigurator/blob/095f58a/aic-core/silicon_sample.csv"
    assert record_source(replace(rec, source=url)) == "github.com/ai-dynamo/aiconfigurator"


def test_check_passes_on_consistent_data(results):
    res = check.run_check(results)
    assert res.ok, res.failures
    n, med, _ = res.overall["decode"]
    assert n == 50 and med < 0.05
    assert any(r.metric == "prefill" for r in res.rows)


def test_check_fails_when_coefficients_are_stale(tmp_path, results):
    root = tmp_path / "r"
    (root / "runs").mkdir(parents=True)
    recs = generate(DEVICES, DEC, PRE, noise=0.03, quants=QUANTS)
    write_records(root / "runs" / "gen.jsonl", recs)
    (root / "coefficients.json").write_text((results / "coefficients.json").read_text())
    assert check.run_check(root).ok
    write_records(root / "runs" / "more.jsonl", [replace(recs[0], record_id="new", decode_tok_s=33.0)])
    res = check.run_check(root)
    assert not res.ok and any("stale" in f for f in res.failures)
    assert main(["check", "--results", str(root)]) == 1


def test_check_fails_when_coefficients_missing(tmp_path):
    write_records(
        tmp_path / "runs" / "gen.jsonl", generate({"rtx-3090": "nvidia-ampere"}, DEC, quants=QUANTS)
    )
    res = check.run_check(tmp_path)
    assert any("missing" in f for f in res.failures)


def test_check_fails_when_the_physics_misses(tmp_path):
    # each device has its own efficiency (0.2 .. 0.95): held-out devices cannot be predicted within 10 %
    devs = {"rtx-3090": "nvidia-ampere", "a100-80gb-pcie": "nvidia-ampere", "rtx-a6000": "nvidia-ampere"}
    recs = []
    for (hw, fam), eff in zip(devs.items(), (0.2, 0.5, 0.95), strict=True):
        recs += [
            replace(r, record_id=f"{hw}-{r.record_id}")
            for r in generate({hw: fam}, {fam: {**DEC[fam], "bw_eff": eff}}, quants=QUANTS)
        ]
    write_records(tmp_path / "runs" / "gen.jsonl", recs)
    assert main(["fit", "--results", str(tmp_path)]) == 0
    res = check.run_check(tmp_path)
    assert any(f.startswith("decode:") for f in res.failures), res.failures


def test_single_device_family_falls_back_to_leave_one_model_out(tmp_path):
    write_records(
        tmp_path / "runs" / "gen.jsonl",
        generate({"rtx-3090": "nvidia-ampere"}, DEC, noise=0.02, quants=QUANTS),
    )
    main(["fit", "--results", str(tmp_path)])
    res = check.run_check(tmp_path)
    assert res.ok, res.failures
    assert all("lomo (single device)" in r.scheme for r in res.rows if r.metric == "decode")


@pytest.mark.parametrize(
    ("metric", "limit"),
    [("decode", 0.10), ("prefill", 0.15), ("decode lofo", 0.15), ("prefill lofo", 0.25), ("weights+kv", 0.01),
     ("total", 0.05), ("tpot", 0.14), ("ttft", 0.28)],
)  # fmt: skip
def test_thresholds_are_the_issue_gates(metric, limit):
    """The gates of issues 1, 9 (serving TPOT / TTFT) and 10 (tightening is allowed, loosening is not)."""
    assert check.THRESHOLDS[metric] <= limit and len(check.THRESHOLDS) == 8
    assert check.COVERAGE_BAND == (0.85, 0.95) and check.COVERAGE_SCHEMES == ("lodo", "lofo")


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert main(["check", "--results", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    (tmp_path / "runs").mkdir()
    assert main(["fit", "--results", str(tmp_path), "--quality", "bogus"]) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["fit", "--bogus"], "unrecognized arguments: --bogus"),
        (["check"], "has no runs/ folder"),  # a folder that is not a results folder
        (["check", "--coefficients", "{tmp}/list.json"], "not a coefficients document"),
        (["check", "--coefficients", "{tmp}/qf.json"], "quality_filter must be a list"),
        (["check", "--coefficients", "{tmp}/v9.json"], "schema_version 9"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "qf.json").write_text('{"schema_version": 2, "quality_filter": "ok"}')
    (tmp_path / "v9.json").write_text('{"schema_version": 9}')
    results = tmp_path / "results"
    results.mkdir()
    if "--coefficients" in argv:
        (results / "runs").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with_results = argv if argv[0] == "bogus" or "--bogus" in argv else [*argv, "--results", str(results)]
    try:
        rc = main(with_results)
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and message in err, err
