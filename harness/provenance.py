"""Measurement -> RunRecords with provenance (one record per test; memory fields repeated on each).

Also: the fitbench git sha, the model architecture fingerprint, the tests a PointSpec asks for (so a failed or
skipped point still yields one record per planned test), and records for failed / skipped points.
"""

from __future__ import annotations

import dataclasses
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from estimator.specs import ModelSpec
from harness.hwdetect import HostInfo
from harness.records import SCHEMA_VERSION, RecordError, RunRecord, check_record
from harness.store import record_id, short_hash
from runners.base import Measurement, PointSpec, Test

REPO_ROOT = Path(__file__).resolve().parents[1]

# ModelSpec fields that do not change sizing (names, provenance, notes) and stay out of the fingerprint.
_NOT_SIZING = {
    "id", "name", "hf_id", "arch_class", "license", "source", "verified", "published_total_params",
    "published_active_params", "gguf_path", "notes", "native_dtype", "custom_code",
}  # fmt: skip
# fields added after records were taken: at their defaults they stay out of the fingerprint, so a stored
# point keeps its key (``--resume`` skips it) and its record its fingerprint (nested: per field of the part)
_LATER_DEFAULTS = {"mla": {"index_n_heads": 0, "index_head_dim": 0, "index_topk": 0}}
LATER_TOP_DEFAULTS = {"per_layer_input": 0, "n_kv_shared_layers": 0, "double_wide_mlp": False}


def utc_now() -> str:
    """ISO-8601 UTC timestamp with a Z suffix, second resolution."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def git_sha(repo_root: str | Path = REPO_ROOT) -> str:
    """``git rev-parse HEAD`` of the fitbench checkout; "unknown" outside git."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo_root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return "unknown"
        return sha.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def model_fingerprint(model: ModelSpec) -> str:
    """sha256 (20 hex) of the ModelSpec fields that matter for sizing: widths, layer count and kinds, window,
    MoE / MLA / state layouts, vocab, tied embeddings, qkv bias and the exact GGUF tensor list when known."""
    body = {
        k: v
        for k, v in dataclasses.asdict(model).items()
        if k not in _NOT_SIZING and LATER_TOP_DEFAULTS.get(k, object()) != v
    }
    for key, defaults in _LATER_DEFAULTS.items():
        if isinstance(body.get(key), dict):
            body[key] = {f: v for f, v in body[key].items() if defaults.get(f, object()) != v}
    if isinstance(body.get("state"), dict):
        body["state"].pop("ssm_dtype", None)  # a cache precision (like the KV dtype), not architecture
    return short_hash(body)


@dataclass(frozen=True)
class PlannedTest:
    """A test a PointSpec asks for: kind "pp" (prefill of n_tokens), "tg" (decode of n_tokens) or "serve"
    (``batch`` clients, requests of n_prompt input and n_tokens output tokens)."""

    kind: str
    n_tokens: int
    n_depth: int
    batch: int
    n_prompt: int = 0  # serve tests: input tokens per request


def is_memory_only(spec: PointSpec) -> bool:
    """A point without prompt and gen lengths measures memory only (one record, no speeds)."""
    return not spec.prompt_lengths and not spec.gen_lengths


def memory_sequences(spec: PointSpec) -> int:
    """Sequences of a memory-only point (engine_options ``n_seq``, default 1): the record's batch."""
    return int(spec.engine_options.get("n_seq", 1) or 1)


def planned_tests(spec: PointSpec) -> list[PlannedTest]:
    """pp{n} @ d{depth} for each prompt length x depth; tg{n} @ d{depth} for each gen length x depth at
    batch 1, plus tg at each concurrency > 1 (batched decode); serve (ISL x OSL x C) for each serving
    concurrency, prompt length and gen length.  A memory-only point plans one "mem" record (n_prompt = n_gen =
    0, batch = its sequences)."""
    if is_memory_only(spec):
        return [PlannedTest("mem", 0, 0, memory_sequences(spec))]
    out = [PlannedTest("pp", n, d, 1) for d in spec.depths for n in spec.prompt_lengths]
    for c in sorted(set(spec.concurrencies) | {1}):
        out += [PlannedTest("tg", n, d, c) for d in spec.depths for n in spec.gen_lengths]
    for c in spec.serving_concurrencies:
        out += [PlannedTest("serve", o, 0, c, i) for i in spec.prompt_lengths for o in spec.gen_lengths]
    return out


