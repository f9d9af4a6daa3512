"""The catalog layer: model and hardware catalogs, resolving ids, config.json / GGUF readers, measured runs.

Imports only estimator.specs (the lowest layer of the estimator).
"""
