"""The fake API server (tests/fakeapi.py): its own behaviour, and its fidelity to the real
control plane. Each fidelity scenario sends the same requests through orksync's client to
the fake and to kube-apiserver and compares the answers on the fields orksync reads
(status codes and reasons, data, labels, annotations, finalizers, deletion, managedFields
of applies, generation, whether the resourceVersion moved, discovery, list pages, watch
event types), so the fake is known to be faithful where the unit tests use it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.cluster.kube import MERGE_PATCH, Kube
from orksync.errors import ClusterError
from tests.fakeapi import FakeApiServer, selector_matches
from tests.helpers import CRD, wait_for

Scenario = Callable[[Kube, str], list[Any]]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Kube]]:
    with FakeApiServer() as server:
        kube = Kube.from_kubeconfig(server.kubeconfig(tmp_path / "kubeconfig"))
        yield server, kube
        kube.close()


def outcome(fn: Callable[[], Any]) -> Any:
    """The answer of a request, or its refusal as (status, reason)."""
    try:
        return fn()
    except ClusterError as err:
        return ("refused", err.status, err.reason)


def cm(ns: str, name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": ns, **meta}}
    if data is not None:
        body["data"] = data
    return body


def applied(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The fields of an answer orksync reads, without what differs run to run."""
    if obj is None or not isinstance(obj, dict):
        return {"answer": obj}
    meta = obj.get("metadata") or {}
    return {
        "data": obj.get("data"), "spec": obj.get("spec"), "status": obj.get("status"),
        "labels": meta.get("labels"), "annotations": meta.get("annotations"),
        "finalizers": meta.get("finalizers"), "deleting": "deletionTimestamp" in meta,
        "generation": meta.get("generation"),
        "applies": sorted((m["manager"], m.get("subresource", ""),
                           json.dumps(without_dots(m.get("fieldsV1")), sort_keys=True))
                          for m in meta.get("managedFields") or []
                          if m.get("operation") == "Apply"),
        "updates": sorted((m["manager"], m.get("subresource", ""),
                           json.dumps(without_dots(m.get("fieldsV1")), sort_keys=True))
                          for m in meta.get("managedFields") or []
                          if m.get("operation") == "Update"),
    }


def without_dots(tree: Any) -> Any:
    """A FieldsV1 tree without its "." entries (the fake does not write them: a map's own
    membership, which orksync never reads)."""
    if not isinstance(tree, dict):
        return tree
    return {k: without_dots(v) for k, v in tree.items() if k != "."}


def rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


# --- the scenarios, each run on both servers -----------------------------------------------


def server_side_apply(kube: Kube, ns: str) -> list[Any]:
    res = kube.resource("v1", "ConfigMap")
    seen: list[Any] = []
    _, first = kube.apply(res, cm(ns, "a", {"a": "1", "b": "1"}), field_manager="one",
                          force=False)
    seen.append(applied(first))
    _, again = kube.apply(res, cm(ns, "a", {"a": "1", "b": "1"}), field_manager="one",
                          force=False)
    seen.append(("no-op keeps the resourceVersion", rv(again) == rv(first)))
    seen.append(outcome(lambda: kube.apply(res, cm(ns, "a", {"a": "2"}), field_manager="two",
                                           force=False)))
    seen.append(applied(kube.apply(res, cm(ns, "a", {"a": "1"}), field_manager="two",
                                   force=False)[1]))  # same value: shared, no conflict
    seen.append(applied(kube.apply(res, cm(ns, "a", {"a": "2"}), field_manager="two",
                                   force=True)[1]))
    # `one` stops applying a (now two's) and b (its alone): b goes, a stays
    seen.append(applied(kube.apply(res, cm(ns, "a", {"c": "1"}), field_manager="one",
                                   force=False)[1]))
    before = kube.get(res, ns, "a")
    dry = kube.apply(res, cm(ns, "a", {"c": "9"}), field_manager="one", force=False,
                     dry_run=True)[1]
    seen.append(("dry run answers the change", dry["data"]))
    after = kube.get(res, ns, "a")
    seen.append(("dry run stores nothing", after["data"], rv(after) == rv(before)))
    seen.append(outcome(lambda: kube.apply(
        res, cm(ns, "dry", {"x": "1"}), field_manager="one", force=False, dry_run=True)[0]))
    seen.append(outcome(lambda: kube.get(res, ns, "dry")))
    return seen


