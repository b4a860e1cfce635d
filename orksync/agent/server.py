"""/healthz, /readyz, /metrics and the Git webhook (POST /hooks/git) over HTTP, in daemon
threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from orksync.agent import webhook

BODY_TIMEOUT = 10.0  # seconds a client may take to send a hook's body


def serve(address: str, registry: CollectorRegistry,
          ready: Callable[[], tuple[bool, str]],
          hook: Callable[[webhook.Headers, bytes, str], webhook.Verdict] | None = None,
          sync_hook: Callable[[str, str, webhook.Headers, bytes, str], webhook.Verdict]
          | None = None) -> ThreadingHTTPServer:
    """Start serving on `host:port` (port 0 picks a free one); returns the running server.
    `hook(headers, body, client)` answers POST /hooks/git; `sync_hook(namespace, name,
    headers, body, client)` POST /hooks/git/<namespace>/<name> (a Sync's); without them
    those paths are 404."""
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            parts = path.removeprefix(webhook.PATH + "/").split("/") \
                if path.startswith(webhook.PATH + "/") else []
            if not ((path == webhook.PATH and hook is not None) or
                    (len(parts) == 2 and all(parts) and sync_hook is not None)):
                self._send(404, b"not found\n", "text/plain")
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self._send(411, b"Content-Length required\n", "text/plain")
                return
            if int(length) > webhook.MAX_BODY:
                self.close_connection = True  # the body is not read
                self._send(413, b"body too large\n", "text/plain")
                return
            self.connection.settimeout(BODY_TIMEOUT)
            try:
                body = self.rfile.read(int(length))
            except OSError:
                return
            if parts and sync_hook is not None:
                verdict = sync_hook(parts[0], parts[1], self.headers, body,
                                    self.client_address[0])
            else:
                assert hook is not None
                verdict = hook(self.headers, body, self.client_address[0])
            self._send(verdict.status, (verdict.message + "\n").encode(), "text/plain")

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
