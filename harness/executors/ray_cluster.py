"""Run a plan on a Ray cluster: every point a Ray task on some node, every record written by the driver.

Where a point runs: its Ray task asks for ``point_resources(point)``: 1 CPU (a node runs as many points at
once as it has Ray CPUs: start measuring nodes with ``--num-cpus 1`` so points never share a box, or N for N
GPUs), ``num_gpus = gpus`` from the plan, and, when the plan names a device kind K, a sliver (0.001) of the
node resource ``accelerator_type:K``.  Ray sets that resource itself on NVIDIA, AMD and Apple-silicon nodes
(``accelerator_type:H100``, ``accelerator_type:L40S``, ``accelerator_type:AMD-Instinct-MI300X-OAM``,
``accelerator_type:M2``, ...); any other kind is a ``ray start --resources '{"accelerator_type:K": 1}'``.
A point that no alive node can ever host (kind, GPUs or CPUs missing, judged from each node's total resources
in ``ray.nodes()``) is recorded ``skipped`` with the reason at once instead of waiting forever.

What the task does (``measure_on_node``, on the worker node): put back the node's own environment and priority
where Ray changed them for its workers (OMP_NUM_THREADS=1 would slow vLLM CPU; nice 15 lets any other load
slow a measurement), detect the node's host (hwdetect, once per Ray worker process) and engine (``python -m
runners check``, once per engine and process), compute the point key exactly as a local sweep on that node
would (host, engine version, point), and run the point through ``Sweep._run_point``: model build and
measurement each in their own child process, CUDA state dying with the child.  The records carry the node's
provenance plus ``extra``: ``executor`` "ray", ``ray_node_id``, ``ray_node_kinds`` (the node's device kinds),
``process_nice`` (the children's niceness), ``attempt`` (1 or 2), ``retry_cause`` on a retry, and
``plan_point_key``.  They travel back to the driver as plain dicts, are validated there (``record_from_dict``)
and appended by the driver alone, one atomic append per point, to ``<plan>--<family>--<host>.jsonl`` of the
node that measured them: no shared filesystem.

Faults:
* a node (or the Ray worker process) dies mid-point: the task fails with a Ray system error (NodeDiedError,
  WorkerCrashedError, ...); the driver submits the point once more (attempt 2, any node that fits, the same
  one if it came back).  A second loss, or no node able to host the retry within ``node_wait_s``, records the
  point ``failed`` with both causes.  An exception raised by fitbench code in the task is ``failed`` at once.
* a point still queued when the last node that could host it leaves: ``skipped`` after ``node_wait_s``.
* a task running past its point's deadline (timeout_s + build_timeout_s + ``TASK_MARGIN_S``): cancelled,
  ``failed``.
* the driver dies: the job's tasks die with it (their measuring children too: PR_SET_PDEATHSIG); records the
  driver had not yet appended are missing, and ``--resume`` measures exactly those.
Records the driver writes itself (skipped / failed without a node's measurement) go to
``<plan>--ray--driver.jsonl``.

Resume: a record's ``point_key`` names its host, and which node measures a point is Ray's choice, so the Ray
executor keys resume on ``extra.plan_point_key`` = hash of (engine, ``PlannedPoint.key_body``): ``--resume``
skips plan points recorded by any node, ``--retry-failed`` runs again those without an ok record.

Progress: nodes alive, points running (reported by each task when it starts, to a small ``_Board`` actor on
the head node), queued, done.  ``--ship-code`` sends this checkout to the nodes as the job's working_dir
(Ray runtime_env) for nodes that do not have fitbench installed; engines must be installed on the nodes.

Ray is imported inside the functions that need it, so this module (and its pure helpers) loads without it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from harness import isolate
from harness.hwdetect import CpuInfo, HostInfo, detect_host
from harness.plan import PlannedPoint
from harness.provenance import git_sha, model_fingerprint
from harness.records import RecordError, RunRecord, record_from_dict, record_to_dict
from harness.store import done_point_keys, measured_path, point_key, runs_dir, short_hash
from harness.sweep import (
    EngineState,
    Sweep,
    SweepInterrupted,
    SweepRefused,
    SweepSummary,
    _check_writable,
    _plan_source,
    _take_sweep_lock,
    check_engine,
)

KIND_RESOURCE_PREFIX = "accelerator_type:"
# a device kind is a label: a point holds a sliver of it, so CPUs and GPUs bound what runs at once
KIND_FRACTION = 0.001
# task deadline past the point's own timeouts: engine check (600 s) + version probe (120 s) + host detection
TASK_MARGIN_S = 900.0
POLL_S = 0.5  # driver loop period (seconds)
DRIVER_FILE_HOST = "driver"
# what Ray puts into its worker processes' environment that a local sweep's children would not see:
# OMP_NUM_THREADS = the task's CPUs (1) when the node has none (vLLM CPU / torch would run on one thread)
RAY_WORKER_ENV = ("OMP_NUM_THREADS", "PYTHONBREAKPOINT", "SPT_NOENV")
# code shipped with --ship-code: the checkout minus what the nodes don't need
SHIP_EXCLUDES = [".git", "results", "test-artifacts", "**/__pycache__", ".pytest_cache", ".ruff_cache"]


class ClusterError(SweepRefused):
    """Ray missing, or no cluster to connect to (exit 2 like any refused sweep)."""


# --- pure helpers (no Ray) ------------------------------------------------------------------------------
def plan_point_key(point: PlannedPoint) -> str:
    """The point as the plan defines it, whatever node measures it: hash of engine + key_body (20 hex)."""
    return short_hash({"engine": point.engine, "point": point.key_body(model_fingerprint(point.model))})


def point_resources(point: PlannedPoint) -> dict[str, float]:
    """Ray resources the point's task holds while it runs:
    {"CPU": 1, "GPU": gpus (when > 0), "accelerator_type:<kind>": 0.001 (when the plan names a kind)}."""
    demand = {"CPU": 1.0}
    if point.gpus:
        demand["GPU"] = float(point.gpus)
    if point.device_kind:
        demand[KIND_RESOURCE_PREFIX + point.device_kind] = KIND_FRACTION
    return demand


def fits(demand: dict[str, float], node_resources: Iterable[dict[str, float]]) -> bool:
    """True when one node's total resources cover every entry of ``demand``."""
    return any(all(res.get(k, 0.0) >= v for k, v in demand.items()) for res in node_resources)


