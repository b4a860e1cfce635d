"""Secrets against the real control plane: once, rotation in place, ownership, conflicts,
TLS that completes a handshake, scheduled rotation, and rotation killed half-way."""

from __future__ import annotations

import base64
import copy
import random as stdlib_random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from orksync.apply.compare import HASH_ANNOTATION, fingerprint
from orksync.apply.kube import Kube
from orksync.apply.secrets import rotate_due, write_secret
from orksync.model import Action, Change, ObjRef, Origin, RenderedObject, WritePolicy
from orksync.render.builders import BuildContext
from orksync.render.builders.secret import build_secret
from orksync.render.notes.random import CryptoRandom
from orksync.testing.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
LABELS = {"app.kubernetes.io/managed-by": "orksync", "orkestra-owner": "shop",
          "orkestra.orkspace.io/managed": "true"}
DB: dict[str, Any] = {
    "name": "db",
    "data": {"user": "admin", "password": "<generate:randomAlphanumeric:32>",
             "dsn": "pg://admin:<generate:randomHex:8>@db"},
    "annotations": {"team": "payments"}}


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def rendered(entry: dict[str, Any], namespace: str,
             policy: WritePolicy = WritePolicy.APPLY) -> RenderedObject:
    ctx = BuildContext(cr_name="shop", cr_namespace=namespace, owner_key="shop",
                       name=entry.get("name") or "shop-secret", namespace=namespace,
                       labels=LABELS)
    built = build_secret(entry, ctx)
    return RenderedObject(ref=ObjRef.of(built.body), body=built.body, policy=policy,
                          origin=Origin(file="test"), stage=11, directives=built.directives)


def sent(obj: RenderedObject) -> dict[str, Any]:
    """The body the engine hands over: rendered body plus its fingerprint."""
    body = copy.deepcopy(dict(obj.body))
    body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = fingerprint(body)
    return body


