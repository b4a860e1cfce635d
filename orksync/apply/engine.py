"""The apply engine: a RenderedSet in, a ChangeSet out.

Stages run in order (CRDs, then the repository's plain manifests, then custom resources,
then children in Orkestra's group order); objects inside one stage are written
concurrently. The live objects of every stage's kinds are listed once, at the start of
the apply (orksync.apply.prefetch), so an unchanged object costs no request at all. Owner
references to the live custom resource are added here, since only the cluster knows its
UID. Every object yields exactly one Change (orksync.apply.write).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from orksync.apply.crds import crd_kinds, wait_established
from orksync.apply.impersonation import Identities, Impersonation
from orksync.apply.kinds import policy
from orksync.apply.prefetch import Prefetch, Staged, View, by_stage, namespace_stages
from orksync.apply.run import ApplyOptions, Kind, Run
from orksync.apply.write import ObjectWriter
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Action,
    Change,
    ChangeSet,
    ObjRef,
    RenderedObject,
    RenderedSet,
)

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


class Applier:
    def __init__(self, kube: Kube, options: ApplyOptions | None = None,
                 on_change: Callable[[Change], None] | None = None, *,
                 impersonation: Impersonation | None = None,
                 view: View | None = None) -> None:
        """`impersonation`: who the children are written as, besides what the rendered
        custom resources' directives say (orksync.apply.impersonation). `view`: where the
        start-of-apply LISTs are read from instead, for the kinds it serves (the agent's
        informers, orksync.agent.drift); a stage whose view may be outdated by this apply's
        own writes still lists (`Prefetch`)."""
        self.kube = kube
        self.view = view
        self.options = options or ApplyOptions()
        self._writer = ObjectWriter(kube, self.options)
        self.on_change = on_change or (lambda change: None)
        self.impersonation = impersonation
        # per kind listed whole (no selector: custom resources, CRDs), the listed objects
        # with a deletionTimestamp; the sync's teardown check reads it instead of a LIST
        self.terminating: dict[Kind, list[dict[str, Any]]] = {}
        self._prefetched: Prefetch | None = None

    def prefetch(self, rendered: RenderedSet | Iterable[Staged]) -> None:
        """Send the LISTs of the coming `apply` of these objects now, so that they overlap
        with what the caller does before it (the sync reads its inventory, `orksync
        apply` the rendered files). `apply` starts them itself otherwise;
        `discard_prefetch` when no apply follows."""
        self.discard_prefetch()
        objects = rendered.objects if isinstance(rendered, RenderedSet) else tuple(rendered)
        self._prefetched = Prefetch(self.kube, by_stage(objects), self.options.workers,
                                    self.view)

    @property
    def versions(self) -> dict[ObjRef, str]:
        """The resourceVersion each server-side apply of this applier left (its answer's)."""
        return self._writer.versions

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
        run = Run(identities=Identities(self.kube, self.impersonation, objects))
        if self.options.dry_run:
            run.coming_kinds = crd_kinds(objects)
        run.wrote(written)
        stages = by_stage(objects)
        prefetched = self._prefetched
        if prefetched is None:
            prefetched = self._prefetched = Prefetch(self.kube, stages, self.options.workers,
                                                     self.view)
        with_namespaces = namespace_stages(stages)
        ensured: set[str] = set()
        try:
            for stage in sorted(stages):
                batch = stages[stage]
                if stage in with_namespaces:
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
                        if policy(change.ref).crd and change.ref not in run.crd_same_spec:
                            run.crd_groups.add(change.ref.name.partition(".")[2])
        finally:
            self.discard_prefetch()
        return changes

    def desired(self, obj: RenderedObject, owner_uid: str | None = None) -> dict[str, Any]:
        """The body `apply` would send for `obj` (owner reference to the owner's
        `owner_uid`, fingerprint), to tell whether a live object drifted from it
        (orksync.apply.compare.unchanged). Raises ClusterError (a child without
        `owner_uid`; discovery)."""
        run = Run()
        if obj.owner is not None and owner_uid:
            run.uids[obj.owner] = owner_uid
        return self._writer.desired(obj, self.kube.resource(obj.ref.api_version, obj.ref.kind),
                                    run)

    def _record(self, changes: ChangeSet, change: Change) -> None:
        changes.changes.append(change)
        self.on_change(change)

    # --- one stage ----------------------------------------------------------------------

    def _apply_stage(self, batch: list[RenderedObject], run: Run,
                     prefetched: Prefetch) -> list[Change]:
        live = prefetched.stage(batch, run, self.terminating)

        def attempt(obj: RenderedObject, local: bool) -> Change | None:
            try:
                return self._writer.write(obj, live, run, local=local)
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
        if crds and not self.options.dry_run:
            return wait_established(self.kube, crds, results, live, self.options.crd_timeout)
        return results

    # --- namespaces ---------------------------------------------------------------------

    def _ensure_namespaces(self, batch: list[RenderedObject], prefetched: Prefetch,
                           run: Run, ensured: set[str]) -> list[Change]:
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
