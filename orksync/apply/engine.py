"""The apply engine: a RenderedSet in, a ChangeSet out.

Stages run in order (CRDs, then the repository's plain manifests, then custom resources,
then children in Orkestra's group order); objects inside one stage are written
concurrently. The live objects of every
stage's kinds are listed once (children by orksync's label), so an unchanged object costs
no request at all; those LISTs are all sent at the start of the apply, concurrently, and
a stage whose view may be outdated by this apply's own writes lists again (`_Prefetch`).
Owner references to the live custom resource are added here, since only the cluster knows
its UID. Every object yields exactly one Change; a child whose live object is being
deleted (a deletionTimestamp, held by a finalizer) is `waiting`, not written, and is
created again by the first sync after it is gone.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from orksync.apply.compare import (
    HASH_ANNOTATION,
    dry_run_unchanged,
    fingerprint,
    unchanged,
)
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.kinds import CRD_API, policy
from orksync.apply.rollout import (
    ROLLOUT_FIELD_MANAGER,
    add_rollout_annotation,
    is_rolled,
    live_digest,
    pod_template,
    read_secrets,
    referenced_secrets,
    rollout_body,
)
from orksync.cluster.kube import Kube, Resource
from orksync.errors import ClusterError
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MANAGED_SELECTOR,
    OWNER_ANNOTATION,
    PLAIN_STAGES,
    SCOPE_DIRECTIVE,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
    WritePolicy,
    copy_tree,
    is_managed,
)
from orksync.secrets.ca import ca_secret_ref, has_ca_secret

log = logging.getLogger(__name__)

FIELD_MANAGER = "orksync"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ApplyOptions:
    field_manager: str = FIELD_MANAGER
    workers: int = 8
    crd_timeout: float = 60.0
    dry_run: bool = False
    clock: Callable[[], datetime] = _utc_now  # rotation and certificate decisions


Kind = tuple[str, str]  # (apiVersion, kind)


@dataclass(slots=True)
class _Run:
    """State of one apply run."""

    uids: dict[ObjRef, str] = field(default_factory=dict)  # applied custom resources
    failed: set[ObjRef] = field(default_factory=set)
    # (owner, namespace, secret name) -> short hash of the Secret's data, for rollouts
    secret_hashes: dict[tuple[ObjRef, str, str], str] = field(default_factory=dict)
    # the same keys, for the Secrets this apply created or changed
    secrets_written: set[tuple[ObjRef, str, str]] = field(default_factory=set)
    # what this apply (or the sync before it) may have written so far, for `_Prefetch`:
    # every such object under its identity and its identity without a namespace; the
    # API groups of the CRDs written
    written: set[ObjRef] = field(default_factory=set)
    crd_groups: set[str] = field(default_factory=set)
    # as whom each custom resource's children are written (orksync.apply.impersonation)
    identities: Identities | None = None
    # a dry run's view of what the real run would have made by now and the server cannot
    # know of: the namespaces it reports created, the kinds the rendered CRDs serve, the
    # objects it reports created without sending them (`Applier._unsent`)
    unsent_namespaces: set[str] = field(default_factory=set)
    coming_kinds: set[Kind] = field(default_factory=set)
    unsent: set[ObjRef] = field(default_factory=set)

    def kube_for(self, obj: RenderedObject, kube: Kube) -> Kube:
        """The connection `obj` is written through: its owner's identity, or `kube`'s."""
        if obj.owner is None or self.identities is None:
            return kube
        return self.identities.kube_for(obj.owner)

    def wrote(self, refs: Iterable[ObjRef]) -> None:
        for ref in refs:
            self.written.add(ref)
            self.written.add(dataclasses.replace(ref, namespace=""))

    def may_have_written(self, ref: ObjRef) -> bool:
        if not self.written:  # a resync that has written nothing yet: the common case
            return False
        return ref in self.written or (ref.namespace != "" and dataclasses.replace(
            ref, namespace="") in self.written)


# A view of the live cluster the apply may read instead of a kind's LIST: (kind, whole) ->
# the objects, or None (then the kind is listed). `whole`: the LIST would have no selector.
View = Callable[[Kind, bool], list[dict[str, Any]] | None]


class Staged(Protocol):
    """What the LISTs of an apply are planned from: a RenderedObject, or what the
    rendered directory's index says of one before its file is read."""

    @property
    def ref(self) -> ObjRef: ...
    @property
    def stage(self) -> int: ...
    @property
    def owner(self) -> ObjRef | None: ...


S = TypeVar("S", bound=Staged)
T = TypeVar("T")
R = TypeVar("R")


