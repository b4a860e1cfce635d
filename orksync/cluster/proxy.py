"""HTTP proxies between orksync and the API server, chosen as kubectl (Go's net/http)
chooses them: a cluster's `proxy-url`, else the environment (`HTTPS_PROXY` for an https
server, `HTTP_PROXY` for an http one, upper case before lower case; `NO_PROXY` exceptions;
`localhost` and loopback addresses never go through a proxy from the environment).

An https server is reached through an HTTP CONNECT tunnel (TLS to the API server inside
it, so the proxy sees no request); an http server by sending each request to the proxy in
absolute form. The proxy itself is spoken to in plain HTTP (`http://` proxies; an
`https://` or `socks5://` proxy is refused with a clear error). User information in the
proxy URL becomes a Proxy-Authorization header (basic); it is never shown.
"""

from __future__ import annotations

import base64
import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["Proxy", "ProxyError", "TunnelRefused", "from_environment", "open_tunnel",
           "parse_proxy_url"]

ENVIRONMENT = {"https": ("HTTPS_PROXY", "https_proxy"), "http": ("HTTP_PROXY", "http_proxy")}
NO_PROXY = ("NO_PROXY", "no_proxy")
MAX_HEAD = 64 * 1024  # the proxy's answer to CONNECT, at most


class ProxyError(ValueError):
    """A proxy setting that cannot be used (the message never holds its password)."""


class TunnelRefused(Exception):
    """The proxy answered CONNECT with something other than 2xx, or not in HTTP."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proxy:
    """An http:// proxy: where it is and the Proxy-Authorization header to send it."""

    host: str
    port: int
    shown: str  # the URL without user information, for messages
    authorization: str | None = field(default=None, repr=False)


def parse_proxy_url(url: str) -> Proxy:
    """A proxy URL, as Go reads it (no scheme: http://). Raises ProxyError."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ProxyError("not a URL") from None
    scheme = parts.scheme.lower()
    if scheme in ("socks5", "socks5h", "https"):
        raise ProxyError(f"{scheme}:// proxies are not supported (only http:// ones)")
    if scheme != "http":
        raise ProxyError(f"scheme {scheme!r} is not a proxy scheme (http://)")
    if not parts.hostname:
        raise ProxyError("no host")
    host = parts.hostname
    shown_host = f"[{host}]" if ":" in host else host
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode()
    port = port or 80
    return Proxy(host=host, port=port, shown=f"http://{shown_host}:{port}",
                 authorization=authorization)


def from_environment(server: str, env: Mapping[str, str]) -> tuple[str, Proxy] | None:
    """The proxy the environment names for `server` (and the variable that named it), or
    None: no proxy variable for its scheme, or `NO_PROXY` exempts it, or it is localhost
    or a loopback address. Raises ProxyError naming the variable."""
    parts = urlsplit(server)
    scheme = parts.scheme.lower()
    name = next((n for n in ENVIRONMENT.get(scheme, ()) if env.get(n)), None)
    if name is None:
        return None
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    if _never_proxied(host):
        return None
    exempt = next((env[n] for n in NO_PROXY if env.get(n)), "")
    if exempt and _exempt(host, port, exempt):
        return None
    try:
        return name, parse_proxy_url(env[name])
    except ProxyError as err:
        raise ProxyError(f"{name}: {err}") from None


def _never_proxied(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exempt(host: str, port: int, no_proxy: str) -> bool:
    """Whether NO_PROXY exempts host:port, by Go's rules: `*` exempts everything; an IP
    address or CIDR range matches an address host; `example.com` matches it and its
    subdomains, `.example.com` (or `*.example.com`) its subdomains only; an entry with a
    port matches that port only."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            pass
        else:
            if address is not None and address in network:
                return True
            continue
        entry_host, entry_port = entry, ""
        if entry.startswith("["):  # [v6]:port
            entry_host, _, rest = entry[1:].partition("]")
            entry_port = rest.removeprefix(":")
        elif entry.count(":") == 1:
            entry_host, entry_port = entry.split(":")
        if entry_port and entry_port != str(port):
            continue
        try:
            entry_address = ipaddress.ip_address(entry_host)
        except ValueError:
            pass
        else:  # an address matches only that address
            if entry_address == address:
                return True
            continue
        if entry_host.startswith("*."):
            entry_host = entry_host[1:]
        if entry_host.startswith("."):
            if host.endswith(entry_host):
                return True
        elif host == entry_host or host.endswith("." + entry_host):
            return True
    return False


def open_tunnel(sock: socket.socket, proxy: Proxy, authority: str) -> None:
    """Ask the proxy on `sock` for a tunnel to `authority` (host:port) and read its answer
    (the socket's timeout bounds the wait). Raises TunnelRefused, or OSError."""
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise TunnelRefused("the proxy closed the connection before answering CONNECT")
        head += chunk
        if len(head) > MAX_HEAD:
            raise TunnelRefused("the proxy's answer to CONNECT is too long")
    answer, _, extra = head.partition(b"\r\n\r\n")
    status_line = answer.partition(b"\r\n")[0]
    words = status_line.decode("latin-1").split(" ", 2)
    if len(words) < 2 or not words[0].startswith("HTTP/1.") or not words[1].isdigit():
        raise TunnelRefused("the proxy's answer to CONNECT is not HTTP/1.x")
    if not 200 <= int(words[1]) < 300:
        reason = words[2].strip()[:100] if len(words) > 2 else ""
        raise TunnelRefused(f"the proxy refused the tunnel: {words[1]} {reason}".rstrip())
    if extra:
        raise TunnelRefused("the proxy sent data after its answer to CONNECT")
