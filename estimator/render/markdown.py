"""Markdown rendering of the JSON report, and the section tables the text renderer shares.

``report_sections(d)`` turns the dict of ``estimator.report.model.report_to_dict`` into an ordered list of
``Section`` (a key, a title, lines of prose and tables of strings); ``render_markdown`` and
``estimator.render.text`` both render that list, so the terminal and Markdown reports show the same numbers.
Memory is shown in GiB (2^30 B) and GB (10^9 B), each labelled; speeds are labelled estimated, with their
interval and the coefficient set they came from.
"""

from __future__ import annotations

GIB = 2**30
GB = 10**9
SECTION_KEYS = (
    "summary",
    "model",
    "memory",
    "kv",
    "context",
    "quant",
    "speed",
    "multi_device",
    "cost",
    "finetune",
    "recommendations",
    "launch",
    "notes",
)


class Table:
    """A table of strings (plain class, not a dataclass: no code generation at import)."""

    __slots__ = ("headers", "rows", "caption")

    def __init__(self, headers: list[str], rows: list[list[str]], caption: str = ""):
        self.headers, self.rows, self.caption = headers, rows, caption


class Section:
    """One report section: prose lines, tables, shell commands (label, text) and notes shown after them."""

    __slots__ = ("key", "title", "lines", "tables", "code", "notes")

    def __init__(
        self,
        key: str,
        title: str,
        lines: list[str] | None = None,
        tables: list[Table] | None = None,
        code: list[tuple[str, str]] | None = None,
        notes: list[str] | None = None,
    ):
        self.key, self.title = key, title
        self.lines = lines if lines is not None else []
        self.tables = tables if tables is not None else []
        self.code = code if code is not None else []
        self.notes = notes if notes is not None else []


def gib(b: float | None) -> str:
    return "–" if b is None else f"{b / GIB:,.2f}"


def gb(b: float | None) -> str:
    return "–" if b is None else f"{b / GB:,.2f}"


def both(b: float | None) -> str:
    return "–" if b is None else f"{b / GIB:,.2f} GiB ({b / GB:,.2f} GB)"


def usd(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"${x:,.{digits}f}"


def tok(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}" if x >= 10 else f"{x:,.2f}"


def speed_cell(f: dict | None) -> str:
    return "–" if not f else f"{tok(f['tok_s'])} ({tok(f['lo_tok_s'])}–{tok(f['hi_tok_s'])})"


def params(n: float | None) -> str:
    """A parameter count in M (10^6) or, from 10^9, B (10^9)."""
    if n is None:
        return "–"
    return f"{n / 1e9:,.2f} B" if n >= 1e9 else f"{n / 1e6:,.1f} M"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:,.1f}%"


def cand_cell(c: dict | None) -> str:
    """A catalog configuration as "4× h100-80gb-sxm" (its price is in the recommendations)."""
    if not c:
        return "none (more than 8 of any catalog device)"
    return f"{c['n_devices']}× {c['hardware_id']}"


FIT_WORDS = {"fits": "yes", "fits with offload": "offload", "does not fit": "no"}


def fit_cell(verdict: str | None) -> str:
    """A memory verdict in a table's "fits" column: yes / offload / no."""
    return FIT_WORDS.get(verdict or "", verdict or "–")


def _summary(d: dict) -> Section:
    m, w, mem, hw = d["model"], d["workload"], d["memory"], d["hardware"]
    s = Section("summary", f"{m['name']} on {w['n_devices']} x {hw['name']}")
    s.lines.append(
        f"{d['quant']} weights, {w['n_ctx']:,} tokens of context, KV {w['kv_dtype']}, engine {w['engine']}, "
        f"split {w['split']}, concurrency {w['concurrency']}."
    )
    s.lines.append(
        f"Verdict: **{mem['verdict']}** — needs {both(mem['total_bytes'])} of {both(mem['usable_bytes'])} "
        f"usable ({pct(mem['utilization'])} utilisation, headroom {gib(mem['headroom_bytes'])} GiB)."
    )
    sp = d.get("speed")
    if sp:
        s.lines.append(
            f"Decode ~{tok(sp['decode']['tok_s'])} tok/s (estimated; {sp['decode']['coefficients']})."
        )
    return s


