"""Issue 3: for every llama.cpp record, the weights and KV bytes parsed from the engine equal the estimator's
prediction for the same point within 1 %; the compute-buffer gap is reported (not asserted: calibration fits
it).

* ``test_results_run_matches_estimator``: one case per own llama.cpp run in results/runs/ (the committed
  CPU calibration set and whatever a running sweep has appended so far).
* ``test_real_tiny_run_matches_estimator``: real measurements through ``python -m runners measure`` on two
  tiny synthetic models (gemma3: sliding window + tied embeddings, Q4_K_M; deepseek_v2: MLA + MoE with 2
  shared experts, Q8_0), wrapped into records by the sweep's own code, so the check always runs on live
  engine records, whatever results/ holds.
* ``test_writer_and_estimator_agree_on_tensors``: without an engine, the synthetic writer's tensors equal
  the estimator's inventory of ``harness.synth.proxy_spec`` (names, element counts, row lengths; tiny
  models and every llama.cpp proxy of plans/cpu-full.toml).
* The rest checks the comparison itself (it can fail: two independent numbers, a tolerance, the log rounding
  allowance) and the ``python -m harness consistency`` command.

The per-run table (weights, KV, compute gap) is written to test-artifacts/consistency.txt and .json and
printed (``pytest -s``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog.resolve import resolve_model
from harness import consistency as cons
from harness import synth
from harness.records import RunRecord, append_records

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
ARTIFACTS = ROOT / "test-artifacts"


def _case_id(row: cons.Comparison) -> str:
    fa = "-fa" if row.flash_attn else ""
    head = f"{row.model_id}-L{row.n_layers_measured}-{row.quant}"
    return f"{head}-c{row.n_ctx}-{row.kv_dtype}{fa}-{row.run_id[:6]}"


RESULT_ROWS = cons.compare_runs(cons.load_runs(RESULTS))


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}%"


def _explain(row: cons.Comparison) -> str:
    w, k, c = row.weights_gap, row.kv_gap, row.compute_gap
    return (
        f"{row.where} {row.model_id} ({row.architecture}) {row.n_layers_measured}/{row.n_layers_real} layers "
        f"{row.quant}: weights engine {row.engine_weights_bytes} B, estimator {row.est_weights_bytes} B "
        f"(gap {w[0]} B, {_pct(w[1])}); KV engine {row.engine_kv_bytes} B, estimator {row.est_kv_bytes} B "
        f"(gap {k[0]} B, {_pct(k[1])}, log rounding allowance {row.kv_rounding_bytes} B); compute engine "
        f"{row.engine_compute_bytes} B, estimator {row.est_compute_bytes} B (gap {_pct(c[1])})"
    )


LLAMA_ROWS = [r for r in RESULT_ROWS if r.engine == "llama.cpp"]
VLLM_ROWS = [r for r in RESULT_ROWS if r.engine == "vllm"]
# vLLM's weights: the worker's parameters (plus the linears its CPU backend packed) against the layout the
# vLLM profile says it loads; what is left are Gemma 4's rope_freqs and layer scalars, which vLLM holds as
# buffers, not parameters (524 B of a 6-layer 26B-A4B proxy)
VLLM_WEIGHTS_SLACK_BYTES = 1024


@pytest.mark.parametrize("row", LLAMA_ROWS, ids=[_case_id(r) for r in LLAMA_ROWS])
def test_results_run_matches_estimator(row: cons.Comparison):
    assert not row.error, f"{row.where}: {row.error}"
    assert row.engine_weights_bytes and row.engine_kv_bytes, f"{row.where}: engine figures missing"
    assert row.weights_ok(), "weights outside 1 %: " + _explain(row)
    assert row.kv_ok(), "KV outside 1 %: " + _explain(row)


@pytest.mark.parametrize("row", VLLM_ROWS, ids=[_case_id(r) for r in VLLM_ROWS])
def test_vllm_run_weights_match_estimator(row: cons.Comparison):
    """Norms in the checkpoint dtype (SmolLM2 / Qwen3 proxies: 17,280 / 20,480 B over with llama.cpp's F32)
    and the V projection vLLM fills on Gemma 4's K==V layer (5,767,168 B under without it)."""
    assert not row.error, f"{row.where}: {row.error}"
    assert row.engine_kv_bytes is None and row.engine_compute_bytes is None  # weights only
    gap = row.weights_gap[0]
    assert gap is not None and abs(gap) <= VLLM_WEIGHTS_SLACK_BYTES, _explain(row)


def test_vllm_rows_cover_checkpoint_layouts():
    """The stored vLLM runs include a K==V model (Gemma 4), so the V-slot rule is checked on a measurement."""
    assert {"smollm2-360m", "gemma-4-26b-a4b"} <= {r.model_id for r in VLLM_ROWS}


def test_compute_gap_report():
    """Every run's compute gap can be computed (the engine compute buffers were parsed and the estimator
    sized the point); the table goes to test-artifacts/ and stdout."""
    if not RESULT_ROWS:
        pytest.skip("no measured llama.cpp records in results/runs yet")
    missing = [r.where for r in LLAMA_ROWS if r.compute_gap[1] is None]
    assert not missing, f"llama.cpp runs without a compute gap: {missing}"
    from rich.console import Console

    buf = io.StringIO()
    cons.render_tables(RESULT_ROWS, console=Console(file=buf, width=220, color_system=None))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "consistency.txt").write_text(buf.getvalue())
    (ARTIFACTS / "consistency.json").write_text(json.dumps(cons.report_dict(RESULT_ROWS), indent=2) + "\n")
    print(buf.getvalue())


