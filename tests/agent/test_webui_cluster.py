"""The agent's web view (/ui/) served by a real agent process against the real control
plane: who may see what is decided by the cluster (TokenReview, SubjectAccessReview) for
ServiceAccount tokens made with the TokenRequest API; a real browser (headless Chromium,
driven over the DevTools protocol) logs in, finds a custom resource and its tree, sees a
hand edit's repair arrive without reloading, and leaves screenshots."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon
from tests.agent.test_agent_cluster import AgentProcess, commit
from tests.cluster_fixtures import FIELD_MANAGER
from tests.helpers import CRD, katalog, unavailable, wait_for, widget, write_repo

pytestmark = pytest.mark.cluster

BOX = """\
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              reconcile: true
          services:
            - name: "{{ .metadata.name }}-svc"
              port: "80"
          secrets:
            - name: "{{ .metadata.name }}-db"
              once: true
              data:
                password: "{{ randomAlphanumeric 32 }}"
"""
WIDGETS = "widgets.test.orksync.io"


@dataclass
class View:
    kube: Kube
    agent: AgentProcess
    ns_a: str
    ns_b: str
    tokens: dict[str, str]  # who -> a ServiceAccount token
    secret_values: list[str]

    def get(self, path: str, token: str | None = None, headers: dict[str, str] | None = None
            ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.agent.port, timeout=30)
        try:
            sent = dict(headers or {})
            if token is not None:
                sent["Authorization"] = f"Bearer {token}"
            conn.request("GET", path, headers=sent)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, \
                resp.read().decode()
        finally:
            conn.close()

    def post(self, path: str, body: str, headers: dict[str, str]
             ) -> tuple[int, list[tuple[str, str]], str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.agent.port, timeout=30)
        try:
            conn.request("POST", path, body=body.encode(), headers={
                "Content-Type": "application/x-www-form-urlencoded", **headers})
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read().decode()
        finally:
            conn.close()


def _create(kube: Kube, body: dict[str, Any]) -> None:
    res = kube.resource(body["apiVersion"], body["kind"])
    kube.create(res, body, field_manager=FIELD_MANAGER)


def _token(kube: Kube, namespace: str, name: str) -> str:
    answer = kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})
    return str(answer["status"]["token"])


def _service_account(kube: Kube, namespace: str, name: str, *,
                     rules: list[dict[str, Any]] | None = None,
                     cluster_role: str | None = None) -> str:
    """A ServiceAccount in `namespace` allowed `rules` there (a Role), or bound to
    `cluster_role` cluster-wide; its token."""
    _create(kube, {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": name, "namespace": namespace}})
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    if rules is not None:
        _create(kube, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": name, "namespace": namespace}, "rules": rules})
        _create(kube, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": name, "namespace": namespace},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                   "name": name}, "subjects": subject})
    if cluster_role is not None:
        binding = f"{namespace}-{name}"
        _create(kube, {"apiVersion": "rbac.authorization.k8s.io/v1",
                       "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                   "kind": "ClusterRole", "name": cluster_role},
                       "subjects": subject})
    return _token(kube, namespace, name)


TENANT_RULES = [
    {"apiGroups": ["test.orksync.io"], "resources": ["widgets"], "verbs": ["get", "list"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["services", "secrets", "events"],
     "verbs": ["get", "list"]},
]


@pytest.fixture(scope="module")
def view(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory,
         sa_namespace: str) -> Iterator[View]:
    """One agent with the web view over Widgets in two tenants' namespaces (A: `shop`,
    `cart`; B: `ledger`), and tokens: tenant A's, tenant B's, an operator's (cluster-admin)
    and one allowed nothing (these two in a namespace of their own)."""
    tmp = tmp_path_factory.mktemp("webui")
    repo = tmp / "served" / "platform"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    ns_a, ns_b = f"t-a-{uuid.uuid4().hex[:6]}", f"t-b-{uuid.uuid4().hex[:6]}"
    write_repo(repo, {"katalog.yaml": katalog(BOX), "crd.yaml": CRD,
                      "shop.yaml": widget("shop", ns_a, image="nginx"),
                      "cart.yaml": widget("cart", ns_a, image="nginx"),
                      "ledger.yaml": widget("ledger", ns_b, image="nginx")})
    commit(repo, "first")
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    with GitDaemon(tmp / "served") as daemon:
        agent = AgentProcess(control_plane, daemon.url("platform"), tmp / "state",
                             name=f"ui-{uuid.uuid4().hex[:6]}")
        try:
            secrets = kube.resource("v1", "Secret")
            for ns, name in ((ns_a, "shop"), (ns_a, "cart"), (ns_b, "ledger")):
                wait_for(f"{name}'s Secret", lambda ns=ns, name=name:
                         kube.get_or_none(secrets, ns, f"{name}-db") is not None)
            import base64
            values = [base64.b64decode(kube.get(secrets, ns, f"{n}-db")["data"]["password"]
                                       ).decode()
                      for ns, n in ((ns_a, "shop"), (ns_a, "cart"), (ns_b, "ledger"))]
            tokens = {
                "a": _service_account(kube, ns_a, "viewer", rules=TENANT_RULES),
                "b": _service_account(kube, ns_b, "viewer", rules=TENANT_RULES),
                "operator": _service_account(kube, sa_namespace, "operator",
                                             cluster_role="cluster-admin"),
                "nobody": _service_account(kube, sa_namespace, "nobody"),
            }
            yield View(kube, agent, ns_a, ns_b, tokens, values)
        finally:
            assert agent.stop() == 0
            kube.close()


def _assert_no_secret(view: View, text: str) -> None:
    for value in view.secret_values:
        assert value not in text


def _tree_path(ns: str, name: str) -> str:
    return f"/ui/tree?kind=Widget.test.orksync.io&namespace={ns}&name={name}"


def test_no_token_gets_the_login_page_with_401(view: View) -> None:
    for path in ("/ui/", _tree_path(view.ns_a, "shop"), "/ui/events"):
        status, headers, body = view.get(path)
        assert status == 401, path
        assert headers["www-authenticate"].startswith("Bearer")
        assert 'name="token"' in body  # the login form
        assert view.ns_a not in body
    status, _, body = view.get("/ui/", token="not-a-token")
    assert status == 401
    assert "not accepted" in body


def test_a_tenant_sees_its_namespace_and_nothing_of_the_other(view: View) -> None:
    status, _, page_a = view.get("/ui/", token=view.tokens["a"])
    assert status == 200
    assert f"Widget.test.orksync.io/{view.ns_a}/shop" in page_a
    assert f"Widget.test.orksync.io/{view.ns_a}/cart" in page_a
    assert view.ns_b not in page_a and "ledger" not in page_a
    # the sync root (its inventory ConfigMap is not theirs to read) and its history are not
    assert "No sync root you may read" in page_a
    assert "Last syncs of" not in page_a

    status, _, page_b = view.get("/ui/", token=view.tokens["b"])
    assert status == 200
    assert f"Widget.test.orksync.io/{view.ns_b}/ledger" in page_b
    assert view.ns_a not in page_b and "shop" not in page_b and "cart" not in page_b
    # another tenant's tree is as absent as one that does not exist
    status, _, tree = view.get(_tree_path(view.ns_a, "shop"), token=view.tokens["b"])
    assert status == 404
    assert view.ns_a in tree  # the page names what was asked for, nothing more
    assert "Deployment" not in tree

    status, _, tree = view.get(_tree_path(view.ns_a, "shop"), token=view.tokens["a"])
    assert status == 200
    assert f"Deployment/{view.ns_a}/shop" in tree
    assert f"Service/{view.ns_a}/shop-svc" in tree
    assert f"Secret/{view.ns_a}/shop-db" in tree
    for text in (page_a, page_b, tree):
        _assert_no_secret(view, text)


def test_a_token_that_may_read_nothing_sees_nothing(view: View) -> None:
    status, _, page = view.get("/ui/", token=view.tokens["nobody"])
    assert status == 200
    assert view.ns_a not in page and view.ns_b not in page
    assert "No sync root you may read" in page and "Nothing you may read" in page


def test_the_operator_sees_everything_but_never_a_secret_value(view: View) -> None:
    status, headers, page = view.get("/ui/", token=view.tokens["operator"])
    assert status == 200
    for ns, name in ((view.ns_a, "shop"), (view.ns_a, "cart"), (view.ns_b, "ledger")):
        assert f"Widget.test.orksync.io/{ns}/{name}" in page
    assert "Last syncs of" in page and "full" in page
    pages = [page]
    for ns, name in ((view.ns_a, "shop"), (view.ns_b, "ledger")):
        status, _, tree = view.get(_tree_path(ns, name), token=view.tokens["operator"])
        assert status == 200
        assert f"Secret/{ns}/{name}-db" in tree
        pages.append(tree)
    for text in pages:
        _assert_no_secret(view, text)
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page and " style=" not in page  # nothing inline


def _reviews_for(audit_log: Path, username: str) -> int:
    """The SubjectAccessReviews about `username` the API server received."""
    count = 0
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if (event.get("objectRef") or {}).get("resource") == "subjectaccessreviews" and \
                event.get("stage") == "ResponseComplete" and \
                ((event.get("requestObject") or {}).get("spec") or {}).get("user") == username:
            count += 1
    return count


def test_a_page_costs_a_bounded_number_of_reviews_and_a_reload_none(
        view: View, control_plane: ControlPlane, sa_namespace: str) -> None:
    from orksync.agent.ui.access import MAX_REVIEWS

    assert control_plane.audit_log is not None
    token = _service_account(view.kube, sa_namespace, "counted", cluster_role="cluster-admin")
    user = f"system:serviceaccount:{sa_namespace}:counted"
    status, _, page = view.get("/ui/", token=token)
    assert status == 200 and f"Widget.test.orksync.io/{view.ns_b}/ledger" in page
    first = _reviews_for(control_plane.audit_log, user)
    assert 0 < first <= MAX_REVIEWS
    status, _, _ = view.get("/ui/", token=token)
    status, _, _ = view.get(_tree_path(view.ns_a, "shop"), token=token)
    assert status == 200
    assert _reviews_for(control_plane.audit_log, user) == first  # answered from the cache


def test_the_login_refuses_cross_site_posts_and_sets_a_strict_cookie(view: View) -> None:
    status, _, page = view.get("/ui/login")
    assert status == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    cookie = f"orksync-ui-csrf={csrf}"
    host = f"127.0.0.1:{view.agent.port}"
    form = f"csrf={csrf}&token={view.tokens['a']}"
    # no double-submitted token; another origin; a cross-site fetch
    for headers_sent in ({"Origin": f"http://{host}"},
                         {"Origin": "http://evil.example", "Cookie": cookie},
                         {"Sec-Fetch-Site": "cross-site", "Cookie": cookie}):
        status, answer, _ = view.post("/ui/login", form, {"Host": host, **headers_sent})
        assert status == 403, headers_sent
        assert not [v for k, v in answer if k.lower() == "set-cookie"
                    and v.startswith("orksync-ui-token")]
    status, answer, _ = view.post("/ui/login", form, {
        "Host": host, "Origin": f"http://{host}", "Cookie": cookie})
    assert status == 303
    (set_cookie,) = [v for k, v in answer if k.lower() == "set-cookie"]
    assert set_cookie.startswith("orksync-ui-token=")
    for flag in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/ui/"):
        assert flag in set_cookie
    # a bad token is refused at the login, and sets nothing
    status, answer, body = view.post("/ui/login", f"csrf={csrf}&token=nope", {
        "Host": host, "Origin": f"http://{host}", "Cookie": cookie})
    assert status == 401 and "not accepted" in body
    assert not [v for k, v in answer if k.lower() == "set-cookie"
                and v.startswith("orksync-ui-token")]
    # the logout: the same checks, and the cookie is dropped
    status, answer, _ = view.post("/ui/logout", "csrf=wrong", {
        "Host": host, "Origin": f"http://{host}", "Cookie": cookie})
    assert status == 403
    status, answer, _ = view.post("/ui/logout", f"csrf={csrf}", {
        "Host": host, "Origin": f"http://{host}", "Cookie": cookie})
    assert status == 303
    (set_cookie,) = [v for k, v in answer if k.lower() == "set-cookie"]
    assert set_cookie.startswith("orksync-ui-token=;") and "Max-Age=0" in set_cookie
    # everything else is read-only
    status, _, _ = view.post("/ui/", "", {"Host": host, "Origin": f"http://{host}"})
    assert status == 405


def test_the_view_is_off_with_ui_false(control_plane: ControlPlane, tmp_path: Path) -> None:
    base = tmp_path / "served"
    repo = base / "platform"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    write_repo(repo, {"crd.yaml": CRD})
    commit(repo, "first")
    with GitDaemon(base) as daemon:
        agent = AgentProcess(control_plane, daemon.url("platform"), tmp_path / "state",
                             name=f"off-{uuid.uuid4().hex[:6]}", flags=["--ui=false"])
        try:
            wait_for("the agent to listen", lambda: _status(agent.port, "/healthz") == 200)
            assert _status(agent.port, "/ui/") == 404
            assert _status(agent.port, "/ui/login") == 404
        finally:
            agent.stop(signal.SIGKILL)


def _status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


# --- the browser -------------------------------------------------------------------------

class Browser:
    """Headless Chromium driven over the DevTools protocol (websocket-client)."""

    def __init__(self, binary: str, profile: Path) -> None:
        import websocket

        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        wait_for("Chromium's DevTools port", lambda: port_file.exists() and
                 len(port_file.read_text().splitlines()) >= 2, timeout=30)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [p for p in json.load(r) if p["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0
        self.console: list[str] = []
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.call("Log.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            if msg.get("method") == "Log.entryAdded":
                self.console.append(msg["params"]["entry"].get("text", ""))
            elif msg.get("method") == "Runtime.consoleAPICalled":
                self.console.append(json.dumps(msg["params"].get("args")))

    def eval(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return (answer.get("result") or {}).get("value")

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_loaded()

    def wait_loaded(self) -> None:
        wait_for("the page to load", lambda: self.eval("document.readyState") == "complete",
                 timeout=30)

    def dom(self) -> str:
        return str(self.eval("document.documentElement.outerHTML"))

    def screenshot(self, path: Path) -> Path:
        import base64

        data = self.call("Page.captureScreenshot", format="png",
                         captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        print(f"screenshot: {path}")
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    unavailable("Chromium is not installed (Debian: apt-get install chromium)")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    binary = _chromium()
    profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=tmp_path))
    b = Browser(binary, profile)
    try:
        yield b
    finally:
        b.close()


def test_a_browser_logs_in_finds_a_tree_and_sees_a_repair_live(
        view: View, browser: Browser, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{view.agent.port}"
    browser.navigate(f"{base}/ui/")
    assert browser.eval("document.querySelector('textarea[name=token]') !== null")
    browser.screenshot(tmp_path / "webui-login.png")
    browser.eval(f"document.querySelector('textarea[name=token]').value = "
                 f"{json.dumps(view.tokens['operator'])}; "
                 f"document.querySelector('main form').submit()")
    wait_for("the logged-in page", lambda: browser.eval(
        "document.querySelector('form.logout') !== null"), timeout=30)
    browser.wait_loaded()
    assert browser.eval("document.cookie") == ""  # the token cookie is HttpOnly
    dom = browser.dom()
    shop = f"Widget.test.orksync.io/{view.ns_a}/shop"
    assert shop in dom and f"Widget.test.orksync.io/{view.ns_b}/ledger" in dom
    _assert_no_secret(view, dom)

    # the live stream is open: a hand edit, repaired by the agent, shows up without a reload
    wait_for("the live stream", lambda: browser.eval(
        "document.getElementById('live').textContent").startswith("live"), timeout=30)
    browser.eval("window.notReloaded = true")
    deployments = view.kube.resource("apps/v1", "Deployment")
    view.kube.delete(deployments, view.ns_a, "cart")
    repaired = f"Deployment/{view.ns_a}/cart"
    drift = "[...document.querySelectorAll('section.drift li')].map(li => li.textContent)"
    assert not browser.eval(drift)
    wait_for("the repair to appear in the page", lambda: any(
        repaired in item for item in browser.eval(drift) or ()), timeout=60)
    assert browser.eval("window.notReloaded") is True
    browser.screenshot(tmp_path / "webui-index.png")

    # the custom resource's tree, by its link
    browser.eval(f"[...document.querySelectorAll('a')].find(a => a.textContent === "
                 f"{json.dumps(shop)}).click()")
    wait_for("the tree", lambda: browser.eval("location.pathname") == "/ui/tree", timeout=30)
    browser.wait_loaded()
    dom = browser.dom()
    for child in (f"Deployment/{view.ns_a}/shop", f"Service/{view.ns_a}/shop-svc",
                  f"Secret/{view.ns_a}/shop-db"):
        assert child in dom
    _assert_no_secret(view, dom)
    browser.screenshot(tmp_path / "webui-tree.png")

    # a phone, in dark mode
    browser.call("Emulation.setDeviceMetricsOverride", width=390, height=844,
                 deviceScaleFactor=2, mobile=True)
    browser.call("Emulation.setEmulatedMedia",
                 features=[{"name": "prefers-color-scheme", "value": "dark"}])
    browser.navigate(f"{base}/ui/")
    assert browser.eval("getComputedStyle(document.body).backgroundColor") != \
        "rgb(251, 251, 252)"
    browser.screenshot(tmp_path / "webui-phone-dark.png")
    blocked = [m for m in browser.console if "Content Security Policy" in m]
    assert not blocked, blocked
