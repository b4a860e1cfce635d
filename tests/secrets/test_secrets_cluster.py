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
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from orksync.apply.compare import HASH_ANNOTATION, fingerprint
from orksync.apply.secrets import rotate_due, write_secret
from orksync.cluster.kube import Kube
from orksync.model import Action, Change, ObjRef, Origin, RenderedObject, WritePolicy
from orksync.render.builders import BuildContext
from orksync.render.builders.secret import build_secret
from orksync.secrets.random import CryptoRandom
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, ROOT, write_repo

pytestmark = pytest.mark.cluster

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
    ca_live = get(kube, obj.ref.namespace, obj.ref.name + "-ca") \
        if obj.directives.get("tls") and live == "read" else None
    return write_secret(kube, obj, sent(obj), current, field_manager="orksync", now=now,
                        random=CryptoRandom(), dry_run=False, ca_live=ca_live)


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
from orksync.cluster.kube import Kube
from orksync.apply.secrets import rotate_due
from orksync.secrets.random import CryptoRandom
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
        assert_complete_certificate(values(cert), values(get(kube, namespace, "cert-ca")))
        versions |= {rv(db), rv(cert)}
    assert len(versions) > 4  # rotations did happen between the kills


def public_der(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo))


def assert_complete_certificate(data: dict[str, bytes], ca: dict[str, bytes]) -> None:
    """The TLS Secret holds a certificate, its key and the CA bundle, never the CA key;
    the CA Secret holds a CA with its key (a new CA is written there before the TLS
    Secret that uses it, so a kill in between leaves the TLS Secret on its old CA)."""
    assert set(data) == {"tls.crt", "tls.key", "ca.crt"}
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert public_der(leaf.public_key()) == public_der(key.public_key())
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificates(data["ca.crt"])[0])
    assert set(ca) == {"ca.crt", "ca.key"}
    ca_key = serialization.load_pem_private_key(ca["ca.key"], password=None)
    ca_cert = x509.load_pem_x509_certificate(ca["ca.crt"])
    assert public_der(ca_cert.public_key()) == public_der(ca_key.public_key())


# --- rotation and re-issue roll the workloads that read the Secret, whatever their policy -

ROLL_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: apps}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data:
                user: admin
                password: "{{ randomAlphanumeric 24 }}"
            - name: "{{ .metadata.name }}-tls"
              tls:
                dnsNames: ["{{ .spec.host }}"]
                algorithm: ecdsa
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              reconcile: RECONCILE
              env:
                - name: PASSWORD
                  valueFrom:
                    secretKeyRef: {name: "{{ .metadata.name }}-creds", key: password}
              volumes:
                - name: certs
                  secret: {secretName: "{{ .metadata.name }}-tls"}
          statefulSets:
            - name: "{{ .metadata.name }}-db"
              image: postgres
              reconcile: RECONCILE
              envFrom:
                secretRef: [{name: "{{ .metadata.name }}-creds"}]
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=180, cwd=ROOT)


def template_state(kube: Kube, kind: str, namespace: str, name: str) -> tuple[int, str]:
    """(metadata.generation, the pod template's secrets-hash annotation)."""
    live = kube.get(kube.resource("apps/v1", kind), namespace, name)
    annotations = live["spec"]["template"].get("metadata", {}).get("annotations") or {}
    return int(live["metadata"]["generation"]), str(annotations.get("orksync.io/secrets-hash"))


@pytest.mark.parametrize("reconcile", [
    "false", "true", "true\n              forceConflict: false"],
    ids=["create-if-absent", "apply", "apply-without-force"])
