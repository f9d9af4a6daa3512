"""calibration.dataset: bad lines and impossible values are reported with file:line, never zero-filled."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from calibration.dataset import build_dataset, input_hash, load_dataset, read_all, validate_record
from harness.records import record_to_dict
from tests.calibration_gen import base_record, write_records


def _ds(tmp_path, records, extra_lines=(), qualities=("ok",)):
    path = write_records(tmp_path / "runs" / "a.jsonl", records)
    with path.open("a", encoding="utf-8") as fh:
        for line in extra_lines:
            fh.write(line + "\n")
    return load_dataset(tmp_path, qualities), path


def test_good_records_make_a_table(tmp_path):
    ds, _ = _ds(tmp_path, [base_record(record_id="a"), base_record(record_id="b", decode_tok_s=80.0)])
    assert len(ds.records) == 2 and not ds.rejected
    assert list(ds.table["decode_tok_s"]) == [50.0, 80.0]
    assert ds.input_hash.startswith("sha256:")


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"decode_tok_s": -3.0}, "decode_tok_s"),
        ({"decode_tok_s": 0.0}, "decode_tok_s"),
        ({"decode_tok_s": float("nan")}, "finite"),
        ({"weights_bytes": 0}, "weights_bytes"),
        ({"kv_bytes": -1}, "kv_bytes"),
        ({"decode_tok_s": None}, "no measurement"),
        ({"prefill_tok_s": 100.0, "n_prompt": 0}, "n_prompt is 0"),
        ({"batch": 0}, "batch"),
        ({"decode_samples_tok_s": (10.0, -1.0)}, "impossible sample"),
    ],
)
def test_impossible_values_are_reported_with_file_and_line(tmp_path, change, needle):
    bad = replace(base_record(record_id="bad"), **change)
    ds, path = _ds(tmp_path, [base_record(record_id="good"), bad])
    assert [lr.record.record_id for lr in ds.records] == ["good"]
    assert len(ds.rejected) == 1
    rej = ds.rejected[0]
    assert rej.file == str(path) and rej.line == 2 and rej.record_id == "bad"
    assert needle in rej.reason
    assert f"{path}:2" in str(rej)


def test_unparsable_lines_are_reported_and_reading_goes_on(tmp_path):
    raw = record_to_dict(base_record(record_id="x"))
    del raw["engine"]
    future = {**record_to_dict(base_record(record_id="y")), "schema_version": 99}
    ds, path = _ds(
        tmp_path,
        [base_record(record_id="ok1")],
        extra_lines=["{not json", json.dumps(raw), json.dumps(future)],
    )
    assert [lr.record.record_id for lr in ds.records] == ["ok1"]
    reasons = {r.line: r.reason for r in ds.rejected}
    assert set(reasons) == {2, 3, 4}
    assert "not valid JSON" in reasons[2] and "engine" in reasons[3] and "schema_version" in reasons[4]


def test_memory_only_import_may_leave_batch_unstated(tmp_path):
    mem = base_record(record_id="m", batch=0, decode_tok_s=None, n_gen=0, weights_bytes=3 * 2**30)
    ds, _ = _ds(tmp_path, [mem])
    assert [lr.record.record_id for lr in ds.records] == ["m"] and not ds.rejected


def test_failed_records_are_counted_not_rejected(tmp_path):
    ds, _ = _ds(tmp_path, [base_record(record_id="f", status="failed", decode_tok_s=None, error="oom")])
    assert not ds.records and not ds.rejected and ds.excluded_status == {"failed": 1}


def test_quality_filter_leaves_out_flags_unless_opted_in(tmp_path):
    recs = [
        base_record(record_id=q, extra={"quality": q}, decode_tok_s=50.0 + i)  # five runs
        for i, q in enumerate(("ok", "legacy", "rounded", "suspect", "aggregate"))
    ]
    ds, _ = _ds(tmp_path, recs)
    assert [lr.record.record_id for lr in ds.records] == ["ok"]
    assert ds.excluded_quality == {"legacy": 1, "rounded": 1, "suspect": 1, "aggregate": 1}
    ds2 = load_dataset(tmp_path, ("ok", "rounded"))
    assert sorted(lr.record.record_id for lr in ds2.records) == ["ok", "rounded"]
    assert ds2.input_hash != ds.input_hash
    with pytest.raises(ValueError, match="unknown quality"):
        load_dataset(tmp_path, ("ok", "bogus"))


def test_a_timing_its_source_says_includes_warm_up_is_not_fitted(tmp_path):
    """An imported "ok" row whose notes say the timing includes warm-up (llama-batched-bench's first row) gets
    the derived flag ``warmup`` and stays out unless asked for; a note about warm-up runs done before the
    timed ones does not."""
    from calibration.dataset import record_quality

    first = "llama-batched-bench S_PP (first row; includes warm-up effects), n_ubatch 2048, fa 1"
    timed = "10 warmup + 30 timed iterations, avg latency"
    recs = [
        base_record(record_id="w", extra={"quality": "ok", "notes": first}, decode_tok_s=51.0),
        base_record(record_id="t", extra={"quality": "ok", "notes": timed}, decode_tok_s=52.0),
        base_record(record_id="s", extra={"quality": "suspect", "notes": first}, decode_tok_s=53.0),
    ]
    assert [record_quality(r) for r in recs] == ["warmup", "ok", "suspect"]
    ds, _ = _ds(tmp_path, recs)
    assert [lr.record.record_id for lr in ds.records] == ["t"]
    assert ds.excluded_quality == {"warmup": 1, "suspect": 1}
    opted_in = load_dataset(tmp_path, ("ok", "warmup"))
    assert sorted(lr.record.record_id for lr in opted_in.records) == ["t", "w"]


def test_input_hash_ignores_order_and_sees_any_change(tmp_path):
    a, b = base_record(record_id="a"), base_record(record_id="b", decode_tok_s=70.0)
    assert input_hash([a, b]) == input_hash([b, a])
    assert input_hash([a, b]) != input_hash([a, replace(b, decode_tok_s=70.1)])
    assert input_hash([a]) != input_hash([a, b])
    # which commit wrote (or imported) a record is not a measurement: regenerated records hash as before
    assert input_hash([a, b]) == input_hash([a, replace(b, fitbench_git_sha="0" * 40)])


def test_failed_and_filtered_records_do_not_change_the_hash(tmp_path):
    good = base_record(record_id="g")
    ds1, _ = _ds(tmp_path / "1", [good])
    ds2, _ = _ds(
        tmp_path / "2",
        [
            good,
            base_record(record_id="f", status="failed", decode_tok_s=None),
            base_record(record_id="l", extra={"quality": "legacy"}),
        ],
    )
    assert ds1.input_hash == ds2.input_hash


def test_missing_results_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results folder"):
        load_dataset(tmp_path / "nope")


def test_validate_record_accepts_a_good_one():
    assert validate_record(base_record()) == []
    loaded, rej = read_all([])
    assert build_dataset(loaded, rej).table.empty


def test_disturbed_repetitions_leave_the_speed_out_but_keep_the_record(tmp_path):
    from calibration.features import MAX_SAMPLE_SPREAD, speed_points

    calm = base_record(record_id="calm", decode_samples_tok_s=(49.0, 50.0, 51.0), weights_bytes=10**9)
    noisy = base_record(record_id="noisy", decode_samples_tok_s=(10.0, 50.0, 90.0), weights_bytes=10**9)
    ds, path = _ds(tmp_path, [calm, noisy])
    assert len(ds.records) == 2  # the record stays (memory, input hash)
    points, rejected = speed_points(ds)
    assert [p.record_id for p in points] == ["calm"]
    (rej,) = rejected
    assert rej.record_id == "noisy" and f"{path}:2" in str(rej) and "9.0x" in rej.reason
    assert MAX_SAMPLE_SPREAD == 2.0


def test_a_speed_beyond_the_device_roof_is_left_out_with_its_reason(tmp_path):
    """A decode of Llama-2-7B Q4_0 (3.75 GB read per token) on an RTX 3090 (936 GB/s) cannot run at 600
    tok/s (2.4x the bandwidth), nor its pp512 at 30,000 tok/s (2.7x its 142 TFLOPS GEMM rate at 13.6 GFLOP a
    token): such a run did not do the work its record states, and its speed is left out with the figures;
    the real 3090 figures (~150 tok/s decode, ~5,000 tok/s prefill) stay points."""
    from calibration.features import ROOF_FACTOR, speed_points

    real = base_record(record_id="real", decode_tok_s=150.0)
    real_pp = base_record(record_id="real_pp", n_prompt=512, n_gen=0, decode_tok_s=None, prefill_tok_s=5000.0)
    fast = base_record(record_id="fast", decode_tok_s=600.0)
    fast_pp = base_record(record_id="fast_pp", n_prompt=512, n_gen=0, decode_tok_s=None, prefill_tok_s=3e4)
    ds, _ = _ds(tmp_path, [real, real_pp, fast, fast_pp])
    points, rejected = speed_points(ds)
    assert sorted(p.record_id for p in points) == ["real", "real_pp"]
    why = {r.record_id: r.reason for r in rejected}
    assert set(why) == {"fast", "fast_pp"}
    assert "decode at 2.4x the device's roof" in why["fast"] and "936 GB/s" in why["fast"]
    assert "prefill at 2.7x" in why["fast_pp"] and "TFLOPS of its datasheet GEMM rate" in why["fast_pp"]
    assert ROOF_FACTOR == 2.0


def test_a_detected_host_s_roof_is_its_copy_probe_over_0_85(tmp_path):
    """A detected host's only bandwidth figure is its copy probe (here 10 GB/s), which stands ~0.85 of the
    datasheet a read-only stream is bounded by: a decode streaming Llama-2-7B Q4_0 at 2.1x the probe (5.6
    tok/s) is kept, at 2.5x (6.7 tok/s, over 2 x 10 / 0.85) it is left out, the reason naming the probe."""
    from calibration.features import speed_points

    detected = {"cpu_model": "AMD EPYC 9R14", "host_bandwidth_probe_gbs": 10.0}
    host = dict(hardware_id="", host="h", backend="CPU", extra={"detected": detected})
    kept = base_record(record_id="kept", decode_tok_s=5.6, **host)
    left = base_record(record_id="left", decode_tok_s=6.7, **host)
    ds, _ = _ds(tmp_path, [kept, left])
    points, rejected = speed_points(ds)
    assert [p.record_id for p in points] == ["kept"]
    (rej,) = rejected
    assert rej.record_id == "left" and "copy probe / 0.85" in rej.reason and "against 11.8" in rej.reason


def test_a_detected_host_spec_carries_its_probe_as_an_achieved_bandwidth():
    """A host outside the catalog is specced from its copy probe: that figure is an achieved bandwidth, so
    it is also ``bandwidth_measured_gbs`` and the ``bw_measured`` covariate says so (ln(1 / 0.85)), in
    calibration and in the estimator's detected spec alike; a datasheet device without a published
    measurement has none."""
    import math

    from calibration.features import hardware_from_detected
    from estimator.catalog.detect import CpuInfo, detected_cpu_spec
    from estimator.catalog.resolve import resolve_hardware
    from estimator.physics.covariates import TYPICAL_STREAM_FRACTION, covariates

    detected = {"cpu_model": "AMD EPYC 9R14", "host_bandwidth_probe_gbs": 27.8}
    rec = replace(base_record(), hardware_id="", host="h", extra={"detected": detected})
    hw = hardware_from_detected(rec)
    assert hw.bandwidth_gbs == hw.bandwidth_measured_gbs == 27.8
    want = {"bw_measured": pytest.approx(math.log(1 / TYPICAL_STREAM_FRACTION))}
    assert covariates(hw, "llama.cpp", "CPU", ("bw_measured",)) == want
    cpu = CpuInfo("AMD EPYC 9R14", "x86_64", 2, 2, 2**34, ("avx512f",), "cpu-x86-avx512")
    spec = detected_cpu_spec(cpu, 27.8, "cpu-x86-avx512")
    assert covariates(spec, "llama.cpp", "CPU", ("bw_measured",)) == want
    assert covariates(resolve_hardware("threadripper-3970x"), "llama.cpp", "CPU", ("bw_measured",)) == {}


def test_the_model_section_keeps_each_detected_host_s_probe_basis():
    """A detected host's device entry records the median probe its points carried (the basis of its
    effects, which the estimator holds a fresh probe to); catalogued devices have none."""
    from types import SimpleNamespace as NS

    from calibration.pipeline import counts

    def pt(dev, hw_id, bw, phase="decode", clock=None, kind="cpu"):
        cores = 2 if kind == "cpu" else None
        hw = NS(id=hw_id, bandwidth_gbs=bw, kind=kind, cpu_cores=cores, cpu_clock_ghz=clock)
        return NS(device=dev, hardware=hw, family="f", engine="llama.cpp", backend="CPU", phase=phase)

    pts = [pt("vm:AMD EPYC", "detected-cpu", b) for b in (27.3, 27.8, 41.9)]
    pts += [pt("rtx-4090", "rtx-4090", 1008.0, "prefill", kind="gpu")]
    _, devs = counts(pts)
    assert devs["vm:AMD EPYC"]["bandwidth_gbs"] == 27.8 and "bandwidth_gbs" not in devs["rtx-4090"]
    # and the clock its cpu_size covariate was evaluated at: 3 GHz for records that state none
    assert devs["vm:AMD EPYC"]["cpu_clock_ghz"] == 3.0 and "cpu_clock_ghz" not in devs["rtx-4090"]
    pts += [pt("vm:AMD EPYC", "detected-cpu", 28.0, clock=c) for c in (3.62, 3.66, 3.65, 3.64)]
    assert counts(pts)[1]["vm:AMD EPYC"]["cpu_clock_ghz"] == 3.62


def test_record_build_reads_the_record_its_notes_then_its_source():
    """A record's engine build: its engine_version; else what its build_info / published notes say after the
    engine's name; else what its source states for such rows, per engine (Argonne's vLLM runs, not its
    llama.cpp ones); "" when nobody says."""
    from calibration.dataset import record_build

    rec = replace(base_record(), engine="vllm", engine_version="", build_info="", extra={})
    assert record_build(rec) == ""
    assert record_build(replace(rec, engine_version="0.19.0")) == "0.19.0"
    notes = {"notes": "offline single-batch latency; vLLM v0.5.2 XPU; Intel Data Center GPU Max 1550"}
    assert record_build(replace(rec, extra=notes)) == "0.5.2"
    sglang = replace(rec, engine="other", build_info="SGLang 0.5.13.post1 (bench_serving)")
    assert record_build(sglang, "sglang") == "0.5.13.post1"
    argonne = {"source_group": "argonne-llm-inference-bench", "notes": "vLLM (version not stated); GH200"}
    assert record_build(replace(rec, extra=argonne)) == "0.6.1"
    assert record_build(replace(rec, engine="llama.cpp", extra=argonne)) == ""


def test_serving_and_latency_records_are_part_of_the_hash(tmp_path):
    """The serving fit and the -b 1 decode points use the serving / latency records: a change to one of them
    makes coefficients.json stale."""
    good = base_record(record_id="g")
    e2e = base_record(
        record_id="e", decode_tok_s=None, prefill_tok_s=None, e2e_latency_s=12.8,
        build_info="llama.cpp (llama-bench -pg)", schema_version=2,
    )
    ds1, _ = _ds(tmp_path / "1", [good, e2e])
    ds2, _ = _ds(tmp_path / "2", [good, replace(e2e, e2e_latency_s=12.9)])
    ds3, _ = _ds(tmp_path / "3", [good])
    assert len(ds1.serving_records) == 1
    assert len({ds1.input_hash, ds2.input_hash, ds3.input_hash}) == 3


def _serving(record_id: str, **kw):
    fields = {"decode_tok_s": None, "n_prompt": 1024, "n_gen": 1024, "batch": 4, "concurrency": 4,
              "schema_version": 2, "engine": "sglang", "engine_version": "nightly-dev",
              "ttft_s": 0.2318478822184261, "tpot_s": 0.008065206402314423}  # fmt: skip
    return base_record(record_id=record_id, **{**fields, **kw})


def test_a_measurement_published_twice_is_counted_once(tmp_path):
    """aiconfigurator's silicon table carries one run in several data drops: another record_id and build
    string, its figures rounded to 5 digits; the repeats are left out, each naming the first."""
    first = _serving("a", engine_version="nightly-dev-20260216-d3bae71e", build_info="lmsysorg/sglang")
    again = _serving("b", timestamp_utc="2026-02-20T05:32:44Z")
    rounded = _serving("c", ttft_s=0.23185, tpot_s=0.00807, extra={"source_line": 9})
    ds, path = _ds(tmp_path, [first, again, rounded])
    _only_the_first_kept(ds.serving_records, ds, path)


def _only_the_first_kept(kept, ds, path) -> None:
    """Of records a, b, c on lines 1-3 of ``path``: a kept, b and c left out, each naming line 1."""
    assert [lr.record.record_id for lr in kept] == ["a"]
    assert [(r.line, r.record_id) for r in ds.rejected] == [(2, "b"), (3, "c")]
    assert all(f"the measurement of '{path}:1' published again" in r.reason for r in ds.rejected)


@pytest.mark.parametrize(
    "change",
    [
        {"source": "https://elsewhere.example/table"},  # another source: another measurement
        {"tpot_s": 0.00812},  # another run
        {"ttft_s": 0.23184795},  # both to 8+ places and not equal and not equal: two runs (GH200 repeats)
        {"engine_version": "0.5.9"},  # another build
        {"concurrency": 8, "batch": 8},  # another configuration
        {"itl_s": 0.008},  # another set of figures
    ],
)
def test_equal_looking_measurements_that_differ_are_both_kept(tmp_path, change):
    ds, _ = _ds(tmp_path, [_serving("a"), _serving("b", **change)])
    assert len(ds.serving_records) == 2 and not ds.rejected


def test_a_run_given_again_under_another_name_of_its_architecture_is_one_measurement(tmp_path):
    """aiconfigurator's drops give DeepSeek-R1's runs again under DeepSeek-V3's model path: one architecture
    (the same model_fingerprint), the same figures.  Without a fingerprint the names tell them apart."""
    r1 = _serving("r1", model_id="deepseek-ai/DeepSeek-R1", model_fingerprint="ed36fe8fae0c5e89affb")
    v3 = replace(r1, record_id="v3", model_id="deepseek-ai/DeepSeek-V3")
    ds, _ = _ds(tmp_path / "fp", [r1, v3])
    assert [lr.record.record_id for lr in ds.serving_records] == ["r1"] and len(ds.rejected) == 1
    ds, _ = _ds(tmp_path / "nofp", [replace(r1, model_fingerprint=""), replace(v3, model_fingerprint="")])
    assert len(ds.serving_records) == 2 and not ds.rejected


def test_failed_runs_are_not_taken_for_a_republished_measurement(tmp_path):
    failed = replace(_serving("a"), status="failed", error="oom")
    ds, _ = _ds(tmp_path, [failed, replace(failed, record_id="b")])
    assert ds.excluded_status == {"failed": 2} and not ds.rejected


def _pp(record_id: str, **kw):
    fields = {"decode_tok_s": None, "prefill_tok_s": 379.92, "n_prompt": 1024, "n_gen": 0, "n_ubatch": 16,
              "source": "https://github.com/ggml-org/llama.cpp/pull/27841", "hardware_id": "instinct-mi50",
              "hardware_family": "amd-gcn5", "backend": "ROCm",
              "model_id": "meta-llama/Meta-Llama-3-8B"}  # fmt: skip
    return base_record(record_id=record_id, **{**fields, **kw})


def test_a_published_speed_in_two_data_drops_is_counted_once(tmp_path):
    """One issue thread's pp1024 table sits in both published CSVs: once under Meta-Llama-3-8B, once as
    llama-bench's "llama 8B Q4_0", which the import places on Llama 3.1 8B (the same geometry).  Same source,
    device, test and figure (rounded in one drop): one measurement, whichever name it carries."""
    first = _pp("a")
    again = _pp("b", model_id="meta-llama/Llama-3.1-8B", extra={"source_group": "llama.cpp-issues-amd"})
    rounded = _pp("c", prefill_tok_s=379.9)
    ds, path = _ds(tmp_path, [first, again, rounded])
    _only_the_first_kept(ds.records, ds, path)


@pytest.mark.parametrize(
    "change",
    [
        {"n_ubatch": 32},  # another setting
        {"prefill_tok_s": 382.19},  # another figure
        {"source": "https://github.com/ggml-org/llama.cpp/discussions/15021"},  # another source
        {"hardware_id": "instinct-mi60"},  # another device
        {"n_layers_real": 80, "n_layers_measured": 80},  # another model
        {"origin": "measured"},  # fitbench's own runs are each their own measurement
        {"engine_version": "b2"},  # another build
        {"extra": {"source_group": "xiongjiedai"}},  # a source that dates its build to 2024: another era
    ],
)
def test_published_speeds_that_differ_are_both_kept(tmp_path, change):
    ds, _ = _ds(tmp_path, [_pp("a"), _pp("b", **change)])
    assert len(ds.records) == 2 and not ds.rejected


def test_coarse_published_speeds_are_not_taken_for_one_run(tmp_path):
    """"37" and "37" of one device and test in one table may be two runs: too few digits to tell."""
    ds, _ = _ds(tmp_path, [_pp("a", prefill_tok_s=37.0), _pp("b", prefill_tok_s=37.0)])
    assert len(ds.records) == 2 and not ds.rejected
