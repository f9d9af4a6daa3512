"""Memory samplers: process-tree peak RSS (host) and NVML device / per-process memory (GPU).

Both run a daemon thread that polls every ``interval_s`` (default 0.01 s, as optimum-benchmark) between
``start()`` and ``stop()``; use them as context managers.  Imports are optional: psutil (else /proc) for the
process tree, pynvml (package nvidia-ml-py) for NVIDIA devices.

Host: RSS summed over this process and all descendants (vLLM runs its engine core and worker as child
processes), split into anonymous and file-backed pages from ``/proc/<pid>/status`` (RssAnon / RssFile +
RssShmem): mmap'd GGUF weights are file-backed, llama.cpp's KV and compute buffers anonymous (methods.md
D3.4).  The peak of the sum is kept, with the anon/file split of that same sample, plus each part's own peak.

GPU: a baseline of ``nvmlDeviceGetMemoryInfo(h).used`` is taken at ``start()`` for each device and the peak
``used - baseline`` reported (methods.md D2: deltas with the same call), together with the peak of
``usedGpuMemory`` summed over this process tree's pids from ``nvmlDeviceGetComputeRunningProcesses`` (0 inside
a container without host pid namespace: the device delta is then the number to use).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PAGE_KIB = 1024


def _read_status(pid: int) -> dict[str, int] | None:
    """RssAnon/RssFile/RssShmem/VmRSS/VmHWM of a pid in bytes from /proc (None when unreadable)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("RssAnon", "RssFile", "RssShmem", "VmRSS", "VmHWM"):
            parts = rest.split()
            if parts:
                out[key] = int(parts[0]) * PAGE_KIB  # the kernel prints kB (KiB)
    return out


def _children_proc(pid: int) -> list[int]:
    """Descendants of pid by scanning /proc/*/stat (fallback when psutil is missing)."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parent_of[int(entry.name)] = ppid
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent_of.items() if pp == p]
        found.extend(kids)
        frontier.extend(kids)
    return found


def process_tree(pid: int | None = None) -> list[int]:
    """pid (default: this process) and all its descendants."""
    pid = os.getpid() if pid is None else pid
    try:
        import psutil

        return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except ImportError:
        return [pid] + _children_proc(pid)
    except Exception:  # psutil.NoSuchProcess and friends: the process is gone
        return [pid]


@dataclass(frozen=True)
class RssSample:
    """One poll of the process tree, bytes."""

    total_bytes: int
    anon_bytes: int
    file_bytes: int
    n_processes: int


def sample_tree_rss(pid: int | None = None) -> RssSample:
    """RSS of the tree now.  Linux /proc when readable, else psutil ``memory_info().rss`` (no anon/file
    split)."""
    total = anon = file_ = n = 0
    for p in process_tree(pid):
        st = _read_status(p)
        if st is not None and "VmRSS" in st:
            total += st["VmRSS"]
            anon += st.get("RssAnon", 0)
            file_ += st.get("RssFile", 0) + st.get("RssShmem", 0)
            n += 1
            continue
        try:
            import psutil

            total += psutil.Process(p).memory_info().rss
            n += 1
        except Exception:
            continue
    return RssSample(total, anon, file_, n)


class _Poller:
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self._poll()
            self._stop.wait(self.interval_s)

    def start(self):
        self._poll()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._poll()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class RssSampler(_Poller):
    """Peak RSS of a process tree (default: this process and its children), polled every ``interval_s``."""

    def __init__(
        self,
        pid: int | None = None,
        interval_s: float = 0.01,
        sampler: Callable[[int | None], RssSample] = sample_tree_rss,
    ) -> None:
        super().__init__(interval_s)
        self.pid = pid
        self._sampler = sampler
        self.peak: RssSample = RssSample(0, 0, 0, 0)
        self.peak_anon_bytes = 0
        self.peak_file_bytes = 0
        self.n_samples = 0
        self.baseline: RssSample | None = None

    def _poll(self) -> None:
        s = self._sampler(self.pid)
        self.n_samples += 1
        if self.baseline is None:
            self.baseline = s
        if s.total_bytes > self.peak.total_bytes:
            self.peak = s
        self.peak_anon_bytes = max(self.peak_anon_bytes, s.anon_bytes)
        self.peak_file_bytes = max(self.peak_file_bytes, s.file_bytes)

    def summary(self) -> dict:
        """Peak figures in bytes (``peak_rss_bytes`` is the tree total at its largest sample)."""
        base = self.baseline or RssSample(0, 0, 0, 0)
        return {
            "peak_rss_bytes": self.peak.total_bytes,
            "peak_rss_anon_bytes": self.peak_anon_bytes,
            "peak_rss_file_bytes": self.peak_file_bytes,
            "baseline_rss_bytes": base.total_bytes,
            "peak_rss_processes": self.peak.n_processes,
            "rss_samples": self.n_samples,
        }


# ---------------------------------------------------------------------------------------------- NVML
def nvml_module():
    """The pynvml module after a successful nvmlInit(), or None (not installed, no driver, no GPU)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        return pynvml
    except Exception:
        return None


