"""Imports: the REAL llama-bench / vLLM bench fixtures (and JSONL / CSV variants derived from them), the
published measurements, and rejection of malformed files with their first offending line."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from estimator.catalog.resolve import resolve_hardware, resolve_model
from estimator.specs import GIB
from harness.importers import ImportContext, ImportFormatError, import_file, quant_from_model_type
from harness.records import record_from_dict, record_to_dict

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "reference"
LB_JSON = SHARED / "fixtures" / "llama-bench-cpu.json"
VLLM_JSON = SHARED / "fixtures" / "vllm-bench-latency-cpu.json"
PUBLISHED = SHARED / "published" / "published_measurements.csv"

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/reference not beside the repo")


def ctx(**kw) -> ImportContext:
    base = dict(source="fixture", resolve_hardware=resolve_hardware, resolve_model=resolve_model)
    return ImportContext(**{**base, **kw})


def _key(r):
    return (r.n_prompt, r.n_gen, r.n_depth, r.prefill_tok_s, r.decode_tok_s, r.prefill_samples_tok_s,
            r.decode_samples_tok_s, r.weights_bytes, r.n_threads, r.kv_dtype)  # fmt: skip


def test_llama_bench_json_fixture_round_trip():
    raw = json.loads(LB_JSON.read_text())
    hw = resolve_hardware("ryzen-9-7950x")
    fmt, recs = import_file(LB_JSON, ctx=ctx(hardware=hw))
    assert fmt == "llama-bench" and len(recs) == len(raw)
    for obj, r in zip(raw, recs, strict=True):
        assert r.origin == "imported" and r.engine == "llama.cpp" and r.engine_version == obj["build_commit"]
        assert r.hardware_family == "cpu-x86-avx512" and r.hardware_id == "ryzen-9-7950x"
        assert r.weights_bytes == obj["model_size"] and r.extra["raw"] == obj
        assert r.quant == quant_from_model_type(obj["model_type"]) and r.quant in ("F16", "Q4_K_M", "Q8_0")
        assert r.n_ctx % 256 == 0 and r.n_ctx >= obj["n_prompt"] + obj["n_gen"] + obj["n_depth"]
        if obj["n_gen"] == 0:
            assert r.prefill_tok_s == obj["avg_ts"] and r.prefill_samples_tok_s == tuple(obj["samples_ts"])
            assert r.decode_tok_s is None
        else:
            assert r.decode_tok_s == obj["avg_ts"] and r.decode_tok_s_std == obj["stddev_ts"]
        assert record_from_dict(json.loads(json.dumps(record_to_dict(r)))) == r
    pp = next(r for r in recs if r.n_prompt == 256 and r.n_depth == 0)
    assert pp.prefill_tok_s == pytest.approx(26836.514964)  # the verified run quoted in methods.md A2


def test_llama_bench_jsonl_and_csv_variants_match_json(tmp_path):
    raw = json.loads(LB_JSON.read_text())
    _, ref = import_file(LB_JSON, ctx=ctx())
    jsonl = tmp_path / "lb.jsonl"
    jsonl.write_text("".join(json.dumps(o) + "\n" for o in raw))
    csv_path = tmp_path / "lb.csv"  # llama-bench -o csv: header, quoted strings, no sample lists
    fields = [k for k in raw[0] if k not in ("samples_ns", "samples_ts")] + ["extra_future_field"]
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, quoting=csv.QUOTE_ALL, extrasaction="ignore")
        w.writeheader()
        for o in raw:
            w.writerow({k: str(v).lower() if isinstance(v, bool) else v for k, v in o.items()})
    _, from_jsonl = import_file(jsonl, ctx=ctx())
    assert [_key(r) for r in from_jsonl] == [_key(r) for r in ref]
    fmt, from_csv = import_file(csv_path, ctx=ctx())
    assert fmt == "llama-bench"
    strip = lambda k: k[:5] + k[7:]  # noqa: E731  (CSV carries no per-sample lists)
    assert [strip(_key(r)) for r in from_csv] == [strip(_key(r)) for r in ref]


def test_llama_bench_older_schema_backend_flags_and_bool_flash_attn(tmp_path):
    """Before the ``backends`` field (late 2024) llama-bench wrote one bool per backend, and before mid-2025
    flash_attn was a bool (JSON true/false, CSV "0"/"1"); newer rows say -1 for auto."""
    old = {"build_commit": "3f1ae2e3", "build_number": 3400, "cuda": True, "vulkan": False, "kompute": False,
           "metal": False, "sycl": False, "rpc": "0", "gpu_blas": True, "blas": True, "cpu_info": "x",
           "gpu_info": "NVIDIA GeForce RTX 4090", "model_filename": "m.gguf", "model_type": "llama 7B Q4_0",
           "model_size": 3825065984, "n_threads": 16, "type_k": "f16", "n_gpu_layers": 99, "flash_attn": True,
           "n_prompt": 512, "n_gen": 0, "avg_ts": 12000.5, "stddev_ts": 20.1}  # fmt: skip
    cpu = {**old, "cuda": False, "flash_attn": False}
    new = {k: v for k, v in old.items() if k not in ("cuda", "vulkan", "kompute", "metal", "sycl", "rpc")}
    new.update(backends="CUDA", flash_attn=-1, n_depth=0)
    p = tmp_path / "lb.jsonl"
    p.write_text("".join(json.dumps(o) + "\n" for o in (old, cpu, new)))
    _, (r_old, r_cpu, r_new) = import_file(p, ctx=ctx())
    assert (r_old.backend, r_old.flash_attn) == ("CUDA", True)
    assert (r_cpu.backend, r_cpu.flash_attn) == ("CPU", False)
    assert (r_new.backend, r_new.flash_attn) == ("CUDA", None)  # auto: not stated
    c = tmp_path / "lb.csv"
    with c.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(old), quoting=csv.QUOTE_ALL)
        w.writeheader()
        w.writerow({k: str(v).lower() if isinstance(v, bool) else v for k, v in old.items()})
        w.writerow({k: str(int(v)) if isinstance(v, bool) else v for k, v in cpu.items()})  # C++ to_string
    _, (c_old, c_cpu) = import_file(c, ctx=ctx())
    assert (c_old.backend, c_old.flash_attn) == ("CUDA", True)
    assert (c_cpu.backend, c_cpu.flash_attn) == ("CPU", False)
    p.write_text(json.dumps({**new, "flash_attn": "sometimes"}) + "\n")
    with pytest.raises(ImportFormatError, match=r"lb.jsonl:1: flash_attn = 'sometimes'"):
        import_file(p, ctx=ctx())


def test_vllm_bench_latency_fixture():
    raw = json.loads(VLLM_JSON.read_text())
    fmt, recs = import_file(VLLM_JSON, ctx=ctx(input_len=32, output_len=8, batch_size=1))
    assert fmt == "vllm-bench" and len(recs) == 1
    r = recs[0]
    assert r.engine == "vllm" and r.model_id == raw["model_id"]
    assert (r.n_prompt, r.n_gen, r.batch) == (32, 8, 1)
    assert r.extra["latencies_s"] == raw["latencies"] and r.extra["avg_latency_s"] == raw["avg_latency"]
    assert r.extra["e2e_output_tok_s"] == pytest.approx(8 / raw["avg_latency"])
    assert r.prefill_tok_s is None and r.decode_tok_s is None and "workload_assumed" not in r.extra
    _, again = import_file(VLLM_JSON, ctx=ctx())
    assert "workload_assumed" in again[0].extra and again[0].batch == 8


def test_vllm_bench_throughput(tmp_path):
    p = tmp_path / "tp.json"
    p.write_text(json.dumps({"elapsed_time": 2.0, "num_requests": 10, "total_num_tokens": 2000,
                             "requests_per_second": 5.0, "tokens_per_second": 1000.0}))  # fmt: skip
    _, (r,) = import_file(p, ctx=ctx())
    assert r.extra["bench"] == "throughput" and r.extra["total_tok_s"] == 1000.0 and r.batch == 10


def test_published_measurements_import():
    _, recs = import_file(PUBLISHED, ctx=ctx(timestamp_utc="2026-01-01T00:00:00Z"))
    with PUBLISHED.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(recs) == len(rows) and len({r.record_id for r in recs}) == len(recs)
    by_row = {r.extra["published"]["row_id"]: r for r in recs}
    for row in rows[:300]:
        r = by_row[row["row_id"]]
        assert r.source == row["source_url"] and r.extra["quality"] == row["quality"]
        v = float(row["value"])
        if row["metric"] == "weights_gib":
            assert r.weights_bytes == round(v * GIB)
        elif row["metric"] == "pp_tps":
            assert r.prefill_tok_s == v
        elif row["metric"] == "tg_tps":
            assert r.decode_tok_s == v
    fams = {r.hardware_family for r in recs}
    assert {"nvidia-ampere", "apple-m2", "cpu-x86-avx2"} <= fams
    assert sum(1 for r in recs if r.model_fingerprint) > 0.9 * len(recs)


@pytest.mark.parametrize(
    ("name", "content", "line", "message"),
    [
        ("bad.jsonl", '{"n_prompt": 1, "n_gen": 0, "avg_ts": 5}\n\n{"n_prompt": 1, "n_gen": 0}\n', 3,
         "avg_ts"),
        ("bad2.jsonl", '{"n_prompt": 1, "n_gen": 0, "avg_ts": 5}\n{not json\n', 2, "not valid JSON"),
        ("bad.json",
         '[\n {"n_prompt": 64, "n_gen": 0, "avg_ts": 5},\n {"n_prompt": "x", "n_gen": 0, "avg_ts": 1}\n]',
         3, "bad value"),
        ("bad.csv", '"n_prompt","n_gen","avg_ts"\n"64","0","5"\n"64","0","fast"\n', 3, "bad value"),
        ("other.csv", "a,b\n1,2\n", 1, "unrecognized CSV header"),
        ("lat.json", '{"avg_latency": 1.0, "latencies": []}', 1, "non-empty list"),
        ("neg.json",
         '[{"n_prompt": 64, "n_gen": 0, "avg_ts": 5},\n {"n_prompt": 64, "n_gen": 0, "avg_ts": -5}]', 2,
         "avg_ts = -5.0 is not a positive"),
        ("nan.jsonl", '{"n_prompt": 64, "n_gen": 0, "avg_ts": NaN}\n', 1, "avg_ts = nan"),
        ("std.jsonl", '{"n_prompt": 64, "n_gen": 0, "avg_ts": 5, "stddev_ts": -1}\n', 1, "stddev_ts = -1.0"),
        ("samp.jsonl", '{"n_prompt": 64, "n_gen": 0, "avg_ts": 5, "samples_ts": ["a", 1]}\n', 1,
         "samples_ts holds a value that is not a positive number"),
        ("samp2.jsonl", '{"n_prompt": 64, "n_gen": 0, "avg_ts": 5, "samples_ts": 5}\n', 1,
         "samples_ts is not a list"),
        ("samp3.jsonl", '{"n_prompt": 64, "n_gen": 0, "avg_ts": 5, "samples_ts": [5, 0]}\n', 1,
         "samples_ts holds"),
        ("samp.csv", '"n_prompt","n_gen","avg_ts","samples_ts"\n"64","0","5","[5, x]"\n', 2,
         "samples_ts holds"),
    ],
)  # fmt: skip
def test_malformed_files_name_their_line(tmp_path, name, content, line, message):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(ImportFormatError, match=rf"{name}:{line}: .*{message}"):
        import_file(p, ctx=ctx())


def test_published_bad_row_names_line(tmp_path):
    with PUBLISHED.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [next(reader) for _ in range(8)]
    rows[2]["metric"] = "weights_tib"  # third data row = line 4 (no row of the first 8 spans lines)
    bad = tmp_path / "pub.csv"
    with bad.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ImportFormatError, match=r"pub.csv:4: unknown metric 'weights_tib'"):
        import_file(bad, ctx=ctx())


def test_published_bad_flash_attn_names_line(tmp_path):
    with PUBLISHED.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = [next(reader) for _ in range(3)]
    rows[1]["flash_attn"] = "yes"
    bad = tmp_path / "pub.csv"
    with bad.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ImportFormatError, match=r"pub.csv:3: flash_attn = 'yes' is not 0, 1 or empty"):
        import_file(bad, ctx=ctx())


def test_cli_malformed_samples_exit_2_without_traceback(tmp_path):
    bad = tmp_path / "lb.json"
    bad.write_text('[{"n_prompt": 64, "n_gen": 0, "avg_ts": 5, "samples_ts": ["a"]}]')
    argv = [sys.executable, "-m", "harness", "import", str(bad), "--results", str(tmp_path / "r")]
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "lb.json:1:" in res.stderr, res.stderr
    assert not (tmp_path / "r").exists()


def test_cli_rejects_malformed_import_and_leaves_results_unchanged(tmp_path):
    results = tmp_path / "results"
    argv = [sys.executable, "-m", "harness", "import", str(LB_JSON), "--results", str(results)]
    good = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    before = {p.name: p.read_bytes() for p in (results / "runs").iterdir()}
    bad = tmp_path / "llama-bench-cpu.jsonl"  # same stem as the good import: would append to that file
    rows = [json.dumps(o) for o in json.loads(LB_JSON.read_text())]
    bad.write_text(rows[0] + "\n" + rows[1] + "\n" + '{"n_prompt": 5}\n')
    res = subprocess.run([sys.executable, "-m", "harness", "import", str(bad), "--results", str(results)],
                         cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and ":3:" in res.stderr
    assert "Traceback" not in res.stderr
    assert {p.name: p.read_bytes() for p in (results / "runs").iterdir()} == before
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0 and "imported 0" in again.stdout  # idempotent


def test_quant_from_model_type():
    assert quant_from_model_type("llama 8B Q4_K - Medium") == "Q4_K_M"
    assert quant_from_model_type("llama ?B F16") == "F16"
    assert quant_from_model_type("qwen3moe 30B.A3B Q8_0") == "Q8_0"
    assert quant_from_model_type("llama 7B IQ4_XS - 4.25 bpw") == "IQ4_XS"
    assert quant_from_model_type("llama") == ""
