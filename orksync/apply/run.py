"""What an apply is given (`ApplyOptions`) and what one apply keeps while it runs (`Run`):
the state the engine's parts (the stage LISTs, the object writer, the CRD wait) share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from orksync.apply.impersonation import Identities
from orksync.cluster.kube import Kube
from orksync.model import ObjRef, RenderedObject

FIELD_MANAGER = "orksync"

Kind = tuple[str, str]  # (apiVersion, kind)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class ApplyOptions:
    field_manager: str = FIELD_MANAGER
    workers: int = 8
    crd_timeout: float = 60.0
    dry_run: bool = False
    clock: Callable[[], datetime] = _utc_now  # rotation and certificate decisions


@dataclass(slots=True)
class Run:
    """State of one apply run."""

    uids: dict[ObjRef, str] = field(default_factory=dict)  # applied custom resources
    failed: set[ObjRef] = field(default_factory=set)
    # (owner, namespace, secret name) -> short hash of the Secret's data, for rollouts
    secret_hashes: dict[tuple[ObjRef, str, str], str] = field(default_factory=dict)
    # the same keys, for the Secrets this apply created or changed
    secrets_written: set[tuple[ObjRef, str, str]] = field(default_factory=set)
    # what this apply (or the sync before it) may have written so far, for the prefetch
    # (orksync.apply.prefetch): every such object under its identity and its identity
    # without a namespace; the API groups of the CRDs written
    written: set[ObjRef] = field(default_factory=set)
    crd_groups: set[str] = field(default_factory=set)
    # CRDs written whose spec did not change (their generation did not move: a shared
    # CRD's annotations): their groups' views are not stale
    crd_same_spec: set[ObjRef] = field(default_factory=set)
    # as whom each custom resource's children are written (orksync.apply.impersonation)
    identities: Identities | None = None
    # a dry run's view of what the real run would have made by now and the server cannot
    # know of: the namespaces it reports created, the kinds the rendered CRDs serve, the
    # objects it reports created without sending them (orksync.apply.write)
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
