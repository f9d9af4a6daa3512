"""``python -m estimator serve``: a local sizing page backed by the same estimator as ``report``.

Routes (GET only):

* ``/`` — the page: a form (model, hardware, quant, context, KV dtype, devices, concurrency, offload, engine,
  serving request lengths and latency objective, language) and the report fragment for the current
  parameters.  Its small inline script only collects the form, calls ``/fragment`` and swaps in the
  server-rendered HTML; no sizing formula runs in JavaScript.
* ``/api/report?…`` — the JSON report, byte-for-byte what ``python -m estimator report --format json`` prints
  for the same options.
* ``/api/report.html?…`` and ``/fragment?…`` — the HTML report fragment rendered by ``estimator.render.html``.
* ``/healthz`` — ``ok``.

Malformed parameters, unknown ids and estimator input errors answer HTTP 400 with a one-line plain-text
message (unknown model / hardware ids name the nearest ids); an unexpected failure answers 500 with a one-line
message and the traceback goes to the server log only.  The server binds to 127.0.0.1 unless told otherwise
(``--host ::1`` binds IPv6).

Hardening (``estimator.app.guard``, docs/reliability.md): a ``Host`` header naming another host gets 403 (no
DNS rebinding); ``model=`` takes catalog ids and paths under ``--models-dir`` only; connections are capped
and must deliver their request within a deadline; reports are built by a bounded set of workers with a
bounded queue (503 beyond it), and not at all for a client that has gone away.  ``serve`` refuses privileged
ports (below 1024) and an address it cannot bind with exit 2 and one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from estimator.app.guard import (
    Busy,
    ClientGone,
    DeadlineReaper,
    Limits,
    ModelGate,
    WorkSlots,
    host_allowed,
    is_loopback,
)
from estimator.app.params import DEFAULTS, ParamError, ReportParams, parse_params  # noqa: F401 - re-exported
from estimator.render import i18n
from estimator.specs import SpecError

LOG = logging.getLogger("estimator.app.serve")

MAX_QUERY_CHARS = 2000


# The estimator call: params -> JSON report dict.  Set by ``make_server`` (tests may pass another function).
ReportFn = Callable[[ReportParams], dict]


def estimator_report(params: ReportParams) -> dict:
    """The report exactly as ``python -m estimator report --format json`` writes it: the same request API
    (``estimator.report.request.make_report``) and JSON form.  SpecError (unknown id, bad context, ...)
    propagates: the handler answers 400 with its message."""
    from estimator.report.document import report_to_dict
    from estimator.report.request import make_report

    return report_to_dict(make_report(params.request()))


class SizingHandler(BaseHTTPRequestHandler):
    """Request handler; ``server.report_fn`` and ``server.results_dir`` come from ``make_server``."""

    server_version = "fitbench-serve"
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.timeout = self.server.limits.header_timeout_s  # every socket read / write (StreamRequestHandler)
        super().setup()

    def handle_one_request(self) -> None:
        """One request; the whole request line and headers must arrive within the header deadline (the
        reaper shuts the socket otherwise), then the deadline is lifted for the work."""
        srv: SizingServer = self.server  # type: ignore[assignment]
        srv.reaper.arm(self.connection, srv.limits.header_timeout_s)
        try:
            super().handle_one_request()
        finally:
            srv.reaper.disarm(self.connection)

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.server.reaper.disarm(self.connection)  # type: ignore[attr-defined]
        return ok

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        LOG.info("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: str, content_type: str) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", f"{content_type}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        if content_type == "text/html":
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
                "connect-src 'self'; form-action 'self'; base-uri 'none'",
            )
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, message.splitlines()[0] if message else HTTPStatus(status).phrase, "text/plain")

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
        self.do_GET()

    def do_POST(self) -> None:  # noqa: N802
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "only GET is supported")

    def do_GET(self) -> None:  # noqa: N802
        srv: SizingServer = self.server  # type: ignore[assignment]
        if not host_allowed(self.headers.get("Host"), srv.bound_host):
            self._error(
                HTTPStatus.FORBIDDEN,
                f"host {self.headers.get('Host', '')[:100]!r} is not served here; use "
                f"http://{srv.url_host}:{srv.server_address[1]}/",
            )
            return
        try:
            self._route()
        except Busy as exc:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, str(exc))
        except ClientGone:
            self.close_connection = True  # nobody is listening: no work, no answer
        except (ParamError, SpecError, ValueError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")
        except Exception as exc:  # noqa: BLE001 - never send a traceback to the client
            LOG.exception("internal error on %s", self.path)
            self._error(
                HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error ({type(exc).__name__}); see server log"
            )

    def _route(self) -> None:
        if len(self.path) > MAX_QUERY_CHARS:
            raise ParamError(f"request too long (more than {MAX_QUERY_CHARS} characters)")
        url = urlsplit(self.path)
        try:
            query = parse_qs(url.query, keep_blank_values=True, strict_parsing=False, max_num_fields=50)
        except ValueError as exc:
            raise ParamError(f"malformed query string ({exc})") from None
        route = url.path.rstrip("/") or "/"
        srv: SizingServer = self.server  # type: ignore[assignment]
        if route == "/healthz":  # no worker needed: answers while reports are being built
            self._send(HTTPStatus.OK, "ok", "text/plain")
        elif route == "/":
            lang = (query.get("lang") or ["en"])[0]
            lang = lang if lang in i18n.LANGS else "en"
            with srv.slots.slot(self.connection):
                try:
                    params = parse_params(query)
                    fragment, error = srv.fragment(params), ""
                except (ParamError, SpecError, ValueError) as exc:  # the page still loads, saying why
                    params, fragment, error = None, "", f"{exc}".splitlines()[0]
                from estimator.app.page import page_html  # lazy: `python -m estimator report` never needs it

                page = page_html(params, lang, fragment, error)
            self._send(HTTPStatus.OK, page, "text/html")
        elif route == "/api/report":
            params = parse_params(query)
            with srv.slots.slot(self.connection):
                report = srv.report(params)
            self._send(
                HTTPStatus.OK, json.dumps(report, indent=2, ensure_ascii=False) + "\n", "application/json"
            )
        elif route in ("/api/report.html", "/fragment"):
            params = parse_params(query)
            with srv.slots.slot(self.connection):
                fragment = srv.fragment(params)
            self._send(HTTPStatus.OK, fragment, "text/html")
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such page {url.path!r}; try / or /api/report")


class SizingServer(ThreadingHTTPServer):
    """ThreadingHTTPServer holding the report function, where measured runs live, and the page's limits
    (``estimator.app.guard``)."""

    daemon_threads = True
    allow_reuse_address = True  # restart at once after Ctrl-C (Linux still refuses a port someone listens on)

    def __init__(
        self,
        address: tuple[str, int],
        report_fn: ReportFn,
        results_dir: Path | None,
        limits: Limits | None = None,
        models_dir: str | Path | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.request_queue_size = self.limits.backlog
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.bound_host = address[0]
        self.url_host = f"[{address[0]}]" if ":" in address[0] else address[0]
        self.reaper = DeadlineReaper()
        self.slots = WorkSlots(self.limits.workers, self.limits.queue_limit, self.limits.queue_wait_s)
        self.gate = ModelGate(models_dir)
        self._open = 0
        self._open_lock = threading.Lock()
        self.turned_away = 0  # connections answered 503 for being over the cap
        super().__init__(address, SizingHandler)
        self.report_fn = report_fn
        self.results_dir = results_dir

    def server_bind(self) -> None:
        """Bind without HTTPServer's reverse DNS lookup of the address (it can stall start-up)."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), port

    def server_close(self) -> None:
        super().server_close()
        self.reaper.stop()

    def process_request(self, request, client_address) -> None:
        """A thread per connection, at most ``limits.max_connections``; beyond it 503 at once."""
        with self._open_lock:
            full = self._open >= self.limits.max_connections
            if not full:
                self._open += 1
        if full:
            self.turned_away += 1
            _refuse_connection(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open -= 1

    def report(self, params: ReportParams) -> dict:
        """The report of ``params`` with its model checked by the gate (catalog ids, files under
        ``--models-dir``; anything else is the catalog's unknown-model error)."""
        model = self.gate.resolve(params.model)
        return self.report_fn(dataclasses.replace(params, model=model))

    def fragment(self, params: ReportParams) -> str:
        from estimator.report.document import to_fragment

        return to_fragment(self.report(params), params.lang, results_dir=self.results_dir)


def _refuse_connection(sock: socket.socket) -> None:
    body = b"busy: too many open connections; try again shortly"
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
    )
    try:
        sock.setblocking(False)
        sock.send(head.encode() + body)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        sock.close()


