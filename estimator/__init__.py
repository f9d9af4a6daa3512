"""fitbench estimator: pure sizing model (memory, speed, cost) and report rendering.

Import-light on purpose: ``python -m estimator report`` must start fast, so nothing heavy is imported here.
Public entry points live in their modules: estimator.catalog.resolve (resolve_model / resolve_hardware),
estimator.physics.memory (estimate_memory), estimator.physics.kv (kv_cache), estimator.physics.weights
(weight_breakdown),
estimator.physics.quant (QUANTS, get_quant).
"""

__version__ = "0.1.0"
