"""predict: llama-bench semantics, pass-through columns, bad rows, custom hardware, CSV round trip."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest

from estimator.app import predict
from estimator.catalog.data import get_hardware, get_model
from estimator.physics import speed
from estimator.physics.coefficients import prior_table
from estimator.physics.memory import estimate_memory
from estimator.physics.quant import get_quant
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report
from estimator.specs import SpecError, Workload

BASE = {"model": "llama-3.1-8b", "hardware": "rtx-4090", "engine": "llama.cpp", "quant": "Q4_K_M"}


def _row(**kw) -> dict:
    return {**BASE, **{k: str(v) for k, v in kw.items()}}


@pytest.fixture(scope="module")
def table():
    return prior_table()


def test_pp_row_matches_prefill_physics(table):
    (out,) = predict.predict_rows([_row(n_prompt=512, n_gen=0, n_depth=1024)], table)
    assert out["error"] == ""
    m, h, q = get_model("llama-3.1-8b"), get_hardware("rtx-4090"), get_quant("Q4_K_M")
    wl = Workload(n_ctx=1536, n_prompt=512, n_gen=0, n_depth=1024)
    _, _, _, pp = speed.merged_params(table, h, "llama.cpp")
    t = speed.prefill_s(speed.prefill_features(m, q, wl), h, pp)
    assert float(out["prefill_tok_s"]) == pytest.approx(512 / t)
    assert out["decode_tok_s"] == ""
    assert float(out["prefill_tok_s_lo"]) < float(out["prefill_tok_s"]) < float(out["prefill_tok_s_hi"])
    # n_ctx defaults to n_prompt + n_gen + n_depth, like llama-bench
    mem = estimate_memory(m, q, h, wl, table.memory_for("llama.cpp"))
    assert int(out["total_bytes"]) == mem.total_bytes and int(out["kv_bytes"]) == mem.kv_bytes
    assert out["fits"] == "true"
    assert out["coefficients"] == "pooled prior (uncalibrated)" and out["calibrated"] == "false"


def test_tg_row_integrates_over_growing_kv(table):
    (deep, shallow) = predict.predict_rows(
        [_row(n_prompt=0, n_gen=128, n_depth=16384), _row(n_prompt=0, n_gen=128)], table
    )
    assert float(deep["decode_tok_s"]) < float(shallow["decode_tok_s"])
    m, h, q = get_model("llama-3.1-8b"), get_hardware("rtx-4090"), get_quant("Q4_K_M")
    _, _, dp, _ = speed.merged_params(table, h, "llama.cpp")
    wl = Workload(n_ctx=16384 + 128, n_prompt=0, n_gen=128, n_depth=16384)
    steps = [speed.decode_step_s(speed.decode_features(m, q, wl, d), h, dp) for d in range(16384, 16512)]
    brute = sum(steps) / 128
    assert float(deep["decode_tok_s"]) == pytest.approx(1 / brute, rel=1e-9)
    assert deep["prefill_tok_s"] == "" and deep["ttft_s"] == ""


def test_batch_is_aggregate_decode(table):
    one, eight = predict.predict_rows(
        [_row(n_prompt=0, n_gen=64), _row(n_prompt=0, n_gen=64, batch=8)], table
    )
    assert float(eight["decode_tok_s"]) > 4 * float(one["decode_tok_s"])
    assert int(eight["kv_bytes"]) > int(one["kv_bytes"])


def test_extra_columns_pass_through_and_bad_rows_survive(table):
    rows = [
        _row(n_prompt=512, n_gen=0, run_id="a", measured_tok_s="123.4"),
        _row(n_prompt=512, n_gen=0, run_id="b", model="no-such-model"),
        _row(n_prompt="lots", n_gen=0, run_id="c"),
        _row(n_prompt=512, n_gen=0, run_id="d", quant="Q9_Z"),
        _row(n_prompt=0, n_gen=0, run_id="e"),
        _row(n_prompt=0, n_gen=16, run_id="f", hardware="no-such-gpu"),
        _row(n_prompt=0, n_gen=16, run_id="g"),
        _row(n_prompt=0, n_gen=16, run_id="h", engine="lmdeploy"),
        _row(n_prompt=0, n_gen=16, run_id="i", quant="AWQ-INT4"),
    ]
    out = predict.predict_rows(rows, table)
    assert [r["run_id"] for r in out] == list("abcdefghi")
    assert out[0]["measured_tok_s"] == "123.4" and out[0]["error"] == ""
    assert "no-such-model" in out[1]["error"] and out[1]["prefill_tok_s"] == ""
    assert "n_prompt" in out[2]["error"]
    assert "Q9_Z" in out[3]["error"]
    assert "nothing to predict" in out[4]["error"]
    assert "no-such-gpu" in out[5]["error"]
    assert out[6]["error"] == "" and float(out[6]["decode_tok_s"]) > 0
    assert "unknown engine 'lmdeploy'" in out[7]["error"]
    assert "not available on llama.cpp" in out[8]["error"]
    for r in out:
        assert "\n" not in r["error"]


def test_custom_hardware_row(table):
    row = _row(n_prompt=0, n_gen=32, hardware="", bandwidth_gbs=20, memory_gib=16, family="cpu-x86-avx2")
    (out,) = predict.predict_rows([row], table)
    assert out["error"] == ""
    (fast,) = predict.predict_rows([dict(row, bandwidth_gbs="40")], table)
    ratio = float(fast["decode_tok_s"]) / float(out["decode_tok_s"])
    assert 1.5 < ratio <= 2.0  # bandwidth term doubles, fixed overheads do not
    (bad,) = predict.predict_rows([_row(n_prompt=0, n_gen=32, hardware="custom", memory_gib=16)], table)
    assert "bandwidth" in bad["error"]


def test_tensor_parallel_row(table):
    big = {"model": "llama-3.1-70b", "hardware": "h100-80gb-sxm"}
    small = {"hardware": "h100-80gb-sxm"}
    one, two, s1, s2 = predict.predict_rows(
        [
            _row(n_prompt=0, n_gen=32, **big),
            _row(n_prompt=0, n_gen=32, n_devices=2, split="tp", **big),
            _row(n_prompt=0, n_gen=32, **small),
            _row(n_prompt=0, n_gen=32, n_devices=2, split="tp", **small),
        ],
        table,
    )
    # a 70B model is bandwidth-bound: splitting its bytes over two devices wins over the all-reduce cost
    assert float(two["decode_tok_s"]) > 1.3 * float(one["decode_tok_s"])
    assert int(two["total_bytes"]) > int(one["total_bytes"])  # runtime + overhead on both devices
    # an 8B model gains less (2 all-reduces per layer cost about as much as the bytes saved)
    gain_small = float(s2["decode_tok_s"]) / float(s1["decode_tok_s"])
    assert gain_small < float(two["decode_tok_s"]) / float(one["decode_tok_s"])


def test_output_column_clash_is_an_error(table):
    with pytest.raises(SpecError, match="decode_tok_s"):
        predict.predict_rows([_row(n_prompt=0, n_gen=1, decode_tok_s="9")], table)


def test_csv_round_trip(tmp_path, table, capsys):
    src = tmp_path / "cases.csv"
    with open(src, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["model", "hardware", "quant", "n_prompt", "n_gen", "note"])
        w.writeheader()
        w.writerow(
            {
                "model": "llama-3.1-8b",
                "hardware": "rtx-4090",
                "quant": "Q4_K_M",
                "n_prompt": "512",
                "n_gen": "0",
                "note": "pp512",
            }
        )
        w.writerow(
            {
                "model": "nope",
                "hardware": "rtx-4090",
                "quant": "Q4_K_M",
                "n_prompt": "0",
                "n_gen": "128",
                "note": "bad",
            }
        )
    dst = tmp_path / "out.csv"
    assert predict.predict_csv(src, dst, table) == 1
    rows = list(csv.DictReader(open(dst, newline="")))
    assert [r["note"] for r in rows] == ["pp512", "bad"]
    header = open(dst).readline().strip().split(",")
    assert header[:6] == ["model", "hardware", "quant", "n_prompt", "n_gen", "note"]
    assert header[6:] == list(predict.OUTPUT_COLUMNS)
    # stdout
    predict.predict_csv(src, None, table)
    got = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert got[0]["prefill_tok_s"] == rows[0]["prefill_tok_s"]


def test_csv_bad_files(tmp_path, table):
    with pytest.raises(SpecError, match="cannot read"):
        predict.predict_csv(tmp_path / "absent.csv", None, table)
    p = tmp_path / "x.csv"
    p.write_text("model,hardware\nllama-3.1-8b,rtx-4090\n")
    with pytest.raises(SpecError, match="missing column"):
        predict.predict_csv(p, None, table)


def test_int_parsing_accepts_float_text():
    wl = predict.row_workload({"n_prompt": "512.0", "n_gen": "0", "batch": "1.0", "flash_attn": "false"})
    assert wl.n_prompt == 512 and wl.n_ctx == 512 and not wl.flash_attn
    with pytest.raises(SpecError, match="whole number"):
        predict.row_workload({"n_prompt": "1.5", "n_gen": "0"})
    with pytest.raises(SpecError, match="split"):
        predict.row_workload({"n_prompt": "1", "n_gen": "0", "split": "zz"})
    assert replace(wl, n_seq=2).n_seq == 2


def test_gguf_model_uses_exact_file_tensors(tmp_path, table):
    from estimator.specs import FULL, ModelSpec
    from harness.synth import write_gguf

    spec = ModelSpec(
        id="tiny",
        name="tiny",
        architecture="llama",
        hidden_size=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        head_dim=16,
        intermediate_size=128,
        vocab_size=256,
        max_context=2048,
        layer_types=(FULL,) * 2,
        arch_class="LlamaForCausalLM",
    )
    path = write_gguf(spec, tmp_path / "tiny.gguf")
    rows = [_row(model=str(path), quant=q, n_prompt=0, n_gen=16) for q in ("", "gguf")]
    a, b = predict.predict_rows(rows, table)
    assert a["error"] == "" and b["error"] == ""
    from estimator.catalog.resolve import resolve_model

    m = resolve_model(str(path))
    assert int(a["weights_bytes"]) == sum(t[3] for t in m.gguf_tensors) - next(
        t[3] for t in m.gguf_tensors if t[0] == "token_embd.weight"
    )  # the token embedding stays in host RAM on a discrete GPU under llama.cpp
    assert a["decode_tok_s"] == b["decode_tok_s"]


def test_default_split_follows_the_engine():
    # llama.cpp splits by layer unless told otherwise (-sm layer), vLLM is tensor parallel
    assert predict.row_workload({"n_prompt": "0", "n_gen": "8", "n_devices": "2"}).split == "pp"
    vllm = {"n_prompt": "0", "n_gen": "8", "n_devices": "2", "engine": "vllm"}
    assert predict.row_workload(vllm).split == "tp"
    assert predict.row_workload({**vllm, "split": "pp"}).split == "pp"


@pytest.mark.parametrize(
    "text",
    [
        "\ufeffmodel,hardware,quant,n_prompt,n_gen\nqwen3-0.6b,rtx-4090,Q8_0,512,0\n",  # Excel's UTF-8 BOM
        "model,hardware,quant,n_prompt,n_gen\r\nqwen3-0.6b,rtx-4090,Q8_0,512,0\r\n",  # CRLF
        "\ufeffmodel,hardware,quant,n_prompt,n_gen\r\nqwen3-0.6b,rtx-4090,Q8_0,512,0\r\n",
    ],
)
def test_csv_with_bom_and_crlf(tmp_path, table, text):
    src, dst = tmp_path / "c.csv", tmp_path / "o.csv"
    src.write_bytes(text.encode("utf-8"))
    assert predict.predict_csv(src, dst, table) == 0
    rows = list(csv.DictReader(open(dst, newline="", encoding="utf-8")))
    assert list(rows[0])[0] == "model" and float(rows[0]["prefill_tok_s"]) > 0


@pytest.mark.parametrize(
    "column, value, needle",
    [
        ("n_devices", "1e12", "column 'n_devices' must be between 1 and 1024, got 1000000000000"),
        ("n_ctx", "1e15", "column 'n_ctx' must be between 1 and 16777216"),
        ("n_depth", "20000000", "column 'n_depth' must be between 0 and 16777216"),
        ("batch", "1e9", "column 'batch' must be between 1 and 65536"),
        ("offload_bytes", "1e300", "column 'offload_bytes'"),
        ("n_ubatch", "nan", "(a finite number)"),
    ],
)
def test_out_of_range_cells_are_row_errors_and_the_run_goes_on(table, column, value, needle):
    rows = [_row(n_prompt=512, n_gen=0, **{column: value}), _row(n_prompt=512, n_gen=0)]
    bad, good = predict.predict_rows(rows, table)
    assert needle in bad["error"] and bad["prefill_tok_s"] == ""
    assert good["error"] == "" and float(good["prefill_tok_s"]) > 0


def test_default_context_above_the_cap_is_a_row_error(table):
    (out,) = predict.predict_rows([_row(n_prompt=10_000_000, n_gen=10_000_000)], table)
    assert "n_prompt + n_gen + n_depth" in out["error"]


def test_custom_hardware_figures_bounded(table):
    (out,) = predict.predict_rows(
        [_row(hardware="custom", memory_gib="1e308", bandwidth_gbs="1000", n_prompt=512, n_gen=0)], table
    )
    assert "column 'memory_gib' must be between" in out["error"]


def test_cases_file_must_be_a_regular_file(tmp_path, table):
    import os

    fifo = tmp_path / "c.csv"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="is a FIFO, not a regular file"):
        predict.predict_csv(fifo, None, table)
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(predict.MAX_CASES_BYTES + 1)
    with pytest.raises(SpecError, match="more than the"):
        predict.predict_csv(big, None, table)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"model,hardware,n_prompt,n_gen\nqwen\xff,x,1,1\n")
    with pytest.raises(SpecError, match=r"bad.csv:2: byte 0xff at column 5 is not UTF-8 text"):
        predict.predict_csv(bad, None, table)


def test_kv_and_flash_attention_switches(table):
    g = {"model": "gemma-3-27b", "n_prompt": 512, "n_gen": 0, "n_ctx": 8192, "batch": 4}
    rows = [
        _row(**g),
        _row(**g, kv_unified=0),
        _row(**g, swa_full=1),
        _row(**g, kv_pad=32, flash_attn="off"),
        _row(**g, flash_attn="auto"),
        _row(**g, flash_attn="sometimes"),
    ]
    uni, streams, swa_full, pad32, auto, bad = predict.predict_rows(rows, table)
    m = get_model("gemma-3-27b")
    wl = predict.row_workload(rows[1])
    assert not wl.kv_unified and wl.n_seq == 4
    assert int(streams["kv_bytes"]) == estimate_memory(m, get_quant("Q4_K_M"), get_hardware("rtx-4090"), wl,
                                                       table.memory_for("llama.cpp")).kv_bytes  # fmt: skip
    # 4 streams hold 4 x (1024 + 512) window cells; one unified cache pad256(4 x 1024 + 512) = 4,608
    assert int(uni["kv_bytes"]) < int(streams["kv_bytes"]) < int(swa_full["kv_bytes"])
    assert predict.row_workload(rows[3]).kv_pad == 32 and not predict.row_workload(rows[3]).flash_attn
    assert auto["kv_bytes"] == uni["kv_bytes"] and predict.row_workload(rows[4]).flash_attn
    assert "flash_attn" in bad["error"]
def _serving_row(**kw):
    row = {"model": "llama-3.1-70b", "hardware": "b200", "engine": "vllm", "quant": "FP8", "n_prompt": "1024",
           "n_gen": "1024", "n_devices": "2", "kv_dtype": "fp8", "concurrency": "64"}  # fmt: skip
    row.update(kw)
    return row


def test_serving_row_has_the_serving_outputs_and_not_the_llama_bench_ones(table):
    """A row with a concurrency column is a serving benchmark (estimator.physics.serving), with intervals."""
    from estimator.physics import serving

    (out,) = predict.predict_rows([_serving_row()], table)
    assert out["error"] == ""
    assert out["prefill_tok_s"] == "" and out["decode_tok_s"] == ""
    ttft, tpot, tok, user = (float(out[k]) for k in ("ttft_s", "tpot_s", "output_tok_s", "per_user_tok_s"))
    assert float(out["ttft_s_lo"]) <= ttft <= float(out["ttft_s_hi"])
    assert float(out["tpot_s_lo"]) <= tpot <= float(out["tpot_s_hi"])
    assert float(out["output_tok_s_lo"]) <= tok <= float(out["output_tok_s_hi"])
    assert user == pytest.approx(1 / tpot) and float(out["e2e_s"]) == pytest.approx(ttft + 1023 * tpot)
    wl = Workload(n_ctx=2048, kv_dtype="fp8", engine="vllm", n_devices=2, split="tp", concurrency=64)
    (e,) = serving.estimate_serving(
        get_model("llama-3.1-70b"), get_quant("FP8"), get_hardware("b200"), wl,
        [serving.ServingLoad(64, 1024, 1024)], table,
    )  # fmt: skip
    assert (ttft, tpot, tok) == (e.ttft_s, e.tpot_s, e.output_tok_s)
    # memory is sized for the 64 clients' sequences
    assert int(out["kv_bytes"]) == estimate_memory(
        get_model("llama-3.1-70b"), get_quant("FP8"), get_hardware("b200"), replace(wl, n_seq=64)
    ).kv_bytes


def test_serving_rows_batch_mode_and_bad_input(table):
    rows = [
        _serving_row(mode="batch", concurrency="16"),
        _serving_row(mode="burst"),
        _serving_row(concurrency="0"),
        _serving_row(n_gen="0"),
        _serving_row(offload_bytes=str(2**30)),
        _serving_row(lengths="random"),
    ]
    out = predict.predict_rows(rows, table)
    assert out[0]["error"] == "" and float(out[0]["output_tok_s"]) > 0
    assert "not serve or batch" in out[1]["error"]
    assert "concurrency" in out[2]["error"]
    assert "n_gen" in out[3]["error"]
    assert "host RAM" in out[4]["error"]
    assert "not spread or fixed" in out[5]["error"]
    for row in out[1:]:
        assert row["ttft_s"] == "" and row["tpot_s"] == ""


def test_serving_row_lengths_pick_sglangs_regime(table):
    """SGLang under fixed lengths is a lock-step cohort: its TTFT holds the cohort's prompts and its TPOT is
    shorter than under spread lengths (the default), where prompts interrupt decoding; vLLM mixes prompts into
    its steps and answers the same either way."""
    fixed, spread, v_fixed, v_spread = predict.predict_rows(
        [_serving_row(engine="sglang", lengths="fixed"), _serving_row(engine="sglang"),
         _serving_row(lengths="fixed"), _serving_row()], table
    )  # fmt: skip
    assert all(r["error"] == "" for r in (fixed, spread, v_fixed, v_spread))
    assert float(fixed["ttft_s"]) > float(spread["ttft_s"])
    assert float(fixed["tpot_s"]) < float(spread["tpot_s"])
    assert (v_fixed["ttft_s"], v_fixed["tpot_s"]) == (v_spread["ttft_s"], v_spread["tpot_s"])


def test_n_layers_predicts_the_depth_reduced_proxy(table):
    """The harness measures depth-reduced proxies (the model's first N layers): a row with n_layers sizes and
    times that proxy, and an impossible layer count is the row's error."""
    full, proxy, too_many, zero = predict.predict_rows(
        [_row(n_prompt=0, n_gen=32), _row(n_prompt=0, n_gen=32, n_layers=4),
         _row(n_prompt=0, n_gen=32, n_layers=33), _row(n_prompt=0, n_gen=32, n_layers=0)], table
    )  # fmt: skip
    m = get_model("llama-3.1-8b")
    four = m.depth_proxy(4)
    assert four.n_layers == 4 and four.layer_types == m.layer_types[:4] and four.gguf_tensors is None
    wl = Workload(n_ctx=32, n_prompt=0, n_gen=32)
    hw, mem_coeffs = get_hardware("rtx-4090"), table.memory_for("llama.cpp")
    mem = estimate_memory(four, get_quant("Q4_K_M"), hw, wl, mem_coeffs)
    assert int(proxy["weights_bytes"]) == mem.weights_bytes < int(full["weights_bytes"])
    assert float(proxy["decode_tok_s"]) > float(full["decode_tok_s"])
    assert "n_layers must be in 1..32" in too_many["error"] and too_many["decode_tok_s"] == ""
    assert "n_layers" in zero["error"]


def test_kv_pool_columns_of_a_reserving_engine():
    """vLLM rows carry the KV pool and its concurrency, and what vLLM logs at startup (the memory physics'
    figures, the same the report shows); llama.cpp sizes its cache per slot and leaves them empty."""
    table = prior_table()
    vllm_row = dict(model="gemma-3-27b", hardware="h100-80gb-sxm", engine="vllm", n_prompt="512", n_gen="0",
                    n_ctx="32768")  # fmt: skip
    llama_row = dict(model="llama-3.1-8b", hardware="rtx-4090", n_prompt="512", n_gen="0")
    v, ll = predict.predict_rows([vllm_row, llama_row], table)
    assert v["error"] == "" and ll["error"] == ""
    req = ReportRequest(model="gemma-3-27b", hardware="h100-80gb-sxm", engine="vllm", ctx=32768)
    mem = report_to_dict(make_report(req))["memory"]
    assert int(v["kv_capacity_tokens"]) == mem["kv_capacity_tokens"]
    assert int(v["max_concurrency"]) == mem["max_concurrency"]
    assert int(v["startup_kv_tokens"]) == mem["startup_kv_tokens"]
    assert float(v["startup_max_concurrency"]) == pytest.approx(mem["startup_max_concurrency"], abs=0.005)
    assert float(v["startup_max_concurrency"]) < int(v["max_concurrency"])  # sliding-window layers
    assert [ll[c] for c in ("kv_capacity_tokens", "max_concurrency", "startup_kv_tokens")] == ["", "", ""]
