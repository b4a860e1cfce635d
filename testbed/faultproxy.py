"""Test infrastructure: fault-injecting proxies on 127.0.0.1 between orksync and a real
kube-apiserver. Never used by the agent.

Two proxies, both real sockets, both started by the test that uses them:

* :class:`TcpFaultProxy` relays bytes (TLS passes through untouched: the apiserver's
  serving certificate names 127.0.0.1, so a kubeconfig pointing at the proxy verifies).
  Transport faults for the next connections it accepts: cut after N bytes in one
  direction, reset at once, stall (held open, nothing forwarded) until :meth:`release`;
  :meth:`refuse` closes the listening socket (connection refused) until :meth:`resume`.
* :class:`HttpFaultProxy` terminates TLS with a CA of its own, forwards every request to
  the apiserver with the client certificate it is given, and answers chosen requests
  with an injected status (429 with Retry-After, 500, 503, ...) or with no answer at all,
  either instead of forwarding them or after forwarding them (the request took effect,
  the answer was lost). Every request it saw is logged with a timestamp.

Both write a kubeconfig that points at them (:meth:`kubeconfig`); their counters
(`TcpFaultProxy.stats`) and log (`HttpFaultProxy.seen()`) say which faults were used.

    with HttpFaultProxy.for_control_plane(cp) as proxy:
        proxy.inject(429, method="GET", path=r"/configmaps$", retry_after="1")
        kube = Kube.from_kubeconfig(proxy.kubeconfig(tmp_path / "kubeconfig"))
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import http.server
import json
import re
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orksync.secrets import pki
from testbed.controlplane import kubeconfig_document, write_kubeconfig

if TYPE_CHECKING:
    from testbed.controlplane import ControlPlane

__all__ = ["Direction", "HttpFaultProxy", "Rule", "Seen", "TcpFaultProxy"]

_CHUNK = 65536
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                         "proxy-connection", "te", "trailer", "upgrade"})
_REASONS = {429: "TooManyRequests", 500: "InternalError", 502: "", 503: "ServiceUnavailable",
            504: "Timeout"}


def _abort(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees a reset, not an orderly end.

    SHUT_RD first: it wakes a thread blocked in recv() on this socket (close() alone
    would not, and the reset would wait for that recv) without sending a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


# --- TCP ---------------------------------------------------------------------------------


class Direction(Enum):
    UP = "client to server"
    DOWN = "server to client"


class _Plan(Enum):
    PASS = "pass"
    CUT = "cut"
    RESET = "reset"
    STALL = "stall"


@dataclass(slots=True)
class _Fault:
    plan: _Plan
    nbytes: int = 0
    direction: Direction = Direction.DOWN


@dataclass(slots=True)
class TcpStats:
    accepted: int = 0
    cut: int = 0  # cut after N bytes
    reset: int = 0  # reset at accept
    stalled: int = 0  # held without forwarding
    open: int = 0  # relayed connections currently open
    bytes_up: int = 0
    bytes_down: int = 0


class _Pair:
    """One relayed connection: client socket, upstream socket, the fault it carries."""

    def __init__(self, client: socket.socket, fault: _Fault) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        self.fault = fault
        self.counted = {Direction.UP: 0, Direction.DOWN: 0}
        self.lock = threading.Lock()
        self.closed = False

    def abort(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        _abort(self.client)
        if self.upstream is not None:
            _abort(self.upstream)


class TcpFaultProxy:
    """A byte relay 127.0.0.1:port → upstream with transport faults on command."""

    def __init__(self, upstream_host: str, upstream_port: int, *, port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._port = port
        self._listener: socket.socket | None = None
        self._faults: collections.deque[_Fault] = collections.deque()
        self._pairs: set[_Pair] = set()
        self._released = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.stats = TcpStats()
        self._ca_pem = b""
        self._cert_pem = b""
        self._key_pem = b""

    @classmethod
    def for_control_plane(cls, cp: ControlPlane) -> TcpFaultProxy:
        """A relay in front of `cp`'s kube-apiserver; :meth:`kubeconfig` uses its admin."""
        parts = urlsplit(cp.server)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 443)
        proxy._ca_pem, proxy._cert_pem, proxy._key_pem = \
            cp.ca_pem, cp.admin_cert_pem, cp.admin_key_pem
        return proxy

    # lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> TcpFaultProxy:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self._listener = _listen(self._port)
        self._port = self._listener.getsockname()[1]
        self._spawn(self._accept_loop, self._listener)

    def stop(self) -> None:
        self._stopping.set()
        self._released.set()
        self._close_listener()
        self.cut_all()
        for thread in self._threads:
            thread.join(5)

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._port}"

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the apiserver through this relay (its CA and admin user)."""
        write_kubeconfig(path, kubeconfig_document(self.url, self._ca_pem, self._cert_pem,
                                                   self._key_pem))
        return path

    # faults ---------------------------------------------------------------------------

    def cut_after(self, nbytes: int, *, direction: Direction = Direction.DOWN,
                  connections: int = 1, skip: int = 0) -> None:
        """Of the next connections, let `skip` through, then cut `connections` of them
        (reset both ends) once `nbytes` bytes went in `direction`."""
        self._queue(skip, connections, _Fault(_Plan.CUT, nbytes, direction))

    def reset(self, *, connections: int = 1, skip: int = 0) -> None:
        """Reset the next `connections` connections as soon as they are accepted."""
        self._queue(skip, connections, _Fault(_Plan.RESET))

    def stall(self, *, connections: int = 1, skip: int = 0) -> None:
        """Hold the next `connections` connections open without forwarding a byte, until
        :meth:`release` (then they are relayed) or the client gives up."""
        self._released.clear()
        self._queue(skip, connections, _Fault(_Plan.STALL))

    def release(self) -> None:
        self._released.set()

    def refuse(self) -> None:
        """Close the listening socket: new connections are refused until :meth:`resume`."""
        self._close_listener()

    def resume(self) -> None:
        """Listen again on the same port."""
        if self._listener is None:
            self._listener = _listen(self._port)
            self._spawn(self._accept_loop, self._listener)

    def cut_all(self) -> None:
        """Reset every open relayed connection now."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.abort()

    def clear(self) -> None:
        """Forget the faults not yet applied and release stalled connections."""
        with self._lock:
            self._faults.clear()
        self._released.set()

    def pending(self) -> int:
        with self._lock:
            return sum(1 for f in self._faults if f.plan is not _Plan.PASS)

    # internals ------------------------------------------------------------------------

    def _queue(self, skip: int, count: int, fault: _Fault) -> None:
        with self._lock:
            self._faults.extend([_Fault(_Plan.PASS)] * skip)
            self._faults.extend(_Fault(fault.plan, fault.nbytes, fault.direction)
                                for _ in range(count))

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"tcp-fault-proxy-{self._port}")
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by refuse() or stop()
            with self._lock:
                fault = self._faults.popleft() if self._faults else _Fault(_Plan.PASS)
                self.stats.accepted += 1
            if fault.plan is _Plan.RESET:
                _abort(client)
                self._count("reset")
                continue
            self._spawn(self._serve, _Pair(client, fault))

    def _count(self, name: str, delta: int = 1) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + delta)

    def _serve(self, pair: _Pair) -> None:
        with self._lock:
            self._pairs.add(pair)
            self.stats.open += 1
        try:
            if pair.fault.plan is _Plan.STALL:
                self._count("stalled")
                self._released.wait()
                if self._stopping.is_set():
                    return
            try:
                pair.upstream = socket.create_connection(self.upstream, timeout=5)
                pair.upstream.settimeout(None)
            except OSError:
                return
            down = threading.Thread(target=self._pump, args=(pair, Direction.DOWN),
                                    daemon=True)
            down.start()
            self._pump(pair, Direction.UP)
            down.join()
        finally:
            pair.abort()
            with self._lock:
                self._pairs.discard(pair)
                self.stats.open -= 1

    def _pump(self, pair: _Pair, direction: Direction) -> None:
        src, dst = (pair.client, pair.upstream) if direction is Direction.UP else \
            (pair.upstream, pair.client)
        assert dst is not None and src is not None
        cut = pair.fault.plan is _Plan.CUT and pair.fault.direction is direction
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            if cut and pair.counted[direction] + len(data) >= pair.fault.nbytes:
                data = data[:max(pair.fault.nbytes - pair.counted[direction], 0)]
                with contextlib.suppress(OSError):
                    dst.sendall(data)
                self._count("bytes_up" if direction is Direction.UP else "bytes_down",
                            len(data))
                self._count("cut")
                pair.abort()
                return
            pair.counted[direction] += len(data)
            try:
                dst.sendall(data)
            except OSError:
                pair.abort()
                return
            self._count("bytes_up" if direction is Direction.UP else "bytes_down", len(data))


