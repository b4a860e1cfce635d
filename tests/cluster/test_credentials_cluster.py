"""Credentials a kubeconfig obtains from a program, and proxies, against the real control
plane: an exec plugin (a real script, tests/cluster/test_credentials.py's) whose service-account
token or client certificate the API server accepts, renewed as it expires or when the
server refuses it; an oidc auth-provider; an HTTP CONNECT proxy named by `proxy-url` or the
environment. Every request goes through orksync's own transport."""

from __future__ import annotations

import base64
import json
import select
import socket
import socketserver
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from orksync import __version__
from orksync.cluster import credentials, kubeconfig
from orksync.cluster.kube import Kube
from orksync.cluster.retry import NO_RETRY
from orksync.errors import ClusterError
from testbed.controlplane import ControlPlane
from tests.cluster.test_credentials import V1, Plugin, token
from tests.cluster.test_kubeconfig_cluster import ADMIN, b64, document, sa_token, whoami, write
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster


def account(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def user_agents(cp: ControlPlane, username: str, *, containing: str = "") -> set[str]:
    """The User-Agent of every write the audit log holds from `username` (whose line
    contains `containing`)."""
    assert cp.audit_log is not None
    events = [json.loads(line) for line in cp.audit_log.read_text().splitlines()
              if containing in line]
    return {e["userAgent"] for e in events if e.get("user", {}).get("username") == username}


def exec_kubeconfig(cp: ControlPlane, tmp_path: Path, plugin: Plugin) -> Path:
    return write(tmp_path / "config", document(cp, user={"exec": plugin.exec_section()}))


def connect(path: Path) -> Kube:
    return Kube.from_kubeconfig(path)


# --- exec credential plugins ---------------------------------------------------------------------


def test_a_sync_through_an_exec_plugins_token_works_and_runs_the_plugin_once(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path) -> None:
    """`orksync sync --once` in its own process, authenticated by the plugin's token (a
    service account bound to cluster-admin): every request of the sync, from every thread,
    carries the one credential the plugin gave, sent by orksync's own transport (the
    audit log's User-Agent of every write)."""
    binding = admin.resource("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
    admin.create(binding, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"deployer-{sa_namespace}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": sa_namespace}]},
        field_manager="orksync-tests")
    plugin = Plugin(tmp_path)
    plugin.answers(token(sa_token(admin, sa_namespace, "deployer")))
    path = exec_kubeconfig(control_plane, tmp_path, plugin)
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w.yaml": widget("w", ns, image="nginx", replicas=1, port=8080)})
    try:
        done = subprocess.run([sys.executable, "-m", "orksync", "sync", str(repo), "--once",
                               "--kubeconfig", str(path), "--name", f"exec-{ns}"],
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        assert "failed=0" in done.stderr.splitlines()[-1], done.stderr
        deployment = admin.get(admin.resource("apps/v1", "Deployment"), ns, "w")
        assert deployment["spec"]["replicas"] == 1
        # every write of the sync went through orksync's own transport (its User-Agent)
        assert user_agents(control_plane, account(sa_namespace, "deployer"), containing=ns) == \
            {f"orksync/{__version__}"}
        assert plugin.runs == 1
        assert plugin.seen()["env"]["KUBERNETES_EXEC_INFO"]
    finally:
        admin.delete(binding, "", f"deployer-{sa_namespace}")


def test_an_expiring_credential_is_renewed_before_it_expires(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    expiry = datetime.now(UTC) + timedelta(hours=1)
    plugin = Plugin(tmp_path)
    plugin.answers(token(sa_token(admin, sa_namespace, "early"),
                         expiry.isoformat().replace("+00:00", "Z")),
                   token(sa_token(admin, sa_namespace, "later")))
    now = [expiry.timestamp() - 600]
    monkeypatch.setattr(credentials, "WALL_CLOCK", lambda: now[0])
    kube = connect(exec_kubeconfig(control_plane, tmp_path, plugin))
    try:
        assert whoami(kube) == account(sa_namespace, "early")
        assert whoami(kube) == account(sa_namespace, "early")
        assert plugin.runs == 1
        now[0] = expiry.timestamp()  # the credential has expired: never sent again
        assert whoami(kube) == account(sa_namespace, "later")
        assert plugin.runs == 2
        assert kube.retries == 0
    finally:
        kube.close()


def test_a_credential_the_server_refuses_is_renewed_once_and_the_request_sent_again(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path) -> None:
    """The first token was revoked (its ServiceAccount deleted): the request that got the
    401 runs the plugin again and succeeds with the new token; a plugin that only ever
    gives refused tokens costs a request one renewal, then its 401 is the error."""
    revoked = sa_token(admin, sa_namespace, "revoked")
    admin.delete(admin.resource("v1", "ServiceAccount"), sa_namespace, "revoked")
    plugin = Plugin(tmp_path)
    plugin.answers(token(revoked), token(sa_token(admin, sa_namespace, "fresh")))
    kube = connect(exec_kubeconfig(control_plane, tmp_path, plugin))
    try:
        assert whoami(kube) == account(sa_namespace, "fresh")
        assert (plugin.runs, kube.requests, kube.retries) == (2, 2, 0)
    finally:
        kube.close()

    stubborn = Plugin(tmp_path / "stubborn")
    stubborn.answers(token(revoked))
    kube = connect(exec_kubeconfig(control_plane, tmp_path / "stubborn", stubborn))
    try:
        with pytest.raises(ClusterError) as err:
            whoami(kube)
        assert err.value.status == 401
        assert revoked not in str(err.value)
        assert (stubborn.runs, kube.requests) == (2, 2)
    finally:
        kube.close()


def test_a_failing_plugin_stops_the_request_with_a_clear_error_and_no_secret(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path) -> None:
    secret = sa_token(admin, sa_namespace, "hidden")
    plugin = Plugin(tmp_path)
    plugin.answers({"exit": 1, "stderr": "error: you must be logged in to the server\n",
                    "raw": secret})
    path = exec_kubeconfig(control_plane, tmp_path, plugin)
    kube = connect(path)
    try:
        with pytest.raises(ClusterError) as err:
            whoami(kube)
    finally:
        kube.close()
    text = str(err.value)
    assert text == (f"{path}: user 'orksync-local': exec credential plugin "
                    f"'{sys.executable}' failed (exit status 1); it said: error: you must be "
                    "logged in to the server")
    assert secret not in text
    assert kube.requests == 0  # nothing was sent without a credential


def test_an_exec_plugins_client_certificate_authenticates_and_gives_way_to_its_token(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin answering with the admin's certificate and key: the connections carry it
    in their TLS handshake; once it expires and the plugin answers with a token, new
    connections carry no certificate (the old ones are closed)."""
    expiry = datetime.now(UTC) + timedelta(hours=1)
    plugin = Plugin(tmp_path)
    plugin.answers({"output": {"apiVersion": V1, "kind": "ExecCredential", "status": {
        "clientCertificateData": control_plane.admin_cert_pem.decode(),
        "clientKeyData": control_plane.admin_key_pem.decode(),
        "expirationTimestamp": expiry.isoformat()}}},
        token(sa_token(admin, sa_namespace, "after-cert")))
    now = [expiry.timestamp() - 600]
    monkeypatch.setattr(credentials, "WALL_CLOCK", lambda: now[0])
    user = {"exec": plugin.exec_section()}
    path = write(tmp_path / "config", document(control_plane, user=user))
    kube = connect(path)
    try:
        assert whoami(kube) == ADMIN
        now[0] = expiry.timestamp()
        assert whoami(kube) == account(sa_namespace, "after-cert")
        assert plugin.runs == 2
    finally:
        kube.close()


def test_impersonation_headers_make_the_admin_act_as_another_user(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    doc = document(control_plane)
    doc["users"][0]["user"].update({"as": "jane", "as-groups": ["team-a", "system:authenticated"]})
    kube = connect(write(tmp_path / "config", doc))
    try:
        review = kube.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                              body={"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "SelfSubjectReview"})
    finally:
        kube.close()
    info = review["status"]["userInfo"]
    assert (info["username"], info["groups"]) == ("jane", ["team-a", "system:authenticated"])


# --- auth-provider ------------------------------------------------------------------------------


def test_an_oidc_auth_providers_id_token_is_sent_by_the_own_transport(
        control_plane: ControlPlane, admin: Kube, sa_namespace: str, tmp_path: Path) -> None:
    """A service-account token is a JWT that has not expired: the `kubernetes` package's
    loader takes it for an oidc id-token, and the API server accepts it from orksync's own
    transport."""
    path = write(tmp_path / "config", document(control_plane, user={"auth-provider": {
        "name": "oidc", "config": {"id-token": sa_token(admin, sa_namespace, "oidc"),
                                   "client-id": "orksync",
                                   "idp-issuer-url": "https://idp.example"}}}))
    kube = connect(path)
    try:
        assert whoami(kube) == account(sa_namespace, "oidc")
    finally:
        kube.close()
    assert user_agents(control_plane, account(sa_namespace, "oidc")) == {f"orksync/{__version__}"}


# --- proxies ------------------------------------------------------------------------------------


class ConnectProxy(socketserver.ThreadingTCPServer):
    """An HTTP CONNECT proxy for the tests: every tunnel, whatever host it names, leads to
    `upstream`; it records each CONNECT target and, with `password`, refuses (407) a
    tunnel without Basic `user:password`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: tuple[str, int], password: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Tunnel)
        self.upstream = upstream
        self.password = password
        self.targets: list[str] = []
        self.refused = 0
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Tunnel(socketserver.BaseRequestHandler):
    server: ConnectProxy

    def handle(self) -> None:
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = dict(line.split(": ", 1) for line in lines[1:])
        expected = self.server.password and "Basic " + base64.b64encode(
            f"ann:{self.server.password}".encode()).decode()
        if method != "CONNECT" or (expected and headers.get("Proxy-Authorization")
                                   != expected):
            self.server.refused += 1
            client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                           b"Content-Length: 0\r\n\r\n")
            return
        self.server.targets.append(target)
        upstream = socket.create_connection(self.server.upstream)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        ends = [client, upstream]
        try:
            while True:
                ready, _, _ = select.select(ends, [], [], 60)
                if not ready:
                    return
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        return
                    (upstream if end is client else client).sendall(data)
        except OSError:
            return
        finally:
            upstream.close()


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[ConnectProxy]:
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    server = ConnectProxy((host, int(port)), password="pr0xy-pw")
    yield server
    server.stop()


def test_a_proxy_url_sends_every_connection_through_a_connect_tunnel(
        control_plane: ControlPlane, proxy: ConnectProxy, tmp_path: Path) -> None:
    authority = control_plane.server.removeprefix("https://")
    url = proxy.url.replace("http://", "http://ann:pr0xy-pw@")
    path = write(tmp_path / "config", document(control_plane, cluster={
        "certificate-authority-data": b64(control_plane.ca_pem), "proxy-url": url}))
    kube = connect(path)
    try:
        assert whoami(kube) == ADMIN
        kube.request("GET", "/version")
    finally:
        kube.close()
    assert proxy.targets and set(proxy.targets) == {authority}
    assert proxy.refused == 0

    wrong = write(tmp_path / "wrong", document(control_plane, cluster={
        "certificate-authority-data": b64(control_plane.ca_pem),
        "proxy-url": proxy.url.replace("http://", "http://ann:not-the-pw@")}))
    kube = connect(wrong)
    kube.retry = NO_RETRY
    with pytest.raises(ClusterError) as err:
        whoami(kube)
    text = str(err.value)
    assert f"no tunnel to {authority} through the proxy {proxy.url}: the proxy refused the " \
        "tunnel: 407 Proxy Authentication Required" in text
    assert "not-the-pw" not in text and proxy.refused == 1


def test_https_proxy_in_the_environment_carries_a_server_the_client_cannot_resolve(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server is named `kubernetes.default.svc` (in the API server's certificate, not
    in any DNS here): only the proxy, which leads every tunnel to the control plane, can
    reach it, so a successful request went through the proxy."""
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    server = ConnectProxy((host, int(port)))
    try:
        doc: dict[str, Any] = document(control_plane, cluster={
            "certificate-authority-data": b64(control_plane.ca_pem)})
        doc["clusters"][0]["cluster"]["server"] = f"https://kubernetes.default.svc:{port}"
        path = write(tmp_path / "config", doc)
        monkeypatch.setenv("HTTPS_PROXY", server.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,.example")
        kube = connect(path)
        try:
            assert whoami(kube) == ADMIN
        finally:
            kube.close()
        assert set(server.targets) == {f"kubernetes.default.svc:{port}"}
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,default.svc")
        assert kubeconfig.load_kubeconfig(path).proxy is None
    finally:
        server.stop()