def make_server(
    host: str = "127.0.0.1",
    port: int = 8765,
    report_fn: ReportFn | None = None,
    results_dir: str | Path | None = "results/runs",
    limits: Limits | None = None,
    models_dir: str | Path | None = None,
) -> SizingServer:
    """Bind (port 0 picks a free port: read it from ``server.server_address``); does not start serving."""
    return SizingServer(
        (host, port),
        report_fn or estimator_report,
        Path(results_dir) if results_dir else None,
        limits,
        models_dir,
    )


def build_arg_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Arguments of ``serve`` (E3's CLI adds them to its ``serve`` subcommand with this function)."""
    p = parser or argparse.ArgumentParser(
        prog="python -m estimator serve", description=__doc__.splitlines()[0]
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 = any free port)")
    p.add_argument("--results", default="results/runs", help="measured runs shown beside estimates")
    p.add_argument(
        "--models-dir",
        default=None,
        help="folder whose config.json / .gguf files the page may size (model=<path inside it>); "
        "without it only catalog ids are accepted",
    )
    return p


def serve_main(args: argparse.Namespace) -> int:
    """Run the server until interrupted; exit code 2 with one line when the address cannot be bound."""
    if not 0 <= args.port <= 65535:
        print(f"error: --port must be between 0 and 65535, got {args.port}", file=sys.stderr)
        return 2
    if 0 < args.port < 1024:
        print(
            f"error: --port {args.port} is a privileged port (below 1024); use 1024-65535, or 0 for any free "
            "port",
            file=sys.stderr,
        )
        return 2
    if args.models_dir is not None and not Path(args.models_dir).is_dir():
        print(f"error: --models-dir {args.models_dir}: no such folder", file=sys.stderr)
        return 2
    try:
        server = make_server(args.host, args.port, results_dir=args.results, models_dir=args.models_dir)
    except (OSError, OverflowError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        print(f"error: cannot listen on {args.host}:{args.port} ({reason})", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    port = server.server_address[1]
    if not is_loopback(args.host):
        print(f"warning: listening on {args.host}, reachable from other machines", file=sys.stderr)
    print(f"fitbench sizing page on http://{server.url_host}:{port}/  (Ctrl+C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return serve_main(build_arg_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
