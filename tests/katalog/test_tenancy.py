"""Multi-tenancy rules, offline (docs/multi-tenancy.md): a hostile custom resource cannot
make its Katalog write, or copy from, outside the namespace guard, nor create a
cluster-scoped kind its Katalog did not choose. The cluster half is
tests/katalog/test_tenancy_cluster.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.errors import InputError
from orksync.katalog.loader import load_repository
from orksync.katalog.tenancy import Tenancy, tenancy_of
from orksync.model import ObjRef, RenderedSet
from orksync.render.engine import render_catalog
from orksync.render.guard import (
    SCOPE_DIRECTIVE,
    ClusterScope,
    ClusterScopePolicy,
    NamespaceGuard,
    identity_problem,
    literal_cluster_kinds,
)
from orksync.render.kinds import KINDS
from orksync.rendered.directory import write_rendered
from tests.apply.test_kinds_cluster import CASES
from tests.helpers import CRD, widget, write_repo

WIDGET = "Widget.test.orksync.io/team-a/w"
RESTRICTED = {"restrictedNamespaces": ["kube-system", "kube-*"]}
CRB = "rbac.authorization.k8s.io/v1"


def katalog(box: dict[str, Any], *, security: dict[str, Any] | None = None,
            **entry: Any) -> str:
    """A Widget Katalog with operatorBox `box`, extra CRD-entry keys in `entry` and an
    optional Katalog-level `security` block."""
    doc: dict[str, Any] = {"apiVersion": "orkestra.orkspace.io/v1", "kind": "Katalog",
                           "metadata": {"name": "widgets"}}
    if security is not None:
        doc["security"] = security
    doc["spec"] = {"crds": {"widget": {"crdFile": "./crd.yaml", **entry, "operatorBox": box}}}
    return yaml.safe_dump(doc, sort_keys=False)


def render(tmp_path: Path, box: dict[str, Any], *, spec: dict[str, Any] | None = None,
           strict: bool = False, extra: dict[str, str] | None = None,
           security: dict[str, Any] | None = None, **entry: Any) -> RenderedSet:
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box, security=security, **entry),
                                 "crd.yaml": CRD, "w.yaml": widget("w", "team-a", **(spec or {})),
                                 **(extra or {})})
    return render_catalog(load_repository(root), strict_cluster_scope=strict)


def refs(rendered: RenderedSet) -> set[str]:
    return {str(o.ref) for o in rendered.objects}


def skipped(rendered: RenderedSet) -> dict[str, str]:
    return {str(r): reason for r, reason in rendered.skipped}


def one_error(rendered: RenderedSet) -> str:
    (err,) = rendered.errors
    return str(err)


# --- the guard's own rules -------------------------------------------------------------


def test_restricted_wins_and_a_non_empty_allow_list_must_match() -> None:
    guard = NamespaceGuard(("team-*", "*-sandbox", "shared"), ("team-admin",))
    assert guard.refusal("team-a") is None
    assert guard.refusal("x-sandbox") is None
    assert guard.refusal("shared") is None
    assert "restricted" in (guard.refusal("team-admin") or "")
    assert "allowedNamespaces" in (guard.refusal("kube-system") or "")
    assert NamespaceGuard().refusal("kube-system") is None  # no guard: Orkestra's default


@pytest.mark.parametrize(("field", "value", "message"), [
    ("restrictedNamespaces", "kube-system", "must be a list"),  # Orkestra: no restriction
    ("allowedNamespaces", ["team-*-x"], "not a namespace pattern"),
    ("allowedNamespaces", ["Team-A"], "not a namespace pattern"),
    ("restrictedNamespaces", [""], "not a namespace pattern"),
    ("allowedNamespaces", [7], "must be text"),
    ("allowedClusterScopedKinds", ["cluster role"], "is not a kind"),
    ("allowedClusterScopedKinds", "Namespace", "must be a list"),
])
def test_a_guard_that_does_not_read_as_written_is_a_load_error_naming_its_field(
        tmp_path: Path, field: str, value: Any, message: str) -> None:
    box = {"onCreate": {"configMaps": [{"data": {"a": "1"}}]}}
    root = write_repo(tmp_path, {"katalog.yaml": katalog(box, **{field: value}),
                                 "crd.yaml": CRD, "w.yaml": widget("w", "team-a")})
    catalog = load_repository(root)
    assert not catalog.entries()
    (err,) = catalog.errors
    assert isinstance(err, InputError)
    assert err.file == "katalog.yaml" and err.line is not None
    assert f"spec.crds.widget.{field}" in err.path and message in str(err)
    rendered = render_catalog(catalog)
    # nothing of the entry renders, and a render with errors prunes nothing
    assert [o.ref.kind for o in rendered.objects] == ["CustomResourceDefinition"]
    assert not rendered.ok


def test_the_katalog_level_namespace_protection_merges_with_the_entry(tmp_path: Path) -> None:
    entry, problems = tenancy_of(
        {"security": {"namespaceProtection": {"allowedNamespaces": ["shared"],
                                              "restrictedNamespaces": ["kube-system"]}}},
        {"allowedNamespaces": ["team-*"], "allowedClusterScopedKinds": ["Namespace",
                                                                        "Tenant.example.io"]},
        ["spec", "crds", "w"])
    assert not problems
    assert entry == Tenancy(allowed_namespaces=("team-*", "shared"),
                            restricted_namespaces=("kube-system",),
                            cluster_scoped_kinds=("Namespace", "Tenant.example.io"))
    box = {"onReconcile": {"configMaps": [
        {"name": "inside", "data": {"a": "1"}},
        {"name": "out", "namespace": "{{ .spec.target }}", "data": {"a": "1"}}]}}
    rendered = render(tmp_path, box, spec={"target": "kube-system"},
                      security={"namespaceProtection": {"restrictedNamespaces": ["kube-*"]}})
    assert "ConfigMap/team-a/inside" in refs(rendered)
    reason = skipped(rendered)["ConfigMap/kube-system/out"]
    assert "restricted by the Katalog (kube-*)" in reason


# --- targets: toNamespaces, namespace overrides, Namespaces --------------------------------


def test_to_namespaces_templated_into_a_refused_namespace_is_skipped_naming_cr_and_entry(
        tmp_path: Path) -> None:
    box = {"onReconcile": {"configMaps": [{"name": "shared", "data": {"k": "v"},
                                           "toNamespaces": ["{{ .spec.targets }}"]}]}}
    rendered = render(tmp_path, box, spec={"targets": "[team-b, kube-system]"}, **RESTRICTED)
    assert rendered.ok, rendered.errors
    assert "ConfigMap/team-b/shared" in refs(rendered)
    assert not [o for o in rendered.objects if o.ref.namespace == "kube-system"]
    reason = skipped(rendered)["ConfigMap/kube-system/shared"]
    assert reason.startswith(f"{WIDGET} onReconcile.configMaps[0]: ")
    assert "restricted" in reason


NAMESPACED_KEYS = [k.key for k in KINDS if k.namespaced]


@pytest.mark.parametrize("key", NAMESPACED_KEYS)
def test_every_builder_s_namespace_override_passes_the_guard(tmp_path: Path, key: str) -> None:
    entry = copy.deepcopy(CASES[key][0])
    if key == "custom":  # custom's own metadata.namespace wins over the entry's namespace
        entry["metadata"]["namespace"] = "{{ .spec.elsewhere }}"
    else:
        entry["namespace"] = "{{ .spec.elsewhere }}"
    rendered = render(tmp_path, {"onReconcile": {key: [entry]}},
                      spec={"elsewhere": "kube-system"}, **RESTRICTED)
    assert rendered.ok, rendered.errors
    assert not [o.ref for o in rendered.objects if o.owner is not None], key
    (reason,) = skipped(rendered).values()
    assert "kube-system is restricted" in reason and f"onReconcile.{key}[0]" in reason


def test_an_ingress_tls_secret_follows_its_ingress_into_the_guard(tmp_path: Path) -> None:
    entry = {**CASES["ingresses"][0], "namespace": "{{ .spec.elsewhere }}",
             "tls": {"create": "true"}}
    rendered = render(tmp_path, {"onCreate": {"ingresses": [entry]}},
                      spec={"elsewhere": "kube-system"}, **RESTRICTED)
    assert rendered.ok, rendered.errors
    assert not [o for o in rendered.objects if o.ref.namespace == "kube-system"]
    assert {"Secret/kube-system/w-tls", "Ingress/kube-system/w-ingress"} <= \
        set(skipped(rendered))


def test_a_namespace_named_by_a_custom_resource_passes_the_guard(tmp_path: Path) -> None:
    box = {"onCreate": {"namespaces": [{"name": "{{ .spec.ns }}", "reconcile": True}]}}
    rendered = render(tmp_path, box, spec={"ns": "kube-system"}, **RESTRICTED)
    assert "Namespace/kube-system" in skipped(rendered)
    assert "Namespace/kube-system" not in refs(rendered)
    fine = render(tmp_path / "ok", box, spec={"ns": "team-c"}, **RESTRICTED)
    assert "Namespace/team-c" in refs(fine)


# --- custom entries: kinds chosen by templates -------------------------------------------


HOSTILE_CUSTOM = {"apiVersion": "{{ .spec.api }}", "kind": "{{ .spec.kind }}",
                  "metadata": {"name": "{{ .spec.objName }}", "namespace": "{{ .spec.ns }}"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "cluster-admin"},
                  "subjects": [{"kind": "ServiceAccount", "name": "default",
                                "namespace": "team-a"}]}


def test_a_templated_custom_kind_into_another_namespace_passes_the_guard(
        tmp_path: Path) -> None:
    spec = {"api": "v1", "kind": "ConfigMap", "objName": "planted", "ns": "kube-system"}
    rendered = render(tmp_path, {"onReconcile": {"custom": [HOSTILE_CUSTOM]}}, spec=spec,
                      **RESTRICTED)
    assert "ConfigMap/kube-system/planted" in skipped(rendered)
    assert not [o for o in rendered.objects if o.owner is not None]


def test_a_templated_custom_kind_that_is_a_cluster_role_binding_is_refused(
        tmp_path: Path) -> None:
    """The entry says nothing about scope (so `namespaced` defaults to true, and the guard
    would see team-a): the kind's real scope decides, and the Katalog never named it."""
    spec = {"api": CRB, "kind": "ClusterRoleBinding", "objName": "pwned", "ns": "team-a"}
    rendered = render(tmp_path, {"onReconcile": {"custom": [HOSTILE_CUSTOM]}}, spec=spec,
                      allowedNamespaces=["team-*"])
    assert rendered.ok, rendered.errors
    reason = skipped(rendered)["ClusterRoleBinding/pwned"]
    assert reason.startswith(f"{WIDGET} onReconcile.custom[0]: ")
    assert "ClusterRoleBinding (rbac.authorization.k8s.io) is cluster-scoped" in reason
    assert "allowedClusterScopedKinds" in reason
    assert not [o for o in rendered.objects if o.ref.kind == "ClusterRoleBinding"]


