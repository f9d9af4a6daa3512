"""Node-aware wrapper of the sweep test double (tests/test_sweep.py) for the Ray executor tests.

Registered as ``$FITBENCH_RUNNER_CMD`` in the environment of each test node. For ``measure`` it first leaves a
start marker ``$DOUBLE_STARTS/<node>-<pid>`` holding its argv, PYTHONPATH, OMP_NUM_THREADS and niceness (the
test sees which node runs a point and which fitbench checkout started it, and can check the child died with
its node), then sleeps the seconds written in ``$DOUBLE_STARTS/<node>.sleep_s`` (0 when absent), then becomes
the plain double (exec, same pid). It measures nothing: the double's records say "TEST DOUBLE".
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DOUBLE = Path(__file__).resolve().parent / "test_sweep.py"

if __name__ == "__main__":
    if sys.argv[1:2] == ["measure"]:
        starts, node = Path(os.environ["DOUBLE_STARTS"]), os.environ["DOUBLE_NODE"]
        marker = {"argv": sys.argv[1:], "pythonpath": os.environ.get("PYTHONPATH", ""),
                  "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "nice": os.nice(0)}  # fmt: skip
        (starts / f"{node}-{os.getpid()}").write_text(json.dumps(marker))
        sleep_file = starts / f"{node}.sleep_s"
        time.sleep(float(sleep_file.read_text()) if sleep_file.exists() else 0.0)
    os.execv(sys.executable, [sys.executable, str(DOUBLE), *sys.argv[1:]])