# --- one live engine record ---------------------------------------------------------------------------
def _tiny_deepseek_two_shared():
    """DeepSeek-V2-Lite's layout in small: 2 shared experts (the writer once sized them as one)."""
    m = synth.tiny_model("deepseek_v2")
    return dataclasses.replace(m, moe=dataclasses.replace(m.moe, n_shared_experts=2))


LIVE = {
    # 4 layers: sliding (window 128) / full alternating, tied embeddings; sliding layers hold
    # pad256(128 + n_ubatch 256) = 512 cells, full layers 1024, so a wrong cell rule shows in the KV figure
    "gemma3-Q4_K_M": (lambda: synth.tiny_model("gemma3"), "Q4_K_M", {"full": 1024, "swa": 512}),
    # MLA latent cache (K only), first layer dense, MoE with 2 shared experts
    "deepseek_v2-Q8_0": (_tiny_deepseek_two_shared, "Q8_0", {}),
}


@pytest.mark.llama
@pytest.mark.parametrize("case", sorted(LIVE))
def test_real_tiny_run_matches_estimator(case, tmp_path):
    pytest.importorskip("llama_cpp")
    from harness.hwdetect import CpuInfo, HostInfo
    from harness.provenance import PointContext, records_from_measurement, spec_to_dict
    from runners.base import PointSpec
    from runners.jsonio import measurement_from_dict

    make, quant, swa_cells = LIVE[case]
    model = make()
    path = synth.synthetic_model(model, quant, cache_dir_path=tmp_path / "models")
    spec = PointSpec(
        model_path=str(path),
        n_ctx=1024,
        prompt_lengths=(16,),
        gen_lengths=(),
        repetitions=1,
        n_threads=1,
        n_ubatch=256,
    )
    (tmp_path / "spec.json").write_text(json.dumps(spec_to_dict(spec)))
    cmd = [sys.executable, "-m", "runners", "measure", "--engine", "llama.cpp"]
    cmd += ["--spec", str(tmp_path / "spec.json"), "--out", str(tmp_path / "out.json")]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    m = measurement_from_dict(json.loads((tmp_path / "out.json").read_text()))
    host = HostInfo(
        host="test", backend="CPU", device_name="test CPU", n_devices=1, driver="", hardware_id="",
        hardware_family="cpu-test", cpu=CpuInfo("test CPU", "x86_64", 1, 1, None, (), "cpu-test"),
    )  # fmt: skip
    ctx = PointContext(
        point_key="tiny", plan_source="tests/test_results_consistency.py", host=host, engine="llama.cpp",
        engine_version=m.engine_version, model_id=model.id, model=model, n_layers_measured=model.n_layers,
        quant=quant, synthetic_weights=True, spec=spec, git_sha="test",
    )  # fmt: skip
    append_records(tmp_path / "results" / "runs" / "tiny.jsonl", records_from_measurement(ctx, m))

    rows = cons.compare_runs(cons.load_runs(tmp_path / "results"), resolve={model.id: model}.__getitem__)
    assert len(rows) == 1
    row = rows[0]
    print(_explain(row))
    assert not row.error and row.weights_ok() and row.kv_ok(), _explain(row)
    assert m.extra["swa_cells"] == swa_cells
    assert row.compute_gap[1] is not None


# --- the comparison itself ----------------------------------------------------------------------------
def _record(**over) -> RunRecord:
    base = dict(
        record_id="r1", schema_version=1, timestamp_utc="2026-11-29T00:00:00Z", origin="measured",
        source="plans/t.toml", fitbench_git_sha="x", host="h", engine="llama.cpp", engine_version="v",
        build_info="ggml", backend="CPU", device_name="cpu", hardware_id="", hardware_family="cpu-x",
        n_devices=1, driver="", model_id="smollm2-360m", model_fingerprint="f", n_layers_real=32,
        n_layers_measured=4, quant="Q8_0", synthetic_weights=True, n_prompt=32, n_gen=0, n_depth=0, batch=1,
        n_ctx=1024, kv_dtype="f16", flash_attn=False, n_threads=2, n_batch=2048, n_ubatch=512,
        n_gpu_layers=-1, status="ok", weights_bytes=91_948_800, kv_bytes=5_242_880, compute_bytes=111_945_974,
        extra={"run_id": "run1", "buffers_bytes": {"KV": {"CPU": 5_242_880}}},
    )  # fmt: skip
    base.update(over)
    return RunRecord(**base)