def test_a_templated_kind_the_katalog_names_elsewhere_is_allowed(tmp_path: Path) -> None:
    box = {"onReconcile": {"custom": [HOSTILE_CUSTOM], "clusterRoleBindings": [
        {"name": "w-crb", "roleRef": {"name": "view"}, "subjects": [{"name": "w-sa"}]}]}}
    spec = {"api": CRB, "kind": "ClusterRoleBinding", "objName": "second", "ns": "team-a"}
    rendered = render(tmp_path, box, spec=spec)
    assert {"ClusterRoleBinding/second", "ClusterRoleBinding/w-crb"} <= refs(rendered)
    live = next(o for o in rendered.objects if o.ref.name == "second")
    assert "namespace" not in live.body["metadata"]  # cluster-scoped whatever the entry said


@pytest.mark.parametrize(("kind", "api"), [("Namespace", "v1"), ("ClusterRole", CRB),
                                           ("PersistentVolume", "v1"),
                                           ("ValidatingWebhookConfiguration",
                                            "admissionregistration.k8s.io/v1")])
def test_every_built_in_cluster_scoped_kind_chosen_by_a_template_is_refused(
        tmp_path: Path, kind: str, api: str) -> None:
    spec = {"api": api, "kind": kind, "objName": "planted", "ns": "team-a"}
    rendered = render(tmp_path, {"onReconcile": {"custom": [HOSTILE_CUSTOM]}}, spec=spec)
    assert [(r.kind, r.name) for r, _ in rendered.skipped] == [(kind, "planted")]
    assert not [o for o in rendered.objects if o.owner is not None]


