"""Measure the clock one busy core of this CPU runs at (10^9 Hz), where the operating system does not say.

Why: a CPU's prefill rate scales with its cores x clock (covariate ``cpu_size``), and the catalog's clock is
the maximum boost clock of the datasheet (tools/catalog/hardware_covariates.csv).  On bare metal psutil's
cpufreq maximum is that figure.  A virtual machine usually has no cpufreq, and its /proc/cpuinfo "cpu MHz" is
the host's nominal (TSC) clock, not the boost its cores run at: the build VM of this project, an AMD EPYC
(Zen 4) guest, reports 2.596 GHz and runs one busy thread at ~3.6 GHz.

How: a chain of dependent integer additions, each needing the previous one's result, retires one addition
per core cycle on every x86-64 and AArch64 core (a single-cycle ALU latency); ``ADDS_PER_LOOP`` of them per
loop iteration hide the loop counter, which runs on other ALUs beside the chain.  Each addition adds a
register to itself (``x = x + x``), never an immediate: Intel's cores since Golden Cove (Alder Lake P-cores,
Sapphire / Emerald / Granite Rapids Xeons) fold a chain of ``add reg, imm`` in the renamer, several per cycle,
and the immediate chain read 18-19 GHz on a Xeon guest with AMX (2026-12-07) where ``add reg, reg`` and a
3-cycle ``imul`` chain both read 4.05-4.1 GHz.  So

    clock_ghz = ADDS_PER_LOOP x iterations / seconds / 1e9

best of ``repeats`` timed runs after one warm-up run (the core ramps up to its boost; a run disturbed by
another process only reads lower).  Python cannot issue a chain of single-cycle instructions, so the probe is
a few lines of C (inline assembly for the two architectures) compiled once with the system's C compiler
(``cc``, else ``gcc`` / ``clang``) into the fitbench cache (``$FITBENCH_CACHE`` or ~/.cache/fitbench) and
run as a subprocess.  No compiler, another architecture, or a failed run: ``measure_clock_ghz`` returns
None and the caller keeps what the operating system reports.  The first call compiles (~0.1-0.5 s); a
measurement takes ~0.3 s.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from estimator.catalog.files import cache_root

ADDS_PER_LOOP = 8
ITERATIONS = 20_000_000  # 1.6e8 additions: ~45 ms at 3.5 GHz per timed run
REPEATS = 5
COMPILE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 30.0

# one dependent register + register addition per line (module doc: why not an immediate), for each
# architecture the probe knows (platform.machine() names)
_ADD = {
    "x86_64": "add %0, %0",
    "amd64": "add %0, %0",
    "aarch64": "add %0, %0, %0",
    "arm64": "add %0, %0, %0",
}

_SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000000L;
    int repeats = argc > 2 ? atoi(argv[2]) : 5;
    double best = 0.0;
    uint64_t sink = 0;
    for (int r = 0; r <= repeats; r++) {  /* run 0 warms the core up and is not counted */
        uint64_t x = (uint64_t)n | 1u;
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            __asm__ volatile(CHAIN : "+r"(x));
        }
        double s = now_s() - t0;
        sink ^= x;
        double ghz = (double)ADDS * (double)n / s / 1e9;
        if (r > 0 && ghz > best) best = ghz;
    }
    printf("%.4f %llu\n", best, (unsigned long long)sink);
    return 0;
}
"""


def probe_source(machine: str | None = None) -> str | None:
    """The C source of the probe for ``machine`` (default this one), None for an architecture it does not
    know."""
    add = _ADD.get((machine or platform.machine()).lower())
    if add is None:
        return None
    chain = "\\n\\t".join([add] * ADDS_PER_LOOP)
    return f'#define ADDS {ADDS_PER_LOOP}\n#define CHAIN "{chain}"\n{_SOURCE}'


def compiler() -> str | None:
    """The system C compiler: $CC, else cc, gcc or clang on PATH; None when there is none."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def probe_binary() -> Path | None:
    """The compiled probe (built on first use, named by a hash of its source so a changed probe is rebuilt),
    None when it cannot be built here."""
    source = probe_source()
    cc = compiler()
    if source is None or cc is None:
        return None
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    exe = cache_root() / f"clock-probe-{platform.machine().lower()}-{digest}"
    if exe.is_file() and os.access(exe, os.X_OK):
        return exe
    try:
        exe.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=exe.parent) as tmp:
            src = Path(tmp) / "clock_probe.c"
            src.write_text(source)
            built = Path(tmp) / exe.name
            subprocess.run([cc, "-O1", "-o", str(built), str(src)], check=True, capture_output=True,
                           timeout=COMPILE_TIMEOUT_S)  # fmt: skip
            os.replace(built, exe)  # whole or not at all: another process may build it at the same time
    except (OSError, subprocess.SubprocessError):
        return None
    return exe


def measure_clock_ghz(iterations: int = ITERATIONS, repeats: int = REPEATS) -> float | None:
    """The clock one busy core runs at, 10^9 Hz (module doc: best of ``repeats`` runs of ``iterations`` x
    ADDS_PER_LOOP dependent additions); None when the probe cannot be built or run here."""
    exe = probe_binary()
    if exe is None:
        return None
    try:
        out = subprocess.run([str(exe), str(int(iterations)), str(int(repeats))], check=True,
                             capture_output=True, text=True, timeout=RUN_TIMEOUT_S).stdout  # fmt: skip
        ghz = float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return round(ghz, 3) if 0.1 < ghz < 10.0 else None


def probe_description(iterations: int = ITERATIONS, repeats: int = REPEATS) -> str:
    """How the clock was measured, for records and reports."""
    return (f"dependent-add chain on one thread ({ADDS_PER_LOOP} x {iterations:,} additions, one per cycle), "
            f"best of {repeats} after a warm-up run, GHz = 1e9 Hz")  # fmt: skip
