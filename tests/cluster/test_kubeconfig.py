"""orksync.cluster.kubeconfig without a cluster: which files and entries are read (client-go's
merge rules), the credential and proxy settings, and the errors for a kubeconfig
that cannot be used (naming the file and field, never a key or token). Connecting with
each kind of credential is tests/cluster/test_kubeconfig_cluster.py."""

from __future__ import annotations

import base64
import http.server
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from orksync.cluster import credentials, kubeconfig
from orksync.cluster.kube import Kube, Resource
from orksync.cluster.kubeconfig import Credentials, load_kubeconfig
from orksync.errors import ClusterError
from orksync.secrets import pki


def config(*, current: str | None = "main", clusters: dict[str, dict[str, Any]] | None = None,
           users: dict[str, dict[str, Any]] | None = None,
           contexts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in (clusters or {}).items()],
        "users": [{"name": k, "user": v} for k, v in (users or {}).items()],
        "contexts": [{"name": k, "context": v} for k, v in (contexts or {}).items()],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def simple(server: str = "http://127.0.0.1:1", **user: Any) -> dict[str, Any]:
    return config(clusters={"c": {"server": server}}, users={"u": user},
                  contexts={"main": {"cluster": "c", "user": "u"}})


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def load(path: Path | None = None, context: str | None = None, **env: str
         ) -> kubeconfig.Connection:
    return load_kubeconfig(path, context, environ=env)


def failure(path: Path | None = None, context: str | None = None, **env: str) -> str:
    with pytest.raises(ClusterError) as err:
        load(path, context, **env)
    return str(err.value)


# --- which file, which entries ----------------------------------------------------------------


def test_kubeconfig_files_merge_with_client_go_rules_first_file_wins(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "config", config(
        current=None,
        clusters={"shared": {"server": "http://first:1"}},
        contexts={"main": {"cluster": "shared"}, "other": {"cluster": "only-second"}}))
    second = write(tmp_path / "b" / "config", config(
        current="other",
        clusters={"shared": {"server": "http://second:1"},
                  "only-second": {"server": "http://second-only:1"}},
        contexts={"other": {"cluster": "shared"}}))
    third = write(tmp_path / "c" / "config", config(current="main"))
    listed = os.pathsep.join([str(tmp_path / "missing"), str(first), str(second), str(third)])

    # current-context: the first file that sets one (the second); context `other`: from
    # the first file, which names a cluster only the second file defines
    assert load(KUBECONFIG=listed).server == "http://second-only:1"
    # a map entry defined twice: the first file's
    assert load(context="main", KUBECONFIG=listed).server == "http://first:1"
    # the explicit path is the one file read, KUBECONFIG aside
    assert load(second, KUBECONFIG=listed).server == "http://second:1"


