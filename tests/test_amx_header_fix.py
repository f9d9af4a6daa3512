"""tools/amx_header_fix.py: the corrected AMX tile-config header that `make install-llama` builds llama.cpp
with when the compiler's `_tile_loadconfig` reads only a pointer's worth of the configuration."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("amx_header_fix", ROOT / "tools" / "amx_header_fix.py")
fix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fix)

# the two intrinsics as GCC 12's header writes them (an 8-byte operand), in a header of our own
OLD_FORM = """
static __inline void _tile_loadconfig (const void *__config)
{
  __asm__ volatile ("ldtilecfg\\t%X0" :: "m" (*((const void **)__config)));
}
static __inline void _tile_storeconfig (void *__config)
{
  __asm__ volatile ("sttilecfg\\t%X0" : "=m" (*((void **)__config)));
}
"""
# and as a builtin (GCC 13's form): nothing to fix
BUILTIN_FORM = """
static __inline void _tile_loadconfig (const void *__config) { __builtin_ia32_ldtilecfg (__config); }
"""


def test_the_pointer_sized_operands_are_widened_to_the_whole_configuration():
    assert fix.needs_fix(OLD_FORM) and not fix.needs_fix(BUILTIN_FORM)
    out = fix.fixed_text(OLD_FORM)
    assert '"m" (*((const char (*)[64])__config))' in out
    assert '"=m" (*((char (*)[64])__config))' in out
    assert "void **" not in out and not fix.needs_fix(out)
    assert fix.fixed_text(BUILTIN_FORM) == BUILTIN_FORM


def _fake_compiler(tmp_path: Path, header_text: str) -> str:
    """A `cc` that answers -print-file-name=include with a folder holding ``header_text`` and compiles
    whatever it is given (exit 0)."""
    inc = tmp_path / "gcc-include"
    inc.mkdir()
    (inc / fix.HEADER).write_text(header_text)
    cc = tmp_path / "fake-cc"
    cc.write_text(f'#!/bin/sh\nif [ "$1" = "-print-file-name=include" ]; then echo {inc}; fi\nexit 0\n')
    cc.chmod(0o755)
    return str(cc)


def test_cmake_args_point_an_isystem_folder_at_the_corrected_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(fix.platform, "system", lambda: "Linux")
    monkeypatch.setattr(fix.platform, "machine", lambda: "x86_64")
    cc = _fake_compiler(tmp_path, OLD_FORM)
    args = fix.cmake_args(cc, root=tmp_path / "cache")
    c_flag, cxx_flag = args.split()
    assert c_flag.startswith("-DCMAKE_C_FLAGS=-isystem") and cxx_flag.startswith("-DCMAKE_CXX_FLAGS=-isystem")
    folder = Path(c_flag.split("-isystem", 1)[1])
    assert folder.parent == tmp_path / "cache" / "amx-header-fix"
    assert (folder / fix.HEADER).read_text() == fix.fixed_text(OLD_FORM)
    assert fix.cmake_args(cc, root=tmp_path / "cache") == args  # the same copy again


def test_nothing_is_printed_where_no_fix_applies(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fix.platform, "system", lambda: "Linux")
    monkeypatch.setattr(fix.platform, "machine", lambda: "x86_64")
    assert fix.cmake_args(_fake_compiler(tmp_path, BUILTIN_FORM), root=tmp_path / "cache") == ""
    assert not (tmp_path / "cache").exists() and capsys.readouterr().err == ""
    other = tmp_path / "other"
    other.mkdir()
    old_cc = _fake_compiler(other, OLD_FORM)
    monkeypatch.setattr(fix.platform, "machine", lambda: "aarch64")  # no AMX there
    assert fix.cmake_args(old_cc, root=tmp_path / "cache") == ""
    monkeypatch.setattr(fix.platform, "machine", lambda: "x86_64")
    broken = tmp_path / "broken"
    broken.mkdir()
    failing_cc = _fake_compiler(broken, OLD_FORM)
    Path(failing_cc).write_text(Path(failing_cc).read_text().replace("fi\nexit 0", "exit 0; fi\nexit 1"))
    assert fix.cmake_args(failing_cc, root=tmp_path / "cache") == ""  # the copy does not compile: stock build
    assert "does not compile" in capsys.readouterr().err  # and the build says why it has no fix


def _real_compiler_with_old_form() -> str:
    cc = fix.compiler()
    header = fix.compiler_header(cc) if cc else None
    if header is None or not fix.needs_fix(header.read_text(errors="replace")):
        pytest.skip("this compiler's amxtileintrin.h needs no fix (or there is no compiler)")
    if shutil.which("objdump") is None:
        pytest.skip("no objdump to read the object file")
    return cc


SOURCE = """#include <immintrin.h>
#include <stdint.h>
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
void configure(void) {
    _Alignas(64) cfg_t c = {0};
    c.palette = 1;
    c.rows[0] = 8;  c.colsb[0] = 64;
    c.rows[4] = 16; c.colsb[4] = 64;
    _tile_loadconfig(&c);
}
"""


def _stores_before_ldtilecfg(cc: str, tmp_path: Path, extra: list[str]) -> str:
    src = tmp_path / "cfg.c"
    src.write_text(SOURCE)
    obj = tmp_path / f"cfg{len(extra)}.o"
    subprocess.run([*cc.split(), "-O2", "-mamx-tile", *extra, "-c", str(src), "-o", str(obj)], check=True)
    return subprocess.run(["objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout


def test_the_real_compiler_keeps_the_tile_shapes_only_with_the_corrected_header(tmp_path):
    """The bug itself, on this machine's compiler: with its own header the stores of rows / colsb (8, 16 and
    64 = 0x8, 0x10, 0x40) are dropped before ldtilecfg; with the copy they are there."""
    cc = _real_compiler_with_old_form()
    folder = fix.fix_dir(cc, root=tmp_path / "cache")
    assert folder is not None
    stock = _stores_before_ldtilecfg(cc, tmp_path, [])
    fixed = _stores_before_ldtilecfg(cc, tmp_path, [f"-isystem{folder}"])
    assert "ldtilecfg" in stock and "ldtilecfg" in fixed
    assert "$0x40" not in stock and "$0x40" in fixed
