"""fitbench estimator: pure sizing model (memory, speed, cost) and report rendering.

Import-light on purpose: ``python -m estimator report`` must start fast, so nothing heavy is imported here.
Public entry points live in their modules: estimator.resolve (resolve_model / resolve_hardware),
estimator.memory (estimate_memory), estimator.kv (kv_cache), estimator.weights (weight_breakdown),
estimator.quant (QUANTS, get_quant).
"""

__version__ = "0.1.0"
