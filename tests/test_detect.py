"""``--hardware auto`` (issue 13: 5): the estimator's own detection of this machine
(``estimator.catalog.detect``).

The CPU path runs here; NVIDIA GPUs come from a fake ``pynvml`` module injected into sys.modules (the same
calls NVML answers), Apple silicon from a fake ``sysctl``; the real NVML path is marked ``gpu``.
"""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from estimator.catalog import detect
from estimator.report.document import report_to_dict
from estimator.report.request import ReportRequest, make_report, resolve_device
from estimator.specs import GIB
from tests.estimator_cli import cli, cli_json


def fake_nvml(names: list[str], memory: int = 24 * GIB, cc=(8, 9)) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM = 1, 2
    nv.nvmlInit = nv.nvmlShutdown = lambda: None
    nv.nvmlSystemGetDriverVersion = lambda: b"570.1"
    nv.nvmlDeviceGetCount = lambda: len(names)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: names[h].encode()
    nv.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=memory)
    nv.nvmlDeviceGetCudaComputeCapability = lambda h: cc
    nv.nvmlDeviceGetMaxClockInfo = lambda h, kind: 2520
    return nv


@pytest.fixture()
def fresh(monkeypatch):
    detect.detect_hardware.cache_clear()
    yield monkeypatch
    detect.detect_hardware.cache_clear()


def test_two_fake_4090s_are_found_and_counted(fresh):
    fresh.setitem(sys.modules, "pynvml", fake_nvml(["NVIDIA GeForce RTX 4090"] * 2))
    gpus = detect.detect_gpus()
    assert [g.name for g in gpus] == ["NVIDIA GeForce RTX 4090"] * 2 and gpus[0].family == "nvidia-ada"
    hw, n = resolve_device("auto")
    assert hw.id == "rtx-4090" and n == 2
    assert any("detected 2 x NVIDIA GeForce RTX 4090 (catalog rtx-4090)" in x for x in hw.notes)
    d = report_to_dict(make_report(ReportRequest(model="llama-3.1-70b", hardware="auto")))
    assert d["workload"]["n_devices"] == 2 and d["hardware"]["id"] == "rtx-4090"
    one, n = resolve_device("auto", devices=1)
    assert n == 1 and any("sized for 1 of the 2 GPUs" in x for x in one.notes)


def test_a_gpu_outside_the_catalog_says_what_is_missing(fresh):
    fresh.setitem(sys.modules, "pynvml", fake_nvml(["NVIDIA Future X"], memory=100 * GIB, cc=(10, 0)))
    d = report_to_dict(make_report(ReportRequest(model="qwen3-0.6b", hardware="auto")))
    assert d["hardware"]["family"] == "nvidia-blackwell" and d["hardware"]["memory_bytes"] == 100 * GIB
    assert d["speed"] is None and any("--bandwidth-gbs" in n for n in d["notes"])
    given = report_to_dict(
        make_report(ReportRequest(model="qwen3-0.6b", hardware="auto", bandwidth_gbs=1000, tflops=400))
    )
    assert given["speed"]["decode"]["tok_s"] > 0


def test_apple_from_sysctl():
    answers = {
        "machdep.cpu.brand_string": "Apple M3 Max",
        "hw.memsize": str(64 * GIB),
        "iogpu.wired_limit_mb": "0",
    }
    info = detect.detect_apple(answers.get)
    assert info == detect.AppleInfo("Apple M3 Max", 64 * GIB, 0)
    spec, notes = detect.apple_spec(info)
    assert (
        spec.id == "apple-m3-max" and spec.memory_bytes == 64 * GIB and spec.gpu_working_set_bytes == 48 * GIB
    )
    raised = detect.apple_spec(detect.AppleInfo("Apple M3 Max", 64 * GIB, 57344))[0]
    assert raised.gpu_working_set_bytes == 56 * GIB
    assert detect.apple_spec(detect.AppleInfo("Apple M4", 32 * GIB, 0))[0].id == "apple-m4-10c"
    assert detect.detect_apple({"machdep.cpu.brand_string": "Intel(R) Core(TM) i7"}.get) is None