def get(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    result: dict[str, Any] | None = kube.get_or_none(kube.resource("v1", "Secret"),
                                                     namespace, name)
    return result


def write(kube: Kube, obj: RenderedObject, now: datetime,
          live: dict[str, Any] | str | None = "read") -> tuple[Change, str | None]:
    current = get(kube, obj.ref.namespace, obj.ref.name) if live == "read" else live
    assert not isinstance(current, str)
    return write_secret(kube, obj, sent(obj), current, field_manager="orksync", now=now,
                        random=CryptoRandom(), dry_run=False)


def values(secret: dict[str, Any] | None) -> dict[str, bytes]:
    assert secret is not None
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def rv(secret: dict[str, Any] | None) -> str:
    assert secret is not None
    return str(secret["metadata"]["resourceVersion"])


@pytest.mark.parametrize(("policy", "once"), [(WritePolicy.CREATE, False),
                                              (WritePolicy.APPLY, False),
                                              (WritePolicy.APPLY, True)])
def test_a_generated_secret_is_stable_across_ten_writes(kube: Kube, namespace: str,
                                                        policy: WritePolicy,
                                                        once: bool) -> None:
    obj = rendered({**DB, "once": once}, namespace, policy)
    first, digest = write(kube, obj, T0)
    assert first.action is Action.CREATED, first
    created = get(kube, namespace, "db")
    assert values(created)["user"] == b"admin" and len(values(created)["password"]) == 32
    assert created is not None and created["metadata"]["annotations"]["team"] == "payments"
    for day in range(1, 10):
        change, again = write(kube, obj, T0 + timedelta(days=day))
        assert change.action is Action.UNCHANGED, change
        assert again == digest
    final = get(kube, namespace, "db")
    assert rv(final) == rv(created) and values(final) == values(created)


def test_rotation_at_the_boundary_rewrites_values_in_place_and_the_secret_never_vanishes(
        kube: Kube, namespace: str, control_plane: ControlPlane) -> None:
    obj = rendered({**DB, "rotateAfter": "1h"}, namespace)
    assert write(kube, obj, T0)[0].action is Action.CREATED
    before = get(kube, namespace, "db")
    early, _ = write(kube, obj, T0 + timedelta(hours=1, seconds=-1))
    assert early.action is Action.UNCHANGED and rv(get(kube, namespace, "db")) == rv(before)

    seen: list[int] = []
    incomplete: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        watcher = Kube.from_kubeconfig(control_plane.kubeconfig)
        try:
            while not stop.is_set():
                secret = get(watcher, namespace, "db")
                seen.append(404 if secret is None else 200)
                if secret is not None and set(secret.get("data") or {}) != {
                        "user", "password", "dsn"}:
                    incomplete.append(rv(secret))
        finally:
            watcher.close()

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        time.sleep(0.2)
        change, _ = write(kube, obj, T0 + timedelta(hours=1))
        time.sleep(0.2)
    finally:
        stop.set()
        thread.join()
    assert change.action is Action.CONFIGURED and "rotated in place" in change.message
    after = get(kube, namespace, "db")
    assert rv(after) != rv(before)
    old, new = values(before), values(after)
    assert new["user"] == b"admin"
    assert new["password"] != old["password"] and new["dsn"] != old["dsn"]
    assert new["dsn"].startswith(b"pg://admin:") and new["dsn"].endswith(b"@db")
    assert len(seen) > 5 and 404 not in seen and not incomplete
    assert not any(v.decode() in change.message for v in new.values())
    assert write(kube, obj, T0 + timedelta(hours=1, minutes=1))[0].action is Action.UNCHANGED


def test_a_pre_existing_secret_not_managed_by_orksync_is_untouched(kube: Kube,
                                                                   namespace: str) -> None:
    res = kube.resource("v1", "Secret")
    kube.create(res, {"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "db", "namespace": namespace},
                      "data": {"password": base64.b64encode(b"mine").decode()}},
                field_manager="someone")
    before = get(kube, namespace, "db")
    for live in (None, before):  # None: the engine's prefetch lists managed Secrets only
        for policy in (WritePolicy.APPLY, WritePolicy.CREATE):
            change, digest = write(kube, rendered(DB, namespace, policy), T0, live=live)
            assert change.action is Action.SKIPPED
            assert change.message == "exists and is not managed by orksync"
            assert digest is not None
    after = get(kube, namespace, "db")
    assert rv(after) == rv(before) and values(after) == {"password": b"mine"}


def test_a_rotation_on_a_stale_resource_version_fails_and_leaves_the_secret_complete(
        kube: Kube, namespace: str) -> None:
    obj = rendered({**DB, "rotateAfter": "1h"}, namespace)
    write(kube, obj, T0)
    stale = get(kube, namespace, "db")
    kube.request("PATCH", kube.resource("v1", "Secret").path(namespace, "db"),
                 body={"metadata": {"labels": {"touched": "yes"}}},
                 content_type="application/merge-patch+json")
    change, digest = write(kube, obj, T0 + timedelta(hours=2), live=stale)
    assert change.action is Action.FAILED and change.message.startswith("conflict")
    after = get(kube, namespace, "db")
    assert values(after) == values(stale)
    assert digest is not None
    retried, _ = write(kube, obj, T0 + timedelta(hours=2))
    assert retried.action is Action.CONFIGURED
    assert values(get(kube, namespace, "db"))["password"] != values(stale)["password"]


@pytest.mark.parametrize("algorithm", ["rsa", "ecdsa"])
def test_a_tls_secret_completes_a_real_handshake(kube: Kube, namespace: str,
                                                 tmp_path: Path, algorithm: str) -> None:
    obj = rendered({"name": "web-tls", "tls": {
        "dnsNames": ["localhost"], "ipAddresses": ["127.0.0.1"], "algorithm": algorithm}},
        namespace, WritePolicy.CREATE)
    change, _ = write(kube, obj, datetime.now(UTC))
    assert change.action is Action.CREATED
    secret = get(kube, namespace, "web-tls")
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    data = values(secret)
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_bytes(data[name])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "tls.key").unlink()  # the test's own copy: the suite-wide leak scan looks here
    for hostname in ("localhost", "127.0.0.1"):
        assert handshake(server_ctx, tmp_path / "ca.crt", hostname) == b"ok"
    assert write(kube, obj, datetime.now(UTC))[0].action is Action.UNCHANGED


def handshake(server_ctx: ssl.SSLContext, cafile: Path, hostname: str) -> bytes:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")
        except BaseException as err:  # reported by the client side
            errors.append(err)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client_ctx = ssl.create_default_context(cafile=str(cafile))
        assert client_ctx.check_hostname
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_ctx.wrap_socket(raw, server_hostname=hostname) as tls:
            return tls.recv(2)
    finally:
        thread.join(timeout=10)
        listener.close()
        assert not errors, errors


