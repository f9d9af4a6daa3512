"""The physics layer: quant recipes, weights, KV cache, runtime buffers, memory, workload limits, speed,
cost, fine-tuning.

Pure functions of the specs and coefficients; imports estimator.specs, estimator.catalog and the engine
profiles (estimator.engines) only.
"""
