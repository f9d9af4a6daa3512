"""The physics layer: quant recipes, weights, KV cache, runtime buffers, memory, speed, cost, fine-tuning.

Pure functions of the specs and coefficients; imports estimator.specs and estimator.catalog only.
"""
