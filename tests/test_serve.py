"""``python -m estimator serve``: JSON equals ``--format json``; bad parameters get HTTP 400 with one line."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest

from estimator.app.serve import ParamError, make_server, parse_params


@pytest.fixture(scope="module")
def base_url():
    server = make_server("127.0.0.1", 0, results_dir=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode("utf-8")


def without_time(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "generated_utc"}


def test_binds_loopback_by_default():
    server = make_server(port=0, results_dir=None)
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.server_close()


def test_api_json_equals_cli_json(base_url):
    q = {
        "model": "qwen3-30b-a3b",
        "hardware": "rtx-4090",
        "quant": "Q4_K_M",
        "ctx": "16384",
        "kv": "q8_0",
        "devices": "2",
        "concurrency": "4",
        "engine": "llama.cpp",
    }
    status, ctype, body = get(f"{base_url}/api/report?{urlencode(q)}")
    assert status == 200 and ctype.startswith("application/json")
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "estimator",
            "report",
            "--model",
            q["model"],
            "--hardware",
            q["hardware"],
            "--quant",
            q["quant"],
            "--ctx",
            q["ctx"],
            "--kv-dtype",
            q["kv"],
            "--devices",
            q["devices"],
            "--concurrency",
            q["concurrency"],
            "--engine",
            q["engine"],
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert without_time(json.loads(body)) == without_time(json.loads(cli.stdout))


def test_fragment_and_page(base_url):
    status, ctype, body = get(f"{base_url}/fragment?model=llama-3.1-8b&hardware=rtx-4090&lang=es")
    assert status == 200 and ctype.startswith("text/html")
    assert body.startswith('<article class="fb-report" lang="es"') and "<svg" in body
    status, _, page = get(f"{base_url}/?model=llama-3.1-8b&hardware=rtx-4090")
    assert status == 200 and 'id="fb-form"' in page and 'id="fb-report"' in page and "<article" in page
    # the page's script only calls the server; no sizing arithmetic (bytes, GiB) in it
    script = page.split("<script>")[1].split("</script>")[0]
    assert "/fragment?" in script and "1024" not in script and "2**30" not in script and "GiB" not in script
    status, _, html2 = get(f"{base_url}/api/report.html?model=llama-3.1-8b&hardware=rtx-4090")
    assert status == 200 and html2.startswith("<article")


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("model=llama-3.1-8b&hardware=rtx-4090&ctx=abc", "'ctx' must be an integer"),
        ("model=llama-3.1-8b&hardware=rtx-4090&ctx=0", "'ctx' must be between"),
        ("model=llama-3.1-8b&hardware=rtx-4090&devices=-1", "'devices' must be between"),
        ("model=llama-3.1-8b&hardware=rtx-4090&offload_gib=nan", "'offload_gib' must be between"),
        ("model=llama-3.1-8b&hardware=rtx-4090&engine=tgi", "'engine' must be one of"),
        ("model=llama-3.1-8b&hardware=rtx-4090&lang=fr", "'lang' must be one of"),
        ("model=llama-3.1-8b&hardware=rtx-4090&bogus=1", "unknown parameter 'bogus'"),
        ("model=llama-3.1-8b&model=qwen3-8b&hardware=rtx-4090", "more than once"),
        ("model=&hardware=rtx-4090", "'model' must not be empty"),
        ("model=llama-3.1-8x&hardware=rtx-4090", "llama-3.1-8b"),  # nearest id named
        ("model=llama-3.1-8b&hardware=rtx-4099", "rtx-4090"),
        ("model=llama-3.1-8b&hardware=rtx-4090&quant=Q4_K_X", "Q4_K"),
        ("model=llama-3.1-8b&hardware=rtx-4090&ctx=9999999", "maximum"),
    ],
)
@pytest.mark.parametrize("route", ["/api/report", "/fragment"])
def test_bad_params_get_400_one_line(base_url, route, query, needle):
    status, ctype, body = get(f"{base_url}{route}?{query}")
    assert status == 400, body
    assert ctype.startswith("text/plain")
    assert needle in body, body
    assert "Traceback" not in body and len(body.strip().splitlines()) == 1


def test_page_with_bad_params_still_loads_and_says_why(base_url):
    status, _, page = get(f"{base_url}/?model=nope-model&hardware=rtx-4090")
    assert status == 200 and 'role="alert"' in page and "nope-model" in page


def test_unknown_route_404(base_url):
    status, _, body = get(f"{base_url}/etc/passwd")
    assert status == 404 and "Traceback" not in body


def test_parse_params_defaults_and_errors():
    p = parse_params({"model": ["llama-3.1-8b"], "offload_gib": ["1.5"]})
    assert p.ctx is None and p.offload_gib == 1.5 and p.lang == "en"  # no ctx: 8192 or the model's maximum
    assert p.memory_gib is None and p.family is None and p.request().memory_gib is None
    assert p.request().offload_gib == 1.5 and p.request().quant is None  # the engine's default for the model
    assert p.query()["quant"] == ""
    with pytest.raises(ParamError):
        parse_params({"concurrency": ["0"]})


def test_serve_cli_bad_port_exit_2():
    r = subprocess.run(
        [sys.executable, "-m", "estimator", "serve", "--port", "70000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


def test_custom_hardware_parameters_and_default_context():
    p = parse_params(
        {
            "model": ["llama-2-7b"],
            "hardware": ["custom"],
            "memory_gib": ["48"],
            "bandwidth_gbs": ["864"],
            "tflops": ["180"],
            "family": ["nvidia-ada"],
            "ctx": [""],
        }
    )
    req = p.request()
    assert (req.memory_gib, req.bandwidth_gbs, req.tflops, req.family, req.ctx) == (
        48,
        864,
        180,
        "nvidia-ada",
        None,
    )
    assert p.query()["memory_gib"] == "48" and p.query()["ctx"] == ""
    for bad, word in (
        (("memory_gib", "-1"), "between"),
        (("tflops", "abc"), "number"),
        (("family", "x\x01"), "valid"),
    ):
        with pytest.raises(ParamError, match=word):
            parse_params({bad[0]: [bad[1]]})


def test_page_custom_hardware_report(base_url):
    status, _, body = get(
        f"{base_url}/api/report?model=llama-2-7b&hardware=custom&memory_gib=48&bandwidth_gbs=864"
        "&tflops=180&family=nvidia-ada"
    )
    assert status == 200
    d = json.loads(body)
    assert d["hardware"]["id"] == "custom" and d["hardware"]["bandwidth_gbs"] == 864
    assert d["workload"]["n_ctx"] == 4096  # no ctx: the 8192 default clamped to Llama 2's 4096
    status, _, page = get(f"{base_url}/?model=qwen3-0.6b&hardware=custom&memory_gib=16&bandwidth_gbs=400")
    assert (
        status == 200 and 'id="fb-custom"' in page and 'id="fb-custom" class="custom-hw" hidden' not in page
    )
    status, _, page = get(f"{base_url}/?model=qwen3-0.6b&hardware=rtx-4090")
    assert 'class="custom-hw" hidden' in page and 'value="auto"' in page
