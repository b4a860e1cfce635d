"""A Sync's whole repository written as the Sync's ServiceAccount, on the real control plane
with a real agent process and a git daemon: what the ServiceAccount may not create (a
ClusterRoleBinding, a Namespace, a CRD) is refused and named in the Sync's status, what it
may write is applied; the same repository under a ServiceAccount with the rights syncs in
full; a Sync whose ServiceAccount does not exist is Stalled and writes nothing."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from tests.agent.test_syncs_cluster import MANAGER, Env, deployment
from tests.helpers import CRD, KATALOG, katalog, wait_for, widget

pytestmark = pytest.mark.cluster

RBAC = "rbac.authorization.k8s.io/v1"
CRD_API = "apiextensions.k8s.io/v1"



def create(kube: Kube, body: dict[str, Any]) -> None:
    kube.create(kube.resource(body["apiVersion"], body["kind"]), body, field_manager=MANAGER)


def get(kube: Kube, api_version: str, kind: str, namespace: str, name: str) -> Any:
    return kube.get_or_none(kube.resource(api_version, kind), namespace, name)


def tenant_repo(ns: str, tag: str) -> dict[str, str]:
    """Widgets and a ConfigMap of `ns` (the tenant's), and what no tenant should get from
    its repository: cluster-admin bound to its ServiceAccount, a Namespace, a CRD."""
    return {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w1.yaml": widget("w1", ns, image="nginx", replicas=1, port=80),
        "cm.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: plain, namespace: {ns}}}\n"
                   "data: {a: b}\n",
        "crb.yaml": f"apiVersion: {RBAC}\nkind: ClusterRoleBinding\n"
                    f"metadata: {{name: escalate-{tag}}}\n"
                    "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, "
                    "name: cluster-admin}\n"
                    f"subjects: [{{kind: ServiceAccount, name: deployer, namespace: {ns}}}]\n",
        "ns.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: extra-{tag}}}\n",
        "gadget.yaml": f"apiVersion: {CRD_API}\nkind: CustomResourceDefinition\n"
                       f"metadata: {{name: gadgets{tag}.test.orksync.io}}\n"
                       "spec:\n  group: test.orksync.io\n  scope: Namespaced\n"
                       f"  names: {{kind: Gadget{tag}, plural: gadgets{tag}}}\n"
                       "  versions:\n  - name: v1\n    served: true\n    storage: true\n"
                       "    schema: {openAPIV3Schema: {type: object, "
                       "x-kubernetes-preserve-unknown-fields: true}}\n",
    }


def grant_deployer(kube: Kube, ns: str, tag: str) -> None:
    """The ServiceAccount `deployer` of `ns`: the Widgets, Deployments, Services and
    ConfigMaps of its namespace, and the Widget CRD the platform installed (patch by
    name: an unchanged server-side apply); nothing cluster-wide besides."""
    create(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "deployer", "namespace": ns}})
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
    create(kube, {"apiVersion": RBAC, "kind": "Role",
                  "metadata": {"name": "deployer", "namespace": ns},
                  "rules": [{"apiGroups": ["", "apps", "test.orksync.io"],
                             "resources": ["configmaps", "services", "deployments",
                                           "widgets"], "verbs": verbs}]})
    create(kube, {"apiVersion": RBAC, "kind": "RoleBinding",
                  "metadata": {"name": "deployer", "namespace": ns},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                              "name": "deployer"},
                  "subjects": [{"kind": "ServiceAccount", "name": "deployer",
                                "namespace": ns}]})
    create(kube, {"apiVersion": RBAC, "kind": "ClusterRole",
                  "metadata": {"name": f"widget-crd-{tag}"},
                  "rules": [{"apiGroups": ["apiextensions.k8s.io"],
                             "resources": ["customresourcedefinitions"],
                             "resourceNames": ["widgets.test.orksync.io"],
                             "verbs": ["get", "patch"]}]})
    create(kube, {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
                  "metadata": {"name": f"widget-crd-{tag}"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": f"widget-crd-{tag}"},
                  "subjects": [{"kind": "ServiceAccount", "name": "deployer",
                                "namespace": ns}]})


def test_a_sync_s_repository_is_written_as_its_service_account_and_refused_beyond_it(
        env: Env) -> None:
    kube, ns = env.kube, env.ns
    tag = uuid.uuid4().hex[:6]
    from ruamel.yaml import YAML

    kube.apply(kube.resource(CRD_API, "CustomResourceDefinition"), YAML(typ="safe").load(CRD),
               field_manager=MANAGER, force=True)  # the platform's
    grant_deployer(kube, ns, tag)
    env.repo("tenant", tenant_repo(ns, tag))
    _, ghost_sha = env.repo("ghost", {"cm.yaml": f"apiVersion: v1\nkind: ConfigMap\n"
                                      f"metadata: {{name: ghostly, namespace: {ns}}}\n"})
    env.start()
    env.sync("ghost", "ghost", serviceAccountName="nobody")
    env.sync("tenant", "tenant", serviceAccountName="deployer")

    # a ServiceAccount that does not exist: Stalled, nothing written as anyone
    wait_for("the missing ServiceAccount reported",
             lambda: env.ready("ghost").get("reason") == "ServiceAccountNotFound")
    assert f"ServiceAccount {ns}/nobody not found" in env.ready("ghost")["message"]
    assert any(c["type"] == "Stalled" and c["status"] == "True"
               for c in env.status("ghost")["conditions"])
    assert get(kube, "v1", "ConfigMap", ns, "ghostly") is None

    # the tenant's repository: what deployer may write is applied, the rest refused
    wait_for("the tenant's sync", lambda: bool(env.status("tenant").get(
        "lastAttemptedRevision")) and env.ready("tenant").get("status") == "False")
    message = env.ready("tenant")["message"]
    assert f"system:serviceaccount:{ns}:deployer" in message
    for named in (f"ClusterRoleBinding/escalate-{tag}", f"Namespace/extra-{tag}",
                  f"gadgets{tag}.test.orksync.io"):
        assert named in message, (named, message)
    assert get(kube, RBAC, "ClusterRoleBinding", "", f"escalate-{tag}") is None
    assert get(kube, "v1", "Namespace", "", f"extra-{tag}") is None
    assert get(kube, CRD_API, "CustomResourceDefinition", "",
               f"gadgets{tag}.test.orksync.io") is None
    assert get(kube, "v1", "ConfigMap", ns, "plain") is not None
    assert get(kube, "test.orksync.io/v1", "Widget", ns, "w1") is not None
    assert deployment(kube, ns, "w1") is not None
    assert get(kube, "v1", "Service", ns, "w1-svc") is not None
    # every write of what it applied went as deployer; the inventory and the statuses,
    # the agent's bookkeeping, as the agent
    from tests.apply.test_impersonation_cluster import as_whom, audit_events

    deployer = f"system:serviceaccount:{ns}:deployer"

    def writers(resource: str, name: str, namespace: str, *, status: bool = False
                ) -> set[str]:
        return {as_whom(e) for e in audit_events(env.control_plane.audit_log,
                                                 resource=resource, name=name,
                                                 namespace=namespace)
                if e["verb"] in ("create", "patch", "update", "delete") and
                (e.get("objectRef") or {}).get("subresource", "") == ("status" if status
                                                                      else "")}

    assert writers("configmaps", "plain", ns) == {deployer}
    assert writers("widgets", "w1", ns) == {deployer}
    assert writers("deployments", "w1", ns) == {deployer}
    assert writers("clusterrolebindings", f"escalate-{tag}", "") <= {deployer}
    agent_side = writers("configmaps", f"orksync-inventory-{ns}.tenant", "orksync-system") | \
        writers("widgets", "w1", ns, status=True)
    assert agent_side and not any(w.startswith("system:serviceaccount:") for w in agent_side)

    # the same repository under a ServiceAccount with the rights: synced in full
    create(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "admin", "namespace": ns}})
    create(kube, {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
                  "metadata": {"name": f"tenant-admin-{tag}"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "cluster-admin"},
                  "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": ns}]})
    env.patch("tenant", {"spec": {"serviceAccountName": "admin"}})
    wait_for("the full sync as admin", lambda: env.ready("tenant").get("status") == "True")
    assert get(kube, RBAC, "ClusterRoleBinding", "", f"escalate-{tag}") is not None
    assert get(kube, "v1", "Namespace", "", f"extra-{tag}") is not None
    assert get(kube, CRD_API, "CustomResourceDefinition", "",
               f"gadgets{tag}.test.orksync.io") is not None
    # a plain manifest leaving Git is pruned as the Sync's ServiceAccount
    from tests.agent.test_syncs_cluster import commit

    (env.base / "tenant" / "cm.yaml").unlink()
    left = commit(env.base / "tenant", "the ConfigMap leaves")
    wait_for("the prune", lambda: env.applied("tenant", left))
    assert get(kube, "v1", "ConfigMap", ns, "plain") is None
    deletes = [as_whom(e) for e in audit_events(env.control_plane.audit_log,
                                                resource="configmaps", name="plain",
                                                namespace=ns) if e["verb"] == "delete"]
    assert deletes == [f"system:serviceaccount:{ns}:admin"]

    # the ServiceAccount appears: the stalled Sync syncs
    create(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "nobody", "namespace": ns}})
    create(kube, {"apiVersion": RBAC, "kind": "RoleBinding",
                  "metadata": {"name": "nobody", "namespace": ns},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                              "name": "deployer"},
                  "subjects": [{"kind": "ServiceAccount", "name": "nobody",
                                "namespace": ns}]})
    wait_for("the ghost Sync applied", lambda: env.applied("ghost", ghost_sha))
    assert get(kube, "v1", "ConfigMap", ns, "ghostly") is not None


ROTATING = katalog("""\
        onReconcile:
          secrets:
            - name: "{{ .metadata.name }}-token"
              rotateAfter: 1s
              data:
                token: "{{ randomHex 16 }}"
""")


def test_two_syncs_with_due_rotations_each_rotate_only_their_own_as_their_service_account(
        env: Env) -> None:
    """Each Sync's rotation scans its own Secrets (its `orksync.io/shard` label): Sync a
    never writes Sync b's Secret, so every write of each Secret is its own Sync's
    ServiceAccount's (the audit log)."""
    from ruamel.yaml import YAML

    from tests.apply.test_impersonation_cluster import as_whom, audit_events

    kube, ns = env.kube, env.ns
    tag = uuid.uuid4().hex[:6]
    kube.apply(kube.resource(CRD_API, "CustomResourceDefinition"), YAML(typ="safe").load(CRD),
               field_manager=MANAGER, force=True)
    create(kube, {"apiVersion": RBAC, "kind": "ClusterRole",
                  "metadata": {"name": f"widget-crd-{tag}"},
                  "rules": [{"apiGroups": ["apiextensions.k8s.io"],
                             "resources": ["customresourcedefinitions"],
                             "resourceNames": ["widgets.test.orksync.io"],
                             "verbs": ["get", "patch"]}]})
    create(kube, {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "rotor",
                                                                   "namespace": ns},
                  "rules": [{"apiGroups": ["", "test.orksync.io"],
                             "resources": ["secrets", "widgets"],
                             "verbs": ["get", "list", "watch", "create", "update", "patch",
                                       "delete"]}]})
    for name in ("a", "b"):
        account = f"sa-{name}"
        create(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": account, "namespace": ns}})
        subjects = [{"kind": "ServiceAccount", "name": account, "namespace": ns}]
        create(kube, {"apiVersion": RBAC, "kind": "RoleBinding",
                      "metadata": {"name": account, "namespace": ns},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "rotor"}, "subjects": subjects})
        create(kube, {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
                      "metadata": {"name": f"widget-crd-{tag}-{name}"},
                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": f"widget-crd-{tag}"},
                      "subjects": subjects})
        env.repo(name, {"katalog.yaml": ROTATING, "crd.yaml": CRD,
                        f"{name}.yaml": widget(f"{name}-{tag}", ns)})
    env.start("--rotate-interval", "1s")
    for name in ("a", "b"):
        env.sync(name, name, serviceAccountName=f"sa-{name}")

    def rotated(name: str) -> list[str]:
        """Who wrote the Secret of Sync `name` after creating it."""
        writes = [e for e in audit_events(env.control_plane.audit_log, resource="secrets",
                                          name=f"{name}-{tag}-token", namespace=ns)
                  if e["verb"] in ("create", "patch", "update") and
                  e["responseStatus"]["code"] < 300]
        return [as_whom(e) for e in writes]

    # two rotations of each after its creation
    wait_for("both Secrets rotated twice", lambda: all(len(rotated(n)) >= 3 for n in "ab"))
    for name in ("a", "b"):
        assert set(rotated(name)) == {f"system:serviceaccount:{ns}:sa-{name}"}, rotated(name)


