"""llama.cpp runner (llama-cpp-python): prefill and decode speed llama-bench style, plus memory.

Timing (llama-bench@0c1e570 semantics, methods.md A1/A3/A5):
* the model is loaded once per point with explicit n_ctx, n_batch/n_ubatch, n_threads = n_threads_batch
  (physical cores by default), n_gpu_layers, flash attention, type_k/type_v and swa_full (engine_options,
  default False as llama-server / llama-cli);
* random token ids only (never tokenize: vocab "none" aborts); fresh ids for every repetition;
* before every repetition the KV cache is cleared (``llama_memory_clear``) and ``n_depth`` tokens are
  evaluated untimed;
* pp{n}: wall time of evaluating n prompt tokens (in n_batch chunks) followed by ``llama_synchronize``; tg{n}:
  n single-token decodes, each followed by ``llama_synchronize``;
* one warm-up per test (pp: a full prompt; tg: one token), then ``repetitions`` timed samples; sample tok/s =
  n / wall_s; mean and sample stdev of the per-sample rates (runners.stats).

Memory, each recorded separately: model / KV (+RS) / compute / output buffer bytes per device parsed from the
log (log callback), ``llama_model_size`` (weights_bytes: all tensors, all devices), ggml device free/total
before and after load (ctypes), NVML peak delta on NVIDIA GPUs, process peak RSS with anon/file split.

Memory-only points (a PointSpec without prompt and gen lengths): the model is loaded and one context created
through the C API (``llama_init_from_model``, which reserves the worst-case compute graph) and nothing is
evaluated, so buffers of contexts far larger than a CPU could prefill are measured in seconds.  These points
take more context options from ``engine_options``: ``n_seq`` (sequences, llama.cpp n_seq_max; the context is
n_ctx per sequence, ``-c`` = n_ctx x n_seq), ``kv_unified`` (default True, as ``llama-server --kv-unified``)
and ``swa_full`` (default False).

``no_alloc`` (engine option of memory-only points): llama.cpp's memory-fit pass
(``llama_model_params.no_alloc``, what ``llama-fit-params`` / common/fit.cpp run).  The model is loaded as
metadata only, the context sizes its KV cache and reserves its worst-case graphs through ggml's allocator
without allocating: the compute buffer it logs is the size the allocator's layout would take, the KV cache
comes from the cache's summary line (its buffers log 0 MiB) and the weights from ``llama_model_size``.  The
harness gives such points a data-less GGUF (``harness.synth.write_shape_gguf``), so a full-depth model of
any size costs a few KiB and milliseconds.  Host RSS and device free memory of these points measure nothing.

``repack`` (engine option, default True as llama.cpp): False is llama.cpp's ``--no-repack``
(``llama_model_params.use_extra_bufts`` = false): weights stay in the plain CPU buffer instead of the
"extra" buffer types a CPU backend repacks them into (CPU_REPACK's interleaved Q4_0 / Q4_K / IQ4_NL / Q8_0
layouts, the AMX buffer on a CPU with AMX).  Its use here: llama.cpp's AMX buffer crashes on some AMX hosts
(estimator.engines.llama_cpp ``cpu_crash_workarounds``).  Unset, a point whose weights stay on the CPU is
measured with llama.cpp's default unless ``runners.amx_check`` found that the AMX buffer crashes on this
machine (checked in a child, remembered); then with ``--no-repack``, and the records say why
(``extra.repack_reason``).  A memory-fit pass (``no_alloc``) on a build with the AMX buffer runs without the
extra buffers: its file has no weight data to check with, an MLA model's context aborts in llama.cpp's
scheduler with the AMX buffer on the AMX host of 2026-12-07, and the compute buffer the pass measures is
the same either way (a tiny Llama there: 5,515,510 B with and without).  Records keep what ran
(``extra.repack``).
"""

from __future__ import annotations

