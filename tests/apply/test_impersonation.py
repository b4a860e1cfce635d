"""A Katalog entry's serviceAccountName (docs/multi-tenancy.md, the second wall), offline:
checked when the Katalog loads (a bad value names its file, line and field, and nothing of
the entry renders), carried to the apply as the custom resource's directive, in memory and
through the rendered directory's index; `--default-service-account` checked as a name.
Against the real control plane: tests/apply/test_impersonation_cluster.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from orksync.cli import main
from orksync.katalog.loader import load_repository
from orksync.model import SERVICE_ACCOUNT_DIRECTIVE
from orksync.render.engine import render_catalog
from orksync.rendered.directory import read_rendered, write_rendered
from tests.helpers import CRD, widget, write_repo
from tests.katalog.test_katalog_schema import ENTRY, HEAD

CLUSTER_CRD = CRD.replace("scope: Namespaced", "scope: Cluster")


def repo(tmp_path: Path, entry_line: str, *, crd: str = CRD, namespace: str = "team-a"
         ) -> Path:
    text = HEAD + ENTRY.replace("      operatorBox:\n", entry_line + "      operatorBox:\n")
    cr = widget("a", namespace)
    if not namespace:
        cr = cr.replace("  namespace: \n", "")
    return write_repo(tmp_path, {"op/katalog.yaml": text, "op/crd.yaml": crd,
                                 "apps/a.yaml": cr})


@pytest.mark.parametrize(("value", "why"), [
    ("Tenant_A", "is not a ServiceAccount"),
    ("'{{ .spec.account }}'", "not a template"),
    ("[tenant]", "must be text"),
    ("Team-A/tenant", "is not a ServiceAccount"),
])
def test_a_bad_service_account_name_is_an_error_naming_file_line_and_field(
        tmp_path: Path, value: str, why: str) -> None:
    catalog = load_repository(repo(tmp_path, f"      serviceAccountName: {value}\n"))
    (error,) = [str(e) for e in catalog.errors]
    assert error.startswith("op/katalog.yaml:9 Katalog/widgets spec.crds.widget."
                            "serviceAccountName: "), error
    assert why in error, error
    assert not catalog.crs  # nothing of the entry renders, so nothing is written or pruned


def test_a_cluster_scoped_kind_must_name_the_service_account_s_namespace(
        tmp_path: Path) -> None:
    catalog = load_repository(repo(tmp_path, "      serviceAccountName: tenant\n",
                                   crd=CLUSTER_CRD, namespace=""))
    (error,) = [str(e) for e in catalog.errors]
    assert "spec.crds.widget.serviceAccountName: 'tenant' names no namespace" in error
    assert "cluster-scoped" in error and "namespace/name" in error

    fixed = load_repository(repo(tmp_path / "b", "      serviceAccountName: platform/deployer\n",
                                 crd=CLUSTER_CRD, namespace=""))
    assert not fixed.errors, fixed.errors
    (cr,) = [o for o in render_catalog(fixed).objects if o.owner is None
             and o.ref.kind == "Widget"]
    assert cr.directives[SERVICE_ACCOUNT_DIRECTIVE] == "platform/deployer"


@pytest.mark.parametrize(("line", "account"), [
    ("      serviceAccountName: tenant\n", "team-a/tenant"),  # the custom resource's namespace
    ("      serviceAccountName: platform/deployer\n", "platform/deployer"),
    ("        runtime: {serviceAccountName: tenant}\n", "team-a/tenant"),  # grouped layout
    ("", None),
])
def test_the_custom_resource_carries_its_service_account_through_the_rendered_directory(
        tmp_path: Path, line: str, account: str | None) -> None:
    root = tmp_path / "repo"
    if "runtime" in line:
        text = HEAD + ENTRY.replace("      operatorBox:\n", "      operatorBox:\n" + line)
        write_repo(root, {"op/katalog.yaml": text, "op/crd.yaml": CRD,
                          "apps/a.yaml": widget("a", "team-a")})
    else:
        repo(root, line)
    catalog = load_repository(root)
    assert not catalog.errors, catalog.errors
    rendered = render_catalog(catalog)
    write_rendered(rendered, tmp_path / "out", revision="r1")
    for objects in (rendered.objects, read_rendered(tmp_path / "out").objects):
        by_ref = {str(o.ref): o for o in objects}
        cr = by_ref["Widget.test.orksync.io/team-a/a"]
        assert cr.directives.get(SERVICE_ACCOUNT_DIRECTIVE) == account
        child = by_ref["ConfigMap/team-a/a-cm"]
        assert SERVICE_ACCOUNT_DIRECTIVE not in child.directives  # it follows its owner


def test_the_default_service_account_must_be_a_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["diff", str(repo(tmp_path, ""))], ["agent", "--repo-url", "x"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--default-service-account", "Not/A-Name"])
        assert exit_.value.code == 2  # a usage error, before anything is read or sent
        assert "argument --default-service-account: name 'Not/A-Name' is not a valid " \
            "Kubernetes name" in capsys.readouterr().err


def test_a_kubeconfig_that_impersonates_already_cannot_take_a_service_account(
        tmp_path: Path) -> None:
    """One Impersonate-User per request: the kubeconfig's `as:` and an entry's
    ServiceAccount together are refused with a message naming both, before any request."""
    from orksync.cluster.kube import Kube
    from orksync.errors import ClusterError

    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t, as: jane}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    kube = Kube.from_kubeconfig(config)
    try:
        with pytest.raises(ClusterError, match=r"already impersonates jane"):
            kube.impersonating("system:serviceaccount:team-a:tenant")
        assert kube.requests == 0
    finally:
        kube.close()


def test_a_sync_s_service_account_writes_every_child_and_no_other_namespace_s_does(
        tmp_path: Path) -> None:
    """A default `namespace/name` (a Sync's ServiceAccount): every custom resource's
    children as it, wherever the custom resource lives; an entry's bare name is one of the
    Sync's namespace; an account of another namespace (the entry's, a rendered directive,
    one the inventory recorded) is refused rather than written as."""
    from orksync.apply.impersonation import Identities, Impersonation
    from orksync.apply.inventory import InventoryEntry
    from orksync.cluster.kube import Kube
    from orksync.errors import ClusterError
    from orksync.model import ObjRef

    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    kube = Kube.from_kubeconfig(config)

    def ref(kind: str, namespace: str, name: str = "w") -> ObjRef:
        return ObjRef(api_version="test.orksync.io/v1", kind=kind, namespace=namespace,
                      name=name)

    recorded = ref("Widget", "team-a", "old")
    try:
        settings = Impersonation(default="team-a/deployer", by_kind={
            ("test.orksync.io/v1", "Named"): "builder",
            ("test.orksync.io/v1", "Foreign"): "kube-system/admin"})
        identities = Identities(kube, settings, recorded=[
            InventoryEntry(ref=recorded, account="kube-system/admin")])
        assert identities.account(ref("Widget", "team-b")) == "team-a/deployer"
        assert identities.account(ref("Widget", "")) == "team-a/deployer"
        assert identities.account(ref("Named", "team-b")) == "team-a/builder"
        for owner, directive in ((ref("Foreign", "team-a"), ""),
                                 (ref("Widget", "team-a"), "team-b/deployer"),
                                 (recorded, "")):
            with pytest.raises(ClusterError, match="not of the Sync's namespace 'team-a'"):
                identities.account(owner, directive)
        # the --default-service-account NAME of an agent: each custom resource's namespace
        plain = Identities(kube, Impersonation(default="deployer"))
        assert plain.account(ref("Widget", "team-b")) == "team-b/deployer"
        assert plain.account(ref("Foreign", "team-b"), "kube-system/admin") == \
            "kube-system/admin"
    finally:
        kube.close()


def test_a_writes_only_view_reads_as_the_agent_and_writes_as_the_service_account(
        tmp_path: Path) -> None:
    """A Sync's root connection: GETs (reads, lists, watches) without Impersonate-User,
    every other method with it; `own()` is the agent's connection itself."""
    from orksync.cluster.kube import Kube

    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    kube = Kube.from_kubeconfig(config)
    user = "system:serviceaccount:team-a:deployer"
    try:
        view = kube.impersonating(user, writes_only=True)
        assert view is not kube.impersonating(user)  # the full view is another
        assert view.own() is kube and kube.own() is kube
        for method in ("POST", "PATCH", "PUT", "DELETE"):
            headers, _, _ = view._headers("application/json", "application/json", method)
            assert headers["Impersonate-User"] == user
        headers, _, _ = view._headers("application/json", "application/json", "GET")
        assert "Impersonate-User" not in headers
        headers, _, _ = kube.impersonating(user)._headers(
            "application/json", "application/json", "GET")
        assert headers["Impersonate-User"] == user
    finally:
        kube.close()
