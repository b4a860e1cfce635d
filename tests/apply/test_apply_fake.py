"""The applier's decisions (orksync.apply.engine) on the fake API server: which request each
object costs (none when unchanged, one apply when changed, a create only when absent),
stages and prefetch, owner references, objects being deleted, failures kept local, dry
runs. The real control plane proves the same features in test_sync_cluster.py,
test_prefetch_cluster.py and test_dryrun_cluster.py; these count requests and run in
seconds."""

from __future__ import annotations

from orksync.apply.run import ApplyOptions
from orksync.model import Action
from tests.fakeapi import FakeApiServer
from tests.fakeapi_fixtures import *  # noqa: F403 - the fixtures kube, repo, server
from tests.fakeapi_fixtures import NS, Repo, actions, change, reads_of_objects, ref, writes
from tests.helpers import CRD, katalog, widget

KATALOG = katalog("""\
        onCreate:
          services:
            - name: "{{ .metadata.name }}-svc"
              port: "80"
          jobs:
            - name: "{{ .metadata.name }}-init"
              image: "busybox:{{ .spec.tag }}"
        onReconcile:
          configMaps:
            - name: "{{ .metadata.name }}-config"
              data: {colour: "{{ .spec.colour }}"}
""")

W = ref("Widget", "w")
CONFIG, SVC, JOB = ref("ConfigMap", "w-config"), ref("Service", "w-svc"), ref("Job", "w-init")


def synced(repo: Repo, **spec: object) -> Repo:
    spec = {"colour": "blue", "tag": "1", **spec}
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "w.yaml": widget("w", NS, **spec)})
    first = repo.sync()
    assert not first.changes.failed, first.changes.failed
    return repo


def test_a_fresh_apply_creates_every_object_with_one_write_each(
        repo: Repo, server: FakeApiServer) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, colour="blue", tag="1")})
    result = repo.sync()
    crd = ref("CustomResourceDefinition", "widgets.test.orksync.io")
    namespace = ref("Namespace", NS)
    assert actions(result) == {crd: Action.CREATED, namespace: Action.CREATED,
                               W: Action.CREATED, CONFIG: Action.CREATED, SVC: Action.CREATED,
                               JOB: Action.CREATED}
    object_writes = [w for w in writes(server) if "orksync-system" not in w[1]
                     and w[1] != "/api/v1/namespaces"]
    assert len(object_writes) == 5  # CRD, Widget, ConfigMap, Service, Job: one each


