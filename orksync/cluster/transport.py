"""HTTP/1.1 to one API server through urllib3: its pool of keep-alive connections, its
CONNECT tunnel through a proxy, http.client's framing; answers read with one deadline.

What orksync.cluster.kube needs of HTTP: a request with a small set of headers and a JSON
body, an answer read whole, connections kept for the next request; and, for watches, an
answer read as it arrives (`Pool.stream`); through an HTTP proxy when the kubeconfig or the
environment names one (orksync.cluster.proxy chooses it). urllib3 follows no redirect and
retries nothing here (`retries=False`): the retry loop is orksync.cluster.kube's.

Failures are TransportErrors, which say whether the request may have reached the server
(`sent`). urllib3's exceptions do not say it reliably (a tunnel the proxy refused is a
ProtocolError, like a connection cut mid-answer), so the connection class records when a
connection is up (TCP, the proxy's tunnel and the TLS handshake done): a failure before
that carried no byte of the request, and any request may be sent again
(orksync.cluster.retry decides the others).

Every attempt of `request` has one deadline for all of it: connecting, the handshake,
sending and the whole answer (the body is read piece by piece, each read waiting at most
for what is left, so a server that trickles bytes cannot hold a request longer). A stream
has a deadline for its head and then a bound on the silence between two reads.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import ssl
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3 import exceptions as u3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from orksync import __version__
from orksync.cluster.proxy import Proxy

__all__ = ["AnswerTimeout", "BadAnswer", "ConnectFailed", "ConnectionLost", "Pool",
           "Response", "Stream", "TransportError"]

USER_AGENT = f"orksync/{__version__}"
_READ = 64 * 1024  # bytes asked of one read of an answer's body
_CUT_SHORT = "the server closed the connection before the answer was complete"


class TransportError(Exception):
    """A request that got no complete answer. `sent`: whether the server may have
    received it (False only when no connection was made)."""

    sent = True


class ConnectFailed(TransportError):
    """No connection: refused, unreachable, timed out, the proxy refused the tunnel, or
    the TLS handshake failed (the certificate refused: `__cause__` is or holds the
    ssl.SSLCertVerificationError)."""

    sent = False


class AnswerTimeout(TransportError):
    """The request was sent, and its answer was not complete before the deadline."""


class ConnectionLost(TransportError):
    """The connection was closed or reset before the answer was complete."""


class BadAnswer(TransportError):
    """What came back is not an HTTP/1.x answer this client can read."""


class Response:
    __slots__ = ("data", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self.status = status
        self.headers = headers  # case-insensitive names
        self.data = data


class _PoolFull(logging.Filter):
    """Drops urllib3's warning for a connection closed because the pool keeps `size`
    already: that is how the pool is meant to work (more requests at once than kept
    connections), not a fault to tell the user about."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Connection pool is full")


logging.getLogger("urllib3.connectionpool").addFilter(_PoolFull())


# --- when a request may have been sent ---------------------------------------------------

_attempt = threading.local()  # `up`: the connection of this thread's attempt is made


class _Tracked:
    """Marks the thread's attempt when its connection is up: made now (TCP, tunnel and
    handshake done) or taken from the pool already made."""

    sock: Any

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _attempt.up = True

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _attempt.up = True
        super().request(*args, **kwargs)  # type: ignore[misc]


class _Connection(_Tracked, HTTPConnection):
    pass


