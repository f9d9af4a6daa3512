"""How one record is named and shown in a line: its test (llama-bench style), engine, model, speed, memory.

Used by the sweep's per-point lines (``harness.announce``) and by ``python -m harness show``
(``harness.show``), so a record reads the same in both.

Test labels (llama-bench's names): ``pp512`` (prefill of 512 prompt tokens), ``tg128`` (128 generated tokens),
``pp512+tg128`` (both in one run, llama-bench ``-pg``), ``@d4096`` when run on top of 4096 tokens of context,
`` x4`` for 4 concurrent sequences; ``mem c1024`` a memory-only point of 1024 context tokens per sequence;
``serve c8 512/128`` a serving benchmark of 8 clients sending 512-token prompts for 128 output tokens.
Speeds are tokens per second (``*_tok_s``), memory bytes shown in GiB (2^30 B).
"""

from __future__ import annotations

from harness.records import RunRecord

GIB = 2**30
KINDS = ("pp", "tg", "mem", "serve")  # what ``--test`` selects; a pp+tg record is both pp and tg


def test_kinds(rec: RunRecord) -> tuple[str, ...]:
    """The kinds of test the record holds: ("serve",), ("mem",), ("pp",), ("tg",) or ("pp", "tg").

    A serving benchmark states its concurrency; a memory-only point says so in ``extra`` (or holds no speed
    and no token counts); otherwise the speeds it holds decide, and for a record without speeds (failed,
    skipped) its workload (n_prompt, n_gen)."""
    extra = rec.extra if isinstance(rec.extra, dict) else {}
    if rec.concurrency is not None or rec.serving_mode:
        return ("serve",)
    if extra.get("memory_only") or extra.get("test") == "memory":
        return ("mem",)
    kinds = tuple(k for k, v in (("pp", rec.prefill_tok_s), ("tg", rec.decode_tok_s)) if v is not None)
    if kinds:
        return kinds
    kinds = tuple(k for k, n in (("pp", rec.n_prompt), ("tg", rec.n_gen)) if n > 0)
    return kinds or ("mem",)


def test_label(rec: RunRecord) -> str:
    """llama-bench style name of the record's test (module doc): pp512, tg128@d4096 x4, mem c1024, ..."""
    kinds = test_kinds(rec)
    if kinds == ("serve",):
        return f"serve c{rec.concurrency or rec.batch} {rec.n_prompt}/{rec.n_gen}"
    batch = f" x{rec.batch}" if rec.batch > 1 else ""
    if kinds == ("mem",):
        return f"mem c{rec.n_ctx}{batch}"
    parts = [f"pp{rec.n_prompt}" if k == "pp" else f"tg{rec.n_gen}" for k in kinds]
    depth = f"@d{rec.n_depth}" if rec.n_depth else ""
    return "+".join(parts) + depth + batch


def engine_label(rec: RunRecord) -> str:
    """Engine and backend, with the threads of a CPU run and the device count: "llama.cpp CPU t=2"."""
    out = " ".join(x for x in (rec.engine, rec.backend) if x)
    if rec.n_threads and rec.backend.upper() in ("CPU", ""):
        out += f" t={rec.n_threads}"
    if rec.n_devices > 1:
        out += f" x{rec.n_devices}"
    return out


def model_label(rec: RunRecord) -> str:
    """The model id, with the layers run when a depth-reduced proxy was measured: "qwen3-0.6b (2/28 L)"."""
    name = rec.model_id or "(unknown model)"
    real, run = rec.n_layers_real, rec.n_layers_measured
    return f"{name} ({run}/{real} L)" if 0 < run < real else name


def device_label(rec: RunRecord) -> str:
    """Where it ran: "host / device" for own runs, the catalog id or device name for imports."""
    device = rec.hardware_id or rec.device_name or rec.hardware_family or "?"
    return f"{rec.host} / {device}" if rec.host else device


def speed(rec: RunRecord) -> tuple[str, float | None, float | None]:
    """(what, mean tok/s, standard deviation tok/s) of the record's headline speed: the decode speed of a
    tg (or pp+tg) test, the prefill speed of a pp test, the output throughput of a serving benchmark; else
    the throughput it states (output, then total tokens / wall time: a published batch latency run);
    ("", None, None) when it holds none."""
    kinds = test_kinds(rec)
    if "tg" in kinds and rec.decode_tok_s is not None:
        return "decode", rec.decode_tok_s, rec.decode_tok_s_std
    if "pp" in kinds and rec.prefill_tok_s is not None:
        return "prefill", rec.prefill_tok_s, rec.prefill_tok_s_std
    if rec.output_tok_s is not None:
        return "output", rec.output_tok_s, None
    if rec.total_tok_s is not None:
        return "total", rec.total_tok_s, None
    return "", None, None


def latency_text(rec: RunRecord) -> str:
    """The latencies a record states, in one cell: "TTFT 120 ms, TPOT 12.3 ms", "e2e 3.21 s"; "" if none."""
    stated = (("TTFT", rec.ttft_s), ("TPOT", rec.tpot_s), ("ITL", rec.itl_s))
    parts = [f"{name} {value * 1000:,.1f} ms" for name, value in stated if value is not None]
    if rec.e2e_latency_s is not None:
        parts.append(f"e2e {rec.e2e_latency_s:,.3g} s")
    return ", ".join(parts)


def _sum(*values: int | None) -> int | None:
    """Sum of the stated values; None when none is stated."""
    stated = [v for v in values if v is not None]
    return sum(stated) if stated else None


def engine_buffers_bytes(rec: RunRecord) -> tuple[int | None, int | None]:
    """(weights + KV, compute + output buffers) as the engine reported them, bytes; None where unstated."""
    return _sum(rec.weights_bytes, rec.kv_bytes), _sum(rec.compute_bytes, rec.output_bytes)


def memory_bytes(rec: RunRecord) -> int | None:
    """The record's memory figure, bytes: the device total when measured (NVML), else the engine's buffers
    (weights + KV + compute + output), else None."""
    if rec.device_total_bytes is not None:
        return rec.device_total_bytes
    return _sum(*engine_buffers_bytes(rec))


def number(x: float) -> str:
    """A speed or estimate with thousands separators and about 4 significant digits: 1,234, 123.4, 9.87."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def mean_sd(mean: float, sd: float | None, unit: str = "tok/s") -> str:
    """llama-bench's "mean ± sd" (sd left out when unknown): "1,234.56 ± 12.34 tok/s"."""
    text = f"{mean:,.2f}"
    if sd is not None:
        text += f" ± {sd:,.2f}"
    return f"{text} {unit}".rstrip()


def gib(n_bytes: float) -> str:
    """Bytes as GiB with 3 decimals: "0.605 GiB"."""
    return f"{n_bytes / GIB:,.3f} GiB"


def signed_pct(fraction: float) -> str:
    """A signed percentage with a true minus sign: "+4.6 %", "−4.4 %"."""
    return f"{'−' if fraction < 0 else '+'}{abs(fraction) * 100:.1f} %"
