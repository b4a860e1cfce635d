"""What a loaded repository holds. Pure data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orksync.katalog.tenancy import Tenancy
from orksync.model import ObjRef

KATALOG_API_VERSIONS = ("orkestra.orkspace.io/v1", "orkestra.konductor.io/v1Alpha")
# Orkestra's deletion protection: an object labelled so is never deleted by orksync's
# prune or teardown. orksync puts it on the CRDs of a Katalog with
# security.deletionProtection (unless the entry says protectCRD: false); custom
# resources carry it when their authors label them, as in Orkestra.
DELETION_PROTECTION_LABEL = "orkestra.io/deletion-protection"


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """Where a document lives: repository-relative file and document index."""

    file: str
    path: Path
    index: int = 0

    def __str__(self) -> str:
        return self.file if self.index == 0 else f"{self.file}#{self.index}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """Which custom resources of its kind a CRD entry reconciles (Orkestra's informer
    filters): `namespace` ("" for every one), `labels` (labelSelector) and `fields`
    (fieldSelector, dot paths such as metadata.name), each pair matched exactly."""

    namespace: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CrdEntry:
    """One `spec.crds.<key>` entry of a Katalog: which kind it watches and what it renders."""

    key: str
    katalog: str
    source: Source
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    operator_box: dict[str, Any]
    raw: dict[str, Any]
    crd_name: str = ""  # the CustomResourceDefinition's metadata.name, when known
    # the namespace guard (both levels merged) and the cluster-scoped kinds allowed
    tenancy: Tenancy = field(default_factory=Tenancy)
    selection: Selection = field(default_factory=Selection)
    protect_crd: bool = False  # deletionProtection: its CRD is never pruned
    # dependsOn: (entry key of the same Katalog, state), the state `started` or `healthy`
    # (`ready` is read as `healthy`); orksync.render.engine.dependency_refusal
    depends_on: tuple[tuple[str, str], ...] = ()
    # allowedExternalHosts: hosts an `external:` URL chosen by a template may name
    # (orksync.render.external)
    external_hosts: tuple[str, ...] = ()
    # settings moved from Orkestra's grouped layout: (flat path, path as written), both
    # relative to the entry (orksync.katalog.layout)
    moved: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    # its Katalog's own profiles: class -> name -> fields (orksync.katalog.profiles)
    profiles: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # crossAccess (the entry's, else its Katalog's; default true): False, a cross read of
    # its custom resources finds nothing (orksync.render.cross)
    cross_access: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        return f"spec.crds.{self.key}"

    def written_at(self, path: list[str | int]) -> list[str | int]:
        """An entry-relative field path as written in the Katalog file: its grouped
        spelling when the setting was written in the grouped layout."""
        for flat, grouped in self.moved:
            if tuple(path[:len(flat)]) == flat:
                return [*grouped, *path[len(flat):]]
        return path


@dataclass(frozen=True, slots=True, kw_only=True)
class Katalog:
    name: str
    api_version: str
    source: Source
    crds: tuple[CrdEntry, ...]
    notes: dict[str, str] = field(default_factory=dict)
    dialect: str = "go"  # template dialect: "go" (Orkestra's) or "jinja2"
    # the Katalog's own profiles: class -> name -> fields (orksync.katalog.profiles)
    profiles: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomResource:
    ref: ObjRef
    body: dict[str, Any]
    source: Source
    entry: CrdEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class CrdManifest:
    name: str
    body: dict[str, Any]
    source: Source
    group: str
    kind: str
    plural: str
    namespaced: bool
    storage_version: str
    deletion_protected: bool = False  # labelled DELETION_PROTECTION_LABEL when applied


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainManifest:
    """A document of the repository that no Katalog handles and that is not a CRD (a
    Namespace, RBAC, a source Secret): applied as it is, before the custom resources.
    `body` is the document without `status` and the fields the API server sets."""

    ref: ObjRef
    body: dict[str, Any]
    source: Source


@dataclass(frozen=True, slots=True, kw_only=True)
class Catalog:
    """A loaded repository. `errors` are inputs refused while loading: each names its file."""

    root: Path
    katalogs: tuple[Katalog, ...]
    crds: tuple[CrdManifest, ...]
    crs: tuple[CustomResource, ...]
    errors: tuple[Exception, ...] = ()
    warnings: tuple[str, ...] = ()
    # custom resources in the repository that Orkestra would not reconcile (a disabled
    # entry, a selector that does not match): (identity, why); not rendered, not pruned
    left_out: tuple[tuple[ObjRef, str], ...] = ()
    plain: tuple[PlainManifest, ...] = ()  # in identity order

    def entries(self) -> list[CrdEntry]:
        return [e for k in self.katalogs for e in k.crds]
