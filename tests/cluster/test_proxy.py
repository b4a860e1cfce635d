"""orksync.cluster.proxy without a cluster: which proxy the environment names for a server
(Go's net/http rules, as kubectl applies them); and a tunnel the proxy refuses (through
orksync.cluster.transport, urllib3's CONNECT): no request was sent. A tunnel to the real
control plane: tests/cluster/test_credentials_cluster.py."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from orksync.cluster.proxy import Proxy, ProxyError, from_environment, parse_proxy_url
from orksync.cluster.transport import ConnectFailed, Pool


@pytest.mark.parametrize(("server", "env", "expected"), [
    ("https://api.example", {"HTTPS_PROXY": "http://p:1"}, "HTTPS_PROXY"),
    ("https://api.example", {"https_proxy": "http://p:1"}, "https_proxy"),
    ("https://api.example", {"HTTPS_PROXY": "http://p:1", "https_proxy": "http://q:1"},
     "HTTPS_PROXY"),
    ("https://api.example", {"HTTP_PROXY": "http://p:1"}, None),  # not for https
    ("http://api.example", {"HTTP_PROXY": "http://p:1"}, "HTTP_PROXY"),
    ("https://localhost:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://127.0.0.2:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://[::1]:6443", {"HTTPS_PROXY": "http://p:1"}, None),
    ("https://api.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
    ("https://api.example", {"HTTPS_PROXY": "http://p:1", "no_proxy": "api.example"}, None),
    ("https://x.api.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example"}, None),
    ("https://api.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".api.example"},
     "HTTPS_PROXY"),  # subdomains only
    ("https://x.api.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*.api.example"},
     None),
    ("https://notapi.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example"},
     "HTTPS_PROXY"),
    ("https://api.example:6443", {"HTTPS_PROXY": "http://p:1",
                                  "NO_PROXY": "api.example:443"}, "HTTPS_PROXY"),
    ("https://api.example:6443", {"HTTPS_PROXY": "http://p:1",
                                  "NO_PROXY": "other, api.example:6443"}, None),
    ("https://10.1.2.3", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, None),
    ("https://10.1.2.3", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.1.2.4"},
     "HTTPS_PROXY"),
    ("https://api.example", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"},
     "HTTPS_PROXY"),
])
def test_the_environment_names_a_proxy_as_go_reads_it(
        server: str, env: dict[str, str], expected: str | None) -> None:
    found = from_environment(server, env)
    assert (found[0] if found else None) == expected


def test_proxy_urls_as_go_reads_them_and_the_ones_refused() -> None:
    assert parse_proxy_url("proxy:3128") == Proxy(host="proxy", port=3128,
                                                  shown="http://proxy:3128")
    assert parse_proxy_url("http://[fd00::1]").shown == "http://[fd00::1]:80"
    with pytest.raises(ProxyError, match="https:// proxies are not supported"):
        parse_proxy_url("https://proxy:443")
    with pytest.raises(ProxyError, match="HTTPS_PROXY: socks5:// proxies are not supported"):
        from_environment("https://api.example", {"HTTPS_PROXY": "socks5://p:1080"})


@pytest.mark.parametrize(("answer", "message"), [
    (b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n",
     "the proxy refused the tunnel: 407 Proxy Authentication Required"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "no tunnel to api.example:6443"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "the proxy's answer to CONNECT is not HTTP/1.x"),
    # an empty tunnel: the handshake with the API server through it fails
    (b"HTTP/1.1 200 OK\r\n", "TLS handshake with api.example:6443 through the proxy"),
])
def test_a_tunnel_the_proxy_does_not_open_is_a_request_never_sent(
        answer: bytes, message: str) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    asked: list[bytes] = []

    def proxy() -> None:
        conn, _ = listener.accept()
        asked.append(conn.recv(4096))
        conn.sendall(answer)
        conn.close()

    thread = threading.Thread(target=proxy)
    thread.start()
    port = listener.getsockname()[1]
    pool = Pool("https://api.example:6443", tls=ssl.create_default_context(),
                proxy=parse_proxy_url(f"http://ann:pw@127.0.0.1:{port}"))
    with pytest.raises(ConnectFailed, match=message) as err:
        pool.request("POST", "/api/v1/namespaces", b"{}", {}, 10)
    thread.join()
    listener.close()
    assert not err.value.sent
    assert "pw" not in str(err.value) and "YW5uOnB3" not in str(err.value)
    line, _, rest = asked[0].partition(b"\r\n")
    assert line.startswith(b"CONNECT api.example:6443 HTTP/1.")
    assert b"Proxy-Authorization: Basic YW5uOnB3\r\n" in rest