def test_a_cluster_scoped_kind_from_a_repository_crd_is_known_at_render(tmp_path: Path) -> None:
    tenant_crd = CRD.replace("widgets.test", "tenants.test").replace(
        "Namespaced", "Cluster").replace("kind: Widget, plural: widgets, singular: widget",
                                         "kind: Tenant, plural: tenants, singular: tenant")
    spec = {"api": "test.orksync.io/v1", "kind": "Tenant", "objName": "planted", "ns": "team-a"}
    rendered = render(tmp_path, {"onReconcile": {"custom": [HOSTILE_CUSTOM]}}, spec=spec,
                      extra={"tenant-crd.yaml": tenant_crd})
    assert "Tenant.test.orksync.io/planted" in skipped(rendered)


def test_a_kind_unknown_at_render_carries_the_refusal_for_the_applier(tmp_path: Path) -> None:
    spec = {"api": "gadgets.example.io/v1", "kind": "Gadget", "objName": "g", "ns": "team-a"}
    rendered = render(tmp_path, {"onReconcile": {"custom": [HOSTILE_CUSTOM]}}, spec=spec)
    (gadget,) = [o for o in rendered.objects if o.ref.kind == "Gadget"]
    assert gadget.directives[SCOPE_DIRECTIVE].startswith(f"{WIDGET} onReconcile.custom[0]: ")
    out = write_rendered(rendered, tmp_path / "out")  # the directive travels in index.yaml
    assert SCOPE_DIRECTIVE in (out / "index.yaml").read_text()
    literal = {**HOSTILE_CUSTOM, "apiVersion": "gadgets.example.io/v1", "kind": "Gadget"}
    allowed = render(tmp_path / "lit", {"onReconcile": {"custom": [literal]}}, spec=spec)
    (gadget,) = [o for o in allowed.objects if o.ref.kind == "Gadget"]
    assert SCOPE_DIRECTIVE not in gadget.directives