def visible_nvml_indices(nv, env: dict[str, str] | None = None) -> tuple[int, ...]:
    """NVML indices of the GPUs this process may use, from CUDA_VISIBLE_DEVICES.

    Unset -> every GPU.  Entries are CUDA ordinals or ``GPU-``/``MIG-`` UUID prefixes; like CUDA, the list
    stops at the first entry that names no device.  NVML numbers GPUs in PCI bus order, CUDA by default
    fastest first: ordinals equal NVML indices only under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, which the harness
    sets for its children (harness.isolate.child_env).  Without this, a run on 1 of 8 GPUs would count the
    memory of all 8 (other users' jobs included) and record n_devices = 8.
    """
    env = os.environ if env is None else env
    n = int(nv.nvmlDeviceGetCount())
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return tuple(range(n))
    uuids: list[str] | None = None
    out: list[int] = []
    for tok in (t.strip() for t in spec.split(",")):
        if tok.lstrip("-").isdigit():
            i = int(tok)
            if not 0 <= i < n:
                break
            out.append(i)
            continue
        if not tok:
            break
        if uuids is None:
            uuids = []
            for i in range(n):
                try:
                    u = nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i))
                    uuids.append(u.decode() if isinstance(u, bytes) else str(u))
                except Exception:  # NVMLError_*: a device we cannot name cannot be matched
                    uuids.append("")
        hits = [i for i, u in enumerate(uuids) if u and u.startswith(tok)]
        if len(hits) != 1:
            break
        out.append(hits[0])
    return tuple(dict.fromkeys(out))


@dataclass
class DevicePeak:
    """Per-device NVML figures in bytes: baseline used, peak used, peak delta, peak of this tree's
    processes."""

    index: int
    name: str
    uuid: str
    total_bytes: int
    baseline_used_bytes: int
    peak_used_bytes: int = 0
    peak_process_bytes: int = 0
    memory_errors: int = 0  # polls where nvmlDeviceGetMemoryInfo raised
    process_errors: int = 0  # polls where nvmlDeviceGetComputeRunningProcesses raised (e.g. NotSupported)

    @property
    def peak_delta_bytes(self) -> int:
        return max(0, self.peak_used_bytes - self.baseline_used_bytes)


@dataclass
class NvmlSampler(_Poller):
    """Peak device memory (delta from a start() baseline) and per-process memory of this process tree."""

    indices: tuple[int, ...] | None = None
    interval_s: float = 0.01
    pid: int | None = None
    nvml: object | None = None
    devices: list[DevicePeak] = field(default_factory=list)

    def __post_init__(self) -> None:
        _Poller.__init__(self, self.interval_s)
        if self.nvml is None:
            self.nvml = nvml_module()
        self._handles: list = []
        self.errors: list[str] = []  # devices that could not be opened at start(), with the NVML error

    @property
    def available(self) -> bool:
        return self.nvml is not None

    def start(self):
        if self.nvml is None:
            return self
        nv = self.nvml
        idx = self.indices if self.indices is not None else visible_nvml_indices(nv)
        for i in idx:
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
                mem = nv.nvmlDeviceGetMemoryInfo(h)
            except Exception as exc:  # NVMLError_*: leave the device out, say why; the run goes on
                self.errors.append(f"device {i}: {type(exc).__name__}: {exc}")
                continue
            name = _nvml_str(nv, "nvmlDeviceGetName", h)
            uuid = _nvml_str(nv, "nvmlDeviceGetUUID", h)
            self._handles.append(h)
            self.devices.append(
                DevicePeak(
                    index=i,
                    name=name,
                    uuid=uuid,
                    total_bytes=int(mem.total),
                    baseline_used_bytes=int(mem.used),
                    peak_used_bytes=int(mem.used),
                )
            )
        return super().start()

    def stop(self):
        if self.nvml is None:
            return self
        return super().stop()

    def _poll(self) -> None:
        nv = self.nvml
        mine = set(process_tree(self.pid))
        for dev, h in zip(self.devices, self._handles, strict=True):
            # Two separate guards: a device whose per-process query is not supported still yields its
            # device-level used memory (the figure device_peak_delta_bytes is built from).
            try:
                dev.peak_used_bytes = max(dev.peak_used_bytes, int(nv.nvmlDeviceGetMemoryInfo(h).used))
            except Exception:
                dev.memory_errors += 1
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:
                dev.process_errors += 1
                continue
            own = sum(int(p.usedGpuMemory or 0) for p in procs if p.pid in mine)
            dev.peak_process_bytes = max(dev.peak_process_bytes, own)

    def summary(self) -> dict:
        """{"nvml_devices": [...per device dict...], "device_peak_delta_bytes": sum over devices} or {}
        (plus "nvml_errors" when a device could not be opened)."""
        if not self.devices:
            return {"nvml_errors": list(self.errors)} if self.errors else {}
        per = [
            {
                "index": d.index,
                "name": d.name,
                "uuid": d.uuid,
                "total_bytes": d.total_bytes,
                "baseline_used_bytes": d.baseline_used_bytes,
                "peak_used_bytes": d.peak_used_bytes,
                "peak_delta_bytes": d.peak_delta_bytes,
                "peak_process_bytes": d.peak_process_bytes,
                "memory_errors": d.memory_errors,
                "process_errors": d.process_errors,
            }
            for d in self.devices
        ]
        out = {
            "nvml_devices": per,
            "device_peak_delta_bytes": sum(d.peak_delta_bytes for d in self.devices),
            "device_peak_process_bytes": sum(d.peak_process_bytes for d in self.devices),
        }
        if self.errors:
            out["nvml_errors"] = list(self.errors)
        return out


def _nvml_str(nv, fn: str, handle) -> str:
    """A string query (name, UUID) as str (older pynvml returns bytes); "" when NVML raises."""
    try:
        v = getattr(nv, fn)(handle)
    except Exception:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_driver_version() -> str:
    """NVIDIA driver version string, or "" without NVML."""
    nv = nvml_module()
    if nv is None:
        return ""
    try:
        v = nv.nvmlSystemGetDriverVersion()
    except Exception:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)