class _TLSConnection(_Tracked, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


class Pool:
    """Connections to the server of `url` (`http` or `https`, an optional path that
    prefixes every request: `prefix`). Thread-safe; keeps up to `size` idle connections
    (more are made when more requests are under way at once, and closed after). With
    `proxy`, every connection goes through it. `headers` are sent with every request (a
    name may repeat: impersonated groups). `tls` may be replaced (new credentials' client
    certificate): connections made after that use the new one."""

    def __init__(self, url: str, *, tls: ssl.SSLContext | None = None,
                 server_name: str | None = None, size: int = 16,
                 proxy: Proxy | None = None,
                 headers: Sequence[tuple[str, str]] = ()) -> None:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) server URL: {url!r}")
        if scheme == "https" and tls is None:
            raise ValueError("an https server needs a TLS context")
        default = 443 if scheme == "https" else 80
        self.scheme = scheme
        self.host = parts.hostname
        self.port = parts.port or default
        self.prefix = parts.path.rstrip("/")
        self.server_name = server_name or self.host
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = shown if self.port == default else f"{shown}:{self.port}"
        self.size = size
        self.proxy = proxy
        self._origin = f"{scheme}://{self.authority}"
        self._fixed = urllib3.HTTPHeaderDict()
        for name, value in headers:
            _check(name, value)
            self._fixed.add(name, value)
        self._repeats = len(headers) != len({name.lower() for name, _ in headers})
        self._tls = tls if scheme == "https" else None
        self._lock = threading.Lock()
        self._manager = self._new_manager()
        self._pool = self._server_pool(self._manager)

    def _server_pool(self, manager: urllib3.PoolManager) -> HTTPConnectionPool | None:
        """The manager's connection pool of the server, asked directly (a path as the
        target, no URL parsed per request); None for an http server through a proxy,
        whose requests name the whole URL (the manager's)."""
        if self.proxy is not None and self.scheme == "http":
            return None
        return manager.connection_from_host(self.host, self.port, self.scheme)

    @property
    def tls(self) -> ssl.SSLContext | None:
        return self._tls

    @tls.setter
    def tls(self, tls: ssl.SSLContext | None) -> None:
        """New connections use `tls`; idle ones made with the old context are closed."""
        with self._lock:
            old, self._tls = self._manager, tls
            self._manager = self._new_manager()
            self._pool = self._server_pool(self._manager)
        old.clear()

    def _new_manager(self, size: int | None = None) -> urllib3.PoolManager:
        options: dict[str, Any] = {"num_pools": 1, "maxsize": size or self.size,
                                   "block": False,
                                   "retries": False}
        if self._tls is not None:
            options["ssl_context"] = self._tls
            if self.server_name != self.host:
                options["server_hostname"] = self.server_name
        manager: urllib3.PoolManager
        if self.proxy is not None:
            proxy_headers = {"Proxy-Authorization": self.proxy.authorization} \
                if self.proxy.authorization else None
            manager = urllib3.ProxyManager(self.proxy.shown, proxy_headers=proxy_headers,
                                           **options)
        else:
            manager = urllib3.PoolManager(**options)
        manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
        return manager

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str] | urllib3.HTTPHeaderDict:
        """The request's headers after the fixed ones: a plain dict (cheaper for
        urllib3 to send) unless a fixed name repeats."""
        sent: dict[str, str] | urllib3.HTTPHeaderDict = \
            self._fixed.copy() if self._repeats else dict(self._fixed.items())
        if "User-Agent" not in headers:
            sent["User-Agent"] = USER_AGENT
        for name, value in headers.items():
            _check(name, value)
            sent[name] = value
        return sent

    def request(self, method: str, target: str, body: bytes | None,
                headers: Mapping[str, str], timeout: float) -> Response:
        """One attempt: `target` is the path and query (the prefix is the caller's).
        Raises TransportError."""
        deadline = time.monotonic() + timeout
        sent = self._headers(headers)
        with self._lock:
            manager, pool = self._manager, self._pool
        _attempt.up = False
        try:
            if pool is not None:
                resp = pool.urlopen(method, target, body=body, headers=sent,
                                    timeout=urllib3.Timeout(connect=timeout, read=timeout),
                                    preload_content=False, redirect=False, retries=False,
                                    assert_same_host=False)
            else:
                resp = manager.request(method, self._origin + target, body=body,
                                       headers=sent, preload_content=False, redirect=False,
                                       timeout=urllib3.Timeout(connect=timeout, read=timeout))
        except (u3.HTTPError, OSError, http.client.HTTPException) as err:
            raise self._failure(err, timeout, "no complete answer") from err
        try:
            data = _read_whole(resp, deadline)
        except (u3.HTTPError, OSError, http.client.HTTPException) as err:
            resp.close()
            resp.release_conn()
            raise self._failure(err, timeout, "no complete answer") from err
        resp.release_conn()
        return Response(resp.status, resp.headers, data)

    def stream(self, method: str, target: str, headers: Mapping[str, str], *,
               timeout: float, idle: float) -> Stream:
        """Send a request whose answer is read as it arrives (a watch). The head must come
        within `timeout`; then each read may wait `idle` seconds. A stream's connection
        is its own, never reused. An answer that is not 2xx is read whole (within
        `timeout`) into `Stream.response.data`, and the stream is empty."""
        deadline = time.monotonic() + timeout
        sent = self._headers(headers)
        with self._lock:  # its own connection: a manager of its own, cleared at the end
            manager = self._new_manager(size=1)
        _attempt.up = False
        try:
            resp = manager.request(method, self._origin + target, headers=sent,
                                   timeout=urllib3.Timeout(connect=timeout, read=timeout),
                                   preload_content=False, redirect=False)
            head = Response(resp.status, resp.headers, b"")
            if not 200 <= resp.status < 300:
                head.data = _read_whole(resp, deadline)
                manager.clear()
                return Stream(None, head, idle, self, manager)
            _set_timeout(resp, idle)
        except (u3.HTTPError, OSError, http.client.HTTPException) as err:
            manager.clear()
            raise self._failure(err, timeout, "no complete answer") from err
        return Stream(resp, head, idle, self, manager)

    def close(self) -> None:
        """Close the idle connections (one in use is closed or kept when it is done)."""
        with self._lock:
            manager = self._manager
        manager.clear()

    def idle(self) -> int:
        """Connections kept for the next request."""
        with self._lock:
            manager = self._manager
        return sum(_kept(pool) for pool in _pools(manager))

    def _where(self) -> str:
        where = self.authority
        if self.proxy is not None:
            where = f"{where} through the proxy {self.proxy.shown}"
        return where

    def _failure(self, err: BaseException, timeout: float, late: str, *,
                 sent: bool = False) -> TransportError:
        """The TransportError of what urllib3 or http.client raised (`sent`: the request
        is known to have gone out, as a stream's that is being read)."""
        where = self._where()
        up = sent or getattr(_attempt, "up", False)
        inner = _inner(err)
        if not up:  # nothing of the request left this process
            if isinstance(err, u3.ProxyError) or (self.proxy is not None and
                                                  _tunnel_refused(inner)):
                refused = str(inner).replace("Tunnel connection failed:",
                                             "the proxy refused the tunnel:")
                return ConnectFailed(f"no tunnel to {where}: {refused}")
            if self.proxy is not None and isinstance(inner, http.client.HTTPException):
                return ConnectFailed(f"no tunnel to {where}: the proxy's answer to CONNECT "
                                     f"is not HTTP/1.x")
            if self._tls is not None and isinstance(err, u3.SSLError | ssl.SSLError):
                return ConnectFailed(f"TLS handshake with {where} failed: {_reason(inner)}")
            if isinstance(err, u3.ConnectTimeoutError) and \
                    not isinstance(err, u3.NewConnectionError):
                text = f"cannot connect to {where} within {timeout}s" \
                    if self._tls is None else \
                    f"TLS handshake with {where} not done within {timeout}s"
                return ConnectFailed(text)
            if isinstance(inner, TimeoutError | u3.ReadTimeoutError | u3.ConnectTimeoutError) \
                    and self._tls is not None:
                return ConnectFailed(f"TLS handshake with {where} not done within {timeout}s")
            if self._tls is not None and isinstance(inner, ssl.SSLError):
                return ConnectFailed(f"TLS handshake with {where} failed: {_reason(inner)}")
            return ConnectFailed(f"cannot connect to {where}: {_reason(inner)}")
        if isinstance(err, u3.InvalidChunkLength | u3.InvalidHeader):
            return BadAnswer(f"not an HTTP/1.x answer this client reads: {err}")
        if isinstance(err, u3.ReadTimeoutError) or isinstance(inner, TimeoutError):
            return AnswerTimeout(f"{late} within {timeout}s")
        if isinstance(inner, http.client.IncompleteRead) and \
                isinstance(inner.__context__, ValueError) and \
                not str(inner.__context__).endswith("b''"):
            # http.client read a chunk size that is not one (an empty line: the end of
            # the connection, a cut below)
            return BadAnswer("not an HTTP/1.x answer this client reads: invalid chunk length")
        if isinstance(inner, http.client.IncompleteRead | http.client.RemoteDisconnected) \
                or (isinstance(err, u3.ProtocolError) and
                    "IncompleteRead" in str(err)):
            return ConnectionLost(_CUT_SHORT)
        if isinstance(inner, http.client.HTTPException) or isinstance(err, u3.DecodeError):
            return BadAnswer(f"not an HTTP/1.x answer this client reads: "
                             f"{type(inner).__name__}: {str(inner)[:100]}")
        return ConnectionLost(f"connection lost while reading the answer: {_reason(inner)}")


