"""The HTTP calls of a live render (`external:`, orksync.render.external): the one place
orksync sends a request to a host other than the API server. I/O.

One request per call on a connection of its own (http.client): no redirect followed, no
proxy, at most `max_body` bytes of the answer read, and the whole call (connect, send,
the answer's head and body) bounded by its timeout: a watchdog shuts the socket down when
it passes, so a server that answers a byte at a time cannot hold a sync. Never raises: a
failure is the Response's `error`."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from orksync.render.external import Request, Response

__all__ = ["HttpEgress"]


class HttpEgress:
    """orksync.render.external.Egress over http and https (the system's CA roots)."""

    def __init__(self) -> None:
        self._tls: ssl.SSLContext | None = None

    def call(self, request: Request) -> Response:
        started = time.monotonic()
        parts = urlsplit(request.url)
        target = parts.path or "/"
        if parts.query:
            target += f"?{parts.query}"
        expired = threading.Event()
        conn: http.client.HTTPConnection | None = None

        def abort() -> None:
            expired.set()
            sock = conn.sock if conn is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(request.timeout, abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            if parts.scheme.lower() == "https":
                if self._tls is None:
                    self._tls = ssl.create_default_context()
                conn = http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                                   timeout=request.timeout,
                                                   context=self._tls)
            else:
                conn = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                                  timeout=request.timeout)
            conn.request(request.method, target, body=request.body or None,
                         headers=dict(request.headers))
            answer = conn.getresponse()
            body = answer.read(request.max_body)
            if expired.is_set():
                raise TimeoutError("timed out")
            return Response(status=answer.status, body=body,
                            seconds=time.monotonic() - started)
        except (OSError, http.client.HTTPException, ValueError) as err:
            why = f"no complete answer within {request.timeout:g}s" if expired.is_set() \
                else f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            return Response(error=why, seconds=time.monotonic() - started)
        finally:
            watchdog.cancel()
            if conn is not None:
                conn.close()