def create_and_errors(kube: Kube, ns: str) -> list[Any]:
    res = kube.resource("v1", "ConfigMap")
    seen: list[Any] = []
    seen.append(applied(kube.create(res, cm(ns, "c", {"k": "v"}), field_manager="t")))
    seen.append(outcome(lambda: kube.create(res, cm(ns, "c", {"k": "v"}), field_manager="t")))
    made = kube.create(res, {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"generateName": "gen-", "namespace": ns}},
                       field_manager="t")
    seen.append(("generateName", made["metadata"]["name"].startswith("gen-"),
                 len(made["metadata"]["name"]) == len("gen-") + 5))
    seen.append(outcome(lambda: kube.get(res, ns, "missing")))
    seen.append(outcome(lambda: kube.create(res, cm("no-such-namespace", "x"),
                                            field_manager="t")))
    seen.append(outcome(lambda: kube.delete(res, ns, "c", precondition_uid=str(uuid.uuid4()))))
    seen.append(outcome(lambda: kube.apply(kube.resource("apps/v1", "Deployment"), {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}},
        field_manager="t", force=True)))
    return seen


def finalizers(kube: Kube, ns: str) -> list[Any]:
    res = kube.resource("v1", "ConfigMap")
    seen: list[Any] = []
    kube.create(res, cm(ns, "f", {"k": "v"}, finalizers=["example.com/hold"]), field_manager="t")
    kube.delete(res, ns, "f")
    seen.append(applied(kube.get(res, ns, "f")))
    seen.append(outcome(lambda: kube.request(
        "PATCH", res.path(ns, "f"), body={"metadata": {"finalizers": ["example.com/other"]}},
        content_type=MERGE_PATCH)))
    kube.request("PATCH", res.path(ns, "f"), body={"metadata": {"finalizers": None}},
                 content_type=MERGE_PATCH)
    seen.append(outcome(lambda: kube.get(res, ns, "f")))
    return seen


def lists(kube: Kube, ns: str) -> list[Any]:
    res = kube.resource("v1", "ConfigMap")
    for i, tier in enumerate(["web", "web", "db", "web"]):
        kube.create(res, cm(ns, f"l{i}", labels={"tier": tier, "n": str(i)}),
                    field_manager="t")
    seen: list[Any] = []
    for selector in ["tier=web", "tier!=web", "tier in (db,cache)", "tier,n notin (0,1)"]:
        names = [o["metadata"]["name"] for o in kube.list(res, namespace=ns,
                                                          label_selector=selector)]
        # the real namespace holds kube-root-ca.crt, published by the controller manager
        seen.append((selector, sorted(n for n in names if n != "kube-root-ca.crt")))
    page = kube.request("GET", res.path(ns), query={"labelSelector": "tier", "limit": 3})
    seen.append(("page", len(page["items"]), bool(page["metadata"].get("continue")),
                 "apiVersion" in page["items"][0], page["metadata"]["resourceVersion"] != ""))
    rest = kube.request("GET", res.path(ns), query={
        "labelSelector": "tier", "limit": 3, "continue": page["metadata"]["continue"]})
    seen.append(("rest", [o["metadata"]["name"] for o in rest["items"]],
                 bool(rest["metadata"].get("continue"))))
    meta = list(kube.list(res, namespace=ns, label_selector="tier=db", metadata_only=True))
    seen.append(("metadata only", [sorted(o) for o in meta], sorted(meta[0]["metadata"]) and
                 "labels" in meta[0]["metadata"]))
    return seen


