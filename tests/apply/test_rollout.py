"""The pod-template rollout annotation (orksync.apply.rollout): which Secrets a pod reads,
and the value a sync and a rotation both compute. Pure."""

from __future__ import annotations

from typing import Any

from orksync.apply.rollout import (
    ROLLOUT_ANNOTATION,
    add_rollout_annotation,
    live_digest,
    referenced_secrets,
    rollout_body,
    rollout_digest,
)
from orksync.model import ObjRef

OWNER = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace="ns", name="w")


def pod(**spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "app", "image": "nginx"}], **spec}


def test_every_way_a_pod_reads_a_secret_is_found() -> None:
    spec = pod(
        containers=[{"name": "app", "env": [
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}],
            "envFrom": [{"secretRef": {"name": "env-from"}}, {"configMapRef": {"name": "c"}}]}],
        initContainers=[{"name": "init", "envFrom": [{"secretRef": {"name": "init"}}]}],
        volumes=[{"name": "v", "secret": {"secretName": "volume"}},
                 {"name": "p", "projected": {"sources": [
                     {"secret": {"name": "projected"}}, {"configMap": {"name": "c2"}},
                     {"serviceAccountToken": {"path": "t"}}]}}])
    assert referenced_secrets(spec) == {"env", "env-from", "init", "volume", "projected"}


def test_the_digest_covers_the_owner_s_secrets_the_template_reads_and_nothing_else() -> None:
    body = {"kind": "Deployment", "spec": {"template": {"spec": pod(volumes=[
        {"name": "p", "projected": {"sources": [{"secret": {"name": "tls"}}]}},
        {"name": "o", "secret": {"secretName": "other-owner"}}])}}}
    other = ObjRef(api_version="test.orksync.io/v1", kind="Widget", namespace="ns", name="x")
    hashes = {(OWNER, "ns", "tls"): "h1", (OWNER, "ns", "unused"): "h2",
              (other, "ns", "other-owner"): "h3"}
    digest = add_rollout_annotation(body, OWNER, "ns", hashes)
    assert digest == rollout_digest(body["spec"]["template"], {"tls": "h1"})
    assert live_digest(body) == digest
    changed = add_rollout_annotation(body, OWNER, "ns", {**hashes, (OWNER, "ns", "tls"): "h9"})
    assert changed != digest
    unrelated = add_rollout_annotation(body, OWNER, "ns", {**hashes, (other, "ns",
                                                                     "other-owner"): "h8"})
    assert unrelated == digest


def test_the_rollout_write_carries_the_annotation_and_nothing_else() -> None:
    ref = ObjRef(api_version="apps/v1", kind="StatefulSet", namespace="ns", name="db")
    assert rollout_body(ref, "abc") == {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns"},
        "spec": {"template": {"metadata": {"annotations": {ROLLOUT_ANNOTATION: "abc"}}}}}