def test_an_empty_file_in_kubeconfig_is_skipped(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty", "\n")
    real = write(tmp_path / "real", simple("http://real:1/"))
    conn = load(KUBECONFIG=f"{empty}{os.pathsep}{real}")
    assert conn.server == "http://real:1"  # trailing slash dropped
    # a file listed twice is read once, as client-go reads it
    assert load(KUBECONFIG=os.pathsep.join([str(real), str(empty), str(real)])).server == \
        "http://real:1"


def test_yaml_kubeconfigs_are_read_with_yaml_1_1_booleans_like_kubectl(tmp_path: Path) -> None:
    path = write(tmp_path / "config", """
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: yes}
contexts:
- {name: main, context: {cluster: c}}
current-context: main
""")
    conn = load(path)
    assert conn.verify is False
    assert conn.credentials.authorization() is None


# --- exec, auth-provider, impersonation, proxies, unknown fields --------------------------------


def test_exec_auth_provider_and_impersonation_are_read_without_running_anything(
        tmp_path: Path) -> None:
    """An exec plugin runs when a request needs its credential, not when the kubeconfig is
    read; impersonation becomes headers; an auth-provider's token comes from the
    `kubernetes` package's loader (an oidc id-token that is a JWT and has not expired)."""
    plugin = {"exec": {"command": "./bin/get-token", "args": ["--a"],
                       "apiVersion": "client.authentication.k8s.io/v1",
                       "interactiveMode": "Never", "env": [{"name": "K", "value": "v"}]}}
    conn = load(write(tmp_path / "cfg" / "config", simple(**plugin)))
    assert isinstance(conn.credentials, credentials.ExecCredentials)
    assert conn.credentials.runs == 0
    assert conn.credentials.plugin.command == str(tmp_path / "cfg" / "bin" / "get-token")
    assert conn.credentials.plugin.env == (("K", "v"),)

    impersonating = simple(token="t", **{"as": "jane", "as-groups": ["a", "b"],
                                         "as-user-extra": {"scope/x": ["1"]}})
    assert load(write(tmp_path / "as", impersonating)).headers == (
        ("Impersonate-User", "jane"), ("Impersonate-Group", "a"), ("Impersonate-Group", "b"),
        ("Impersonate-Extra-scope%2Fx", "1"))

    claims = base64.urlsafe_b64encode(json.dumps({
        "exp": int(datetime.now(UTC).timestamp()) + 3600}).encode()).decode().rstrip("=")
    id_token = f"eyJhbGciOiJub25lIn0.{claims}.c2ln"
    oidc = simple(**{"auth-provider": {"name": "oidc", "config": {
        "id-token": id_token, "client-id": "orksync", "idp-issuer-url": "https://idp"}}})
    conn = load(write(tmp_path / "oidc", oidc))
    assert conn.credentials.authorization() == f"Bearer {id_token}"


@pytest.mark.parametrize(("user", "message"), [
    ({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}},
     "users[0].user.exec.interactiveMode: missing (required by "
     "client.authentication.k8s.io/v1"),
    ({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1beta1",
               "interactiveMode": "Always"}},
     "users[0].user.exec.interactiveMode: Always: the plugin needs a terminal"),
    ({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}},
     "users[0].user.exec.apiVersion: must be one of"),
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1"}},
     "users[0].user.exec.command: missing"),
    ({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1beta1"},
      "token": "t"}, "users[0].user: sets both exec and token"),
    ({"auth-provider": {"name": "azure", "config": {}}},
     "users[0].user.auth-provider.name: the azure auth-provider is not supported"),
    ({"auth-provider": {"name": "oidc", "config": {"id-token": "not-a-jwt"}}},
     "user 'u': auth-provider 'oidc': the kubernetes package produced no token"),
    ({"as-groups": ["g"]}, "users[0].user: as-uid, as-groups or as-user-extra without `as`"),
])
def test_a_credential_setting_that_cannot_be_used_names_file_and_field(
        tmp_path: Path, user: dict[str, Any], message: str) -> None:
    path = write(tmp_path / "config", simple(**user))
    text = failure(path)
    assert text.startswith(f"{path}: "), text
    assert message in text, text


def test_an_unknown_field_is_ignored_with_a_warning_as_kubectl_ignores_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path / "config", simple(token="t", **{"future-auth-field": "x"}))
    assert load(path).credentials.authorization() == "Bearer t"
    assert f"{path}: user 'u' (users[0].user) sets future-auth-field, which orksync does " \
        "not know; ignored" in caplog.text


