"""Orkestra's validation notes, ported from its pkg/note with their Go signatures: email,
git repository, URL, image, network, domain and Kubernetes-name checks. Pure."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from orksync.render.notes.gocore import (
    atoi,
    byte_len,
    json_valid,
    parse_float,
    trim_space,
)
from orksync.render.notes.gosig import GoNote, registrar

NOTES: list[GoNote] = []
note = registrar(NOTES)


# ── validation ──────────────────────────────────────────────────────────────────────
_ATEXT_SPECIAL = set('.()<>[]:;@\\,"')


def _atom_ok(atom: str) -> bool:
    return bool(atom) and all(
        (ch not in _ATEXT_SPECIAL and "!" <= ch <= "~") or (ord(ch) >= 0x80
                                                           and not "\udc80" <= ch <= "\udcff")
        for ch in atom)


def _dot_atom(text: str) -> bool:
    return all(_atom_ok(part) for part in text.split("."))


@note("isValidEmail", "s->b")
def is_valid_email(s: str) -> bool:
    """A bare address (`a@b.c`) that net/mail parses to itself."""
    core = s.strip(" \t")  # net/mail skips only blanks and tabs around the address
    if core != trim_space(s) or core.count("@") != 1:
        return False
    local, _, domain = core.partition("@")
    if domain.startswith("[") and domain.endswith("]"):
        return _dot_atom(local) and _domain_literal_ip(domain[1:-1])
    return _dot_atom(local) and _dot_atom(domain)


def _domain_literal_ip(text: str) -> bool:
    """net/mail takes a domain literal (`a@[1.2.3.4]`) when it holds an IP address."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


_GIT_PATTERNS = (re.compile(r"^(https?|git|ssh)://[^\t\n\f\r ]+\Z", re.ASCII),
                 re.compile(r"^[\w.-]+@[\w.-]+:[\w./~-]+(\.git)?\Z", re.ASCII))


@note("isValidGitRepository", "s->b")
def is_valid_git_repository(s: str) -> bool:
    """An http(s)/git/ssh URL or an scp-like `user@host:path`."""
    return s != "" and any(p.search(s) for p in _GIT_PATTERNS)


_HOST_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
               "-_.~!$&'()*+,;=:[]<>\"")
_USERINFO_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                   "-._:~!$&'()*+,;=%@")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*", re.ASCII)
_HEX = "0123456789abcdefABCDEF"


def _bad_escapes(text: str, host: bool) -> bool:
    i = 0
    while i < len(text):
        if text[i] == "%":
            if i + 2 >= len(text) + 0 and not (i + 2 < len(text)):
                return True
            if i + 2 >= len(text) or text[i + 1] not in _HEX or text[i + 2] not in _HEX:
                return True
            if host and text[i:i + 3] != "%25" and int(text[i + 1], 16) < 8:
                return True  # net/url: %-encoding in a host is for non-ASCII bytes only
            i += 3
            continue
        if host and ord(text[i]) < 0x80 and text[i] not in _HOST_OK:
            return True
        i += 1
    return False


def _valid_port(port: str) -> bool:
    return port == "" or (port.startswith(":") and port[1:].isascii() and
                          (port[1:] == "" or port[1:].isdigit()))


