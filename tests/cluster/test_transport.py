"""orksync.cluster.transport against servers on 127.0.0.1 that answer with scripted bytes:
the three ways an answer's body ends, keep-alive and when a connection is not reused, a
connection the server closed while idle, one deadline for the whole attempt, the errors
(whether the request may have been sent, what was wrong), and streamed answers. TLS against
the real API server: tests/cluster/test_kubeconfig_cluster.py and
tests/sync/test_faults_cluster.py."""

from __future__ import annotations

import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from orksync.cluster.transport import (
    USER_AGENT,
    AnswerTimeout,
    BadAnswer,
    ConnectFailed,
    ConnectionLost,
    Pool,
)

Action = bytes | Callable[[socket.socket], None]
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class Server:
    """Answers each request with the next action: bytes to send, or a function given the
    connection's socket. Keeps what each connection received (`requests`, per accepted
    connection in order)."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = list(actions)
        self.requests: list[list[bytes]] = []
        self.closed = threading.Event()  # set when a connection handler ends
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.requests.append([])
                seen = self.requests[-1]
            threading.Thread(target=self._serve, args=(conn, seen), daemon=True).start()

    def _serve(self, conn: socket.socket, seen: list[bytes]) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                while len(buf) < length:
                    buf += conn.recv(65536)
                seen.append(head + b"\r\n\r\n" + buf[:length])
                buf = buf[length:]
                with self.lock:
                    action = self.actions.pop(0)
                if callable(action):
                    action(conn)
                else:
                    conn.sendall(action)
        except OSError:
            return
        finally:
            conn.close()
            self.closed.set()

    def close(self) -> None:
        # close() alone leaves the thread blocked in accept() listening on the port, where
        # it took a connection meant for a later test's server
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()


@contextmanager
def serving(*actions: Action) -> Iterator[Server]:
    server = Server(list(actions))
    try:
        yield server
    finally:
        server.close()


def close_after(data: bytes) -> Action:
    def act(conn: socket.socket) -> None:
        conn.sendall(data)
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()
    return act


def in_pieces(*pieces: bytes, pause: float = 0.02, sent: list[bytes] | None = None) -> Action:
    """The pieces with a pause after each; `sent` collects those sent before the client
    closed the connection (a send after that fails and ends the answer)."""
    def act(conn: socket.socket) -> None:
        for piece in pieces:
            conn.sendall(piece)
            if sent is not None:
                sent.append(piece)
            time.sleep(pause)
    return act


def test_a_request_says_host_agent_and_length_and_a_kept_connection_serves_the_next() -> None:
    with serving(OK, OK, OK) as server:
        pool = Pool(server.url() + "/prefix/")
        assert pool.prefix == "/prefix"
        first = pool.request("GET", "/api?x=1", None, {"Accept": "application/json"}, 5)
        assert (first.status, first.data, first.headers["content-type"]) == \
            (200, b"{}", "application/json")
        assert pool.request("PATCH", "/api/v1/x", b'{"a":1}',
                            {"Content-Type": "application/apply-patch+yaml"}, 5).data == b"{}"
        assert pool.request("POST", "/api/v1/y", None, {}, 5).status == 200
        pool.close()
    assert len(server.requests) == 1  # one connection for the three
    get, patch, post = server.requests[0]
    line, fields = head(get)
    assert line == "GET /api?x=1 HTTP/1.1" and get.endswith(b"\r\n\r\n")
    assert fields["host"] == f"127.0.0.1:{server.port}"
    assert (fields["user-agent"], fields["accept"]) == (USER_AGENT, "application/json")
    line, fields = head(patch)
    assert line == "PATCH /api/v1/x HTTP/1.1" and patch.endswith(b'\r\n\r\n{"a":1}')
    assert (fields["content-type"], fields["content-length"]) == \
        ("application/apply-patch+yaml", "7")
    assert head(post)[1]["content-length"] == "0"  # a POST has a body, if empty


def test_fixed_headers_are_sent_with_every_request_a_repeated_name_each_time() -> None:
    """Impersonated groups: one Impersonate-Group line per group."""
    with serving(OK, OK) as server:
        pool = Pool(server.url(), headers=[("Impersonate-User", "jane"),
                                           ("Impersonate-Group", "a"),
                                           ("Impersonate-Group", "b")])
        pool.request("GET", "/", None, {}, 5)
        pool.request("GET", "/", None, {"Accept": "application/json"}, 5)
    for request in server.requests[0]:
        lines = request.decode("latin-1").split("\r\n")
        assert [x for x in lines if x.startswith("Impersonate-")] == \
            ["Impersonate-User: jane", "Impersonate-Group: a", "Impersonate-Group: b"]


def head(request: bytes) -> tuple[str, dict[str, str]]:
    """A request's first line and its header fields (names in lower case)."""
    lines = request.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return lines[0], fields