def test_rotation_and_a_re_issue_roll_the_workloads_at_once_and_a_sync_leaves_them(
        kube: Kube, control_plane: ControlPlane, tmp_path: Path, reconcile: str) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    cr = (f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
          f"  namespace: {ns}\nspec: {{host: a.example}}\n")
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": ROLL_KATALOG.replace("RECONCILE", reconcile), "crd.yaml": CRD,
        "w.yaml": cr})
    kc = str(control_plane.kubeconfig)
    sync = ("sync", str(repo), "--once", "--kubeconfig", kc, "--name", f"roll-{ns}")
    first = run_cli(*sync)
    assert first.returncode == 0, first.stderr
    workloads = (("Deployment", "w"), ("StatefulSet", "w-db"))
    before = {w: template_state(kube, w[0], ns, w[1]) for w in workloads}
    assert all(h != "None" for _, h in before.values()), before
    old = values(get(kube, ns, "w-creds"))

    rotated = run_cli("rotate", "--force", f"{ns}/w-creds", "--kubeconfig", kc)
    assert rotated.returncode == 0, rotated.stderr
    new = values(get(kube, ns, "w-creds"))
    assert new["password"] != old["password"]
    after = {w: template_state(kube, w[0], ns, w[1]) for w in workloads}
    for w in workloads:  # rolled within the same command
        assert after[w][0] > before[w][0] and after[w][1] != before[w][1], (w, before, after)
    assert f"configured Deployment/{ns}/w" in rotated.stderr
    for text in (rotated.stdout, rotated.stderr):
        assert old["password"].decode() not in text and new["password"].decode() not in text

    for _ in range(2):  # the next syncs leave the rolled workloads as they are
        again = run_cli(*sync)
        assert again.returncode == 0, again.stderr
        assert {w: template_state(kube, w[0], ns, w[1]) for w in workloads} == after
        assert values(get(kube, ns, "w-creds")) == new

    # a re-issued certificate (dnsNames changed) rolls the Deployment that mounts it, in
    # the sync that re-issues it; the StatefulSet does not read the TLS Secret
    tls_before = values(get(kube, ns, "w-tls"))
    ca_before = values(get(kube, ns, "w-tls-ca"))
    write_repo(tmp_path / "repo", {"w.yaml": cr.replace("a.example", "b.example")})
    reissue = run_cli(*sync)
    assert reissue.returncode == 0, reissue.stderr
    tls_after = values(get(kube, ns, "w-tls"))
    assert tls_after["tls.crt"] != tls_before["tls.crt"]
    # signed with the CA key read from the CA Secret: the same CA, which stays as it was
    assert tls_after["ca.crt"] == tls_before["ca.crt"]
    assert values(get(kube, ns, "w-tls-ca")) == ca_before
    assert_complete_certificate(tls_after, ca_before)
    leaf = x509.load_pem_x509_certificate(values(get(kube, ns, "w-tls"))["tls.crt"])
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "b.example" in sans.get_values_for_type(x509.DNSName)
    reissued = {w: template_state(kube, w[0], ns, w[1]) for w in workloads}
    deploy = ("Deployment", "w")
    assert reissued[deploy][0] > after[deploy][0] and reissued[deploy][1] != after[deploy][1]
    assert reissued[("StatefulSet", "w-db")] == after[("StatefulSet", "w-db")]
    settled = run_cli(*sync)
    assert settled.returncode == 0, settled.stderr
    assert {w: template_state(kube, w[0], ns, w[1]) for w in workloads} == reissued
    assert "configured=0" in settled.stderr.splitlines()[-1], settled.stderr


# --- the CA key in a Secret of its own ------------------------------------------------------

CA_KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: apps}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          secrets:
TLS
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              reconcile: true
              volumes:
                - name: certs
                  secret: {secretName: "{{ .metadata.name }}-tls"}
"""
TLS_ENTRY = """\
            - name: "{{ .metadata.name }}-tls"
              reconcile: RECONCILE
              tls:
                dnsNames: [web.example]
                algorithm: ecdsa
