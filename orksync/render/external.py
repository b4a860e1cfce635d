"""Orkestra's `external:` calls of a block: the call specs read and checked, the egress
allow-list, the results templates see as `.external.<name>`. Pure: requests go through
the injected `Egress` (docs/katalog-semantics.md#external-calls)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from orksync.durations import parse_duration
from orksync.katalog.tenancy import ALLOWED_HOSTS_FIELD, allowed_hosts_problem

__all__ = ["ALLOWED_HOSTS_FIELD", "MAX_BODY", "MAX_CALLS", "MAX_TIMEOUT", "Call", "Egress",
           "Request", "Response",
           "allowed_hosts_problem", "call_result", "host_refusal", "literal_authority",
           "read_calls", "skipped_result"]

MAX_CALLS = 16  # per block
MAX_TIMEOUT = 30.0  # seconds
DEFAULT_TIMEOUT = 10.0
MAX_BODY = 4096  # bytes of an answer kept (Orkestra's truncation), and read
KNOWN_KEYS = ("name", "url", "method", "body", "headers", "timeout", "expectedStatus",
              "continueOnError", "when", "or", "anyOf")
REFUSED_KEYS = {
    "token": "a credential from the agent's environment is never sent",
    "auth": "a credential from the agent's environment or a Secret is never sent",
    "protocol": "orksync speaks HTTP only",
    "query": "orksync speaks HTTP only (query is for other protocols)",
    "cacheFor": "every live sync calls again; nothing is cached between syncs",
}
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
# scheme://authority written out, the authority ending where the path, query or fragment
# starts (or the text ends): a template right after it could extend the host name
_LITERAL = re.compile(r"^(https?)://([^/?#{}\s]+)(?=[/?#]|$)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the Katalog declares it (templates not rendered yet)."""

    name: str
    url: str
    path: str  # onReconcile.external[0]
    method: str = "GET"
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    expected: int | None = None  # None: any 2xx
    continue_on_error: bool = False
    when: Any = None
    or_: Any = None


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    timeout: float = DEFAULT_TIMEOUT
    max_body: int = MAX_BODY


@dataclass(frozen=True, slots=True)
class Response:
    """What came back: the status code and at most `max_body` bytes of the body; or the
    error that stopped the request (`status` 0)."""

    status: int = 0
    body: bytes = b""
    error: str = ""
    seconds: float = 0.0


class Egress(Protocol):
    """The HTTP calls of a live render (orksync.egress); never raises."""

    def call(self, request: Request) -> Response: ...


def read_calls(block: Mapping[str, Any], block_name: str) -> list[Call] | tuple[str, str]:
    """The block's `external` calls, or the first problem as (path below operatorBox,
    message)."""
    raw = block.get("external")
    base = f"{block_name}.external"
    if raw is None:
        return []
    if not isinstance(raw, list):
        return base, "must be a list of calls"
    if len(raw) > MAX_CALLS:
        return base, f"at most {MAX_CALLS} calls per block, not {len(raw)}"
    calls: list[Call] = []
    for i, item in enumerate(raw):
        path = f"{base}[{i}]"
        if not isinstance(item, Mapping):
            return path, "must be a map (name, url, ...)"
        for key in item:
            if key in REFUSED_KEYS:
                return f"{path}.{key}", f"not supported: {REFUSED_KEYS[key]}"
            if key not in KNOWN_KEYS:
                return f"{path}.{key}", f"unknown key (known: {', '.join(KNOWN_KEYS)})"
        name, url = item.get("name"), item.get("url")
        if not isinstance(name, str) or not _NAME.match(name):
            return f"{path}.name", "must be a name (letters, digits, '_', '-')"
        if any(c.name == name for c in calls):
            return f"{path}.name", f"{name!r} is called twice in this block"
        if not isinstance(url, str) or not url:
            return f"{path}.url", "must be a URL (text, templates allowed)"
        method = str(item.get("method") or "GET").upper()
        if method not in METHODS:
            return f"{path}.method", f"must be one of {', '.join(METHODS)}"
        body = item.get("body", "")
        if not isinstance(body, str):
            return f"{path}.body", "must be text (templates allowed)"
        headers = item.get("headers") or {}
        if not isinstance(headers, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            return f"{path}.headers", "must be a map of header name to text"
        timeout = DEFAULT_TIMEOUT
        if item.get("timeout") is not None:
            try:
                timeout = parse_duration(str(item["timeout"])).total_seconds()
            except ValueError as err:
                return f"{path}.timeout", f"not a duration: {err}"
            if not 0 < timeout <= MAX_TIMEOUT:
                return f"{path}.timeout", f"must be more than 0s and at most {MAX_TIMEOUT:.0f}s"
        expected = item.get("expectedStatus")
        if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int)
                                     or not 100 <= expected <= 599):
            return f"{path}.expectedStatus", "must be an HTTP status code (100-599)"
        flag = item.get("continueOnError", False)
        if not isinstance(flag, bool):
            return f"{path}.continueOnError", "must be true or false"
        or_ = item.get("or") if item.get("or") is not None else item.get("anyOf")
        calls.append(Call(name=name, url=url, path=path, method=method, body=body,
                          headers=tuple((str(k), str(v)) for k, v in headers.items()),
                          timeout=timeout, expected=expected, continue_on_error=flag,
                          when=item.get("when"), or_=or_))
    return calls


def literal_authority(url_template: str) -> tuple[str, str] | None:
    """(scheme, authority) the URL template writes out itself, lower-cased; None when a
    template chooses any part of them."""
    match = _LITERAL.match(url_template)
    if match is None:
        return None
    return match.group(1).lower(), match.group(2).lower()


def host_refusal(url_template: str, url: str, allowed: Sequence[str]) -> str:
    """Why the rendered `url` of the call whose template is `url_template` may not be
    called ("" when it may): see the module doc."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        return f"{url!r} is not a URL: {err}"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return f"{url!r}: only http and https URLs are called"
    if parts.username is not None or parts.password is not None:
        return f"{url!r}: a URL with a user name or password is not called"
    host = (parts.hostname or "").lower()
    if not host:
        return f"{url!r} has no host"
    literal = literal_authority(url_template)
    if literal is not None and literal == (scheme, parts.netloc.lower()):
        return ""
    with_port = f"{host}:{port}" if port is not None else host
    for pattern in allowed:
        name, _, want_port = pattern.lower().partition(":")
        if want_port and str(port) != want_port:
            continue  # a pattern with a port allows that port only
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return ""
    return (f"host {with_port!r} is chosen by a template and is not in the entry's "
            f"{ALLOWED_HOSTS_FIELD} (a host the Katalog writes out in the url is allowed)")


def skipped_result() -> dict[str, Any]:
    return {"status": "", "body": "", "error": "", "called": "false"}


def call_result(call: Call, response: Response) -> dict[str, Any]:
    """`.external.<name>` of a call that was made; its `error` is set when it failed."""
    error = response.error
    if not error:
        ok = response.status == call.expected if call.expected is not None \
            else 200 <= response.status < 300
        if not ok:
            want = str(call.expected) if call.expected is not None else "2xx"
            error = f"status {response.status}, expected {want}"
    return {"status": str(response.status) if response.status else "",
            "statusCode": response.status,
            "body": response.body[:MAX_BODY].decode("utf-8", errors="replace"),
            "error": error, "called": "true",
            "durationSeconds": round(response.seconds, 3)}
