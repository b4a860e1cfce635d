"""Who the requests about a custom resource's children are sent as (docs/multi-tenancy.md,
the second wall). I/O free: it hands out `Kube` views, it sends nothing itself.

A Katalog entry's `serviceAccountName` (orksync.katalog.tenancy) reaches the apply as the
directive `serviceAccount: <namespace>/<name>` on each of its rendered custom resources
(the rendered directory's index carries it, so `orksync apply DIR` honours it too). The
agent's `--default-service-account NAME` names the ServiceAccount NAME in the custom
resource's own namespace for every custom resource whose entry names none, as Flux's
lockdown does. Everything written, deleted or read for one custom resource's children
(apply, create, delete, recreate, rollout, autoscale, Secrets and what they copy, onDelete,
prune, the absent cleanup, the diff's dry runs) then goes out with
`Impersonate-User: system:serviceaccount:<namespace>:<name>`, so the cluster's RBAC
decides it as it would for that ServiceAccount. CRDs, the custom resources themselves
(their finalizer and status), the inventory and Events stay the agent's.

A sync decides each rendered custom resource's ServiceAccount once (`Identities.resolved`)
and records it in the inventory beside the custom resource (orksync.apply.inventory): a
custom resource that left the render (its teardown, its children's prune) is handled as
the ServiceAccount recorded for it, even when its Katalog entry left too; one recorded
before impersonation existed, as its entry's (when the repository still has it), else as
the default. A cluster-scoped custom resource has no namespace for the default's name: its
children then fail with an error saying so rather than being written as the agent.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orksync.apply.inventory import InventoryEntry, is_crd
from orksync.cluster.kube import Kube
from orksync.cluster.live import LiveIndex
from orksync.errors import ClusterError
from orksync.model import SERVICE_ACCOUNT_DIRECTIVE, ObjRef, RenderedObject, RenderedSet

if TYPE_CHECKING:
    from orksync.katalog.model import Catalog, CrdEntry

__all__ = ["Identities", "Impersonation", "ReadAs", "service_account_user"]

Kind = tuple[str, str]  # (apiVersion, kind)


def service_account_user(account: str) -> str:
    """The user name of a ServiceAccount `namespace/name`, as the API server knows it."""
    namespace, _, name = account.partition("/")
    return f"system:serviceaccount:{namespace}:{name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Impersonation:
    """The settings: `default`, the ServiceAccount name of --default-service-account
    ("": the agent's own identity; `namespace/name`: a Sync's, see `tenant`); `by_kind`,
    each custom resource kind's entry serviceAccountName as written (`name` or
    `namespace/name`), for custom resources no longer rendered."""

    default: str = ""
    by_kind: Mapping[Kind, str] = field(default_factory=dict)

    @property
    def tenant(self) -> str:
        """The namespace of a `default` given as `namespace/name` (a Sync's ServiceAccount,
        orksync.agent.controller), else "". Then every child is written as that
        ServiceAccount, an entry's bare serviceAccountName names one of that namespace, and
        an account of any other namespace (an entry's, a directive's, a recorded one) is
        refused: a Sync's repository gets no more than its namespace's ServiceAccounts."""
        return self.default.partition("/")[0] if "/" in self.default else ""

    @classmethod
    def of_catalog(cls, catalog: Catalog | None, default: str = "") -> Impersonation:
        """`default` and the serviceAccountName of every CRD entry of `catalog`."""
        return cls(default=default).with_entries(
            e for k in (catalog.katalogs if catalog is not None else ()) for e in k.crds)

    def with_entries(self, entries: Iterable[CrdEntry]) -> Impersonation:
        """These settings knowing the serviceAccountName of `entries` too (the ones they
        know already win)."""
        named = {(e.api_version, e.kind): e.tenancy.service_account for e in entries
                 if e.tenancy.service_account}
        if not named:
            return self
        return dataclasses.replace(self, by_kind={**named, **self.by_kind})


class Identities:
    """One run's answer to "as whom are this custom resource's children written": from
    the rendered custom resources' directives, then `Impersonation`."""

    def __init__(self, kube: Kube, impersonation: Impersonation | None = None,
                 rendered: Iterable[RenderedObject] = (),
                 recorded: Iterable[InventoryEntry] = ()) -> None:
        """`recorded`: the stored inventory's entries, whose custom resources carry the
        ServiceAccount their children were written as (for those no longer rendered)."""
        self.kube = kube
        self.settings = impersonation or Impersonation()
        rendered = tuple(rendered)
        self.accounts: dict[ObjRef, str] = {
            o.ref: str(o.directives[SERVICE_ACCOUNT_DIRECTIVE]) for o in rendered
            if o.owner is None and o.directives.get(SERVICE_ACCOUNT_DIRECTIVE)}
        self.rendered = {o.ref for o in rendered if o.owner is None and not is_crd(o.ref)}
        # for custom resources no longer rendered only: a rendered one follows its
        # Katalog entry and the default as they are now
        self.recorded = {e.ref: e.account for e in recorded
                         if e.account and e.ref not in self.rendered}
        self._indexes: dict[tuple[str, bool], LiveIndex] = {}
        self._lock = threading.Lock()

    def account(self, owner: ObjRef, directive: str = "") -> str:
        """`namespace/name` of the ServiceAccount `owner`'s children are written as; ""
        for the agent's own identity. `directive`: the custom resource's own (a render in
        progress has no rendered set yet). Raises ClusterError when the default applies
        to a cluster-scoped custom resource (no namespace to find it in)."""
        account = directive or self.accounts.get(owner) or self.recorded.get(owner)
        tenant = self.settings.tenant
        named = self.settings.by_kind.get((owner.api_version, owner.kind), "")
        if not account:
            if "/" in named:
                account = named
            elif tenant:  # a Sync's: its namespace's ServiceAccounts only
                account = f"{tenant}/{named}" if named else self.settings.default
        if account:
            if tenant and account.partition("/")[0] != tenant:
                raise ClusterError(
                    f"the ServiceAccount {account!r} is not of the Sync's namespace "
                    f"{tenant!r}: a Sync writes as the ServiceAccounts of its own namespace "
                    "only; nothing of this custom resource's children is written",
                    subject=str(owner), status=403, reason="Forbidden")
            return account
        name = named or self.settings.default
        if not name:
            return ""
        if not owner.namespace:
            raise ClusterError(
                f"the ServiceAccount {name!r} is looked up in the custom resource's "
                "namespace, and this custom resource is cluster-scoped: give its Katalog "
                "entry serviceAccountName: <namespace>/<name>; nothing of it is written "
                "as the agent", subject=str(owner), status=403, reason="Forbidden")
        return f"{owner.namespace}/{name}"

    def resolved(self, rendered: RenderedSet) -> RenderedSet:
        """`rendered` with every custom resource's directive set to the ServiceAccount its
        children are written as, the default included (recorded in the inventory from
        there); one whose identity cannot be decided is left as it is (its children fail
        when they are written)."""
        def resolve(obj: RenderedObject) -> RenderedObject:
            if obj.owner is not None or is_crd(obj.ref):
                return obj
            try:
                account = self.account(obj.ref)
            except ClusterError:
                return obj
            if not account or obj.directives.get(SERVICE_ACCOUNT_DIRECTIVE) == account:
                return obj
            self.accounts[obj.ref] = account
            return dataclasses.replace(obj, directives={
                **obj.directives, SERVICE_ACCOUNT_DIRECTIVE: account})
        return dataclasses.replace(rendered, objects=tuple(resolve(o) for o in rendered.objects))

    def kube_for_owner(self, text: str) -> Kube:
        """The connection for a live child whose `orksync.io/owner` annotation is `text`
        (`Kind.group/namespace/name`; `orksync rotate` and the agent's rotation read no
        rendered set): the custom resource of that name among the rendered and recorded
        ones, else the entry of that kind and group, else the default. Raises ClusterError
        when no identity can be decided."""
        for ref in (*self.accounts, *self.recorded):
            if str(ref) == text:
                return self.kube_for(ref)
        head, _, rest = text.partition("/")
        namespace, _, name = rest.rpartition("/")
        kind, _, group = head.partition(".")
        api_version = next((av for av, k in self.settings.by_kind
                            if k == kind and av.rpartition("/")[0] == group), "")
        return self.kube_for(ObjRef(api_version=api_version or f"{group}/v1", kind=kind,
                                    namespace=namespace, name=name))

    def kube_for(self, owner: ObjRef | None, directive: str = "") -> Kube:
        """The connection for an object owned by `owner` (None: a CRD or a custom
        resource, the agent's own)."""
        if owner is None:
            return self.kube
        account = self.account(owner, directive)
        return self.kube.impersonating(service_account_user(account)) if account else \
            self.kube

    def index_for(self, owner: ObjRef, *, strict: bool = False, directive: str = ""
                  ) -> LiveIndex | None:
        """The children of `owner` as its ServiceAccount sees them: one LiveIndex per
        ServiceAccount, listing per namespace (a tenant's RBAC is usually granted per
        namespace), a kind it may not list being one of which it sees nothing; None for
        the agent's own identity (the caller's cluster-wide index). For views that show
        (status, diff, render --live): a sync's decisions never rest on it."""
        account = self.account(owner, directive)
        if not account:
            return None
        with self._lock:
            index = self._indexes.get((account, strict))
            if index is None:
                index = self._indexes[(account, strict)] = LiveIndex(
                    self.kube.impersonating(service_account_user(account)), strict=strict,
                    by_namespace=True, hide_forbidden=True)
        return index


class ReadAs:
    """The LiveView of a render that reads as the sync writes (`orksync diff`, `orksync
    render --live`): the custom resources themselves and `cross` through the agent's
    index, each custom resource's `.children` (`for_children`) as its ServiceAccount, so
    that a render shows nothing of a child its ServiceAccount may not read: a kind it may
    not list is one of which it sees nothing (any other failed read fails the render of
    that custom resource, strict, as in a sync)."""

    def __init__(self, identities: Identities) -> None:
        self.identities = identities
        self.agent = LiveIndex(identities.kube, strict=True)

    def get(self, ref: ObjRef, selector: str = "") -> dict[str, Any] | None:
        return self.agent.get(ref, selector)

    def for_children(self, owner: ObjRef, directive: str) -> LiveIndex:
        """Raises ClusterError when `owner`'s identity cannot be decided."""
        return self.identities.index_for(owner, strict=True, directive=directive) or \
            self.agent