import ctypes
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runners.amx_check import amx_buffer_crashes, has_amx_buffer
from runners.base import Measurement, PointSpec, Test
from runners.logparse import parse_llama_memory
from runners.memory import NvmlSampler, RssSampler
from runners.stats import rate_tok_s, summarize

KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
_LOG: list[str] = []
_LOG_CB = None  # keeps the ctypes callback alive


def physical_cores() -> int:
    """Physical CPU cores (llama-bench's default thread count on x86-64 Linux); logical count as fallback."""
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
        if n:
            return int(n)
    except ImportError:
        pass
    cores = set()
    try:
        block = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines() + [""]:
            if not line.strip():
                if "physical id" in block and "core id" in block:
                    cores.add((block["physical id"], block["core id"]))
                block = {}
                continue
            k, _, v = line.partition(":")
            block[k.strip()] = v.strip()
    except OSError:
        pass
    return len(cores) or (os.cpu_count() or 1)


def _install_log_capture(llama_cpp) -> None:
    """Route llama.cpp's log into _LOG (replaces llama-cpp-python's own callback; works with
    verbose=False)."""
    global _LOG_CB
    if _LOG_CB is not None:
        return

    @llama_cpp.llama_log_callback
    def _cb(level, text, user_data):  # noqa: ARG001 - ctypes signature
        _LOG.append(text.decode("utf-8", "replace"))

    _LOG_CB = _cb
    llama_cpp.llama_log_set(_cb, ctypes.c_void_p(0))


class _Ggml:
    """ggml backend device queries through ctypes (libggml / libggml-base inside the llama_cpp wheel)."""

    def __init__(self, llama_cpp) -> None:
        lib = Path(llama_cpp.__file__).parent / "lib"
        self.ok = False
        try:
            self.ggml = ctypes.CDLL(str(lib / "libggml.so"))
            self.base = ctypes.CDLL(str(lib / "libggml-base.so"))
        except OSError:
            return
        g, b = self.ggml, self.base
        g.ggml_backend_dev_count.restype = ctypes.c_size_t
        g.ggml_backend_dev_get.restype = ctypes.c_void_p
        g.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        b.ggml_backend_dev_name.restype = ctypes.c_char_p
        b.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
        b.ggml_backend_dev_description.restype = ctypes.c_char_p
        b.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
        b.ggml_backend_dev_memory.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        for fn in ("ggml_commit", "ggml_version"):
            if hasattr(b, fn):
                getattr(b, fn).restype = ctypes.c_char_p
        self.ok = True

    def devices(self) -> dict[str, dict]:
        """{device name: {"description", "free_bytes", "total_bytes"}}."""
        if not self.ok:
            return {}
        out = {}
        for i in range(self.ggml.ggml_backend_dev_count()):
            d = self.ggml.ggml_backend_dev_get(i)
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            self.base.ggml_backend_dev_memory(d, ctypes.byref(free), ctypes.byref(total))
            out[self.base.ggml_backend_dev_name(d).decode()] = {
                "description": (self.base.ggml_backend_dev_description(d) or b"").decode(),
                "free_bytes": free.value,
                "total_bytes": total.value,
            }
        return out

    def version(self) -> str:
        if not self.ok:
            return ""
        parts = []
        for fn in ("ggml_version", "ggml_commit"):
            f = getattr(self.base, fn, None)
            if f is not None:
                parts.append((f() or b"").decode())
        return " ".join(p for p in parts if p)


def backend_of(device_names: list[str], n_gpu_layers: int) -> str:
    """CPU | CUDA | ROCm | Metal | Vulkan | SYCL ... from ggml device names ("CUDA0", "MTL0", "Vulkan0")."""
    if n_gpu_layers == 0:
        return "CPU"
    for name in device_names:
        for prefix, backend in (
            ("CUDA", "CUDA"),
            ("ROCm", "ROCm"),
            ("HIP", "ROCm"),
            ("MTL", "Metal"),
            ("Metal", "Metal"),
            ("Vulkan", "Vulkan"),
            ("SYCL", "SYCL"),
            ("CANN", "CANN"),
        ):
            if name.startswith(prefix):
                return backend
    return "CPU"