def custom_resources(kube: Kube, ns: str) -> list[Any]:
    crd_res = kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    crd = yaml.safe_load(CRD)
    group = f"g{uuid.uuid4().hex[:6]}.orksync.io"
    crd["metadata"]["name"] = f"widgets.{group}"
    crd["spec"]["group"] = group
    kube.apply(crd_res, crd, field_manager="t", force=True)
    wait_for("the CRD is established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (kube.get(crd_res, "", crd["metadata"]["name"]).get("status") or {}).get(
            "conditions") or []))
    seen: list[Any] = []
    doc = kube.request("GET", f"/apis/{group}/v1")
    seen.append(sorted((r["name"], r["kind"], r["namespaced"]) for r in doc["resources"]))
    res = kube.resource(f"{group}/v1", "Widget", refresh=True)
    seen.append(("subresources", sorted(res.subresources)))
    body = {"apiVersion": f"{group}/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": ns}, "spec": {"size": 1},
            "status": {"phase": "ignored"}}
    seen.append(applied(kube.apply(res, body, field_manager="t", force=True)[1]))
    status = {"apiVersion": f"{group}/v1", "kind": "Widget",
              "metadata": {"name": "w", "namespace": ns}, "status": {"phase": "Ready"}}
    seen.append(applied(kube.apply(res, status, field_manager="s", force=True,
                                   subresource="status")[1]))
    body["spec"] = {"size": 2}
    seen.append(applied(kube.apply(res, body, field_manager="t", force=True)[1]))
    listed = list(kube.request("GET", res.path(ns))["items"])
    seen.append(("custom resources listed with their kind", [
        (o.get("apiVersion") == f"{group}/v1", o.get("kind")) for o in listed]))
    kube.delete(crd_res, "", crd["metadata"]["name"])
    return seen


def watch_events(kube: Kube, ns: str) -> list[Any]:
    res = kube.resource("v1", "ConfigMap")
    start = kube.request("GET", res.path(ns))["metadata"]["resourceVersion"]
    kube.create(res, cm(ns, "w", {"k": "1"}, labels={"watched": "yes"}), field_manager="t")
    kube.create(res, cm(ns, "other", {"k": "1"}), field_manager="t")
    kube.apply(res, cm(ns, "w", {"k": "2"}, labels={"watched": "yes"}), field_manager="t",
               force=True)
    kube.delete(res, ns, "w")
    seen: list[tuple[str, str]] = []
    stream = kube.watch(res, resource_version=start, label_selector="watched=yes",
                        timeout_seconds=2)
    pending = b""
    try:
        for piece in stream:
            pending += piece
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                event = json.loads(line)
                if event["type"] != "BOOKMARK" and \
                        event["object"]["metadata"].get("namespace") == ns:
                    seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) >= 3:
                break
    finally:
        stream.close()
    return [seen]


def ownership_by_updates(kube: Kube, ns: str) -> list[Any]:
    """A hand edit (an update) takes the fields it changes; the applier then conflicts
    unless forced; a label the applier stops applying is removed."""
    res = kube.resource("v1", "ConfigMap")
    body = cm(ns, "u", {"colour": "blue", "size": "s"}, labels={"a": "1", "b": "2"})
    seen: list[Any] = [applied(kube.apply(res, body, field_manager="orksync", force=False)[1])]
    seen.append(applied(kube.request("PATCH", res.path(ns, "u"), query={
        "fieldManager": "kubectl-edit"}, body={"data": {"colour": "red"}},
        content_type=MERGE_PATCH)))
    seen.append(outcome(lambda: kube.apply(res, body, field_manager="orksync", force=False)))
    seen.append(applied(kube.apply(res, body, field_manager="orksync", force=True)[1]))
    body["metadata"]["labels"] = {"a": "1"}
    seen.append(applied(kube.apply(res, body, field_manager="orksync", force=True)[1]))
    return seen