def test_a_namespaced_kind_cannot_be_declared_cluster_scoped(tmp_path: Path) -> None:
    entry = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "x", "namespaced": "{{ .spec.flag }}"}}
    rendered = render(tmp_path, {"onReconcile": {"custom": [entry]}}, spec={"flag": "false"})
    assert "ConfigMap is a namespaced kind" in one_error(rendered)
    assert "custom[0].metadata.namespaced" in one_error(rendered)


# --- the allow-list and its default --------------------------------------------------------


REAL_KATALOG_BOX = {  # the shape of Orkestra's namespace-provisioner example
    "onCreate": {
        "namespaces": [{"name": "{{ .spec.target }}", "reconcile": True}],
        "clusterRoles": [{"name": "{{ .spec.target }}-admin", "reconcile": True,
                          "rules": [{"apiGroups": [""], "resources": ["pods"],
                                     "verbs": ["*"]}]}],
        "clusterRoleBindings": [{"name": "{{ .spec.target }}-admin-binding",
                                 "roleRef": {"name": "{{ .spec.target }}-admin"},
                                 "subjects": [{"name": "owner",
                                               "namespace": "{{ .spec.target }}"}]}],
        "persistentVolumes": [{"name": "{{ .spec.target }}-pv", "capacity": "1Gi",
                               "hostPath": "/mnt/x"}],
        "secrets": [{"name": "registry", "fromSecret": "registry",
                     "fromNamespace": "platform",
                     "toNamespaces": ["{{ .spec.target }}"]}]}}