class LlamaCppRunner:
    """Runner protocol implementation for llama.cpp through llama-cpp-python."""

    name = "llama.cpp"

    def available(self) -> bool:
        import importlib.util

        return importlib.util.find_spec("llama_cpp") is not None

    def install_hint(self) -> str:
        return (
            "llama-cpp-python is not installed: run `make install-llama` "
            "(pip install llama-cpp-python==0.3.36; "
            "builds from source, ~5 min on 2 cores; set CMAKE_ARGS=-DGGML_CUDA=on for CUDA)"
        )

    def measure(self, spec: PointSpec) -> Measurement:
        import llama_cpp

        _install_log_capture(llama_cpp)
        _LOG.clear()
        opts = dict(spec.engine_options)
        if spec.kv_dtype not in KV_TYPES:
            raise ValueError(
                f"kv_dtype {spec.kv_dtype!r} not supported by llama.cpp (one of {', '.join(KV_TYPES)})"
            )
        if spec.repetitions < 1:
            raise ValueError("repetitions must be >= 1")
        if not Path(spec.model_path).is_file():
            raise FileNotFoundError(f"model file not found: {spec.model_path}")
        kv_type = getattr(llama_cpp, f"GGML_TYPE_{spec.kv_dtype.upper()}")
        n_threads = spec.n_threads or physical_cores()
        ggml = _Ggml(llama_cpp)
        devices_before = ggml.devices()
        repack, repack_reason = _repack(opts), ""
        cpu_weights = backend_of(list(devices_before), spec.n_gpu_layers) == "CPU"
        if "repack" not in opts and opts.get("no_alloc"):  # the memory-fit pass (module doc, ``repack``)
            repack = not has_amx_buffer(llama_cpp.llama_print_system_info().decode(errors="replace"))
        elif "repack" not in opts and cpu_weights:
            crashes, repack_reason = amx_buffer_crashes(llama_cpp, spec.model_path, n_threads)
            repack = not crashes
        if not spec.prompt_lengths and not spec.gen_lengths:
            return self._measure_memory(
                llama_cpp, spec, opts, kv_type, n_threads, ggml, devices_before, (repack, repack_reason)
            )
        nvml = NvmlSampler(interval_s=0.02)
        rss = RssSampler(interval_s=0.01)
        with rss, nvml, _model_params_default(llama_cpp, use_extra_bufts=repack):
            t0 = time.perf_counter()
            llm = llama_cpp.Llama(
                model_path=spec.model_path,
                n_ctx=spec.n_ctx,
                n_batch=spec.n_batch,
                n_ubatch=spec.n_ubatch,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_gpu_layers=spec.n_gpu_layers,
                flash_attn=spec.flash_attn,
                type_k=kv_type,
                type_v=kv_type,
                seed=spec.seed,
                swa_full=bool(opts.get("swa_full", False)),
                use_mmap=bool(opts.get("use_mmap", True)),
                offload_kqv=bool(opts.get("offload_kqv", True)),
                verbose=False,
            )
            load_s = time.perf_counter() - t0
            devices_loaded = ggml.devices()
            try:
                tests, skipped = _run_tests(llama_cpp, llm, spec)
                weights = int(llama_cpp.llama_model_size(llm.model))
                n_params = int(llama_cpp.llama_model_n_params(llm.model))
                desc = ctypes.create_string_buffer(256)
                llama_cpp.llama_model_desc(llm.model, desc, ctypes.sizeof(desc))
                n_ctx_actual = int(llama_cpp.llama_n_ctx(llm.ctx))
            finally:
                llm.close()
        log = "".join(_LOG)
        mem = parse_llama_memory(log)
        kv_bytes = _kv_bytes(mem)
        nv = nvml.summary()
        extra = {
            **_context_extra(llama_cpp, spec, mem, n_ctx_actual, desc, load_s, devices_before, repack),
            "repack_reason": repack_reason or None,
            "offloaded_layers": list(mem.offloaded_layers) if mem.offloaded_layers else None,
            "ggml_devices_loaded": devices_loaded,
            "swa_full": bool(opts.get("swa_full", False)),
            "use_mmap": bool(opts.get("use_mmap", True)),
            "timing": "llama-bench style: warm-up, depth filled untimed, llama_synchronize per prefill/token",
            "skipped_tests": skipped,
            **rss.summary(),
            **nv,
        }
        backend = backend_of(list(devices_before), spec.n_gpu_layers)
        return Measurement(
            engine=self.name,
            engine_version=f"llama-cpp-python {llama_cpp.__version__}",
            build_info=f"ggml {ggml.version()}".strip(),
            backend=backend,
            tests=tuple(tests),
            weights_bytes=weights,
            kv_bytes=kv_bytes,
            compute_bytes=mem.total("compute"),
            output_bytes=mem.total("output"),
            device_total_bytes=nv.get("device_peak_delta_bytes"),
            host_rss_bytes=rss.peak.total_bytes or None,
            n_params=n_params,
            n_threads=n_threads,
            extra=extra,
            log_tail=_quiet(log)[-4000:],
        )

    def _measure_memory(
        self,
        llama_cpp,
        spec: PointSpec,
        opts: dict,
        kv_type: int,
        n_threads: int,
        ggml,
        devices_before,
        repack: tuple[bool, str],
    ) -> Measurement:
        """A memory-only point: load, create one context, read the buffers (module docstring); ``repack``:
        (whether the weights go to the repacked buffer types, why not when the AMX check said so)."""
        n_seq = int(opts.get("n_seq", 1))
        unified = bool(opts.get("kv_unified", True))
        swa_full = bool(opts.get("swa_full", False))
        if n_seq < 1:
            raise ValueError(f"engine_options n_seq must be >= 1, got {n_seq}")
        no_alloc = bool(opts.get("no_alloc", False))
        use_mmap = bool(opts.get("use_mmap", True)) and not no_alloc
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = spec.n_gpu_layers
        # llama_model_params has had load_mode instead of use_mmap since 0.3.3x; a ctypes Structure takes an
        # unknown attribute silently, so the field is named as the library has it
        mp.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
        mp.no_alloc = no_alloc
        mp.use_extra_bufts = repack[0]
        rss = RssSampler(interval_s=0.01)
        with rss:
            t0 = time.perf_counter()
            model = llama_cpp.llama_model_load_from_file(spec.model_path.encode(), mp)
            if not model:
                raise RuntimeError(f"llama.cpp could not load {spec.model_path}")
            try:
                cp = llama_cpp.llama_context_default_params()
                cp.n_ctx = spec.n_ctx * n_seq
                cp.n_batch = spec.n_batch
                cp.n_ubatch = spec.n_ubatch
                cp.n_seq_max = n_seq
                cp.kv_unified = unified
                cp.swa_full = swa_full
                cp.flash_attn_type = (
                    llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
                    if spec.flash_attn
                    else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
                )
                cp.type_k = cp.type_v = kv_type
                cp.n_threads = cp.n_threads_batch = n_threads
                cp.offload_kqv = bool(opts.get("offload_kqv", True))
                ctx = llama_cpp.llama_init_from_model(model, cp)
                if not ctx:
                    raise RuntimeError("llama.cpp could not create the context (see the log)")
                n_ctx_actual = int(llama_cpp.llama_n_ctx(ctx))
                llama_cpp.llama_free(ctx)
                load_s = time.perf_counter() - t0
                weights = int(llama_cpp.llama_model_size(model))
                n_params = int(llama_cpp.llama_model_n_params(model))
                desc = ctypes.create_string_buffer(256)
                llama_cpp.llama_model_desc(model, desc, ctypes.sizeof(desc))
            finally:
                llama_cpp.llama_model_free(model)
        log = "".join(_LOG)
        mem = parse_llama_memory(log)
        # the memory-fit pass allocates nothing: its KV buffers log 0 MiB, its summary lines the sizes (KV
        # caches and the recurrent state of Gated DeltaNet / Mamba layers)
        summaries = sum(k.size_bytes for k in (*mem.kv_summaries, *mem.rs_summaries))
        kv_bytes = summaries if no_alloc else _kv_bytes(mem)
        extra = {
            "memory_only": True,
            "no_alloc": no_alloc,
            "use_mmap": use_mmap,
            **_context_extra(llama_cpp, spec, mem, n_ctx_actual, desc, load_s, devices_before, repack[0]),
            "repack_reason": repack[1] or None,
            "n_seq": n_seq,
            "kv_unified": unified,
            "swa_full": swa_full,
            **rss.summary(),
        }
        return Measurement(
            engine=self.name,
            engine_version=f"llama-cpp-python {llama_cpp.__version__}",
            build_info=f"ggml {ggml.version()}".strip(),
            backend=backend_of(list(devices_before), spec.n_gpu_layers),
            tests=(),
            weights_bytes=weights,
            kv_bytes=kv_bytes,
            compute_bytes=mem.total("compute"),
            output_bytes=mem.total("output"),
            device_total_bytes=None,
            host_rss_bytes=rss.peak.total_bytes or None,
            n_params=n_params,
            n_threads=n_threads,
            extra=extra,
            log_tail=_quiet(log)[-4000:],
        )


