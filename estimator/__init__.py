"""fitbench estimator: pure sizing model (memory, speed, cost) and report rendering.

Import-light on purpose: ``python -m estimator report`` must start fast, so nothing heavy is imported here.
Layers, bottom up: specs -> catalog, engines -> physics -> render -> report -> app (docs/ARCHITECTURE.md).
Entry points: estimator.report.request (ReportRequest, make_report), estimator.report.document
(report_to_dict,
to_text / to_markdown / to_html), estimator.catalog.resolve (resolve_model / resolve_hardware),
estimator.physics.memory (estimate_memory), estimator.physics.speed (estimate_speed), estimator.engines
(get_engine).
"""

__version__ = "0.1.0"
