"""/healthz, /readyz and /metrics over HTTP, in a daemon thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def serve(address: str, registry: CollectorRegistry,
          ready: Callable[[], tuple[bool, str]]) -> ThreadingHTTPServer:
    """Start serving on `host:port` (port 0 picks a free one); returns the running server."""
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(200, b"ok\n", "text/plain")
            elif self.path == "/readyz":
                ok, why = ready()
                self._send(200 if ok else 503, (why + "\n").encode(), "text/plain")
            elif self.path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes every few seconds are not worth a log line

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port or 8080)), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="orksync-http", daemon=True).start()
    return server