def _test_id(t: PlannedTest) -> str:
    """The test part of a record id / label: pp, tg, or serve with its input length."""
    return f"serve{t.n_prompt}" if t.kind == "serve" else t.kind


@dataclass(frozen=True)
class PointContext:
    """Everything a record says about one point besides the measurement."""

    point_key: str
    plan_source: str  # plan file (relative to the repo when inside it)
    host: HostInfo
    engine: str
    engine_version: str
    model_id: str
    model: ModelSpec  # the real (full-depth) model
    n_layers_measured: int
    quant: str
    synthetic_weights: bool
    spec: PointSpec
    git_sha: str
    timestamp_utc: str = field(default_factory=utc_now)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])  # one per run of the point
    extra: dict = field(default_factory=dict)


def _base(ctx: PointContext, t: PlannedTest, status: str, error: str = "") -> dict:
    """The record fields every test of a point shares.  flash_attn / n_batch / n_ubatch / n_gpu_layers are
    llama.cpp settings: the vLLM runner does not pass them (vLLM picks its attention backend and batching
    itself), so its records leave them unstated (None) instead of repeating the PointSpec defaults."""
    s = ctx.spec
    llama = ctx.engine == "llama.cpp"
    return dict(
        record_id=record_id(ctx.point_key, _test_id(t), t.n_tokens, t.n_depth, t.batch, ctx.run_id),
        schema_version=SCHEMA_VERSION,
        timestamp_utc=ctx.timestamp_utc,
        origin="measured",
        source=ctx.plan_source,
        fitbench_git_sha=ctx.git_sha,
        host=ctx.host.host,
        engine=ctx.engine,
        engine_version=ctx.engine_version,
        build_info="",
        backend=ctx.host.backend,
        device_name=ctx.host.device_name,
        hardware_id=ctx.host.hardware_id,
        hardware_family=ctx.host.hardware_family,
        n_devices=ctx.host.n_devices,
        driver=ctx.host.driver,
        model_id=ctx.model_id,
        model_fingerprint=model_fingerprint(ctx.model),
        n_layers_real=ctx.model.n_layers,
        n_layers_measured=ctx.n_layers_measured,
        quant=ctx.quant,
        synthetic_weights=ctx.synthetic_weights,
        n_prompt=t.n_tokens if t.kind == "pp" else t.n_prompt,
        n_gen=t.n_tokens if t.kind in ("tg", "serve") else 0,
        n_depth=t.n_depth,
        batch=t.batch,
        n_ctx=s.n_ctx,
        kv_dtype=s.kv_dtype,
        flash_attn=s.flash_attn if llama else None,
        n_threads=s.n_threads,
        n_batch=s.n_batch if llama else None,
        n_ubatch=s.n_ubatch if llama else None,
        n_gpu_layers=s.n_gpu_layers if llama else None,
        status=status,
        error=error,
        extra={
            "point_key": ctx.point_key,
            "run_id": ctx.run_id,
            "test": "memory"
            if t.kind == "mem"
            else f"{_test_id(t)}:{t.n_tokens}x{t.batch}"
            if t.kind == "serve"
            else f"{t.kind}{t.n_tokens}@d{t.n_depth}" + (f"x{t.batch}" if t.batch > 1 else ""),
            "detected": ctx.host.detected,
            "repetitions": s.repetitions,
            "engine_options": dict(s.engine_options),
            **ctx.extra,
        },
    )


def failed_records(ctx: PointContext, status: str, error: str) -> list[RunRecord]:
    """One record per planned test of a point that did not measure (status "failed" or "skipped")."""
    if status not in ("failed", "skipped"):
        raise ValueError(f"status must be failed or skipped, not {status!r}")
    return [RunRecord(**_base(ctx, t, status, error)) for t in planned_tests(ctx.spec)]


