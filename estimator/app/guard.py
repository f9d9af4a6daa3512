"""What the local page lets in: host names, model references, connections and report work (issue 17: 4).

``estimator.app.serve`` is a small threaded HTTP server meant for one person's browser; this module keeps a
hostile or merely busy client from stalling it or using it to look at the disk:

* **Host names** (``allowed_hosts`` / ``host_allowed``): a request whose ``Host`` header names another host is
  refused (403), so a web page cannot reach the server through DNS rebinding.  Accepted: ``127.0.0.1``,
  ``localhost``, ``::1`` and the address given with ``--host``; when bound to every address (``0.0.0.0``,
  ``::``) also any IP literal (an address cannot be rebound, only a name can).
* **Models** (``ModelGate``): ``model=`` is a catalog id (or Hugging Face id / alias), or a path *relative to*
  the folder given with ``--models-dir`` that stays inside it once symlinks are resolved.  Anything else —
  ``/root/.ssh``, ``../x``, a file outside the folder — gets exactly the catalog's "unknown model" answer
  whether or not it exists, so the page cannot probe the disk, and no other file on the machine is parsed.
* **Connections** (``Limits.max_connections``, ``Limits.header_timeout_s``): at most that many open
  connections (one thread each); beyond it a connection gets ``503`` at once and is closed.  A request must
  arrive whole (request line and headers) within ``header_timeout_s`` of the connection's turn starting, or
  the connection is shut (``DeadlineReaper``: one thread for all connections); a client that sends a header
  line every few seconds cannot hold a thread either.  Every socket read and write also has that timeout.
* **Report work** (``WorkSlots``): at most ``Limits.workers`` reports are built at once; at most
  ``Limits.queue_limit`` more wait, each at most ``Limits.queue_wait_s``; beyond either the answer is ``503``
  (``Busy``).  Before a report is built the connection is checked: a client that has gone away gets no work
  (``ClientGone``), so a burst of abandoned requests costs nothing.  ``/healthz`` needs no slot.
"""

from __future__ import annotations

import heapq
import ipaddress
import os
import select
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from estimator.specs import SpecError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Limits:
    """The page's limits (seconds, counts)."""

    max_connections: int = 512  # open connections, one thread each
    header_timeout_s: float = 10.0  # request line + headers must arrive within this; also the socket timeout
    workers: int = 4  # reports built at once
    queue_limit: int = 64  # requests waiting for a worker
    queue_wait_s: float = 30.0  # how long one waits before 503
    backlog: int = 128  # the listen queue (the stdlib's default is 5)


class Busy(Exception):
    """Every worker is busy and the queue is full (or the wait timed out): answer 503."""


class ClientGone(Exception):
    """The client closed its connection while waiting: build nothing."""


# --- host names ---------------------------------------------------------------------------------------------


