"""An in-memory Kubernetes API server on 127.0.0.1 (plain HTTP, reached through a kubeconfig
like any cluster, so tests go through orksync's real client), for fast unit tests of what
the applier, the sync recipe, prune and drift repair decide and send.

It serves discovery (the kinds of `BUILTIN`, and those of every CRD created through it,
served at once with Established and NamesAccepted); GET; LIST (label selectors, pages,
the list's resourceVersion, metadata-only answers); POST (AlreadyExists, generateName, a
missing namespace); PUT (a stale resourceVersion is a Conflict); merge and JSON patches;
server-side apply; DELETE (finalizers hold the object with a deletionTimestamp;
ownerReferences' dependents go with their owner; a uid precondition); `dryRun=All`; the
`status` subresource; WATCH (label-filtered events after a resourceVersion, bookmarks, an
ERROR event of 410 Gone before `compact()`); and a log of every request (`log`).

Server-side apply merges by field manager: a manager owns the fields it applied (map keys
down to scalars; `SET_LISTS` member by member; any other list whole); a field another
manager set to another value is a Conflict unless forced (forcing takes it); a field a
manager stops applying is removed unless another owns it; an update (PUT, patch, POST)
gives its manager the fields it changed. managedFields are written as FieldsV1, without
the "." entries. Simplified against kube-apiserver: no list merge keys (`containers` by
name), no defaulting, schema validation nor admission, dependents deleted in the same
request instead of by a garbage collector, and a namespace's or CRD's objects removed at
once with it. `tests/cluster/test_fakeapi.py` checks it against kube-apiserver.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["BUILTIN", "FakeApiServer", "Kind", "Request"]

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


@dataclass(frozen=True, slots=True)
class Kind:
    """One served kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _k(api: str, kind: str, plural: str, namespaced: bool = True,
       subresources: tuple[str, ...] = ()) -> Kind:
    group, _, version = api.rpartition("/")
    return Kind(group, version, kind, plural, namespaced, subresources)