def test_rotate_due_rotates_only_the_due_secrets_and_keeps_everything_else(
        kube: Kube, namespace: str) -> None:
    due = rendered({**DB, "name": "due", "rotateAfter": "1h"}, namespace)
    write(kube, due, T0)
    changed = rendered({**DB, "name": "due", "rotateAfter": "1h",
                        "data": {**DB["data"], "user": "root"}}, namespace)
    assert write(kube, changed, T0)[0].action is Action.CONFIGURED  # now server-side applied
    write(kube, rendered({**DB, "name": "young", "rotateAfter": "1h"}, namespace),
          T0 + timedelta(minutes=40))
    write(kube, rendered({"name": "cert", "tls": {"algorithm": "ecdsa", "validFor": "30d"}},
                         namespace, WritePolicy.CREATE), T0)
    write(kube, rendered({**DB, "name": "plain"}, namespace, WritePolicy.CREATE), T0)
    before = {n: get(kube, namespace, n) for n in ("due", "young", "cert", "plain")}

    result = rotate_due(kube, now=T0 + timedelta(hours=1), random=CryptoRandom(),
                        namespace=namespace, force={f"{namespace}/plain"})
    actions = {c.ref.name: c.action for c in result.changes}
    assert actions == {"due": Action.CONFIGURED, "young": Action.UNCHANGED,
                       "cert": Action.UNCHANGED, "plain": Action.CONFIGURED}, result.changes
    after = {n: get(kube, namespace, n) for n in before}
    for name in ("young", "cert"):
        assert rv(after[name]) == rv(before[name])
    for name in ("due", "plain"):
        assert values(after[name])["password"] != values(before[name])["password"]
    rotated = after["due"]
    assert rotated is not None and values(rotated)["user"] == b"root"
    assert rotated["metadata"]["annotations"]["team"] == "payments"
    assert rotated["metadata"]["labels"] == LABELS
    assert rotated["metadata"]["annotations"]["orkestra.orkspace.io/generated-at"] == \
        "2030-01-02T04:04:05Z"
    again, _ = write(kube, changed, T0 + timedelta(hours=1, minutes=5))
    assert again.action is Action.UNCHANGED  # the next sync keeps the rotated values

    renewal = rotate_due(kube, now=T0 + timedelta(days=25), random=CryptoRandom(),
                         namespace=namespace)
    assert {c.ref.name: c.action for c in renewal.changes}["cert"] is Action.CONFIGURED
    missing = rotate_due(kube, now=T0, random=CryptoRandom(), namespace=namespace,
                         force={f"{namespace}/nope"})
    assert missing.failed[0].ref.name == "nope"


ROTATOR = """
import sys
from datetime import UTC, datetime, timedelta
from orksync.apply.kube import Kube
from orksync.apply.secrets import rotate_due
from orksync.render.notes.random import CryptoRandom
kube = Kube.from_kubeconfig(sys.argv[1])
now = datetime(2030, 1, 2, tzinfo=UTC) + timedelta(days=int(sys.argv[3]))
print("ready", flush=True)
while True:
    now += timedelta(days=1)
    rotate_due(kube, now=now, random=CryptoRandom(), namespace=sys.argv[2])
"""


def test_a_rotation_killed_at_any_moment_leaves_a_present_and_complete_secret(
        kube: Kube, namespace: str, control_plane: ControlPlane) -> None:
    write(kube, rendered({**DB, "rotateAfter": "1d"}, namespace), T0)
    write(kube, rendered({"name": "cert", "rotateAfter": "1d", "tls": {
        "dnsNames": ["localhost"], "validFor": "30d"}}, namespace), T0)
    versions = {rv(get(kube, namespace, "db")), rv(get(kube, namespace, "cert"))}
    chooser = stdlib_random.Random(1234)
    for run in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", ROTATOR, str(control_plane.kubeconfig), namespace,
             str(run * 1000)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(chooser.uniform(0.3, 1.5))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        db, cert = get(kube, namespace, "db"), get(kube, namespace, "cert")
        assert set(values(db)) == {"user", "password", "dsn"}
        assert len(values(db)["password"]) == 32
        assert_complete_certificate(values(cert))
        versions |= {rv(db), rv(cert)}
    assert len(versions) > 4  # rotations did happen between the kills


def assert_complete_certificate(data: dict[str, bytes]) -> None:
    assert {"tls.crt", "tls.key", "ca.crt", "ca.key"} <= set(data)
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    assert leaf.public_key().public_bytes(der, spki) == key.public_key().public_bytes(der, spki)
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificates(data["ca.crt"])[0])
