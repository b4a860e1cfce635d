"""The web view's HTTP side: routes under /ui/, the login, cookies, CSRF checks, security
headers, the pages (Jinja2 templates, autoescaped) and the live-update stream.

Mounted on the agent's HTTP server (orksync.agent.server) by prefix: the server hands the
request handler over and this module answers it. Everything is GET except the login and
the logout, which are POST forms checked against cross-site requests twice: the `Origin`
(and `Sec-Fetch-Site`) of the request must be this host, and the form's `csrf` field must
equal the `orksync-ui-csrf` cookie (double submit). The token cookie is HttpOnly, Secure,
SameSite=Strict, limited to /ui/. The Content-Security-Policy allows only this origin's
one script and one style sheet: no inline script or style.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jinja2

from orksync.agent.ui.access import Access, Reviewer, Unavailable, User
from orksync.agent.ui.data import (
    MAX_CHILDREN,
    Filter,
    Page,
    RootStatus,
    Snapshots,
    children,
    find_row,
    visible,
)
from orksync.agent.ui.journal import Journal
from orksync.cluster.kube import Kube
from orksync.lifecycle.overview import age

__all__ = ["PREFIX", "WebView"]

log = logging.getLogger("orksync.agent.ui")

PREFIX = "/ui"
TOKEN_COOKIE = "orksync-ui-token"
CSRF_COOKIE = "orksync-ui-csrf"
MAX_FORM = 16 * 1024  # bytes of a login form (a token is a few KiB at most)
FORM_TIMEOUT = 10.0  # seconds a client may take to send it
SESSION = 8 * 3600  # seconds the token cookie is kept by the browser
MAX_STREAMS = 8  # live-update streams open at once
STREAM_SECONDS = 300.0  # a stream ends after this long; the browser opens a new one
KEEPALIVE = 15.0  # seconds between comments on an idle stream
COALESCE = 1.0  # seconds a stream waits after a change for the ones that follow it
STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}
HEADERS = (
    ("Content-Security-Policy",
     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
     "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    # not no-referrer: with it a browser sends `Origin: null` on the login form's POST
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
    ("Cache-Control", "no-store"),
)
# cookie-octet of RFC 6265: what a token must consist of to travel in a cookie
_COOKIE_SAFE = frozenset(chr(c) for c in range(0x21, 0x7F)) - set('",;\\')


class WebView:
    """`handle(handler, method)` answers one request under PREFIX. `roots()`: the sync
    roots the agent serves; `kube`: the agent's own connection, ungated."""

    def __init__(self, kube: Kube, journal: Journal, roots: Callable[[], Sequence[RootStatus]],
                 inventory_namespace: str) -> None:
        self.kube = kube
        self.journal = journal
        self.roots = roots
        self.reviewer = Reviewer(kube)
        self.snapshots = Snapshots(kube, inventory_namespace)
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("orksync.agent.ui", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
            lstrip_blocks=True)
        self.env.filters["short"] = lambda sha: (sha or "")[:12] or "-"
        self._static = {name: resources.files("orksync.agent.ui").joinpath(
            "static", name).read_bytes() for name in STATIC}
        self._streams = threading.BoundedSemaphore(MAX_STREAMS)

    # --- dispatch ------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(h.path)
        path = url.path
        if method == "POST":
            if path == f"{PREFIX}/login":
                self._login(h)
            elif path == f"{PREFIX}/logout":
                self._logout(h)
            else:
                self._text(h, 405, "read-only: only the login and the logout are POST\n",
                           [("Allow", "GET")])
            return
        if method != "GET":
            self._text(h, 405, "method not allowed\n", [("Allow", "GET, POST")])
            return
        if path == PREFIX:
            self._send(h, 308, b"", "text/plain", [("Location", f"{PREFIX}/")])
        elif path.startswith(f"{PREFIX}/static/") and path[len(PREFIX) + 8:] in STATIC:
            name = path[len(PREFIX) + 8:]
            self._send(h, 200, self._static[name], STATIC[name])
        elif path == f"{PREFIX}/login":
            self._login_page(h, 200, "")
        elif path in (f"{PREFIX}/", f"{PREFIX}/tree", f"{PREFIX}/events"):
            user = self._authenticate(h)
            if user is None:
                return
            if path == f"{PREFIX}/events":
                self._stream(h)
                return
            query = parse_qs(url.query)
            if path == f"{PREFIX}/":
                self._index(h, user)
            else:
                self._tree(h, user, *(query.get(k, [""])[0] for k in
                                      ("kind", "namespace", "name")))
        else:
            self._text(h, 404, "not found\n")

    # --- authentication ------------------------------------------------------------------

    def _token(self, h: BaseHTTPRequestHandler) -> str:
        header = h.headers.get("Authorization") or ""
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return _cookies(h).get(TOKEN_COOKIE, "")

    def _authenticate(self, h: BaseHTTPRequestHandler) -> User | None:
        """The request's user; else the login page (401) or 503 sent, and None."""
        token = self._token(h)
        if not token:
            self._login_page(h, 401, "")
            return None
        try:
            user = self.reviewer.user(token)
        except Unavailable as err:
            self._text(h, 503, f"{err}\n")
            return None
        if user is None:
            self._login_page(h, 401, "The token was not accepted by the cluster.",
                             clear=True)
        return user

    def _same_origin(self, h: BaseHTTPRequestHandler) -> bool:
        """The request comes from a page of this host: `Sec-Fetch-Site`, when sent, says
        same-origin; `Origin`, when sent, names this host (browsers send at least one of
        them with a form POST)."""
        site = h.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = h.headers.get("Origin")
        if origin is not None:
            return urlsplit(origin).netloc == (h.headers.get("Host") or "")
        return site is not None

    def _form(self, h: BaseHTTPRequestHandler) -> dict[str, str] | None:
        """The posted form, checked against cross-site requests; else the refusal sent and
        None."""
        length = h.headers.get("Content-Length") or ""
        if not length.isdigit():
            self._text(h, 411, "Content-Length required\n")
            return None
        if int(length) > MAX_FORM:
            h.close_connection = True
            self._text(h, 413, "form too large\n")
            return None
        h.connection.settimeout(FORM_TIMEOUT)
        try:
            body = h.rfile.read(int(length))
        except OSError:
            h.close_connection = True
            return None
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                             max_num_fields=4).items()}
        expected = _cookies(h).get(CSRF_COOKIE, "")
        why = "" if self._same_origin(h) else \
            f"from another origin ({h.headers.get('Origin') or h.headers.get('Sec-Fetch-Site')})"
        if not why and not (expected and hmac.compare_digest(expected, form.get("csrf", ""))):
            why = "without the form's CSRF token"
        if why:
            log.warning("web view: a POST %s %s refused", urlsplit(h.path).path, why)
            self._text(h, 403, "cross-site request refused\n")
            return None
        return form

    def _login(self, h: BaseHTTPRequestHandler) -> None:
        try:
            form = self._form(h)
        except ValueError:
            self._text(h, 400, "malformed form\n")
            return
        if form is None:
            return
        token = form.get("token", "").strip()
        if not token or not set(token) <= _COOKIE_SAFE:
            self._login_page(h, 401, "Paste a bearer token.")
            return
        try:
            user = self.reviewer.user(token)
        except Unavailable as err:
            self._text(h, 503, f"{err}\n")
            return
        if user is None:
            self._login_page(h, 401, "The token was not accepted by the cluster.")
            return
        log.info("web view: %s logged in", user.username)
        self._send(h, 303, b"", "text/plain", [
            ("Location", f"{PREFIX}/"),
            ("Set-Cookie", _cookie(TOKEN_COOKIE, token, SESSION))])

    def _logout(self, h: BaseHTTPRequestHandler) -> None:
        try:
            form = self._form(h)
        except ValueError:
            form = None
        if form is None:
            return
        self._send(h, 303, b"", "text/plain", [
            ("Location", f"{PREFIX}/login"), ("Set-Cookie", _cookie(TOKEN_COOKIE, "", 0))])

    # --- pages ---------------------------------------------------------------------------

    def _index(self, h: BaseHTTPRequestHandler, user: User) -> None:
        roots = list(self.roots())
        snapshot = self.snapshots.get([r.name for r in roots])
        try:
            page = visible(snapshot, roots, self.journal,
                           Filter(self.kube, Access(self.reviewer, user)), user.username)
        except Unavailable as err:
            self._text(h, 503, f"{err}\n")
            return
        self._html(h, 200, "index.html", page=page)

    def _tree(self, h: BaseHTTPRequestHandler, user: User, kind: str, namespace: str,
              name: str) -> None:
        """One custom resource's tree: only its own and its children's permissions are
        asked about."""
        snapshot = self.snapshots.get([r.name for r in self.roots()])
        flt = Filter(self.kube, Access(self.reviewer, user))
        page = Page(user=user.username)
        found = find_row(snapshot.rows, kind, namespace, name) if kind and name else None
        try:
            row = flt.row(found) if found is not None and not found.plain else None
        except Unavailable as err:
            self._text(h, 503, f"{err}\n")
            return
        page.truncated = flt.access.truncated
        if row is None:  # absent and not readable look alike
            self._html(h, 404, "missing.html", page=page, kind=kind, namespace=namespace,
                       name=name)
            return
        shown, more = children(row)
        self._html(h, 200, "tree.html", page=page, row=row, children=shown, more=more,
                   max_children=MAX_CHILDREN)

    def _login_page(self, h: BaseHTTPRequestHandler, status: int, error: str, *,
                    clear: bool = False) -> None:
        extra = [("WWW-Authenticate", 'Bearer realm="orksync"')] if status == 401 else []
        if clear:
            extra.append(("Set-Cookie", _cookie(TOKEN_COOKIE, "", 0)))
        self._html(h, status, "login.html", error=error, extra=extra)

    def _html(self, h: BaseHTTPRequestHandler, status: int, template: str, *,
              extra: list[tuple[str, str]] | None = None, **context: Any) -> None:
        csrf = _cookies(h).get(CSRF_COOKIE, "")
        headers = list(extra or ())
        if not csrf:
            csrf = secrets.token_urlsafe(24)
            headers.append(("Set-Cookie", _cookie(CSRF_COOKIE, csrf, SESSION)))
        now = datetime.now(UTC)
        body = self.env.get_template(template).render(
            csrf=csrf, prefix=PREFIX, now=now, age=lambda created: age(created, now),
            **context).encode()
        self._send(h, status, body, "text/html; charset=utf-8", headers)

    # --- live updates --------------------------------------------------------------------

    def _stream(self, h: BaseHTTPRequestHandler) -> None:
        """Server-sent events: `changed` whenever the agent's watches, syncs or repairs
        moved something, at most once a COALESCE; no data of the view travels on it (the
        page fetches itself again, authorised as any request)."""
        if not self._streams.acquire(blocking=False):
            self._text(h, 503, "too many live views open\n", [("Retry-After", "30")])
            return
        try:
            h.close_connection = True
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            for name, value in HEADERS:
                h.send_header(name, value)
            h.end_headers()
            seen = self.journal.version
            h.wfile.write(b"retry: 5000\n\n")
            h.wfile.flush()
            end = time.monotonic() + STREAM_SECONDS
            while time.monotonic() < end:
                version = self.journal.wait(seen, min(KEEPALIVE, end - time.monotonic()))
                if version == seen:
                    h.wfile.write(b": keep-alive\n\n")
                else:
                    time.sleep(COALESCE)
                    seen = self.journal.version
                    h.wfile.write(f"event: changed\ndata: {seen}\n\n".encode())
                h.wfile.flush()
        except OSError:
            pass  # the browser went away
        finally:
            self._streams.release()

    # --- plumbing ------------------------------------------------------------------------

    def _text(self, h: BaseHTTPRequestHandler, status: int, text: str,
              extra: list[tuple[str, str]] | None = None) -> None:
        self._send(h, status, text.encode(), "text/plain; charset=utf-8", extra)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str,
              extra: list[tuple[str, str]] | None = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for name, value in (*HEADERS, *(extra or ())):
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(body)


def _cookies(h: BaseHTTPRequestHandler) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(h.headers.get("Cookie") or "")
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _cookie(name: str, value: str, max_age: int) -> str:
    return (f"{name}={value}; Path={PREFIX}/; Max-Age={max_age}; HttpOnly; Secure; "
            f"SameSite=Strict")