# --- HTTP --------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Rule:
    """Answer matching requests with `status` (0: no answer, the connection is closed).

    `forward`: send the request to the apiserver first (it takes effect), then answer
    the fault. A rule matches `method` (any when None), the regex `path` searched in the
    request path without its query, and `body`, a string the request body must contain;
    it passes the first `skip` matches through and applies to the next `times` (forever
    when None)."""

    status: int
    method: str | None = None
    path: str | None = None
    body: str | None = None
    times: int | None = 1
    skip: int = 0
    retry_after: str | None = None
    forward: bool = False
    matched: int = 0
    applied: int = 0

    def take(self, method: str, path: str, body: bytes) -> bool:
        """Whether this rule applies to this request (and count it)."""
        if self.method is not None and self.method != method:
            return False
        if self.path is not None and not re.search(self.path, path):
            return False
        if self.body is not None and self.body.encode() not in body:
            return False
        if self.times is not None and self.applied >= self.times:
            return False
        self.matched += 1
        if self.matched <= self.skip:
            return False
        self.applied += 1
        return True


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the HTTP proxy received: when (monotonic), what, what it answered
    (0: no answer), whether that answer was injected, whether the apiserver got it.
    `body` is kept in memory for rules and assertions (it may hold a Secret's values:
    never print it)."""

    at: float
    method: str
    path: str
    query: str
    body: str
    status: int
    injected: bool
    forwarded: bool


@dataclass(slots=True)
class _Tls:
    directory: Path
    ca_pem: bytes
    upstream: ssl.SSLContext
    serving: ssl.SSLContext
    client_cert_pem: bytes = b""
    client_key_pem: bytes = b""


class HttpFaultProxy:
    """TLS-terminating HTTP proxy 127.0.0.1:port → the apiserver, injecting answers."""

    def __init__(self, upstream: str, *, upstream_ca_pem: bytes, client_cert_pem: bytes,
                 client_key_pem: bytes) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 443)
        self._tls = _make_tls(upstream_ca_pem, client_cert_pem, client_key_pem)
        self._rules: list[Rule] = []
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def for_control_plane(cls, cp: ControlPlane) -> HttpFaultProxy:
        return cls(cp.server, upstream_ca_pem=cp.ca_pem, client_cert_pem=cp.admin_cert_pem,
                   client_key_pem=cp.admin_key_pem)

    # lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> HttpFaultProxy:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        server = _Server(("127.0.0.1", 0), _Handler, self)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True,
                                        name="http-fault-proxy")
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        shutil.rmtree(self._tls.directory, ignore_errors=True)

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    @property
    def ca_pem(self) -> bytes:
        """The CA of the proxy's serving certificate (not the apiserver's)."""
        return self._tls.ca_pem

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this proxy: its CA; the same client certificate it forwards
        with (the proxy does not ask for one)."""
        write_kubeconfig(path, kubeconfig_document(self.url, self._tls.ca_pem,
                                                   self._tls.client_cert_pem,
                                                   self._tls.client_key_pem))
        return path

    # faults ---------------------------------------------------------------------------

    def inject(self, status: int, *, method: str | None = None, path: str | None = None,
               body: str | None = None, times: int | None = 1, skip: int = 0,
               retry_after: str | None = None, forward: bool = False) -> Rule:
        """Answer matching requests with `status` (see :class:`Rule`)."""
        rule = Rule(status=status, method=method, path=path, body=body, times=times,
                    skip=skip, retry_after=retry_after, forward=forward)
        with self._lock:
            self._rules.append(rule)
        return rule

    def drop(self, *, method: str | None = None, path: str | None = None,
             body: str | None = None, times: int | None = 1, skip: int = 0,
             forward: bool = True) -> Rule:
        """Close the connection without an answer (by default after forwarding: the
        request took effect, its answer is lost)."""
        return self.inject(0, method=method, path=path, body=body, times=times, skip=skip,
                           forward=forward)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def seen(self, *, method: str | None = None, path: str | None = None) -> list[Seen]:
        """The requests received so far (optionally only those matching)."""
        with self._lock:
            return [s for s in self._seen if (method is None or s.method == method)
                    and (path is None or re.search(path, s.path))]

    # internals (called by the handler threads) -----------------------------------------

    def _rule_for(self, method: str, path: str, body: bytes) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.take(method, path, body):
                    return rule
        return None

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self._seen.append(seen)

    def _forward(self, method: str, target: str, headers: dict[str, str],
                 body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPSConnection(*self.upstream, context=self._tls.upstream,
                                           timeout=60)
        try:
            conn.request(method, target, body=body or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()


def _make_tls(upstream_ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> _Tls:
    """The proxy's own CA and serving certificate (127.0.0.1, localhost), and the client
    context it forwards with; PEM files in a private temporary directory."""
    now = datetime.now(UTC)
    ca = pki.create_ca(common_name="orksync-fault-proxy-ca", now=now,
                       validity=timedelta(days=1))
    key = pki.generate_private_key()
    serving = pki.issue_certificate(ca, key, common_name="127.0.0.1", now=now,
                                    validity=timedelta(days=1), dns_names=("localhost",),
                                    ip_addresses=("127.0.0.1",),
                                    extended_usages=("server_auth",))
    directory = Path(tempfile.mkdtemp(prefix="orksync-fault-proxy-"))
    files = {"upstream-ca": upstream_ca_pem, "client-cert": cert_pem, "client-key": key_pem,
             "serving-cert": serving.pem, "serving-key": key.pem()}
    paths = {}
    for name, data in files.items():
        path = directory / f"{name}.pem"
        path.touch(mode=0o600)
        path.write_bytes(data)
        paths[name] = path
    upstream = ssl.create_default_context(cafile=str(paths["upstream-ca"]))
    upstream.load_cert_chain(str(paths["client-cert"]), str(paths["client-key"]))
    serving_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving_ctx.load_cert_chain(str(paths["serving-cert"]), str(paths["serving-key"]))
    return _Tls(directory=directory, ca_pem=ca.certificate.pem, upstream=upstream,
                serving=serving_ctx, client_cert_pem=cert_pem, client_key_pem=key_pem)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler],
                 proxy: HttpFaultProxy) -> None:
        self.proxy = proxy
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        # the handshake happens in the handler's thread, not in the accept loop
        return self.proxy._tls.serving.wrap_socket(sock, server_side=True,
                                                   do_handshake_on_connect=False), address


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        try:
            self.request.do_handshake()
        except (OSError, ssl.SSLError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the proxy's log is `HttpFaultProxy.seen()`."""

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        proxy = self.server.proxy
        received = time.monotonic()
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        rule = proxy._rule_for(self.command, parts.path, body)
        forwarded = rule is None or rule.forward
        answer: tuple[int, list[tuple[str, str]], bytes] | None = None
        if forwarded:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP_BY_HOP and k.lower() != "host"}
            answer = proxy._forward(self.command, self.path, headers, body)
        if rule is not None:
            status = rule.status
        else:
            assert answer is not None
            status = answer[0]
        seen = Seen(at=received, method=self.command, path=parts.path, query=parts.query,
                    body=body.decode("utf-8", "replace"), status=status,
                    injected=rule is not None, forwarded=forwarded)
        if rule is not None and rule.status == 0:
            proxy._record(seen)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.request.shutdown(socket.SHUT_RDWR)
            return
        if rule is not None:
            answer = _status_answer(rule)
        assert answer is not None
        status, headers_out, data = answer
        self.send_response(status)
        for name, value in headers_out:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        proxy._record(seen)


def _status_answer(rule: Rule) -> tuple[int, list[tuple[str, str]], bytes]:
    """A Kubernetes Status document for an injected answer."""
    doc = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": f"injected by the fault proxy: {rule.status}",
           "reason": _REASONS.get(rule.status, ""), "code": rule.status}
    headers = [("Content-Type", "application/json")]
    if rule.retry_after is not None:
        headers.append(("Retry-After", rule.retry_after))
    return rule.status, headers, json.dumps(doc).encode()
