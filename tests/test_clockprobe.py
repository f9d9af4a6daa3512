"""The CPU clock where the OS gives no maximum (``estimator.catalog.clockprobe``) and the order in which
``estimator.catalog.detect.cpu_clock`` takes its sources."""

from __future__ import annotations

import platform
import types

import pytest

from estimator.catalog import clockprobe, detect

KNOWN = platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")


def test_the_probe_is_a_chain_of_dependent_additions_per_architecture():
    x86 = clockprobe.probe_source("x86_64")
    arm = clockprobe.probe_source("aarch64")
    assert x86 is not None and arm is not None
    assert x86.count("add %0, %0") == clockprobe.ADDS_PER_LOOP == 8
    assert arm.count("add %0, %0, %0") == 8
    # no immediate operand: Intel's renamer folds chains of ``add reg, imm`` (18 GHz read on a Xeon guest)
    x86_chain, arm_chain = (src.split("#define CHAIN")[1].splitlines()[0] for src in (x86, arm))
    assert "$" not in x86_chain and "#" not in arm_chain
    assert "#define ADDS 8" in x86
    assert clockprobe.probe_source("riscv64") is None


@pytest.mark.skipif(
    not KNOWN or clockprobe.compiler() is None, reason="needs x86-64 / AArch64 and a C compiler"
)
def test_the_probe_measures_this_core(tmp_path, monkeypatch):
    """Built into the cache once, then reused; the clock is a plausible figure, and timing half the additions
    gives the same clock (it is additions per second, not a run time)."""
    monkeypatch.setenv("FITBENCH_CACHE", str(tmp_path))
    ghz = clockprobe.measure_clock_ghz(iterations=5_000_000, repeats=3)
    assert ghz is not None and 0.3 < ghz < 7.0
    built = list(tmp_path.glob("clock-probe-*"))
    assert len(built) == 1 and clockprobe.probe_binary() == built[0]
    half = clockprobe.measure_clock_ghz(iterations=2_500_000, repeats=3)
    assert half is not None and half == pytest.approx(ghz, rel=0.35)


def test_no_compiler_or_a_failed_build_gives_none(tmp_path, monkeypatch):
    monkeypatch.setenv("FITBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(clockprobe, "compiler", lambda: None)
    assert clockprobe.probe_binary() is None and clockprobe.measure_clock_ghz() is None
    monkeypatch.setattr(clockprobe, "compiler", lambda: "false")  # a "compiler" that fails
    assert clockprobe.measure_clock_ghz() is None and not list(tmp_path.glob("clock-probe-*"))


def _freq(monkeypatch, current: float, maximum: float) -> None:
    import psutil

    freq = types.SimpleNamespace(current=current, min=0.0, max=maximum)
    monkeypatch.setattr(psutil, "cpu_freq", lambda: freq)


def test_cpu_clock_takes_cpufreq_then_the_probe_then_the_reported_frequency(monkeypatch):
    """Bare metal: cpufreq's maximum, no probe run.  A VM (no maximum): the probe, with how it measured.
    No probe either: the frequency the OS reports, said to be nominal."""
    ran = []

    def probe():
        ran.append(1)
        return 3.66

    _freq(monkeypatch, 2596.1, 5700.0)
    assert detect.cpu_clock(probe) == (5.7, detect.CLOCK_CPUFREQ) and not ran
    _freq(monkeypatch, 2596.1, 0.0)
    ghz, source = detect.cpu_clock(probe)
    assert ghz == 3.66 and source.startswith("measured: dependent-add chain on one thread")
    assert detect.cpu_clock(lambda: None) == (2.596, detect.CLOCK_NOMINAL)
    _freq(monkeypatch, 0.0, 0.0)
    assert detect.cpu_clock(lambda: None) == (None, "")