def test_answers_larger_than_one_receive_are_read_whole() -> None:
    """A LIST's answer of megabytes takes many reads; each way an answer ends still gives
    all of it."""
    big = bytes(range(256)) * 4096  # 1 MiB
    sized = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big)
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in
        (big[:300_000], big[300_000:700_000], big[700_000:])) + b"0\r\n\r\n"
    to_end = b"HTTP/1.0 200 OK\r\n\r\n" + big
    with serving(sized, chunked, close_after(to_end)) as server:
        pool = Pool(server.url())
        for _ in range(3):
            assert pool.request("GET", "/big", None, {}, 10).data == big
        pool.close()


def test_a_chunked_answer_with_extensions_and_trailers_arriving_in_pieces() -> None:
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
              b"5;ext=1\r\n{\"a\":", b"\r\n", b"1a\r\n 1, \"b\": \"xxxxxxxxxxxxxx\"}\r\n",
              b"0\r\nX-Trailer: t\r\n\r\n")
    with serving(in_pieces(*answer), OK) as server:
        pool = Pool(server.url())
        assert pool.request("GET", "/", None, {}, 5).data == \
            b'{"a": 1, "b": "xxxxxxxxxxxxxx"}'
        assert pool.request("GET", "/", None, {}, 5).data == b"{}"
    assert [len(r) for r in server.requests] == [2]  # kept after a chunked answer


@pytest.mark.parametrize("first", [
    close_after(b"HTTP/1.1 200 OK\r\n\r\n{\"until\": \"the end\"}"),  # no length: to the end
    b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",  # HTTP/1.0: not kept
    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
], ids=["until-closed", "http-1.0", "connection-close"])
def test_a_connection_that_may_not_serve_another_request_is_not_reused(first: Action) -> None:
    with serving(first, OK) as server:
        pool = Pool(server.url())
        data = pool.request("GET", "/", None, {}, 5).data
        assert data in (b"{}", b'{"until": "the end"}')
        assert pool.request("GET", "/", None, {}, 5).data == b"{}"
    assert [len(r) for r in server.requests] == [1, 1]


