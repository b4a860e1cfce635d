"""/healthz, /readyz, /metrics, the Git webhooks and the mounted web view over HTTP/1.1: an
asyncio server on a thread of its own, so that a connection costs a coroutine, not a
thread, and a burst of slow or forged clients cannot take the threads valid requests
need. Its bounds (the constants below) are stated in docs/operations.md, "Git webhooks"
and "The web view".
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from orksync.agent import webhook

log = logging.getLogger(__name__)

REQUEST_DEADLINE = 10.0  # seconds from a connection to its request read whole
MAX_HEADER_BYTES = 16 * 1024  # the request line and headers
MAX_CONNECTIONS = 512
BODY_BUDGET = 32 * 1024 * 1024  # hook bodies held at once, over all connections
BACKLOG = 1024  # connections the kernel queues before they are accepted
WORKERS = 4
MOUNT_WORKERS = 16  # the mounts' requests (the web view's streams among them) at once
WRITE_TIMEOUT = 30.0  # seconds a client may take to take one write of a mount's answer

Hook = Callable[[webhook.Headers, bytes, str], webhook.Verdict]
# a Sync's hook (POST /hooks/git/<namespace>/<name>): (namespace, name, headers, body, client)
SyncHook = Callable[[str, str, webhook.Headers, bytes, str], webhook.Verdict]
# answers a request under a mounted prefix: (the request handler, its method)
Mount = Callable[[BaseHTTPRequestHandler, str], None]
_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized",
            404: "Not Found", 411: "Length Required", 413: "Content Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}


class Server:
    """The running server: `server_address` (host, port) and `shutdown()`."""

    def __init__(self, registry: CollectorRegistry, ready: Callable[[], tuple[bool, str]],
                 hook: Hook | None, mounts: Mapping[str, Mount] | None = None,
                 sync_hook: SyncHook | None = None) -> None:
        self.registry = registry
        self.ready = ready
        self.hook = hook
        self.sync_hook = sync_hook
        self.mounts = dict(mounts or {})
        # a mounted request runs on a daemon thread of its own, at most MOUNT_WORKERS at
        # once: a stream that is still open when the agent stops does not hold its exit
        self.mount_slots = threading.BoundedSemaphore(MOUNT_WORKERS)
        self.closing = False  # set by `shutdown`: a mount's writes fail at once
        self.server_address: tuple[str, int] = ("", 0)
        self.loop = asyncio.new_event_loop()
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="orksync-http")
        self.connections = 0
        self.body_bytes = 0  # hook bodies held now (BODY_BUDGET)
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> None:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self._server = self.loop.run_until_complete(asyncio.start_server(
                    self._connection, host, port, backlog=BACKLOG, limit=MAX_HEADER_BYTES))
                sock = self._server.sockets[0].getsockname()
                self.server_address = (str(sock[0]), int(sock[1]))
            except BaseException as err:  # reported by `start`, in the caller's thread
                failure.append(err)
                started.set()
                return
            started.set()
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name="orksync-http", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            raise failure[0]

    def shutdown(self) -> None:
        """Stop accepting, close the open connections, end the thread."""
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        self.closing = True
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self.pool.shutdown(wait=False, cancel_futures=True)

    # --- one connection ------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            writer.close()
            return
        self.connections += 1
        held = 0
        try:
            async with asyncio.timeout(REQUEST_DEADLINE):  # the request, read whole
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, headers = _parse_head(head)
                answer: tuple[int, bytes, str] | bytes | None = None
                mount = self._mount_of(path)
                if mount is not None:
                    answer, held = await self._read_body(headers, reader)
                elif method == "POST":
                    answer, held = await self._read_hook(path, headers, reader)
                elif method not in ("GET", "HEAD"):
                    answer = (400, b"unsupported method\n", "text/plain")
            if mount is not None and isinstance(answer, bytes):
                if self.mount_slots.acquire(blocking=False):
                    await self._in_thread(mount, method, path, head, headers, answer,
                                          writer)
                    return
                answer = (503, b"busy\n", "text/plain")
            # the answer, computed by a worker thread (not bound by the deadline: it is
            # the server's time, not the client's)
            if answer is None:
                answer = await self.loop.run_in_executor(self.pool, self._get, path)
            elif isinstance(answer, bytes):
                client = str((writer.get_extra_info("peername") or ("",))[0])
                answer = await self.loop.run_in_executor(self.pool, self._hook, path,
                                                         headers, answer, client)
            _respond(writer, *answer, head_only=method == "HEAD")
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, ConnectionError):
            pass  # too slow, too long, cut or not HTTP: closed unanswered
        finally:
            self.body_bytes -= held
            self.connections -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _in_thread(self, *args: Any) -> None:
        """A mount's request on a daemon thread (holding one of `mount_slots`), awaited."""
        done = self.loop.create_future()

        def finished() -> None:
            if not done.done():
                done.set_result(None)

        def run() -> None:
            try:
                self._mounted(*args)
            finally:
                self.mount_slots.release()
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    self.loop.call_soon_threadsafe(finished)

        threading.Thread(target=run, name="orksync-http-mount", daemon=True).start()
        await done

    def _mount_of(self, path: str) -> Mount | None:
        path = path.split("?", 1)[0]
        for prefix, mount in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                return mount
        return None

    async def _read_body(self, headers: Message, reader: asyncio.StreamReader
                         ) -> tuple[tuple[int, bytes, str] | bytes, int]:
        """A mounted request's body (empty without `Content-Length`), or the answer that
        refuses it (too large, no room in the budget); the bytes it holds."""
        length = headers.get("Content-Length") or "0"
        if not length.isdigit():
            return (400, b"bad Content-Length\n", "text/plain"), 0
        size = int(length)
        if size > webhook.MAX_BODY:
            return (413, f"body larger than {webhook.MAX_BODY} bytes\n".encode(),
                    "text/plain"), 0
        if self.body_bytes + size > BODY_BUDGET:
            return (503, b"busy\n", "text/plain"), 0
        self.body_bytes += size
        return await reader.readexactly(size), size

    def _mounted(self, mount: Mount, method: str, path: str, head: bytes,
                 headers: Message, body: bytes, writer: asyncio.StreamWriter) -> None:
        """Run a mount's handler on this (pool) thread; what it writes goes to the
        connection as it writes it."""
        exchange = _Exchange.__new__(_Exchange)  # not its __init__: that serves a socket
        exchange.command, exchange.path = method, path
        exchange.request_version = "HTTP/1.1"
        exchange.requestline = head.split(b"\r\n", 1)[0].decode("latin-1")
        exchange.headers = headers
        exchange.rfile = io.BytesIO(body)
        exchange.wfile = _ConnectionWriter(self, writer)
        exchange.client_address = tuple(writer.get_extra_info("peername") or ("", 0))[:2]
        exchange.close_connection = True
        exchange.connection = _ReadAlready()
        try:
            mount(exchange, method)
        except OSError:
            pass  # the client went away, or took nothing for WRITE_TIMEOUT
        except Exception:  # the mount's bug: logged, this connection closed
            log.exception("%s %s failed", method, path.split("?", 1)[0])

    async def _read_hook(self, path: str, headers: Message, reader: asyncio.StreamReader
                         ) -> tuple[tuple[int, bytes, str] | bytes, int]:
        """A hook's body, or the answer that refuses it from its headers (no signature
        header, no or too large a Content-Length, no room in the budget); and the body
        bytes it holds from the budget."""
        if self._hook_of(path) is None:
            return (404, b"not found\n", "text/plain"), 0
        if headers.get("X-Hub-Signature-256") is None and \
                headers.get("X-Gitlab-Token") is None:
            return (401, b"no X-Hub-Signature-256 or X-Gitlab-Token header\n",
                    "text/plain"), 0
        length = headers.get("Content-Length")
        if length is None or not length.isdigit():
            return (411, b"Content-Length required\n", "text/plain"), 0
        size = int(length)
        if size > webhook.MAX_BODY:
            return (413, f"body larger than {webhook.MAX_BODY} bytes\n".encode(),
                    "text/plain"), 0
        if self.body_bytes + size > BODY_BUDGET:
            return (503, b"busy\n", "text/plain"), 0
        self.body_bytes += size
        return await reader.readexactly(size), size

    def _hook_of(self, path: str) -> Hook | None:
        """What answers a POST to `path`: the root's hook (/hooks/git) or a Sync's
        (/hooks/git/<namespace>/<name>); None: 404."""
        path = path.split("?", 1)[0]
        if path == webhook.PATH:
            return self.hook
        parts = path.removeprefix(webhook.PATH + "/").split("/") \
            if path.startswith(webhook.PATH + "/") else []
        sync_hook = self.sync_hook
        if sync_hook is None or len(parts) != 2 or not all(parts):
            return None
        namespace, name = parts
        return lambda headers, body, client: sync_hook(namespace, name, headers, body, client)

    def _hook(self, path: str, headers: Message, body: bytes,
              client: str) -> tuple[int, bytes, str]:
        hook = self._hook_of(path)
        assert hook is not None
        verdict = hook(headers, body, client)
        return verdict.status, (verdict.message + "\n").encode(), "text/plain"

    def _get(self, path: str) -> tuple[int, bytes, str]:
        if path == "/healthz":
            return 200, b"ok\n", "text/plain"
        if path == "/readyz":
            ok, why = self.ready()
            return 200 if ok else 503, (why + "\n").encode(), "text/plain"
        if path == "/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        return 404, b"not found\n", "text/plain"