def _repack(opts: dict) -> bool:
    """The ``repack`` engine option (module doc; default True, llama.cpp's own default)."""
    return bool(opts.get("repack", True))


@contextmanager
def _model_params_default(llama_cpp, use_extra_bufts: bool) -> Iterator[None]:
    """Within the block, the ``llama_model_params`` that ``llama_cpp.Llama`` starts from have
    ``use_extra_bufts`` = ``use_extra_bufts``: ``Llama`` (llama-cpp-python 0.3.36) takes no argument for it
    and builds its parameters from ``llama_model_default_params()`` while it loads the model.  Nothing changes
    when the value is llama.cpp's default (True).  A library without the field is an error, not a silent
    default (a ctypes Structure would take the unknown attribute and ignore it)."""
    if use_extra_bufts:
        yield
        return
    if "use_extra_bufts" not in {f[0] for f in llama_cpp.llama_model_params._fields_}:
        raise RuntimeError(
            f"llama-cpp-python {llama_cpp.__version__} has no llama_model_params.use_extra_bufts: "
            "engine option repack = false needs a newer build"
        )
    bindings = getattr(llama_cpp, "llama_cpp", llama_cpp)  # the ctypes module ``Llama`` calls into
    original = bindings.llama_model_default_params

    def without_extra_bufts():
        params = original()
        params.use_extra_bufts = False
        return params

    bindings.llama_model_default_params = without_extra_bufts
    try:
        yield
    finally:
        bindings.llama_model_default_params = original