def test_proxy_url_and_the_proxy_environment_choose_the_proxy_as_kubectl_does(
        tmp_path: Path) -> None:
    doc = simple("https://api.example:6443")
    doc["clusters"][0]["cluster"]["proxy-url"] = "http://ann:s3cret@proxy:3128"
    proxied = load(write(tmp_path / "proxied", doc)).proxy
    assert proxied is not None
    assert (proxied.host, proxied.port, proxied.shown) == ("proxy", 3128, "http://proxy:3128")
    assert proxied.authorization == "Basic " + base64.b64encode(b"ann:s3cret").decode()
    assert "s3cret" not in repr(proxied)

    plain = write(tmp_path / "plain", simple("https://api.example:6443"))
    assert load(plain).proxy is None
    from_env = load(plain, HTTPS_PROXY="proxy.corp:8080", HTTP_PROXY="http://other:1").proxy
    assert from_env is not None and from_env.shown == "http://proxy.corp:8080"
    assert load(plain, https_proxy="http://p:1", NO_PROXY=".corp,api.example").proxy is None
    # the cluster's proxy-url wins over the environment
    assert load(write(tmp_path / "both", doc), HTTPS_PROXY="http://p:1").proxy == proxied
    # loopback is never sent to a proxy from the environment (in a pod either)
    assert load(write(tmp_path / "local", simple("https://127.0.0.1:6443")),
                HTTPS_PROXY="http://p:1").proxy is None

    doc["clusters"][0]["cluster"]["proxy-url"] = "socks5://ann:s3cret@proxy:1080"
    text = failure(write(tmp_path / "socks", doc))
    assert "clusters[0].cluster.proxy-url: socks5:// proxies are not supported" in text
    assert "s3cret" not in text


def test_settings_of_users_and_clusters_not_chosen_do_not_matter(tmp_path: Path) -> None:
    doc = simple(token="t")
    doc["users"].append({"name": "cloud", "user": {"exec": {"command": "x"}}})  # no apiVersion
    doc["clusters"].append({"name": "far", "cluster": {"server": "https://x",
                                                       "proxy-url": "socks5://p"}})
    conn = load(write(tmp_path / "config", doc))
    assert conn.credentials.authorization() == "Bearer t"


# --- credentials -----------------------------------------------------------------------------


def test_a_token_file_is_read_again_once_a_minute_and_kept_when_unreadable(
        tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    now = [1000.0]
    creds = Credentials(token_file=token, clock=lambda: now[0])
    assert creds.authorization() == "Bearer first"
    token.write_text("second")
    now[0] += 59
    assert creds.authorization() == "Bearer first"
    now[0] += 1
    assert creds.authorization() == "Bearer second"
    token.unlink()  # mid-rotation
    now[0] += 61
    assert creds.authorization() == "Bearer second"


def test_token_file_wins_over_token_and_relative_paths_follow_the_kubeconfig(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "cfg" / "secrets" / "token", "from-file\n")
    path = write(tmp_path / "cfg" / "config", simple(token="inline", tokenFile="secrets/token"))
    monkeypatch.chdir(tmp_path)
    assert load(path).credentials.authorization() == "Bearer from-file"


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers `{}` and keeps each request's Authorization header (kube-apiserver has no
    basic authentication any more: it ignores the header, so it cannot tell)."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_basic_authentication_is_sent_over_plain_http(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        path = write(tmp_path / "config", simple(url, username="ann", password="pw:x"))
        kube = Kube(connection=load(path))
        assert kube.request("GET", "/version") == {}
        kube.close()
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.seen == ["Basic " + base64.b64encode(b"ann:pw:x").decode()]


