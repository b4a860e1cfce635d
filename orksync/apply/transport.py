"""HTTP/1.1 to one API server: a pool of keep-alive connections over `socket` and `ssl`.

What orksync.apply.kube needs of HTTP and nothing more: a request with a small set of
headers and a JSON body, an answer read whole (`Content-Length`, chunked, or up to the
end of the connection), connections kept for the next request. Neither proxies (a
kubeconfig or environment that sets one goes to the `kubernetes` client, see
orksync.apply.kubeconfig) nor redirects (an answer like any other), compression,
pipelining or watches.

Why not urllib3: importing it (with `http.client` and the `email` package under it) was a
tenth of a no-change `orksync apply` of 1,000 objects, which starts a new process for a
few requests; and with it the client of a fresh apply of 1,000 objects took 0.77-0.90
CPU-s, against 0.43-0.52 with this module (its layers per request: the pool's settings,
headers in a case-insensitive mapping, the answer through `http.client`'s parser).
docs/performance.md, change 43, has the figures.

Failures are TransportErrors, which say whether the request may have reached the server
(`sent`): a connection that was never made, or whose TLS handshake failed, carried none
of it, so any request may be sent again (orksync.apply.retry decides the others).

Every attempt has one deadline for all of it: connecting, the handshake, sending and the
whole answer (not a timeout per read: a server that trickles bytes cannot hold a request
longer than the deadline).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Mapping
from urllib.parse import urlsplit

from orksync import __version__

__all__ = ["AnswerTimeout", "BadAnswer", "ConnectFailed", "ConnectionLost",
           "InsecureRequestWarning", "Pool", "Response", "TransportError"]

USER_AGENT = f"orksync/{__version__}"
MAX_HEAD = 256 * 1024  # the status line and headers of one answer, at most
_LONG_HEAD = f"the answer's headers are longer than {MAX_HEAD} bytes"
# bytes asked of one recv. `recv` allocates them before it receives, then shrinks the
# buffer to what came; at or above glibc's mmap threshold (128 KiB) that is a fresh mapping,
# shrunk in place and later freed as a small one, so glibc never raises its threshold and
# every answer cost an mmap, an mremap and a munmap (256 KiB did; docs/performance.md,
# change 47). A TLS read returns one record, 16 KiB at most, anyway.
_RECV = 64 * 1024
_NO_BODY = frozenset({204, 304})
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
    (more are made when more requests are under way at once, and closed after)."""

    def __init__(self, url: str, *, tls: ssl.SSLContext | None = None,
                 server_name: str | None = None, size: int = 16) -> None:
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
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def request(self, method: str, target: str, body: bytes | None,
                headers: Mapping[str, str], timeout: float) -> Response:
        """One attempt: `target` is the path and query (the prefix is the caller's).
        Raises TransportError."""
        deadline = time.monotonic() + timeout
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.authority}"]
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
        if body:
            message += body
        conn = self._take() or self._connect(deadline, timeout)
        try:
            response, reusable = conn.exchange(message, method, deadline, timeout)
        except BaseException:
            conn.close()
            raise
        if reusable:
            self._give_back(conn)
        else:
            conn.close()
        return response

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
        where = self.authority
        try:
            sock = socket.create_connection((self.host, self.port),
                                            timeout=_remaining(deadline))
        except TimeoutError as err:
            raise ConnectFailed(f"cannot connect to {where} within {timeout}s") from err
        except OSError as err:
            raise ConnectFailed(f"cannot connect to {where}: {_reason(err)}") from err
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                if self.tls.verify_mode == ssl.CERT_NONE:
                    warnings.warn(f"Unverified HTTPS request to {where}: its certificate is "
                                  "not checked (insecure-skip-tls-verify)",
                                  InsecureRequestWarning, stacklevel=4)
                sock.settimeout(_remaining(deadline))
                sock = self.tls.wrap_socket(sock, server_hostname=self.server_name)
        except TimeoutError as err:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {where} not done within "
                                f"{timeout}s") from err
        except (ssl.SSLError, OSError, ValueError) as err:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {where} failed: {_reason(err)}") \
                from err
        return _Connection(sock)