def test_an_unchanged_resync_sends_no_write_and_reads_no_single_object(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    result = repo.sync()
    assert set(actions(result).values()) == {Action.UNCHANGED}
    assert writes(server) == []
    # one LIST per kind, the inventory's GET, nothing per object
    assert [r.path for r in reads_of_objects(server)] == [
        "/api/v1/namespaces/orksync-system/configmaps/orksync-inventory-test"]
    lists = [r.path for r in server.requests(verb="list")]
    assert sorted(lists) == [  # the namespaces: whether the children's namespace exists
        "/api/v1/configmaps", "/api/v1/namespaces", "/api/v1/services",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "/apis/batch/v1/jobs",
        "/apis/test.orksync.io/v1/widgets"]


def test_a_changed_object_costs_one_apply_and_the_others_none(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    repo.write({"w.yaml": widget("w", NS, colour="red", tag="1")})
    result = repo.sync()
    assert actions(result)[CONFIG] is Action.CONFIGURED
    assert actions(result)[W] is Action.CONFIGURED  # its spec changed
    assert {a for r, a in actions(result).items() if r not in (W, CONFIG)} == {Action.UNCHANGED}
    assert sorted(writes(server)) == [
        ("apply", f"/api/v1/namespaces/{NS}/configmaps/w-config"),
        ("apply", f"/apis/test.orksync.io/v1/namespaces/{NS}/widgets/w")]
    assert repo.live(CONFIG)["data"] == {"colour": "red"}


def test_create_if_absent_never_updates_a_drifted_object_and_creates_a_deleted_one(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    server.edit("v1", "Service", NS, "w-svc", {"metadata": {"labels": {"x": "y"}},
                                               "spec": {"ports": [{"port": 81}]}})
    kept = repo.sync()
    assert actions(kept)[SVC] is Action.UNCHANGED and writes(server) == []
    assert repo.live(SVC)["spec"]["ports"] == [{"port": 81}]
    server.store.objects.pop(("", "services", NS, "w-svc"))
    again = repo.sync()
    assert actions(again)[SVC] is Action.CREATED
    assert writes(server) == [("create", f"/api/v1/namespaces/{NS}/services")]


def test_a_create_only_job_is_never_updated_when_its_template_changes(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    repo.write({"w.yaml": widget("w", NS, colour="blue", tag="2")})
    result = repo.sync()
    assert actions(result)[JOB] is Action.UNCHANGED
    assert not [w for w in writes(server) if "jobs" in w[1]]
    job = repo.live(JOB)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1"


def test_children_carry_an_owner_reference_to_the_live_custom_resource(repo: Repo) -> None:
    synced(repo)
    uid = repo.live(W)["metadata"]["uid"]
    for child in (CONFIG, SVC, JOB):
        (owner,) = repo.live(child)["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Widget", "w", uid)
        assert owner.get("controller") is True


def test_stages_write_the_crd_then_the_custom_resource_then_its_children(
        repo: Repo, server: FakeApiServer) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, colour="blue", tag="1")})
    repo.sync()
    paths = [p for _, p in writes(server)]
    crd = paths.index("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                      "widgets.test.orksync.io")
    cr = paths.index(f"/apis/test.orksync.io/v1/namespaces/{NS}/widgets/w")
    children = [i for i, p in enumerate(paths) if f"/namespaces/{NS}/" in p and i != cr]
    assert crd < cr < min(children) and len(children) == 3


def test_the_prefetch_lists_each_kind_once_before_the_first_write(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    repo.write({"w.yaml": widget("w", NS, colour="green", tag="1")})
    repo.sync()
    verbs = [r.verb for r in server.log if not r.discovery]
    first_write = next(i for i, v in enumerate(verbs) if v in ("apply", "create", "patch"))
    lists = [r.path for r in server.requests(verb="list")]
    assert all(v in ("list", "get") for v in verbs[:first_write])
    assert len(lists) == len(set(lists))  # no kind listed twice


def test_children_are_listed_by_orksyncs_label_and_custom_resources_whole(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    repo.sync()
    by_path = {r.path: r.query.get("labelSelector") for r in server.requests(verb="list")}
    assert by_path["/api/v1/configmaps"] == "app.kubernetes.io/managed-by=orksync"
    assert by_path["/apis/test.orksync.io/v1/widgets"] is None


def test_a_child_being_deleted_is_waiting_and_is_created_again_once_gone(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    server.edit("v1", "ConfigMap", NS, "w-config", {"metadata": {"finalizers": ["x.io/hold"]}})
    cm = repo.kube.resource("v1", "ConfigMap")
    repo.kube.delete(cm, NS, "w-config")
    repo.write({"w.yaml": widget("w", NS, colour="red", tag="1")})
    held = repo.sync()
    assert change(held, CONFIG).action is Action.WAITING
    assert "being deleted (finalizers: x.io/hold)" in change(held, CONFIG).message
    assert not [w for w in writes(server) if "configmaps/w-config" in w[1]]
    server.edit("v1", "ConfigMap", NS, "w-config", {"metadata": {"finalizers": None}})
    assert repo.live(CONFIG) is None
    again = repo.sync()
    assert actions(again)[CONFIG] is Action.CREATED
    assert repo.live(CONFIG)["data"] == {"colour": "red"}


def test_a_field_a_hand_apply_took_over_is_taken_back_by_the_forced_apply(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    cm = repo.kube.resource("v1", "ConfigMap")
    repo.kube.apply(cm, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "w-config", "namespace": NS},
                         "data": {"colour": "pink"}}, field_manager="kubectl", force=True)
    result = repo.sync()
    assert actions(result)[CONFIG] is Action.CONFIGURED
    live = repo.live(CONFIG)
    assert live["data"] == {"colour": "blue"}
    owners = {m["manager"] for m in live["metadata"]["managedFields"]
              if "f:colour" in (m["fieldsV1"].get("f:data") or {})}
    assert owners == {"orksync"}


def test_an_object_the_server_refuses_fails_alone(repo: Repo, server: FakeApiServer) -> None:
    plain = ("apiVersion: example.io/v1\nkind: Unserved\nmetadata: {name: u, namespace: "
             f"{NS}}}\n")
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD, "plain.yaml": plain,
                "w.yaml": widget("w", NS, colour="blue", tag="1")})
    result = repo.sync()
    unserved = [c for c in result.changes.changes if c.ref.kind == "Unserved"]
    assert [c.action for c in unserved] == [Action.FAILED]
    assert "Unserved" in unserved[0].message
    assert {actions(result)[r] for r in (W, CONFIG, SVC, JOB)} == {Action.CREATED}


# --- dry runs ----------------------------------------------------------------------------


def test_a_fresh_dry_run_reports_every_creation_and_stores_nothing(
        repo: Repo, server: FakeApiServer) -> None:
    repo.write({"katalog.yaml": KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, colour="blue", tag="1")})
    before = set(server.store.objects)
    result = repo.sync(apply=ApplyOptions(dry_run=True))
    assert {actions(result)[r] for r in (W, CONFIG, SVC, JOB)} == {Action.CREATED}
    assert set(server.store.objects) == before
    assert all(r.query.get("dryRun") == "All" for r in server.requests(writes=True))


def test_a_dry_run_reports_a_change_as_configured_and_writes_nothing(
        repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    before = repo.live(CONFIG)
    repo.write({"w.yaml": widget("w", NS, colour="red", tag="1")})
    result = repo.sync(apply=ApplyOptions(dry_run=True))
    assert actions(result)[CONFIG] is Action.CONFIGURED
    assert actions(result)[SVC] is Action.UNCHANGED
    assert repo.live(CONFIG) == before
    assert all(r.query.get("dryRun") == "All" for r in server.requests(writes=True))


def test_a_dry_run_of_an_unchanged_set_sends_nothing(repo: Repo, server: FakeApiServer) -> None:
    synced(repo)
    result = repo.sync(apply=ApplyOptions(dry_run=True))
    assert set(actions(result).values()) == {Action.UNCHANGED}
    assert writes(server) == []


SECRET_KATALOG = katalog("""\
        onReconcile:
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data:
                user: "{{ .spec.colour }}"
                password: "{{ randomAlphanumeric 24 }}"
          clusterRoles:
            - name: "{{ .metadata.namespace }}-{{ .metadata.name }}-reader"
              rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
""")


def test_a_once_secret_keeps_its_values_when_its_template_changes(
        repo: Repo, server: FakeApiServer) -> None:
    creds = ref("Secret", "w-creds")
    repo.write({"katalog.yaml": SECRET_KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, colour="blue")})
    assert actions(repo.sync())[creds] is Action.CREATED
    data = repo.live(creds)["data"]
    assert set(data) == {"user", "password"}
    # `once`: the live values are kept, the static `user` too; the write records the new
    # fingerprint, after which the Secret costs no request
    repo.write({"w.yaml": widget("w", NS, colour="red")})
    repo.sync()
    assert repo.live(creds)["data"] == data
    again = repo.sync()
    assert actions(again)[creds] is Action.UNCHANGED
    assert not [w for w in writes(server) if "/secrets" in w[1]]
    assert repo.live(creds)["data"] == data


def test_a_cluster_scoped_child_gets_no_owner_reference_and_goes_with_its_owner(
        repo: Repo, server: FakeApiServer) -> None:
    role = ref("ClusterRole", f"{NS}-w-reader")
    repo.write({"katalog.yaml": SECRET_KATALOG, "crd.yaml": CRD,
                "w.yaml": widget("w", NS, colour="blue")})
    assert actions(repo.sync())[role] is Action.CREATED
    meta = repo.live(role)["metadata"]
    assert "ownerReferences" not in meta  # a namespaced owner cannot own it
    assert meta["annotations"]["orksync.io/owner"] == str(W)
    repo.remove("w.yaml")
    gone = repo.sync()
    assert actions(gone)[W] is Action.DELETED
    assert repo.live(role) is None and repo.live(ref("Secret", "w-creds")) is None
    assert ("delete", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NS}-w-reader") \
        in writes(server)
