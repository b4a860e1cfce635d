"""The LISTs an apply reads the live objects from: one per kind of every stage, sent at
once when the apply starts (`Prefetch`), since a resync is mostly waiting for them, and
read by a stage only where this apply's own writes cannot have outdated them."""

from __future__ import annotations

import functools
import logging
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from orksync.apply.run import Kind, Run
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.model import MANAGED_SELECTOR, ObjRef, is_managed

log = logging.getLogger(__name__)

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
R = TypeVar("R")


def fulfil(future: Future[R], fn: Callable[[], R]) -> None:
    """Run `fn` for `future`, unless it was cancelled: `fn`'s result, or whatever it
    raised, is the future's, for the thread that reads it."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn())
    except BaseException as err:  # raised again where the future is read
        future.set_exception(err)


def stage_kinds(batch: Iterable[Staged]) -> dict[Kind, bool]:
    """The kinds of one stage, each with whether it holds children only (listed by
    orksync's label) rather than custom resources, CRDs or plain objects (listed whole)."""
    kinds: dict[Kind, bool] = {}
    for obj in batch:
        key = (obj.ref.api_version, obj.ref.kind)
        kinds[key] = kinds.get(key, True) and obj.owner is not None
    return kinds


def namespace_stages(stages: Mapping[int, Sequence[Staged]]) -> set[int]:
    """The stages before which the namespaces of their objects without owner (plain
    manifests, custom resources) are created when missing."""
    return {stage for stage, batch in stages.items()
            if any(o.owner is None and o.ref.namespace for o in batch)}


class Prefetch:
    """The LISTs of every stage, sent at once when the apply starts (up to `workers` at a
    time) instead of one stage after another: a resync is mostly waiting for them.

    One LIST per kind serves every stage that has it: without a selector when any stage
    lists the kind whole, a stage of children then keeping what the selector would have
    returned. A kind that discovery cannot resolve yet (a custom resource whose CRD this
    apply creates), or whose discovery fails, is not listed here: its stage lists it. A
    LIST that fails is the stage's failed prefetch (its objects are written as if absent).

    Staleness: a view taken at the start is older than the writes of the earlier stages.
    A stage uses it only where those writes cannot have changed it (`items`): none of
    the stage's objects of that kind was written earlier in this apply (or by the sync
    before it: the autoscaler) under the same identity, with or without a namespace, and
    no CRD of the kind's API group was written (a schema, a served version). Otherwise the
    stage lists again. Changes made by others during the apply are seen as they were at
    the start; the next sync sees them."""

    def __init__(self, kube: Kube, stages: Mapping[int, Sequence[Staged]],
                 workers: int, view: View | None = None) -> None:
        self.kube = kube
        self.view = view
        whole: dict[Kind, bool] = {}
        for stage in sorted(stages):
            for key, children_only in stage_kinds(stages[stage]).items():
                whole[key] = whole.get(key, False) or not children_only
        if namespace_stages(stages):
            whole[("v1", "Namespace")] = True  # `Applier._ensure_namespaces`
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

    def items(self, key: Kind, *, whole: bool, refs: Iterable[ObjRef], run: Run
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

    def stage(self, batch: Sequence[Staged], run: Run,
              terminating: dict[Kind, list[dict[str, Any]]]) -> dict[ObjRef, dict[str, Any]]:
        """The stage's objects as listed (one LIST per kind, children by label, the one
        sent at the start of the apply where it may serve), keyed by identity. Per kind
        listed whole, the listed objects with a deletionTimestamp go to `terminating`."""
        refs: dict[Kind, list[ObjRef]] = defaultdict(list)
        for obj in batch:
            refs[(obj.ref.api_version, obj.ref.kind)].append(obj.ref)
        live: dict[ObjRef, dict[str, Any]] = {}
        for (api_version, kind), children_only in stage_kinds(batch).items():
            try:
                items = self.items((api_version, kind), whole=not children_only,
                                   refs=refs[(api_version, kind)], run=run)
                if items is None:
                    res = self.kube.resource(api_version, kind)
                    items = list(self.kube.list(res, label_selector=MANAGED_SELECTOR
                                                if children_only else None))
                deleting = []
                for item in items:
                    live[ObjRef.of(item)] = item
                    if (item.get("metadata") or {}).get("deletionTimestamp"):
                        deleting.append(item)
                if not children_only:
                    terminating[(api_version, kind)] = deleting
            except ClusterError as err:
                if err.status == 404 and (api_version, kind) in run.coming_kinds:
                    continue  # a dry run's kind whose CRD it did not create (orksync.apply.write)
                log.warning("prefetch of %s %s failed; its objects are written as if absent "
                            "(a create that finds one changes nothing): %s",
                            api_version, kind, err)
        return live

    def close(self) -> None:
        """Send nothing more (an apply that ended early); LISTs under way finish."""
        with self.lock:
            self.todo.clear()
        for future in self.listed.values():
            future.cancel()


def by_stage(objects: Iterable[S]) -> dict[int, list[S]]:
    stages: dict[int, list[S]] = defaultdict(list)
    for obj in objects:
        stages[obj.stage].append(obj)
    return stages
