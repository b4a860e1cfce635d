"""orksync.egress against real HTTP servers on 127.0.0.1: the whole call bounded by its
timeout (a server that answers a byte at a time does not hold it), the answer read up to
its bound, no redirect followed, a refused connection an error and not an exception."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from orksync.egress import HttpEgress
from orksync.render.external import Request


def serve(handle: Callable[[socket.socket], None]) -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on 127.0.0.1 handing each connection to `handle`; yields its port and
    the requests it read (their first line)."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                seen.append(conn.recv(65536).split(b"\r\n", 1)[0])
                with contextlib.suppress(OSError):  # the client went away
                    handle(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1], seen
    stop.set()
    listener.close()


@pytest.fixture
def dripping() -> Iterator[tuple[int, list[bytes]]]:
    """Answers its head, then one byte of the body every 0.2 s, for ever."""
    def handle(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
        while True:
            conn.sendall(b"x")
            threading.Event().wait(0.2)
    yield from serve(handle)


@pytest.fixture
def big() -> Iterator[tuple[int, list[bytes]]]:
    def handle(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"y" * 100000)
    yield from serve(handle)


@pytest.fixture
def redirecting() -> Iterator[tuple[int, list[bytes]]]:
    def handle(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://10.0.0.1/secret\r\n"
                     b"Content-Length: 0\r\n\r\n")
    yield from serve(handle)


def test_a_server_that_answers_a_byte_at_a_time_is_cut_off_at_the_timeout(
        dripping: tuple[int, list[bytes]]) -> None:
    port, seen = dripping
    response = HttpEgress().call(Request(method="GET", url=f"http://127.0.0.1:{port}/h",
                                         timeout=1.0))
    assert seen == [b"GET /h HTTP/1.1"]
    assert (response.status, response.error) == (0, "no complete answer within 1s")


def test_the_answer_is_read_up_to_its_bound(big: tuple[int, list[bytes]]) -> None:
    port, _ = big
    response = HttpEgress().call(Request(method="GET", url=f"http://127.0.0.1:{port}/",
                                         max_body=4096))
    assert (response.status, response.body, response.error) == (200, b"y" * 4096, "")


def test_a_redirect_is_an_answer_and_is_not_followed(
        redirecting: tuple[int, list[bytes]]) -> None:
    port, seen = redirecting
    response = HttpEgress().call(Request(method="GET", url=f"http://127.0.0.1:{port}/x"))
    assert response.status == 302 and seen == [b"GET /x HTTP/1.1"]


def test_a_refused_connection_is_an_error_not_an_exception() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    response = HttpEgress().call(Request(method="GET", url=f"http://127.0.0.1:{port}/"))
    assert response.status == 0 and response.error.startswith("ConnectionRefusedError")