def node_kinds(resources: dict[str, float]) -> list[str]:
    """The device kinds a node offers: its ``accelerator_type:<kind>`` resources, sorted."""
    prefix = KIND_RESOURCE_PREFIX
    return sorted(k.removeprefix(prefix) for k in resources if k.startswith(prefix))


def why_unplaceable(demand: dict[str, float], node_resources: list[dict[str, float]]) -> str:
    """One line: what the point asks for and what the alive nodes offer (device kinds, GPUs, CPUs)."""
    ask = ", ".join(f"{k}={v:g}" for k, v in sorted(demand.items()))
    if not node_resources:
        return f"no alive Ray node (the point asks for {ask})"
    offers = []
    for res in node_resources:
        kinds = node_kinds(res)
        gpus, cpus = res.get("GPU", 0), res.get("CPU", 0)
        offers.append(f"[{'/'.join(kinds) or 'no kind'}: {gpus:g} GPU, {cpus:g} CPU]")
    return f"no node of the cluster offers {ask}; nodes offer {' '.join(offers)}"


def gcs_unreachable(address: str, timeout_s: float = 5.0) -> str:
    """Why nothing answers at the cluster address ("" when a TCP connection opens).  ``auto`` is resolved as
    ray.init resolves it ($RAY_ADDRESS, else the cluster last started on this machine); an unresolvable
    ``auto`` is left to ray.init, which says so at once."""
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address

            resolved = canonicalize_bootstrap_address("auto")
        except Exception:  # private API moved, or nothing to resolve: ray.init reports it
            return ""
        if not resolved:
            return ""
        address = resolved
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return ""
    except ValueError:
        return f"not HOST:PORT, ray://HOST:PORT or auto: {address!r}"
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or exc})"