REAL_CHILDREN = {"Namespace/team-x", "ClusterRole/team-x-admin",
                 "ClusterRoleBinding/team-x-admin-binding", "PersistentVolume/team-x-pv",
                 "Secret/team-x/registry"}


def test_a_katalog_written_for_orkestra_renders_unchanged(tmp_path: Path) -> None:
    rendered = render(tmp_path, REAL_KATALOG_BOX, spec={"target": "team-x"},
                      allowedNamespaces=["team-*"])
    assert rendered.ok, rendered.errors
    assert not rendered.skipped
    assert refs(rendered) >= REAL_CHILDREN


def test_the_literal_default_names_the_template_keys_and_written_out_custom_kinds() -> None:
    box = {**REAL_KATALOG_BOX, "onDelete": {"groups": [{"custom": [
        {"apiVersion": "example.io/v1", "kind": "Tenant"},
        {"apiVersion": "{{ .spec.api }}", "kind": "Cell"},
        {"apiVersion": "v1", "kind": "{{ .spec.kind }}"}]}]}}
    assert set(literal_cluster_kinds(box)) == {
        "Namespace.core", "ClusterRole.rbac.authorization.k8s.io",
        "ClusterRoleBinding.rbac.authorization.k8s.io", "PersistentVolume.core",
        "Tenant.example.io", "Cell"}
    policy = ClusterScopePolicy(allowed=("Namespace", "Tenant.example.io"), source="explicit")
    assert policy.allows("v1", "Namespace") and policy.allows("example.io/v1", "Tenant")
    assert not policy.allows("other.io/v1", "Tenant")


def test_an_explicit_allow_list_refuses_the_other_cluster_scoped_kinds(tmp_path: Path) -> None:
    rendered = render(tmp_path, REAL_KATALOG_BOX, spec={"target": "team-x"},
                      allowedClusterScopedKinds=["Namespace"])
    assert {"Namespace/team-x", "Secret/team-x/registry"} <= refs(rendered)
    refused = skipped(rendered)
    assert set(refused) == REAL_CHILDREN - {"Namespace/team-x", "Secret/team-x/registry"}
    assert "not in the Katalog's allowedClusterScopedKinds (Namespace)" in \
        refused["ClusterRole/team-x-admin"]
    empty = render(tmp_path / "none", REAL_KATALOG_BOX, spec={"target": "team-x"},
                   allowedClusterScopedKinds=[])
    assert "(empty)" in skipped(empty)["Namespace/team-x"]


def test_strict_cluster_scope_allows_only_what_the_katalog_lists(tmp_path: Path) -> None:
    strict = render(tmp_path, REAL_KATALOG_BOX, spec={"target": "team-x"}, strict=True)
    assert set(skipped(strict)) == REAL_CHILDREN - {"Secret/team-x/registry"}
    assert "--strict-cluster-scope" in skipped(strict)["Namespace/team-x"]
    listed = render(tmp_path / "listed", REAL_KATALOG_BOX, spec={"target": "team-x"},
                    strict=True, allowedClusterScopedKinds=[
                        "Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume"])
    assert not listed.skipped and refs(listed) >= REAL_CHILDREN