def test_known_answer_smollm2_proxy():
    """SmolLM2-360M, 4 of 32 layers, Q8_0, 1,024 cells (llama_model_size and KV buffer of a real run)."""
    row = cons.compare_record("x:1", _record(), resolve_model("smollm2-360m"))
    assert row.est_weights_bytes == 91_948_800 and row.weights_gap == (0, 0.0)
    # 4 layers x 320 (5 KV heads x 64) x (K + V) x 2 B x 1024 cells = 5 MiB
    assert row.est_kv_bytes == 4 * 320 * 2 * 2 * 1024 == 5_242_880
    assert row.weights_ok() and row.kv_ok() and row.compute_gap[1] is not None
    # the proxy, not the real depth, is sized: 8 layers give more weights and twice the KV
    eight = cons.compare_record("x:1", _record(n_layers_measured=8), resolve_model("smollm2-360m"))
    assert eight.est_kv_bytes == 2 * row.est_kv_bytes and eight.est_weights_bytes > row.est_weights_bytes


def test_mismatch_is_detected():
    model = resolve_model("smollm2-360m")
    off = cons.compare_record("x:1", _record(weights_bytes=int(91_948_800 * 1.02)), model)
    assert off.weights_ok() is False and off.weights_gap[1] == pytest.approx(-100 * 0.02 / 1.02, abs=1e-6)
    assert off.weights_ok(tolerance=0.03) is True
    kv_off = cons.compare_record("x:1", _record(kv_bytes=5_242_880 + 60_000), model)
    assert kv_off.kv_ok() is False and kv_off.weights_ok() is True
    # within the log's 0.005 MiB rounding of one buffer: accepted even where 1 % would be less
    tiny_kv = dataclasses.replace(kv_off, engine_kv_bytes=200_000, est_kv_bytes=205_000)
    assert tiny_kv.kv_ok() is True
    assert dataclasses.replace(tiny_kv, est_kv_bytes=206_000).kv_ok() is False
    report = cons.report_dict([off, kv_off])
    assert report["out_of_tolerance"] == 2 and report["architectures"][0]["architecture"] == "llama"


def test_runs_grouped_and_errors_reported():
    recs = [
        ("f:1", _record(record_id="a")),
        ("f:2", _record(record_id="b", n_prompt=0, n_gen=32)),
        ("f:3", _record(record_id="c", model_id="no-such-model", extra={"run_id": "run2"})),
        ("f:4", _record(record_id="d", quant="Q9_X", extra={"run_id": "run3"})),
    ]
    rows = cons.compare_runs(recs)
    assert [(r.where, r.n_records) for r in rows] == [("f:1", 2), ("f:3", 1), ("f:4", 1)]
    assert not rows[0].error and "not known" in rows[1].error and "Q9_X" in rows[2].error
    assert rows[1].weights_ok() is None and rows[1].est_weights_bytes is None
    assert not cons.is_engine_run(_record(origin="imported"))
    assert not cons.is_engine_run(_record(status="failed"))
    assert not cons.is_engine_run(_record(build_info="TEST DOUBLE"))
    assert cons.is_engine_run(_record(engine="vllm"))  # compared on its weights
    assert not cons.is_engine_run(_record(engine="sglang"))
    vllm = cons.compare_runs([("f:9", _record(record_id="v", engine="vllm", extra={"run_id": "v"}))])[0]
    assert vllm.engine == "vllm" and vllm.est_weights_bytes is not None
    assert vllm.engine_kv_bytes is None and vllm.est_kv_bytes is None and vllm.kv_ok() is None


def test_cli(tmp_path, capsys):
    from harness.__main__ import main

    runs = tmp_path / "results" / "runs"
    append_records(runs / "a.jsonl", [_record(), _record(record_id="i", origin="imported")])
    assert main(["consistency", "--results", str(tmp_path / "results"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 1 and out["runs"][0]["weights_gap_bytes"] == 0 and out["out_of_tolerance"] == 0
    bad = _record(record_id="z", weights_bytes=80_000_000, extra={"run_id": "r9"})
    append_records(runs / "b.jsonl", [bad])
    assert main(["consistency", "--results", str(tmp_path / "results")]) == 1
    assert "smollm2-360m" in capsys.readouterr().out
    assert main(["consistency", "--results", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith("error: results folder not found")
    (runs / "c.jsonl").write_text("{not json\n")
    assert main(["consistency", "--results", str(tmp_path / "results")]) == 2
    assert "c.jsonl:1" in capsys.readouterr().err
