"""One entry of a custom resource's onCreate / onReconcile block into its objects: its
condition, its templates, the builder of its kind, labels, copies, `toNamespaces`, the
namespace guard and the cluster-scope policy. Pure; the blocks are walked by
orksync.render.resource."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from orksync.errors import RenderError
from orksync.katalog.model import CustomResource
from orksync.model import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_ANNOTATION,
    OWNER_LABEL,
    ObjRef,
    Origin,
    RenderedObject,
    WritePolicy,
    copy_tree,
)
from orksync.names import label_key_problem, label_value_problem, subdomain_problem
from orksync.render.builders import BuildContext, BuildError, Built
from orksync.render.coercion import to_namespaces
from orksync.render.conditions import evaluate_conditions
from orksync.render.gotemplate import GoTemplateError
from orksync.render.guard import (
    SCOPE_DIRECTIVE,
    ClusterScope,
    ClusterScopePolicy,
    NamespaceGuard,
    identity_problem,
    kind_label,
)
from orksync.render.kinds import (
    BY_KEY,
    ORDER,
    KindSpec,
    UnknownField,
    unknown_fields,
)
from orksync.render.templates import Templates
from orksync.render.user_profiles import PLACES, ProfileError, expand_profiles
from orksync.runtime.memo import IdentityCache
from orksync.yamls.io import locate, split_path

STAGE_CRD = 0


STAGE_CR = 5


STAGE_CHILDREN = 10  # + Orkestra's group order


MANAGED_LABEL = "orkestra.orkspace.io/managed"


ENTRY_KEYS_NOT_RENDERED = frozenset({"when", "or", "anyOf", "forEach", "toNamespaces",
                                     "autoscale"})


# Kinds whose entries take `autoscale:` (its conditions are evaluated here, see autoscale()).
AUTOSCALED = frozenset({"deployments", "statefulSets", "replicaSets"})


# Kinds whose entries may copy a live object: the key naming the source, and the kind.
COPY_FROM = {"configMaps": ("fromConfigMap", "ConfigMap"),
             "networkPolicies": ("fromNetworkPolicy", "NetworkPolicy"),
             "resourceQuotas": ("fromResourceQuota", "ResourceQuota"),
             "limitRanges": ("fromLimitRange", "LimitRange")}


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """What a Katalog entry's rendering decides from the entry alone, the same for every
    custom resource (worked out once per entry, see entry_plan)."""

    policy: WritePolicy
    stage: int
    unknown: tuple[UnknownField, ...]  # the fields no builder reads
    conditional: bool  # has `when`, `or` or `anyOf`
    autoscale: bool  # `autoscale:` on a kind that takes it
    copies: bool  # a kind that may copy a live object (COPY_FROM)
    templated_source: bool  # `fromNamespace` is a template: the guard checks the source
    to_namespaces: bool  # has `toNamespaces`
    force_off: bool  # `forceConflict: false` on the entry, or on its CRD entry


def entry_plan(spec: KindSpec, entry: Mapping[str, Any], block: str,
               crd_raw: Mapping[str, Any]) -> EntryPlan:
    # keyed by the place too: one entry can stand under several CRD entries and blocks
    # (a YAML alias); the CRD entry's raw map lives as long as the entry's Katalog
    return _PLANS.get(entry, (spec.key, block, id(crd_raw)),
                      lambda: make_plan(spec, entry, block, crd_raw))


def make_plan(spec: KindSpec, entry: Mapping[str, Any], block: str,
              crd_raw: Mapping[str, Any]) -> EntryPlan:
    force = entry.get("forceConflict", crd_raw.get("forceConflict", True))
    return EntryPlan(
        policy=policy_for(spec, block, entry), stage=STAGE_CHILDREN + ORDER[spec.key],
        unknown=tuple(unknown_fields(spec.key, entry)),
        conditional=any(entry.get(k) is not None for k in ("when", "or", "anyOf")),
        autoscale=spec.key in AUTOSCALED and entry.get("autoscale") is not None,
        copies=spec.key in COPY_FROM,
        templated_source=isinstance(entry.get("fromNamespace"), str)
        and "{{" in entry["fromNamespace"],
        to_namespaces=bool(entry.get("toNamespaces")),
        force_off=str(force).lower() in ("false", "0", "no"))


_PLANS: IdentityCache[EntryPlan] = IdentityCache()


# a Katalog entry's warning lines: (entry, field path) -> line
_LINES: IdentityCache[int | None] = IdentityCache()


class _LeafError(Exception):
    """A template error in a leaf, on its way up to the entry that reports it: each
    container it passes adds its step (`.key`, `[i]`), so the path is only built for
    the leaf that failed."""

    def __init__(self, error: GoTemplateError) -> None:
        super().__init__(str(error))
        self.error = error
        self.steps: list[str] = []


def _leaves(value: Any, data: Mapping[str, Any], render: Callable[[str, Mapping[str, Any]], str],
            skip: frozenset[str] = frozenset()) -> Any:
    kind = type(value)
    if kind is str or isinstance(value, str):
        if "{{" not in value:
            return value
        try:
            return render(value, data)
        except GoTemplateError as err:
            raise _LeafError(err) from None
    if kind is int or kind is bool or kind is float or value is None:
        return value  # before the ABC check of Mapping, which every scalar leaf paid
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        out = {}
        for k, v in value.items():
            try:
                out[k] = v if k in skip else _leaves(v, data, render)
            except _LeafError as err:
                err.steps.append(f".{k}")
                raise
        return out
    if isinstance(value, list):
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_leaves(v, data, render))
            except _LeafError as err:
                err.steps.append(f"[{i}]")
                raise
        return items
    return value


def copy_directive(key: str, rendered: Mapping[str, Any], cr_namespace: str
                   ) -> dict[str, str] | None:
    """`fromConfigMap` & co.: the live source the applier reads and merges (apply time)."""
    source_key, kind = COPY_FROM.get(key, ("", ""))
    source = _str(rendered.get(source_key)) if source_key else ""
    if not source:
        return None
    return {"kind": kind, "name": source,
            "namespace": _str(rendered.get("fromNamespace")) or cr_namespace or "default"}


def _in_namespace(obj: RenderedObject, namespace: str) -> RenderedObject:
    body = copy_tree(dict(obj.body))
    body["metadata"]["namespace"] = namespace
    return RenderedObject(ref=ObjRef.of(body), body=body, policy=obj.policy, origin=obj.origin,
                          stage=obj.stage, owner=obj.owner, directives=obj.directives)


def policy_for(spec: KindSpec, block: str, entry: Mapping[str, Any]) -> WritePolicy:
    if spec.key == "jobs":
        return WritePolicy.CREATE_ONLY
    if block == "onReconcile" or entry.get("reconcile") is True:
        return WritePolicy.APPLY
    return WritePolicy.CREATE


def _str(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _replace_entry(origin: Origin, entry: str) -> Origin:
    return Origin(file=origin.file, katalog=origin.katalog, crd=origin.crd, cr=origin.cr,
                  entry=entry)


class EntryRenderer:
    """Renders the entries of one custom resource into objects, and collects what the
    render of that custom resource reports: warnings, refused objects, objects absent
    (their condition is false) or retained (not to be pruned)."""

    def __init__(self, cr: CustomResource, templates: Templates, origin: Origin,
                 scope: ClusterScope | None = None) -> None:
        self.cr = cr
        self.cr_text = str(cr.ref)
        self.templates = templates
        self.origin = origin
        self.warnings: list[str] = []
        self.guard = NamespaceGuard.for_entry(cr.entry)
        self.scope = scope or ClusterScope()
        self.cluster_policy = ClusterScopePolicy.for_entry(cr.entry, strict=self.scope.strict)
        self.skipped: list[tuple[ObjRef, str]] = []
        self.absent: list[ObjRef] = []
        self.retained: list[ObjRef] = []
        self._system_labels: dict[str, str] | None = None
        self.namespace_checked = ""  # the last namespace found valid
        meta = cr.body["metadata"]
        self.cr_name = str(meta["name"])
        self.cr_namespace = str(meta.get("namespace") or "")

    def warn(self, path: str, message: str) -> None:
        """A warning about the field at `path` (below operatorBox) of the Katalog entry:
        `file:line: <cr>: <path> <message>` (the line looked up once per entry and path)."""
        entry = self.cr.entry
        full = f"{entry.path}.operatorBox.{path}"
        line = _LINES.get(entry, full, lambda: locate(entry.source.path, entry.source.index,
                                                       split_path(full)))
        where = f"{entry.source.file}:{line}" if line else entry.source.file
        self.warnings.append(f"{where}: {self.cr.ref}: {path} {message}")

    def fail(self, path: str, message: str) -> RenderError:
        full = f"{self.cr.entry.path}.operatorBox.{path}"
        source = self.cr.entry.source
        return RenderError(message, file=source.file, obj=str(self.cr.ref), path=full,
                           line=locate(source.path, source.index, split_path(full)))

    def conditions(self, node: Mapping[str, Any], data: Mapping[str, Any], path: str) -> bool:
        when = node.get("when")
        or_ = node.get("or") if node.get("or") is not None else node.get("anyOf")
        if when is None and or_ is None:
            return True
        for key, value in (("when", when), ("or", or_)):
            if value is not None and not isinstance(value, list):
                raise self.fail(f"{path}.{key}", "must be a list of conditions")
        return evaluate_conditions(data, when, or_, self.templates.render,
                                   clock=self.templates.clock)

    def autoscale(self, raw: Any, data: Mapping[str, Any], path: str) -> Any:
        """`autoscale:` with its templates rendered and each direction's `conditions`
        (`when` / `or` / `anyOf`) evaluated now, against the same data as the entry (live
        children included), into `active: true|false`. The builder validates the rest and
        the applier (orksync.lifecycle.autoscale) turns it into a replica count."""
        if not isinstance(raw, Mapping):
            return raw
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key in ("scaleUp", "scaleDown") and isinstance(value, Mapping):
                conditions = value.get("conditions")
                if conditions is not None and not isinstance(conditions, Mapping):
                    raise self.fail(f"{path}.{key}.conditions", "must be a map with when / or")
                rest = {k: v for k, v in value.items() if k != "conditions"}
                out[key] = {**self.render_leaves(rest, data, f"{path}.{key}"),
                            "active": self.conditions(conditions or {}, data,
                                                      f"{path}.{key}.conditions")}
            else:
                out[key] = self.render_leaves(value, data, f"{path}.{key}")
        return out

    def render_leaves(self, value: Any, data: Mapping[str, Any], path: str,
                      skip: frozenset[str] = frozenset()) -> Any:
        """`value` with every string leaf rendered as a template (a map's keys in `skip`
        are kept as they are). A template error names the leaf's path below `path`."""
        try:
            return _leaves(value, data, self.templates.render, skip)
        except _LeafError as err:
            raise self.fail(path + "".join(reversed(err.steps)),
                            f"template error: {err.error}") from err.error

    def entry(self, spec: KindSpec, entry: Mapping[str, Any], data: Mapping[str, Any],
              block: str, path: str, plan: EntryPlan | None = None) -> list[RenderedObject]:
        if plan is None:
            plan = entry_plan(spec, entry, block, self.cr.entry.raw)
        if plan.conditional and not self.conditions(entry, data, path):
            # Cleaned up only when reconciled (onReconcile, `reconcile: true`); Jobs and
            # plain onCreate entries are never cleaned up (semantics §2.1), so the prune
            # must not delete them either.
            if plan.policy is WritePolicy.APPLY:
                self.absent.extend(self.absent_refs(spec, entry, data))
            else:
                self.retained.extend(self.absent_refs(spec, entry, data))
            return []
        if spec.builder is None:
            raise self.fail(path, f"{spec.key} is not supported by this version of orksync")
        for unknown in plan.unknown:  # errors found when the Katalog loaded, if validated
            if not unknown.ignored:
                raise self.fail(f"{path}.{unknown.path}", unknown.message(spec.key))
            self.warn(f"{path}.{unknown.path}", unknown.message(spec.key))
        rendered = self.render_leaves(entry, data, path, ENTRY_KEYS_NOT_RENDERED)
        if plan.autoscale:
            rendered["autoscale"] = self.autoscale(entry["autoscale"], data,
                                                   f"{path}.autoscale")
        if self.cr.entry.profiles and spec.key in PLACES:
            try:
                rendered = expand_profiles(
                    spec.key, rendered, self.cr.entry.profiles,
                    lambda fields, field: self.render_leaves(fields, data, f"{path}.{field}"))
            except ProfileError as err:
                raise self.fail(f"{path}.{err.field}", str(err)) from err
        namespaced = spec.namespaced
        name = _str(rendered.get("name")) or spec.default_name(self.cr_name)
        name_field = "name"
        if spec.key == "custom":
            raw_meta = rendered.get("metadata")
            meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
            if _str(meta.get("name")) or not name:
                name_field = "metadata.name"
            name = _str(meta.get("name")) or name
            namespaced = _str(meta.get("namespaced")).lower() not in ("false", "0", "no")
        if not name:
            raise self.fail(f"{path}.{name_field}",
                            f"is required ({spec.key} entries have no default name)")
        problem = subdomain_problem(name)
        if problem:
            raise self.fail(f"{path}.{name_field}", problem)
        namespace = ""
        if namespaced:
            namespace = _str(rendered.get("namespace")) or self.cr_namespace or "default"
            if namespace != self.namespace_checked:  # most entries share one
                problem = subdomain_problem(namespace)
                if problem:
                    raise self.fail(f"{path}.namespace", problem)
                self.namespace_checked = namespace
        ctx = BuildContext(cr_name=self.cr_name, cr_namespace=self.cr_namespace,
                           owner_key=self.cr_name, name=name, namespace=namespace,
                           labels=self.labels(rendered.get("labels"), path))
        body, directives = self.build(spec, rendered, ctx, path)
        if plan.copies:
            copy_from = copy_directive(spec.key, rendered, self.cr_namespace)
            if copy_from:
                directives = {**directives, "copyFrom": copy_from}
        cluster, refused, directives = self.cluster_scope(spec, body, directives, path)
        refused = refused or self.namespace_refusal(body) or \
            (self.copy_source_refusal(entry, directives) if plan.templated_source else None)
        if plan.force_off:
            directives = {**directives, "forceConflict": False}
        obj = RenderedObject(ref=ObjRef.of(body), body=body, policy=plan.policy,
                             origin=_replace_entry(self.origin, path), stage=plan.stage,
                             owner=self.cr.ref, directives=directives)
        produced = self.ingress_tls_secret(rendered, ctx, obj, path) \
            if spec.key == "ingresses" else []
        targets = [obj.ref.namespace] if obj.ref.namespace else [""]
        if plan.to_namespaces and cluster:
            if spec.namespaced:  # a cluster-scoped key: the load-time warning says it
                self.warnings.append(f"{self.cr.entry.source.file}: {self.cr.ref}: "
                                     f"{path}.toNamespaces is ignored: {obj.ref} is cluster-scoped")
        elif plan.to_namespaces:
            raw = entry["toNamespaces"]
            if not isinstance(raw, list):
                raise self.fail(f"{path}.toNamespaces", "must be a list")
            try:
                targets = to_namespaces(raw, data, self.templates.render)
            except GoTemplateError as err:
                raise self.fail(f"{path}.toNamespaces", f"template error: {err}") from err
            for target in targets:
                problem = subdomain_problem(target)
                if problem:
                    raise self.fail(f"{path}.toNamespaces", problem)
        for target in targets:
            produced.append(obj if target == obj.ref.namespace else _in_namespace(obj, target))
        out = []
        for one in produced:
            problem = identity_problem(one.ref)
            if problem:
                raise self.fail(one.origin.entry, problem)
            refusal = refused or (self.guard.refusal(one.ref.namespace)
                                  if one.ref.namespace else None)
            if refusal:
                self.skipped.append((one.ref, f"{self.cr.ref} {one.origin.entry}: {refusal}"))
                continue
            out.append(one)
        return out

    def cluster_scope(self, spec: KindSpec, body: dict[str, Any], directives: dict[str, Any],
                      path: str) -> tuple[bool, str | None, dict[str, Any]]:
        """Whether the object is cluster-scoped, the cluster-scope policy's refusal if it
        is, and its directives. A `custom` entry's kind has the scope Kubernetes gives it,
        whatever the entry says (a ClusterRoleBinding is cluster-scoped with or without
        `metadata.namespaced: false`); a kind unknown here gets the refusal as a directive
        for the applier, which learns the scope from discovery."""
        api_version, kind = str(body["apiVersion"]), str(body["kind"])
        meta = body["metadata"]
        namespaced = spec.namespaced
        if spec.key == "custom":
            known = self.scope.namespaced_kind(api_version, kind)
            namespaced = "namespace" in meta if known is None else known
            if known is False:
                meta.pop("namespace", None)
            elif known and "namespace" not in meta:
                raise self.fail(f"{path}.metadata.namespaced", f"{kind_label(api_version, kind)}"
                                " is a namespaced kind; it cannot be written cluster-scoped")
            elif known is None and namespaced:
                refusal = self.cluster_policy.refusal(api_version, kind)
                if refusal:
                    directives = {**directives,
                                  SCOPE_DIRECTIVE: f"{self.cr.ref} {path}: {refusal}"}
        if namespaced:
            return False, None, directives
        return True, self.cluster_policy.refusal(api_version, kind), directives

    def namespace_refusal(self, body: Mapping[str, Any]) -> str | None:
        """A Namespace is a namespace: its name passes the guard like a target does."""
        if body["kind"] != "Namespace" or body["apiVersion"] != "v1":
            return None
        return self.guard.refusal(str(body["metadata"]["name"]))

    def copy_source_refusal(self, entry: Mapping[str, Any],
                            directives: Mapping[str, Any]) -> str | None:
        """The guard on what a copy reads: a source namespace chosen by a template must
        pass it (else a custom resource could copy any Secret of the cluster into its own
        namespace). A source namespace written in the Katalog is the platform's choice,
        and the default, the custom resource's namespace, has passed the guard already."""
        raw = entry.get("fromNamespace")
        if not (isinstance(raw, str) and "{{" in raw):
            return None
        for key, kind in (("copyFrom", ""), ("fromSecret", "Secret")):
            source = directives.get(key)
            if isinstance(source, Mapping):
                refusal = self.guard.refusal(str(source["namespace"]))
                if refusal:
                    return (f"copy source {source.get('kind') or kind}/{source['namespace']}/"
                            f"{source['name']}: {refusal}")
        return None

    def absent_refs(self, spec: KindSpec, entry: Mapping[str, Any],
                    data: Mapping[str, Any]) -> list[ObjRef]:
        """The objects an entry writes when its condition holds (names only, conditions not
        evaluated): when it is false, candidates for Orkestra's cleanup (deleted when owned
        and claimed by no active entry); in a live render, the names `.children` reads."""
        def text(key: str, node: Mapping[str, Any] = entry) -> str:
            try:
                return self.templates.text(node.get(key), data)
            except GoTemplateError:
                return ""
        api_version, kind, namespaced = spec.api_version, spec.kind, spec.namespaced
        name = text("name") or spec.default_name(self.cr_name)
        if spec.key == "custom":
            raw_meta = entry.get("metadata")
            meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
            api_version, kind = text("apiVersion"), text("kind")
            name = text("name", meta) or name
            namespaced = text("namespaced", meta).lower() not in ("false", "0", "no")
        if not (api_version and kind and name) or subdomain_problem(name):
            return []
        namespaces = [""]
        if namespaced:
            namespaces = [text("namespace") or self.cr_namespace or "default"]
            raw = entry.get("toNamespaces")
            if isinstance(raw, list) and raw:
                try:
                    namespaces = to_namespaces(raw, data, self.templates.render)
                except GoTemplateError:
                    return []
        return [ObjRef(api_version=api_version, kind=kind, namespace=ns, name=name)
                for ns in namespaces if not ns or not (subdomain_problem(ns)
                                                       or self.guard.refusal(ns))]

    def build(self, spec: KindSpec, rendered: Mapping[str, Any], ctx: BuildContext,
              path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        assert spec.builder is not None
        if spec.key == "custom":
            rendered = self.custom_label_list(rendered, path)
        try:
            built = spec.builder(rendered, ctx)
        except BuildError as err:
            raise self.fail(f"{path}.{err.field}", str(err)) from err
        body, directives = (built.body, built.directives) if isinstance(built, Built) \
            else (built, {})
        body["metadata"].setdefault("annotations", {})[OWNER_ANNOTATION] = self.cr_text
        return body, directives

    def custom_label_list(self, rendered: Mapping[str, Any], path: str) -> Mapping[str, Any]:
        """A `custom:` child's `metadata.labels` written as a list of {key, value} (the
        form Orkestra used before labels became a map, still read on the built-in kinds'
        `labels`): read as the map, with a warning that Orkestra now wants the map."""
        meta = rendered.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if not isinstance(labels, list):
            return rendered
        assert isinstance(meta, Mapping)
        as_map: dict[str, Any] = {}
        for i, item in enumerate(labels):
            if not isinstance(item, Mapping) or "key" not in item:
                raise self.fail(f"{path}.metadata.labels[{i}]", "must be {key, value}")
            as_map[str(item["key"])] = item.get("value")
        self.warn(f"{path}.metadata.labels", "not portable to Orkestra: a list of {key, "
                  "value} (its form before labels became a map); Orkestra reads a map: "
                  "labels: {key: value}")
        return {**rendered, "metadata": {**meta, "labels": as_map}}

    def ingress_tls_secret(self, rendered: Mapping[str, Any], ctx: BuildContext,
                           ingress: RenderedObject, path: str) -> list[RenderedObject]:
        """`tls.create` on an Ingress entry: a self-signed TLS Secret written before it, left
        alone when it exists (Orkestra's rule), never rotated unless `rotateAfter` says."""
        tls = rendered.get("tls")
        if not isinstance(tls, Mapping) or \
                _str(tls.get("create")).lower() not in ("true", "1", "yes"):
            return []
        (block,) = ingress.body["spec"]["tls"]
        entry: dict[str, Any] = {
            "name": block["secretName"], "once": True,
            "tls": {"commonName": (block.get("hosts") or [""])[0],
                    "dnsNames": list(block.get("hosts") or [])}}
        if tls.get("validFor"):
            entry["tls"]["validFor"] = tls["validFor"]
        secrets = BY_KEY["secrets"]
        sctx = BuildContext(cr_name=ctx.cr_name, cr_namespace=ctx.cr_namespace,
                            owner_key=ctx.owner_key, name=block["secretName"],
                            namespace=ctx.namespace, labels=ctx.labels)
        body, directives = self.build(secrets, entry, sctx, f"{path}.tls")
        return [RenderedObject(ref=ObjRef.of(body), body=body, policy=WritePolicy.CREATE,
                               origin=_replace_entry(self.origin, f"{path}.tls"),
                               stage=STAGE_CHILDREN + ORDER["secrets"], owner=self.cr.ref,
                               directives=directives)]

    def labels(self, raw: Any, path: str) -> dict[str, str]:
        """The entry's labels (`path`: the entry's) and the system labels (builders copy
        what they keep: an entry without labels of its own gets the same checked dict as
        the others)."""
        if raw is None:
            if self._system_labels is None:
                self._system_labels = self._labels(None, f"{path}.labels")
            return self._system_labels
        return self._labels(raw, f"{path}.labels")

    def _labels(self, raw: Any, path: str) -> dict[str, str]:
        labels: dict[str, str] = {}
        if isinstance(raw, list):  # the pre-v0.7.13 list form: [{key, value}]
            for i, item in enumerate(raw):
                if not isinstance(item, Mapping) or "key" not in item:
                    raise self.fail(f"{path}[{i}]", "must be {key, value}")
                labels[str(item["key"])] = _str(item.get("value"))
        elif isinstance(raw, Mapping):
            labels = {str(k): _str(v) for k, v in raw.items()}
        elif raw is not None:
            raise self.fail(path, "must be a map")
        labels.update({MANAGED_LABEL: "true", OWNER_LABEL: self.cr_name,
                       MANAGED_BY_LABEL: MANAGED_BY})
        for key, value in labels.items():
            problem = label_key_problem(key) or label_value_problem(value)
            if problem:
                raise self.fail(f"{path}.{key}", problem)
        return labels