def _pools(manager: urllib3.PoolManager) -> list[HTTPConnectionPool]:
    return [manager.pools[key] for key in list(manager.pools.keys())]


def _kept(pool: HTTPConnectionPool) -> int:
    """Open connections in the pool's queue (the rest of its slots are None placeholders
    or connections closed)."""
    queue = pool.pool
    if queue is None:
        return 0
    with queue.mutex:
        return sum(1 for conn in queue.queue if conn is not None and conn.sock is not None)


class Stream:
    """An answer read as it arrives: iterate for its body's bytes, as they come. Ends
    with the answer; a silence longer than `idle` is an AnswerTimeout, a cut a
    ConnectionLost. `close` ends it early (from any thread)."""

    def __init__(self, resp: urllib3.BaseHTTPResponse | None, response: Response,
                 idle: float, pool: Pool, manager: urllib3.PoolManager) -> None:
        self.response = response
        self._manager = manager
        self._resp = resp
        self._idle = idle
        self._pool = pool
        self._closed = resp is None

    def __iter__(self) -> Iterator[bytes]:
        resp = self._resp
        while not self._closed and resp is not None:
            try:
                piece = resp.read1(_READ, decode_content=False)
            except (u3.HTTPError, OSError, http.client.HTTPException, ValueError,
                    AttributeError) as err:
                if self._closed:  # closed by another thread while it waited: the end
                    return
                if isinstance(err, ValueError | AttributeError):
                    raise ConnectionLost(f"connection lost: {err}") from err
                raise self._pool._failure(err, self._idle, "nothing received",
                                          sent=True) from err
            if piece:
                yield piece
            elif self._closed:
                return
            else:
                self.close()

    def lines(self) -> Iterator[bytes]:
        """The answer's body line by line (newline-separated JSON: watch events), each
        without its newline; blank lines skipped."""
        pending = b""
        for piece in self:
            pending += piece
            if b"\n" not in pending:
                continue
            *complete, pending = pending.split(b"\n")
            for line in complete:
                if line.strip():
                    yield line
        if pending.strip():
            yield pending

    def close(self) -> None:
        self._closed = True
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()  # wakes a read waiting in another thread
            with contextlib.suppress(Exception):
                resp.close()
        self._manager.clear()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _read_whole(resp: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
    """The body, read in pieces; each read waits at most until `deadline`."""
    parts: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise u3.ReadTimeoutError(None, "", "deadline")  # type: ignore[arg-type]
        _set_timeout(resp, left)
        piece = resp.read1(_READ, decode_content=False)
        if not piece:
            return b"".join(parts)
        parts.append(piece)


def _set_timeout(resp: urllib3.BaseHTTPResponse, seconds: float) -> None:
    conn = getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _check(name: str, value: str) -> None:
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name} holds a line break")


