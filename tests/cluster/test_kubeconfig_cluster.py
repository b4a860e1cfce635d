"""Connecting with each kind of kubeconfig credential to the real control plane, natively
(orksync.cluster.kubeconfig, no `kubernetes` import). Exec plugins, auth-providers and
proxies: tests/cluster/test_credentials_cluster.py. The merge rules and error texts without a
cluster: tests/cluster/test_kubeconfig.py."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync import __version__
from orksync.cluster import kubeconfig
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.secrets import pki
from testbed.controlplane import CONTEXT_NAME, ControlPlane, kubeconfig_document

pytestmark = pytest.mark.cluster

ADMIN = "orksync-admin"


def whoami(kube: Kube) -> str:
    review = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                          body={"apiVersion": "authentication.k8s.io/v1",
                                "kind": "SelfSubjectReview"})
    return str(review["status"]["userInfo"]["username"])


def connected_as(path: Path, context: str | None = None) -> tuple[str, Kube]:
    kube = Kube.from_kubeconfig(path, context)
    try:
        return whoami(kube), kube
    finally:
        kube.close()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def document(cp: ControlPlane, *, cluster: dict[str, Any] | None = None,
             user: dict[str, Any] | None = None) -> dict[str, Any]:
    """The control plane's kubeconfig with its cluster or user replaced."""
    doc = kubeconfig_document(cp.server, cp.ca_pem, cp.admin_cert_pem, cp.admin_key_pem)
    if cluster is not None:
        doc["clusters"][0]["cluster"] = {"server": cp.server, **cluster}  # type: ignore[index]
    if user is not None:
        doc["users"][0]["user"] = user  # type: ignore[index]
    return doc


def sa_token(admin: Kube, namespace: str, name: str) -> str:
    """A bound token of ServiceAccount `name` from the TokenRequest API (created if new)."""
    sa = admin.resource("v1", "ServiceAccount")
    if admin.get_or_none(sa, namespace, name) is None:
        admin.create(sa, {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": name, "namespace": namespace}},
                     field_manager="orksync-tests")
    answer = admin.request(
        "POST", sa.path(namespace, name, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})
    return str(answer["status"]["token"])


# --- client certificates, CA, TLS ---------------------------------------------------------------


def test_the_control_planes_kubeconfig_connects_natively_as_the_admin(
        control_plane: ControlPlane) -> None:
    """-data fields: CA, client certificate and key embedded."""
    assert connected_as(control_plane.kubeconfig)[0] == ADMIN


def test_requests_name_orksync_and_its_version_as_their_user_agent(
        control_plane: ControlPlane, namespace: str) -> None:
    """What the API server's audit log records of a write sent on orksync's own connection
    (the session's control plane logs every write)."""
    assert control_plane.audit_log is not None
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    name = f"agent-{uuid.uuid4().hex[:8]}"
    try:
        kube.create(kube.resource("v1", "ConfigMap"), {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}}, field_manager="tests")
    finally:
        kube.close()
    events = [json.loads(line) for line in
              control_plane.audit_log.read_text().splitlines() if name in line]
    assert [e["userAgent"] for e in events if e["verb"] == "create"] == \
        [f"orksync/{__version__}"]


def test_siblings_sharing_a_pool_keep_one_set_of_idle_connections(
        control_plane: ControlPlane, namespace: str) -> None:
    """The agent's Syncs: each its own Kube (gate, counters) on the controller's pool, so
    that 100 Syncs keep the pool's idle connections once, not one pool's each; closing
    one Sync's Kube leaves the shared connections to their owner."""
    kube = Kube.from_kubeconfig(control_plane.kubeconfig, pool_size=4)
    own = kube.sibling(timeout=30.0, pool_size=4)
    shared = [kube.sibling(timeout=30.0, share_pool=True) for _ in range(10)]
    res = kube.resource("v1", "ConfigMap")
    try:
        for sibling in shared:
            list(sibling.list(res, namespace=namespace))
        list(own.list(res, namespace=namespace))
        # one after the other: one connection made, kept and used again by all ten
        assert kube._pool.idle() == 1 and own._pool.idle() == 1
        assert all(s._pool is kube._pool for s in shared)
        assert [s.requests for s in shared] == [1] * 10
        shared[0].close()
        assert kube._pool.idle() == 1
        own.close()
        assert own._pool.idle() == 0
    finally:
        own.close()
        kube.close()