class _Connection:
    """One socket and what has been received on it and not yet read."""

    __slots__ = ("buf", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def usable(self) -> bool:
        """Idle and still open: nothing to read (an idle connection that is readable was
        closed by the server, or holds bytes nobody asked for)."""
        if self.buf or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return False
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def exchange(self, message: bytes, method: str, deadline: float, timeout: float
                 ) -> tuple[Response, bool]:
        """Send the request, read its answer: (answer, whether the connection may serve
        another request)."""
        try:
            self.sock.settimeout(_remaining(deadline))
            self.sock.sendall(message)
        except TimeoutError as err:
            raise AnswerTimeout(f"the request was not sent within {timeout}s") from err
        except OSError as err:
            raise ConnectionLost(f"connection lost while sending: {_reason(err)}") from err
        try:
            return self._answer(method, deadline)
        except TimeoutError as err:
            raise AnswerTimeout(f"no complete answer within {timeout}s") from err
        except OSError as err:
            raise ConnectionLost(f"connection lost while reading the answer: "
                                 f"{_reason(err)}") from err

    # --- reading the answer ---------------------------------------------------------------

    def _answer(self, method: str, deadline: float) -> tuple[Response, bool]:
        while True:
            head = self._head(deadline)
            status, version, headers = _parse_head(head)
            if not 100 <= status < 200:
                break  # an interim answer (103 Early Hints, ...) precedes the real one
            if status == 101:
                raise BadAnswer("101 Switching Protocols: no upgrade was asked for")
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in _NO_BODY:
            data = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            data = self._chunked(deadline)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise BadAnswer(f"Content-Length {headers['content-length']!r}") from None
            if length < 0:
                raise BadAnswer(f"Content-Length {length}")
            data = self._exactly(length, deadline)
        else:  # the answer ends with the connection
            while self._fill(deadline, allow_end=True):
                pass
            data = bytes(self.buf)
            self.buf.clear()
            keep = False
        return Response(status, headers, data), keep and not self.buf

    def _fill(self, deadline: float, *, allow_end: bool = False) -> bool:
        """Receive more; False at the end of the connection when `allow_end`."""
        self.sock.settimeout(_remaining(deadline))
        chunk = self.sock.recv(_RECV)
        if not chunk:
            if allow_end:
                return False
            raise ConnectionLost("the server closed the connection before the answer was "
                                 "complete")
        self.buf += chunk
        return True

    def _head(self, deadline: float) -> bytes:
        return self._until(b"\r\n\r\n", deadline, _LONG_HEAD)

    def _line(self, deadline: float) -> bytes:
        return self._until(b"\r\n", deadline, "a chunk header is too long")

    def _until(self, mark: bytes, deadline: float, too_long: str) -> bytes:
        """What comes before the next `mark` (which is taken too)."""
        start = 0
        while True:
            end = self.buf.find(mark, start)
            if end >= 0:
                data = bytes(self.buf[:end])
                del self.buf[:end + len(mark)]
                return data
            if len(self.buf) > MAX_HEAD:
                raise BadAnswer(too_long)
            start = max(0, len(self.buf) - len(mark) + 1)  # a mark split between reads
            self._fill(deadline)

    def _exactly(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            self._fill(deadline)
        with memoryview(self.buf) as view:  # one copy, not a slice and then a copy
            data = bytes(view[:n])
        del self.buf[:n]
        return data

    def _chunked(self, deadline: float) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self._line(deadline)
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise BadAnswer(f"chunk size {size_text[:20]!r}") from None
            if size < 0:
                raise BadAnswer(f"chunk size {size_text[:20]!r}")
            if size == 0:
                while self._line(deadline):  # trailers, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._exactly(size, deadline))
            if self._line(deadline):
                raise BadAnswer("a chunk is longer than its size")


def _parse_head(head: bytes) -> tuple[int, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if version not in ("HTTP/1.1", "HTTP/1.0") or not code.isdigit() or \
            rest[3:4] not in ("", " "):
        raise BadAnswer(f"not an HTTP/1.x status line: {lines[0][:40]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise BadAnswer(f"a header line without a name: {line[:40]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(code), version, headers


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
