"""Executors: where the points of a sweep run.

* ``local`` (default): ``harness.sweep.Sweep`` runs every point on this machine, one after another, each step
  (engine check, model build, measurement) in its own child process.  It imports nothing of Ray.
* ``ray``: ``harness.executors.ray_cluster.RaySweep`` makes every point a Ray task on a cluster node; the task
  runs the point exactly as the local sweep does (``Sweep._run_point``, children included) and returns its
  records to the driver, the one writer.  Ray is the optional extra ``pip install -e '.[cluster]'``.

``make_sweep`` is the one place that maps an executor name to its sweep; Ray is imported only when asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.plan import Plan
    from harness.sweep import Sweep

EXECUTORS = ("local", "ray")


def make_sweep(
    executor: str,
    plan: Plan,
    results: str | Path,
    *,
    address: str = "auto",
    node_wait_s: float = 120.0,
    ship_code: bool = False,
    **options,
) -> Sweep:
    """The sweep of ``plan`` for ``executor``; ``options`` are Sweep's (resume, repeat, retry_failed,
    cache_dir, console, show_progress).  ``address``, ``node_wait_s`` and ``ship_code`` are the Ray
    executor's."""
    if executor == "local":
        from harness.sweep import Sweep

        return Sweep(plan, results, **options)
    if executor == "ray":
        from harness.executors.ray_cluster import RaySweep

        return RaySweep(
            plan, results, address=address, node_wait_s=node_wait_s, ship_code=ship_code, **options
        )
    raise ValueError(f"unknown executor {executor!r} (one of {', '.join(EXECUTORS)})")