def _test_record(ctx: PointContext, m: Measurement, test: Test) -> RunRecord:
    kind = test.kind if test.kind in ("pp", "tg", "mem", "serve") else "tg"
    planned = PlannedTest(kind, test.n_tokens, test.n_depth, test.batch, test.n_prompt)
    row = _base(ctx, planned, "ok")
    if test.kind == "mem":
        pass  # memory only: the speed fields stay empty
    elif test.kind == "serve":  # a closed loop of `batch` clients (runners.vllm): the serving fields
        row.update(
            concurrency=test.batch,
            serving_mode="agg",
            tp_size=int(ctx.spec.engine_options.get("tensor_parallel_size", 1)),
            pp_size=1,
            tpot_s=test.tpot_s,
            e2e_latency_s=test.e2e_latency_s,
            ttft_p50_s=test.ttft_p50_s,
            ttft_p99_s=test.ttft_p99_s,
            tpot_p50_s=test.tpot_p50_s,
            tpot_p99_s=test.tpot_p99_s,
            output_tok_s=test.mean_tok_s,
        )
        row["extra"]["serving_requests"] = test.n_requests
    elif test.kind == "pp":
        row.update(
            prefill_tok_s=test.mean_tok_s,
            prefill_tok_s_std=test.std_tok_s,
            prefill_samples_tok_s=tuple(test.samples_tok_s),
        )
    elif test.kind == "tg":
        row.update(
            decode_tok_s=test.mean_tok_s,
            decode_tok_s_std=test.std_tok_s,
            decode_samples_tok_s=tuple(test.samples_tok_s),
        )
    else:  # an engine-specific test kind keeps its numbers in extra, never in the pp/tg fields
        row["extra"]["other_test"] = dataclasses.asdict(test)
    row.update(
        engine=m.engine or ctx.engine,
        engine_version=m.engine_version or ctx.engine_version,
        build_info=m.build_info,
        backend=m.backend or ctx.host.backend,
        weights_bytes=m.weights_bytes,
        kv_bytes=m.kv_bytes,
        compute_bytes=m.compute_bytes,
        output_bytes=m.output_bytes,
        device_total_bytes=m.device_total_bytes,
        host_rss_bytes=m.host_rss_bytes,
        ttft_s=test.ttft_s,
        n_threads=m.n_threads if m.n_threads is not None else ctx.spec.n_threads,
    )
    row["record_id"] = record_id(
        ctx.point_key,
        _test_id(planned) if test.kind == "serve" else test.kind,
        test.n_tokens,
        test.n_depth,
        test.batch,
        ctx.run_id,
    )
    row["extra"].update(m.extra)
    if m.n_params is not None:
        row["extra"]["n_params"] = m.n_params
    return RunRecord(**row)


def records_from_measurement(ctx: PointContext, m: Measurement) -> list[RunRecord]:
    """One ok record per test of ``m``; a memory-only point gives one record with its memory and no speeds;
    any other measurement without tests, or one with a value no record may hold (NaN, a negative speed or
    size: ``harness.records.check_record``), is a failed point saying why."""
    if is_memory_only(ctx.spec):
        return [_test_record(ctx, m, Test("mem", 0, 0, memory_sequences(ctx.spec), (), 0.0, 0.0))]
    if not m.tests:
        return failed_records(ctx, "failed", "runner returned no tests\n" + m.log_tail[-2000:])
    records = [_test_record(ctx, m, t) for t in m.tests]
    try:
        for rec in records:
            check_record(rec)
    except RecordError as exc:
        return failed_records(ctx, "failed", f"runner returned an impossible measurement: {exc}")
    return records


def measurement_from_dict(raw: dict) -> Measurement:
    """Build a Measurement from the child's JSON (tests as a list of objects; unknown keys ignored)."""
    known = {f.name for f in dataclasses.fields(Measurement)}
    test_known = {f.name for f in dataclasses.fields(Test)}
    data = {k: v for k, v in raw.items() if k in known}
    tests = []
    for t in raw.get("tests") or ():
        td = {k: v for k, v in t.items() if k in test_known}
        td["samples_tok_s"] = tuple(td.get("samples_tok_s") or ())
        tests.append(Test(**td))
    data["tests"] = tuple(tests)
    data.setdefault("extra", {})
    return Measurement(**data)


def spec_to_dict(spec: PointSpec) -> dict:
    """PointSpec as the child reads it: its fields, tuples as lists."""
    out = dataclasses.asdict(spec)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}