@contextmanager
def amx_safe_loading(llama_cpp, model_path: str, n_threads: int) -> Iterator[str]:
    """Within the block ``llama_cpp.Llama`` loads with ``--no-repack`` where ``runners.amx_check`` found
    llama.cpp's AMX buffer crashing on this machine, else with llama.cpp's defaults; yields why ("" when
    nothing changed).  For code that evaluates a model in its own process outside the runner (tests), which
    a crash would take down."""
    crashes, why = amx_buffer_crashes(llama_cpp, model_path, n_threads)
    with _model_params_default(llama_cpp, use_extra_bufts=not crashes):
        yield why


def _kv_bytes(mem) -> int | None:
    """KV + recurrent-state bytes of every device, None when the log stated neither."""
    kinds = [mem.total(k) for k in ("KV", "RS")]
    return sum(v for v in kinds if v is not None) if any(v is not None for v in kinds) else None


def _context_extra(
    llama_cpp, spec: PointSpec, mem, n_ctx_actual: int, desc, load_s: float, devices, repack: bool
) -> dict:
    """The record extras every llama.cpp point carries: parsed buffers and caches, the context settings
    (``repack``: whether the weights went to the repacked buffer types, module doc)."""
    return {
        "buffers_bytes": mem.by_kind,
        "kv_summaries": [vars(x) for x in mem.kv_summaries],
        "rs_summaries": [vars(x) for x in mem.rs_summaries],
        "swa_cells": mem.swa_cells,
        "n_ctx_requested": spec.n_ctx,
        "n_ctx_actual": n_ctx_actual,
        "model_desc": desc.value.decode(errors="replace"),
        "load_s": load_s,
        "ggml_devices_before": devices,
        "type_k": spec.kv_dtype,
        "type_v": spec.kv_dtype,
        "flash_attn": spec.flash_attn,
        "n_batch": spec.n_batch,
        "n_ubatch": spec.n_ubatch,
        "n_gpu_layers": spec.n_gpu_layers,
        "repack": repack,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
    }