def test_a_blank_line_or_a_chunk_line_split_between_reads_is_found() -> None:
    head = in_pieces(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r", b"\n\r", b"\n{}")
    chunks = in_pieces(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r",
                       b"\n{}\r", b"\n0\r", b"\n\r", b"\n")
    with serving(head, chunks) as server:
        pool = Pool(server.url())
        assert pool.request("GET", "/", None, {}, 2).data == b"{}"
        assert pool.request("GET", "/", None, {}, 2).data == b"{}"


def test_an_interim_answer_is_skipped_and_a_204_has_no_body() -> None:
    early = b"HTTP/1.1 100 Continue\r\n\r\n"
    with serving(early + OK, b"HTTP/1.1 204 No Content\r\n\r\n", OK) as server:
        pool = Pool(server.url())
        assert pool.request("GET", "/", None, {}, 5).data == b"{}"
        none = pool.request("DELETE", "/", None, {}, 5)
        assert (none.status, none.data) == (204, b"")
        assert pool.request("GET", "/", None, {}, 5).data == b"{}"
    assert [len(r) for r in server.requests] == [3]


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error() -> None:
    with serving(close_after(OK), OK) as server:
        pool = Pool(server.url())
        assert pool.request("GET", "/", None, {}, 5).data == b"{}"
        assert server.closed.wait(5)
        time.sleep(0.05)  # the FIN reaches the client's socket
        assert pool.request("POST", "/", b"{}", {}, 5).data == b"{}"
    assert [len(r) for r in server.requests] == [1, 1]


def test_one_deadline_bounds_the_whole_answer_even_when_bytes_keep_coming() -> None:
    sent: list[bytes] = []
    body = [b"x"] * 200  # 10 s of answer at one byte per 0.05 s
    trickle = in_pieces(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", *body,
                        pause=0.05, sent=sent)
    with serving(trickle) as server:
        pool = Pool(server.url())
        with pytest.raises(AnswerTimeout, match=r"no complete answer within 0\.5s") as err:
            pool.request("GET", "/", None, {}, 0.5)
        assert err.value.sent
        # each byte came within any per-read timeout; the deadline is for all of it: the
        # client gave the answer up and closed the connection while bytes kept coming
        assert server.closed.wait(30)
        assert len(sent) < 1 + len(body)


def test_an_answer_cut_short_is_a_lost_connection_that_may_have_been_sent() -> None:
    cut = close_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial")
    with serving(cut, close_after(b"")) as server:
        pool = Pool(server.url())
        with pytest.raises(ConnectionLost, match="closed the connection before") as err:
            pool.request("POST", "/", b"{}", {}, 5)
        assert err.value.sent
        with pytest.raises(ConnectionLost):  # closed without an answer
            pool.request("POST", "/", b"{}", {}, 5)


def test_a_refused_connection_was_never_sent() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    refused = re.escape(f"cannot connect to 127.0.0.1:{port}")
    with pytest.raises(ConnectFailed, match=refused) as err:
        Pool(f"http://127.0.0.1:{port}").request("POST", "/", b"{}", {}, 5)
    assert not err.value.sent


def test_a_failed_tls_handshake_was_never_sent() -> None:
    with serving() as server:  # speaks no TLS: the handshake fails or times out
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        with pytest.raises(ConnectFailed, match=r"TLS handshake with 127\.0\.0\.1") as err:
            Pool(server.url("https"), tls=tls).request("GET", "/", None, {}, 0.5)
        assert not err.value.sent


@pytest.mark.parametrize(("answer", "problem"), [
    (b"HTTP/2 200 OK\r\n\r\n", "UnknownProtocol"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "BadStatusLine"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk length"),
])
def test_what_is_not_an_http_answer_is_a_bad_answer(answer: bytes, problem: str) -> None:
    with serving(answer) as server, pytest.raises(BadAnswer, match=re.escape(problem)):
        Pool(server.url()).request("GET", "/", None, {}, 5)


def test_requests_at_once_each_get_a_connection_and_at_most_size_are_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    """The connections beyond `size` are closed after their request, as designed: nothing
    to warn about (urllib3 would log "Connection pool is full" for each)."""
    caplog.set_level(logging.DEBUG)
    together = threading.Barrier(4, timeout=10)

    def answer_when_all_four_are_under_way(conn: socket.socket) -> None:
        together.wait()
        conn.sendall(OK)
    with serving(*([answer_when_all_four_are_under_way] * 4)) as server:
        pool = Pool(server.url(), size=2)
        threads = [threading.Thread(target=pool.request, args=("GET", "/", None, {}, 5))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(server.requests) == 4 and pool.idle() == 2
        pool.close()
        assert pool.idle() == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    with serving(OK) as server, pytest.raises(ValueError, match="holds a line break"):
        Pool(server.url()).request("GET", "/", None,
                                   {"Authorization": "Bearer x\r\nX-Evil: 1"}, 5)
    assert server.requests == []


def test_an_ipv6_server_url_and_the_default_ports() -> None:
    assert Pool("http://[::1]:8080").authority == "[::1]:8080"
    assert Pool("https://example.test", tls=ssl.create_default_context()).authority == \
        "example.test"
    assert Pool("http://example.test:80").port == 80
    with pytest.raises(ValueError, match="needs a TLS context"):
        Pool("https://example.test")
    with pytest.raises(ValueError, match="not an http"):
        Pool("ftp://example.test")


def test_a_certificate_refusal_is_found_behind_causes_and_arguments_and_loops_end() -> None:
    """`Kube` gives up at once on a refused certificate, wherever it is in the error: as
    the cause (orksync's transport) or an argument of a cause; a chain that loops back
    ends."""
    from orksync.cluster.kube import _refused_certificate

    refused = ssl.SSLCertVerificationError(1, "certificate verify failed")
    caused = ConnectFailed("TLS handshake failed")
    caused.__cause__ = refused
    assert _refused_certificate(caused) is refused
    assert _refused_certificate(ConnectionLost("SSLError", OSError(refused))) is refused
    looped = ConnectionLost("a")
    looped.__cause__ = ValueError(looped)
    assert _refused_certificate(looped) is None


def test_a_stream_hands_over_each_piece_before_the_next_is_sent() -> None:
    """The server sends the second piece only after the client has read the first: a
    client that waited for the whole answer would never get it."""
    first_read = threading.Event()

    def watch(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"7\r\n{\"a\":1}\r\n")
        assert first_read.wait(10)
        conn.sendall(b"7\r\n{\"b\":2}\r\n0\r\n\r\n")
    with serving(watch) as server:
        pool = Pool(server.url())
        with pool.stream("GET", "/api/v1/pods?watch=1", {}, timeout=5, idle=10) as stream:
            assert stream.response.status == 200
            got = []
            for piece in stream:
                got.append(piece)
                first_read.set()
        assert got == [b'{"a":1}', b'{"b":2}']
        assert pool.idle() == 0  # a stream's connection is never kept
    assert server.requests[0][0].startswith(b"GET /api/v1/pods?watch=1 HTTP/1.1\r\n")


def test_a_silent_stream_times_out_and_a_cut_one_is_lost() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n"
    release = threading.Event()

    def silent(conn: socket.socket) -> None:
        conn.sendall(head)
        release.wait(10)
    with serving(silent, close_after(head)) as server:
        pool = Pool(server.url())
        stream = pool.stream("GET", "/", {}, timeout=5, idle=0.3)
        pieces = iter(stream)
        assert next(pieces) == b"{}"
        with pytest.raises(AnswerTimeout, match=r"nothing received within 0\.3s"):
            next(pieces)
        release.set()
        stream = pool.stream("GET", "/", {}, timeout=5, idle=5)
        with pytest.raises(ConnectionLost, match="before the answer was complete"):
            list(stream)


def test_a_refused_stream_is_read_whole_and_yields_nothing() -> None:
    gone = (b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\n"
            b"Content-Length: 20\r\n\r\n{\"reason\":\"Expired\"}")
    with serving(gone) as server:
        stream = Pool(server.url()).stream("GET", "/", {}, timeout=5, idle=5)
        assert (stream.response.status, stream.response.data) == (410, b'{"reason":"Expired"}')
        assert list(stream) == []


def test_a_stream_closed_from_another_thread_ends_without_an_error() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n"
    release = threading.Event()

    def silent(conn: socket.socket) -> None:
        conn.sendall(head)
        release.wait(30)
    with serving(silent) as server:
        stream = Pool(server.url()).stream("GET", "/", {}, timeout=5, idle=60)
        pieces = iter(stream)
        assert next(pieces) == b"{}"
        closer = threading.Timer(0.2, stream.close)
        closer.start()
        assert list(pieces) == []  # the wait for more ends when the stream is closed
        closer.join()
        release.set()


def test_a_body_goes_as_utf8_json_and_a_lone_surrogate_as_the_replacement_character() -> None:
    from orksync.cluster.kube import encode_body

    assert encode_body({"a": "héllo 🚀"}) == '{"a":"héllo 🚀"}'.encode()
    assert encode_body({"a": "x\ud800y"}) == '{"a":"x\ufffdy"}'.encode()