class _Paths(http.server.BaseHTTPRequestHandler):
    """Keeps each request's method, target and body; answers `{}`, or a redirect for a
    target under /moved (which a client must not follow)."""

    seen: ClassVar[list[tuple[str, str, bytes]]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append((self.command, self.path, self.rfile.read(length)))
        moved = self.path.endswith("/moved")
        self.send_response(307 if moved else 200)
        if moved:
            self.send_header("Location", "/elsewhere")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_PATCH = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_requests_go_under_the_server_urls_path_encoded_and_never_redirected(
        tmp_path: Path) -> None:
    """A server URL with a path (a proxy's, e.g. Rancher's /k8s/clusters/ID) prefixes every
    request; names and query values are percent-encoded; a redirect is an answer, not
    followed; a Kube still sends after `close` (on new connections)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Paths)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Paths.seen.clear()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/k8s/clusters/c-1/"
        kube = Kube(connection=load(write(tmp_path / "config", simple(url))))
        assert kube.request("GET", "/api/v1/namespaces",
                            query={"labelSelector": "a in (b,c)", "limit": 5}) == {}
        assert kube.request_with_status("PATCH", "/api/v1/x", body={"k": "v é"},
                                        content_type="application/apply-patch+yaml"
                                        ) == (200, {})
        with pytest.raises(ClusterError) as err:
            kube.request("GET", "/moved")
        assert err.value.status == 307
        kube.close()
        assert kube.request("GET", "/version") == {}
        kube.close()
    finally:
        server.shutdown()
        server.server_close()
    assert _Paths.seen == [
        ("GET", "/k8s/clusters/c-1/api/v1/namespaces?labelSelector=a+in+%28b%2Cc%29&limit=5",
         b""),
        ("PATCH", "/k8s/clusters/c-1/api/v1/x", '{"k":"v é"}'.encode()),  # UTF-8, not escaped
        ("GET", "/k8s/clusters/c-1/moved", b""),
        ("GET", "/k8s/clusters/c-1/version", b"")]


def test_an_http_server_behind_a_proxy_gets_requests_in_absolute_form(
        tmp_path: Path) -> None:
    """No tunnel to a plain-HTTP server: each request goes to the proxy naming the whole
    URL, as Go's client sends it (the recording server stands in for the proxy)."""
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Paths)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    _Paths.seen.clear()
    doc = simple("http://api.example:8080/prefix")
    doc["clusters"][0]["cluster"]["proxy-url"] = f"http://127.0.0.1:{proxy.server_address[1]}"
    try:
        kube = Kube(connection=load(write(tmp_path / "config", doc)))
        assert kube.request("GET", "/version") == {}
        kube.close()
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert _Paths.seen == [("GET", "http://api.example:8080/prefix/version", b"")]


