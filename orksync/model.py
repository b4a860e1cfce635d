"""The values that flow through the pipeline: identities, rendered objects, change sets.

Pure data. Frozen, slotted, keyword-only dataclasses; StrEnums whose values are the words
users see in logs and on the command line.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class ObjRef:
    """The identity of a Kubernetes object. `str()` is the one formatter used everywhere:
    `Deployment/web/api`, `ClusterRole/admin` (cluster-scoped), `Website.demo.io/default/x`."""

    api_version: str
    kind: str
    namespace: str = ""
    name: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        kind = self.kind
        if self.group and not _is_builtin_group(self.group):
            kind = f"{self.kind}.{self.group}"
        if self.namespace:
            return f"{kind}/{self.namespace}/{self.name}"
        return f"{kind}/{self.name}"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjRef:
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )


def copy_tree(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """`copy.deepcopy` of what YAML and JSON give (dicts, lists, scalars), with the same
    result (insertion order, and a list or map that appears twice, from a YAML alias, still
    shared once in the copy) at a fraction of the cost: the render copies every custom
    resource's data several times. Any other type goes to `copy.deepcopy` itself."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return value
    if memo is None:
        memo = {}
    done = memo.get(id(value))
    if done is not None:
        return done
    if kind is dict:
        out: Any = {}
        memo[id(value)] = out
        for k, v in value.items():
            out[copy_tree(k, memo)] = copy_tree(v, memo)
        return out
    if kind is list:
        out = []
        memo[id(value)] = out
        out.extend([copy_tree(v, memo) for v in value])
        return out
    return copy.deepcopy(value, memo)


_BUILTIN_GROUPS = frozenset({
    "apps", "batch", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
    "apiextensions.k8s.io", "coordination.k8s.io", "storage.k8s.io", "events.k8s.io",
})


def _is_builtin_group(group: str) -> bool:
    return group in _BUILTIN_GROUPS


# The label every object orksync writes carries; children are listed and pruned by it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "orksync"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
OWNER_ANNOTATION = "orksync.io/owner"  # the owning custom resource, `str(ObjRef)`
OWNER_LABEL = "orkestra-owner"  # the owning custom resource's name (Orkestra's label)
# With N > 1 agent shards, every object shard I writes carries `I-of-N` under this label,
# and that shard's watches select it (orksync.agent.shard)
SHARD_LABEL = "orksync.io/shard"


def is_managed(obj: Mapping[str, Any]) -> bool:
    """Whether a live object carries orksync's label (what MANAGED_SELECTOR selects)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(MANAGED_BY_LABEL) == MANAGED_BY)


class WritePolicy(StrEnum):
    """How the applier writes one object. Travels with the rendered object."""

    CREATE = "create-if-absent"  # onCreate without reconcile: create when missing, else leave
    APPLY = "apply"  # onReconcile or reconcile: true: server-side apply every sync
    CREATE_ONLY = "create-only"  # Jobs: create when missing, never update


class Action(StrEnum):
    """What happened to one object in one run."""

    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    # the live object is being deleted (a deletionTimestamp, held by finalizers): nothing
    # is written to it; the first sync after it is gone creates it again
    WAITING = "waiting"
    DELETED = "deleted"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """Where a rendered object came from, for reviews, errors and the index."""

    file: str
    katalog: str = ""
    crd: str = ""
    cr: str = ""
    entry: str = ""  # e.g. onCreate.deployments[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedObject:
    """One manifest as rendered: the object body, its write policy and origin.

    `owner` is the identity of the custom resource that owns it (None for CRDs and the
    custom resources themselves). `stage` orders the apply: lower first."""

    ref: ObjRef
    body: Mapping[str, Any]
    policy: WritePolicy
    origin: Origin
    stage: int
    owner: ObjRef | None = None
    # Instructions the applier resolves against the live cluster (generated values, once,
    # rotation, TLS, copies). Written to index.yaml, never into the object itself.
    directives: Mapping[str, Any] = field(default_factory=dict)


# The stages of the repository's plain manifests (objects no Katalog handles, applied as
# they are): after the CRDs (stage 0), before the custom resources (5) that may need them;
# Namespaces first, then what workloads read (Secrets, ConfigMaps, RBAC), then the rest
# (orksync.render.engine.plain_object). Here, not in the render, so that the applier, the
# prune and the rendered directory's reader tell a plain object from a custom resource
# (neither has an owner) without importing the render package.
STAGE_PLAIN_NAMESPACES = 1
STAGE_PLAIN_SETUP = 2
STAGE_PLAIN = 3
PLAIN_STAGES = range(STAGE_PLAIN_NAMESPACES, STAGE_PLAIN + 1)


def is_plain(obj: RenderedObject) -> bool:
    """Whether a rendered object is one of the repository's plain manifests."""
    return obj.owner is None and obj.stage in PLAIN_STAGES