def test_the_scope_of_a_kind_is_known_for_built_ins_and_repository_crds() -> None:
    scope = ClusterScope()
    assert scope.namespaced_kind(CRB, "ClusterRoleBinding") is False
    assert scope.namespaced_kind("v1", "Secret") is True
    assert scope.namespaced_kind("example.io/v1", "Gadget") is None


# --- copy sources ----------------------------------------------------------------------------


COPIES = {  # key: an entry copying from the namespace the custom resource names
    "secrets": {"name": "loot", "fromSecret": "{{ .spec.src }}"},
    "configMaps": {"name": "loot", "fromConfigMap": "{{ .spec.src }}"},
    "networkPolicies": {"name": "loot", "fromNetworkPolicy": "{{ .spec.src }}"},
    "resourceQuotas": {"name": "loot", "fromResourceQuota": "{{ .spec.src }}"},
    "limitRanges": {"name": "loot", "fromLimitRange": "{{ .spec.src }}"},
}


@pytest.mark.parametrize("key", list(COPIES))
def test_a_copy_source_chosen_by_a_template_passes_the_guard(tmp_path: Path, key: str) -> None:
    entry = {**COPIES[key], "fromNamespace": "{{ .spec.srcNs }}",
             "toNamespaces": ["team-a", "team-b"]}
    rendered = render(tmp_path, {"onReconcile": {key: [entry]}},
                      spec={"src": "admin-token", "srcNs": "kube-system"},
                      allowedNamespaces=["team-*"])
    assert rendered.ok, rendered.errors
    assert not [o for o in rendered.objects if o.owner is not None]
    refused = skipped(rendered)
    assert len(refused) == 2  # every copy is refused, so none of them is ever pruned
    reason = next(iter(refused.values()))
    assert "copy source" in reason and "kube-system/admin-token" in reason
    assert "allowedNamespaces" in reason


def test_a_copy_source_the_katalog_writes_out_is_the_platform_s_choice(tmp_path: Path) -> None:
    rendered = render(tmp_path, REAL_KATALOG_BOX, spec={"target": "team-x"},
                      allowedNamespaces=["team-*"])
    (secret,) = [o for o in rendered.objects if o.ref.kind == "Secret"]
    assert secret.directives["fromSecret"] == {"name": "registry", "namespace": "platform"}


def test_a_copy_source_inside_the_guard_is_read(tmp_path: Path) -> None:
    entry = {**COPIES["secrets"], "fromNamespace": "{{ .spec.srcNs }}"}
    rendered = render(tmp_path, {"onReconcile": {"secrets": [entry]}},
                      spec={"src": "base", "srcNs": "team-b"}, allowedNamespaces=["team-*"])
    (secret,) = [o for o in rendered.objects if o.ref.kind == "Secret"]
    assert secret.directives["fromSecret"]["namespace"] == "team-b"


# --- reads and cleanups ----------------------------------------------------------------------


def test_cross_sees_no_custom_resource_in_a_refused_namespace(tmp_path: Path) -> None:
    box = {"cross": [{"crd": "widget", "as": "peer",
                      "selector": {"name": "secret-holder", "namespace": "{{ .spec.peerNs }}"}}],
           "onReconcile": {"configMaps": [{"name": "leak",
                                           "data": {"token": "{{ .cross.peer.spec.token }}",
                                                    "found": "{{ .cross.peer.found }}"}}]}}
    rendered = render(tmp_path, box, spec={"peerNs": "vault"}, restrictedNamespaces=["vault"],
                      extra={"peer.yaml": widget("secret-holder", "vault", token="s3cr3t")})
    (leak,) = [o for o in rendered.objects if o.ref.name == "leak"]
    assert leak.body["data"] == {"token": "", "found": "false"}
    allowed = render(tmp_path / "open", box, spec={"peerNs": "vault"},
                     extra={"peer.yaml": widget("secret-holder", "vault", token="s3cr3t")})
    (leak,) = [o for o in allowed.objects if o.ref.name == "leak" and o.ref.namespace == "team-a"]
    assert leak.body["data"]["found"] == "true"  # the read itself works


