"""What a workload may ask of a model: a context within the model's maximum (unless the user insists), at
least one device, sequence and slot, a known split and engine (attention data parallelism only on an engine
that has it), offload that exists (``--n-cpu-moe`` needs
routed experts and at most every layer), a reservation fraction in (0, 1].  One-line SpecError otherwise;
warnings for what is allowed but odd."""

from __future__ import annotations

from estimator.engines import ENGINES, get_engine
from estimator.specs import SPLITS, ModelSpec, SpecError, Workload


def check_split(engine: str, split: str, how: str) -> None:
    """SpecError for attention data parallelism (split ``dp``) on an engine that has none (llama.cpp); ``how``
    says how the user asked for it ("--split dp; use --split tp or pp", "column 'split'")."""
    profile = get_engine(engine)
    if split == "dp" and not profile.attention_dp_flags:
        raise SpecError(f"{profile.label} has no attention data parallelism ({how})")


def validate_workload(model: ModelSpec, workload: Workload, allow_overlong: bool = False) -> tuple[str, ...]:
    """SpecError for an impossible workload; warnings (tuple of lines) for an allowed but odd one."""
    warnings: list[str] = []
    if workload.n_ctx <= 0:
        raise SpecError(f"context must be a positive number of tokens, got {workload.n_ctx}")
    if workload.n_ctx > model.max_context:
        if not allow_overlong:
            raise SpecError(
                f"context {workload.n_ctx} is above {model.id}'s maximum of {model.max_context} tokens "
                "(pass --allow-overlong to size it anyway)"
            )
        warnings.append(
            f"context {workload.n_ctx} is above the model's maximum of {model.max_context} tokens"
        )
    for name in ("n_devices", "concurrency", "n_seq"):
        if getattr(workload, name) < 1:
            raise SpecError(f"{name.replace('_', ' ')} must be >= 1, got {getattr(workload, name)}")
    if workload.split not in SPLITS:
        raise SpecError(f"split must be {', '.join(SPLITS[:-1])} or {SPLITS[-1]}, got {workload.split!r}")
    if workload.engine not in ENGINES:
        raise SpecError(f"engine must be one of {', '.join(ENGINES)}, got {workload.engine!r}")
    check_split(workload.engine, workload.split, "--split dp; use --split tp or pp")
    if workload.offload_bytes < 0 or workload.moe_offload_layers < 0:
        raise SpecError("offload must be >= 0")
    if workload.moe_offload_layers and model.moe is None:
        raise SpecError(f"--n-cpu-moe needs a mixture-of-experts model; {model.id} is dense")
    if workload.moe_offload_layers > model.n_layers:
        raise SpecError(
            f"--n-cpu-moe {workload.moe_offload_layers} is above the model's {model.n_layers} layers"
        )
    if not 0 < workload.gpu_memory_utilization <= 1:
        raise SpecError(f"gpu memory utilization must be in (0, 1], got {workload.gpu_memory_utilization}")
    return tuple(warnings)
