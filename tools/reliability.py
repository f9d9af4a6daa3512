"""Kill / resume trials of a sweep: interrupt it at random moments, resume it, count what the records hold.

    python tools/reliability.py [--plan plans/reliability.toml] [--trials 6] [--seed 14] [--results DIR]
                                [--double]

Each trial starts ``python -m harness measure --resume`` and, after a random delay, stops it — SIGKILL (the
harness gets no chance to clean up; its measuring child dies with it) or SIGTERM (it unwinds and exits 130),
alternately.  After the trials one last run completes the plan.  Then every records file is read with the
harness's own reader and the tool prints:

* points: planned, and recorded (a point counts when a record carries its point key);
* duplicates: records of the same point, test and depth beyond the first (a point measured twice);
* torn lines: lines that are not a whole, valid record (a half-written append);
* temporaries left: ``*.tmp`` / ``*.part`` files in the runs folder.

The exit status is 0 when every planned point is recorded once and nothing is torn or left over, else 1.
``--double`` swaps the engine for the sweep tests' test double (no llama.cpp needed; seconds instead of a
minute) — the harness, its child processes, the store and the locks are the real ones either way.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.plan import load_plan  # noqa: E402
from harness.records import scan_records  # noqa: E402
from harness.store import record_files, runs_dir  # noqa: E402


def _sweep(plan: str, results: Path, env: dict) -> subprocess.Popen:
    argv = [sys.executable, "-m", "harness", "measure", "--plan", plan, "--results", str(results), "--resume",
            "--no-progress"]  # fmt: skip
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip


def count(results: Path) -> dict:
    """Points recorded, duplicates, torn lines and leftover temporaries under ``results``."""
    torn, records = 0, []
    for path in record_files(results):
        for ln in scan_records(path):
            if ln.record is None:
                torn += 1
            else:
                records.append(ln.record)
    tests = Counter(
        (r.extra.get("point_key"), r.n_prompt, r.n_gen, r.n_depth, r.batch)
        for r in records
        if r.status == "ok"
    )
    folder = runs_dir(results)
    temps = (
        [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".part"))] if folder.is_dir() else []
    )
    return {
        "records": len(records),
        "ok": sum(r.status == "ok" for r in records),
        "points": len({r.extra.get("point_key") for r in records if r.status == "ok"}),
        "duplicates": sum(n - 1 for n in tests.values()),
        "torn": torn,
        "temporaries": len(temps),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--plan", default=str(ROOT / "plans" / "reliability.toml"))
    p.add_argument("--trials", type=int, default=6, help="interruptions before the final run")
    p.add_argument("--seed", type=int, default=14, help="seed of the random interruption moments")
    p.add_argument("--max-delay", type=float, default=12.0, help="latest interruption after a start, seconds")
    p.add_argument("--results", default=None, help="results folder (default: a new temporary one)")
    p.add_argument("--double", action="store_true", help="the sweep tests' test double instead of the engine")
    args = p.parse_args(argv)
    plan = load_plan(args.plan)
    results = Path(args.results or tempfile.mkdtemp(prefix="fitbench-reliability-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.double:
        env["FITBENCH_RUNNER_CMD"] = f"{sys.executable} {ROOT / 'tests' / 'test_sweep.py'}"
        env["DOUBLE_DIR"] = str(results)
    rng = random.Random(args.seed)
    exits: list[str] = []
    t0 = time.monotonic()
    for trial in range(args.trials):
        proc = _sweep(args.plan, results, env)
        delay = rng.uniform(0.3, args.max_delay)
        sig = signal.SIGKILL if trial % 2 == 0 else signal.SIGTERM
        try:
            proc.wait(delay)
            exits.append(f"finished before the {sig.name} ({proc.returncode})")
        except subprocess.TimeoutExpired:
            proc.send_signal(sig)  # the sweep only; its measuring child dies with it (PR_SET_PDEATHSIG)
            proc.wait(60)
            exits.append(f"{sig.name} at {delay:.1f} s -> exit {proc.returncode}")
        print(f"  trial {trial + 1}: {exits[-1]}; {count(results)['points']} points recorded", flush=True)
    proc = _sweep(args.plan, results, env)
    _, err = proc.communicate(timeout=3600)
    final = proc.returncode
    c = count(results)
    planned = len(plan.points)
    ok = final == 0 and c["points"] == planned and not (c["duplicates"] or c["torn"] or c["temporaries"])
    engine = "test double" if args.double else ", ".join(plan.engines)
    print(f"reliability: {args.plan} ({engine}), {args.trials} interruptions at random moments "
          f"(seed {args.seed}), then a final run (exit {final}); {time.monotonic() - t0:.0f} s")  # fmt: skip
    print(f"  points: {planned} planned, {c['points']} recorded")
    print(f"  records: {c['records']} ({c['ok']} ok); duplicates: {c['duplicates']}; "
          f"torn lines: {c['torn']}; temporaries left: {c['temporaries']}")  # fmt: skip
    print(f"  results: {results}")
    if final != 0:
        print(f"  final run failed: {err.strip().splitlines()[-1] if err.strip() else final}")
    print("  verdict: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