def test_file_fields_relative_to_the_kubeconfig_connect(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pem = tmp_path / "cfg" / "pki"
    pem.mkdir(parents=True)
    for name, data in (("ca.crt", control_plane.ca_pem),
                       ("admin.crt", control_plane.admin_cert_pem),
                       ("admin.key", control_plane.admin_key_pem)):
        (pem / name).write_bytes(data)
    path = write(tmp_path / "cfg" / "config", document(
        control_plane, cluster={"certificate-authority": "pki/ca.crt"},
        user={"client-certificate": "pki/admin.crt",
              "client-key": str(pem / "admin.key")}))  # absolute works as well
    monkeypatch.chdir(tmp_path)  # not the kubeconfig's directory
    assert connected_as(path)[0] == ADMIN


def test_a_wrong_ca_is_refused_at_once_with_a_clear_error(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    other = pki.create_ca(common_name="not-the-cluster-ca", now=datetime.now(UTC),
                          validity=timedelta(days=1))
    path = write(tmp_path / "config", document(
        control_plane, cluster={"certificate-authority-data": b64(other.certificate.pem)}))
    kube = Kube.from_kubeconfig(path)
    with pytest.raises(ClusterError) as err:
        whoami(kube)
    text = str(err.value)
    assert "the API server's TLS certificate was refused" in text
    assert "certificate verify failed" in text or "unable to get local issuer" in text
    assert f"certificate-authority-data of cluster '{CONTEXT_NAME}' in {path}" in text
    # at once: one request, no retry (a configuration error), counted, not timed
    assert kube.retries == 0 and kube.requests == 1


def test_no_ca_trusts_the_system_cas_and_insecure_skip_tls_verify_does_not_verify(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    admin = {"client-certificate-data": b64(control_plane.admin_cert_pem),
             "client-key-data": b64(control_plane.admin_key_pem)}
    system = write(tmp_path / "system", document(control_plane, cluster={}, user=admin))
    with pytest.raises(ClusterError, match="checked against the system's trusted CAs"):
        connected_as(system)
    insecure = write(tmp_path / "insecure", document(
        control_plane, cluster={"insecure-skip-tls-verify": True}, user=admin))
    with pytest.warns(Warning, match="Unverified HTTPS request"):  # as urllib3 words it
        assert connected_as(insecure)[0] == ADMIN


def test_tls_server_name_is_the_name_verified(control_plane: ControlPlane,
                                               tmp_path: Path) -> None:
    ca = {"certificate-authority-data": b64(control_plane.ca_pem)}
    named = write(tmp_path / "named", document(
        control_plane, cluster={**ca, "tls-server-name": "kubernetes.default.svc"}))
    assert connected_as(named)[0] == ADMIN
    wrong = write(tmp_path / "wrong", document(
        control_plane, cluster={**ca, "tls-server-name": "elsewhere.example"}))
    with pytest.raises(ClusterError, match="TLS certificate was refused: Hostname mismatch"):
        connected_as(wrong)


# --- tokens ------------------------------------------------------------------------------------


def test_a_token_kubeconfig_connects_as_its_service_account(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path) -> None:
    token = sa_token(admin, sa_namespace, "reader")
    path = write(tmp_path / "config", document(control_plane, user={"token": token}))
    assert connected_as(path)[0] == f"system:serviceaccount:{sa_namespace}:reader"


def test_a_token_file_is_read_again_when_it_rotates(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(sa_token(admin, sa_namespace, "first") + "\n")
    path = write(tmp_path / "config", document(control_plane, user={"tokenFile": "token"}))
    now = [0.0]
    monkeypatch.setattr(kubeconfig, "CLOCK", lambda: now[0])
    kube = Kube.from_kubeconfig(path)
    try:
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:first"
        token_file.write_text(sa_token(admin, sa_namespace, "second"))
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:first"  # not yet
        now[0] += kubeconfig.TOKEN_REFRESH
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:second"
    finally:
        kube.close()


def test_in_cluster_reads_the_service_account_token_again_as_it_rotates(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = tmp_path / "serviceaccount"
    mounted.mkdir()
    (mounted / "ca.crt").write_bytes(control_plane.ca_pem)
    (mounted / "token").write_text(sa_token(admin, sa_namespace, "agent"))
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", mounted)
    now = [0.0]
    monkeypatch.setattr(kubeconfig, "CLOCK", lambda: now[0])
    kube = Kube.in_cluster()
    try:
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:agent"
        (mounted / "token").write_text(sa_token(admin, sa_namespace, "rotated"))
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:agent"  # not yet
        now[0] += kubeconfig.TOKEN_REFRESH
        assert whoami(kube) == f"system:serviceaccount:{sa_namespace}:rotated"
    finally:
        kube.close()


# --- several files ------------------------------------------------------------------------------


def test_several_kubeconfig_files_merge_first_file_wins(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first file's `work` context, cluster and user; a later file's entries of the
    same names point at a closed port with a stranger's token and are ignored; its own
    user (a token) and its relative CA path are read from its directory."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "ca.crt").write_bytes(control_plane.ca_pem)
    first = write(tmp_path / "a" / "config", {
        "current-context": "work",
        "clusters": [{"name": "main", "cluster": {"server": control_plane.server,
                                                  "certificate-authority-data":
                                                      b64(control_plane.ca_pem)}}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": b64(control_plane.admin_cert_pem),
            "client-key-data": b64(control_plane.admin_key_pem)}}],
        "contexts": [{"name": "work", "context": {"cluster": "main", "user": "admin"}},
                     {"name": "robot", "context": {"cluster": "other", "user": "robot"}}]})
    second = write(tmp_path / "b" / "config", {
        "current-context": "robot",
        "clusters": [{"name": "main", "cluster": {"server": "https://127.0.0.1:9"}},
                     {"name": "other", "cluster": {"server": control_plane.server,
                                                   "certificate-authority": "ca.crt"}}],
        "users": [{"name": "admin", "user": {"token": "not-a-token"}},
                  {"name": "robot", "user": {"token": sa_token(admin, sa_namespace, "bot")}}],
        "contexts": [{"name": "work", "context": {"cluster": "main", "user": "robot"}}]})
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "none"), str(first),
                                                      str(second)]))
    assert connected_as(None)[0] == ADMIN  # type: ignore[arg-type]
    assert connected_as(None, "robot")[0] == \
        f"system:serviceaccount:{sa_namespace}:bot"  # type: ignore[arg-type]
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(second), str(first)]))
    with pytest.raises(ClusterError):  # now the other file's `main` and `admin` win
        Kube.from_kubeconfig(None, "work").request("GET", "/version")