def _model(d: dict) -> Section:
    m = d["model"]
    s = Section("model", "Model")
    kinds = ", ".join(f"{v} {k}" for k, v in m["layer_kinds"].items())
    moe = (
        f"{m['n_experts']} routed experts, {m['n_experts_used']} used per token, "
        f"{m['n_shared_experts']} shared"
        if m["n_experts"]
        else "dense"
    )
    pub = (
        f" (published: {m['published_total_params']} total"
        + (f", {m['published_active_params']} active)" if m["published_active_params"] else ")")
        if m["published_total_params"]
        else ""
    )
    rows = [
        ["id", f"{m['id']}" + (f" ({m['hf_id']})" if m["hf_id"] else "")],
        [
            "parameters",
            f"{m['params_total'] / 1e9:,.2f} B total, {m['params_active'] / 1e9:,.2f} B active per "
            f"token (counted from the architecture){pub}",
        ],
        ["architecture", f"{m['architecture']}" + (f" / {m['arch_class']}" if m["arch_class"] else "")],
        ["attention", m["attention"]],
        ["layers", f"{m['n_layers']} ({kinds})"],
        [
            "widths",
            f"hidden {m['hidden_size']}, {m['n_heads']} heads, {m['n_kv_heads']} KV heads, head_dim "
            f"{m['head_dim']}" + (f", window {m['window']}" if m["window"] else ""),
        ],
        ["feed-forward", moe],
        ["max context", f"{m['max_context']:,} tokens"],
        ["native dtype", m["native_dtype"]],
        ["license", m["license"] or "unknown"],
        [
            "source",
            f"{m['source'] or 'unknown'} ({'verified' if m['verified'] else 'NOT verified'})"
            + (" — exact tensor bytes from the GGUF file" if m["from_gguf"] else ""),
        ],
    ]
    s.tables.append(Table(["fact", "value"], rows))
    s.notes += [f"note: {n}" for n in m["notes"]]
    return s


def _memory(d: dict) -> Section:
    mem, w, hw = d["memory"], d["workload"], d["hardware"]
    s = Section("memory", f"Memory ({w['n_devices']} x {hw['id']})")
    s.lines.append(f"Basis: {mem['basis']}.")
    rows = [
        ["Weights", gib(mem["weights_bytes"]), gb(mem["weights_bytes"])],
        ["KV cache and state", gib(mem["kv_bytes"]), gb(mem["kv_bytes"])],
        ["Engine runtime / compute buffers", gib(mem["runtime_bytes"]), gb(mem["runtime_bytes"])],
        ["Device context overhead", gib(mem["overhead_bytes"]), gb(mem["overhead_bytes"])],
        ["Total on device(s)", gib(mem["total_bytes"]), gb(mem["total_bytes"])],
        ["Physical device memory", gib(mem["physical_bytes"]), gb(mem["physical_bytes"])],
        ["Usable device memory", gib(mem["usable_bytes"]), gb(mem["usable_bytes"])],
        ["Headroom", gib(mem["headroom_bytes"]), gb(mem["headroom_bytes"])],
    ]
    if mem["host_bytes"]:
        h = mem["host_bytes"]
        rows.append(["Host RAM (offloaded weights, host buffers)", gib(h), gb(h)])
    s.tables.append(Table(["component", "GiB", "GB"], rows))
    s.lines.append(f"Utilisation {pct(mem['utilization'])}; verdict: **{mem['verdict']}**.")
    if mem["min_offload_bytes"]:
        s.lines.append(f"Least host offload that would make it fit: {both(mem['min_offload_bytes'])}.")
    s.notes += [f"note: {n}" for n in mem["notes"]]
    if mem["kv_capacity_tokens"] is not None:
        s.lines.append(
            f"KV capacity {mem['kv_capacity_tokens']:,} tokens; max concurrency at {w['n_ctx']:,} tokens: "
            f"{mem['max_concurrency']}."
        )
    if len(mem["per_device"]) > 1:
        keys = ("weights", "kv", "runtime", "overhead", "total", "usable", "headroom")
        rows = [
            [str(r["index"]), *(gib(r[f"{k}_bytes"]) for k in keys), pct(r["utilization"])]
            for r in mem["per_device"]
        ]
        heads = ["device", *(f"{'KV' if k == 'kv' else k} GiB" for k in keys), "used"]
        s.tables.append(Table(heads, rows, "per device"))
    return s