def _in_threads(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """`fn` of every item, by up to `workers` threads of a ThreadPoolExecutor, the results
    in order. An exception, in a thread or while waiting here (Ctrl-C), cancels the items
    not started; the threads finish the items they hold, and the exception (of the first
    failed item, in the items' order) is raised here."""
    if not items:
        return []
    with ThreadPoolExecutor(min(workers, len(items)),
                            thread_name_prefix="orksync-apply") as pool:
        futures = [pool.submit(fn, item) for item in items]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:
            for future in futures:
                future.cancel()  # those not started
    # items are started in order: none before a failed one was cancelled
    return [future.result() for future in futures]


def fulfil(future: Future[R], fn: Callable[[], R]) -> None:
    """Run `fn` for `future`, unless it was cancelled: `fn`'s result, or whatever it
    raised, is the future's, for the thread that reads it."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn())
    except BaseException as err:  # raised again where the future is read
        future.set_exception(err)


def _stage_kinds(batch: Iterable[Staged]) -> dict[Kind, bool]:
    """The kinds of one stage, each with whether it holds children only (listed by
    orksync's label) rather than custom resources, CRDs or plain objects (listed whole)."""
    kinds: dict[Kind, bool] = {}
    for obj in batch:
        key = (obj.ref.api_version, obj.ref.kind)
        kinds[key] = kinds.get(key, True) and obj.owner is not None
    return kinds


def _namespace_stages(stages: Mapping[int, Sequence[Staged]]) -> set[int]:
    """The stages before which the namespaces of their objects without owner (plain
    manifests, custom resources) are created when missing."""
    return {stage for stage, batch in stages.items()
            if any(o.owner is None and o.ref.namespace for o in batch)}


class _Prefetch:
    """The LISTs of every stage, sent at once when the apply starts (up to `workers` at a
    time) instead of one stage after another: a resync is mostly waiting for them.

    One LIST per kind serves every stage that has it: without a selector when any stage
    lists the kind whole, a stage of children then keeping what the selector would have
    returned. A kind that discovery cannot resolve yet (a custom resource whose CRD this
    apply creates), or whose discovery fails, is not listed here: its stage lists it, as
    it did before. A LIST that fails is the stage's failed prefetch (its objects are
    written as if absent), as before.

    Staleness: a view taken at the start is older than the writes of the earlier stages.
    A stage uses it only where those writes cannot have changed it (`items`): none of
    the stage's objects of that kind was written earlier in this apply (or by the sync
    before it: the autoscaler) under the same identity, with or without a namespace, and
    no CRD of the kind's API group was written (a schema, a served version). Otherwise the
    stage lists again. Changes made by others during the apply are seen as they were at
    the start; the next sync sees them (the stage-by-stage LISTs had the same race, over a
    shorter window)."""

    def __init__(self, kube: Kube, stages: Mapping[int, Sequence[Staged]],
                 workers: int, view: View | None = None) -> None:
        self.kube = kube
        self.view = view
        whole: dict[Kind, bool] = {}
        for stage in sorted(stages):
            for key, children_only in _stage_kinds(stages[stage]).items():
                whole[key] = whole.get(key, False) or not children_only
        if _namespace_stages(stages):
            whole[("v1", "Namespace")] = True  # `_ensure_namespaces`
        self.whole = whole
        self.listed: dict[Kind, Future[list[dict[str, Any]] | None]] = {
            key: Future() for key in whole}
        # in stage order (the first stage's first), by up to `workers` threads of their own
        # (not the stage's write pool, which a no-change stage never starts)
        self.todo = deque(self.listed)
        self.lock = threading.Lock()
        for _ in range(max(1, min(workers, len(self.todo)))):
            threading.Thread(target=self._run, name="orksync-prefetch", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.todo:
                    return
                key = self.todo.popleft()
            # its result or error is the stage's that reads it
            fulfil(self.listed[key], functools.partial(self._list, key, self.whole[key]))

    def _list(self, key: Kind, whole: bool) -> list[dict[str, Any]] | None:
        """The kind's objects; None when discovery cannot resolve it now."""
        if self.view is not None:
            items = self.view(key, whole)
            if items is not None:
                return items
        try:
            res = self.kube.resource(*key)
        except ClusterError:
            return None
        return list(self.kube.list(res, label_selector=None if whole else MANAGED_SELECTOR))

    def items(self, key: Kind, *, whole: bool, refs: Iterable[ObjRef], run: _Run
              ) -> list[dict[str, Any]] | None:
        """The kind's objects as the stage's own LIST would return them (raising its
        ClusterError), or None: the stage lists the kind itself."""
        future = self.listed.get(key)
        if future is None or (whole and not self.whole[key]):
            return None
        group = key[0].rpartition("/")[0]
        if group in run.crd_groups or any(run.may_have_written(r) for r in refs):
            return None
        items = future.result()
        if items is None or whole or not self.whole[key]:
            return items
        # what the LIST with MANAGED_SELECTOR returns, decided on a LIST without it
        return [item for item in items if is_managed(item)]

    def close(self) -> None:
        """Send nothing more (an apply that ended early); LISTs under way finish."""
        with self.lock:
            self.todo.clear()
        for future in self.listed.values():
            future.cancel()


class Applier:
    def __init__(self, kube: Kube, options: ApplyOptions | None = None,
                 on_change: Callable[[Change], None] | None = None, *,
                 impersonation: Impersonation | None = None,
                 view: View | None = None) -> None:
        """`impersonation`: who the children are written as, besides what the rendered
        custom resources' directives say (orksync.apply.impersonation). `view`: where the
        start-of-apply LISTs are read from instead, for the kinds it serves (the agent's
        informers, orksync.agent.drift); a stage whose view may be outdated by this apply's
        own writes still lists (`_Prefetch`)."""
        self.kube = kube
        self.view = view
        # the resourceVersion each server-side apply of this applier left (its answer's)
        self.versions: dict[ObjRef, str] = {}
        self.options = options or ApplyOptions()
        self.on_change = on_change or (lambda change: None)
        self.impersonation = impersonation
        # per kind listed whole (no selector: custom resources, CRDs), the listed objects
        # with a deletionTimestamp; the sync's teardown check reads it instead of a LIST
        self.terminating: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._prefetched: _Prefetch | None = None

    def prefetch(self, rendered: RenderedSet | Iterable[Staged]) -> None:
        """Send the LISTs of the coming `apply` of these objects now, so that they overlap
        with what the caller does before it (the sync reads its inventory, `orksync
        apply` the rendered files). `apply` starts them itself otherwise;
        `discard_prefetch` when no apply follows."""
        self.discard_prefetch()
        objects = rendered.objects if isinstance(rendered, RenderedSet) else tuple(rendered)
        self._prefetched = _Prefetch(self.kube, _by_stage(objects), self.options.workers,
                                     self.view)

    @property
    def prefetching(self) -> bool:
        return self._prefetched is not None

    def discard_prefetch(self) -> None:
        if self._prefetched is not None:
            self._prefetched.close()
            self._prefetched = None

    def apply(self, rendered: RenderedSet | Iterable[RenderedObject], *,
              written: Iterable[ObjRef] = ()) -> ChangeSet:
        """`written`: objects the caller wrote since `prefetch` (a stage's view of them
        is listed again)."""
        objects = rendered.objects if isinstance(rendered, RenderedSet) else tuple(rendered)
        changes = ChangeSet()
        if isinstance(rendered, RenderedSet):
            for ref, reason in rendered.skipped:
                self._record(changes, Change(ref=ref, action=Action.SKIPPED, message=reason))
        run = _Run(identities=Identities(self.kube, self.impersonation, objects))
        if self.options.dry_run:
            run.coming_kinds = crd_kinds(objects)
        run.wrote(written)
        stages = _by_stage(objects)
        prefetched = self._prefetched
        if prefetched is None:
            prefetched = self._prefetched = _Prefetch(self.kube, stages, self.options.workers,
                                                      self.view)
        namespace_stages = _namespace_stages(stages)
        ensured: set[str] = set()
        try:
            for stage in sorted(stages):
                batch = stages[stage]
                if stage in namespace_stages:
                    created = self._ensure_namespaces(batch, prefetched, run, ensured)
                    for change in created:
                        self._record(changes, change)
                    run.wrote(c.ref for c in created)
                for change in self._apply_stage(batch, run, prefetched):
                    self._record(changes, change)
                    if change.action is Action.FAILED:
                        run.failed.add(change.ref)
                    if self.options.dry_run and change.action is Action.CREATED and \
                            (change.ref.api_version, change.ref.kind) == ("v1", "Namespace"):
                        run.unsent_namespaces.add(change.ref.name)
                    if change.action not in (Action.UNCHANGED, Action.SKIPPED,
                                             Action.WAITING):
                        run.wrote((change.ref,))
                        if policy(change.ref).crd:
                            run.crd_groups.add(change.ref.name.partition(".")[2])
        finally:
            self.discard_prefetch()
        return changes

    def desired(self, obj: RenderedObject, owner_uid: str | None = None) -> dict[str, Any]:
        """The body `apply` would send for `obj` (owner reference to the owner's
        `owner_uid`, fingerprint), to tell whether a live object drifted from it
        (orksync.apply.compare.unchanged). Raises ClusterError (a child without
        `owner_uid`; discovery)."""
        run = _Run()
        if obj.owner is not None and owner_uid:
            run.uids[obj.owner] = owner_uid
        return self._desired(obj, self.kube.resource(obj.ref.api_version, obj.ref.kind), run)

    def _record(self, changes: ChangeSet, change: Change) -> None:
        changes.changes.append(change)
        self.on_change(change)

    # --- one stage ----------------------------------------------------------------------

    def _apply_stage(self, batch: list[RenderedObject], run: _Run,
                     prefetched: _Prefetch) -> list[Change]:
        live = self._prefetch(batch, run, prefetched)
        def attempt(obj: RenderedObject, local: bool) -> Change | None:
            try:
                return self._apply_one(obj, live, run, local=local)
            except ClusterError as err:
                return Change(ref=obj.ref, action=Action.FAILED, message=err.detail)

        def one(obj: RenderedObject) -> Change:
            change = attempt(obj, False)
            assert change is not None  # only a local attempt stops short
            return change
        # First, in this thread, every object that needs no request (a resync: nearly all);
        # handing those to the pool's threads cost more than deciding them.
        settled = [attempt(o, True) for o in batch]
        todo = [o for o, c in zip(batch, settled, strict=True) if c is None]
        if len(todo) <= 1 or self.options.workers <= 1:
            written = [one(o) for o in todo]
        else:
            written = _in_threads(one, todo, self.options.workers)
        answers = iter(written)
        results = [c if c is not None else next(answers) for c in settled]
        crds = [o for o, c in zip(batch, results, strict=True)
                if policy(o.ref).crd and c.action is not Action.FAILED]
        if crds:
            return self._wait_established(crds, results, live)
        return results

    def _prefetch(self, batch: list[RenderedObject], run: _Run,
                  prefetched: _Prefetch) -> dict[ObjRef, dict[str, Any]]:
        """The stage's objects as listed (one LIST per kind, children by label, sent at
        the start of the apply when `prefetched` may serve it), keyed by identity."""
        refs: dict[Kind, list[ObjRef]] = defaultdict(list)
        for obj in batch:
            refs[(obj.ref.api_version, obj.ref.kind)].append(obj.ref)
        live: dict[ObjRef, dict[str, Any]] = {}
        for (api_version, kind), children_only in _stage_kinds(batch).items():
            try:
                items = prefetched.items((api_version, kind), whole=not children_only,
                                         refs=refs[(api_version, kind)], run=run)
                if items is None:
                    res = self.kube.resource(api_version, kind)
                    items = list(self.kube.list(res, label_selector=MANAGED_SELECTOR
                                                if children_only else None))
                terminating = []
                for item in items:
                    live[ObjRef.of(item)] = item
                    if (item.get("metadata") or {}).get("deletionTimestamp"):
                        terminating.append(item)
                if not children_only:
                    self.terminating[(api_version, kind)] = terminating
            except ClusterError as err:
                if err.status == 404 and (api_version, kind) in run.coming_kinds:
                    continue  # a dry run's kind whose CRD it did not create (`_unsent`)
                log.warning("prefetch of %s %s failed; its objects are written as if absent "
                            "(a create that finds one changes nothing): %s",
                            api_version, kind, err)
        return live

    def _apply_one(self, obj: RenderedObject, live: Mapping[ObjRef, dict[str, Any]],
                   run: _Run, *, local: bool = False) -> Change | None:
        """Write one object. `local`: return None instead of sending the first request
        (and for the cases that may send one on the way: copies, Secrets, cluster-scoped
        children, whose tenancy check may read). Before that point only discovery (cached
        since the stage's prefetch) may send one, and its error is the object's failure
        either way."""
        if obj.owner is not None and obj.owner in run.failed:
            return Change(ref=obj.ref, action=Action.FAILED,
                          message=f"not applied: its owner {obj.owner} failed")
        unsent = self._unsent(obj, live, run)
        if unsent is not None:
            return unsent
        res = self.kube.resource(obj.ref.api_version, obj.ref.kind)
        kube = run.kube_for(obj, self.kube)
        current = live.get(obj.ref)
        plain = obj.owner is None and obj.stage in PLAIN_STAGES
        if plain:
            problem = plain_problem(obj.ref, res.namespaced, current)
            if problem:
                return Change(ref=obj.ref, action=Action.FAILED, message=problem)
        if current is not None and (obj.owner is not None or plain):
            waiting = being_deleted(current)
            if waiting:
                return Change(ref=obj.ref, action=Action.WAITING, message=waiting)
        kind = policy(obj.ref)
        if local and (obj.directives.get("copyFrom") or current is None or kind.secret or
                      (obj.owner is not None and not res.namespaced)):
            return None
        refused = self._tenancy_refusal(obj, res, live)
        if refused:
            return Change(ref=obj.ref, action=Action.SKIPPED, message=refused)
        body = self._desired(obj, res, run)
        if current is not None and obj.owner is not None and is_rolled(obj.ref) and \
                live_digest(body) is not None and (live_digest(body) != live_digest(current)
                                                   or not unchanged(body, current)):
            if local:  # the Secrets are read again first (`_restamped`)
                return None
            body = self._restamped(kube, obj, body, run)
        if obj.directives.get("copyFrom"):
            body = self._copy_from(kube, obj, res, body)
        if kind.secret:
            ca_live = live.get(ca_secret_ref(obj.ref)) if has_ca_secret(obj) else None
            return self._write_secret(kube, obj, body, current, run, ca_live)
        if obj.policy in (WritePolicy.CREATE, WritePolicy.CREATE_ONLY):
            if current is not None and self._needs_rollout(obj, body, current, run):
                if local:
                    return None
                return self._roll(kube, obj, res, body)
            return self._create_if_absent(kube, obj, res, body, current, run)
        if current is not None and not obj.directives.get("forceConflict", True) and \
                self._needs_rollout(obj, body, current, run):
            # the rollout manager may own the annotation (a rotation wrote it): moved by
            # that manager first, the unforced apply then sends the value it holds
            if local:
                return None
            self._roll(kube, obj, res, body)
        if unchanged(body, current):
            self._remember(obj, current, run)
            return Change(ref=obj.ref, action=Action.UNCHANGED)
        if local:
            return None
        before = (current or {}).get("metadata", {}).get("resourceVersion")
        dry_run = self.options.dry_run
        try:
            # a dry run's answer is read whole: its content decides (`dry_run_unchanged`)
            created, result = kube.apply(res, body,
                                         field_manager=self.options.field_manager,
                                         force=obj.directives.get("forceConflict", True),
                                         subject=str(obj.ref), dry_run=dry_run,
                                         metadata_only=not dry_run)
        except ClusterError as err:
            if err.status != 422 or current is None:
                raise
            if not recreate_allowed(obj):
                raise ClusterError(f"{err.detail} (if a field that cannot change was changed, "
                                   f"the annotation {RECREATE_ANNOTATION}: \"true\" lets "
                                   "orksync delete and recreate the object)",
                                   subject=err.subject, status=err.status,
                                   reason=err.reason) from err
            self._recreate(kube, res, obj, body, current)
            return Change(ref=obj.ref, action=Action.CONFIGURED,
                          message="recreated: the change touches an immutable field")
        self._remember(obj, result, run)
        after = (result or {}).get("metadata", {}).get("resourceVersion")
        if after and not self.options.dry_run:
            self.versions[obj.ref] = str(after)
        if created:
            action = Action.CREATED
        elif dry_run:
            action = Action.UNCHANGED if dry_run_unchanged(
                result, current, lambda: kube.get_or_none(
                    res, obj.ref.namespace, obj.ref.name)) else Action.CONFIGURED
        elif before is not None and before == after:
            action = Action.UNCHANGED
        else:
            action = Action.CONFIGURED
        return Change(ref=obj.ref, action=action)

    def _unsent(self, obj: RenderedObject, live: Mapping[ObjRef, dict[str, Any]],
                run: _Run) -> Change | None:
        """A dry run's outcome for an object the API server cannot dry-run because it
        depends on a write the dry run did not make: its namespace or its kind's CRD,
        which the real run creates first. Such an object does not exist yet: created. A
        child of a custom resource reported so is sent as a dry run without owner
        reference when it does not exist (the server still checks it); an existing one
        gets the new owner's reference (configured), or is left alone by a create policy.
        None: send the dry run."""
        if not self.options.dry_run:
            return None
        ref = obj.ref
        if ref.namespace in run.unsent_namespaces:
            why = f"its namespace {ref.namespace} is created by this sync"
        elif (ref.api_version, ref.kind) in run.coming_kinds and \
                not self._served(ref.api_version, ref.kind):
            why = "its CRD is created by this sync"
        elif obj.owner is not None and obj.owner in run.unsent and live.get(ref) is not None:
            if obj.policy is not WritePolicy.APPLY:
                return Change(ref=ref, action=Action.UNCHANGED)
            return Change(ref=ref, action=Action.CONFIGURED, message="dry run, not sent: "
                          f"its owner {obj.owner} is created by this sync")
        else:
            return None
        run.unsent.add(ref)
        if obj.owner is None:
            run.uids[ref] = ""  # its children are dry-run without owner reference
        return Change(ref=ref, action=Action.CREATED, message=f"dry run, not sent: {why}")

    def _served(self, api_version: str, kind: str) -> bool:
        """Whether discovery serves the kind (a failed discovery is raised: the object's
        failure, as it is without a dry run)."""
        try:
            self.kube.resource(api_version, kind)
        except ClusterError as err:
            if err.status == 404:
                return False
            raise
        return True

    def _tenancy_refusal(self, obj: RenderedObject, res: Resource,
                         live: Mapping[ObjRef, dict[str, Any]]) -> str | None:
        """The tenancy rules only the cluster can decide (docs/multi-tenancy.md), for a
        child that discovery says is cluster-scoped: the render's refusal for a kind whose
        scope it did not know, and an existing object owned by something else (server-side
        apply would take it over, and the next prune would then delete it)."""
        if obj.owner is None or res.namespaced:
            return None
        if obj.directives.get(SCOPE_DIRECTIVE):
            return str(obj.directives[SCOPE_DIRECTIVE])
        if obj.policy is not WritePolicy.APPLY:
            return None  # written only when missing
        ref = dataclasses.replace(obj.ref, namespace="")
        # read as the agent, like the stage's LISTs: this is orksync's own check (the first
        # wall), made before the write goes out as the child's identity (the second)
        current = live.get(ref) or self.kube.get_or_none(res, "", ref.name)
        annotations = ((current or {}).get("metadata") or {}).get("annotations") or {}
        owner = annotations.get(OWNER_ANNOTATION)
        if current is None or owner == str(obj.owner):
            return None
        return (f"{ref} exists and belongs to {owner or 'no custom resource'}, not "
                f"{obj.owner}: a custom resource does not take over a cluster-scoped object")

    def _recreate(self, kube: Kube, res: Resource, obj: RenderedObject, body: dict[str, Any],
                  current: Mapping[str, Any]) -> None:
        """Delete (UID precondition: only the object we read) and create again."""
        if self.options.dry_run:
            return
        uid = (current.get("metadata") or {}).get("uid")
        try:
            kube.delete(res, obj.ref.namespace, obj.ref.name, propagation="Foreground",
                        subject=str(obj.ref), precondition_uid=uid)
        except ClusterError as err:
            if err.status != 404:
                raise
        deadline = time.monotonic() + self.options.crd_timeout
        delay = 0.05
        while kube.get_or_none(res, obj.ref.namespace, obj.ref.name) is not None:
            if time.monotonic() > deadline:
                raise ClusterError("deleted for a recreate but still present after "
                                   f"{self.options.crd_timeout:.0f}s", subject=str(obj.ref))
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        kube.create(res, body, field_manager=self.options.field_manager,
                    subject=str(obj.ref), metadata_only=True)

    def _copy_from(self, kube: Kube, obj: RenderedObject, res: Resource,
                   body: dict[str, Any]) -> dict[str, Any]:
        """`fromConfigMap` & co.: merge the live source into the body (semantics §2.4):
        ConfigMap data under the declared keys; NetworkPolicy spec, ResourceQuota hard and
        LimitRange limits replaced by the source's."""
        spec = obj.directives["copyFrom"]
        source = kube.get_or_none(res, spec["namespace"], spec["name"])
        if source is None:
            raise ClusterError(f"source {spec['kind']}/{spec['namespace']}/{spec['name']} "
                               "not found", subject=str(obj.ref))
        merge = policy(obj.ref).copy_source
        if merge is not None:
            merge(body, source)
        annotations = body["metadata"]["annotations"]
        annotations.pop(HASH_ANNOTATION, None)
        annotations[HASH_ANNOTATION] = fingerprint(body)
        return body

    def _write_secret(self, kube: Kube, obj: RenderedObject, body: dict[str, Any],
                      current: dict[str, Any] | None, run: _Run,
                      ca_live: dict[str, Any] | None) -> Change:
        # imported here: the secrets stack (and cryptography) is a noticeable part of the
        # start-up of an `orksync apply` that has no Secret to write
        from orksync.apply.secrets import write_secret
        from orksync.secrets.random import CryptoRandom

        change, digest = write_secret(kube, obj, body, current,
                                      field_manager=self.options.field_manager,
                                      now=self.options.clock(), random=CryptoRandom(),
                                      dry_run=self.options.dry_run, ca_live=ca_live)
        if digest and obj.owner is not None:
            run.secret_hashes[(obj.owner, obj.ref.namespace, obj.ref.name)] = digest
        if obj.owner is not None and change.action in (Action.CREATED, Action.CONFIGURED):
            run.secrets_written.add((obj.owner, obj.ref.namespace, obj.ref.name))
        return change

    @staticmethod
    def _needs_rollout(obj: RenderedObject, body: Mapping[str, Any],
                       current: Mapping[str, Any], run: _Run) -> bool:
        """An existing workload whose Secrets changed since its pod template was stamped
        (rotation, re-issue, added keys): rolled whatever its write policy. One never
        stamped (made by Orkestra, or by hand) is rolled only when this apply changed a
        Secret it reads: adopting it restarts nothing."""
        if obj.owner is None or not is_rolled(obj.ref):
            return False
        want, have = live_digest(body), live_digest(current)
        if want is None or want == have:
            return False
        if have is not None:
            return True
        template = pod_template(dict(body)) or {}
        return any((obj.owner, obj.ref.namespace, name) in run.secrets_written
                   for name in referenced_secrets(template.get("spec") or {}))

    @staticmethod
    def _restamped(kube: Kube, obj: RenderedObject, body: dict[str, Any],
                   run: _Run) -> dict[str, Any]:
        """The workload's secrets-hash from its Secrets as they are now, where this apply
        read them (orksync.apply.rollout.read_secrets), for a workload this apply is about
        to write or roll: a rotation that ran meanwhile wrote them and rolled the
        workload, which must not be rolled back. One GET per such Secret, only for a
        workload written or rolled."""
        from orksync.secrets.plan import data_hash  # the secrets stack: see _write_secret

        assert obj.owner is not None
        res = kube.resource("v1", "Secret")
        for name in read_secrets(body, obj.owner, obj.ref.namespace, run.secret_hashes,
                                 run.secrets_written):
            live = kube.get_or_none(res, obj.ref.namespace, name)
            if live is not None:
                run.secret_hashes[(obj.owner, obj.ref.namespace, name)] = data_hash(
                    {str(k): str(v) for k, v in (live.get("data") or {}).items()})
        add_rollout_annotation(body, obj.owner, obj.ref.namespace, run.secret_hashes)
        return body

    def _roll(self, kube: Kube, obj: RenderedObject, res: Resource,
              body: Mapping[str, Any]) -> Change:
        """Write the pod template's secrets-hash annotation alone, under orksync's rollout
        field manager (orksync.apply.rollout): the rest of an existing create-if-absent
        workload stays as it is."""
        digest = live_digest(body)
        assert digest is not None
        kube.apply(res, rollout_body(obj.ref, digest), field_manager=ROLLOUT_FIELD_MANAGER,
                   force=True, subject=str(obj.ref), dry_run=self.options.dry_run,
                   metadata_only=True)
        suffix = " (dry run)" if self.options.dry_run else ""
        return Change(ref=obj.ref, action=Action.CONFIGURED,
                      message="rolled: a Secret it reads changed" + suffix)

    def _create_if_absent(self, kube: Kube, obj: RenderedObject, res: Resource,
                          body: dict[str, Any], current: dict[str, Any] | None,
                          run: _Run) -> Change:
        if current is not None:
            self._remember(obj, current, run)
            return Change(ref=obj.ref, action=Action.UNCHANGED)
        if self.options.dry_run:
            return Change(ref=obj.ref, action=Action.CREATED, message="dry run")
        try:
            created = kube.create(res, body, field_manager=self.options.field_manager,
                                  subject=str(obj.ref), metadata_only=True)
        except ClusterError as err:
            if err.status == 409 and err.reason == "AlreadyExists":
                return Change(ref=obj.ref, action=Action.UNCHANGED,
                              message="exists already (made outside orksync, or by an "
                                      "earlier attempt whose answer was lost)")
            raise
        self._remember(obj, created if isinstance(created, Mapping) else None, run)
        return Change(ref=obj.ref, action=Action.CREATED)

    def _remember(self, obj: RenderedObject, result: Mapping[str, Any] | None,
                  run: _Run) -> None:
        """The uid of an object written or found: the owner reference of its children
        (a custom resource's, and a nested custom resource's, one that a `custom:` block
        created and that is rendered through its own entry)."""
        if result:
            uid = (result.get("metadata") or {}).get("uid")
            if uid:
                run.uids[obj.ref] = uid

    def _desired(self, obj: RenderedObject, res: Resource, run: _Run) -> dict[str, Any]:
        """The body we send: the rendered one plus owner reference and fingerprint."""
        body: dict[str, Any] = copy_tree(dict(obj.body))
        meta = body.setdefault("metadata", {})
        if not res.namespaced:
            meta.pop("namespace", None)
        if obj.owner is not None:
            uid = run.uids.get(obj.owner)
            if uid is None:
                raise ClusterError("its owner was not applied in this run",
                                   subject=str(obj.ref))
            if uid and owner_reference_allowed(obj.owner, obj.ref, res.namespaced):
                meta["ownerReferences"] = [{
                    "apiVersion": obj.owner.api_version, "kind": obj.owner.kind,
                    "name": obj.owner.name, "uid": uid, "controller": True,
                    "blockOwnerDeletion": True}]
        annotations = meta.setdefault("annotations", {})
        annotations.pop(HASH_ANNOTATION, None)
        annotations[HASH_ANNOTATION] = fingerprint(body)
        if obj.owner is not None:
            # after the fingerprint: the annotation is orksync's own field, not the
            # user's spec (orksync.apply.rollout); `unchanged` still compares it
            add_rollout_annotation(body, obj.owner, obj.ref.namespace, run.secret_hashes)
        return body

    # --- namespaces and CRDs -------------------------------------------------------------

    def _ensure_namespaces(self, batch: list[RenderedObject], prefetched: _Prefetch,
                           run: _Run, ensured: set[str]) -> list[Change]:
        """The namespaces of the plain manifests and custom resources are created when
        missing (each once per apply: `ensured`)."""
        names = sorted({o.ref.namespace for o in batch
                        if o.owner is None and o.ref.namespace} - ensured
                       - run.unsent_namespaces)
        ensured.update(names)
        if not names:
            return []
        key = ("v1", "Namespace")
        items = prefetched.items(key, whole=True, run=run, refs=[
            ObjRef(api_version=key[0], kind=key[1], name=name) for name in names])
        if items is None:
            items = list(self.kube.list(self.kube.resource(*key)))
        existing = {ObjRef.of(i).name for i in items}
        changes = []
        for name in names:
            if name in existing:
                continue
            ref = ObjRef(api_version="v1", kind="Namespace", name=name)
            try:
                if self.options.dry_run:
                    run.unsent_namespaces.add(name)
                    changes.append(Change(ref=ref, action=Action.CREATED, message="dry run"))
                elif create_namespace(self.kube, name,
                                      field_manager=self.options.field_manager):
                    changes.append(Change(ref=ref, action=Action.CREATED))
            except ClusterError as err:
                changes.append(Change(ref=ref, action=Action.FAILED, message=err.detail))
        return changes

    def _wait_established(self, crds: list[RenderedObject], results: list[Change],
                          listed: Mapping[ObjRef, dict[str, Any]]) -> list[Change]:
        """Wait until every CRD is Established and discovery serves its kind in each of
        its served versions (the API server updates discovery a moment after the
        condition: a custom resource applied in between failed as a kind "not served").
        A CRD this apply did not write and that was Established when the stage listed it
        is taken as it was listed, and its discovery is kept when it already serves the
        kind in every version: a resync sends neither a GET per CRD nor a discovery
        request per version for them."""
        if self.options.dry_run:
            return results
        res = self.kube.resource(CRD_API, "CustomResourceDefinition")
        deadline = time.monotonic() + self.options.crd_timeout
        untouched = {c.ref for c in results if c.action is Action.UNCHANGED}
        pending = {o.ref.name: o for o in crds}
        waiting_for = dict.fromkeys(pending, "Established")  # what each CRD still waits for
        delay = 0.05
        while pending and time.monotonic() < deadline:
            for name in list(pending):
                crd = pending[name]
                kept = crd.ref in untouched and _established(listed.get(crd.ref))
                if not kept and waiting_for[name] == "Established":  # not read once it is
                    if not _established(self.kube.get_or_none(res, "", name)):
                        continue
                    waiting_for[name] = "served by discovery"
                spec = crd.body.get("spec") or {}
                kind = str((spec.get("names") or {}).get("kind"))
                versions = {f"{spec.get('group')}/{v.get('name')}": v.get("served", True)
                            for v in spec.get("versions") or []}
                if kept:
                    for api_version in versions:
                        if not self.kube.serves(api_version, kind):
                            self.kube.forget(api_version)
                else:
                    for api_version in versions:  # a version no longer served included
                        self.kube.forget(api_version)
                    if not all(self._discovered(v, kind) for v, served in versions.items()
                               if served):
                        continue
                del pending[name]
            if pending:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        if not pending:
            return results
        late = {pending[n].ref: waiting_for[n] for n in pending}
        return [Change(ref=c.ref, action=Action.FAILED,
                       message=f"not {late[c.ref]} within {self.options.crd_timeout:.0f}s")
                if c.ref in late else c for c in results]

    def _discovered(self, api_version: str, kind: str) -> bool:
        """Whether discovery, asked again now, serves `kind` in `api_version` (a cached
        answer that does is kept: it was asked after the CRD was Established)."""
        try:
            self.kube.resource(api_version, kind)
        except ClusterError:
            return False
        return True


def crd_kinds(objects: Iterable[RenderedObject]) -> set[Kind]:
    """The (apiVersion, kind) pairs the rendered CRDs serve."""
    kinds = set()
    for obj in objects:
        if not policy(obj.ref).crd:
            continue
        spec = obj.body.get("spec") or {}
        kind = str((spec.get("names") or {}).get("kind") or "")
        for version in spec.get("versions") or []:
            if isinstance(version, Mapping) and version.get("served", True):
                kinds.add((f"{spec.get('group')}/{version.get('name')}", kind))
    return kinds


def being_deleted(live: Mapping[str, Any]) -> str:
    """Why a live child cannot be written now: it has a deletionTimestamp (an apply
    would change an object on its way out, and a create-if-absent would count it as
    present); "" otherwise. A custom resource that is being deleted is not asked: its
    teardown (orksync.sync.finish_terminating) handles it."""
    meta = live.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        return ""
    finalizers = [str(f) for f in meta.get("finalizers") or []]
    held = f" (finalizers: {', '.join(finalizers)})" if finalizers else ""
    return f"being deleted{held}; created again by the first sync after it is gone"


def plain_problem(ref: ObjRef, namespaced: bool, live: Mapping[str, Any] | None) -> str:
    """Why a plain manifest is not written ("" when it may be): a namespace its kind
    cannot have, or none where it needs one (the loader checks the kinds whose scope it
    knows; discovery tells the others); a live object that is a custom resource's child
    (a manifest that took it over would be pruned with it, or prune it)."""
    if namespaced and not ref.namespace:
        return (f"metadata.namespace is not set and a {ref.kind} is namespaced: write its "
                "namespace (orksync applies a manifest as it is and does not guess one)")
    if not namespaced and ref.namespace:
        return f"a {ref.kind} is cluster-scoped: metadata.namespace must not be set"
    owner = (((live or {}).get("metadata") or {}).get("annotations") or {}).get(
        OWNER_ANNOTATION)
    if owner:
        return (f"exists as a child of {owner} (annotation {OWNER_ANNOTATION}): a "
                "manifest does not take over an object a custom resource renders")
    return ""


def _established(crd: Mapping[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)


def _by_stage(objects: Iterable[S]) -> dict[int, list[S]]:
    stages: dict[int, list[S]] = defaultdict(list)
    for obj in objects:
        stages[obj.stage].append(obj)
    return stages


def create_namespace(kube: Kube, name: str, *, field_manager: str) -> bool:
    """Create a Namespace labelled as orksync's; False when it already exists."""
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}}
    try:
        kube.create(kube.resource("v1", "Namespace"), body, field_manager=field_manager,
                    subject=f"Namespace/{name}", metadata_only=True)
    except ClusterError as err:
        if err.status == 409:
            return False
        raise
    return True


RECREATE_KINDS = frozenset({("v1", "Pod"),
                            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")})
RECREATE_ANNOTATION = "orksync.io/recreate-on-invalid"


def recreate_allowed(obj: RenderedObject) -> bool:
    """Kinds whose immutable fields Orkestra changes by delete + create (Pod, RoleBinding,
    ClusterRoleBinding); any other kind only with the per-object opt-in annotation
    (recreating a StatefulSet, say, can lose data)."""
    if (obj.ref.api_version, obj.ref.kind) in RECREATE_KINDS:
        return True
    annotations = (obj.body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(RECREATE_ANNOTATION, "")).lower() == "true"


def owner_reference_allowed(owner: ObjRef, child: ObjRef, child_namespaced: bool) -> bool:
    """Kubernetes honours an owner reference from a namespaced owner only inside its own
    namespace; a cluster-scoped owner may own anything. (Orkestra sets cross-namespace
    references, which the garbage collector treats as invalid: semantics §7.2 #12.)"""
    if not owner.namespace:
        return True
    return child_namespaced and child.namespace == owner.namespace