def test_this_cpu(fresh):
    fresh.setitem(sys.modules, "pynvml", None)  # import fails: no NVIDIA GPU
    fresh.setattr(detect, "detect_apple", lambda: None)
    spec, n, notes = detect.detect_hardware()
    assert n == 1 and spec.kind == "cpu" and spec.memory_bytes and spec.memory_bytes > GIB
    assert spec.bandwidth_gbs and spec.bandwidth_gbs > 0.1 and notes and "detected CPU" in notes[0]


def test_report_and_fit_start_from_this_machine():
    d = cli_json("report --model qwen3-0.6b --hardware auto --format json")
    assert any(n.startswith("detected") for n in d["notes"]) and d["memory"]["usable_bytes"] > 0
    p = cli("fit --hardware auto --top 3")
    assert p.returncode == 0, p.stderr
    assert "note: detected" in p.stdout


def test_bandwidth_probe_is_stdlib_and_measures_something():
    gbs = detect.bandwidth_probe_gbs(probe_bytes=16 * 2**20, repeats=2)
    assert 0.1 < gbs < 10_000
    assert detect.bandwidth_probe_gbs(probe_bytes=1000, repeats=1, threads=7) > 0  # more threads than pages


def test_read_probe_reads_both_buffers_and_writes_nothing(monkeypatch):
    """The read probe (recorded beside the copy probe, used by nothing yet): memcmp of two equal buffers, so
    each call reads its slices to the end; None where no C library loads."""
    gbs = detect.read_bandwidth_probe_gbs(probe_bytes=16 * 2**20, repeats=2)
    assert gbs is not None and 0.1 < gbs < 10_000
    calls: list[int] = []
    real = detect._memcmp()

    def counting(a, b, n):
        calls.append(n)
        assert real(a, b, n) == 0  # equal buffers: compared to the last byte
        return 0

    monkeypatch.setattr(detect, "_memcmp", lambda: counting)
    assert detect.read_bandwidth_probe_gbs(probe_bytes=3 * 4096 + 5, repeats=2, threads=3) > 0
    assert len(calls) == 6 and sum(calls) == 2 * (3 * 4096 + 5)
    monkeypatch.setattr(detect, "_memcmp", lambda: None)
    assert detect.read_bandwidth_probe_gbs(probe_bytes=4096, repeats=1) is None


def test_bandwidth_probe_copies_on_every_thread_at_once(monkeypatch):
    """The probe's slices are copied concurrently, one per thread, and together cover the buffer once: a
    barrier of ``threads`` parties inside the copy only opens when all of them run at the same time (a probe
    that copied on one thread would time out there)."""
    import threading

    real = detect.ctypes.memmove
    threads, n = 3, 3 * 4096 + 5
    barrier = threading.Barrier(threads, timeout=10)
    seen: list[tuple[int, int, int]] = []

    def memmove(dst, src, size):
        barrier.wait()
        seen.append((threading.get_ident(), int(dst) - int(src), size))
        return real(dst, src, size)

    monkeypatch.setattr(detect.ctypes, "memmove", memmove)
    assert detect.bandwidth_probe_gbs(probe_bytes=n, repeats=2, threads=threads) > 0
    assert len(seen) == 2 * threads and len({t for t, _, _ in seen}) == threads
    assert sum(size for _, _, size in seen) == 2 * n
    assert "on 3 threads at once" in detect.probe_description(3)
    assert "on 1 thread at once" in detect.probe_description(1)
    assert 1 <= detect.probe_threads()


def test_report_start_up_imports_no_detection_or_numpy():
    code = (
        "import sys; from estimator.app.cli import main; "
        "main(['report', '--model', 'qwen3-0.6b', '--hardware', '4090', '--format', 'json', "
        "'-o', '/dev/null']); "
        "print(sorted(m for m in ('numpy', 'psutil', 'pynvml', 'estimator.catalog.detect') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip().endswith("[]")


@pytest.mark.gpu
def test_real_gpus_map_to_the_catalog():
    gpus = detect.detect_gpus()
    if not gpus:
        pytest.skip("no NVIDIA GPU visible to NVML")
    detect.detect_hardware.cache_clear()
    hw, n = resolve_device("auto")
    assert n == len(gpus) and hw.kind == "gpu" and hw.family.startswith("nvidia-")
    assert hw.memory_bytes and hw.memory_bytes > GIB
