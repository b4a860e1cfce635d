"""A narrow REST layer over orksync.cluster.transport: JSON in, JSON out, discovery cached,
failed requests retried where that is safe (orksync.cluster.retry), every failure turned into
a ClusterError naming the object.

Connections: the kubeconfig and in-cluster settings are read by orksync.cluster.kubeconfig
(one TLS context, the credentials, a proxy); every request goes through
orksync.cluster.transport (urllib3), whatever the kubeconfig's way of authenticating (exec
plugins and auth-providers only produce the credentials: orksync.cluster.credentials).
Plain dicts, not the `kubernetes` package's generated models: faster, and server-side apply
wants plain dicts anyway.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from orksync.cluster import kubeconfig
from orksync.cluster.retry import (
    APPLY_PATCH,
    MERGE_PATCH,
    RetryPolicy,
    parse_retry_after,
    replay_safe,
    retryable_status,
)
from orksync.cluster.transport import Pool, Stream, TransportError
from orksync.errors import ClusterError

__all__ = ["APPLY_PATCH", "MERGE_PATCH", "METADATA_ONLY", "Kube", "Resource", "RetryPolicy",
           "Unreachable"]

log = logging.getLogger(__name__)

MAX_MESSAGE = 300
# Server-side field validation of applies (performance, not retries). The default, Warn,
# decodes every patch a second time, strictly, only to put warnings in a response header
# that orksync does not read (the renderer warns about unknown keys of the entries it
# builds itself). Under Warn and Ignore alike the server drops a field it does not know;
# Ignore saves the API server the second decode of every apply (bench/apiserver_cpu.py).
FIELD_VALIDATION = "Ignore"
# The answer to a write, when the caller reads only its metadata (uid, resourceVersion):
# the API server sends the object's metadata as a PartialObjectMetadata instead of the
# whole object (less to encode, send and decode); a server that does not offer it picks
# the plain JSON named second (content negotiation), so no request fails over it.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
# The same for a LIST (`Kube.list(metadata_only=True)`): each item's metadata only
METADATA_LIST = ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, "
                 "application/json")
# json.dumps with `separators` builds a new encoder on every call; one is enough (it keeps
# no state between calls). Not ASCII-escaped: a server-side apply body is read as YAML,
# which refuses the JSON escape of a surrogate pair (an emoji), so text goes as UTF-8.
_json_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encode_body(body: Any) -> bytes:
    """`body` as UTF-8 JSON; a lone surrogate (text decoded from a JSON escape, never
    valid UTF-8) becomes U+FFFD, as Go's encoder writes it."""
    text = _json_text(body)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """What discovery says about one kind: its REST plural and scope."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()  # `status`, `scale`, ... as discovery lists

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str = "", name: str = "", subresource: str = "") -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


class Unreachable(ClusterError):
    """No connection to the API server could be made, and it never answered this client:
    the address, the network or the server is wrong or down. Not retried (retrying a
    server that was never reached only makes a command slow and loud); the message names
    the server and where its address came from (the kubeconfig context)."""


class Kube:
    """One cluster connection. Thread-safe: requests go through a pool of connections
    (orksync.cluster.transport's). Neither retries nor follows a redirect: the loop in
    `request_with_status` is the only one."""

    def __init__(self, *, connection: kubeconfig.Connection, pool_size: int = 16,
                 timeout: float = 30.0, retry: RetryPolicy | None = None,
                 pool: Pool | None = None) -> None:
        """On `connection`, with a pool of `pool_size` connections, or `pool` (another
        Kube's on the same connection) when given."""
        self._connection = connection
        self.host = connection.server
        self._pool = pool or Pool(connection.server, tls=connection.tls,
                                  server_name=connection.tls_server_name, size=pool_size,
                                  proxy=connection.proxy, headers=connection.headers)
        self._owns_pool = pool is None
        self._credentials = connection.credentials
        self._ca_origin = connection.ca_origin
        self.timeout = timeout  # seconds an attempt may take in all (connect, send, answer)
        self._resources: dict[str, dict[str, Resource]] = {}
        self._discovering: dict[str, threading.Lock] = {}  # per API version
        self._discovery_lock = threading.Lock()  # the two above, shared by `sibling`
        self._lock = threading.Lock()
        self.requests = 0  # every request sent, for benchmarks and tests
        self.retry = retry or RetryPolicy()
        self.retries = 0  # requests sent again (see the retry path below)
        # start of the first attempt of the current run of server failures (None: healthy)
        self._failing_since: float | None = None
        # whether the server has answered any request of this client (a connection that
        # cannot be made to a server never reached fails at once: `_retry_delay`)
        self._answered = False
        # called before every attempt of every request; raises to stop the caller's whole
        # job (the agent's leader election: a job of a replica that may no longer write
        # is abandoned at its next request, read or write; orksync.agent.lease). A number
        # it returns bounds the attempt's deadline (seconds): the leader's write is
        # answered or given up before its renew deadline passes.
        self.gate: Callable[[], float | None] | None = None
        self.user_agent = ""  # sent instead of the transport's default when set
        # the level of the line each retry logs: the agent's is DEBUG, as it logs the
        # outages of its components once (orksync.cluster.outage) instead
        self.retry_log_level = logging.INFO
        # `impersonating`: the user every request is sent as (Impersonate-User), and the
        # Kube whose pool, discovery, counters and gate this one shares (itself if none)
        self.as_user = ""
        self.writes_only = False
        self._root = self
        self._views: dict[str, Kube] = {}

    def sibling(self, *, timeout: float, retry: RetryPolicy | None = None,
                pool_size: int = 2, share_pool: bool = False) -> Kube:
        """Another Kube on the same cluster and credentials with a pool of its own, no
        gate and the given timeout and retries: the leader election's, so that its
        renewals never queue behind the sync's requests nor pass through its gate.
        `share_pool`: this Kube's pool and discovery cache instead (its gate and
        counters still its own): the many roots of one agent keep one set of idle
        connections and discover each API version once, not once each. The pool never
        makes a request wait for a connection (it opens another and closes it after use
        when `size` are idle already), so sharing it queues nothing."""
        other = Kube(connection=self._connection, pool_size=pool_size, timeout=timeout,
                     retry=retry, pool=self._pool if share_pool else None)
        if share_pool:  # (the cluster's discovery: the same for every root)
            other._resources, other._discovering = self._resources, self._discovering
            other._discovery_lock = self._discovery_lock
        other.user_agent = self.user_agent
        other.retry_log_level = self.retry_log_level
        return other

    def impersonating(self, user: str, *, writes_only: bool = False) -> Kube:
        """This connection sending every request as `user` (the header Impersonate-User;
        the API server then authorizes each request as that user, after checking that
        this client may impersonate it). It shares this Kube's pool, discovery cache,
        counters and gate: one more identity costs no connection. For a ServiceAccount
        (`system:serviceaccount:<namespace>:<name>`) the API server adds its groups
        itself (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`) when no
        Impersonate-Group is sent, so none is: sending them would need the right to
        impersonate groups too. One view per user, made once. A kubeconfig that
        impersonates already (`as:`) cannot be combined with it: a request carries one
        Impersonate-User, so a ClusterError says so rather than sending two.
        `writes_only`: GETs (reads, lists, watches) go as this client itself, every other
        request as `user`: a Sync's root, whose reads decide what to send and whose every
        write is authorized as its ServiceAccount."""
        root = self._root
        already = [value for name, value in root._connection.headers
                   if name.lower() == "impersonate-user"]
        if already:
            raise ClusterError(f"cannot send requests as {user}: the kubeconfig's user "
                               f"already impersonates {already[0]} (`as:`); drop one of the two",
                               subject=user)
        with root._lock:
            key = f"{user}\0writes" if writes_only else user
            view = root._views.get(key)
            if view is None:
                view = copy.copy(root)
                view.as_user = user
                view.writes_only = writes_only
                view._views = {}
                root._views[key] = view
        return view

    def own(self) -> Kube:
        """The client this one impersonates from, sending as itself: the bookkeeping a
        Sync's root keeps as the agent (its inventory, its sync result)."""
        return self._root

    def _sent_as(self, method: str) -> str:
        """The Impersonate-User of a request with `method` ("": none)."""
        if self.writes_only and method == "GET":
            return ""
        return self.as_user

    def reach(self) -> None:
        """One GET /version: raises Unreachable at once when no connection can be made to a
        server that never answered this client (a command's first request; any answer,
        even a refusal, shows it is there: a refusal raises its ClusterError)."""
        self.request("GET", "/version", subject=self.host)

    def check_gate(self) -> None:
        """Raise what the gate raises (a long wait between requests asks this)."""
        gate = self._root.gate
        if gate is not None:
            gate()

    @classmethod
    def from_kubeconfig(cls, path: str | Path | None = None, context: str | None = None,
                        *, pool_size: int = 16) -> Kube:
        """The context's cluster (KUBECONFIG or ~/.kube/config when `path` is None),
        read by orksync.cluster.kubeconfig."""
        return cls(connection=kubeconfig.load_kubeconfig(path, context), pool_size=pool_size)

    @classmethod
    def in_cluster(cls, *, pool_size: int = 16) -> Kube:
        """The pod's service account (token re-read as it rotates)."""
        return cls(connection=kubeconfig.in_cluster(), pool_size=pool_size)

    def close(self) -> None:
        """Close the idle connections; a request sent after this makes new ones. A pool
        shared with another Kube (`sibling(share_pool=True)`) is left to its owner."""
        if self._owns_pool:
            self._pool.close()

    # --- requests -----------------------------------------------------------------------

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, content_type: str = "application/json",
                subject: str = "") -> Any:
        """Send one request; return the decoded JSON body. Raises ClusterError."""
        return self.request_with_status(method, path, query=query, body=body,
                                        content_type=content_type, subject=subject)[1]

    def request_with_status(self, method: str, path: str, *,
                            query: Mapping[str, Any] | str | None = None, body: Any = None,
                            content_type: str = "application/json",
                            subject: str = "", accept: str = "application/json"
                            ) -> tuple[int, Any]:
        """Send one request, retried as orksync.cluster.retry allows; (status, decoded body).
        `query`: parameters, or a query string already encoded (`?...`). Every request
        passes here (tests observe and interrupt requests at this one point). Raises
        ClusterError with the last failure."""
        if not isinstance(query, str):
            query = _query_string(query or {})
        url = self._pool.prefix + path + query
        payload = None if body is None else encode_body(body)
        replayable = replay_safe(method, content_type, body)
        root = self._root
        gate = root.gate
        first = time.monotonic()
        retry = 0
        renewed = False  # the credentials were renewed after a 401 (once per request)
        while True:
            left = gate() if gate is not None else None
            outcome = self._attempt(method, url, payload, content_type, accept,
                                    timeout=self.timeout if left is None else
                                    max(min(self.timeout, left), 0.001))
            if outcome.status and outcome.status < 300:
                return outcome.status, (json.loads(outcome.data) if outcome.data else None)
            if outcome.status == 401 and not renewed:
                # refused before the server acted on it: any request may go again, once,
                # with credentials the server has not refused yet (client-go renews an
                # exec plugin's credential on a 401 the same way)
                renewed = True
                if self._credentials.rejected(outcome.authorization, outcome.tls):
                    continue
            delay = self._retry_delay(outcome, retry + 1, first, replayable)
            if delay is None:
                err = outcome.error(method, path, subject, retry + 1,
                                    ca_origin=self._ca_origin, outage=self._outage())
                # a certificate refused is a server reached: its error names the CA
                if outcome.transport is not None and not outcome.transport.sent and \
                        not root._answered and \
                        _refused_certificate(outcome.transport) is None:
                    origin = f" ({self._connection.origin})" if self._connection.origin \
                        else ""
                    raise Unreachable(f"the API server cannot be reached{origin} ({method} "
                                      f"{path}): {type(outcome.transport).__name__}: "
                                      f"{outcome.transport}",
                                      subject=self.host) from outcome.transport
                if self._sent_as(method) and outcome.status == 403:  # always named
                    err = ClusterError(f"{err.detail} (sent as {self.as_user})",
                                       subject=err.subject, status=err.status,
                                       reason=err.reason)
                raise err
            log.log(root.retry_log_level, "%s %s: %s; retry %d/%d in %.2fs", method, path,
                    outcome.summary(), retry + 1, self.retry.attempts - 1, delay)
            time.sleep(delay)
            retry += 1
            with root._lock:
                root.retries += 1

    def get(self, res: Resource, namespace: str, name: str, *, subject: str = "") -> Any:
        return self.request("GET", res.path(namespace, name), subject=subject)

    def get_or_none(self, res: Resource, namespace: str, name: str) -> Any:
        try:
            return self.get(res, namespace, name)
        except ClusterError as err:
            if err.status == 404:
                return None
            raise

    def list(self, res: Resource, *, namespace: str = "",
             label_selector: str | None = None, limit: int = 500,
             metadata_only: bool = False) -> Iterator[dict[str, Any]]:
        """Every object of a kind (paginated), in one namespace or cluster-wide;
        `metadata_only`: each its apiVersion, kind and metadata only."""
        cont: str | None = None
        while True:
            _, page = self.request_with_status(
                "GET", res.path(namespace), query={
                    "labelSelector": label_selector, "limit": limit, "continue": cont},
                accept=METADATA_LIST if metadata_only else "application/json")
            page = page or {}
            for item in page.get("items") or []:
                if metadata_only:  # a PartialObjectMetadata: named as the kind it is
                    item["apiVersion"], item["kind"] = res.api_version, res.kind
                else:
                    item.setdefault("apiVersion", res.api_version)
                    item.setdefault("kind", res.kind)
                yield item
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return

    def watch(self, res: Resource, *, resource_version: str, label_selector: str | None = None,
              timeout_seconds: int = 300, idle: float = 360.0) -> Stream:
        """A WATCH of a kind cluster-wide from `resource_version`, with bookmarks, as a
        stream of newline-separated JSON events (orksync.cluster.watch reads it). The server
        ends it after `timeout_seconds`; a silence longer than `idle` ends it with an
        error. Not retried (the caller's loop reconnects). Raises ClusterError: a refused
        watch with the server's status (410: the resourceVersion is too old, list again),
        a connection that failed with status 0."""
        self.check_gate()
        query = _query_string({"watch": "1", "resourceVersion": resource_version,
                               "allowWatchBookmarks": "true",
                               "labelSelector": label_selector,
                               "timeoutSeconds": timeout_seconds})
        path = res.path()
        headers, _, _ = self._headers("application/json", "application/json", "GET")
        root = self._root
        with root._lock:
            root.requests += 1
        try:
            stream = self._pool.stream("GET", self._pool.prefix + path + query, headers,
                                       timeout=self.timeout, idle=idle)
        except TransportError as err:
            raise ClusterError(f"WATCH {path}: {type(err).__name__}: {err}",
                               subject=path) from err
        if not 200 <= stream.response.status < 300:
            raise _error(stream.response.status, stream.response.data, "WATCH", path, path)
        return stream

    def apply(self, res: Resource, body: Mapping[str, Any], *, field_manager: str,
              force: bool, subject: str = "", dry_run: bool = False,
              subresource: str = "", metadata_only: bool = False) -> tuple[bool, Any]:
        """Server-side apply. Returns (created, live object); with `metadata_only`, an
        object of which only `metadata` may be read (METADATA_ONLY)."""
        meta = body.get("metadata") or {}
        status, live = self.request_with_status(
            "PATCH", res.path(str(meta.get("namespace") or ""), str(meta["name"]), subresource),
            query=_apply_query(field_manager, bool(force), bool(dry_run)), body=body,
            content_type=APPLY_PATCH,
            subject=subject, accept=METADATA_ONLY if metadata_only else "application/json")
        return status == 201, live

    def create(self, res: Resource, body: Mapping[str, Any], *, field_manager: str,
               subject: str = "", metadata_only: bool = False) -> Any:
        """POST. Returns the created object; with `metadata_only`, see `apply`."""
        namespace = str((body.get("metadata") or {}).get("namespace") or "")
        return self.request_with_status(
            "POST", res.path(namespace), query={"fieldManager": field_manager}, body=body,
            subject=subject, accept=METADATA_ONLY if metadata_only else "application/json")[1]

    def delete(self, res: Resource, namespace: str, name: str, *,
               propagation: str = "Background", subject: str = "",
               precondition_uid: str | None = None,
               precondition_version: str | None = None) -> Any:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                "propagationPolicy": propagation}
        preconditions = {key: value for key, value in (
            ("uid", precondition_uid), ("resourceVersion", precondition_version)) if value}
        if preconditions:
            body["preconditions"] = preconditions
        return self.request("DELETE", res.path(namespace, name), body=body, subject=subject)

    # --- discovery ----------------------------------------------------------------------

    def resource(self, api_version: str, kind: str, *, refresh: bool = False) -> Resource:
        """The REST resource of a kind; re-discovers once when the kind is unknown."""
        with self._discovery_lock:
            known = self._resources.get(api_version)
        if known is None or refresh or kind not in known:
            # one discovery per API version at a time: threads that ask together (the
            # applier's concurrent LISTs) wait for it instead of each sending their own
            with self._discovery_lock:
                flight = self._discovering.setdefault(api_version, threading.Lock())
            with flight:
                with self._discovery_lock:
                    latest = self._resources.get(api_version)
                known = latest if latest is not None and latest is not known and \
                    kind in latest else self._discover(api_version)
        res = known.get(kind)
        if res is None:
            raise ClusterError(f"the API server does not serve kind {kind} in {api_version}",
                               subject=f"{kind} ({api_version})", status=404,
                               reason="NotFound")
        return res

    def _discover(self, api_version: str) -> dict[str, Resource]:
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = self.request("GET", path, subject=api_version)
        except ClusterError as err:
            if err.status == 404:
                doc = {"resources": []}
            else:
                raise
        found = {}
        subresources: dict[str, set[str]] = {}
        for r in doc.get("resources") or []:
            plural, _, sub = str(r.get("name", "")).partition("/")
            subresources.setdefault(plural, set())
            if sub:
                subresources[plural].add(sub)
        for r in doc.get("resources") or []:
            if "/" in r.get("name", ""):
                continue  # subresources
            found[r["kind"]] = Resource(group=group, version=version, kind=r["kind"],
                                        plural=r["name"], namespaced=bool(r["namespaced"]),
                                        subresources=frozenset(subresources[r["name"]]))
        with self._discovery_lock:
            self._resources[api_version] = found
        return found

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the discovery cached (no request) has the kind in the API version."""
        with self._discovery_lock:
            return kind in (self._resources.get(api_version) or {})

    def forget(self, api_version: str) -> None:
        with self._discovery_lock:
            self._resources.pop(api_version, None)

    # --- the retry path (policy: orksync.cluster.retry) -------------------------------------

    def _headers(self, accept: str, content_type: str, method: str
                 ) -> tuple[dict[str, str], str | None, ssl.SSLContext | None]:
        """The headers of one request, and the credentials they carry (a 401 renews
        exactly those); a client certificate that changed replaces the pool's idle
        connections."""
        headers = {"Accept": accept, "Content-Type": content_type}
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        if self._sent_as(method):
            headers["Impersonate-User"] = self.as_user
        authorization, tls = self._credentials.current()
        if authorization:
            headers["Authorization"] = authorization
        if tls is not None and tls is not self._pool.tls:
            # new credentials with a client certificate of their own: new connections
            self._pool.tls = tls
        return headers, authorization, tls

    def _attempt(self, method: str, url: str, payload: bytes | None,
                 content_type: str, accept: str = "application/json", *,
                 timeout: float) -> _Outcome:
        headers, authorization, tls = self._headers(accept, content_type, method)
        root = self._root
        with root._lock:  # threads send at once (the prefetch, the stage's writes)
            root.requests += 1
        started = time.monotonic()
        try:
            resp = self._pool.request(method, url, payload, headers, timeout)
        except TransportError as err:
            self._note_health(started, failed=True)
            return _Outcome(transport=err)
        status = resp.status
        root._answered = True
        self._note_health(started, failed=status >= 500)
        if status < 300:  # Retry-After is read only where a retry may follow
            return _Outcome(status=status, data=resp.data)
        return _Outcome(status=status, data=resp.data,
                        retry_after=parse_retry_after(resp.headers.get("retry-after")),
                        authorization=authorization, tls=tls)

    def _note_health(self, started: float, *, failed: bool) -> None:
        """Track since when every request failed (benign races: a flag, not a count), on
        the root Kube: its views (`impersonating`) talk to the same server."""
        root = self._root
        if not failed:
            root._failing_since = None
        elif root._failing_since is None:
            root._failing_since = started

    def _outage(self) -> float:
        """Seconds for which every request has failed, when that is past the deadline (a
        request then gets no retry); 0.0 otherwise."""
        failing = self._root._failing_since
        if failing is None:
            return 0.0
        lasted = time.monotonic() - failing
        return lasted if lasted > self.retry.deadline else 0.0

    def _retry_delay(self, outcome: _Outcome, retry: int, first: float,
                     replayable: bool) -> float | None:
        """Seconds to wait before retry number `retry`, or None to give up."""
        if outcome.transport is not None:
            if _refused_certificate(outcome.transport):
                return None  # a configuration error: the next attempt is refused too
            # a connection that was never established carried no request; to a server
            # that never answered this client, it is not tried again (`Unreachable`)
            allowed = (not outcome.transport.sent and self._root._answered) or \
                (outcome.transport.sent and replayable)
        else:
            allowed = retryable_status(outcome.status, replayable=replayable,
                                       body=outcome.data)
        if not allowed or retry >= self.retry.attempts:
            return None
        delay = self.retry.delay(retry, outcome.retry_after)
        now = time.monotonic()
        failing = self._root._failing_since
        if now + delay - first > self.retry.deadline or \
                (failing is not None and now - failing > self.retry.deadline):
            return None
        return delay


@dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    """One attempt: an answer (`status`, `data`) or a transport failure."""

    status: int = 0
    data: bytes = b""
    transport: TransportError | None = None
    retry_after: float | None = None
    # the credentials an answer refused was sent with (compared, never shown)
    authorization: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)

    def summary(self) -> str:
        """For the retry log line: no message text (it could echo a request body)."""
        return f"{self.status}" if self.status else type(self.transport).__name__

    def error(self, method: str, path: str, subject: str, attempts: int, *,
              ca_origin: str = "", outage: float = 0.0) -> ClusterError:
        """The ClusterError of the last attempt; it says how many were made, or that none
        was retried because the server has failed every request for longer than the
        retry deadline (`outage` seconds)."""
        tried = f" (after {attempts} attempts)" if attempts > 1 else \
            f" (not retried: every request has failed for {outage:.1f}s)" if outage else ""
        if self.transport is None:
            return _error(self.status, self.data, method, path, subject, suffix=tried)
        refused = _refused_certificate(self.transport)
        if refused is not None:
            err = ClusterError(f"{method} {path}: the API server's TLS certificate was "
                               f"refused: {refused.verify_message or refused.reason}; it "
                               f"is checked against {ca_origin or 'the configured CA'}",
                               subject=subject or path)
        else:
            err = ClusterError(f"{method} {path}: {type(self.transport).__name__}: "
                               f"{self.transport}{tried}", subject=subject or path)
        err.__cause__ = self.transport
        return err


@functools.lru_cache(maxsize=32)
def _apply_query(field_manager: str, force: bool, dry_run: bool) -> str:
    """The query string of a server-side apply, encoded once per set of options (a sync
    sends a thousand applies with the same)."""
    return _query_string({"fieldManager": field_manager, "force": "true" if force else "false",
                          "dryRun": "All" if dry_run else None,
                          "fieldValidation": FIELD_VALIDATION})


def _query_string(query: Mapping[str, Any]) -> str:
    """`?k=v&...` of the parameters that are not None, or empty."""
    params = [(k, v) for k, v in query.items() if v is not None]
    return "?" + urlencode(params) if params else ""


def _refused_certificate(err: BaseException) -> ssl.SSLCertVerificationError | None:
    """The verification failure behind a transport error: the server's certificate is not
    signed by the CA this client trusts, or names another host (permanent, unlike a
    handshake cut short). Found among the causes and their arguments."""
    todo: list[BaseException] = [err]
    seen: set[int] = set()
    while todo and len(seen) < 16:  # a chain that loops back is walked once
        cause = todo.pop()
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause
        todo.extend(a for a in cause.args if isinstance(a, BaseException))
        if cause.__cause__ is not None:
            todo.append(cause.__cause__)
    return None


def _error(status: int, data: bytes, method: str, path: str, subject: str, *,
           suffix: str = "") -> ClusterError:
    reason, message = "", ""
    try:
        doc = json.loads(data)
        reason = str(doc.get("reason") or "")
        message = str(doc.get("message") or "")
    except (ValueError, AttributeError):
        message = data[:MAX_MESSAGE].decode("utf-8", "replace")
    # a refusal is the API server's own sentence naming the user, the verb, the resource
    # and the object (no request body in it): cut, it would lose what it is for
    limit = MAX_MESSAGE * 3 if status == 403 else MAX_MESSAGE
    if len(message) > limit:
        message = message[:limit] + "..."
    text = f"{method} failed: {status} {reason}: {message}".replace(": :", ":") + suffix
    return ClusterError(text, subject=subject or path, status=status, reason=reason)

