"""runners.memory: process-tree RSS sampler (real /proc) and the NVML sampler's baseline-delta logic."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from runners import memory
from runners.stats import rate_tok_s, sample_stdev, summarize


def test_stats():
    assert summarize([10.0, 12.0, 14.0]) == (12.0, 2.0)
    assert sample_stdev([5.0]) == 0.0
    assert rate_tok_s(128, 0.5) == 256.0
    with pytest.raises(ValueError):
        rate_tok_s(1, 0.0)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc needed")
def test_rss_counts_children_and_anon_pages():
    code = "import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(3)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        with memory.RssSampler(interval_s=0.02) as rss:
            deadline = time.time() + 10
            while time.time() < deadline and (rss.peak.n_processes < 2 or rss.peak_anon_bytes < 200 * 2**20):
                time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    s = rss.summary()
    assert s["peak_rss_processes"] >= 2
    assert s["peak_rss_anon_bytes"] >= 200 * 2**20  # the child's touched bytearray is anonymous memory
    assert s["peak_rss_bytes"] >= s["peak_rss_anon_bytes"]
    assert os.getpid() in memory.process_tree()


def test_proc_fallback_finds_children():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert child.pid in memory._children_proc(os.getpid())
    finally:
        child.kill()
        child.wait()


class FakeNvml:
    """Stands in for pynvml (same call names and return shapes) so the delta logic runs without a GPU."""

    def __init__(self, used_series, procs_series):
        self.used, self.procs = list(used_series), list(procs_series)

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"Fake GPU"

    def nvmlDeviceGetUUID(self, h):
        return "GPU-0000"

    def nvmlDeviceGetMemoryInfo(self, h):
        used = self.used.pop(0) if len(self.used) > 1 else self.used[0]
        return SimpleNamespace(total=80 * 2**30, used=used, free=80 * 2**30 - used)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return self.procs.pop(0) if len(self.procs) > 1 else self.procs[0]


def test_nvml_sampler_reports_delta_from_baseline():
    me = os.getpid()
    fake = FakeNvml(
        used_series=[1_000, 1_000, 5_000, 9_000, 4_000],
        procs_series=[
            [],
            [SimpleNamespace(pid=me, usedGpuMemory=3_000), SimpleNamespace(pid=1, usedGpuMemory=7)],
            [SimpleNamespace(pid=me, usedGpuMemory=None)],
        ],
    )
    s = memory.NvmlSampler(nvml=fake, interval_s=0.001)
    s.start()
    time.sleep(0.05)
    s.stop()
    out = s.summary()
    dev = out["nvml_devices"][0]
    assert dev["baseline_used_bytes"] == 1_000 and dev["peak_used_bytes"] == 9_000
    assert out["device_peak_delta_bytes"] == 8_000
    assert out["device_peak_process_bytes"] == 3_000  # other pids and "N/A" (None) are not ours


class NotSupported(Exception):
    """Like pynvml.NVMLError_NotSupported."""


def test_nvml_unsupported_process_query_keeps_device_memory():
    """nvmlDeviceGetComputeRunningProcesses raising (NotSupported on some vGPU / MIG parents) must not
    throw away the device-level used memory of the same poll."""

    class NoProcs(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, h):
            raise NotSupported("Not Supported")

    s = memory.NvmlSampler(nvml=NoProcs([1_000, 6_000], [[]]), interval_s=0.001)
    with s:
        time.sleep(0.02)
    out = s.summary()
    dev = out["nvml_devices"][0]
    assert out["device_peak_delta_bytes"] == 5_000 and dev["process_errors"] > 0
    assert dev["peak_process_bytes"] == 0 and dev["memory_errors"] == 0


def test_nvml_device_that_cannot_be_opened_is_left_out_with_the_reason():
    class TwoDevices(FakeNvml):
        def nvmlDeviceGetCount(self):
            return 2

        def nvmlDeviceGetHandleByIndex(self, i):
            if i == 1:
                raise NotSupported("GPU is lost")
            return i

        def nvmlDeviceGetUUID(self, h):
            raise NotSupported("Not Supported")

    s = memory.NvmlSampler(nvml=TwoDevices([2_000], [[]]), interval_s=0.001)
    with s:
        time.sleep(0.01)
    out = s.summary()
    assert [d["index"] for d in out["nvml_devices"]] == [0] and out["nvml_devices"][0]["uuid"] == ""
    assert out["nvml_errors"] == ["device 1: NotSupported: GPU is lost"]


def test_nvml_absent_is_harmless():
    s = memory.NvmlSampler(nvml=None)
    s.nvml = None
    with s:
        pass
    assert s.summary() == {}


@pytest.mark.gpu
def test_nvml_real_device():
    nv = memory.nvml_module()
    if nv is None:
        pytest.skip("no NVIDIA GPU / NVML")
    with memory.NvmlSampler(interval_s=0.01) as s:
        time.sleep(0.05)
    dev = s.summary()["nvml_devices"][0]
    assert dev["total_bytes"] > 0 and dev["peak_used_bytes"] >= dev["baseline_used_bytes"]
    assert memory.nvml_driver_version()


class _FakeNvml:
    """Stand-in for pynvml's device enumeration (4 GPUs in PCI order), for the visibility rules only."""

    def nvmlDeviceGetCount(self):
        return 4

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h}aaaaaaa-0000"


@pytest.mark.parametrize(
    "value,expected",
    [
        (None, (0, 1, 2, 3)),  # unset: every GPU
        ("2", (2,)),
        ("3,1", (3, 1)),  # CUDA order kept
        ("1,7,2", (1,)),  # like CUDA, an entry naming no device ends the list
        ("", ()),
        ("-1", ()),
        ("GPU-2aaa", (2,)),  # UUID prefix
        ("GPU-", ()),  # ambiguous prefix names no single device
    ],
)
def test_visible_nvml_indices_follow_cuda_visible_devices(value, expected):
    from runners.memory import visible_nvml_indices

    env = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible_nvml_indices(_FakeNvml(), env) == expected


def test_children_get_pci_bus_order():
    from harness.isolate import child_env

    assert child_env()["CUDA_DEVICE_ORDER"] in ("PCI_BUS_ID", os.environ.get("CUDA_DEVICE_ORDER"))


def test_children_run_the_code_root(monkeypatch, tmp_path):
    """Children run this checkout, or the copy a Ray job shipped ($FITBENCH_CODE_ROOT, set by the Ray task
    under --ship-code): first on their PYTHONPATH, and their working directory."""
    from harness import isolate

    monkeypatch.delenv(isolate.CODE_ROOT_ENV, raising=False)
    assert isolate.child_env()["PYTHONPATH"].split(os.pathsep)[0] == str(isolate.REPO_ROOT)
    monkeypatch.setenv(isolate.CODE_ROOT_ENV, str(tmp_path))
    assert isolate.code_root() == tmp_path
    assert isolate.child_env()["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