def _strip_port(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8765
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:  # name:port or a.b.c.d:port (a bare IPv6 literal has several colons)
        return host.split(":", 1)[0]
    return host


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ::1)."""
    host = _strip_port(host)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return _strip_port(host) in ("", "0.0.0.0", "::")


def allowed_hosts(bound_host: str) -> frozenset[str]:
    """The host names a Host header may name for a server bound to ``bound_host``."""
    return frozenset({*LOOPBACK_NAMES, _strip_port(bound_host)} - {""})


def host_allowed(header: str | None, bound_host: str) -> bool:
    """Whether a request's ``Host`` header is one this server answers to (a missing header is allowed: a
    browser always sends one, so its absence is not a rebinding attack)."""
    if header is None:
        return True
    name = _strip_port(header)
    if name in allowed_hosts(bound_host):
        return True
    return is_wildcard(bound_host) and _is_ip(name)


# --- model references ---------------------------------------------------------------------------------------


class ModelGate:
    """Which ``model=`` values the page accepts: catalog ids, and paths inside ``models_dir`` (or none)."""

    def __init__(self, models_dir: str | os.PathLike | None) -> None:
        self.root = Path(os.path.realpath(models_dir)) if models_dir else None

    def resolve(self, ref: str) -> str:
        """The model argument to size: ``ref`` itself for a catalog id, the real path of a file or folder
        under the models folder, else SpecError — the catalog's own "unknown model" message, the same for a
        path that exists and one that does not."""
        from estimator.catalog.data import get_model, is_model_id

        if is_model_id(ref):
            return ref
        found = self._inside(ref)
        if found is not None:
            return found
        get_model(ref)  # raises the catalog's SpecError naming the nearest ids
        raise SpecError(f"unknown model {ref!r}")  # pragma: no cover - get_model raised already

    def _inside(self, ref: str) -> str | None:
        if self.root is None or not ref or ref.startswith(("/", "~", "\\")) or "\0" in ref:
            return None
        if any(part in ("..", "") for part in ref.replace("\\", "/").split("/")):
            return None
        real = Path(os.path.realpath(self.root / ref))
        if real != self.root and self.root not in real.parents:
            return None  # a symlink leading out of the folder
        if not real.exists():
            return None
        return str(real)


# --- connections --------------------------------------------------------------------------------------------


class DeadlineReaper:
    """Shuts a connection's socket when its deadline passes (one daemon thread for every connection).

    ``arm(sock, seconds)`` sets or moves a deadline, ``disarm(sock)`` removes it.  Shutting the socket makes
    the handler's blocked read return, so its thread ends."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._due: dict[int, tuple[float, socket.socket]] = {}
        self._heap: list[tuple[float, int]] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="fitbench-deadlines", daemon=True)
        self._thread.start()

    def arm(self, sock: socket.socket, seconds: float) -> None:
        when = time.monotonic() + seconds
        with self._lock:
            self._due[id(sock)] = (when, sock)
            heapq.heappush(self._heap, (when, id(sock)))
            self._lock.notify()

    def disarm(self, sock: socket.socket) -> None:
        with self._lock:
            self._due.pop(id(sock), None)

    def stop(self) -> None:
        """End the reaper's thread (the server is closing)."""
        with self._lock:
            self._stopped = True
            self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._heap and not self._stopped:
                    self._lock.wait()
                if self._stopped:
                    return
                when, key = self._heap[0]
                now = time.monotonic()
                if when > now:
                    self._lock.wait(when - now)
                    continue
                heapq.heappop(self._heap)
                entry = self._due.get(key)
                if entry is None or entry[0] != when:
                    continue  # disarmed or moved
                del self._due[key]
                sock = entry[1]
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def client_gone(sock: socket.socket) -> bool:
    """True when the peer has closed the connection (readable with nothing to read, or reset)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class WorkSlots:
    """At most ``workers`` jobs at once and ``queue_limit`` waiting, each waiting at most ``wait_s``."""

    def __init__(self, workers: int, queue_limit: int, wait_s: float) -> None:
        self._slots = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self._waiting = 0
        self.queue_limit, self.wait_s = queue_limit, wait_s
        self.refused = 0  # 503s given (for tests and the log)
        self.abandoned = 0  # requests whose client left before their turn

    @contextmanager
    def slot(self, sock: socket.socket | None = None):
        """Hold one worker slot; Busy when the queue is full or the wait times out, ClientGone when ``sock``
        was closed by the client while waiting."""
        with self._lock:
            if self._waiting >= self.queue_limit:
                self.refused += 1
                raise Busy(f"busy: {self.queue_limit} requests already waiting; try again shortly")
            self._waiting += 1
        try:
            got = self._slots.acquire(timeout=self.wait_s)
        finally:
            with self._lock:
                self._waiting -= 1
        if not got:
            with self._lock:
                self.refused += 1
            raise Busy(f"busy: no worker free within {self.wait_s:g} s; try again shortly")
        try:
            if sock is not None and client_gone(sock):
                with self._lock:
                    self.abandoned += 1
                raise ClientGone
            yield
        finally:
            self._slots.release()