class _Exchange(BaseHTTPRequestHandler):
    """A request handed to a mount: http.server's handler interface over a request this
    server read (see `Server._mounted`)."""

    def log_message(self, format: str, *args: object) -> None:
        return  # the web view's requests are not logged line by line


class _ReadAlready:
    """A mount's `connection`: the request was read whole within the server's deadline,
    so the socket timeouts a handler sets for its reads have nothing left to bound."""

    def settimeout(self, value: float | None) -> None:
        return None


class _ConnectionWriter(io.BufferedIOBase):
    """A mount's `wfile`: each write sent on the connection from the mount's thread,
    returning once the client took it (WRITE_TIMEOUT; OSError when it is gone)."""

    def __init__(self, server: Server, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self._server = server
        self._writer = writer

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        async def send() -> None:
            self._writer.write(bytes(data))
            await self._writer.drain()

        if self._server.closing:
            raise BrokenPipeError("the server is shutting down")
        future = asyncio.run_coroutine_threadsafe(send(), self._server.loop)
        try:
            future.result(WRITE_TIMEOUT)
        except TimeoutError:
            future.cancel()
            raise
        return len(data)


def _parse_head(head: bytes) -> tuple[str, str, Message]:
    """The method, the path and the headers (looked up without regard to case) of a
    request's head; ValueError when it is not HTTP/1.x."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x request line")
    headers = Message()
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ValueError("a malformed header line")
        headers[name] = value.strip()
    if headers.get("Transfer-Encoding") is not None:
        raise ValueError("chunked bodies are not accepted")  # Content-Length only
    return parts[0], parts[1], headers


def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str, *,
             head_only: bool = False) -> None:
    writer.write((f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                  f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                  "Connection: close\r\n\r\n").encode("latin-1"))
    if not head_only:
        writer.write(body)


def serve(address: str, registry: CollectorRegistry,
          ready: Callable[[], tuple[bool, str]], hook: Hook | None = None,
          mounts: Mapping[str, Mount] | None = None,
          sync_hook: SyncHook | None = None) -> Server:
    """Start serving on `host:port` (port 0 picks a free one); returns the running server.
    `hook(headers, body, client)` answers POST /hooks/git, `sync_hook(namespace, name,
    headers, body, client)` POST /hooks/git/<namespace>/<name> (a Sync's); without them
    those paths are 404.
    `mounts`: by path prefix (`/ui`), what answers the requests of that path and below
    (the web view, orksync.agent.ui)."""
    host, _, port = address.rpartition(":")
    server = Server(registry, ready, hook, mounts, sync_hook)
    server.start(host or "0.0.0.0", int(port or 8080))
    return server
