"""A real Ray cluster on this machine, bound to 127.0.0.1 only: `ray start --head` plus `ray start --address`
node processes, each with its own custom resources and environment, started and killed by the tests.

Loopback: on Linux, Ray replaces a node or cluster address of 127.0.0.1 with the host's routable address
(``ray._private.services.resolve_ip_for_localhost``) unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, and
with that variable set ``ray start --address`` refuses to add a node.  So every node runs the unmodified
``ray start`` command (``ray.scripts.scripts.main``) through this file as a launcher that keeps 127.0.0.1 as
given; the variable is set for the nodes' children and the drivers (``driver_env``).  With it, GCS, raylets,
object managers, agents and workers listen on 127.0.0.1 only.  Resources stay small (1 CPU and a 100 MB object
store per node, no dashboard); all state lives in a temporary folder that ``stop()`` removes.

Killing a node: ``ray start --block`` leads a session (start_new_session); its raylet, agents and Ray workers
stay in that session (workers get their own process groups), so ``kill_node`` SIGKILLs every process of the
session - what a machine losing power looks like to the rest of the cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 90.0


def _launch() -> int:  # `python tests/ray_local.py start ...`: the ray CLI with loopback kept
    import ray._private.ray_constants as ray_constants
    import ray._private.services as services
    from ray.scripts.scripts import main

    services.resolve_ip_for_localhost = lambda host: host
    ray_constants.ENABLE_RAY_CLUSTER = True  # passes the CLI's multi-node check; children keep the variable
    sys.argv = ["ray", *sys.argv[1:]]
    return main()


if __name__ == "__main__":
    sys.exit(_launch())


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port that is free now and that this process has not handed out before: the kernel may give
    a just-closed port again, and a Ray node is given ten ports before it binds any (a repeat made the head's
    GCS refuse a port 'used by other components')."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def session_pids(sid: int) -> list[int]:
    """Processes whose session id is ``sid`` (field 6 of /proc/PID/stat)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    log: Path

    @property
    def sid(self) -> int:
        return self.proc.pid  # start_new_session: the launcher leads its session


class LocalRayCluster:
    """Head + nodes on 127.0.0.1; ``env`` is added to every node's environment (and so to its workers)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fbray-", dir="/tmp"))  # short: Ray's socket paths
        self.env = dict(env or {})
        self.port = free_port()
        self.client_port = free_port()  # Ray Client server of the head: ray://127.0.0.1:<client_port>
        self.nodes: dict[str, Node] = {}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
            RAY_USAGE_STATS_ENABLED="0",
            # the head's Ray Client server gives a client's own server process 30 s to come up; a loaded
            # 2-core test box can take longer
            RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S="180",
            PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        )
        return env

    def driver_env(self) -> dict[str, str]:
        return {**self.base_env(), "RAY_ADDRESS": self.address}

    def _start(self, name: str, args: list[str], resources: dict, env: dict[str, str]) -> Node:
        log = self.root / f"{name}.log"
        argv = [
            sys.executable, __file__, "start", "--block", "--disable-usage-stats",
            "--num-cpus", "1", "--object-store-memory", "100000000",
            "--resources", json.dumps(resources),
            "--node-manager-port", str(free_port()), "--object-manager-port", str(free_port()),
            "--min-worker-port", "0", "--max-worker-port", "0",
            "--dashboard-agent-listen-port", str(free_port()),
            "--dashboard-agent-grpc-port", str(free_port()),
            "--metrics-export-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()),
            *args,
        ]  # fmt: skip
        with log.open("wb") as fh:
            proc = subprocess.Popen(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**self.base_env(), **self.env, **env},
                cwd=REPO,
                start_new_session=True,
            )
        node = Node(name, proc, log)
        self.nodes[name] = node
        t0 = time.monotonic()
        while b"Ray runtime started" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() - t0 > START_TIMEOUT_S:
                tail = log.read_text(errors="replace")[-3000:]
                self.kill_node(name)
                raise RuntimeError(f"ray node {name} did not start:\n{tail}")
            time.sleep(0.2)
        return node

    def start_head(self, resources: dict, env: dict[str, str] | None = None) -> Node:
        args = [
            "--head", "--node-ip-address", "127.0.0.1", "--port", str(self.port),
            "--include-dashboard", "false", "--temp-dir", str(self.root / "ray"),
            "--ray-client-server-port", str(self.client_port),
        ]  # fmt: skip
        return self._start("head", args, resources, env or {})

    def add_node(self, name: str, resources: dict, env: dict[str, str] | None = None) -> Node:
        return self._start(name, ["--address", self.address], resources, env or {})

    def kill_node(self, name: str, timeout_s: float = 30.0) -> None:
        """SIGKILL every process of the node's session and wait until none is left."""
        node = self.nodes.pop(name)
        t0 = time.monotonic()
        while True:
            pids = session_pids(node.sid)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"node {name}: processes {pids} survive SIGKILL")
            time.sleep(0.1)
        node.proc.wait(timeout=10)

    def stop(self) -> None:
        for name in list(self.nodes):
            if name != "head":
                self.kill_node(name)
        if "head" in self.nodes:
            self.kill_node("head")
        shutil.rmtree(self.root, ignore_errors=True)