def test_a_cleanup_candidate_in_a_refused_namespace_is_not_produced(tmp_path: Path) -> None:
    box = {"onReconcile": {"configMaps": [
        {"name": "gone", "namespace": "{{ .spec.ns }}", "data": {"a": "1"},
         "when": [{"field": "spec.on", "equals": "yes"}]}]}}
    refused = render(tmp_path, box, spec={"ns": "kube-system", "on": "no"}, **RESTRICTED)
    assert not refused.absent
    allowed = render(tmp_path / "ok", box, spec={"ns": "team-b", "on": "no"}, **RESTRICTED)
    assert [str(r) for r, _ in allowed.absent] == ["ConfigMap/team-b/gone"]


# --- identities --------------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "spec", "field"), [
    ({"name": "{{ .spec.x }}", "data": {"a": "1"}}, {"x": "../../etc"}, "configMaps[0].name"),
    ({"name": "{{ .spec.x }}", "data": {"a": "1"}}, {"x": "a/b"}, "configMaps[0].name"),
    ({"namespace": "{{ .spec.x }}", "data": {"a": "1"}}, {"x": ".."}, "configMaps[0].namespace"),
    ({"data": {"a": "1"}, "toNamespaces": ["{{ .spec.x }}"]}, {"x": "../x"},
     "configMaps[0].toNamespaces"),
])
def test_a_name_that_would_leave_its_directory_is_an_error(
        tmp_path: Path, entry: dict[str, Any], spec: dict[str, Any], field: str) -> None:
    rendered = render(tmp_path, {"onReconcile": {"configMaps": [entry]}}, spec=spec)
    assert field in one_error(rendered) and "not a valid" in one_error(rendered)
    assert not [o for o in rendered.objects if o.owner is not None]


@pytest.mark.parametrize(("api", "kind", "message"), [
    ("v1", "../../../tmp/evil", "kind"), ("v1", "Config Map", "kind"),
    ("../../api/v1", "ConfigMap", "apiVersion"), ("example.io/", "Gadget", "apiVersion"),
])
def test_a_custom_kind_or_api_version_that_is_not_an_identifier_is_an_error(
        tmp_path: Path, api: str, kind: str, message: str) -> None:
    entry = {"apiVersion": "{{ .spec.api }}", "kind": "{{ .spec.kind }}",
             "metadata": {"name": "x"}}
    rendered = render(tmp_path, {"onReconcile": {"custom": [entry]}},
                      spec={"api": f"'{api}'", "kind": f"'{kind}'"})
    assert f"{message} " in one_error(rendered) and "custom[0]" in one_error(rendered)
    out = write_rendered(rendered, tmp_path / "out")
    assert not list(tmp_path.glob("**/evil*")) and (out / "index.yaml").is_file()


def test_an_ingress_tls_secret_name_is_checked_like_any_name(tmp_path: Path) -> None:
    entry = {**CASES["ingresses"][0], "tls": {"create": "true",
                                              "secretName": "{{ .spec.x }}"}}
    rendered = render(tmp_path, {"onCreate": {"ingresses": [entry]}},
                      spec={"x": "../../../../tmp/pwn"})
    assert "ingresses[0].tls" in one_error(rendered)
    out = write_rendered(rendered, tmp_path / "out")
    assert not list(tmp_path.glob("**/pwn*")) and (out / "index.yaml").is_file()


def test_identity_problem_accepts_what_kubernetes_accepts() -> None:
    ok = ObjRef(api_version="apps/v1", kind="Deployment", namespace="team-a", name="web.v2")
    assert identity_problem(ok) is None
    assert identity_problem(ObjRef(api_version="v1", kind="Namespace", name="a")) is None
    assert "namespace" in (identity_problem(
        ObjRef(api_version="v1", kind="Secret", namespace="a.b", name="x")) or "")
