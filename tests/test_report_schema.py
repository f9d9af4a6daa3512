"""--format json output validates against the documented schema, and the schema matches the dataclasses."""

import json

import jsonschema
import pytest

from estimator.catalog.data import all_hardware, get_hardware, get_model
from estimator.catalog.rates import load_cloud_rates
from estimator.catalog.resolve import resolve_hardware
from estimator.physics.coefficients import load_coefficients
from estimator.physics.quant import get_quant
from estimator.render.json import load_schema, render_json
from estimator.report.document import SCHEMA_VERSION, build_report, generate_schema, report_to_dict
from estimator.report.units import ReportOptions
from estimator.specs import Workload

OPTS = ReportOptions(hardware_catalog=tuple(all_hardware()), rates=load_cloud_rates())
CASES = [
    ("glm-4.5", "mi300x", "Q4_K_M", {}),
    ("deepseek-v3", "h200-141gb-sxm", "Q2_K", {"n_devices": 8, "split": "pp", "kv_dtype": "q8_0"}),
    ("llama-3.1-8b", "rtx-4090", "BF16", {"engine": "vllm", "kv_dtype": "fp8", "concurrency": 8}),
    ("qwen3-30b-a3b", "rtx-3060-12gb", "Q4_K_M", {"moe_offload_layers": 20, "offload_bytes": 2**30}),
]


def test_committed_schema_is_the_generated_one():
    assert load_schema() == generate_schema()
    assert load_schema()["properties"]["schema_version"] == {"const": SCHEMA_VERSION}


@pytest.mark.parametrize("model, hw, quant, wl", CASES)
def test_reports_validate(model, hw, quant, wl):
    d = report_to_dict(
        build_report(
            get_model(model),
            get_hardware(hw),
            get_quant(quant),
            Workload(**wl),
            load_coefficients(None),
            OPTS,
        )
    )
    jsonschema.validate(json.loads(render_json(d)), load_schema())


def test_custom_hardware_validates():
    hw = resolve_hardware("custom", memory_gib=48, bandwidth_gbs=900, tflops=150, family="custom")
    d = report_to_dict(
        build_report(get_model("qwen3-8b"), hw, get_quant("Q8_0"), Workload(), load_coefficients(None), OPTS)
    )
    jsonschema.validate(d, load_schema())
    assert d["hardware"]["id"] == "custom"


def test_schema_rejects_a_missing_key():
    d = report_to_dict(
        build_report(
            get_model("qwen3-0.6b"),
            get_hardware("rtx-4090"),
            get_quant("Q8_0"),
            Workload(),
            load_coefficients(None),
            OPTS,
        )
    )
    del d["memory"]["kv_bytes"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(d, load_schema())
