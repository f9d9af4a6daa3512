"""Property-based fuzzing of every external input (issue 14: 4), with Hypothesis.

For each input — config.json (as a dict and as text), GGUF files (metadata written with the ``gguf`` package,
then truncated or corrupted), ``predict`` rows, plan TOML and the page's query parameters — the only allowed
outcomes are a valid result or the boundary's clean error (one line: ``SpecError``, ``PlanError``,
``ParamError``; for ``predict`` an ``error`` cell).  Anything else — a traceback of another type, a message
of several lines, a non-finite number in a result — fails the test with the input that caused it.

The example counts are bounded and the search is derandomized (``FUZZ``), so CI stays fast and repeatable;
raise ``FITBENCH_FUZZ_EXAMPLES`` to search longer locally, and set ``FITBENCH_FUZZ_RANDOM=1`` for a new random
search each run.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimator.app.params import DEFAULTS, ParamError, parse_params
from estimator.app.predict import OUTPUT_COLUMNS, predict_rows
from estimator.catalog.ggufmodel import load_gguf
from estimator.catalog.hfconfig import CONFIG_NUMBERS, load_hf_config, spec_from_config
from estimator.physics.coefficients import prior_table
from estimator.specs import ModelSpec, SpecError
from harness.plan import PlanError, parse_plan
from tests.gguf_files import write_tiny_gguf

EXAMPLES = int(os.environ.get("FITBENCH_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("FITBENCH_FUZZ_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Values a careless or hostile file holds where a number is expected.
hostile_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 3, 7, 64, 2**31, 2**63, 10**12, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1e308, -0.0, 4096.0]),
)
hostile_values = st.one_of(
    hostile_numbers,
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.lists(st.one_of(st.integers(-5, 300), st.booleans(), st.text(max_size=3)), max_size=6),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)

BASE_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}
CONFIG_KEYS = sorted(
    set(CONFIG_NUMBERS)
    | {"layer_types", "hybrid_override_pattern", "no_rope_layers", "use_sliding_window",
       "quantization_config",
       "text_config", "tie_word_embeddings", "torch_dtype", "model_type", "hidden_act", "attention_bias"}
)  # fmt: skip


def _one_line(exc: Exception) -> None:
    text = str(exc)
    assert text and "\n" not in text.strip(), f"not one line: {text!r}"


def _usable(spec: ModelSpec) -> None:
    """A spec the loader accepted must size without error (weights, KV, memory of a small workload)."""
    from estimator.catalog.data import get_hardware
    from estimator.physics.memory import estimate_memory
    from estimator.physics.quant import get_quant
    from estimator.specs import Workload

    mem = estimate_memory(
        spec, get_quant("Q8_0"), get_hardware("rtx-4090"), Workload(n_ctx=min(1024, spec.max_context))
    )
    assert math.isfinite(mem.total_bytes) and mem.total_bytes >= 0


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), hostile_values, max_size=5))
def test_fuzz_config_dict(changes):
    cfg = {**BASE_CONFIG, **changes}
    try:
        spec = spec_from_config(cfg, "fuzz/config.json")
    except SpecError as exc:
        _one_line(exc)
        assert str(exc).startswith("fuzz/config.json")
        return
    _usable(spec)


json_text = st.one_of(
    st.text(max_size=200),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
        lambda kids: st.one_of(
            st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=5), kids, max_size=4)
        ),
        max_leaves=30,
    ).map(lambda v: __import__("json").dumps(v)),  # json writes NaN / Infinity for non-finite floats
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
)


@FUZZ
@given(text=json_text)
def test_fuzz_config_text(text):
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(text)
        try:
            spec = load_hf_config(d)
        except SpecError as exc:
            _one_line(exc)
            return
        _usable(spec)


# --- GGUF ---------------------------------------------------------------------------------------------------

GGUF_KEYS = [
    "llama.context_length", "llama.block_count", "llama.attention.head_count",
    "llama.attention.head_count_kv", "llama.attention.key_length", "llama.feed_forward_length",
    "llama.expert_count", "llama.expert_used_count", "llama.attention.sliding_window",
    "llama.attention.sliding_window_pattern", "llama.full_attention_interval",
    "llama.ssm.conv_kernel", "llama.attention.kv_lora_rank", "llama.vocab_size", "general.name",
    "llama.leading_dense_block_count", "llama.rope.dimension_count",
]  # fmt: skip
gguf_values = st.one_of(
    st.integers(min_value=-(2**62), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, 4, 16, 2048, 2**31]),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.text(max_size=20),
    st.booleans(),
    st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), min_size=1, max_size=4),
)


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory) -> bytes:
    return write_tiny_gguf(tmp_path_factory.mktemp("fuzz") / "t.gguf").read_bytes()


def _load(path: Path) -> None:
    try:
        spec = load_gguf(path)
    except SpecError as exc:
        _one_line(exc)
        return
    _usable(spec)


@FUZZ
@given(metadata=st.dictionaries(st.sampled_from(GGUF_KEYS), gguf_values, max_size=4))
def test_fuzz_gguf_metadata(metadata):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.gguf"
        try:
            write_tiny_gguf(path, extra=metadata)
        except (ValueError, TypeError, OverflowError):
            return  # a value the gguf package itself cannot write (not an input anyone can give us)
        _load(path)


@settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_gguf_truncated_or_corrupted(gguf_bytes, data):
    raw = bytearray(gguf_bytes)
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    edits = data.draw(
        st.lists(st.tuples(st.integers(0, 2000), st.binary(min_size=1, max_size=8)), max_size=4),
        label="edits",
    )
    for offset, chunk in edits:
        raw[offset : offset + len(chunk)] = chunk
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.gguf"
        path.write_bytes(bytes(raw[:cut] if data.draw(st.booleans(), label="truncate") else raw))
        _load(path)


# --- predict ------------------------------------------------------------------------------------------------

PREDICT_COLUMNS = [
    "model", "hardware", "engine", "quant", "kv_dtype", "n_prompt", "n_gen", "n_depth", "batch", "n_ctx",
    "flash_attn", "split", "n_ubatch", "n_batch", "n_devices", "offload_bytes", "moe_offload_layers",
    "memory_gib", "bandwidth_gbs", "tflops", "family", "kind", "host_bandwidth_gbs", "interconnect_gbs",
]  # fmt: skip
cell_text = st.one_of(
    st.text(max_size=12),
    hostile_numbers.map(str),
    st.sampled_from(["", "qwen3-0.6b", "rtx-4090", "custom", "Q8_0", "vllm", "pp", "1e12", "nan", "-1", "0"]),
)


@FUZZ
@given(rows=st.lists(st.dictionaries(st.sampled_from(PREDICT_COLUMNS), cell_text, max_size=10), min_size=1,
                     max_size=3))  # fmt: skip
def test_fuzz_predict_rows(rows):
    table = prior_table()
    base = {"model": "qwen3-0.6b", "hardware": "rtx-4090", "n_prompt": "64", "n_gen": "16"}
    out = predict_rows([{**base, **r} for r in rows], table)
    assert len(out) == len(rows)
    for r in out:
        if r["error"]:
            assert "\n" not in r["error"]
            assert all(r[c] == "" for c in OUTPUT_COLUMNS if c != "error")
        else:
            for c in ("weights_bytes", "kv_bytes", "total_bytes", "prefill_tok_s", "decode_tok_s"):
                if r[c] != "":
                    assert math.isfinite(float(r[c])) and float(r[c]) >= 0, (c, r[c])


# --- plans --------------------------------------------------------------------------------------------------

PLAN_KEYS = [
    "name", "timeout_s", "build_timeout_s", "repetitions", "contexts", "prompt_lengths", "gen_lengths",
    "depths", "concurrencies", "kv_dtypes", "flash_attn", "threads", "n_batch", "n_ubatch", "n_gpu_layers",
    "seed", "layers", "engine_options", "quants", "models", "engines",
]  # fmt: skip
toml_scalar = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
toml_value = st.one_of(
    toml_scalar, st.lists(st.one_of(st.integers(-5, 10**9), st.text(max_size=8)), max_size=4)
)


def _toml(value) -> str:
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_toml(v) for v in value) + "]"


@FUZZ
@given(
    top=st.dictionaries(st.sampled_from(PLAN_KEYS), toml_value, max_size=4),
    options=st.dictionaries(st.sampled_from(["swa_full", "use_mmap", "bogus", "kv_cache_memory_bytes"]),
                            toml_scalar, max_size=2),
)  # fmt: skip
def test_fuzz_plan_toml(top, options):
    body = {"engines": ["llama.cpp"], "models": ["qwen3-0.6b"], "quants": ["Q8_0"], "contexts": [1024],
            "prompt_lengths": [64], "gen_lengths": [16], **top}  # fmt: skip
    if options:
        body["engine_options"] = options
    text = "\n".join(f"{k} = {_toml(v)}" for k, v in body.items())
    try:
        plan = parse_plan(text, "fuzz.toml")
    except PlanError as exc:
        _one_line(exc)
        return
    from estimator.validate import check_name

    check_name(plan.name, "name")  # an accepted plan's name is a usable file name
    assert all(0 < p.timeout_s < math.inf for p in plan.points)


@FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_plan_text(text):
    try:
        parse_plan(text, "fuzz.toml")
    except PlanError as exc:
        _one_line(exc)


# --- the page's query parameters ----------------------------------------------------------------------------

query_values = st.one_of(
    st.text(max_size=20),
    hostile_numbers.map(str),
    st.sampled_from(
        ["/root/.ssh", "../x", "/etc/passwd", "qwen3-0.6b", "1e300", "nan", "-1", "llama.cpp", "es"]
    ),
)


@FUZZ
@given(
    query=st.dictionaries(
        st.sampled_from([*DEFAULTS, "x", "callback"]),
        st.lists(query_values, min_size=1, max_size=2),
        max_size=6,
    )
)
def test_fuzz_page_params(query):
    try:
        params = parse_params(query)
    except ParamError as exc:
        _one_line(exc)
        return
    from estimator.validate import BOUNDS

    assert BOUNDS["devices"].holds(params.devices)
    assert params.ctx is None or BOUNDS["ctx"].holds(params.ctx)  # None: the request's default context
    assert math.isfinite(params.offload_gib)


@pytest.fixture(scope="module")
def page():
    """A page server that is never started: its handler logic is called through HTTP on 127.0.0.1 below."""
    import threading

    from estimator.app.serve import make_server

    def fake_report(params):
        return {"model": {"id": params.model}, "hardware": {}, "workload": {}, "quant": params.quant}

    srv = make_server("127.0.0.1", 0, report_fn=fake_report, results_dir=None)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@settings(FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    path=st.sampled_from(["/api/report", "/fragment", "/", "/healthz", "/nope"]),
    query=st.text(max_size=120),
    host=st.sampled_from([None, "127.0.0.1", "localhost:1", "evil.example"]),
)
def test_fuzz_page_requests(page, path, query, host):
    """Raw query strings over HTTP (127.0.0.1 only): 200, 400, 403, 404 or 503 — never 500, never more than
    one line of error text."""
    import http.client
    from urllib.parse import quote

    conn = http.client.HTTPConnection("127.0.0.1", page.server_address[1], timeout=30)
    try:
        conn.putrequest("GET", f"{path}?{quote(query, safe='=&%+')}", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
    finally:
        conn.close()
    assert resp.status in (200, 400, 403, 404, 503), (resp.status, body[:300])
    if resp.status != 200:
        assert "\n" not in body.strip() and "Traceback" not in body
