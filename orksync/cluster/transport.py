"""HTTP/1.1 to one API server: a pool of keep-alive connections over `socket` and `ssl`;
answers parsed by llhttp (Node.js's HTTP parser, through `httptools`): framing, chunked
bodies, keep-alive rules, interim answers.

What orksync.cluster.kube needs of HTTP: a request with a small set of headers and a JSON
body, an answer read whole, connections kept for the next request; and, for watches, an
answer read as it arrives (`Pool.stream`); through an HTTP proxy when the kubeconfig or
the environment names one (orksync.cluster.proxy: a CONNECT tunnel to an https server).
Neither redirects (an answer like any other), compression nor pipelining.

Why not urllib3: importing it (with `http.client` and the `email` package under it) costs
a no-change `orksync apply`, a new process for a few requests, more than its requests.
Why not h11: a pure-Python parser, it cost several times this module's CPU per request
(docs/architecture.md). A request is a few formatted lines (its header values are checked
for line breaks); only answers need a parser.

Failures are TransportErrors, which say whether the request may have reached the server
(`sent`): a connection that was never made, or whose TLS handshake failed, carried none
of it, so any request may be sent again (orksync.cluster.retry decides the others).

Every attempt of `request` has one deadline for all of it: connecting, the handshake,
sending and the whole answer (not a timeout per read: a server that trickles bytes cannot
hold a request longer than the deadline). A stream has a deadline for its head and then a
bound on the silence between two reads.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import httptools

from orksync import __version__
from orksync.cluster.proxy import Proxy, TunnelRefused, open_tunnel

__all__ = ["AnswerTimeout", "BadAnswer", "ConnectFailed", "ConnectionLost",
           "InsecureRequestWarning", "Pool", "Response", "Stream", "TransportError"]

USER_AGENT = f"orksync/{__version__}"
MAX_HEAD = 256 * 1024  # the status line and headers of one answer, at most
# bytes asked of one recv. `recv` allocates them before it receives, then shrinks the
# buffer to what came; at or above glibc's mmap threshold (128 KiB) that is a fresh mapping,
# shrunk in place and later freed as a small one, so glibc never raises its threshold and
# every answer would cost an mmap, an mremap and a munmap. A TLS read returns one record,
# 16 KiB at most, anyway.
_RECV = 64 * 1024
_CUT_SHORT = "the server closed the connection before the answer was complete"
# methods whose request has a body by definition: sent with Content-Length even when empty
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class TransportError(Exception):
    """A request that got no complete answer. `sent`: whether the server may have
    received it (False only when no connection was made)."""

    sent = True


class ConnectFailed(TransportError):
    """No connection: refused, unreachable, timed out, or its TLS handshake failed (the
    certificate refused: `__cause__` is the ssl.SSLCertVerificationError)."""

    sent = False


class AnswerTimeout(TransportError):
    """The request was sent, and its answer was not complete before the deadline."""


class ConnectionLost(TransportError):
    """The connection was closed or reset before the answer was complete."""


class BadAnswer(TransportError):
    """What came back is not an HTTP/1.x answer this client can read."""


class InsecureRequestWarning(UserWarning):
    """An HTTPS connection whose server certificate is not verified
    (`insecure-skip-tls-verify`)."""


class Response:
    __slots__ = ("data", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.status = status
        self.headers = headers  # names in lower case
        self.data = data


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
        self.host = parts.hostname
        self.port = parts.port or default
        self.prefix = parts.path.rstrip("/")
        self.tls = tls if scheme == "https" else None
        self.server_name = server_name or self.host
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = shown if self.port == default else f"{shown}:{self.port}"
        self.size = size
        self.proxy = proxy
        # an http server through a proxy: requests name the whole URL (absolute form)
        self._origin = f"http://{self.authority}" if proxy and scheme == "http" else ""
        self._fixed = [_header_line(name, value) for name, value in headers]
        if self._origin and proxy is not None and proxy.authorization:
            self._fixed.append(_header_line("Proxy-Authorization", proxy.authorization))
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def request(self, method: str, target: str, body: bytes | None,
                headers: Mapping[str, str], timeout: float) -> Response:
        """One attempt: `target` is the path and query (the prefix is the caller's).
        Raises TransportError."""
        deadline = time.monotonic() + timeout
        message = self._message(method, target, body, headers)
        conn = self._take() or self._connect(deadline, timeout)
        try:
            conn.send(message, deadline, timeout)
            response = conn.answer(deadline, timeout)
        except BaseException:
            conn.close()
            raise
        if conn.reusable():
            self._give_back(conn)
        else:
            conn.close()
        return response

    def stream(self, method: str, target: str, headers: Mapping[str, str], *,
               timeout: float, idle: float) -> Stream:
        """Send a request whose answer is read as it arrives (a watch). The head must come
        within `timeout`; then each read may wait `idle` seconds. A stream's connection
        is its own, never reused. An answer that is not 2xx is read whole (within
        `timeout`) into `Stream.response.data`, and the stream is empty."""
        deadline = time.monotonic() + timeout
        message = self._message(method, target, None, headers)
        conn = self._connect(deadline, timeout)
        try:
            conn.send(message, deadline, timeout)
            head = conn.head(deadline, timeout)
            if not 200 <= head.status < 300:
                head.data = conn.body(deadline, timeout)
                conn.close()
        except BaseException:
            conn.close()
            raise
        return Stream(conn, head, idle)

    def _message(self, method: str, target: str, body: bytes | None,
                 headers: Mapping[str, str]) -> bytes:
        lines = [f"{method} {self._origin}{target} HTTP/1.1", f"Host: {self.authority}",
                 *self._fixed]
        if "User-Agent" not in headers:
            lines.append(f"User-Agent: {USER_AGENT}")
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} holds a line break")
            lines.append(f"{name}: {value}")
        if body is not None or method in _BODY_METHODS:
            lines.append(f"Content-Length: {len(body) if body is not None else 0}")
        lines.append("\r\n")
        message = "\r\n".join(lines).encode("latin-1")
        return message + body if body else message

    def close(self) -> None:
        """Close the idle connections (one in use is closed or kept when it is done)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _take(self) -> _Connection | None:
        """The most recently used idle connection the server has not closed."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, deadline: float, timeout: float) -> _Connection:
        where, proxy, tls = self.authority, self.proxy, self.tls
        address = (self.host, self.port) if proxy is None else (proxy.host, proxy.port)
        if proxy is not None:
            where = f"{where} through the proxy {proxy.shown}"
        try:
            sock = socket.create_connection(address, timeout=_remaining(deadline))
        except TimeoutError as err:
            raise ConnectFailed(f"cannot connect to {where} within {timeout}s") from err
        except OSError as err:
            raise ConnectFailed(f"cannot connect to {where}: {_reason(err)}") from err
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None and tls is not None:
                sock.settimeout(_remaining(deadline))
                shown = f"[{self.host}]" if ":" in self.host else self.host
                open_tunnel(sock, proxy, f"{shown}:{self.port}")
            if tls is not None:
                if tls.verify_mode == ssl.CERT_NONE:
                    warnings.warn(f"Unverified HTTPS request to {where}: its certificate is "
                                  "not checked (insecure-skip-tls-verify)",
                                  InsecureRequestWarning, stacklevel=4)
                sock.settimeout(_remaining(deadline))
                sock = tls.wrap_socket(sock, server_hostname=self.server_name)
        except TunnelRefused as err:
            sock.close()
            raise ConnectFailed(f"no tunnel to {where}: {err}") from err
        except TimeoutError as err:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {where} not done within "
                                f"{timeout}s") from err
        except (ssl.SSLError, OSError, ValueError) as err:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {where} failed: {_reason(err)}") \
                from err
        return _Connection(sock)


class _Answer:
    """The parser's callbacks: one answer's head and body as they are parsed. Interim
    answers (1xx) are parsed and dropped; `extra` is set when bytes follow the answer."""

    __slots__ = ("complete", "extra", "headers", "keep_alive", "parser", "parts", "started",
                 "status")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.started = False  # the head of the final answer is complete
        self.complete = False
        self.extra = False
        self.status = 0
        self.keep_alive = False
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []

    def on_message_begin(self) -> None:
        if self.complete:
            self.extra = True
        self.headers = {}
        self.parts = []

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.started = not 100 <= self.status < 200
        self.keep_alive = self.parser.should_keep_alive()  # known once the head is parsed

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        if self.started:
            self.complete = True

    def take_body(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data

    def ends_with_connection(self) -> bool:
        """The body is delimited by the end of the connection (no length, not chunked)."""
        return self.started and "content-length" not in self.headers and \
            "chunked" not in self.headers.get("transfer-encoding", "").lower()


class _Connection:
    """One socket and the answer being read on it."""

    __slots__ = ("ended", "reading", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reading = _Answer()
        self.ended = False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def usable(self) -> bool:
        """Idle and still open: nothing to read (an idle connection that is readable was
        closed by the server, or holds bytes nobody asked for)."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return False
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def reusable(self) -> bool:
        """After a whole answer: may this connection serve the next request? (Then it is
        made ready for it.)"""
        answer = self.reading
        keep = answer.complete and answer.keep_alive and not answer.extra and not self.ended
        self.reading = _Answer()
        return keep

    def send(self, message: bytes, deadline: float, timeout: float) -> None:
        try:
            self.sock.settimeout(_remaining(deadline))
            self.sock.sendall(message)
        except TimeoutError as err:
            raise AnswerTimeout(f"the request was not sent within {timeout}s") from err
        except OSError as err:
            raise ConnectionLost(f"connection lost while sending: {_reason(err)}") from err

    def answer(self, deadline: float, timeout: float) -> Response:
        """The whole answer."""
        response = self.head(deadline, timeout)
        response.data = self.body(deadline, timeout)
        return response

    def head(self, deadline: float, timeout: float) -> Response:
        """The status and headers (interim answers skipped)."""
        while not self.reading.started:
            self._receive(deadline, timeout, "no complete answer")
        return Response(self.reading.status, self.reading.headers, b"")

    def body(self, deadline: float, timeout: float) -> bytes:
        """The rest of the answer after `head`, whole."""
        while not self.reading.complete:
            self._receive(deadline, timeout, "no complete answer")
        return self.reading.take_body()

    def _receive(self, deadline: float, timeout: float, late: str) -> None:
        """Receive once (waiting until `deadline`) and parse what came."""
        try:
            self.sock.settimeout(_remaining(deadline))
            chunk = self.sock.recv(_RECV)
        except TimeoutError as err:
            raise AnswerTimeout(f"{late} within {timeout}s") from err
        except OSError as err:
            raise ConnectionLost(f"connection lost while reading the answer: "
                                 f"{_reason(err)}") from err
        answer = self.reading
        if not chunk:
            self.ended = True
            if answer.ends_with_connection():
                answer.complete = True
                return
            raise ConnectionLost(_CUT_SHORT)
        try:
            answer.parser.feed_data(chunk)
        except httptools.HttpParserError as err:
            if answer.status == 101:  # llhttp stops there, as it must for an upgrade
                raise BadAnswer("101 Switching Protocols: no upgrade was asked for") from None
            raise BadAnswer(f"not an HTTP/1.x answer this client reads: {err}") from None


class Stream:
    """An answer read as it arrives: iterate for its body's bytes, as they come. Ends
    with the answer; a silence longer than `idle` is an AnswerTimeout, a cut a
    ConnectionLost. `close` ends it early (from any thread)."""

    def __init__(self, conn: _Connection, response: Response, idle: float) -> None:
        self.response = response
        self._conn = conn
        self._idle = idle
        self._closed = not 200 <= response.status < 300

    def __iter__(self) -> Iterator[bytes]:
        answer = self._conn.reading
        while not self._closed:
            if answer.parts:
                yield answer.take_body()
            elif answer.complete:
                self.close()
            else:
                try:
                    self._conn._receive(time.monotonic() + self._idle, self._idle,
                                        "nothing received")
                except TransportError:
                    if self._closed:  # closed by another thread while it waited: the end
                        return
                    raise

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._conn.sock.shutdown(socket.SHUT_RDWR)
        self._conn.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _header_line(name: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name} holds a line break")
    return f"{name}: {value}"


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _reason(err: BaseException) -> str:
    """An OS or TLS error in a few words, without ssl's source location."""
    if isinstance(err, ssl.SSLError):
        text = err.reason or (err.strerror if isinstance(err.strerror, str) else "") or ""
        if isinstance(err, ssl.SSLCertVerificationError) and err.verify_message:
            text = f"{text}: {err.verify_message}" if text else err.verify_message
        return text or type(err).__name__
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or type(err).__name__
