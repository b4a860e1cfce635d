"""A narrow REST layer over orksync.apply.transport: JSON in, JSON out, discovery cached,
failed requests retried where that is safe (orksync.apply.retry), every failure turned into
a ClusterError naming the object. The only module importing `kubernetes` (besides the test
control plane), and only when it must.

Connections: the kubeconfig and in-cluster settings are read by orksync.apply.kubeconfig
(one TLS context, the Authorization header, token files re-read as they rotate) without
importing `kubernetes`, which costs a third of a second of start-up. A kubeconfig that
needs the `kubernetes` client (an `exec` plugin, an `auth-provider`, a proxy, ...) is
handed to it as before: then its ApiClient supplies the connection pool (urllib3's), TLS
and authentication (refresh included). A Kube can also be built on an ApiClient directly
(the tests do). Either way the generated models are not used: plain dicts are faster and
server-side apply wants plain dicts anyway.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from orksync.apply import kubeconfig
from orksync.apply.retry import (
    APPLY_PATCH,
    MERGE_PATCH,
    RetryPolicy,
    parse_retry_after,
    replay_safe,
    retryable_status,
)
from orksync.apply.transport import (
    AnswerTimeout,
    ConnectFailed,
    ConnectionLost,
    Pool,
    Response,
    TransportError,
)
from orksync.errors import ClusterError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["APPLY_PATCH", "MERGE_PATCH", "METADATA_ONLY", "Kube", "Resource", "RetryPolicy"]

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
# json.dumps with `separators` builds a new encoder on every call; one is enough (it keeps
# no state between calls)
_encode_json = json.JSONEncoder(separators=(",", ":")).encode


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


class Kube:
    """One cluster connection. Thread-safe: requests go through a pool of connections
    (orksync.apply.transport's, or the `kubernetes` ApiClient's). Neither retries nor
    follows a redirect: the loop in `request_with_status` is the only one."""

    def __init__(self, api_client: ApiClient | None = None, *,
                 connection: kubeconfig.Connection | None = None, pool_size: int = 16,
                 timeout: float = 30.0, retry: RetryPolicy | None = None) -> None:
        """On `connection` (orksync's own set-up, a pool of `pool_size` connections) or on
        a `kubernetes` ApiClient (its pool, TLS and authentication); exactly one."""
        if (api_client is None) == (connection is None):
            raise TypeError("Kube needs an ApiClient or a Connection (exactly one)")
        self.api = api_client
        self._connection = connection
        self._ca_origin = ""
        self._pool: Pool | _ClientPool
        if connection is not None:
            self.host = connection.server
            self._pool = Pool(connection.server, tls=connection.tls,
                              server_name=connection.tls_server_name, size=pool_size)
            self._credentials: kubeconfig.Credentials | None = connection.credentials
            self._ca_origin = connection.ca_origin
        else:
            assert api_client is not None
            self.host = api_client.configuration.host.rstrip("/")
            self._pool = _ClientPool(api_client, self.host)
            self._credentials = None
            ca = api_client.configuration.ssl_ca_cert
            self._ca_origin = f"the CA file {ca}" if ca else "the system's trusted CAs"
        self.timeout = timeout  # seconds an attempt may take in all (connect, send, answer)
        self._resources: dict[str, dict[str, Resource]] = {}
        self._discovering: dict[str, threading.Lock] = {}  # per API version
        self._lock = threading.Lock()
        self.requests = 0  # every request sent, for benchmarks and tests
        self.retry = retry or RetryPolicy()
        self.retries = 0  # requests sent again (see the retry path below)
        # start of the first attempt of the current run of server failures (None: healthy)
        self._failing_since: float | None = None
        # called before every attempt of every request; raises to stop the caller's whole
        # job (the agent's leader election: a job of a replica that may no longer write
        # is abandoned at its next request, read or write; orksync.agent.lease)
        self.gate: Callable[[], None] | None = None
        self.user_agent = ""  # sent instead of the transport's default when set

    def sibling(self, *, timeout: float, retry: RetryPolicy | None = None,
                pool_size: int = 2) -> Kube:
        """Another Kube on the same cluster and credentials with a pool of its own, no
        gate and the given timeout and retries: the leader election's, so that its
        renewals never queue behind the sync's requests nor pass through its gate."""
        if self._connection is not None:
            other = Kube(connection=self._connection, pool_size=pool_size, timeout=timeout,
                         retry=retry)
        else:
            assert self.api is not None
            other = Kube(self.api, timeout=timeout, retry=retry)
        other.user_agent = self.user_agent
        return other

    def check_gate(self) -> None:
        """Raise what the gate raises (a long wait between requests asks this)."""
        if self.gate is not None:
            self.gate()

    @classmethod
    def from_kubeconfig(cls, path: str | Path | None = None, context: str | None = None,
                        *, pool_size: int = 16) -> Kube:
        """The context's cluster (KUBECONFIG or ~/.kube/config when `path` is None),
        through orksync.apply.kubeconfig; through the `kubernetes` client when that
        module says the kubeconfig needs it."""
        try:
            return cls(connection=kubeconfig.load_kubeconfig(path, context),
                       pool_size=pool_size)
        except kubeconfig.Unsupported as why:
            log.debug("kubeconfig: %s; connecting through the kubernetes client", why)
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_kube_config(config_file=str(path) if path else None,
                                        context=context, client_configuration=configuration,
                                        persist_config=False)
        except (k8s_config.ConfigException, OSError, TypeError) as err:
            where = str(path) if path else "KUBECONFIG/~/.kube/config"
            raise ClusterError(f"cannot load kubeconfig: {err}", subject=where) from err
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration))

    @classmethod
    def in_cluster(cls, *, pool_size: int = 16) -> Kube:
        """The pod's service account (token re-read as it rotates), natively; through the
        `kubernetes` client only when a proxy is configured in the environment."""
        try:
            return cls(connection=kubeconfig.in_cluster(), pool_size=pool_size)
        except kubeconfig.Unsupported as why:
            log.debug("in-cluster: %s; connecting through the kubernetes client", why)
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException as err:
            raise ClusterError(f"not running in a cluster: {err}") from err
        configuration.connection_pool_maxsize = pool_size
        return cls(k8s_client.ApiClient(configuration))

    def close(self) -> None:
        """Close the idle connections; a request sent after this makes new ones (on
        orksync's own connection; an ApiClient is closed for good)."""
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
        """Send one request, retried as orksync.apply.retry allows; (status, decoded body).
        `query`: parameters, or a query string already encoded (`?...`). Every request
        passes here (tests observe and interrupt requests at this one point). Raises
        ClusterError with the last failure."""
        if not isinstance(query, str):
            query = _query_string(query or {})
        url = self._pool.prefix + path + query
        payload = None if body is None else _encode_json(body).encode()
        replayable = replay_safe(method, content_type, body)
        gate = self.gate
        first = time.monotonic()
        retry = 0
        while True:
            if gate is not None:
                gate()
            outcome = self._attempt(method, url, payload, content_type, accept)
            if outcome.status and outcome.status < 300:
                return outcome.status, (json.loads(outcome.data) if outcome.data else None)
            delay = self._retry_delay(outcome, retry + 1, first, replayable)
            if delay is None:
                raise outcome.error(method, path, subject, retry + 1,
                                    ca_origin=self._ca_origin, outage=self._outage())
            log.info("%s %s: %s; retry %d/%d in %.2fs", method, path, outcome.summary(),
                     retry + 1, self.retry.attempts - 1, delay)
            time.sleep(delay)
            retry += 1
            with self._lock:
                self.retries += 1

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
             label_selector: str | None = None, limit: int = 500) -> Iterator[dict[str, Any]]:
        """Every object of a kind (paginated), in one namespace or cluster-wide."""
        cont: str | None = None
        while True:
            page = self.request("GET", res.path(namespace), query={
                "labelSelector": label_selector, "limit": limit, "continue": cont})
            for item in page.get("items") or []:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                yield item
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return

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
               precondition_uid: str | None = None) -> Any:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions",
                                "propagationPolicy": propagation}
        if precondition_uid:
            body["preconditions"] = {"uid": precondition_uid}
        return self.request("DELETE", res.path(namespace, name), body=body, subject=subject)

    # --- discovery ----------------------------------------------------------------------

    def resource(self, api_version: str, kind: str, *, refresh: bool = False) -> Resource:
        """The REST resource of a kind; re-discovers once when the kind is unknown."""
        with self._lock:
            known = self._resources.get(api_version)
        if known is None or refresh or kind not in known:
            # one discovery per API version at a time: threads that ask together (the
            # applier's concurrent LISTs) wait for it instead of each sending their own
            with self._lock:
                flight = self._discovering.setdefault(api_version, threading.Lock())
            with flight:
                with self._lock:
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
        with self._lock:
            self._resources[api_version] = found
        return found

    def serves(self, api_version: str, kind: str) -> bool:
        """Whether the discovery cached (no request) has the kind in the API version."""
        with self._lock:
            return kind in (self._resources.get(api_version) or {})

    def forget(self, api_version: str) -> None:
        with self._lock:
            self._resources.pop(api_version, None)

    # --- the retry path (policy: orksync.apply.retry) -------------------------------------

    def _attempt(self, method: str, url: str, payload: bytes | None,
                 content_type: str, accept: str = "application/json") -> _Outcome:
        headers = {"Accept": accept, "Content-Type": content_type}
        if self.user_agent:
            headers["User-Agent"] = self.user_agent
        if self._credentials is not None:
            authorization = self._credentials.authorization()
            if authorization:
                headers["Authorization"] = authorization
        elif self.api is not None:
            self.api.update_params_for_auth(headers, [], ["BearerToken"])
        with self._lock:  # threads send at once (the prefetch, the stage's writes)
            self.requests += 1
        started = time.monotonic()
        try:
            resp = self._pool.request(method, url, payload, headers, self.timeout)
        except TransportError as err:
            self._note_health(started, failed=True)
            return _Outcome(transport=err)
        status = resp.status
        self._note_health(started, failed=status >= 500)
        if status < 300:  # Retry-After is read only where a retry may follow
            return _Outcome(status=status, data=resp.data)
        return _Outcome(status=status, data=resp.data,
                        retry_after=parse_retry_after(resp.headers.get("retry-after")))

    def _note_health(self, started: float, *, failed: bool) -> None:
        """Track since when every request failed (benign races: a flag, not a count)."""
        if not failed:
            self._failing_since = None
        elif self._failing_since is None:
            self._failing_since = started

    def _outage(self) -> float:
        """Seconds for which every request has failed, when that is past the deadline (a
        request then gets no retry); 0.0 otherwise."""
        failing = self._failing_since
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
            # a connection that was never established carried no request
            allowed = not outcome.transport.sent or replayable
        else:
            allowed = retryable_status(outcome.status, replayable=replayable,
                                       body=outcome.data)
        if not allowed or retry >= self.retry.attempts:
            return None
        delay = self.retry.delay(retry, outcome.retry_after)
        now = time.monotonic()
        failing = self._failing_since
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
    handshake cut short). Found among the causes (orksync.apply.transport) and their
    arguments (urllib3, through the `kubernetes` client)."""
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


class _ClientPool:
    """The `kubernetes` ApiClient's urllib3 pool behind the interface of
    orksync.apply.transport.Pool, its errors turned into TransportErrors."""

    prefix = ""  # requests carry the whole URL: the pool manager may be a proxy's

    def __init__(self, api_client: ApiClient, host: str) -> None:
        import urllib3

        self._urllib3 = urllib3
        self._api = api_client
        self._manager = api_client.rest_client.pool_manager
        self._host = host
        self._no_retries = urllib3.Retry(total=False, redirect=False)

    def request(self, method: str, target: str, body: bytes | None,
                headers: Mapping[str, str], timeout: float) -> Response:
        errors = self._urllib3.exceptions
        try:
            resp = self._manager.request(
                method, self._host + target, body=body, headers=dict(headers),
                preload_content=True, timeout=self._urllib3.Timeout(total=timeout),
                retries=self._no_retries, redirect=False)
        except errors.ConnectTimeoutError as err:  # NewConnectionError among them
            raise ConnectFailed(str(err)) from err
        except errors.ReadTimeoutError as err:
            raise AnswerTimeout(str(err)) from err
        except errors.HTTPError as err:
            raise ConnectionLost(f"{type(err).__name__}: {err}") from err
        return Response(resp.status, {"retry-after": resp.headers.get(
            "Retry-After") or ""}, resp.data)

    def close(self) -> None:
        self._api.close()  # its pool manager, and its thread pool if it made one


def _error(status: int, data: bytes, method: str, path: str, subject: str, *,
           suffix: str = "") -> ClusterError:
    reason, message = "", ""
    try:
        doc = json.loads(data)
        reason = str(doc.get("reason") or "")
        message = str(doc.get("message") or "")
    except (ValueError, AttributeError):
        message = data[:MAX_MESSAGE].decode("utf-8", "replace")
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "..."
    text = f"{method} failed: {status} {reason}: {message}".replace(": :", ":") + suffix
    return ClusterError(text, subject=subject or path, status=status, reason=reason)