BUILTIN: tuple[Kind, ...] = (
    _k("v1", "Namespace", "namespaces", False, ("status",)),
    _k("v1", "ConfigMap", "configmaps"),
    _k("v1", "Secret", "secrets"),
    _k("v1", "Service", "services", True, ("status",)),
    _k("v1", "ServiceAccount", "serviceaccounts"),
    _k("v1", "Pod", "pods", True, ("status",)),
    _k("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("status",)),
    _k("v1", "Event", "events"),
    _k("apps/v1", "Deployment", "deployments", True, ("status", "scale")),
    _k("apps/v1", "StatefulSet", "statefulsets", True, ("status", "scale")),
    _k("apps/v1", "DaemonSet", "daemonsets", True, ("status",)),
    _k("batch/v1", "Job", "jobs", True, ("status",)),
    _k("batch/v1", "CronJob", "cronjobs", True, ("status",)),
    _k("networking.k8s.io/v1", "Ingress", "ingresses", True, ("status",)),
    _k("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("status",)),
    _k("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True,
       ("status",)),
    _k("rbac.authorization.k8s.io/v1", "Role", "roles"),
    _k("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    _k("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False),
    _k("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _k("coordination.k8s.io/v1", "Lease", "leases"),
    _k("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions",
       False, ("status",)),
)

# kinds whose objects carry no metadata.generation on the real API server
_NO_GENERATION = {("", "ConfigMap"), ("", "Secret"), ("", "Namespace"), ("", "Service"),
                  ("", "ServiceAccount"), ("", "Event"), ("", "PersistentVolumeClaim"),
                  ("rbac.authorization.k8s.io", "Role"),
                  ("rbac.authorization.k8s.io", "RoleBinding"),
                  ("rbac.authorization.k8s.io", "ClusterRole"),
                  ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
                  ("coordination.k8s.io", "Lease")}
# metadata the server owns: never a field a manager owns, never taken from a write
_SERVER_META = ("uid", "resourceVersion", "generation", "creationTimestamp",
                "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields",
                "selfLink")
_IDENTITY = ("apiVersion", "kind")

Path_ = tuple[str, ...]
# lists whose members are owned one by one (`x-kubernetes-list-type: set`); every other
# list is one atomic field
SET_LISTS: frozenset[Path_] = frozenset({("metadata", "finalizers")})


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any = None

    @property
    def verb(self) -> str:
        """Kubernetes' verb: get, list, watch, create, update, patch, apply, delete."""
        if self.method == "GET":
            if self.query.get("watch") in ("1", "true"):
                return "watch"
            return "list" if self.collection else "get"
        if self.method == "PATCH":
            return "apply" if self.content_type.startswith(APPLY_PATCH) else "patch"
        return {"POST": "create", "PUT": "update", "DELETE": "delete"}.get(self.method,
                                                                           self.method)

    @property
    def collection(self) -> bool:
        """Whether the path names a kind's collection rather than one object."""
        parts = [p for p in self.path.split("/") if p]
        if parts[:1] == ["api"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"]:
            rest = parts[3:]
        else:
            return False
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            rest = rest[2:]
        return len(rest) == 1

    @property
    def discovery(self) -> bool:
        parts = [p for p in self.path.split("/") if p]
        return (parts[:1] == ["api"] and len(parts) <= 2) or \
            (parts[:1] == ["apis"] and len(parts) <= 3)

    @property
    def writes(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str,
                 details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details or {})

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": self.message,
                               "reason": self.reason, "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- field sets --------------------------------------------------------------------------


def _leaves(obj: Mapping[str, Any], prefix: Path_ = ()) -> dict[Path_, Any]:
    """The fields a body sets, each path to its value: map keys down to scalars, lists and
    empty maps whole."""
    out: dict[Path_, Any] = {}
    for key, value in obj.items():
        if not prefix and key in _IDENTITY:
            continue
        if prefix == ("metadata",) and key in ("name", "namespace", *_SERVER_META):
            continue
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            out.update(_leaves(value, path))
        elif path in SET_LISTS and isinstance(value, list) and value:
            for item in value:  # each member a field of its own, named by its value
                out[(*path, f"v:{json.dumps(item)}")] = item
        else:
            out[path] = value
    return out


def _member(path: Path_) -> bool:
    """Whether a path names one member of a set list (`SET_LISTS`)."""
    return len(path) > 1 and path[:-1] in SET_LISTS and path[-1].startswith("v:")


def _get(obj: Any, path: Path_) -> tuple[bool, Any]:
    if _member(path):
        found, members = _get(obj, path[:-1])
        item = json.loads(path[-1][2:])
        return (True, item) if found and isinstance(members, list) and item in members \
            else (False, None)
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return False, None
        obj = obj[key]
    return True, obj


def _set(obj: dict[str, Any], path: Path_, value: Any) -> None:
    if _member(path):
        found, members = _get(obj, path[:-1])
        if not found or not isinstance(members, list):
            members = []
        if value not in members:
            _set(obj, path[:-1], [*members, value])
        return
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = obj[key] = {}
        obj = nxt
    obj[path[-1]] = copy.deepcopy(value)


def _remove(obj: dict[str, Any], path: Path_) -> None:
    """Remove a field, and the maps it leaves empty (not the top level)."""
    if _member(path):
        found, members = _get(obj, path[:-1])
        if found and isinstance(members, list):
            rest = [m for m in members if m != json.loads(path[-1][2:])]
            if rest:
                _set(obj, path[:-1], rest)
            else:
                _remove(obj, path[:-1])
        return
    chain = [obj]
    for key in path[:-1]:
        nxt = chain[-1].get(key)
        if not isinstance(nxt, dict):
            return
        chain.append(nxt)
    chain[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if chain[depth]:
            break
        chain[depth - 1].pop(path[depth - 1], None)


def _fields_v1(paths: set[Path_]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for i, key in enumerate(path):
            member = i == len(path) - 1 and _member(path)
            node = node.setdefault(key if member else f"f:{key}", {})
    return tree


def _diff_paths(before: Mapping[str, Any], after: Mapping[str, Any]) -> set[Path_]:
    """The leaf paths whose value an update changed or added."""
    old, new = _leaves(before), _leaves(after)
    return {p for p, v in new.items() if p not in old or old[p] != v}


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902: add, remove, replace, test."""
    doc = copy.deepcopy(doc)
    for op in ops:
        keys = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for key in keys[:-1]:
            parent = parent[int(key)] if isinstance(parent, list) else parent[key]
        last = keys[-1]
        kind = op["op"]
        if kind == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op.get("value"):
                raise ApiError(422, "Invalid", f"the test of {op['path']} failed")
        elif kind == "remove":
            if isinstance(parent, list):
                parent.pop(int(last))
            elif last in parent:
                del parent[last]
            else:
                raise ApiError(422, "Invalid", f"no field at {op['path']} to remove")
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif kind == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                parent[last] = op["value"]
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch operation {kind!r}")
    return doc


# --- label selectors -------------------------------------------------------------------------


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    """Whether `labels` match a label selector (=, ==, !=, in, notin, exists, !exists)."""
    for term in _split_selector(selector or ""):
        if " notin " in term or " in " in term:
            negate = " notin " in term
            key, _, rest = term.partition(" notin " if negate else " in ")
            values = {v.strip() for v in rest.strip().strip("()").split(",")}
            key = key.strip()
            inside = key in labels and labels[key] in values
            if inside == negate:
                return False
        elif "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, _, value = term.partition("==" if "==" in term else "=")
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field_matches(selector: str | None, obj: Mapping[str, Any]) -> bool:
    for term in _split_selector(selector or ""):
        negate = "!=" in term
        key, _, value = term.partition("!=" if negate else "==" if "==" in term else "=")
        found, live = _get(obj, tuple(key.strip().split(".")))
        if (str(live) == value.strip() if found else value.strip() == "") == negate:
            return False
    return True


# --- the store ---------------------------------------------------------------------------------


@dataclass
class _Stored:
    kind: Kind
    obj: dict[str, Any]
    # manager -> (operation, subresource) -> fields
    managers: dict[tuple[str, str, str], set[Path_]] = field(default_factory=dict)
    times: dict[tuple[str, str, str], str] = field(default_factory=dict)


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.kinds: dict[tuple[str, str, str], Kind] = {}  # (group, version, plural)
        self.objects: dict[tuple[str, str, str, str], _Stored] = {}  # group, plural, ns, name
        self.rv = 100
        self.events: list[tuple[int, str, Kind, dict[str, Any]]] = []
        self.compacted = 0

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv


class FakeApiServer:
    """The fake API server; a context manager that serves in a thread while open."""

    def __init__(self, *, kinds: tuple[Kind, ...] = BUILTIN, namespaces: tuple[str, ...] = (
            "default", "kube-system"), bookmark_every: float = 0.2) -> None:
        self.store = _Store()
        for kind in kinds:
            self.store.kinds[(kind.group, kind.version, kind.plural)] = kind
        self.log: list[Request] = []
        self.bookmark_every = bookmark_every
        self._closing = threading.Event()
        self._watch_epoch = 0  # `end_watches` ends the watches of earlier epochs
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None
        for name in namespaces:
            self.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # --- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeApiServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        with self.store.lock:
            self.store.lock.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig naming this server (plain http, no credentials)."""
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        }), encoding="utf-8")
        return path

    # --- what tests read and do ------------------------------------------------------------

    def requests(self, *, verb: str | None = None, writes: bool | None = None,
                 path_contains: str = "") -> list[Request]:
        """The logged requests, filtered."""
        return [r for r in list(self.log)
                if (verb is None or r.verb == verb)
                and (writes is None or r.writes == writes)
                and path_contains in r.path]

    def clear_log(self) -> None:
        self.log.clear()

    def seed(self, obj: Mapping[str, Any], *, manager: str = "seed") -> dict[str, Any]:
        """Store an object as a create by `manager` would (no request logged)."""
        kind = self._kind_of(str(obj["apiVersion"]), str(obj["kind"]))
        with self.store.lock:
            return self._create(kind, copy.deepcopy(dict(obj)), manager=manager,
                                dry_run=False, namespace=str(
                                    (obj.get("metadata") or {}).get("namespace") or ""))

    def object(self, api_version: str, kind: str, namespace: str, name: str
               ) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        k = self._kind_of(api_version, kind)
        with self.store.lock:
            stored = self.store.objects.get((k.group, k.plural,
                                             namespace if k.namespaced else "", name))
            return self._render(stored) if stored else None

    def edit(self, api_version: str, kind: str, namespace: str, name: str,
             patch: Mapping[str, Any], *, manager: str = "kubectl-edit") -> dict[str, Any]:
        """A JSON merge patch as a hand edit by `manager` (no request logged)."""
        k = self._kind_of(api_version, kind)
        with self.store.lock:
            stored = self._existing(k, namespace if k.namespaced else "", name)
            return self._update(stored, _merge_patch(stored.obj, dict(patch)),
                                manager=manager, subresource="", dry_run=False)

    def end_watches(self) -> None:
        """End every open WATCH, as the API server does at its timeout: watchers
        reconnect from the last resourceVersion they saw."""
        with self.store.lock:
            self._watch_epoch += 1
            self.store.lock.notify_all()

    def compact(self) -> None:
        """Forget every event so far: a WATCH from any resourceVersion handed out until
        now is 410 Gone (a LIST after it hands out one that is not)."""
        with self.store.lock:
            self.store.compacted = self.store.next_rv()
            self.store.events.clear()

    def _kind_of(self, api_version: str, kind: str) -> Kind:
        group, _, version = api_version.rpartition("/")
        for k in self.store.kinds.values():
            if (k.group, k.version, k.kind) == (group, version, kind):
                return k
        raise KeyError(f"{kind} ({api_version}) is not served")

    # --- request dispatch --------------------------------------------------------------------

    def handle(self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes
               ) -> tuple[int, Any] | Iterator[bytes]:
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        content_type = headers.get("content-type", "") or ""
        decoded: Any = None
        if body:
            try:
                decoded = json.loads(body)
            except ValueError:
                return 400, ApiError(400, "BadRequest", "the body is not JSON").status()
        request = Request(method, parts.path, query, content_type.split(";")[0].strip(),
                          decoded)
        self.log.append(request)
        accept = headers.get("accept", "") or ""
        try:
            return self._dispatch(request, accept)
        except ApiError as err:
            return err.code, err.status()

    def _dispatch(self, req: Request, accept: str) -> tuple[int, Any] | Iterator[bytes]:
        segs = [p for p in req.path.split("/") if p]
        if req.method == "GET" and req.path in ("/healthz", "/readyz", "/livez"):
            return 200, "ok"
        if req.method == "GET" and req.path == "/version":
            return 200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0-fake"}
        if segs == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"]}
        if segs == ["apis"]:
            return 200, self._group_list()
        if segs[:1] == ["api"] and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 3:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if req.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "not allowed")
            return 200, self._resource_list(group, version)
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        kind = self.store.kinds.get((group, version, plural))
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not kind.namespaced:
            namespace = ""
        elif name and not namespace:  # a namespaced object has no cluster-wide path
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if subresource and subresource not in kind.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        partial = "as=PartialObjectMetadata" in accept
        dry_run = req.query.get("dryRun") == "All"
        manager = req.query.get("fieldManager", "")
        with self.store.lock:
            if req.method == "GET" and not name:
                if req.query.get("watch") in ("1", "true"):
                    return self._watch(kind, namespace, req.query)
                return 200, self._list(kind, namespace, req.query, partial)
            if req.method == "POST" and not name:
                body = self._body(req, kind)
                meta = body.setdefault("metadata", {})
                if kind.namespaced:
                    meta["namespace"] = namespace or meta.get("namespace") or ""
                out = self._create(kind, body, manager=manager or "unknown", dry_run=dry_run,
                                   namespace=namespace)
                return 201, self._answer(out, partial)
            if not name:
                raise ApiError(405, "MethodNotAllowed", "not allowed on a collection")
            if req.method == "GET":
                return 200, self._render(self._existing(kind, namespace, name))
            if req.method == "DELETE":
                return 200, self._delete(kind, namespace, name, req.body or {}, dry_run)
            if req.method == "PUT":
                stored = self._existing(kind, namespace, name)
                body = self._body(req, kind)
                sent_rv = (body.get("metadata") or {}).get("resourceVersion")
                if sent_rv and sent_rv != stored.obj["metadata"]["resourceVersion"]:
                    raise self._conflict(kind, name)
                return 200, self._answer(self._update(
                    stored, body, manager=manager or "unknown", subresource=subresource,
                    dry_run=dry_run, replace=True), partial)
            if req.method == "PATCH":
                if req.content_type == APPLY_PATCH:
                    if not manager:
                        raise ApiError(422, "Invalid",
                                       "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                       "Required value: is required for apply patch")
                    code, out = self._apply(kind, namespace, name, self._body(req, kind),
                                            manager=manager, subresource=subresource,
                                            force=req.query.get("force") == "true",
                                            dry_run=dry_run)
                    return code, self._answer(out, partial)
                stored = self._existing(kind, namespace, name)
                current = self._render(stored)
                if req.content_type == MERGE_PATCH:
                    patched = _merge_patch(current, req.body)
                elif req.content_type == JSON_PATCH:
                    patched = _json_patch(current, req.body or [])
                elif req.content_type == STRATEGIC_PATCH and kind.builtin:
                    patched = _merge_patch(current, req.body)  # no merge keys (simplified)
                else:
                    raise ApiError(415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format - "
                                   f"accepted media types include: {MERGE_PATCH}, "
                                   f"{JSON_PATCH}, {APPLY_PATCH}")
                return 200, self._answer(self._update(
                    stored, patched, manager=manager or "unknown", subresource=subresource,
                    dry_run=dry_run, replace=True), partial)
        raise ApiError(405, "MethodNotAllowed", f"{req.method} is not allowed")

    # --- discovery -----------------------------------------------------------------------------

    def _group_list(self) -> dict[str, Any]:
        versions: dict[str, list[str]] = {}
        for k in self.store.kinds.values():
            if k.group and k.version not in versions.setdefault(k.group, []):
                versions[k.group].append(k.version)
        groups = []
        for group, vs in sorted(versions.items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in vs]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        kinds = [k for k in self.store.kinds.values() if (k.group, k.version) == (group, version)]
        if not kinds:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resources: list[dict[str, Any]] = []
        for k in kinds:
            resources.append({"name": k.plural, "singularName": k.kind.lower(),
                              "namespaced": k.namespaced, "kind": k.kind,
                              "verbs": ["create", "delete", "deletecollection", "get", "list",
                                        "patch", "update", "watch"]})
            for sub in k.subresources:
                resources.append({"name": f"{k.plural}/{sub}", "singularName": "",
                                  "namespaced": k.namespaced,
                                  "kind": "Scale" if sub == "scale" else k.kind,
                                  "verbs": ["get", "patch", "update"]})
        api_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version,
                "resources": resources}

    # --- reads -----------------------------------------------------------------------------------

    def _existing(self, kind: Kind, namespace: str, name: str) -> _Stored:
        stored = self.store.objects.get((kind.group, kind.plural, namespace, name))
        if stored is None:
            raise ApiError(404, "NotFound", f'{self._resource_name(kind)} "{name}" not found',
                           {"name": name, "group": kind.group, "kind": kind.plural})
        return stored

    @staticmethod
    def _resource_name(kind: Kind) -> str:
        return f"{kind.plural}.{kind.group}" if kind.group else kind.plural

    def _render(self, stored: _Stored) -> dict[str, Any]:
        obj = copy.deepcopy(stored.obj)
        entries = []
        for (manager, operation, sub), paths in sorted(stored.managers.items()):
            if not paths:
                continue
            entry: dict[str, Any] = {
                "manager": manager, "operation": operation,
                "apiVersion": stored.kind.api_version,
                "time": stored.times.get((manager, operation, sub), _now()),
                "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(paths)}
            if sub:
                entry["subresource"] = sub
            entries.append(entry)
        if entries:
            obj["metadata"]["managedFields"] = entries
        return obj

    def _answer(self, obj: dict[str, Any], partial: bool) -> dict[str, Any]:
        if not partial:
            return obj
        return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {}}

    def _list(self, kind: Kind, namespace: str, query: Mapping[str, str], partial: bool
              ) -> dict[str, Any]:
        selector = query.get("labelSelector")
        fields = query.get("fieldSelector")
        keys = sorted(k for k in self.store.objects if k[:2] == (kind.group, kind.plural)
                      and (not namespace or k[2] == namespace))
        cont = query.get("continue") or ""
        start = 0
        list_rv = self.store.rv
        if cont:
            try:
                token = json.loads(base64.b64decode(cont))
                start, list_rv = int(token["start"]), int(token["rv"])
            except (ValueError, KeyError, TypeError) as err:
                raise ApiError(400, "BadRequest", "continue key is not valid") from err
        items = []
        for key in keys:
            stored = self.store.objects[key]
            meta = stored.obj["metadata"]
            if not selector_matches(selector, meta.get("labels") or {}):
                continue
            if not _field_matches(fields, stored.obj):
                continue
            items.append(stored)
        limit = int(query.get("limit") or 0)
        page = items[start:start + limit] if limit else items[start:]
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if limit and start + limit < len(items):
            metadata["continue"] = base64.b64encode(json.dumps(
                {"start": start + limit, "rv": list_rv}).encode()).decode()
            metadata["remainingItemCount"] = len(items) - start - limit
        out_items = []
        for stored in page:
            obj = self._render(stored)
            if partial:
                obj = {"metadata": obj["metadata"]}
            elif kind.builtin:  # the real server leaves them out of a built-in kind's list
                for key in _IDENTITY:
                    obj.pop(key, None)
            out_items.append(obj)
        list_kind = "PartialObjectMetadataList" if partial else f"{kind.kind}List"
        return {"kind": list_kind,
                "apiVersion": "meta.k8s.io/v1" if partial else kind.api_version,
                "metadata": metadata, "items": out_items}

    def _watch(self, kind: Kind, namespace: str, query: Mapping[str, str]) -> Iterator[bytes]:
        selector = query.get("labelSelector")
        since = int(query.get("resourceVersion") or 0) if (
            query.get("resourceVersion") or "0").isdigit() else 0
        timeout = float(query.get("timeoutSeconds") or 300)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        store = self.store

        def line(event: dict[str, Any]) -> bytes:
            return json.dumps(event, separators=(",", ":")).encode() + b"\n"

        def stream() -> Iterator[bytes]:
            with store.lock:
                if since and since < store.compacted:
                    gone = ApiError(410, "Expired", f"too old resource version: {since} "
                                                    f"({store.compacted})").status()
                else:
                    gone = None
                start = since or store.rv
                epoch = self._watch_epoch
            if gone is not None:
                yield line({"type": "ERROR", "object": gone})
                return
            deadline = _monotonic() + timeout
            last_bookmark = _monotonic()
            while not self._closing.is_set() and epoch == self._watch_epoch:
                out: list[bytes] = []
                with store.lock:  # collected under the lock, sent without it
                    for rv, etype, k, obj in store.events:
                        if rv <= start or k != kind:
                            continue
                        start = rv
                        meta = obj.get("metadata") or {}
                        if namespace and meta.get("namespace") != namespace:
                            continue
                        if selector_matches(selector, meta.get("labels") or {}):
                            out.append(line({"type": etype, "object": obj}))
                    now = _monotonic()
                    if not out and now < deadline and not (
                            bookmarks and now - last_bookmark >= self.bookmark_every):
                        store.lock.wait(min(self.bookmark_every, deadline - now))
                        continue
                    if bookmarks and now - last_bookmark >= self.bookmark_every:
                        last_bookmark = now
                        start = max(start, store.rv)
                        out.append(line({"type": "BOOKMARK", "object": {
                            "kind": kind.kind, "apiVersion": kind.api_version,
                            "metadata": {"resourceVersion": str(start)}}}))
                yield from out
                if _monotonic() >= deadline:
                    return

        return stream()

    # --- writes ----------------------------------------------------------------------------------

    def _body(self, req: Request, kind: Kind) -> dict[str, Any]:
        body = req.body
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body is not an object")
        if body.get("kind") not in (None, kind.kind) or \
                body.get("apiVersion") not in (None, kind.api_version):
            raise ApiError(400, "BadRequest",
                           f"the body names {body.get('kind')} ({body.get('apiVersion')}), "
                           f"the path {kind.kind} ({kind.api_version})")
        return copy.deepcopy(body)

    def _conflict(self, kind: Kind, name: str) -> ApiError:
        return ApiError(409, "Conflict",
                        f'Operation cannot be fulfilled on {self._resource_name(kind)} '
                        f'"{name}": the object has been modified; please apply your changes '
                        f"to the latest version and try again")

    def _record(self, etype: str, stored: _Stored) -> None:
        self.store.events.append((int(stored.obj["metadata"]["resourceVersion"]), etype,
                                  stored.kind, self._render(stored)))
        self.store.lock.notify_all()

    def _check_namespace(self, kind: Kind, namespace: str) -> None:
        if not kind.namespaced:
            return
        if not namespace:
            raise ApiError(422, "Invalid", "metadata.namespace: Required value")
        ns = self.store.objects.get(("", "namespaces", "", namespace))
        if ns is None:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found',
                           {"name": namespace, "kind": "namespaces"})
        if ns.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden",
                           f"unable to create new content in namespace {namespace} because "
                           f"it is being terminated")

    def _normalise(self, kind: Kind, obj: dict[str, Any]) -> None:
        """What the API server does to every stored body of some kinds."""
        if (kind.group, kind.kind) == ("", "Secret") and "stringData" in obj:
            data = obj.setdefault("data", {})
            for key, value in (obj.pop("stringData") or {}).items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        if (kind.group, kind.kind) == ("", "Namespace"):
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {"phase": "Active"})

    def _create(self, kind: Kind, body: dict[str, Any], *, manager: str, dry_run: bool,
                namespace: str, operation: str = "Update") -> dict[str, Any]:
        applied = set(_leaves(body))  # before the server's conversions (`stringData`)
        meta = body.setdefault("metadata", {})
        if kind.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or ""
            namespace = meta["namespace"]
        else:
            meta.pop("namespace", None)
            namespace = ""
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name")
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value: name or "
                                           "generateName is required")
        self._check_namespace(kind, namespace)
        key = (kind.group, kind.plural, namespace, name)
        if key in self.store.objects:
            raise ApiError(409, "AlreadyExists",
                           f'{self._resource_name(kind)} "{name}" already exists',
                           {"name": name, "group": kind.group, "kind": kind.plural})
        for server in _SERVER_META:
            meta.pop(server, None)
        body["apiVersion"], body["kind"] = kind.api_version, kind.kind
        self._normalise(kind, body)
        if kind.subresources and "status" in kind.subresources and \
                (kind.group, kind.kind) != ("", "Namespace"):
            body.pop("status", None)  # written through the status subresource only
        stored = _Stored(kind, body)
        fields = {p for p in applied if p[0] != "status" or "status" in body}
        stored.managers[(manager, operation, "")] = fields
        stored.times[(manager, operation, "")] = _now()
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        if (kind.group, kind.kind) not in _NO_GENERATION:
            meta["generation"] = 1
        if dry_run:
            return self._render(stored)
        meta["resourceVersion"] = str(self.store.next_rv())
        self.store.objects[key] = stored
        if (kind.group, kind.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            self._establish(stored)
        self._record("ADDED", stored)
        return self._render(stored)

    def _establish(self, crd: _Stored) -> None:
        """Serve a CRD's kinds and report it Established, as the apiextensions server
        does (at once here)."""
        spec = crd.obj.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            subs = tuple(s for s in ("status", "scale")
                         if s in (version.get("subresources") or {}))
            kind = Kind(str(spec.get("group")), str(version["name"]), str(names.get("kind")),
                        str(names.get("plural")), spec.get("scope") != "Cluster", subs,
                        builtin=False)
            self.store.kinds[(kind.group, kind.version, kind.plural)] = kind
        now = _now()
        crd.obj["status"] = {
            "acceptedNames": dict(names), "storedVersions": [
                v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted",
                 "lastTransitionTime": now}]}

    def _bump(self, stored: _Stored, before: Mapping[str, Any]) -> None:
        meta = stored.obj["metadata"]
        if "generation" in meta:
            def spec_of(o: Mapping[str, Any]) -> dict[str, Any]:
                return {k: v for k, v in o.items() if k not in ("metadata", "status")}
            if spec_of(before) != spec_of(stored.obj):
                meta["generation"] = int(meta["generation"]) + 1
        meta["resourceVersion"] = str(self.store.next_rv())

    def _take(self, stored: _Stored, key: tuple[str, str, str], paths: set[Path_]) -> None:
        """Give `paths` to the manager `key`, taking them from every other manager."""
        for other, owned in stored.managers.items():
            if other != key:
                owned -= paths
        stored.managers.setdefault(key, set()).update(paths)

    def _scoped(self, stored: _Stored, subresource: str, body: dict[str, Any]
                ) -> dict[str, Any]:
        """The object a write to the main resource or its status makes: a status write
        changes only `status`; a main write leaves `status` as it is when the kind has a
        status subresource."""
        current = stored.obj
        has_status = "status" in stored.kind.subresources and \
            (stored.kind.group, stored.kind.kind) != ("", "Namespace")
        if subresource == "status":
            out = copy.deepcopy(current)
            if "status" in body:
                out["status"] = body["status"]
            else:
                out.pop("status", None)
            return out
        out = copy.deepcopy(body)
        if has_status:
            out.pop("status", None)
            if "status" in current:
                out["status"] = copy.deepcopy(current["status"])
        return out

    def _update(self, stored: _Stored, body: dict[str, Any], *, manager: str,
                subresource: str, dry_run: bool, replace: bool = True) -> dict[str, Any]:
        """PUT or a patch: `body` is the whole new object."""
        meta = body.setdefault("metadata", {})
        old_meta = stored.obj["metadata"]
        for server in _SERVER_META:
            if server in old_meta:
                meta[server] = old_meta[server]
            else:
                meta.pop(server, None)
        meta["name"], body["apiVersion"], body["kind"] = \
            old_meta["name"], stored.kind.api_version, stored.kind.kind
        if "namespace" in old_meta:
            meta["namespace"] = old_meta["namespace"]
        new = self._scoped(stored, subresource, body)
        self._normalise(stored.kind, new)
        if old_meta.get("deletionTimestamp"):
            added = set(new["metadata"].get("finalizers") or []) - \
                set(old_meta.get("finalizers") or [])
            if added:
                raise ApiError(422, "Invalid", "metadata.finalizers: Forbidden: no new "
                                               "finalizers can be added if the object is "
                                               "being deleted")
        return self._commit(stored, new, (manager, "Update", subresource),
                            _diff_paths(stored.obj, new), dry_run)

    def _commit(self, stored: _Stored, new: dict[str, Any], key: tuple[str, str, str],
                changed: set[Path_], dry_run: bool, owned: set[Path_] | None = None
                ) -> dict[str, Any]:
        if dry_run:
            shadow = _Stored(stored.kind, copy.deepcopy(new),
                             {k: set(v) for k, v in stored.managers.items()},
                             dict(stored.times))
            self._account(shadow, key, changed, owned)
            if shadow.obj != stored.obj or shadow.managers != stored.managers:
                shadow.times[key] = stored.times.get(key) if shadow.obj == stored.obj and \
                    shadow.managers.get(key) == stored.managers.get(key) else _now()
            return self._render(shadow)
        before = stored.obj
        old_managers = {k: set(v) for k, v in stored.managers.items()}
        stored.obj = new
        self._account(stored, key, changed, owned)
        # fields nobody owns any more are left alone by updates (they own the whole body)
        if stored.obj == before and stored.managers == old_managers:
            return self._render(stored)  # a no-op write: nothing changes, not even the rv
        if stored.managers.get(key) != old_managers.get(key) or stored.obj != before:
            stored.times[key] = _now()
        self._bump(stored, before)
        meta = stored.obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(stored)
            return self._render(stored)
        self._record("MODIFIED", stored)
        return self._render(stored)

    def _account(self, stored: _Stored, key: tuple[str, str, str], changed: set[Path_],
                 owned: set[Path_] | None) -> None:
        if owned is None:  # an update: its manager takes what it changed
            self._take(stored, key, changed)
            live = set(_leaves(stored.obj))
            for paths in stored.managers.values():
                paths &= live
        else:  # an apply: its manager owns exactly what it applied, sharing the fields
            # it set to the value another manager set; forced ones are taken (`changed`)
            self._take(stored, key, changed)
            stored.managers[key] = set(owned)
        for k in [k for k, v in stored.managers.items() if not v]:
            del stored.managers[k]

    def _apply(self, kind: Kind, namespace: str, name: str, body: dict[str, Any], *,
               manager: str, subresource: str, force: bool, dry_run: bool
               ) -> tuple[int, dict[str, Any]]:
        meta = body.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise ApiError(400, "BadRequest", "the name of the object does not match the "
                                              "name on the URL")
        meta["name"] = name
        key = (manager, "Apply", subresource)
        stored = self.store.objects.get((kind.group, kind.plural, namespace, name))
        if stored is None:
            if subresource:
                raise ApiError(404, "NotFound",
                               f'{self._resource_name(kind)} "{name}" not found')
            out = self._create(kind, body, manager=manager, dry_run=dry_run,
                               namespace=namespace, operation="Apply")
            return 201, out
        # a manager owns the fields of the configuration it applied (a Secret's
        # `stringData` too); the object gets them as the server converts them
        owned = self._applied_fields(kind, body, subresource)
        self._normalise(kind, body)
        applied = self._applied_fields(kind, body, subresource)
        current = stored.obj
        conflicts = []
        for path, value in owned.items():
            found, live = _get(current, path)
            for other, paths in stored.managers.items():
                if other == key or path not in paths:
                    continue
                if found and live != value:
                    conflicts.append((other[0], path))
        if conflicts and not force:
            text = "; ".join(f'conflict with "{m}": .{".".join(p)}' for m, p in conflicts)
            raise ApiError(409, "Conflict",
                           f"Apply failed with {len(conflicts)} conflict"
                           f"{'s' if len(conflicts) > 1 else ''}: {text}",
                           {"causes": [{"reason": "FieldManagerConflict",
                                        "message": f'conflict with "{m}"',
                                        "field": "." + ".".join(p)} for m, p in conflicts]})
        new = copy.deepcopy(current)
        previous = stored.managers.get(key, set())
        others = set().union(*(v for k, v in stored.managers.items() if k != key)) \
            if len(stored.managers) > (1 if key in stored.managers else 0) else set()
        if force:
            others -= {p for _, p in conflicts}
        for path in previous - set(owned) - others:
            _remove(new, path)
        for path, value in applied.items():
            _set(new, path, value)
        if new.get("metadata", {}).get("deletionTimestamp"):
            added = set(new["metadata"].get("finalizers") or []) - \
                set(current["metadata"].get("finalizers") or [])
            if added:
                raise ApiError(422, "Invalid", "metadata.finalizers: Forbidden: no new "
                                               "finalizers can be added if the object is "
                                               "being deleted")
        taken = {p for _, p in conflicts}
        return 200, self._commit(stored, new, key, taken, dry_run, owned=set(owned))

    @staticmethod
    def _applied_fields(kind: Kind, body: Mapping[str, Any], subresource: str
                        ) -> dict[Path_, Any]:
        """The fields an apply sets: the status alone through the status subresource;
        everything but the status through the main resource when the kind has one."""
        if subresource:
            return _leaves({"status": body.get("status", {})})
        fields = _leaves(body)
        if "status" in kind.subresources and (kind.group, kind.kind) != ("", "Namespace"):
            fields = {p: v for p, v in fields.items() if p[0] != "status"}
        return fields

    def _delete(self, kind: Kind, namespace: str, name: str, options: Mapping[str, Any],
                dry_run: bool) -> dict[str, Any]:
        stored = self._existing(kind, namespace, name)
        uid = ((options.get("preconditions") or {}).get("uid"))
        meta = stored.obj["metadata"]
        if uid and uid != meta["uid"]:
            raise ApiError(409, "Conflict",
                           f"Operation cannot be fulfilled on {self._resource_name(kind)} "
                           f'"{name}": Precondition failed: UID in precondition: {uid}, UID '
                           f"in object meta: {meta['uid']}")
        if dry_run:
            return self._render(stored)
        policy = options.get("propagationPolicy") or "Background"
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and self._dependents(stored):
            finalizers.append("foregroundDeletion")
        if finalizers:
            if not meta.get("deletionTimestamp"):
                meta["finalizers"] = finalizers
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 0
                meta["resourceVersion"] = str(self.store.next_rv())
                self._record("MODIFIED", stored)
            if "foregroundDeletion" in finalizers:
                self._cascade(stored)
                meta["finalizers"] = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
                if not meta["finalizers"]:
                    meta["resourceVersion"] = str(self.store.next_rv())
                    self._remove(stored)
            return self._render(stored)
        meta["resourceVersion"] = str(self.store.next_rv())
        self._remove(stored, orphan=policy == "Orphan")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": kind.group, "kind": kind.plural,
                            "uid": meta["uid"]}} if kind.builtin else self._render(stored)

    def _dependents(self, owner: _Stored) -> list[_Stored]:
        uid = owner.obj["metadata"]["uid"]
        return [s for s in list(self.store.objects.values())
                if any(r.get("uid") == uid
                       for r in s.obj["metadata"].get("ownerReferences") or [])]

    def _cascade(self, owner: _Stored) -> None:
        for child in self._dependents(owner):
            meta = child.obj["metadata"]
            key = (child.kind.group, child.kind.plural, meta.get("namespace", ""), meta["name"])
            if key not in self.store.objects:
                continue
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = _now()
                    meta["resourceVersion"] = str(self.store.next_rv())
                    self._record("MODIFIED", child)
            else:
                meta["resourceVersion"] = str(self.store.next_rv())
                self._remove(child)

    def _remove(self, stored: _Stored, *, orphan: bool = False) -> None:
        meta = stored.obj["metadata"]
        key = (stored.kind.group, stored.kind.plural, meta.get("namespace", ""), meta["name"])
        if self.store.objects.pop(key, None) is None:
            return
        self._record("DELETED", stored)
        kind = stored.kind
        if (kind.group, kind.kind) == ("", "Namespace"):
            for other in [s for k, s in self.store.objects.items() if k[2] == meta["name"]]:
                other.obj["metadata"]["finalizers"] = []
                other.obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
                self._remove(other)
        elif (kind.group, kind.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
            spec = stored.obj.get("spec") or {}
            group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
            for other in [s for k, s in self.store.objects.items() if k[:2] == (group, plural)]:
                other.obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
                self._remove(other)
            for k in [k for k in self.store.kinds if (k[0], k[2]) == (group, plural)]:
                del self.store.kinds[k]
        if not orphan:
            self._cascade(stored)


def _monotonic() -> float:
    return time.monotonic()


def _handler(server: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in separate writes: with Nagle's algorithm the body
        # waits for the client's delayed acknowledgement of the headers
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request log is FakeApiServer.log

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            outcome = server.handle(self.command, self.path, headers, body)
            if isinstance(outcome, tuple):
                code, doc = outcome
                payload = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain" if isinstance(doc, str)
                                 else "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for piece in outcome:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler
