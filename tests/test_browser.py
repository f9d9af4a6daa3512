"""End to end in a real browser: ``python -m estimator serve`` driven by headless Chromium (selenium).

Starts the server on a free loopback port, changes the form's inputs, waits for the server-rendered fragment,
and checks every number on the page against ``/api/report`` (the JSON report).  A screenshot is written to
``test-artifacts/serve.png``; with ``FITBENCH_UPDATE_SCREENSHOT=1`` it is also copied to docs/img/serve.png.
Skipped when /usr/bin/chromium, its driver or selenium is missing (install: ``apt-get install -y chromium
chromium-driver`` and ``pip install -e '.[dev]'``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from estimator.render.htmlkit import FORMATS, lookup

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"

if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    pytest.skip("headless Chromium or chromedriver not installed", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1200,2200",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "estimator", "serve", "--port", str(port)],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"serve did not start: {log.read_text()}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(120)
    yield drv
    drv.quit()


def wait_ready(drv, timeout: float = 120) -> None:
    WebDriverWait(drv, timeout).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") in ("ready", "error")
    )


def page_numbers(drv) -> list[dict]:
    return drv.execute_script(
        "return Array.from(document.querySelectorAll('#fb-report [data-path][data-fmt]')).map(e => ({"
        "path: e.dataset.path, fmt: e.dataset.fmt, raw: e.dataset.value, text: e.textContent}));"
    )


def api_report(url: str, drv) -> dict:
    query = drv.execute_script("return window.location.search")
    with urllib.request.urlopen(f"{url}/api/report{query}", timeout=120) as r:
        return json.loads(r.read())


def check_numbers(drv, report: dict, lang: str) -> int:
    numbers = page_numbers(drv)
    assert len(numbers) > 80
    for n in numbers:
        value = lookup(report, n["path"])
        if value is None:
            assert n["text"] == "—", n
            continue
        assert float(n["raw"]) == float(value), n
        assert n["text"] == FORMATS[n["fmt"]](value, lang), n
    return len(numbers)


def test_page_updates_and_matches_api(server, browser):
    browser.get(f"{server}/?model=llama-3.1-8b&hardware=rtx-4090&quant=Q4_K_M&ctx=8192")
    wait_ready(browser)
    first = browser.find_element(By.CSS_SELECTOR, '#fb-report [data-path="memory.total_bytes"]').text
    check_numbers(browser, api_report(server, browser), "en")

    # change inputs: an MoE model, a longer context and q8_0 KV; the fragment is swapped in by the page script
    Select(browser.find_element(By.ID, "f-model")).select_by_value("qwen3-30b-a3b")
    wait_ready(browser)
    ctx = browser.find_element(By.ID, "f-ctx")
    ctx.clear()
    ctx.send_keys("32768")
    Select(browser.find_element(By.ID, "f-kv")).select_by_value("q8_0")
    wait_ready(browser)
    WebDriverWait(browser, 120).until(
        lambda d: (
            "kv=q8_0" in d.execute_script("return window.location.search")
            and "ctx=32768" in d.execute_script("return window.location.search")
        )
    )
    wait_ready(browser)
    h1 = browser.find_element(By.CSS_SELECTOR, "#fb-report h1").text
    assert "Qwen3" in h1 or "qwen3" in h1.lower()
    report = api_report(server, browser)
    assert report["workload"]["n_ctx"] == 32768 and report["workload"]["kv_dtype"] == "q8_0"
    assert browser.find_element(By.CSS_SELECTOR, '#fb-report [data-path="memory.total_bytes"]').text != first
    check_numbers(browser, report, "en")

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "serve.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("FITBENCH_UPDATE_SCREENSHOT") == "1":
        (ROOT / "docs" / "img").mkdir(parents=True, exist_ok=True)
        from PIL import Image  # pillow comes with matplotlib; README copy: top of the page, 64 colours

        with Image.open(shot) as im:
            top = im.crop((0, 0, im.width, min(im.height, 1500))).quantize(64)
            top.save(ROOT / "docs" / "img" / "serve.png", optimize=True)


def test_bad_input_shows_message_not_traceback(server, browser):
    browser.get(f"{server}/?model=llama-3.1-8b&hardware=rtx-4090")
    wait_ready(browser)
    ctx = browser.find_element(By.ID, "f-ctx")
    ctx.clear()
    ctx.send_keys("99999999")
    browser.find_element(By.ID, "fb-update").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_element(By.ID, "fb-error").is_displayed())
    text = browser.find_element(By.ID, "fb-error").text
    assert "bad request" in text and "Traceback" not in text


def test_spanish_page(server, browser):
    browser.get(f"{server}/?model=gemma-3-27b&hardware=rtx-4090&lang=es")
    wait_ready(browser)
    assert "Desglose de asignación de memoria" in browser.page_source
    check_numbers(browser, api_report(server, browser), "es")


def test_custom_hardware_fields(server, browser):
    """The page's custom-hardware fields: hidden for a catalog device, shown for "custom", and the report is
    the one the API gives for the same figures (issue 13: 8)."""
    browser.get(f"{server}/?model=qwen3-0.6b&hardware=rtx-4090")
    wait_ready(browser)
    assert not browser.find_element(By.ID, "fb-custom").is_displayed()
    Select(browser.find_element(By.ID, "f-hardware")).select_by_value("custom")
    assert browser.find_element(By.ID, "fb-custom").is_displayed()
    for field, value in (("f-memory_gib", "16"), ("f-bandwidth_gbs", "400"), ("f-tflops", "100")):
        box = browser.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    Select(browser.find_element(By.ID, "f-family")).select_by_value("nvidia-ada")
    WebDriverWait(browser, 120).until(
        lambda d: all(
            x in d.execute_script("return window.location.search")
            for x in (
                "hardware=custom",
                "memory_gib=16",
                "bandwidth_gbs=400",
                "tflops=100",
                "family=nvidia-ada",
            )
        )
    )
    wait_ready(browser)
    report = api_report(server, browser)
    assert report["hardware"]["id"] == "custom" and report["hardware"]["bandwidth_gbs"] == 400
    assert report["hardware"]["family"] == "nvidia-ada" and report["hardware"]["bf16_tflops"] == 100
    assert "16 GiB / 400 GB/s" in browser.find_element(By.CSS_SELECTOR, "#fb-report h1").text
    check_numbers(browser, report, "en")


def test_mobile_width(server, browser):
    """At a phone's width (390 CSS px) nothing widens the page: the form and the cards reflow, wide tables
    scroll inside their own box; the numbers are still the API's (issue 13: 8)."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True},
    )
    try:
        browser.get(f"{server}/?model=glm-4.5&hardware=mi300x&lang=es")
        wait_ready(browser)
        page_w, view_w = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert view_w == 390 and page_w <= view_w
        right = browser.execute_script(
            "return Math.max(...Array.from(document.querySelectorAll('#fb-form label, #fb-form button, "
            ".summary-cards .card, h1')).map(e => e.getBoundingClientRect().right))"
        )
        assert right <= view_w
        cols = browser.execute_script(
            "return getComputedStyle(document.getElementById('fb-form'))"
            ".gridTemplateColumns.split(' ').length"
        )
        assert cols == 2
        report = api_report(server, browser)
        check_numbers(browser, report, "es")
        text = browser.execute_script("return document.getElementById('fb-report').textContent")
        assert "k-quant de 4 bits" in text and "contexto vacío" in text  # quant descriptions, speed labels
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "serve-mobile.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