_NOISE = (
    "create_tensor:",
    "llama_model_loader: - ",
    "llama_graph_n_input_tensors:",
    "load_tensors: layer ",
    "graph_reserve:",
    "llama_kv_cache: layer ",
)


def _quiet(log: str) -> str:
    """The log without per-tensor / per-layer / per-graph-input lines (keeps buffers, context, errors)."""
    return "".join(line for line in log.splitlines(keepends=True) if not line.startswith(_NOISE))


def _run_tests(llama_cpp, llm, spec: PointSpec) -> tuple[list[Test], list[dict]]:
    """All pp{n} @ d{depth} and tg{n} @ d{depth} tests of a point; tests that exceed n_ctx are skipped."""
    rng = random.Random(spec.seed)
    n_vocab = int(llm.n_vocab())
    n_ctx = int(llama_cpp.llama_n_ctx(llm.ctx))
    mem = llama_cpp.llama_get_memory(llm.ctx)

    def ids(n: int) -> list[int]:
        return [rng.randrange(n_vocab) for _ in range(n)]

    def reset_and_fill(depth: int) -> None:
        llm.reset()
        llama_cpp.llama_memory_clear(mem, False)
        if depth:
            llm.eval(ids(depth))
            llama_cpp.llama_synchronize(llm.ctx)

    def pp_once(n: int, depth: int) -> float:
        reset_and_fill(depth)
        prompt = ids(n)
        t = time.perf_counter()
        llm.eval(prompt)
        llama_cpp.llama_synchronize(llm.ctx)
        return time.perf_counter() - t

    def tg_once(n: int, depth: int) -> float:
        reset_and_fill(depth)
        toks = ids(n)
        t = time.perf_counter()
        for tok in toks:
            llm.eval([tok])
            llama_cpp.llama_synchronize(llm.ctx)
        return time.perf_counter() - t

    tests: list[Test] = []
    skipped: list[dict] = []
    for depth in spec.depths:
        for kind, lengths, once in (("pp", spec.prompt_lengths, pp_once), ("tg", spec.gen_lengths, tg_once)):
            for n in lengths:
                if n <= 0:
                    continue
                if depth + n > n_ctx:
                    skipped.append(
                        {
                            "kind": kind,
                            "n_tokens": n,
                            "n_depth": depth,
                            "reason": f"depth + n = {depth + n} > n_ctx {n_ctx}",
                        }
                    )
                    continue
                once(n if kind == "pp" else 1, depth)  # warm-up, as llama-bench
                samples = tuple(rate_tok_s(n, once(n, depth)) for _ in range(spec.repetitions))
                m, s = summarize(samples)
                tests.append(
                    Test(
                        kind=kind,
                        n_tokens=n,
                        n_depth=depth,
                        batch=1,
                        samples_tok_s=samples,
                        mean_tok_s=m,
                        std_tok_s=s,
                    )
                )
    llm.reset()
    llama_cpp.llama_memory_clear(mem, False)
    return tests, skipped