def _kv(d: dict) -> Section:
    kv = d["kv"]
    s = Section("kv", f"KV cache at {kv['n_ctx']:,} tokens x {kv['n_seq']} sequence(s), {kv['kv_dtype']}")
    kinds = ", ".join(f"{k} {gib(v)} GiB" for k, v in kv["by_kind_bytes"].items())
    s.lines.append(
        f"{both(kv['kv_bytes'])} ({kinds}); {kv['bytes_per_token']:,} bytes per token of context "
        f"(full-attention layers); fixed state {both(kv['state_bytes'])}."
    )
    rows = [
        [o["kv_dtype"], gib(o["kv_bytes"]), gib(o["saving_bytes"]), gib(o["total_bytes"]),
         gb(o["total_bytes"]), fit_cell(o["verdict"]), ", ".join(o["engines"])]
        for o in kv["options"]
    ]  # fmt: skip
    heads = ["KV dtype", "KV GiB", "saves GiB", "total GiB", "total GB", "fits", "engines"]
    s.tables.append(Table(heads, rows))
    return s


def _context(d: dict) -> Section:
    s = Section("context", f"Context scaling ({d['quant']}, weights constant)")
    rows = [
        [f"{r['n_ctx']:,}" + (" (above max)" if r["above_max"] else ""), gib(r["kv_bytes"]),
         gib(r["total_bytes"]), gb(r["total_bytes"]), gib(r["headroom_bytes"]), fit_cell(r["verdict"])]
        for r in d["context_scaling"]
    ]  # fmt: skip
    s.tables.append(Table(["context", "KV GiB", "total GiB", "total GB", "headroom GiB", "fits"], rows))
    return s


def _quant(d: dict) -> Section:
    w = d["workload"]
    s = Section(
        "quant", f"Quantization matrix at {w['n_ctx']:,} tokens on {w['n_devices']} x {d['hardware']['id']}"
    )
    ok = [r for r in d["quant_matrix"] if not r["error"]]
    kv_same = len({r["kv_bytes"] for r in ok}) <= 1
    rows = []
    for r in d["quant_matrix"]:
        name = r["quant"] + (" *" if r["selected"] else "")
        if r["error"]:
            dash = ["–"] * (4 if kv_same else 5)
            rows.append([name, *dash[:-2], "error", *dash[-2:], ", ".join(r["engines"])])
            s.notes.append(f"{r['quant']}: {r['error']}")
            continue
        kv = [] if kv_same else [gib(r["kv_bytes"])]
        rows.append(
            [name, gib(r["weights_bytes"]), *kv, gib(r["total_bytes"]), fit_cell(r["verdict"]),
             speed_cell(r["decode"]), cand_cell(r["cheapest_fit"]), ", ".join(r["engines"])]
        )  # fmt: skip
    heads = ["quant", "weights GiB", *([] if kv_same else ["KV GiB"]), "total GiB", "fits"]
    heads += ["decode tok/s (est.)", "cheapest fit", "engines"]
    s.tables.append(Table(heads, rows))
    kv_line = f"KV cache {both(ok[0]['kv_bytes'])} in every row; " if kv_same and ok else ""
    s.lines.append(
        f"{kv_line}* = selected.  Decode speeds are estimated from the same coefficient set as the speed "
        "section.  Cheapest fit: lowest purchase price of 1, 2, 4 or 8 catalog devices (several only of "
        "GPUs / NPUs with an interconnect); device caveats are under Recommended hardware."
    )
    return s