# --- on the worker node ---------------------------------------------------------------------------------
def restore_node_conditions() -> dict[str, object]:
    """Give this Ray worker process, and so the point's children, what a local sweep's child has on this node:
    the raylet's values of RAY_WORKER_ENV (unset where the raylet has none) and the raylet's scheduling
    priority (Ray starts its workers at nice 15, ``RAY_worker_niceness``; a measurement at nice 15 on a busy
    box is slowed by everything else).  Raising the priority back needs CAP_SYS_NICE (root); without it the
    niceness stays, and the records say so (``extra.process_nice``).  Returns what changed (name -> the node's
    value, None = unset; "nice" -> the niceness set); {} when the parent is not a raylet."""
    import psutil

    try:
        parent = psutil.Process(os.getppid())
        if "raylet" not in parent.name():
            return {}
        node_env, node_nice = parent.environ(), parent.nice()
    except (psutil.Error, OSError):
        return {}
    changed: dict[str, object] = {}
    for name in RAY_WORKER_ENV:
        want = node_env.get(name)
        if os.environ.get(name) != want:
            changed[name] = want
            if want is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = want
    if os.nice(0) != node_nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, node_nice)
            changed["nice"] = node_nice
        except OSError:  # not allowed to raise the priority: measured at Ray's niceness, recorded
            pass
    return changed


_node_host: HostInfo | None = None  # per Ray worker process
_node_engines: dict[str, EngineState] = {}


def measure_on_node(
    plan_stub, point: PlannedPoint, cache_dir: str | None, shipped_sha: str, source: str, extra: dict
) -> list[dict]:
    """Run one point on this node exactly as a local sweep here would; its records as plain dicts.

    ``plan_stub`` is the plan without its points (name, sha256, timeouts); ``shipped_sha`` the driver's git
    sha when the driver shipped its checkout (--ship-code: the copy has no .git), else ""; ``extra`` is added
    to every record."""
    global _node_host
    restore_node_conditions()  # every task: Ray sets its values again before each one
    if _node_host is None:
        _node_host = detect_host()
    if point.engine not in _node_engines:
        _node_engines[point.engine] = check_engine(point.engine)
    host, state = _node_host, _node_engines[point.engine]
    key = point_key(host.host, point.engine, state.version, point.key_body(model_fingerprint(point.model)))
    sha = git_sha()
    if sha == "unknown" and shipped_sha:
        sha = shipped_sha
    sweep = Sweep(
        plan_stub,
        tempfile.gettempdir(),  # never written: the driver stores the records
        cache_dir=cache_dir,
        host=host,
        engines={point.engine: state},
        show_progress=False,
    )
    records = sweep._run_point(point, key, host, sha, source)
    extra = {**extra, "process_nice": os.nice(0)}  # the children's niceness (0 unless Ray's stayed)
    return [record_to_dict(replace(r, extra={**r.extra, **extra})) for r in records]


def _point_task(board, token: str, plan_stub, point: PlannedPoint, options: dict) -> list[dict]:
    """The Ray task of one point (max_retries=0: the driver decides about retries)."""
    import ray

    if options["shipped_sha"]:  # --ship-code: children run the shipped copy, Ray's working_dir (our cwd),
        shipped = Path.cwd()  # whatever other fitbench the node's Python could import
        if (shipped / "harness" / "isolate.py").exists():
            os.environ[isolate.CODE_ROOT_ENV] = str(shipped)
    node_id = ray.get_runtime_context().get_node_id()
    if board is not None:
        board.started.remote(token, node_id)  # fire and forget: progress only
    node = next((n for n in ray.nodes() if n["NodeID"] == node_id), {})
    kinds = node_kinds(node.get("Resources", {}))
    extra = {**options["extra"], "ray_node_id": node_id, "ray_node_kinds": kinds}
    if point.gpus:
        extra["ray_gpu_ids"] = [str(g) for g in ray.get_gpu_ids()]
    return measure_on_node(
        plan_stub, point, options["cache_dir"], options["shipped_sha"], options["source"], extra
    )


class _Board:
    """Ray actor on the head node: which task tokens have started, and on which node (progress only)."""

    def __init__(self) -> None:
        self._started: dict[str, str] = {}

    def started(self, token: str, node_id: str) -> None:
        self._started[token] = node_id

    def snapshot(self) -> dict[str, str]:
        return dict(self._started)