def secrets_and_generation(kube: Kube, ns: str) -> list[Any]:
    """stringData stored as data; a Deployment's generation moves with its spec only."""
    secrets = kube.resource("v1", "Secret")
    seen: list[Any] = [applied(kube.apply(secrets, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ns},
        "type": "Opaque", "stringData": {"token": "abc"}}, field_manager="t", force=True)[1])]
    deployments = kube.resource("apps/v1", "Deployment")
    body = {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    generations = [kube.apply(deployments, body, field_manager="t", force=True)[1]
                   ["metadata"]["generation"]]
    body["metadata"]["labels"] = {"x": "y"}
    generations.append(kube.apply(deployments, body, field_manager="t", force=True)[1]
                       ["metadata"]["generation"])
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "httpd"
    generations.append(kube.apply(deployments, body, field_manager="t", force=True)[1]
                       ["metadata"]["generation"])
    seen.append(("generations", generations))
    return seen


def owners_and_dependents(kube: Kube, ns: str) -> list[Any]:
    """A dependent goes with its owner (the garbage collector, eventually); an owner held
    by a finalizer keeps its dependents until it goes."""
    res = kube.resource("v1", "ConfigMap")
    owner = kube.create(res, cm(ns, "owner", finalizers=["example.com/hold"]),
                        field_manager="t")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    kube.create(res, cm(ns, "child", ownerReferences=[ref]), field_manager="t")
    kube.delete(res, ns, "owner")
    seen: list[Any] = [("child kept while the owner is held",
                        kube.get_or_none(res, ns, "child") is not None)]
    kube.request("PATCH", res.path(ns, "owner"), body={"metadata": {"finalizers": None}},
                 content_type=MERGE_PATCH)
    wait_for("the dependent deleted", lambda: kube.get_or_none(res, ns, "child") is None)
    seen.append(("owner gone", kube.get_or_none(res, ns, "owner")))
    return seen


SCENARIOS: dict[str, Scenario] = {
    "ownership-by-updates": ownership_by_updates,
    "secrets-and-generation": secrets_and_generation,
    "owners-and-dependents": owners_and_dependents,
    "server-side-apply": server_side_apply, "create-and-errors": create_and_errors,
    "finalizers": finalizers, "lists": lists, "custom-resources": custom_resources,
    "watch": watch_events,
}


@pytest.mark.cluster
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_fake_answers_as_the_api_server_does(
        name: str, admin: Kube, namespace: str, fake: tuple[FakeApiServer, Kube]) -> None:
    server, kube = fake
    server.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    real = SCENARIOS[name](admin, namespace)
    faked = SCENARIOS[name](kube, namespace)
    assert faked == real


# --- the fake alone --------------------------------------------------------------------------


def test_label_selectors() -> None:
    labels = {"a": "1", "b": "2"}
    assert selector_matches("a=1,b", labels) and selector_matches("a in (1,3),!c", labels)
    assert not selector_matches("a!=1", labels) and not selector_matches("b notin (2)", labels)


def test_a_watch_from_a_compacted_resource_version_is_410_gone(
        fake: tuple[FakeApiServer, Kube]) -> None:
    server, kube = fake
    res = kube.resource("v1", "ConfigMap")
    old = kube.request("GET", res.path("default"))["metadata"]["resourceVersion"]
    kube.create(res, cm("default", "x"), field_manager="t")
    server.compact()
    stream = kube.watch(res, resource_version=old, timeout_seconds=1)
    try:
        event = json.loads(b"".join(stream).splitlines()[0])
    finally:
        stream.close()
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


def test_a_watch_sends_bookmarks(fake: tuple[FakeApiServer, Kube]) -> None:
    server, kube = fake
    res = kube.resource("v1", "ConfigMap")
    start = kube.request("GET", res.path("default"))["metadata"]["resourceVersion"]
    stream = kube.watch(res, resource_version=start, timeout_seconds=1)
    try:
        events = [json.loads(line) for line in b"".join(stream).splitlines() if line]
    finally:
        stream.close()
    assert events and {e["type"] for e in events} == {"BOOKMARK"}
    assert server.requests(verb="watch")


def test_deleting_an_owner_deletes_its_dependents(fake: tuple[FakeApiServer, Kube]) -> None:
    server, kube = fake
    res = kube.resource("v1", "ConfigMap")
    owner = kube.create(res, cm("default", "owner"), field_manager="t")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"]}
    kube.create(res, cm("default", "child", ownerReferences=[ref]), field_manager="t")
    kube.delete(res, "default", "owner")
    assert server.object("v1", "ConfigMap", "default", "child") is None


def test_the_request_log_counts_by_verb(fake: tuple[FakeApiServer, Kube]) -> None:
    server, kube = fake
    res = kube.resource("v1", "ConfigMap")
    server.clear_log()
    kube.apply(res, cm("default", "a", {"k": "v"}), field_manager="t", force=True)
    list(kube.list(res, namespace="default"))
    kube.get(res, "default", "a")
    assert [r.verb for r in server.log] == ["apply", "list", "get"]
    assert len(server.requests(writes=True)) == 1