def _speed(d: dict) -> Section:
    sp = d.get("speed")
    s = Section("speed", "Speed (estimated)")
    if not sp:
        s.lines.append("No speed estimate for this device (missing bandwidth or TFLOPS).")
        return s
    s.lines.append(("" if sp["calibrated"] else "**UNCALIBRATED** — ") + sp["basis"] + ".")
    ttft = f"{sp['ttft_s'] * 1000:,.0f} ms ({sp['ttft_lo_s'] * 1000:,.0f}–{sp['ttft_hi_s'] * 1000:,.0f})"
    rows = [
        ["decode, one stream", speed_cell(sp["decode"]) + " tok/s", sp["decode"]["coefficients"]],
        [
            f"prefill (pp{sp['prefill_prompt_tokens']})",
            speed_cell(sp["prefill"]) + " tok/s",
            sp["prefill"]["coefficients"],
        ],
        [f"TTFT, {sp['ttft_prompt_tokens']:,}-token prompt", ttft, sp["prefill"]["coefficients"]],
        [
            f"aggregate at concurrency {sp['concurrency']}",
            speed_cell(sp["aggregate"]) + " tok/s",
            sp["aggregate"]["coefficients"],
        ],
        ["per sequence at that concurrency", tok(sp["per_sequence_tok_s"]) + " tok/s", ""],
    ]
    s.tables.append(Table(["metric", "estimate (interval)", "coefficients"], rows))
    s.notes += [f"note: {n}" for n in sp["notes"]]
    return s


def _multi(d: dict) -> Section:
    md, hw = d["multi_device"], d["hardware"]
    s = Section("multi_device", f"Multi-device ({md['split']} split) and offload")
    rows = [
        [f"{r['n_devices']}× {hw['id']}", gib(r["per_device_total_bytes"]), gib(r["total_bytes"]),
         fit_cell(r["verdict"]), tok(r["decode_tok_s"]), tok(r["aggregate_tok_s"])]
        for r in md["rows"]
    ]  # fmt: skip
    heads = ["devices", "per device GiB", "total GiB", "fits"]
    heads += ["decode tok/s (est.)", "aggregate tok/s (est.)"]
    s.tables.append(Table(heads, rows))
    s.notes += [f"note: {n}" for n in md["notes"]]
    o = md["offload"]
    if o["offload_bytes"] or o["moe_offload_layers"]:
        what = []
        if o["offload_bytes"]:
            what.append(f"{gib(o['offload_bytes'])} GiB of weights")
        if o["moe_offload_layers"]:
            what.append(f"routed experts of {o['moe_offload_layers']} layers")
        slow = f"{o['slowdown']:.2f}x slower" if o["slowdown"] else "unknown"
        s.lines.append(
            f"Offload: {' and '.join(what)} in host RAM ({gib(o['host_bytes'])} GiB, read at "
            f"{o['host_bandwidth_gbs']:,.1f} GB/s): decode {tok(o['decode_tok_s_with_offload'])} tok/s "
            f"vs {tok(o['decode_tok_s_all_on_device'])} all on device ({slow}, estimated)."
        )
    else:
        s.lines.append("No offload (use --offload-gib X or --n-cpu-moe N to size host-RAM offload).")
    return s


def _cost(d: dict) -> Section:
    c = d["cost"]
    s = Section("cost", "Cost")
    if c["usd_per_hour"] is not None:
        src = (
            f"{c['rate_provider']} '{c['rate_instance']}', verified {c['rate_verified_date']}, "
            f"{c['rate_source_url']}"
            if c["rate_provider"]
            else c["rate_origin"]
        )
        s.lines.append(f"Hourly rate {usd(c['usd_per_hour'])}/h ({c['rate_origin']}: {src}).")
    rows = [
        ["USD per 1M output tokens at the aggregate throughput", usd(c["usd_per_1m_output_tokens"])],
        ["USD per 1M output tokens, one stream", usd(c["usd_per_1m_output_tokens_single_stream"])],
        ["purchase price", f"{usd(c['purchase_usd'], 0)} ({c['purchase_origin']})"],
        ["power (device TDP)", "–" if c["power_w"] is None else f"{c['power_w']:,.0f} W"],
        ["active hours", f"{c['hours_per_day']:g} h/day = {c['hours_per_month']:,.1f} h/month"],
        ["electricity", f"{usd(c['electricity_usd_per_month'])}/month at {usd(c['kwh_price_usd'], 3)}/kWh"],
        ["renting the same hours", f"{usd(c['rental_usd_per_month'])}/month"],
        [
            "buy-vs-rent break-even",
            "never"
            if c["break_even_months"] is None and c["rental_usd_per_month"] and c["purchase_usd"]
            else "–"
            if c["break_even_months"] is None
            else f"{c['break_even_months']:,.1f} months",
        ],
    ]
    s.tables.append(Table(["item", "value"], rows))
    s.notes += [f"note: {n}" for n in c["notes"]]
    return s


