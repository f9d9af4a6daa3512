"""CMake arguments that let llama.cpp's AMX code compile correctly with GCC 12 (any compiler whose AMX header
has the form below); printed for ``CMAKE_ARGS`` by ``make install-llama`` (nothing when no fix is needed).

Why: ggml's AMX matrix multiply (ggml-cpu/amx/mmq.cpp, ``ggml_tile_config_init``) fills a 64-byte tile
configuration on the stack (palette, then the column widths and rows of eight tiles) and loads it with the
``_tile_loadconfig`` intrinsic.  GCC 12's ``<amxtileintrin.h>`` writes that intrinsic as inline assembly
whose memory operand is ``*(const void **)config``: 8 bytes.  The compiler may then treat the stores of the
tile shapes (bytes 16..63) as dead and drop them, and ``ldtilecfg`` loads whatever the stack held: on the
Xeon guest with AMX of 2026-12-07 (llama-cpp-python 0.3.36 built by Debian 12's GCC 12.2.0) the built
``libggml-cpu.so`` zeroes 32 bytes, sets the palette byte and runs ``ldtilecfg``, and the kernel logs a
general-protection fault there at the first prompt that reaches the AMX weight buffer (SIGSEGV,
ggml-org/llama.cpp#20824, closed without a cause).  A five-line C file shows the same: with GCC's header
the tile shapes are not stored, with an operand covering the whole configuration they are.  GCC 13's header
calls a compiler builtin instead of inline assembly.

How: when the compiler's ``amxtileintrin.h`` has the pointer-sized operands, write a copy whose
``ldtilecfg`` / ``sttilecfg`` operands are the 64-byte configuration into the fitbench cache
(``$FITBENCH_CACHE`` or ~/.cache/fitbench, ``amx-header-fix/<hash of the original>``) and print
``-DCMAKE_C_FLAGS=-isystem<dir> -DCMAKE_CXX_FLAGS=-isystem<dir>``: ``-isystem`` directories are searched
before the compiler's own, so ``<immintrin.h>`` includes the copy.  The copy is checked by compiling a
translation unit that uses both intrinsics.  Another architecture, no compiler or a header without that
form: nothing is printed and llama.cpp builds as it would anyway.  A header that needs the fix but whose copy
does not compile: nothing is printed either, and a warning on stderr says so (on an AMX host
``runners.amx_check`` then finds the crash and the runner measures with ``--no-repack``).

Standard library and ``runners.amx_check`` (itself standard library only) for the cache root: the Makefile
runs it before fitbench's engines are installed.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, when not installed
from runners.amx_check import cache_dir  # noqa: E402

HEADER = "amxtileintrin.h"
CONFIG_BYTES = 64  # an AMX tile configuration: palette, start row, 14 reserved, 16 x colsb (u16), 16 x rows
# the inline-assembly operands of GCC 12's header: a pointer-sized load (ldtilecfg) and store (sttilecfg)
_LOAD = re.compile(r'"m"\s*\(\s*\*\s*\(\s*\(\s*const\s+void\s*\*\s*\*\s*\)\s*(\w+)\s*\)\s*\)')
_STORE = re.compile(r'"=m"\s*\(\s*\*\s*\(\s*\(\s*void\s*\*\s*\*\s*\)\s*(\w+)\s*\)\s*\)')
TIMEOUT_S = 60.0
_CHECK_SOURCE = """#include <immintrin.h>
void fitbench_amx_check(void *config) { _tile_storeconfig(config); _tile_loadconfig(config); }
"""


def needs_fix(text: str) -> bool:
    """Whether a header's ``_tile_loadconfig`` is inline assembly with a pointer-sized memory operand."""
    return bool(_LOAD.search(text))


def fixed_text(text: str) -> str:
    """The header with the ``ldtilecfg`` / ``sttilecfg`` operands widened to the whole configuration."""
    text = _LOAD.sub(lambda m: f'"m" (*((const char (*)[{CONFIG_BYTES}]){m.group(1)}))', text)
    return _STORE.sub(lambda m: f'"=m" (*((char (*)[{CONFIG_BYTES}]){m.group(1)}))', text)


def compiler() -> str | None:
    """The C compiler CMake would pick first: ``$CC``, else ``cc`` / ``gcc`` on PATH."""
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        if name and shutil.which(name.split()[0]):
            return name
    return None


def compiler_header(cc: str) -> Path | None:
    """The compiler's own ``amxtileintrin.h`` (``-print-file-name=include``), None when it has none."""
    try:
        r = subprocess.run([*cc.split(), "-print-file-name=include"], capture_output=True, text=True,
                           timeout=TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(r.stdout.strip()) / HEADER
    return path if r.returncode == 0 and path.is_file() else None


def compiles(cc: str, include_dir: Path) -> bool:
    """Whether a translation unit using both intrinsics compiles with ``-isystem include_dir``."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "check.c"
        src.write_text(_CHECK_SOURCE)
        try:
            r = subprocess.run([*cc.split(), "-mamx-tile", f"-isystem{include_dir}", "-c", str(src), "-o",
                                str(Path(tmp) / "check.o")], capture_output=True, timeout=TIMEOUT_S,
                               check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return False
    return r.returncode == 0


def fix_dir(cc: str | None = None, root: Path | None = None) -> Path | None:
    """The directory holding the corrected header (written when missing), None when no fix is needed or
    possible (module doc)."""
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    cc = cc or compiler()
    header = compiler_header(cc) if cc else None
    if header is None:
        return None
    text = header.read_text(errors="replace")
    if not needs_fix(text):
        return None
    out = (root or cache_dir()) / "amx-header-fix" / hashlib.sha256(text.encode()).hexdigest()[:16]
    target = out / HEADER
    try:
        if not target.is_file() or target.read_text() != fixed_text(text):
            out.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            tmp.write_text(fixed_text(text))
            os.replace(tmp, target)
    except OSError:
        return None
    if compiles(cc, out):
        return out
    print(f"warning: {header} needs the AMX tile-config fix but the corrected copy in {out} does not compile "
          "with this compiler; llama.cpp builds without it (its AMX buffer may crash at the first prompt)",
          file=sys.stderr)  # fmt: skip
    return None


def cmake_args(cc: str | None = None, root: Path | None = None) -> str:
    """``-DCMAKE_C_FLAGS=-isystem<dir> -DCMAKE_CXX_FLAGS=-isystem<dir>`` when the fix applies, else ""."""
    d = fix_dir(cc, root)
    if d is None or any(c.isspace() for c in str(d)):  # CMAKE_ARGS is split on whitespace
        return ""
    return f"-DCMAKE_C_FLAGS=-isystem{d} -DCMAKE_CXX_FLAGS=-isystem{d}"


if __name__ == "__main__":
    print(cmake_args())
    sys.exit(0)
