"""Does llama.cpp's AMX weight buffer survive a prompt on this machine?  Checked in a child, per model until
one crashes, and remembered.

Why: on a CPU with AMX, llama.cpp repacks Q4_0 / Q4_K / Q8_0 / ... weights into its AMX buffer ("extra"
buffer type), and on some such hosts its ``ggml_backend_amx_mul_mat`` dies with SIGSEGV at the first prompt of
more than one token (ggml-org/llama.cpp#20824, closed unfixed; a Xeon guest with AMX, llama-cpp-python 0.3.36,
2026-12-07).  A crash in the runner's own process would take the point's child, and in tests pytest, with it.

How: when the build has AMX (``AMX_INT8 = 1`` in llama.cpp's system info), a child Python loads the point's
model with llama.cpp's defaults and evaluates a 32-token prompt (``CHECK_TOKENS``) on the point's threads.
Killed by a signal: the buffer crashes here, and the runner measures with ``--no-repack``
(``use_extra_bufts`` = false; runners.llama_cpp, engine option ``repack``).  Exit 0: it works for that model.
Anything else (the model did not load, a timeout) says nothing and is not remembered.  The crash is a fault
of the machine's build, and it depends on the model too: on the same host an MLA model (tiny DeepSeek-V2)
aborts in the scheduler at context creation (``GGML_ASSERT(*cur_backend_id != -1)``) while a tiny Llama's
context is created and its prompt is what crashes.  So a crash, once seen, is remembered for the machine,
and a model that ran is remembered by its file name and size.  The answers are kept in the fitbench cache
(``$FITBENCH_CACHE`` or ~/.cache/fitbench), one file per machine and build: the key hashes the host name,
the CPU's model name and flags (/proc/cpuinfo), the llama-cpp-python version, its system info and a hash of
its ggml CPU library (``build_id``: two builds of one version, one of them compiled with the tile-config
header fix of tools/amx_header_fix.py, are checked apart).

The cause, found on that host: GCC 12's ``_tile_loadconfig`` declares an 8-byte memory operand, so the
compiler dropped the stores of the tile shapes ggml writes into its tile configuration and ``ldtilecfg``
faults on the half-written configuration (tools/amx_header_fix.py; ``make install-llama`` builds with a
corrected header where the compiler needs it).  This check stays for builds made otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from runners.jsonio import write_json_atomic

CHECK_TOKENS = 32
CHECK_TIMEOUT_S = 300.0
AMX_FLAG = "AMX_INT8 = 1"
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT)
ISSUE = "ggml-org/llama.cpp#20824"

_CHILD = f"""
import sys, llama_cpp
m = llama_cpp.Llama(sys.argv[1], n_ctx=128, n_batch=64, n_ubatch=64, n_threads=int(sys.argv[2]),
                    n_threads_batch=int(sys.argv[2]), n_gpu_layers=0, verbose=False)
m.eval(list(range(1, {CHECK_TOKENS} + 1)))
"""


def has_amx_buffer(system_info: str) -> bool:
    """Whether a llama.cpp build with this system info string has the AMX buffer type."""
    return AMX_FLAG in system_info


def cache_dir() -> Path:
    """Where the answer is kept: ``$FITBENCH_CACHE`` or ~/.cache/fitbench (the harness's cache root)."""
    return Path(os.environ.get("FITBENCH_CACHE") or Path.home() / ".cache" / "fitbench")


def build_id(llama_cpp) -> str:
    """sha256 (16 hex digits) of the build's ggml CPU libraries (``lib/libggml-cpu*`` next to the package),
    "" when there are none (a build that links ggml statically, or a stand-in without ``__file__``)."""
    where = getattr(llama_cpp, "__file__", None)
    if not where:
        return ""
    libs = sorted({p.resolve() for p in (Path(where).parent / "lib").glob("libggml-cpu*") if p.is_file()})
    h = hashlib.sha256()
    for p in libs:
        try:
            h.update(p.read_bytes())
        except OSError:
            return ""
    return h.hexdigest()[:16] if libs else ""


def machine_key(version: str, system_info: str, cpuinfo_text: str | None = None, build: str = "") -> str:
    """A hash naming this machine and llama.cpp build (module doc); ``build``: ``build_id``."""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo_text = ""
    lines = cpuinfo_text.splitlines()
    model = next((x for x in lines if x.lower().startswith("model name")), "")
    flags = next((x for x in lines if x.lower().startswith("flags")), "")
    text = "\n".join((socket.gethostname(), model, flags, version, system_info, *([build] if build else [])))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_check(model_path: str, n_threads: int, timeout_s: float = CHECK_TIMEOUT_S) -> bool | None:
    """True: a child evaluating a prompt on ``model_path`` with llama.cpp's defaults died by a crash signal;
    False: it finished; None: neither (it failed otherwise or ran out of time)."""
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, model_path, str(max(1, int(n_threads)))],
                           capture_output=True, timeout=timeout_s, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode == 0:
        return False
    if r.returncode < 0 and -r.returncode in CRASH_SIGNALS:
        return True
    return None


def _model_name(model_path: str) -> str:
    p = Path(model_path)
    try:
        return f"{p.name}:{p.stat().st_size}"
    except OSError:
        return p.name


def amx_buffer_crashes(llama_cpp, model_path: str, n_threads: int, check=run_check) -> tuple[bool, str]:
    """(crashes, why) for this machine and build (module doc): (False, "") when the build has no AMX buffer,
    or the model ran; (True, why) when a check on this machine crashed, now or before.  An inconclusive
    check is (False, "") and is not remembered.  ``check`` replaces the child in tests."""
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    if not has_amx_buffer(info):
        return False, ""
    key = machine_key(llama_cpp.__version__, info, build=build_id(llama_cpp))
    path = cache_dir() / f"llama-amx-check-{key}.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    ran = [str(x) for x in known.get("ran", []) if isinstance(x, str)]
    name = _model_name(model_path)
    if known.get("crashes") is not True and name not in ran:
        crashed = check(model_path, n_threads)
        if crashed is not None:
            known = (
                {"crashes": True, "model": Path(model_path).name, "threads": int(n_threads)}
                if crashed
                else {"crashes": False, "ran": [*ran, name]}
            )
            try:
                write_json_atomic(known, path)
            except OSError:
                pass  # an unwritable cache: checked again next time
    if known.get("crashes") is not True:
        return False, ""
    return True, (
        f"llama.cpp's AMX weight buffer crashed on this machine ({ISSUE}; checked with "
        f"{known.get('model', 'a model')} on a {CHECK_TOKENS}-token prompt, remembered in {path}): measured "
        "with --no-repack"
    )