# The directive on a child whose kind's scope was unknown at render time
# (orksync.render.guard): the reason to refuse it if the API server says the kind is
# cluster-scoped (orksync.apply.engine). Here, not in the guard, so the applier does not
# import the render package.
SCOPE_DIRECTIVE = "refuseIfClusterScoped"
# On a custom resource: the ServiceAccount (`namespace/name`) its children are written as,
# from its Katalog entry's serviceAccountName (orksync.apply.impersonation)
SERVICE_ACCOUNT_DIRECTIVE = "serviceAccount"


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedSet:
    """Everything one render produced, in apply order, plus the inputs it refused."""

    objects: tuple[RenderedObject, ...]
    errors: tuple[Exception, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped: tuple[tuple[ObjRef, str], ...] = ()  # refused objects (guard) with the reason
    # (object, owner) whose entry condition is false under apply mode: Orkestra's cleanup
    absent: tuple[tuple[ObjRef, ObjRef], ...] = ()
    # (object, owner) of entries whose condition (or whose block's) is false but that are
    # never cleaned up (Jobs, onCreate entries without `reconcile: true`, a skipped block:
    # Orkestra's rule): neither applied nor pruned, kept in the inventory
    retained: tuple[tuple[ObjRef, ObjRef], ...] = ()
    # (object, owner, template key): every object the owner's blocks declare, whatever the
    # conditions, in declaration order — its `.children` (computed by a live render only)
    declared: tuple[tuple[ObjRef, ObjRef, str], ...] = ()
    # (custom resource, fingerprint of its body in Git) that runtime.cleanup deletes: not
    # among `objects`, so the sync's prune deletes it (orksync.render.cleanup)
    cleaned: tuple[tuple[ObjRef, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Source:
    """Where a sync root's objects come from: a repository URL or an absolute local path
    (`location`), and the directory inside it (`path`, empty for its root). The ref is not
    part of it: moving a sync root to another branch of the same repository is the same
    source."""

    location: str
    path: str = ""

    @classmethod
    def of(cls, location: str, path: str = "") -> Source:
        """Normalised: no trailing `/` on the location; the path without `./`, empty parts
        and surrounding slashes (`./apps/` and `apps` are one source)."""
        parts = [p for p in str(path).replace("\\", "/").split("/") if p not in ("", ".")]
        loc = str(location)
        return cls(location=loc.rstrip("/") or loc, path="/".join(parts))

    def __str__(self) -> str:
        return f"{self.location} (path {self.path})" if self.path else self.location


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One entry of a ChangeSet: what one apply, delete or prune did to one object."""

    ref: ObjRef
    action: Action
    message: str = ""

    @property
    def detail(self) -> str:
        """The message less what only restates the action, for a line that already names
        it: of its `; `-separated parts, one that is just the action's word (or, for a
        configured object, `applied`) is dropped, and `<word> (<note>)` keeps the note.
        A created Secret's `created; generated password` is `generated password`, its
        `created (dry run)` is `dry run`; '' when nothing is left."""
        words = _RESTATING.get(self.action, (self.action.value,))
        parts = []
        for part in self.message.split("; "):
            for word in words:
                if part == word:
                    part = ""
                elif part.startswith(f"{word} (") and part.endswith(")"):
                    part = part[len(word) + 2:-1]
            if part:
                parts.append(part)
        return "; ".join(parts)


# The words a change's message may open with that say no more than its action (the
# Secret planner's reasons start with `created` or `applied`).
_RESTATING: dict[Action, tuple[str, ...]] = {Action.CONFIGURED: ("configured", "applied")}


@dataclass(slots=True, kw_only=True)
class ChangeSet:
    """The one result type of every apply. Logs, CLI output, exit codes and tests read it."""

    changes: list[Change] = field(default_factory=list)

    def add(self, ref: ObjRef, action: Action, message: str = "") -> Change:
        change = Change(ref=ref, action=action, message=message)
        self.changes.append(change)
        return change

    def extend(self, other: Iterable[Change]) -> None:
        self.changes.extend(other)

    def counts(self) -> Counter[Action]:
        return Counter(c.action for c in self.changes)

    @property
    def failed(self) -> list[Change]:
        return [c for c in self.changes if c.action is Action.FAILED]

    def summary(self) -> str:
        """`created=1 configured=0 ... failed=0`: every action's count, `waiting` only
        when some object waits for its deletion."""
        counts = self.counts()
        return " ".join(f"{a.value}={counts.get(a, 0)}" for a in Action
                        if a is not Action.WAITING or counts.get(a))

    def by_ref(self) -> dict[ObjRef, Change]:
        return {c.ref: c for c in self.changes}


def short_revision(revision: str, length: int = 7) -> str:
    """A revision as printed: the commit abbreviated, a `-dirty` suffix (a working tree
    that differs from its commit, orksync.source.local_revision) kept, as `git describe
    --dirty` prints it."""
    sha, dirty, _ = revision.partition("-dirty")
    return sha[:length] + dirty


def replace(obj: Any, **changes: Any) -> Any:
    """dataclasses.replace, re-exported so callers need one import."""
    return dataclasses.replace(obj, **changes)
