"""`external:` calls against an HTTP server on 127.0.0.1 and the control plane: a Katalog
gated on a health check creates its Deployment when the endpoint answers 200 and not
otherwise; the calls are made in a live sync only, never in an offline render; a host a
template chooses is called only when the entry's allowedExternalHosts lists it; a failed
call without continueOnError stops that custom resource only."""

from __future__ import annotations

import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.katalog.loader import load_repository
from orksync.lifecycle.teardown import DeletionOptions, remove_finalizer
from orksync.model import ObjRef
from orksync.render.engine import render_catalog
from orksync.sync import (
    SyncOptions,
    SyncRequest,
    SyncResult,
    hook_renderers,
    render_live,
    sync_once,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, katalog, widget, write_repo

pytestmark = pytest.mark.cluster


class Health:
    """An HTTP server on 127.0.0.1 answering GET /health with `code`, counting requests."""

    def __init__(self) -> None:
        self.code = 503
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(self.path)
                body = b'{"ok": true}' if outer.code == 200 else b"down"
                self.send_response(outer.code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def health() -> Iterator[Health]:
    server = Health()
    yield server
    server.close()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    k = Kube.from_kubeconfig(control_plane.kubeconfig)
    yield k
    k.close()


@pytest.fixture
def ns(kube: Kube) -> Iterator[str]:
    name = f"ext-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        res = kube.resource("test.orksync.io/v1", "Widget")
        for item in kube.list(res, namespace=name):
            remove_finalizer(kube, res, item)
        kube.delete(kube.resource("v1", "Namespace"), "", name)
    except ClusterError:
        pass


def gated(url: str, *, continue_on_error: bool = True, hosts: str = "") -> str:
    """The full-stack pattern: a health check before anything, the Deployment only when it
    answers 200; a ConfigMap that records the call's status either way."""
    text = katalog(f"""\
        onReconcile:
          external:
            - name: health
              url: "{url}"
              expectedStatus: 200
              timeout: 5s
              continueOnError: {str(continue_on_error).lower()}
          configMaps:
            - name: "{{{{ .metadata.name }}}}-health"
              data: {{status: "{{{{ .external.health.status }}}}"}}
          deployments:
            - name: "{{{{ .metadata.name }}}}"
              image: nginx
              when:
                - field: external.health.status
                  equals: "200"
""")
    if hosts:
        text = text.replace("      crdFile: ./crd.yaml\n",
                            f"      crdFile: ./crd.yaml\n      allowedExternalHosts: {hosts}\n")
    return text


def sync(kube: Kube, root: Path, name: str) -> SyncResult:
    catalog = load_repository(root)
    rendered = render_live(kube, catalog)
    return sync_once(kube, SyncRequest(rendered, inventory_name=name, hooks=hook_renderers(catalog),
                                       options=SyncOptions(deletion=DeletionOptions(poll=0.1))))


def get(kube: Kube, kind: str, ns: str, name: str) -> dict[str, Any] | None:
    api = "apps/v1" if kind == "Deployment" else "v1"
    return kube.get_or_none(kube.resource(api, kind), ns, name)


def test_the_deployment_appears_when_the_health_endpoint_answers_200(
        kube: Kube, tmp_path: Path, ns: str, health: Health) -> None:
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD, "katalog.yaml": gated(f"http://127.0.0.1:{health.port}/health"),
        "w.yaml": widget("shop", ns)})
    name = f"ext-{uuid.uuid4().hex[:8]}"

    offline = render_catalog(load_repository(root))
    assert health.requests == []  # an offline render makes no call
    assert not offline.errors
    assert any("HTTP calls are made in a live render only" in w for w in offline.warnings)

    down = sync(kube, root, name)
    assert not down.changes.failed, down.changes.failed
    assert health.requests == ["/health"]
    assert get(kube, "Deployment", ns, "shop") is None
    recorded = get(kube, "ConfigMap", ns, "shop-health")
    assert recorded is not None and recorded["data"] == {"status": "503"}

    health.code = 200
    up = sync(kube, root, name)
    assert not up.changes.failed, up.changes.failed
    assert get(kube, "Deployment", ns, "shop") is not None
    recorded = get(kube, "ConfigMap", ns, "shop-health")
    assert recorded is not None and recorded["data"] == {"status": "200"}


def test_a_failed_call_without_continue_on_error_stops_that_custom_resource_only(
        kube: Kube, tmp_path: Path, ns: str, health: Health) -> None:
    root = write_repo(tmp_path / "repo", {
        "crd.yaml": CRD,
        "katalog.yaml": gated(f"http://127.0.0.1:{health.port}/health",
                              continue_on_error=False),
        "plain.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"
                      f"  namespace: {ns}\n",
        "w.yaml": widget("shop", ns)})
    result = sync(kube, root, f"ext-{uuid.uuid4().hex[:8]}")
    assert get(kube, "ConfigMap", ns, "shop-health") is None  # nothing of it applied
    assert get(kube, "ConfigMap", ns, "other") is not None  # the rest syncs
    assert any("nothing is pruned" in r for r in result.refused)
    rendered = render_live(kube, load_repository(root))
    assert [str(e) for e in rendered.errors] == [
        f"katalog.yaml:11 Widget.test.orksync.io/{ns}/shop "
        "spec.crds.widget.operatorBox.onReconcile.external[0]: external call 'health' "
        "failed: status 503, expected 200 (continueOnError is false)"]


def test_a_host_chosen_by_a_template_is_called_only_when_the_entry_allows_it(
        kube: Kube, tmp_path: Path, ns: str, health: Health) -> None:
    health.code = 200
    chosen = "http://{{ .spec.host }}/health"
    files = {"crd.yaml": CRD, "katalog.yaml": gated(chosen),
             "w.yaml": widget("shop", ns, host=f"127.0.0.1:{health.port}")}
    root = write_repo(tmp_path / "repo", files)
    refused = render_live(kube, load_repository(root))
    assert health.requests == []
    assert [str(e) for e in refused.errors] == [
        f"katalog.yaml:12 Widget.test.orksync.io/{ns}/shop "
        "spec.crds.widget.operatorBox.onReconcile.external[0].url: host "
        f"'127.0.0.1:{health.port}' is chosen by a template and is not in the entry's "
        "allowedExternalHosts (a host the Katalog writes out in the url is allowed)"]

    write_repo(root, {"katalog.yaml": gated(chosen, hosts=f'["127.0.0.1:{health.port}"]')})
    result = sync(kube, root, f"ext-{uuid.uuid4().hex[:8]}")
    assert not result.changes.failed, result.changes.failed
    assert health.requests == ["/health"]
    assert get(kube, "Deployment", ns, "shop") is not None
    assert ObjRef(api_version="apps/v1", kind="Deployment", namespace=ns, name="shop") in \
        {c.ref for c in result.changes.changes}