def test_reconciling_is_true_while_any_sync_of_a_sync_runs_not_only_the_first(
        env: Env) -> None:
    """Every status the Sync goes through, seen by a watch: the sync of a second revision
    sets Reconciling=True (Ready Unknown, Progressing, naming that revision) before it
    ends Ready=True and Reconciling=False; the run that ends as the one before emits no
    second Event for it."""
    from orksync.cluster.watch import Informer
    from tests.agent.test_syncs_cluster import commit

    seen: list[dict[str, Any]] = []

    def record(_kind: str, obj: dict[str, Any], _before: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") == env.ns and meta.get("name") == "r":
            seen.append({c["type"]: (c["status"], c.get("message", ""))
                         for c in (obj.get("status") or {}).get("conditions") or []})

    watching = Kube.from_kubeconfig(env.control_plane.kubeconfig)
    informer = Informer(watching, ("orksync.io/v1alpha1", "Sync"), on_event=record).start()
    try:
        repo, first = env.repo("r", {"cm.yaml": f"apiVersion: v1\nkind: ConfigMap\n"
                                     f"metadata: {{name: r1, namespace: {env.ns}}}\n"})
        env.start()
        env.sync("r", "r", resyncInterval="2s")
        wait_for("the first revision", lambda: env.applied("r", first))
        (repo / "cm2.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\n"
                                       f"metadata: {{name: r2, namespace: {env.ns}}}\n")
        second = commit(repo, "second")
        wait_for("the second revision", lambda: env.applied("r", second))
        wait_for("the watch caught up", lambda: any(
            s.get("Ready", ("", ""))[0] == "True" and second in s["Ready"][1] for s in seen))

        def runs() -> list[int]:
            """The index in `seen` of each start of a sync of the second revision."""
            return [i for i, s in enumerate(seen) if i > 0 and
                    s.get("Reconciling", ("", ""))[0] == "True" and
                    second in s["Reconciling"][1] and
                    seen[i - 1].get("Reconciling", ("", ""))[0] != "True"]

        # a full resync of the same revision runs too, and ends as the one before it
        wait_for("a resync of the second revision ended", lambda: len(runs()) >= 2 and any(
            s.get("Ready", ("", ""))[0] == "True" for s in seen[runs()[1]:]))
    finally:
        informer.stop()
        watching.close()
    during = [s for s in seen if s.get("Reconciling", ("", ""))[0] == "True" and
              second in s["Reconciling"][1]]
    assert during, seen
    assert during[0]["Ready"][0] == "Unknown"
    last = seen[-1]
    assert last["Reconciling"][0] == "False" and last["Ready"][0] == "True"
    # one Event per revision applied (written after the status), none for the progress
    # nor for a resync that ends as the run before it
    def applied_events() -> int:
        return sum(1 for e in env.events("r") if second[:12] in e["message"])

    wait_for("the Event of the second revision", lambda: applied_events() >= 1)
    assert applied_events() == 1


def test_status_names_each_object_s_sync_and_shows_the_syncs_in_every_output(
        env: Env) -> None:
    """`orksync status`: the Syncs' rows in the table, in `-o json|yaml` and with
    --watch; each object row's SYNC ROOT is its Sync's `namespace/name`, not the raw
    inventory name."""
    import json

    from ruamel.yaml import YAML

    from tests.agent.test_syncs_cluster import widgets_repo

    ns = env.ns
    _, sha_a = env.repo("a", widgets_repo(ns, "sa1"))
    _, sha_b = env.repo("b", {"cm.yaml": f"apiVersion: v1\nkind: ConfigMap\n"
                                         f"metadata: {{name: sb1, namespace: {ns}}}\n"})
    env.start()
    env.sync("a", "a")
    env.sync("b", "b")
    wait_for("both applied", lambda: env.applied("a", sha_a) and env.applied("b", sha_b))

    out = env.cli("status", "-n", ns, "-o", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    mine = {s["sync"]: s for s in doc["syncs"] if s["sync"].startswith(ns + "/")}
    assert set(mine) == {f"{ns}/a", f"{ns}/b"}
    assert mine[f"{ns}/a"]["revision"] == sha_a[:12] and mine[f"{ns}/a"]["ready"] == "True"
    by_name = {i["name"]: i for i in doc["items"]}
    assert by_name["sa1"]["sync"] == f"{ns}/a" and by_name["sa1"]["syncRoot"] == f"{ns}.a"
    assert by_name["sb1"]["sync"] == f"{ns}/b"

    yaml_doc = YAML(typ="safe").load(env.cli("status", "-n", ns, "-o", "yaml").stdout)
    assert {s["sync"] for s in yaml_doc["syncs"]} >= {f"{ns}/a", f"{ns}/b"}

    table = env.cli("status", "-n", ns).stdout
    lines = table.splitlines()
    assert lines[0].split()[0] == "SYNC"  # the Syncs first
    row = next(line for line in lines if " sa1 " in line)
    assert f" {ns}/a " in row and f"{ns}.a" not in row

    tree = json.loads(env.cli("tree", f"Widget/{ns}/sa1", "-o", "json").stdout)
    assert tree["sync"] == f"{ns}/a" and tree["children"]
    assert f"{ns}/a" in env.cli("tree", f"Widget/{ns}/sa1").stdout

    watched = env.cli("status", "-n", ns, "-o", "json", "--watch", "--timeout", "1s")
    assert watched.returncode == 0, watched.stderr
    first = json.loads(watched.stdout.splitlines()[0])
    assert {s["sync"] for s in first["syncs"]} >= {f"{ns}/a", f"{ns}/b"}


def test_a_sync_of_a_semver_range_applies_its_highest_tag_and_follows_a_new_one(
        env: Env) -> None:
    import subprocess

    from tests.agent.test_syncs_cluster import GIT, commit

    ns = env.ns

    def release(repo: Path, version: str) -> str:
        (repo / "cm.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: "
                                      f"{{name: semver, namespace: {ns}}}\n"
                                      f"data: {{version: {version}}}\n")
        sha = commit(repo, version)
        subprocess.run([*GIT, "tag", version], cwd=repo, check=True)
        return sha

    repo, _ = env.repo("s", {"README": "x\n"})
    v1 = release(repo, "v1.2.0")
    release(repo, "v2.0.0")
    env.start()
    env.sync("s", "s", ref={"semver": "^1.0"})
    wait_for("v1.2.0 applied", lambda: env.applied("s", v1))
    data = get(env.kube, "v1", "ConfigMap", ns, "semver")["data"]
    assert data == {"version": "v1.2.0"}
    assert "semver ^1.0" in env.ready("s")["message"]
    v13 = release(repo, "v1.3.0")
    wait_for("v1.3.0 applied", lambda: env.applied("s", v13))
    assert get(env.kube, "v1", "ConfigMap", ns, "semver")["data"] == {"version": "v1.3.0"}