@note("isValidURL", "s->b")
def is_valid_url(s: str) -> bool:
    """An absolute http or https URL with a host (net/url's ParseRequestURI)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return False
    match = _SCHEME.match(s)
    if not match or s[match.end():match.end() + 1] != ":":
        return False
    scheme = match.group(0).lower()
    rest = s[match.end() + 1:]
    if "?" in rest:
        rest = rest[: rest.index("?")]
    if not rest.startswith("//"):
        return False
    rest = rest[2:]
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    at = authority.rfind("@")
    userinfo, host = (None, authority) if at < 0 else (authority[:at], authority[at + 1:])
    if userinfo is not None and not all(c in _USERINFO_OK or ord(c) >= 0x80
                                        for c in userinfo):
        return False
    if userinfo is not None and _bad_escapes(userinfo.replace("@", "a"), False):
        return False
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or not _valid_port(host[end + 1:]):
            return False
        inner = host[1:end]
        zone = inner.find("%25")
        if _bad_escapes(inner if zone < 0 else inner[:zone], True):
            return False
    else:
        colon = host.rfind(":")
        if colon >= 0 and not _valid_port(host[colon:]):
            return False
        if _bad_escapes(host, True):
            return False
    if _bad_escapes(path, False):
        return False
    return scheme in ("http", "https") and host != ""


_IMAGE = re.compile(
    r"^(?:[a-z0-9]+(?:[.-][a-z0-9]+)*(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127}|@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:"
    r"[0-9A-Fa-f]{32,})?\Z", re.ASCII)


@note("isValidImageRef", "s->b")
def is_valid_image_ref(s: str) -> bool:
    """A container image reference (`registry:5000/repo/name:tag` or `@sha256:…`)."""
    return s != "" and _IMAGE.match(s) is not None


note("isValidJSON", "s->b")(json_valid)


@note("isValidPort", "s->b")
def is_valid_port(s: str) -> bool:
    """A decimal integer in 1..65535."""
    n = atoi(s)
    return n is not None and 1 <= n <= 65535


# ── Kubernetes names ────────────────────────────────────────────────────────────────
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z", re.ASCII)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z", re.ASCII)
_DNS1123_SUB = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z",
                          re.ASCII)


def dns1123_subdomain(value: str) -> bool:
    return byte_len(value) <= 253 and _DNS1123_SUB.match(value) is not None


def qualified_name(value: str) -> bool:
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if prefix == "" or not dns1123_subdomain(prefix):
            return False
    else:
        return False
    return name != "" and byte_len(name) <= 63 and _QUALIFIED.match(name) is not None


note("isValidLabelValue", "s->b")(
    lambda v: byte_len(v) <= 63 and _LABEL_VALUE.match(v) is not None)
note("isValidLabelKey", "s->b")(qualified_name)
note("isValidAnnotationKey", "s->b")(qualified_name)
note("isDNS1123Subdomain", "s->b")(dns1123_subdomain)


# ── network ─────────────────────────────────────────────────────────────────────────
def parse_ip(text: str) -> bytes | None:
    """net.ParseIP as 16 bytes (IPv4 mapped); None when not an address."""
    if "%" in text or not text.isascii() or text == "":
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv4Address):
        return b"\0" * 10 + b"\xff\xff" + address.packed
    return address.packed


def _to4(ip: bytes) -> bytes | None:
    if len(ip) == 4:
        return ip
    if ip[:10] == b"\0" * 10 and ip[10:12] == b"\xff\xff":
        return ip[12:]
    return None


def parse_cidr(text: str) -> tuple[bytes, bytes] | None:
    """net.ParseCIDR: (network IP, mask), the IP 4 bytes for IPv4."""
    if "/" not in text:
        return None
    addr, _, bits = text.rpartition("/")
    ip = parse_ip(addr)
    if ip is None or not bits or not bits.isascii() or not bits.isdigit() or len(bits) > 9:
        return None
    is4 = ":" not in addr
    size = 32 if is4 else 128
    n = int(bits)
    if n > size:
        return None
    mask_int = ((1 << n) - 1) << (size - n)
    mask = mask_int.to_bytes(size // 8, "big")
    base = ip[12:] if is4 else ip
    network = bytes(a & m for a, m in zip(base, mask, strict=True))
    return network, mask


def cidr_contains(net: tuple[bytes, bytes], ip: bytes) -> bool:
    """IPNet.Contains."""
    network, mask = net
    nn = _to4(network)
    if nn is None:
        nn = network
        if len(nn) != 16:
            return False
    if len(mask) == 4 and len(nn) != 4:
        return False
    if len(mask) == 16 and len(nn) == 4:
        mask = mask[12:]
    x = _to4(ip)
    if x is not None:
        ip = x
    if len(ip) != len(nn):
        return False
    return all(a & m == b & m for a, b, m in zip(nn, ip, mask, strict=True))


@note("cidrContains", "s,s->b")
def cidr_contains_note(cidr: str, ip: str) -> bool:
    """Whether the network holds the address."""
    net = parse_cidr(cidr)
    parsed = parse_ip(ip)
    return net is not None and parsed is not None and cidr_contains(net, parsed)


note("ipValid", "s->b")(lambda s: parse_ip(s) is not None)

_PRIVATE = tuple(parse_cidr(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                         "fc00::/7"))


@note("ipIsPrivate", "s->b")
def ip_is_private(s: str) -> bool:
    """An address in 10/8, 172.16/12, 192.168/16 or fc00::/7."""
    ip = parse_ip(s)
    return ip is not None and any(net is not None and cidr_contains(net, ip)
                                  for net in _PRIVATE)


# ── domain ──────────────────────────────────────────────────────────────────────────
@note("domainHost", "a->s")
def domain_host(value: Any) -> str:
    """A string without `https://`/`http://` and a trailing `/`; "" for a non-string."""
    if not isinstance(value, str):
        return ""
    s = trim_space(value)
    s = s[len("https://"):] if s.startswith("https://") else s
    s = s[len("http://"):] if s.startswith("http://") else s
    return s[:-1] if s.endswith("/") else s


@note("domainBare", "a->s")
def domain_bare(value: Any) -> str:
    """domainHost without a leading `www.`."""
    s: str = domain_host.impl(value)
    return s[4:] if s.startswith("www.") else s


_ = parse_float  # re-exported helper used by the other port modules