# --- the driver -----------------------------------------------------------------------------------------
@dataclass
class _Job:
    point: PlannedPoint
    key: str  # plan point key
    demand: dict[str, float]
    attempt: int = 1
    retry_cause: str = ""  # how attempt 1 was lost
    ref: object = None  # ObjectRef of the task
    token: str = ""
    node_id: str = ""  # where it started ("" = queued, as far as the driver knows)
    started_s: float | None = None
    t0: float = field(default_factory=time.monotonic)
    unplaceable_since: float | None = None
    cancel: tuple[str, str] | None = None  # (status, reason) once the driver cancelled it


class RaySweep(Sweep):
    """A sweep whose points run as Ray tasks (see the module docstring).  ``address``: "auto", host:port
    of the GCS, or ray://host:port (Ray Client); ``node_wait_s``: how long a point waits for a node able to
    host it after nodes left; ``ship_code``: send this checkout to the nodes."""

    def __init__(
        self,
        plan,
        results,
        *,
        address: str = "auto",
        node_wait_s: float = 120.0,
        ship_code: bool = False,
        **options,
    ) -> None:
        super().__init__(plan, results, **options)
        self._sha, self._source, self._hostnames = "unknown", "", {}
        self.address = address
        self.node_wait_s = node_wait_s
        self.ship_code = ship_code

    # --- cluster ----------------------------------------------------------------------------------
    def _connect(self):
        try:
            import ray
        except ImportError:
            raise ClusterError(
                "the ray executor needs Ray: pip install -e '.[cluster]' (same Ray version as the cluster)"
            ) from None
        unreachable = gcs_unreachable(self.address)
        if unreachable:  # ray.init would retry a dead address for many minutes
            raise ClusterError(f"cannot connect to a Ray cluster at {self.address!r}: {unreachable}")
        runtime_env = None
        if self.ship_code:
            runtime_env = {"working_dir": str(isolate.REPO_ROOT), "excludes": SHIP_EXCLUDES}
        try:
            ray.init(
                address=self.address,
                logging_level=logging.WARNING,
                log_to_driver=False,
                runtime_env=runtime_env,
                namespace="fitbench",
            )
        except Exception as exc:  # ConnectionError, version mismatch (RuntimeError), bad address (ValueError)
            why = " ".join(str(exc).split())[:600] or type(exc).__name__  # one line, whatever Ray wrote
            raise ClusterError(f"cannot connect to a Ray cluster at {self.address!r}: {why}") from None
        return ray

    @staticmethod
    def _alive_nodes(ray) -> dict[str, dict]:
        return {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}

    # --- records ----------------------------------------------------------------------------------
    def _driver_records(self, job: _Job, status: str, reason: str) -> list[RunRecord]:
        """Records the driver writes itself (no node measured the point): built by ``Sweep._run_point`` with
        the engine marked unavailable for ``reason``, on a host that says only the name of the node the point
        was lost on (or nothing)."""
        host = HostInfo(
            host=self._hostnames.get(job.node_id, ""), backend="", device_name="", n_devices=0, driver="",
            hardware_id="", hardware_family="", cpu=CpuInfo("", "", None, None, None, (), ""),
        )  # fmt: skip
        engines = {job.point.engine: EngineState(False, "", reason)}
        stub = Sweep(self.plan, self.results, host=host, engines=engines, show_progress=False)
        records = stub._run_point(job.point, job.key, host, self._sha, self._source)
        extra = {"executor": "ray", "plan_point_key": job.key, "attempt": job.attempt, "written_by": "driver"}
        if job.retry_cause:
            extra["retry_cause"] = job.retry_cause
        return [replace(r, status=status, extra={**r.extra, **extra}) for r in records]

    def _store(self, records: list[RunRecord], summary: SweepSummary) -> None:
        first = records[0]
        written_by_driver = first.extra.get("written_by") == "driver"
        family, host = ("ray", DRIVER_FILE_HOST) if written_by_driver else (first.hardware_family, first.host)
        self._store_point(measured_path(self.results, self.plan.name, family, host), records, summary)

    # --- driver loop ------------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        """Run every plan point not yet recorded on the cluster.  Raises SweepRefused (ClusterError when Ray
        or the cluster is missing) or SweepInterrupted, like the local sweep."""
        t_start = time.monotonic()
        keys = [plan_point_key(p) for p in self.plan.points]
        done = done_point_keys(
            self.results, ("ok",) if self.retry_failed else ("ok", "failed", "skipped"), key="plan_point_key"
        )
        already = [k for k in keys if k in done]
        if already and not (self.resume or self.repeat):
            raise SweepRefused(
                f"{len(already)} of {len(keys)} points of this plan are already recorded in "
                f"{self.results}; pass --resume to skip them or --repeat to measure them again"
            )
        _check_writable(runs_dir(self.results))
        # one cluster driver per plan and results folder: a second one would measure the same points again
        lock = _take_sweep_lock(runs_dir(self.results) / f"{self.plan.name}--cluster", self.plan.name)
        try:
            return self._run_locked(t_start, keys, done)
        finally:
            lock.release()

    def _run_locked(self, t_start: float, keys: list[str], done: set[str]) -> SweepSummary:
        ray = self._connect()
        old_term = signal.getsignal(signal.SIGTERM)

        def _on_term(signum, frame):  # noqa: ARG001
            raise SweepInterrupted()

        signal.signal(signal.SIGTERM, _on_term)
        summary = SweepSummary(self.plan.name, str(runs_dir(self.results)), len(self.plan.points))
        try:
            self._drive(ray, keys, done, summary)
        except KeyboardInterrupt:
            raise SweepInterrupted() from None
        finally:
            signal.signal(signal.SIGTERM, old_term)
            ray.shutdown()  # the job ends: its tasks (and their measuring children) are killed
            summary.elapsed_s = time.monotonic() - t_start
        return summary

    def _drive(self, ray, keys: list[str], done: set[str], summary: SweepSummary) -> None:
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError

        self._sha, self._source = git_sha(), _plan_source(self.plan)
        nodes = self._alive_nodes(ray)
        self._hostnames = {nid: n.get("NodeManagerHostname", "") for nid, n in nodes.items()}
        board = (
            ray.remote(num_cpus=0, max_restarts=0)(_Board)
            .options(resources={"node:__internal_head__": KIND_FRACTION})
            .remote()
        )
        snapshot_ref = board.snapshot.remote()
        task = ray.remote(max_retries=0, retry_exceptions=False)(_point_task)
        stub_ref = ray.put(replace(self.plan, points=()))
        tokens = iter(range(1 << 62))

        def submit(job: _Job) -> _Job:
            job.token, job.node_id, job.started_s, job.unplaceable_since = f"t{next(tokens)}", "", None, None
            extra = {"executor": "ray", "plan_point_key": job.key, "attempt": job.attempt}
            if job.retry_cause:
                extra["retry_cause"] = job.retry_cause
            options = {"cache_dir": str(self.cache_dir) if self.cache_dir else None, "source": self._source,
                       "shipped_sha": self._sha if self.ship_code else "", "extra": extra}  # fmt: skip
            demand = dict(job.demand)
            num_cpus, num_gpus = demand.pop("CPU", 0.0), demand.pop("GPU", 0.0)
            job.ref = task.options(num_cpus=num_cpus, num_gpus=num_gpus, resources=demand).remote(
                board, job.token, stub_ref, job.point, options
            )
            return job

        def finish(job: _Job, records: list[RunRecord]) -> None:
            self._store(records, summary)
            done.add(job.key)
            summary.point_times_s.append(time.monotonic() - job.t0)

        def driver_written(job: _Job, status: str, reason: str) -> None:
            finish(job, self._driver_records(job, status, reason))

        progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=self.console, disable=not self.show_progress,
        )  # fmt: skip
        with progress:
            bar = progress.add_task(self.plan.name, total=len(self.plan.points))
            active: list[_Job] = []
            for point, key in zip(self.plan.points, keys, strict=True):
                if self.resume and key in done:
                    summary.points_resumed += 1
                    progress.advance(bar)
                    continue
                job = _Job(point, key, point_resources(point))
                if not fits(job.demand, [n["Resources"] for n in nodes.values()]):
                    reason = why_unplaceable(job.demand, [n["Resources"] for n in nodes.values()])
                    driver_written(job, "skipped", reason)
                    progress.advance(bar)
                    continue
                active.append(submit(job))

            while active:
                ready, _ = ray.wait([j.ref for j in active], num_returns=1, timeout=POLL_S)
                if ready:
                    ready, _ = ray.wait([j.ref for j in active], num_returns=len(active), timeout=0)
                ready_set = set(ready)
                for job in [j for j in active if j.ref in ready_set]:
                    active.remove(job)
                    try:
                        raw = ray.get(job.ref)
                    except RayError as exc:
                        if job.cancel:  # cancelled by the watchdog (TaskCancelledError or the killed worker)
                            driver_written(job, *job.cancel)
                        elif isinstance(exc, RayTaskError):  # fitbench code raised on the node: no node loss
                            driver_written(job, "failed", f"the point's Ray task raised: {_tail(exc)}")
                        elif isinstance(exc, TaskCancelledError):
                            driver_written(job, "failed", "the point's Ray task was cancelled (not by us)")
                        else:  # node died, worker crashed, object lost: the point was lost
                            node = job.node_id[:12] or "?"
                            cause = f"attempt {job.attempt} lost on node {node}: {_first(exc)}"
                            if job.attempt == 1:
                                active.append(submit(replace(job, attempt=2, retry_cause=cause)))
                                continue
                            driver_written(job, "failed", f"{job.retry_cause}; {cause}")
                    else:
                        finish(job, self._validated(job, raw))
                    progress.advance(bar)

                now = time.monotonic()
                snapshot_ref = self._read_board(ray, board, snapshot_ref, active, now)
                nodes = self._alive_nodes(ray)
                self._hostnames.update({nid: n.get("NodeManagerHostname", "") for nid, n in nodes.items()})
                self._watchdog(ray, active, nodes, now)
                running = sum(1 for j in active if j.node_id and j.node_id in nodes)
                progress.update(
                    bar,
                    description=f"{self.plan.name}: nodes {len(nodes)}, running {running}, "
                    f"queued {len(active) - running}",
                )

    def _validated(self, job: _Job, raw: list[dict]) -> list[RunRecord]:
        """The node's records, checked against the schema and the point they claim to be."""
        try:
            records = [record_from_dict(r, f"record from node {job.node_id[:12]}") for r in raw]
        except RecordError as exc:
            return self._driver_records(job, "failed", f"node returned an unreadable record: {exc}")
        if not records or any(r.extra.get("plan_point_key") != job.key for r in records):
            return self._driver_records(job, "failed", "node returned records of another point")
        return records

    @staticmethod
    def _read_board(ray, board, snapshot_ref, active: list[_Job], now: float):
        """Non-blocking: take the board's last snapshot when it has arrived and ask for the next one."""
        ready, _ = ray.wait([snapshot_ref], timeout=0)
        if not ready:
            return snapshot_ref
        try:
            started = ray.get(snapshot_ref)
        except Exception:  # board lost (head restarting?): progress shows everything as queued
            return board.snapshot.remote()
        for job in active:
            if not job.node_id and job.token in started:
                job.node_id, job.started_s = started[job.token], now
        return board.snapshot.remote()

    def _watchdog(self, ray, active: list[_Job], nodes: dict[str, dict], now: float) -> None:
        """Cancel what can no longer finish: points not started that no alive node can host for
        ``node_wait_s`` (queued: skipped; a lost point's retry: failed) and tasks past their deadline
        (failed).  A started point whose node dies is left alone: Ray fails its task and the driver retries.
        """
        resources = [n["Resources"] for n in nodes.values()]
        for job in active:
            if job.cancel:
                continue
            if job.node_id or fits(job.demand, resources):  # started: a lost node is Ray's to report
                job.unplaceable_since = None
            else:
                job.unplaceable_since = job.unplaceable_since or now
                if now - job.unplaceable_since >= self.node_wait_s:
                    why = why_unplaceable(job.demand, resources)
                    if job.attempt > 1:
                        job.cancel = ("failed", f"{job.retry_cause}; no node to retry on within "
                                                f"{self.node_wait_s:g} s: {why}")  # fmt: skip
                    else:
                        job.cancel = ("skipped", f"{why} (waited {self.node_wait_s:g} s after nodes left)")
            deadline = job.point.timeout_s + self.plan.build_timeout_s + TASK_MARGIN_S
            if job.cancel is None and job.started_s is not None and now - job.started_s > deadline:
                job.cancel = ("failed", f"the point's Ray task ran past its deadline of {deadline:.0f} s")
            if job.cancel:
                ray.cancel(job.ref, force=True)


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def _tail(exc: BaseException, n_chars: int = 2000) -> str:
    return str(exc).strip()[-n_chars:]
