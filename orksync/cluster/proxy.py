"""HTTP proxies between orksync and the API server, chosen as kubectl (Go's net/http)
chooses them: a cluster's `proxy-url`, else the environment (`HTTPS_PROXY` for an https
server, `HTTP_PROXY` for an http one, upper case before lower case; `NO_PROXY` exceptions;
`localhost` and loopback addresses never go through a proxy from the environment).

Only the choice is made here: urllib3's ProxyManager speaks to the proxy
(orksync.cluster.transport), an HTTP CONNECT tunnel for an https server, requests in
absolute form for an http one. urllib3 reads no environment, and the `kubernetes` package's
NO_PROXY check knows neither CIDR ranges nor ports, hence Go's rules below. The proxy
itself is spoken to in plain HTTP (`http://` proxies; an `https://` or `socks5://` proxy is
refused with a clear error). User information in the proxy URL becomes a
Proxy-Authorization header (basic); it is never shown.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["Proxy", "ProxyError", "from_environment", "parse_proxy_url"]

ENVIRONMENT = {"https": ("HTTPS_PROXY", "https_proxy"), "http": ("HTTP_PROXY", "http_proxy")}
NO_PROXY = ("NO_PROXY", "no_proxy")


class ProxyError(ValueError):
    """A proxy setting that cannot be used (the message never holds its password)."""


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