def _inner(err: BaseException) -> BaseException:
    """The error under urllib3's wrappers (its `reason`, an argument, the cause)."""
    seen = 0
    while seen < 8:
        seen += 1
        nxt = getattr(err, "reason", None) if isinstance(err, u3.HTTPError) else None
        if not isinstance(nxt, BaseException):
            nxt = next((a for a in err.args if isinstance(a, BaseException)), None)
        if nxt is None and isinstance(err, u3.HTTPError):
            nxt = err.__cause__ or err.__context__
        if not isinstance(nxt, BaseException) or nxt is err:
            return err
        err = nxt
    return err


def _tunnel_refused(err: BaseException) -> bool:
    return isinstance(err, OSError) and "Tunnel connection failed" in str(err)


def _reason(err: BaseException) -> str:
    """An OS or TLS error in a few words, without ssl's source location."""
    if isinstance(err, ssl.SSLError):
        text = err.reason or (err.strerror if isinstance(err.strerror, str) else "") or ""
        if isinstance(err, ssl.SSLCertVerificationError) and err.verify_message:
            text = f"{text}: {err.verify_message}" if text else err.verify_message
        return text or type(err).__name__
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    if isinstance(err, u3.NewConnectionError):
        return str(err).rpartition(": ")[2] or type(err).__name__
    return str(err) or type(err).__name__