def _finetune(d: dict) -> Section:
    s = Section("finetune", "Fine-tuning memory (estimated from formulas)")
    ft = d["finetune"]
    parts = ("weights", "adapter", "gradients", "optimizer", "activations", "overhead", "total")
    name = {"adapter": "adapters"}
    rows = [[f"{name.get(k, k)} GiB", *(gib(r[f"{k}_bytes"]) for r in ft)] for k in parts]
    rows += [
        ["total GB", *(gb(r["total_bytes"]) for r in ft)],
        ["trainable params", *(params(r["trainable_params"]) for r in ft)],
        ["fits the selected devices", *("yes" if r["fits_selected"] else "no" for r in ft)],
        ["cheapest catalog fit", *(cand_cell(r["recommended"]) for r in ft)],
    ]
    s.tables.append(Table(["", *(r["method"] for r in ft)], rows))
    for r in ft:
        s.notes.append(f"{r['method']} ({r['label']}): " + "; ".join(r["assumptions"]))
    return s


def _recs(d: dict) -> Section:
    r = d["recommendations"]
    s = Section("recommendations", "Recommended hardware (catalog)")
    rows = []
    picks = (
        ("best_single", "best single device"),
        ("best_value", "best value"),
        ("most_memory_per_dollar", "most memory per dollar"),
        ("multi_device", "multi-device"),
        ("cheapest_cloud", "cheapest cloud"),
    )
    for key, label in picks:
        c = r[key]
        if not c:
            rows.append([label, "none", "–", "–", "–", "–"])
            continue
        price = usd(c["usd_per_hour"]) + "/h" if c["usd_per_hour"] else usd(c["purchase_usd"], 0)
        mem, need = gib(c["memory_bytes"]), gib(c["required_bytes"])
        rows.append([label, cand_cell(c), mem, need, price, tok(c["decode_tok_s"])])
        s.notes.append(f"{label}: {c['n_devices']}× {c['hardware_name']} — {c['reason']}")
    heads = ["pick", "configuration", "memory GiB", "needs GiB", "price", "decode tok/s (est.)"]
    s.tables.append(Table(heads, rows))
    s.notes += [f"note: {n}" for n in r["notes"]]
    return s


def _launch(d: dict) -> Section:
    s = Section("launch", "Launch commands")
    for e in d["launch"]:
        label = e["engine"] + ("" if e["exact"] else " (not an exact match; see notes)")
        s.code.append((label, e["text"]))
        s.notes += [f"{e['engine']}: {n}" for n in e["notes"]]
    return s


def _notes(d: dict) -> Section:
    c = d["coefficients"]
    s = Section("notes", "Warnings and provenance")
    s.lines += [f"warning: {w}" for w in d["warnings"]]
    src = c["path"] or "shipped prior (estimator/data/prior_coefficients.json)"
    s.lines.append(f"coefficients: {src}" + (f", created {c['created_utc']}" if c["created_utc"] else ""))
    s.lines.append(
        f"fitbench {d['fitbench_version']}, report schema {d['schema_version']}, generated "
        f"{d['generated_utc']}.  GiB = 2^30 bytes, GB = 10^9 bytes."
    )
    return s


def report_sections(d: dict) -> list[Section]:
    """The ordered sections of a report dict (keys in SECTION_KEYS)."""
    return [
        f(d)
        for f in (
            _summary,
            _model,
            _memory,
            _kv,
            _context,
            _quant,
            _speed,
            _multi,
            _cost,
            _finetune,
            _recs,
            _launch,
            _notes,
        )
    ]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(d: dict) -> str:
    """GitHub-flavoured Markdown of a report dict."""
    out: list[str] = []
    for i, s in enumerate(report_sections(d)):
        out.append(("# " if i == 0 else "## ") + s.title)
        out.append("")
        for line in s.lines:
            out.append(line)
            out.append("")
        for t in s.tables:
            if t.caption:
                out += [f"*{t.caption}*", ""]
            out.append("| " + " | ".join(_md_cell(h) for h in t.headers) + " |")
            out.append("|" + "|".join("---" for _ in t.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
        for label, text in s.code:
            out += [f"{label}:", "", "```bash", text, "```", ""]
        for line in s.notes:
            out += [line, ""]
    return "\n".join(out).rstrip() + "\n"