def test_an_apply_sends_its_field_manager_force_dry_run_and_validation(
        tmp_path: Path) -> None:
    """Every combination of the options of a server-side apply, as the query string says
    them (it is encoded once per combination), the body as compact JSON."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Paths)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Paths.seen.clear()
    res = Resource(group="", version="v1", kind="ConfigMap", plural="configmaps",
                   namespaced=True)
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a b", "namespace": "ns"}, "data": {"k": "v"}}
    try:
        kube = Kube(connection=load(write(tmp_path / "config",
                                          simple(f"http://127.0.0.1:{server.server_address[1]}"))))
        for manager, force, dry_run in (("orksync", True, False), ("orksync", False, True),
                                        ("other/x", True, True), ("orksync", True, False)):
            assert kube.apply(res, body, field_manager=manager, force=force,
                              dry_run=dry_run) == (False, {})
        kube.close()
    finally:
        server.shutdown()
        server.server_close()
    target = "/api/v1/namespaces/ns/configmaps/a%20b?fieldManager="
    compact = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a b","namespace"' \
              b':"ns"},"data":{"k":"v"}}'
    assert _Paths.seen == [
        ("PATCH", target + "orksync&force=true&fieldValidation=Ignore", compact),
        ("PATCH", target + "orksync&force=false&dryRun=All&fieldValidation=Ignore", compact),
        ("PATCH", target + "other%2Fx&force=true&dryRun=All&fieldValidation=Ignore", compact),
        ("PATCH", target + "orksync&force=true&fieldValidation=Ignore", compact)]


# --- kubeconfigs that cannot be used ------------------------------------------------------------


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    assert f"{tmp_path / 'nope'}: the kubeconfig file does not exist" in \
        failure(tmp_path / "nope")
    listed = f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"
    assert "none of the files in KUBECONFIG exists" in failure(KUBECONFIG=listed)


@pytest.mark.parametrize(("doc", "message"), [
    ("clusters: [\n  - name: c\n   bad", "invalid YAML (line "),
    ("- just a list", "not a kubeconfig"),
    ({"clusters": "abc", "current-context": "main"}, "clusters: not a list"),
    (config(clusters={"c": {}}, contexts={"main": {"cluster": "c"}}),
     "clusters[0].cluster.server: missing"),
    (config(clusters={"c": {"server": "ftp://x"}}, contexts={"main": {"cluster": "c"}}),
     "clusters[0].cluster.server: not an https:// or http:// URL"),
    (config(contexts={"main": {"cluster": "gone"}}),
     "contexts[0].context.cluster: cluster 'gone' is not defined"),
    (config(clusters={"c": {"server": "http://x"}},
            contexts={"main": {"cluster": "c", "user": "gone"}}),
     "contexts[0].context.user: user 'gone' is not defined"),
    (config(current="elsewhere"), "context 'elsewhere' (current-context of "),
    (config(current=None), "no current-context is set"),
    (config(clusters={"c": {"server": "https://x", "insecure-skip-tls-verify": "no"}},
            contexts={"main": {"cluster": "c"}}),
     "clusters[0].cluster.insecure-skip-tls-verify: not true or false"),
    (config(clusters={"c": {"server": "https://x", "certificate-authority": "ca.pem"}},
            contexts={"main": {"cluster": "c"}}),
     "clusters[0].cluster.certificate-authority: file "),
])
def test_a_kubeconfig_that_cannot_be_used_names_file_and_field(
        tmp_path: Path, doc: dict[str, Any] | str, message: str) -> None:
    path = write(tmp_path / "config", doc)
    text = failure(path)
    assert text.startswith(f"{path}:") or str(path) in text, text
    assert message in text


def test_a_duplicate_name_in_one_file_is_refused(tmp_path: Path) -> None:
    doc = simple()
    doc["clusters"].append({"name": "c", "cluster": {"server": "http://other"}})
    assert "clusters[1].name: 'c' is defined twice in clusters" in \
        failure(write(tmp_path / "config", doc))


def test_bad_key_material_is_named_by_field_and_never_shown(tmp_path: Path) -> None:
    secret = "TOP-SECRET-KEY-MATERIAL"
    garbage = base64.b64encode(secret.encode()).decode()
    cases = {
        "users[0].user.client-key-data: not valid base64": {
            "client-certificate-data": "bm90IGJhc2U2NA==", "client-key-data": secret + "!!"},
        "users[0].user: cannot use the client certificate and key: [SSL] PEM lib": {
            "client-certificate-data": garbage, "client-key-data": garbage},
    }
    for i, (message, user) in enumerate(cases.items()):
        doc = simple("https://127.0.0.1:1", **user)
        text = failure(write(tmp_path / f"{i}.config", doc))
        assert message in text and secret not in text and garbage not in text, text
    only_cert = simple("https://127.0.0.1:1", **{"client-certificate-data": "eA=="})
    assert "users[0].user.client-key: missing" in failure(write(tmp_path / "c", only_cert))


def test_not_in_a_cluster(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="not running in a cluster"):
        kubeconfig.in_cluster(environ={}, directory=tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ClusterError, match="no service-account CA"):
        kubeconfig.in_cluster(environ=env, directory=tmp_path)
    ca = pki.create_ca(common_name="ca", now=datetime.now(UTC), validity=timedelta(days=1))
    (tmp_path / "ca.crt").write_bytes(ca.certificate.pem)
    (tmp_path / "token").write_text("\n")
    with pytest.raises(ClusterError, match=f"{tmp_path / 'token'}: cannot read the token: empty"):
        kubeconfig.in_cluster(environ=env, directory=tmp_path)
    (tmp_path / "token").write_text("t0ken\n")
    conn = kubeconfig.in_cluster(environ={**env, "KUBERNETES_SERVICE_HOST": "fd00::1"},
                                 directory=tmp_path)
    assert (conn.server, conn.credentials.authorization()) == ("https://[fd00::1]:443",
                                                               "Bearer t0ken")
