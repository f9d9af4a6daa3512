"""tools/build_llama_cuda.sh and tools/device_lease.sh (docs/harness.md "A lent GPU that cannot reach a
package index"): valid shell, and the lease script stops with a clear reason, before measuring anything,
when what should have travelled is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = [ROOT / "tools" / "build_llama_cuda.sh", ROOT / "tools" / "device_lease.sh"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses(script):
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_lease_needs_out():
    env = {"PATH": "/usr/bin:/bin"}
    p = subprocess.run(["bash", str(SCRIPTS[1])], capture_output=True, text=True, env=env)
    assert p.returncode != 0
    assert "set OUT" in p.stderr


def test_lease_without_the_travelled_build_stops_before_measuring(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    work = tmp_path / "checkout"  # no .dev/ beside it
    work.mkdir()
    p = subprocess.run(
        ["bash", str(SCRIPTS[1]), "5"],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "OUT": str(out), "HOME": str(tmp_path)},
        timeout=120,
    )
    assert p.returncode == 2, p.stdout + p.stderr
    assert "install failed" in p.stdout
    assert not (out / "results").exists() and not (out / "measure.log").exists()
    assert (out / "environment.txt").is_file()
