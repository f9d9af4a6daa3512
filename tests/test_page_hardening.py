"""The local page under hostile or heavy use (issue 17: 4): Host-header check (DNS rebinding), ``model=``
limited to catalog ids and ``--models-dir`` (no disk probing), slow-header clients cut at a deadline, a
connection cap, a bounded worker pool with a bounded queue (503 beyond it), no work for clients that left,
IPv6, the loopback warning and refused ports.

Every client here talks to 127.0.0.1 (or ::1), bounded in count (at most 120 sockets) and time (seconds).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from estimator.app.guard import Limits, host_allowed, is_loopback
from estimator.app.serve import make_server


def fake_report(params) -> dict:
    return {"model": {"id": params.model}, "workload": {}, "hardware": {}, "quant": params.quant}


class Server:
    """A server on 127.0.0.1 (or ``host``) in a background thread, shut down at exit."""

    def __init__(self, report_fn=fake_report, host="127.0.0.1", **kw) -> None:
        self.server = make_server(host, 0, report_fn=report_fn, results_dir=None, **kw)
        self.port = self.server.server_address[1]
        self.host = host
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def get(self, path: str, headers: dict | None = None, timeout: float = 20) -> tuple[int, str]:
        req = urllib.request.Request(self.url(path), headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def raw(self, data: bytes) -> socket.socket:
        s = socket.create_connection((self.host, self.port), timeout=10)
        s.sendall(data)
        return s


def test_host_header_is_checked():
    with Server() as srv:
        assert srv.get("/healthz")[0] == 200  # urllib sends Host: 127.0.0.1:PORT
        assert srv.get("/healthz", {"Host": f"localhost:{srv.port}"})[0] == 200
        status, body = srv.get("/api/report", {"Host": "attacker.example"})
        assert status == 403 and "attacker.example" in body and "\n" not in body.strip()
        s = srv.raw(b"GET /healthz HTTP/1.0\r\n\r\n")  # no Host header at all: not a browser
        assert s.recv(100).split(b" ")[1] == b"200"
        s.close()
    assert host_allowed("[::1]:8765", "::1") and host_allowed("127.0.0.1", "127.0.0.1")
    assert not host_allowed("evil.example:8765", "127.0.0.1")
    assert host_allowed("192.168.1.5:8765", "0.0.0.0") and not host_allowed("rebind.example", "0.0.0.0")
    assert host_allowed("box.lan:8765", "box.lan")


def test_model_paths_outside_the_catalog_are_not_probed_or_parsed(tmp_path):
    probe = tmp_path / "probe"
    with Server() as srv:
        missing = srv.get(f"/api/report?model={probe}")
        probe.mkdir()
        (probe / "config.json").write_text("{not json")  # parsed, it would say 'not valid JSON'
        present = srv.get(f"/api/report?model={probe}")
        assert missing == present and missing[0] == 400 and "unknown model" in missing[1]
        for ref in ("/root/.ssh", "/etc/passwd", "/dev/zero.gguf", "x.json"):
            status, body = srv.get(f"/api/report?model={ref}")
            assert status == 400 and body.startswith(f"bad request: unknown model {ref!r}"), body
        assert srv.get("/api/report?model=qwen3-0.6b")[0] == 200


def test_models_dir_serves_files_inside_it_only(tmp_path):
    root = tmp_path / "models"
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "config.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (root / "link").symlink_to(outside)
    with Server(models_dir=root) as srv:
        ok = srv.get("/api/report?model=tiny")
        assert ok[0] == 200 and json.loads(ok[1])["model"]["id"] == str((root / "tiny").resolve())
        for ref in ("../outside", "link", str(outside), "tiny/../../outside", "nope"):
            status, body = srv.get(f"/api/report?model={ref}")
            assert status == 400 and "unknown model" in body, (ref, body)


def _slow_client(srv: Server, path: str = "/api/report?model=qwen3-0.6b") -> socket.socket:
    return srv.raw(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())


def _closed_by_server(s: socket.socket, within_s: float) -> bool:
    s.settimeout(within_s)
    try:
        data = s.recv(4096)
    except TimeoutError:
        return False
    except OSError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 408") or data.startswith(b"HTTP/1.1 400")


def test_slow_header_clients_are_cut_and_healthz_still_answers():
    calls = []

    def report(params):
        calls.append(params.model)
        return fake_report(params)

    limits = Limits(max_connections=64, header_timeout_s=1.5)
    with Server(report_fn=report, limits=limits) as srv:
        slow = [_slow_client(srv) for _ in range(40)]
        t0 = time.monotonic()
        assert srv.get("/healthz", timeout=5) == (200, "ok")
        assert time.monotonic() - t0 < 1.0  # answered while 40 connections hold partial headers
        assert all(_closed_by_server(s, 5.0) for s in slow)  # each cut at the deadline
        for s in slow:
            s.close()
        assert calls == []  # none of them got a report built


def test_clients_that_leave_get_no_work():
    calls = []
    gate = threading.Event()

    def report(params):
        calls.append(params.model)
        gate.wait(10)
        return fake_report(params)

    with Server(report_fn=report, limits=Limits(workers=1, queue_limit=20)) as srv:
        busy = threading.Thread(target=srv.get, args=("/api/report?model=qwen3-0.6b",))
        busy.start()
        while not calls:
            time.sleep(0.01)
        leavers = [srv.raw(b"GET /api/report?model=llama-3.1-8b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                   for _ in range(10)]  # fmt: skip
        time.sleep(0.3)  # all ten queued behind the busy worker
        for s in leavers:
            s.close()
        gate.set()
        busy.join(10)
        deadline = time.monotonic() + 10
        while srv.server.slots.abandoned < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert calls == ["qwen3-0.6b"] and srv.server.slots.abandoned == 10


def test_bounded_pool_answers_503_beyond_the_queue():
    gate = threading.Event()

    def report(params):
        gate.wait(10)
        return fake_report(params)

    limits = Limits(workers=2, queue_limit=3, queue_wait_s=10)
    with Server(report_fn=report, limits=limits) as srv:
        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(srv.get, "/api/report?model=qwen3-0.6b") for _ in range(10)]
            deadline = time.monotonic() + 10
            while srv.server.slots.refused < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
            gate.set()
            statuses = sorted(f.result()[0] for f in futures)
        assert statuses == [200] * 5 + [503] * 5
        status, body = srv.get("/healthz")
        assert status == 200


def test_connection_cap_answers_503():
    with Server(limits=Limits(max_connections=8, header_timeout_s=3)) as srv:
        held = [_slow_client(srv) for _ in range(8)]
        time.sleep(0.2)
        extra = srv.raw(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert extra.recv(200).startswith(b"HTTP/1.1 503")
        for s in [*held, extra]:
            s.close()
        assert srv.server.turned_away >= 1


def test_parallel_load_no_resets():
    with Server() as srv:

        def one(i):
            try:
                return srv.get("/api/report?model=qwen3-0.6b" if i % 2 else "/healthz", timeout=30)[0]
            except OSError as exc:  # a reset or a timeout
                return type(exc).__name__

        with ThreadPoolExecutor(100) as pool:
            results = list(pool.map(one, range(120)))
        assert set(results) <= {200, 503}, results
        assert srv.server.request_queue_size == 128


def test_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        srv = Server(host="::1")
    except OSError:
        pytest.skip("::1 cannot be bound here")
    with srv:
        assert srv.get("/healthz") == (200, "ok")


def test_loopback_names():
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.1")


def _serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "estimator", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_serve_127_0_0_2_has_no_remote_warning():
    p = _serve("--host", "127.0.0.2", "--port", "0")
    try:
        line = p.stdout.readline()
        assert "http://127.0.0.2:" in line
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    assert "reachable from other machines" not in err


def test_serve_refuses_privileged_port_and_port_in_use():
    p = subprocess.run([sys.executable, "-m", "estimator", "serve", "--port", "22"], capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    assert p.returncode == 2 and "privileged" in p.stderr and p.stderr.count("\n") == 1
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = str(taken.getsockname()[1])
        p = subprocess.run([sys.executable, "-m", "estimator", "serve", "--port", port], capture_output=True,
                           text=True, timeout=30)  # fmt: skip
        assert p.returncode == 2 and "cannot listen" in p.stderr and p.stderr.count("\n") == 1
    finally:
        taken.close()
    argv = [sys.executable, "-m", "estimator", "serve", "--port", "0", "--models-dir", "/nonexistent"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "--models-dir" in p.stderr
