"""What an inference engine decides, in one object: ``EngineProfile``.

Everything the estimator knows that differs between engines is a field or a method of a profile; physics,
report and app code ask the profile and never compare engine names.  A profile holds:

* **weights**: which weight container it loads (``container``: ``"gguf"`` for llama.cpp, ``"safetensors"``
  for vLLM / SGLang; a quant format lists the containers it exists in, ``QuantSpec.containers``), its
  default quant for a model (``default_quant_for``: a checkpoint engine loads the published checkpoint's
  format) and multi-device split, and whether the token embedding stays in host RAM on discrete devices;
* **KV cache**: the KV dtype names it accepts (``kv_dtypes``, mapped to storage types by
  ``estimator.physics.quant.kv_type``), the cheaper ones a report compares, how it lays out cells
  (``kv_cells``: contiguous padded cells or paged blocks; sliding-window layers capped at the window), the
  byte width of the convolution state of linear-attention / SSM layers, which layer kinds it really implements
  (``layer_kind``), and whether a quantized V cache needs flash attention;
* **memory**: whether it reserves a fraction of device memory up front (``reserves_memory``: vLLM
  ``--gpu-memory-utilization``, SGLang ``--mem-fraction-static``) and which runtime-buffer model applies
  (``runtime_model``: ``"ggml"`` graph-allocator buffers or ``"torch"`` activation peak + CUDA graphs, see
  estimator.physics.runtime) with its token budget (``max_batched_tokens``); ``memory_prior`` names its entry
  of the runtime-memory prior;
* **speed**: whether its quantized GEMMs run on the int8 / fp16-accumulate path on NVIDIA (``int8_gemm``),
  the (backend, family) pairs whose GEMMs run on the shader ALUs because the backend does not issue the
  device's matrix instructions (``vector_gemm``), the device families whose datasheet rate those GEMMs
  cannot reach (``unmodelled_quant_gemm``: their quantized prefill is not fitted and is reported NOT
  MODELLED), whether prefill materialises the KQ score
  matrix without flash attention, whether a layer split over several devices pipelines micro-batches (see
  estimator.physics.counts.pipeline_factor);
* **requests**: ``check`` refuses a configuration the engine cannot run (one-line SpecError) and
  ``launch`` builds the command line that reproduces a sized configuration;
* **serving**: how its scheduler batches many requests (``scheduler``: token budget of a step, most running
  requests, whether prompt chunks share a step with decode tokens, graph-captured batch sizes; a
  ``SchedulerSpec`` with its source, read by estimator.physics.serving) and the weight layout it loads for a
  format (``weight_format``: vLLM / SGLang load an MXFP4 checkpoint with everything but the experts in bf16).

Profiles import only ``estimator.specs``: physics sits above them and asks them.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from estimator.specs import CHECKPOINT_QUANTS, HardwareSpec, ModelSpec, QuantSpec, SpecError, Workload

if TYPE_CHECKING:
    from packaging.version import Version

CONTAINERS = ("gguf", "safetensors")


@dataclass(frozen=True)
class CacheLayer:
    """One layer's KV cache as an engine's block manager sees it (estimator.physics.kv.cache_layers).

    kind: FULL, SLIDING or CHUNKED attention, or another kind the block manager may not model (recurrent
    state, a DSA indexer); token_bytes: bytes one token takes in this layer on one device (its share of the
    KV heads under tensor parallelism); span: the window (SLIDING) or chunk (CHUNKED) in tokens, 0 for FULL;
    state_bytes: a recurrent-state layer's (LINEAR, MAMBA) fixed state of one sequence on one device
    (recurrent + conv state, its share of the heads under tensor parallelism), 0 for attention.
    """

    kind: str
    token_bytes: int
    span: int = 0
    latent: bool = False  # an MLA latent row (one per token, shared by every head)
    state_bytes: int = 0


@dataclass(frozen=True)
class StartupKV:
    """The KV-cache figures an engine logs when it starts (vLLM: "GPU KV cache size: N tokens", "Maximum
    concurrency for L tokens per request: X"), sized by its own block manager's rules (the profile's
    ``startup_kv``).

    num_blocks: blocks of the pool (each block holds one page of every layer of a group);
    blocks_per_request: the blocks one request of max_model_len tokens is admitted with, over all groups;
    block_tokens: the base block size (tokens); kv_cache_tokens = int(max_concurrency x max_model_len);
    max_concurrency = num_blocks / blocks_per_request (requests of max_model_len tokens).
    """

    num_blocks: int
    blocks_per_request: int
    block_tokens: int
    kv_cache_tokens: int
    max_concurrency: float


@dataclass(frozen=True)
class StateDemand:
    """What a recurrent hybrid's state asks of an engine's reserved pool on one device (the profile's
    ``state_pool``).

    state_bytes: one request's recurrent + conv state on one device (its share of the heads);
    workload: the launch (its request limit sizes some engines' slots);
    token_bytes: the attention KV bytes of one token of one sequence on one device;
    model: the model (its class picks some engines' cache manager).
    """

    state_bytes: int
    workload: Workload
    token_bytes: float = 0.0
    model: ModelSpec | None = None


@dataclass(frozen=True)
class SchedulerSpec:
    """How an engine batches requests when it serves many at once (estimator.physics.serving).

    max_batched_tokens: token budget of one scheduler step (decode tokens + prompt chunks), tokens;
    max_seqs: most requests running at once (more wait in the engine's queue);
    mixes_prefill: True when one step carries prompt chunks together with the running requests' decode tokens
    (vLLM V1 chunked prefill, llama-server); False when a prefill batch is a step of its own that pauses
    decoding (SGLang without ``--enable-mixed-chunk``);
    graph_sizes: token counts of the captured CUDA graphs, ascending; a step of T <= max(graph_sizes) tokens
    runs padded to the next size (its GEMMs compute the padding), larger steps run eagerly; () = none;
    source: where the defaults come from;
    reserves_whole_request: True when a request is admitted only once the KV pool holds its whole prompt +
    output (TensorRT-LLM's GUARANTEED_NO_EVICT), so a running request holds isl + osl tokens of the pool;
    False when blocks are taken as the request grows (vLLM, SGLang: isl + osl / 2 on average).
    """

    max_batched_tokens: int
    max_seqs: int
    mixes_prefill: bool = True
    graph_sizes: tuple[int, ...] = ()
    source: str = ""
    reserves_whole_request: bool = False

    def padded(self, tokens: int) -> int:
        """Tokens a step of ``tokens`` tokens computes: the next captured graph size, or ``tokens``."""
        for g in self.graph_sizes:
            if g >= tokens:
                return g
        return tokens


@dataclass(frozen=True)
class LaunchCommand:
    """One engine's command line.  ``argv`` is the exact argument vector; ``exact`` is False when the
    configuration could not be reproduced exactly on that engine (see ``notes``)."""

    engine: str
    argv: tuple[str, ...]
    exact: bool
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Shell form, one flag (with its value) per continuation line."""
        args = list(self.argv)
        head = [args[0]]
        i = 1
        while i < len(args) and not args[i].startswith("-"):
            head.append(args[i])
            i += 1
        parts = [shlex.join(head)]
        while i < len(args):
            group = [args[i]]
            if i + 1 < len(args) and not args[i + 1].startswith("-"):
                group.append(args[i + 1])
                i += 1
            parts.append(shlex.join(group))
            i += 1
        return " \\\n  ".join(parts)


@dataclass(frozen=True)
class KVLayout:
    """Cache cells one request shape gets from an engine.

    full / windowed: cells of one full-attention / one sliding-window (or chunked) layer, summed over the
    streams; n_streams: independent cache streams (llama.cpp without ``--kv-unified``: one per sequence; 1
    otherwise).  A micro-batch attends to the cells of one stream, so the attention-score matrices of the
    compute graph are ``full // n_streams`` (``windowed // n_streams``) wide per stream.
    """

    full: int
    windowed: int
    n_streams: int = 1

    @property
    def full_per_stream(self) -> int:
        return self.full // self.n_streams

    @property
    def windowed_per_stream(self) -> int:
        return self.windowed // self.n_streams


def parse_version(version: str) -> Version | None:
    """A PEP 440 version (``packaging.version.Version``: "v0.6.1", "0.6.3.post1", "1.2.0rc2.post2"), None
    when the text is not one ("", "nightly-dev-20260216-d3bae71e").  Imported here, not at start-up."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version((version or "").strip())
    except InvalidVersion:
        return None


def slug(text: str) -> str:
    """A file-name-safe form of a model name (placeholder GGUF paths)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "model"


def pad(n: int, to: int) -> int:
    """Round ``n`` up to a multiple of ``to``."""
    return -(-int(n) // to) * to


def paged_layout(model: ModelSpec, n_ctx: int, n_seq: int, block: int) -> KVLayout:
    """A paged KV cache of ``block``-token blocks per sequence (vLLM, TensorRT-LLM): full layers hold
    ceil(n_ctx / block) blocks, windowed layers the window + one block (blocks that slid out of the window are
    freed), at most the full count."""
    cells = pad(n_ctx, block) * n_seq
    window = model.window or n_ctx
    return KVLayout(cells, min(cells, pad(min(n_ctx, window + block), block) * n_seq), 1)


class EngineProfile:
    """Base profile: the fields every engine sets, and the behaviour shared by all (see module doc).

    Subclasses set the class attributes and implement ``kv_cells`` and ``launch``.
    """

    name: str = ""
    label: str = ""  # how messages name it ("vLLM")
    container: str = ""
    default_quant: str = ""
    # multi-device split when not told: "tp" tensor parallel, "pp" pipeline / layer split
    default_split: str = "tp"
    # attention data parallelism (Workload.split "dp", estimator.physics.memory): each device runs attention
    # for its own sequences, routed experts expert-parallel; its command-line flags (launch), or "" when the
    # engine has none (llama.cpp)
    attention_dp_flags: str = ""
    # each attention-data-parallel rank runs a scheduler of its own with the whole budget (token budget, most
    # running requests, its own captured graphs): an instance of N ranks schedules N x B tokens and N x S
    # requests per step (estimator.physics.serving); False: one budget for the instance
    dp_rank_schedulers: bool = False
    kv_dtypes: tuple[str, ...] = ()  # the KV dtype names a report accepts
    # every KV dtype name its command line / runner accepts -> the engine's own spelling
    kv_flags: dict[str, str] = {}
    cheaper_kv_dtypes: tuple[str, ...] = ()  # compared against f16 by the report's KV section
    quantized_v_needs_flash_attn: bool = False
    # without flash attention V is stored transposed with the widest layer's row width on every layer
    transposed_v_max_width: bool = False
    state_conv_bytes: int = 2  # bytes per conv-state element of linear-attention / SSM layers
    # the DSA lightning indexer's cached key (one per token and layer, index_head_dim wide): "fp8" = FP8
    # values plus one FP32 scale per 128 whatever the KV dtype (vLLM's DeepseekV32IndexerCache:
    # index_head_dim + index_head_dim / 128 x 4 bytes; SGLang and TensorRT-LLM assumed alike), "kv" = in
    # the KV cache's dtype (llama.cpp: a second K-only cache, src/llama-kv-cache-dsa.cpp)
    indexer_key_dtype: str = "fp8"
    # DSA attention on the index_topk selected keys only: reads and multiplies min(context, index_topk)
    # latent rows per query (sparse MLA kernels); False: the engine masks a dense attention to them and still
    # reads and multiplies every cached row (estimator.physics.counts.attention_flops, kv.kv_read_bytes)
    sparse_attention: bool = False
    embedding_on_host: bool = False  # discrete devices keep token_embd in host RAM
    reserves_memory: bool = False  # pre-allocates Workload.gpu_memory_utilization x device memory
    # the fraction is of the memory still free after weights and runtime buffers (TensorRT-LLM
    # --kv_cache_free_gpu_memory_fraction), not of the whole device (vLLM, SGLang); it sizes the KV pool
    reserves_free_memory: bool = False
    memory_fraction: float = 0.92  # that fraction when the user does not give one (Workload's default)
    reservation_flag: str = ""  # its command-line name, for messages
    # the flag that lets a checkpoint engine run a repository's own code (ModelSpec.custom_code); "" = none
    trust_remote_code_flag: str = ""
    runtime_model: str = "torch"  # "ggml" | "torch" (estimator.physics.runtime)
    memory_prior: str = ""  # key of estimator/data/memory_prior.json and coefficients "memory"
    # whose buffers ``exact_buffers_command`` prints (e.g. "its CPU backend"); "" when it has none
    exact_buffers_scope: str = ""
    max_batched_tokens: int = 8192  # token budget of one scheduler step (torch runtime model)
    # first engine version whose scheduler ``scheduler()`` describes (serving at concurrency): the serving
    # fit leaves out measurements of older builds; "" = every version
    serving_since: str = ""
    # the closed-loop benchmark client whose figures the serving section predicts (C clients, each sending its
    # next request when answered); "" = none of its own
    bench_client: str = ""
    # its GPU evidence is serving benchmarks (TTFT / TPOT at a concurrency), not llama-bench runs: without a
    # calibrated decode / prefill set of its own, one stream is timed by the serving fit's step
    # (estimator.physics.stream)
    stream_on_serving_step: bool = False
    # its serving benchmarks are points of the serving fit (calibration.serving); otherwise the calibration
    # report counts them as left out with ``serving_not_fitted`` (why)
    fits_serving: bool = False
    serving_not_fitted: str = "no serving model of this engine's scheduler and kernels"
    int8_gemm: bool = False
    # device families whose datasheet tensor rate needs instructions this engine's quantized GEMMs do not
    # issue, with why: their quantized prefill is not a point of the speed fit (calibration.features)
    unmodelled_quant_gemm: tuple[tuple[str, str], ...] = ()
    # (build era, backend, device families, most tokens of a pass its quantized GEMM kernels take, source):
    # builds of that era ran the quantized GEMMs of larger passes by dequantizing the weights to F16 and
    # calling the vendor BLAS (estimator.physics.speed.dequant_gemm_features).  Calibration times a record
    # of such a build that way (calibration.features.as_built_prefill); the estimator predicts current builds
    older_build_dequant_gemm: tuple[tuple[str, str, tuple[str, ...], int, str], ...] = ()
    # (backend, device family, why): the backend does not issue the family's matrix-engine instructions, so
    # its GEMMs run on the shader ALUs at the catalog's vector FP16 rate (HardwareSpec.vector_fp16_tflops)
    # instead of the datasheet matrix rate (estimator.physics.covariates.datasheet_tflops)
    vector_gemm: tuple[tuple[str, str, str], ...] = ()
    # (CPU family, why): on a CPU of that ISA family the engine's GEMMs take a slower path than on the CPUs
    # its other runs measure; the prefill compute rate (flops_abs_tflops) gets the covariate
    # ``cpu_gemm_fallback`` (estimator.physics.covariates), which those runs fit
    cpu_gemm_fallback: tuple[tuple[str, str], ...] = ()
    # (CPU ISA feature, why): on a CPU with that feature (HardwareSpec.cpu_isa) the engine's GEMMs run on a
    # matrix extension the CPUs of its other runs lack (vLLM's oneDNN BF16 GEMMs on Intel AMX); the prefill
    # compute rate (flops_abs_tflops) gets the covariate ``cpu_matrix_gemm``, which those runs fit
    cpu_matrix_gemm: tuple[tuple[str, str], ...] = ()
    # (CPU ISA feature, engine option, value, why): a known crash of the engine on hosts with that ISA feature
    # (harness.hwdetect's ``isa`` names) that setting the engine option (runners.base.ENGINE_OPTIONS) to the
    # value avoids; a point that dies by a signal on such a host without the option says so in its failed
    # record (``crash_hint``)
    cpu_crash_workarounds: tuple[tuple[str, str, object, str], ...] = ()
    # (engine option, value, setting): a run option that, at that value, takes the engine off the kernels its
    # default runs use (llama.cpp's ``--no-repack``).  A measured record stores the option it ran with
    # (the runner's ``extra``); calibration gives its points the record covariate ``setting=<setting>``
    # (estimator.physics.covariates, group ``settings``), which the estimator, predicting default runs, never
    # sets (``record_settings``)
    speed_settings: tuple[tuple[str, object, str], ...] = ()
    # (engine option, value, command-line flag): how a user of the engine's own tools sets what a runner
    # option sets (llama.cpp's ``repack = false`` is ``--no-repack``), for what a report tells users to run
    option_flags: tuple[tuple[str, object, str], ...] = ()
    materializes_kq_without_fa: bool = False
    # its weights run through one kernel per weight type (ggml's mul_mat / mul_mat_vec per type), whose
    # relative efficiencies the speed sets' kernel-class ratios carry (bw_rel_* / flops_rel_*,
    # estimator.physics.counts); an engine whose linear layers are another library's (torch, cuBLAS, oneDNN)
    # takes no class ratio, so its runs do not move ggml's (estimator.physics.speed.engine_class)
    quant_kernel_classes: bool = False
    # a sequence stops once its prompt + output tokens reach the model's context length (the engine's maximum
    # request length defaults to the length the model config allows), so a run that asked for more generated
    # fewer tokens than it states; llama-bench sizes its context to the test instead (n_ctx = prompt + gen)
    stops_at_model_context: bool = False
    # prefill: the last layer's FFN runs only for the rows that return logits (llama.cpp gathers the output
    # rows, ``inp_out_ids``, after the last layer's attention), not for every prompt token
    last_layer_ffn_outputs_only: bool = False
    # architectures whose graph keeps the final hidden state of every row as a graph output (llama.cpp's
    # h_nextn, the input of a multi-token-prediction drafter) and gathers the output rows only after it:
    # the output head then holds one more F32 hidden row per token, the gathered copy beside the kept state
    # (estimator.physics.runtime); the kept state is never freed, so the logits lie above wherever the last
    # layer's output landed
    head_keeps_hidden_archs: tuple[str, ...] = ()
    pipelines_layer_split: bool = False
    moe_cpu_offload: bool = False  # per-layer routed-expert offload (llama.cpp --n-cpu-moe)
    flash_attn_option: bool = False  # flash attention is a user switch (llama.cpp -fa), not the engine's pick
    kv_layout_options: bool = False  # the user sets --swa-full / --kv-unified / -ub / KV padding (llama.cpp)
    offload_flag: str = ""  # the flag that keeps weight bytes in host RAM
    # decode reads offloaded weights over the host link: the engine copies them to the device at every
    # forward pass (vLLM / SGLang --cpu-offload-gb); False: the host CPU computes the offloaded layers from
    # host RAM (llama.cpp -ngl, --n-cpu-moe).  estimator.physics.speed.device_rates reads it.
    offload_over_link: bool = False
    # the offloader copies every parameter of an offloaded module at each forward pass (SGLang's
    # OffloaderV1), not only the bytes the step reads (vLLM's UVA views): a MoE layer's offloaded experts all
    # cross the link.  estimator.physics.speed.weights_read reads it.
    offload_copies_modules: bool = False
    kv_dtype_hint: str = ""  # appended to the unknown-KV-dtype message
    # backend the engine runs on a device: ((vendor or "*", kind or "*", backend), ...), first match wins;
    # "none" = the engine has no backend for such devices.  What each backend runs is
    # estimator/data/support.csv (estimator.physics.support judges it).
    backends: tuple[tuple[str, str, str], ...] = ()
    # (device family, backend): the default for the devices of a family, ahead of ``backends`` (a family
    # whose users run another build than the rest of its vendor's devices of that kind)
    family_backends: tuple[tuple[str, str], ...] = ()
    # further (vendor, kind, backend) a user may choose with --backend (Workload.backend): a backend runs on a
    # device when an entry of ``backends`` or of these matches its vendor and kind
    backend_options: tuple[tuple[str, str, str], ...] = ()

    # ----------------------------------------------------------------------------------------- scheduler
    def describes_build(self, version: str) -> bool:
        """True when ``scheduler()`` is the scheduler of this engine version: ``serving_since`` is unset, the
        version is not stated or not a PEP 440 version (nightly builds), or it is at least ``serving_since``
        (``parse_version``)."""
        have, since = parse_version(version), parse_version(self.serving_since)
        return since is None or have is None or have >= since

    # ------------------------------------------------------------------------------------------- weights
    def runs(self, quant: QuantSpec) -> bool:
        """True when the engine loads weights in this format (its container holds the format)."""
        return self.container in quant.containers

    # ------------------------------------------------------------------------------------------ backends
    def dequantizes_gemm(self, era: str, backend: str, family: str, pass_tokens: int) -> bool:
        """True when a build of ``era`` on ``backend`` ran a quantized GEMM of a ``pass_tokens``-token pass
        on a ``family`` device as dequantize-to-F16 + vendor BLAS (``older_build_dequant_gemm``)."""
        return any(
            era == e and backend == b and family in fams and pass_tokens > most
            for e, b, fams, most, _src in self.older_build_dequant_gemm
        )

    def vector_gemm_reason(self, backend: str, family: str) -> str:
        """Why ``backend`` runs its GEMMs on the shader ALUs of a ``family`` device (``vector_gemm``), ""
        when it uses the device's matrix engines."""
        for b, fam, why in self.vector_gemm:
            if b.lower() == (backend or "").lower() and fam == family:
                return why
        return ""

    def crash_hint(self, isa: tuple[str, ...] | list[str], options: dict) -> str:
        """What to try when a point of this engine died by a signal on a CPU with ``isa`` (its features, as
        harness.hwdetect names them) run with engine ``options``: the workaround of each known crash
        (``cpu_crash_workarounds``) whose feature the CPU has and whose option the point did not set; ""
        when none applies."""
        return "; ".join(
            f"{why}: measure with engine option {key} = {str(value).lower()} "
            f"(plan engine_options, or --engine-option {self.name}:{key}={str(value).lower()})"
            for feature, key, value, why in self.cpu_crash_workarounds
            if feature in isa and options.get(key) != value
        )

    def crash_workarounds_for(self, isa: tuple[str, ...] | list[str]) -> tuple[tuple[str, str, str], ...]:
        """(why, workaround, setting) of each known crash (``cpu_crash_workarounds``) on a CPU with ISA
        features ``isa``: the workaround as the engine's flag (``option_flags``) and runner option, and the
        ``speed_settings`` name that option is recorded under ("" when it changes no kernel the speed model
        knows)."""
        out = []
        for feature, key, value, why in self.cpu_crash_workarounds:
            if feature not in isa:
                continue
            setting = next((n for k, v, n in self.speed_settings if k == key and v is value), "")
            option = f"engine option {key} = {str(value).lower()}"
            flag = next((f for k, v, f in self.option_flags if k == key and v is value), "")
            out.append((why, f"{flag} ({option})" if flag else option, setting))
        return tuple(out)

    def record_settings(self, extra: dict) -> tuple[str, ...]:
        """The non-default speed settings (``speed_settings``) a record ran with, by its ``extra`` (the
        options the runner recorded), sorted; () for a default run or a record that states none."""
        names = {name for key, value, name in self.speed_settings if extra.get(key) is value}
        return tuple(sorted(names))

    def cpu_matrix_gemm_reason(self, isa: tuple[str, ...] | list[str]) -> str:
        """Why the engine's GEMMs run on a matrix extension of a CPU with ISA features ``isa``
        (``cpu_matrix_gemm``), "" when they do not."""
        return next((why for feature, why in self.cpu_matrix_gemm if feature in isa), "")

    def cpu_gemm_fallback_reason(self, family: str) -> str:
        """Why the engine's GEMMs take a slower path on a CPU of ``family`` (``cpu_gemm_fallback``), ""
        when they do not."""
        return next((why for fam, why in self.cpu_gemm_fallback if fam == family), "")

    def backend_names(self) -> tuple[str, ...]:
        """Every backend name this engine knows (its device map and ``other_backends``), in order."""
        names = [b for _, _, b in self.backends + self.backend_options if b != "none"]
        return tuple(dict.fromkeys(names))

    def backends_on(self, hardware: HardwareSpec) -> tuple[str, ...]:
        """The backends that drive ``hardware`` (its vendor and kind), the default first; () when no entry
        names the device's vendor or kind (an unknown device: any backend is taken as asked)."""
        vendor = (hardware.vendor or "").lower()
        names = [b for fam, b in self.family_backends if fam == hardware.family]
        names += [
            b
            for v, kind, b in self.backends + self.backend_options
            if v in ("*", vendor) and kind in ("*", hardware.kind) and b != "none"
        ]
        return tuple(dict.fromkeys(names))

    def backend_name(self, requested: str) -> str:
        """``requested`` as the engine spells it (case-insensitive); SpecError for a backend it does not
        know."""
        names = {b.lower(): b for b in self.backend_names()}
        if requested.lower() not in names:
            raise SpecError(
                f"{self.label} has no {requested!r} backend; one of {', '.join(self.backend_names())}"
            )
        return names[requested.lower()]

    def backend_for(self, hardware: HardwareSpec, requested: str = "") -> str:
        """The backend on ``hardware``: ``requested`` when given (``backend_name``; SpecError when that
        backend does not drive this device, naming the ones that do), else the ``family_backends`` entry of
        the device's family, else the first ``backends`` entry matching its vendor and kind ("" when none
        does)."""
        if requested:
            name = self.backend_name(requested)
            there = self.backends_on(hardware)
            if there and name not in there:
                raise SpecError(
                    f"{self.label}'s {name} backend does not run on {hardware.name} ({hardware.vendor} "
                    f"{hardware.kind}); backends there: {', '.join(there)}"
                )
            return name
        for fam, backend in self.family_backends:
            if fam == hardware.family:
                return backend
        vendor = (hardware.vendor or "").lower()
        for v, kind, backend in self.backends:
            if v in ("*", vendor) and kind in ("*", hardware.kind):
                return backend
        return ""

    def adopt(self, workload: Workload) -> Workload:
        """``workload`` (sized for another engine) as this engine would run it: its name, its default backend
        for the device, and no per-layer expert offload when it has none (``moe_cpu_offload``; its launch
        command names what replaces it), and its default split for attention data parallelism when it has
        none (llama.cpp).  What the report judges another engine on (launch commands, the quant matrix's
        formats of another engine)."""
        if workload.engine == self.name:
            return workload
        offload = workload.moe_offload_layers if self.moe_cpu_offload else 0
        split = workload.split if workload.split != "dp" or self.attention_dp_flags else self.default_split
        return replace(workload, engine=self.name, backend="", moe_offload_layers=offload, split=split)

    # ------------------------------------------------------------------------------------------------ KV
    def layer_kind(self, model: ModelSpec, kind: str) -> str:
        """The attention kind the engine really runs for a layer the config declares as ``kind``."""
        return kind

    def state_recurrent_bytes(self, model: ModelSpec) -> int:
        """Bytes per element of a linear-attention / SSM layer's recurrent state: F32 (4) by default
        (llama.cpp's r / s caches are F32; SGLang's ``--mamba-ssm-dtype`` defaults to float32)."""
        return 4

    def kv_layout(
        self,
        model: ModelSpec,
        n_ctx: int,
        n_seq: int,
        n_ubatch: int,
        *,
        swa_full: bool = False,
        unified: bool = True,
        pad: int = 0,
    ) -> KVLayout:
        """Cells for n_seq sequences of n_ctx tokens each: ``swa_full`` sizes windowed layers like full ones,
        ``unified`` = one cache shared by the sequences (else one stream per sequence, where the engine has
        streams), ``pad`` = the cell padding of the engine build (0: the profile's current rule)."""
        raise NotImplementedError

    def kv_cells(
        self, model: ModelSpec, n_ctx: int, n_seq: int, n_ubatch: int, swa_full: bool = False
    ) -> tuple[int, int]:
        """(cells of a full-attention layer, cells of a sliding-window / chunked layer) for n_seq sequences
        of n_ctx tokens each, unified cache, current padding (``kv_layout`` with its defaults)."""
        lay = self.kv_layout(model, n_ctx, n_seq, n_ubatch, swa_full=swa_full)
        return lay.full, lay.windowed

    def flash_attn_for(self, setting: str | bool, model: ModelSpec | None = None) -> bool:
        """Whether flash attention runs for a user setting on / off / auto (True / False pass through).  An
        engine without the switch (``flash_attn_option`` False) picks its own attention kernels: True for on /
        auto, SpecError for off."""
        if isinstance(setting, bool):
            return setting
        s = str(setting).strip().lower()
        if s not in ("on", "off", "auto", "1", "0", "true", "false"):
            raise SpecError(f"flash attention must be on, off or auto (got {setting!r})")
        if not self.flash_attn_option:
            if s in ("off", "0", "false"):
                raise SpecError(
                    f"--flash-attn off is a llama.cpp option; {self.label} picks its own attention kernels"
                )
            return True
        if s == "auto":
            return self.auto_flash_attn(model)
        return s in ("on", "1", "true")

    def auto_flash_attn(self, model: ModelSpec | None = None) -> bool:
        """What ``auto`` resolves to (for a model, when one is given).  llama.cpp's ``-fa auto`` (its
        default) probes whether the device runs the fused attention op for every layer and turns it on when
        it does; every backend sized here (CPU, CUDA, Metal, Vulkan, ROCm) has the kernels: on."""
        return True

    def accepts_kv(self, kv_dtype: str) -> bool:
        """True when the engine's command line takes this KV dtype name (``kv_flags``)."""
        return kv_dtype.lower() in self.kv_flags

    def reserved_fraction(self, workload: Workload) -> float:
        """The memory fraction a command of this engine asks for: the sized one when the workload runs on this
        engine, else the engine's own default (the workload's value belongs to another engine)."""
        return workload.gpu_memory_utilization if workload.engine == self.name else self.memory_fraction

    def check_cache(self, kv_dtype: str, flash_attn: bool) -> None:
        """SpecError when the engine cannot allocate this KV cache at all (raised while sizing it)."""

    # ------------------------------------------------------------------------------------------ requests
    def check(self, workload: Workload) -> None:
        """Refuse (SpecError, one line) a requested configuration the engine cannot run: its KV dtype, MoE
        expert offload; the physics-level checks (``check_cache``) run while sizing."""
        if (workload.moe_offload_layers or workload.offload_bytes) and not self.offload_flag:
            raise SpecError(f"{self.label} has no host-memory weight offload (--offload-gib, --n-cpu-moe)")
        if workload.moe_offload_layers and not self.moe_cpu_offload:
            raise SpecError(
                f"--n-cpu-moe is a llama.cpp option; for {self.label}: --offload-gib ({self.offload_flag})"
            )
        if not self.kv_layout_options:
            asked = [
                flag
                for flag, on in (
                    ("--swa-full", workload.swa_full),
                    ("--no-kv-unified", not workload.kv_unified and workload.concurrency > 1),
                    ("--kv-pad", workload.kv_pad > 0),
                    ("--ubatch", workload.n_ubatch != Workload.n_ubatch),
                )
                if on
            ]
            if asked:
                plural = "s" if len(asked) > 1 else ""
                raise SpecError(
                    f"{', '.join(asked)}: llama.cpp option{plural}; {self.label} lays out its own KV cache "
                    "and batches"
                )
        if workload.kv_dtype.lower() not in self.kv_dtypes:
            raise SpecError(
                f"{self.label} has no {workload.kv_dtype} KV cache; use one of {', '.join(self.kv_dtypes)}"
                + (f" ({self.kv_dtype_hint})" if self.kv_dtype_hint else "")
            )

    def launch(
        self, model: ModelSpec, quant: QuantSpec, workload: Workload, weights_bytes: int
    ) -> LaunchCommand:
        """The engine's command line for this configuration (``exact`` when workload.engine is this one)."""
        raise NotImplementedError

    def exact_buffers_command(self, model_arg: str, model: ModelSpec, workload: Workload) -> str:
        """A fitbench command that prints the engine's own buffer sizes for this configuration, with no
        weights and no device (``model_arg``: how that command names the model); "" when there is none.
        ``exact_buffers_scope`` says whose buffers they are."""
        return ""

    def replayed_compute_bytes(
        self, model: ModelSpec, hardware: HardwareSpec, workload: Workload, layout: KVLayout, n_tokens: int
    ) -> int | None:
        """The engine's compute buffer on one device (bytes) from its own graph replayed through its
        allocator, for micro-batches of ``n_tokens`` over ``layout``'s cells; None where this profile builds
        no graph for the configuration (``estimator.physics.runtime``'s formula applies)."""
        return None

    # ------------------------------------------------------------------------------------------- serving
    def scheduler(self, hardware: HardwareSpec, workload: Workload) -> SchedulerSpec:
        """The engine's default scheduler on this device (per-device memory decides some defaults)."""
        raise NotImplementedError

    def state_pool(self, pool_bytes: int, demand: StateDemand) -> tuple[int, int] | None:
        """How a recurrent hybrid's state (``demand``) shares a reserved pool of ``pool_bytes`` per device:
        (bytes left to the attention KV, possibly negative when the state alone overflows the pool, most
        running requests the state admits), or None when the engine keeps the state inside its KV pool."""
        return None

    def startup_kv(
        self,
        layers: tuple[CacheLayer, ...],
        max_model_len: int,
        pool_bytes: int,
        hardware: HardwareSpec,
        workload: Workload,
        *,
        prefix_caching: bool = True,
    ) -> StartupKV | None:
        """The KV-cache figures the engine logs at startup for a pool of ``pool_bytes`` per device (see
        ``StartupKV``); None when it logs none, or none its block manager's rules here reproduce.
        ``prefix_caching``: the engine's prefix cache is on (its serving default)."""
        return None

    def dense_prompt_keys(self, model: ModelSpec, hardware: HardwareSpec) -> int:
        """Keys up to which a DSA prompt batch runs dense attention in the naive form instead of the sparse
        kernels (``counts.attention_flops``'s ``dense_upto``); 0: never (the sparse or masked form always)."""
        return 0

    def weight_format(self, quant: QuantSpec) -> QuantSpec:
        """The per-tensor recipe the engine loads for ``quant`` (the catalog recipe unless it differs)."""
        return quant

    def remote_code_args(self, model: ModelSpec, target: str) -> tuple[list[str], list[str]]:
        """(flags, notes) for a repository that ships its own code (``ModelSpec.custom_code``: config.json's
        ``auto_map``, e.g. Kimi K2's tokenizer): the engine loads it only with ``trust_remote_code_flag``.
        Nothing for a local file (a GGUF path) or an engine without the flag."""
        if not (model.custom_code and self.trust_remote_code_flag) or target.endswith(".gguf"):
            return [], []
        note = (
            f"{model.hf_id or model.id} ships its own code (config.json auto_map): "
            f"{self.trust_remote_code_flag} lets {self.label} run it"
        )
        return [self.trust_remote_code_flag], [note]

    def serves_published(self, model: ModelSpec, quant: QuantSpec) -> bool | None:
        """True when the engine serves ``quant`` from the model's published checkpoint (its own format, a
        dense dtype of an unquantized checkpoint, FP8 quantized at load time: ``checkpoint_args``), False when
        it needs a checkpoint someone published in that format (or a dequantized copy); None for an engine
        that does not load checkpoints (``container`` not "safetensors": llama.cpp's GGUF recipes)."""
        if self.container != "safetensors":
            return None
        args = checkpoint_args(model, quant, self.label)
        return args is not None and not args[0].startswith("<")

    def default_quant_for(self, model: ModelSpec) -> str:
        """The weight format sized when none is asked for: a checkpoint engine (``container``
        "safetensors": vLLM, SGLang, TensorRT-LLM) loads the published checkpoint as it is
        (``checkpoint_quant``: DeepSeek-V3 in FP8-BLOCK, gpt-oss in MXFP4), else ``default_quant``."""
        if self.container == "safetensors":
            return checkpoint_quant(model) or self.default_quant
        return self.default_quant


_DENSE_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def checkpoint_quant(model: ModelSpec) -> str | None:
    """The catalog format of the model's published checkpoint (``estimator.specs.CHECKPOINT_QUANTS``); None
    for a GGUF file (its own tensors) or a checkpoint dtype no catalog format names."""
    if model.gguf_tensors is not None:
        return None
    return CHECKPOINT_QUANTS.get(model.native_dtype)


def dequantized_copy(model: ModelSpec, q: str, label: str, dtype_flag: bool) -> tuple[str, str]:
    """(target, note) for a dense format ``q`` of a model published quantized: an engine keeps a checkpoint's
    quantization (whatever ``--dtype`` says, where it has the flag), so it needs a dequantized copy."""
    repo = model.hf_id or model.id
    says = " whatever --dtype says" if dtype_flag else ""
    note = (
        f"{repo} is published in {checkpoint_quant(model)}; {label} keeps a checkpoint's quantization{says}, "
        f"so {q} needs a dequantized copy"
    )
    return f"<{q} checkpoint of {repo}>", note


def checkpoint_args(
    model: ModelSpec, quant: QuantSpec, label: str
) -> tuple[str, list[str], list[str]] | None:
    """(model argument, extra flags, notes) of a Hugging Face checkpoint engine (vLLM, SGLang; ``label``
    names it in notes) loading ``quant``:

    * the published checkpoint's own quantized format (``checkpoint_quant``; FP8 of an FP8 checkpoint): the
      repository, no flag (the engine reads the checkpoint's quantization_config);
    * a dense dtype of an unquantized checkpoint: ``--dtype`` (explicit, also for the checkpoint's own); FP8
      of one: ``--quantization fp8`` (quantized at load time);
    * a dense dtype of a quantized checkpoint: a dequantized copy (an engine keeps a checkpoint's
      quantization whatever ``--dtype`` says);
    * another format a checkpoint holds (``quant.containers`` has safetensors: NVFP4, FP8-BLOCK, AWQ,
      W4A16 ...): a checkpoint published in that format, named as a placeholder;

    None when no checkpoint holds the format (a GGUF recipe: the engine decides)."""
    q = quant.name.upper()
    repo = model.hf_id or model.id
    own = checkpoint_quant(model)
    quantized = own not in (None, *_DENSE_DTYPES)
    if q not in _DENSE_DTYPES and (q == own or (q == "FP8" and model.native_dtype == "fp8")):
        return repo, [], []
    if q in _DENSE_DTYPES:
        if not quantized:
            return repo, ["--dtype", _DENSE_DTYPES[q]], []
        target, note = dequantized_copy(model, q, label, dtype_flag=True)
        return target, ["--dtype", _DENSE_DTYPES[q]], [note]
    if q == "FP8" and not quantized:
        note = "--quantization fp8 quantizes the bf16 checkpoint to FP8 at load time"
        return repo, ["--quantization", "fp8"], [note]
    if "safetensors" in quant.containers:
        note = f"{label} reads the quantization settings from the quantized checkpoint's config"
        return f"<{quant.name} checkpoint of {repo}>", [], [note]
    return None


# vLLM and SGLang load an MXFP4 checkpoint as published (gpt-oss: the routed experts' *_blocks / *_scales in
# MXFP4, attention, embeddings, head, router and norms in bf16); llama.cpp's MXFP4_MOE recipe stores every
# other matrix in q8_0 instead.  Not a catalog recipe (QUANTS["MXFP4"] is llama.cpp's), so the weight physics
# types each tensor through ``types`` (estimator.physics.quant.type_for).
_EXPERT_CLASSES = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
MXFP4_CHECKPOINT = QuantSpec(
    name="MXFP4",
    default_type="bf16",
    types={c: "mxfp4" for c in _EXPERT_CLASSES},
    description="MXFP4 checkpoint (gpt-oss): routed experts MXFP4 (4.25 bits), everything else bf16",
    containers=("gguf", "safetensors"),
)


# 1-D tensors and the router: llama.cpp keeps them F32 (estimator.physics.quant.ALWAYS_F32); a PyTorch
# engine creates them in the checkpoint's dtype (RMSNorm weights, biases, the MoE gate's ReplicatedLinear).
# Measured: vLLM's worker holds SmolLM2-360M's and Qwen3-0.6B's norms in bf16 (results/runs/cpu-full:
# 17,280 and 20,480 B below the GGUF recipe's F32 count, 2 B per norm element).  Of the state-space tensors
# only A (Mamba2 ``A``, Gated DeltaNet ``A_log``: class ssm_small) stays F32, created so by vLLM
# (layers/mamba/mamba_mixer2.py, gdn/qwen_gdn_linear_attn.py); the conv1d weight is an unquantized
# ColumnParallelLinear in the model dtype, D and dt_bias parameters in it too.  Measured on vLLM's worker
# (results/runs/cpu-vllm-hybrid, Qwen3-Next 4-layer proxy): 14,420,007,232 B, equal to the byte; with conv1d
# in F32 and A in bf16 it was 196,416 B over (65,536 - 64 per linear layer).
_CHECKPOINT_SMALL = ("norm", "bias", "ffn_gate_inp", "ssm_conv1d")
_SSM_F32 = ("ssm_small",)


def checkpoint_weight_format(quant: QuantSpec, fills_k_eq_v: bool = False) -> QuantSpec:
    """What a Hugging Face checkpoint engine (vLLM, SGLang, TensorRT-LLM) loads for ``quant``: MXFP4 as
    published (``MXFP4_CHECKPOINT``); a dense float format (F16 / BF16) with its norms, biases and router in
    that dtype instead of llama.cpp's F32 (``_CHECKPOINT_SMALL``); every other format as catalogued (the
    checkpoint formats already keep them in bf16 / f16).  ``fills_k_eq_v``: the engine's loader keeps a V
    projection on K==V layers and loads K into it (``QuantSpec.fills_k_eq_v``; the calling profile says so
    with its source), applied to the checkpoint (safetensors) formats."""
    name = quant.name.upper()
    q = quant
    if name == "MXFP4":
        q = MXFP4_CHECKPOINT
    elif name in ("F16", "BF16") and not quant.from_file:
        dtype = name.lower()
        small = {**dict.fromkeys(_CHECKPOINT_SMALL, dtype), **dict.fromkeys(_SSM_F32, "f32")}
        q = replace(quant, types={**quant.types, **small})  # same name and description: the dtype's
    if fills_k_eq_v and "safetensors" in q.containers:
        q = replace(q, fills_k_eq_v=True)
    return q


def gpu_layers(model: ModelSpec, workload: Workload, weights_bytes: int) -> int:
    """Layers kept on the device: all (999) unless ``offload_bytes`` moves whole layers to host RAM; then
    ``n_layers - ceil(offload_bytes / (weights_bytes / n_layers))`` (at least 0)."""
    if workload.offload_bytes <= 0 or weights_bytes <= 0:
        return 999
    per_layer = weights_bytes / model.n_layers
    return max(0, model.n_layers - math.ceil(workload.offload_bytes / per_layer))