"""


def ca_repo(root: Path, ns: str, *, tls: bool = True, reconcile: str = "false") -> Path:
    entry = TLS_ENTRY.replace("RECONCILE", reconcile) if tls else \
        "            - name: other\n              data: {a: b}\n"
    return write_repo(root, {
        "katalog.yaml": CA_KATALOG.replace("TLS\n", entry), "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {{}}\n"})


def test_the_ca_key_lives_in_a_secret_of_its_own_recorded_and_pruned_with_the_tls_secret(
        kube: Kube, control_plane: ControlPlane, tmp_path: Path) -> None:
    from orksync.sync import read_inventory

    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = ca_repo(tmp_path / "repo", ns)
    kc = str(control_plane.kubeconfig)
    name = f"ca-{ns}"
    sync = ("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name)
    first = run_cli(*sync)
    assert first.returncode == 0, first.stderr
    tls, ca = get(kube, ns, "w-tls"), get(kube, ns, "w-tls-ca")
    assert tls is not None and ca is not None
    assert tls["type"] == "kubernetes.io/tls" and ca["type"] == "Opaque"
    assert_complete_certificate(values(tls), values(ca))
    issuer = x509.load_pem_x509_certificates(values(tls)["ca.crt"])[0]
    assert x509.load_pem_x509_certificate(values(ca)["ca.crt"]) == issuer
    for key in ("ownerReferences",):
        assert ca["metadata"][key] == tls["metadata"][key]
    assert ca["metadata"]["labels"] == tls["metadata"]["labels"]
    assert ca["metadata"]["annotations"]["orksync.io/ca-of"] == "w-tls"
    assert ca["metadata"]["annotations"]["orksync.io/owner"] == \
        tls["metadata"]["annotations"]["orksync.io/owner"]
    pod = kube.get(kube.resource("apps/v1", "Deployment"), ns, "w")["spec"]["template"]["spec"]
    assert "w-tls-ca" not in str(pod)  # no workload reads it
    recorded = {str(e.ref) for e in read_inventory(kube, name)}
    assert {f"Secret/{ns}/w-tls", f"Secret/{ns}/w-tls-ca"} <= recorded
    again = run_cli(*sync)
    assert again.returncode == 0 and "configured=0" in again.stderr.splitlines()[-1], \
        again.stderr
    assert rv(get(kube, ns, "w-tls-ca")) == rv(ca)

    # the tls entry leaves the Katalog: its Secret and its CA Secret are pruned together
    ca_repo(tmp_path / "repo", ns, tls=False)
    pruned = run_cli(*sync)
    assert pruned.returncode == 0, pruned.stderr
    assert f"deleted Secret/{ns}/w-tls" in pruned.stderr
    assert f"deleted Secret/{ns}/w-tls-ca" in pruned.stderr
    assert get(kube, ns, "w-tls") is None and get(kube, ns, "w-tls-ca") is None
    for text in (first.stderr, again.stderr, pruned.stderr):
        for value in values(ca).values():
            assert value.decode() not in text


@pytest.mark.parametrize("reconcile", ["false", "true"], ids=["create-if-absent", "apply"])
def test_a_tls_secret_holding_its_ca_key_is_migrated_at_the_next_sync_certificate_unchanged(
        kube: Kube, control_plane: ControlPlane, tmp_path: Path, reconcile: str) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = ca_repo(tmp_path / "repo", ns, reconcile=reconcile)
    kc = str(control_plane.kubeconfig)
    sync = ("sync", str(repo), "--once", "--kubeconfig", kc, "--name", f"mig-{ns}")
    assert run_cli(*sync).returncode == 0
    # the state an earlier version left: the CA key inside the TLS Secret, no CA Secret
    res = kube.resource("v1", "Secret")
    ca_key = get(kube, ns, "w-tls-ca")["data"]["ca.key"]  # type: ignore[index]
    kube.delete(res, ns, "w-tls-ca")
    kube.request("PATCH", res.path(ns, "w-tls"), body={"data": {"ca.key": ca_key}},
                 content_type="application/merge-patch+json")
    legacy = values(get(kube, ns, "w-tls"))
    assert "ca.key" in legacy

    migrated = run_cli(*sync)
    assert migrated.returncode == 0, migrated.stderr
    assert f"Secret/{ns}/w-tls" in migrated.stderr and "CA key moved" in migrated.stderr
    tls, ca = values(get(kube, ns, "w-tls")), values(get(kube, ns, "w-tls-ca"))
    assert "ca.key" not in tls
    for key in ("tls.crt", "tls.key", "ca.crt"):  # the served certificate is unchanged
        assert tls[key] == legacy[key]
    assert ca["ca.key"] == legacy["ca.key"]
    assert_complete_certificate(tls, ca)
    settled = run_cli(*sync)
    assert settled.returncode == 0 and "configured=0" in settled.stderr.splitlines()[-1], \
        settled.stderr

    # a rotation signs with the CA key from its new place: same CA, new certificate
    rotated = run_cli("rotate", "--force", f"{ns}/w-tls", "--kubeconfig", kc)
    assert rotated.returncode == 0, rotated.stderr
    after, ca_after = values(get(kube, ns, "w-tls")), values(get(kube, ns, "w-tls-ca"))
    assert after["tls.crt"] != tls["tls.crt"] and after["ca.crt"] == tls["ca.crt"]
    assert ca_after == ca and "ca.key" not in after
    assert_complete_certificate(after, ca_after)
    for text in (migrated.stderr, settled.stderr, rotated.stderr):
        for value in (*legacy.values(), *after.values()):
            assert value.decode() not in text


def test_a_workload_never_stamped_is_rolled_only_when_a_secret_it_reads_changes(
        kube: Kube, control_plane: ControlPlane, tmp_path: Path) -> None:
    """Adopting a create-if-absent workload without the annotation (made before, by hand
    or by another tool) restarts nothing; a rotation of a Secret it reads rolls it."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": ROLL_KATALOG.replace("RECONCILE", "false"), "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {{host: a.example}}\n"})
    kc = str(control_plane.kubeconfig)
    sync = ("sync", str(repo), "--once", "--kubeconfig", kc, "--name", f"roll-{ns}")
    assert run_cli(*sync).returncode == 0
    kube.request("PATCH", kube.resource("apps/v1", "Deployment").path(ns, "w"),
                 body=[{"op": "remove", "path": "/spec/template/metadata/annotations/"
                                               "orksync.io~1secrets-hash"}],
                 content_type="application/json-patch+json")
    unstamped = template_state(kube, "Deployment", ns, "w")
    assert unstamped[1] == "None"
    again = run_cli(*sync)
    assert again.returncode == 0, again.stderr
    assert template_state(kube, "Deployment", ns, "w") == unstamped
    rotated = run_cli("rotate", "--force", f"{ns}/w-creds", "--kubeconfig", kc)
    assert rotated.returncode == 0, rotated.stderr
    generation, digest = template_state(kube, "Deployment", ns, "w")
    assert generation > unstamped[0] and digest != "None"
