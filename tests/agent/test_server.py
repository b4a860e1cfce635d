"""The agent's HTTP server (orksync.agent.server) with real sockets on 127.0.0.1: valid
hooks are served under a burst of slow and forged clients; an unsigned or oversized hook
is refused from its headers, its body never read; a client too slow to send its request
is disconnected."""

from __future__ import annotations

import hashlib
import hmac
import socket
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from orksync.agent import server as http
from orksync.agent import webhook
from tests.helpers import wait_for

SECRET = b"s3cret-for-tests"
WAIT = 60.0  # a generous bound on any one socket operation: no timing is asserted


@pytest.fixture
def served() -> Iterator[tuple[int, list[str]]]:
    """A server whose hook verifies with SECRET; the port and the verdicts it gave."""
    verdicts: list[str] = []

    def hook(headers: webhook.Headers, body: bytes, client: str) -> webhook.Verdict:
        verdict = webhook.verify(SECRET, headers, body)
        verdicts.append(f"{verdict.status} {client}")
        return verdict

    server = http.serve("127.0.0.1:0", CollectorRegistry(), lambda: (True, "ok"), hook)
    try:
        yield server.server_address[1], verdicts
    finally:
        server.shutdown()


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def signed(body: bytes) -> bytes:
    digest = hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    return (f"POST /hooks/git HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n"
            f"X-Hub-Signature-256: sha256={digest}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


def still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
        sock.settimeout(WAIT)


def test_valid_hooks_are_all_served_under_a_burst_of_slow_and_forged_clients(
        served: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    # the slow ones stay for the test
    monkeypatch.setattr(http, "REQUEST_DEADLINE", 300.0, raising=False)
    port, _ = served
    slow: list[socket.socket] = []
    for i in range(200):  # half never end their headers, half never send their body
        sock = connect(port)
        if i % 2:
            sock.sendall(b"POST /hooks/git HTTP/1.1\r\nX-Gitlab-Token: x\r\n")
        else:
            sock.sendall(b"POST /hooks/git HTTP/1.1\r\nX-Gitlab-Token: x\r\n"
                         b"Content-Length: 1000\r\n\r\n" + b"{" * 10)
        slow.append(sock)
    results: list[bytes] = []
    lock = threading.Lock()

    def client(request: bytes) -> None:
        with connect(port) as sock:
            sock.sendall(request)
            got = answer(sock)
        with lock:
            results.append(got)

    body = b'{"ref": "refs/heads/main"}'
    forged = [b"POST /hooks/git HTTP/1.1\r\nX-Hub-Signature-256: sha256=00\r\n"
              b"Content-Length: 2\r\n\r\n{}"] * 100
    threads = [threading.Thread(target=client, args=(request,))
               for request in [signed(body)] * 100 + forged]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    statuses = [r.split(b" ", 2)[1] if r.startswith(b"HTTP/1.1 ") else r[:20] for r in results]
    assert statuses.count(b"202") == 100, statuses
    assert statuses.count(b"401") == 100, statuses
    assert sum(still_open(sock) for sock in slow) == 200  # held, and no valid hook waited
    for sock in slow:
        sock.close()


def test_an_unsigned_hook_is_refused_from_its_headers_and_its_body_never_read(
        served: tuple[int, list[str]]) -> None:
    port, verdicts = served
    with connect(port) as sock:  # announces 24 MB, sends none of it
        sock.sendall(b"POST /hooks/git HTTP/1.1\r\nContent-Length: 25165824\r\n\r\n")
        got = answer(sock)
    assert got.startswith(b"HTTP/1.1 401 "), got
    assert b"X-Hub-Signature-256" in got
    with connect(port) as sock:  # signed, but larger than a push payload can be
        sock.sendall(b"POST /hooks/git HTTP/1.1\r\nX-Hub-Signature-256: sha256=00\r\n"
                     b"Content-Length: %d\r\n\r\n" % (webhook.MAX_BODY + 1))
        got = answer(sock)
    assert got.startswith(b"HTTP/1.1 413 "), got
    with connect(port) as sock:  # no length: not read either
        sock.sendall(b"POST /hooks/git HTTP/1.1\r\nX-Gitlab-Token: x\r\n\r\n")
        assert answer(sock).startswith(b"HTTP/1.1 411 ")
    assert verdicts == []  # the hook was never called
    with connect(port) as sock:
        sock.sendall(signed(b"x" * webhook.MAX_BODY))  # the largest accepted
        assert answer(sock).startswith(b"HTTP/1.1 202 ")


def test_a_client_too_slow_to_send_its_request_is_disconnected(
        served: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "REQUEST_DEADLINE", 0.5, raising=False)
    port, verdicts = served
    with connect(port) as sock:  # one byte, then nothing: the deadline is for it all
        sock.sendall(b"P")
        assert answer(sock) == b""  # closed by the server, unanswered
    with connect(port) as sock:
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer(sock).endswith(b"\r\n\r\nok\n")
    assert verdicts == []


def test_connections_beyond_the_bound_are_closed_at_once(
        served: tuple[int, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_CONNECTIONS", 5, raising=False)
    monkeypatch.setattr(http, "REQUEST_DEADLINE", 300.0, raising=False)
    port, _ = served
    held = [connect(port) for _ in range(5)]
    for sock in held:
        sock.sendall(b"G")
    with connect(port) as sock:
        assert answer(sock) == b""  # the sixth: closed unanswered
    for sock in held:
        sock.close()

    def served_again() -> bool:
        with connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            return answer(sock).endswith(b"ok\n")

    wait_for("the server to count the closed connections out", served_again)


def test_a_mount_gets_the_body_and_its_answer_streams_to_the_client() -> None:
    """The web view's interface (http.server's handler): the posted body in `rfile`, each
    write to `wfile` sent as written (a live-update stream), and a stream still open when
    the server stops ends without holding it."""
    got: list[bytes] = []
    written = threading.Event()

    def mount(h: http.BaseHTTPRequestHandler, method: str) -> None:
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
            got.append(body)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body.upper())
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b"first\n")
        written.set()
        for _ in range(1000):  # until the client or the server goes away
            h.wfile.write(b": keep-alive\n")
            threading.Event().wait(0.05)

    server = http.serve("127.0.0.1:0", CollectorRegistry(), lambda: (True, "ok"),
                        mounts={"/ui": mount})
    port = server.server_address[1]
    with connect(port) as sock:
        sock.sendall(b"POST /ui/login HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
        assert answer(sock).endswith(b"\r\n\r\nHELLO")
    assert got == [b"hello"]
    stream = connect(port)
    stream.sendall(b"GET /ui/events HTTP/1.1\r\n\r\n")
    assert written.wait(WAIT)
    data = b""
    while b"first\n" not in data:  # sent while the handler still runs
        data += stream.recv(65536)
    server.shutdown()  # returns: the open stream holds nothing
    assert not any(t.name == "orksync-http" and t.is_alive() for t in threading.enumerate())
    stream.close()
