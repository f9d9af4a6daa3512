"""The report's sections, one module each (builder, record types and renderings together), in report order.

``UNITS`` is the one list: its order is the order of the JSON keys and of the rendered sections.  Adding a
section is a new module here plus one line below (docs/ARCHITECTURE.md, "Add a report section").
"""

from __future__ import annotations

from estimator.report.sections import (
    charts,
    configuration,
    context,
    cost,
    finetune,
    kv,
    launch,
    memory,
    model,
    multi_device,
    provenance,
    quants,
    recommendations,
    serving,
    speed,
    summary,
    support,
)
from estimator.report.units import Unit

UNITS: tuple[Unit, ...] = (
    summary.UNIT,
    model.UNIT,
    configuration.QUANT,
    configuration.HARDWARE,
    configuration.WORKLOAD,
    support.UNIT,
    memory.UNIT,
    kv.UNIT,
    context.UNIT,
    quants.UNIT,
    speed.UNIT,
    serving.UNIT,
    multi_device.UNIT,
    cost.UNIT,
    finetune.UNIT,
    recommendations.UNIT,
    launch.UNIT,
    provenance.COEFFICIENTS,
    charts.UNIT,
    provenance.WARNINGS,
    summary.NOTES,
)
