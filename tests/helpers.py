"""Small helpers shared by tests: writing repositories to temporary directories."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import pytest

from orksync.cluster.kube import Kube

# The repository: tests/ is one level below it, whichever folder of tests/ a test is in.
ROOT = Path(__file__).resolve().parent.parent
REPO_EXAMPLE = ROOT / "examples" / "repo"
# The reference Katalogs live outside the repository, in ../shared beside the checkout
# (ORKSYNC_SHARED overrides). Tests that need them skip locally and fail in CI without them.
SHARED = Path(os.environ.get("ORKSYNC_SHARED") or ROOT.parent / "shared")
ORKESTRA_EXAMPLES = SHARED / "examples" / "orkestra"


def unavailable(reason: str) -> NoReturn:
    """Something a test needs is missing from this machine: a skip locally, a failure in
    CI (CI=true), whose entry point (.ci/run) provides it."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def need_orkestra_examples() -> None:
    if not ORKESTRA_EXAMPLES.is_dir():
        unavailable(f"the reference examples are not at {ORKESTRA_EXAMPLES} "
                    "(set ORKSYNC_SHARED)")


def write_repo(root: Path, files: dict[str, str]) -> Path:
    """Write {relative path: YAML text} under root (text is dedented)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def crd(kind: str, group: str = "test.orksync.io", *, plural: str = "",
        status: bool = True, properties: str = "") -> str:
    """The text of a namespaced CustomResourceDefinition serving one version, v1, of `kind`
    in `group` (singular: the kind in lower case; plural: that with an "s" unless given),
    with the status subresource unless `status` is False. Its openAPIV3Schema keeps every
    field, or declares `properties`: the YAML under `openAPIV3Schema.properties`, dedented
    and put in place here."""
    singular = kind.lower()
    plural = plural or f"{singular}s"
    subresources = "      subresources: {status: {}}\n" if status else ""
    if properties:
        schema = ("          properties:\n"
                  + textwrap.indent(textwrap.dedent(properties).strip("\n"), " " * 12) + "\n")
    else:
        schema = "          x-kubernetes-preserve-unknown-fields: true\n"
    return f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: {kind}, plural: {plural}, singular: {singular}}}
  versions:
    - name: v1
      served: true
      storage: true
{subresources}      schema:
        openAPIV3Schema:
          type: object
{schema}"""


CRD = crd("Widget")

KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "{{ .spec.replicas }}"
              port: "{{ .spec.port }}"
              reconcile: true
          services:
            - name: "{{ .metadata.name }}-svc"
              port: "80"
              targetPort: "{{ .spec.port }}"
"""


def katalog(box: str) -> str:
    """A Widget Katalog whose operatorBox is `box` (YAML indented by 8 spaces)."""
    return ("apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: widgets}\n"
            "spec:\n  crds:\n    widget:\n      crdFile: ./crd.yaml\n      operatorBox:\n"
            + box)


def widget(name: str, namespace: str = "default", **spec: object) -> str:
    lines = [f"  {k}: {v}" for k, v in spec.items()]
    return (f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: {name}\n"
            f"  namespace: {namespace}\nspec:\n" + ("\n".join(lines) or "  {}") + "\n")


def finished_job_status(*, ok: bool) -> dict[str, Any]:
    """The status a job controller writes when a Job ends (no kubelet runs in the test
    control plane): succeeded with SuccessCriteriaMet + Complete, or failed."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def cond(kind: str) -> dict[str, str]:
        return {"type": kind, "status": "True", "reason": "Test", "message": "by the test",
                "lastProbeTime": now, "lastTransitionTime": now}

    status: dict[str, Any] = {"startTime": now}
    if ok:
        status.update(completionTime=now, succeeded=1,
                      conditions=[cond("SuccessCriteriaMet"), cond("Complete")])
    else:
        status.update(failed=1, conditions=[cond("FailureTarget"), cond("Failed")])
    return status


def record_requests(kube: Kube, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (method, path) `kube` sends from now on (any thread), in order."""
    sent: list[tuple[str, str]] = []
    send = kube.request_with_status

    def recording(method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        sent.append((method, path))
        return send(method, path, **kwargs)

    monkeypatch.setattr(kube, "request_with_status", recording)
    return sent


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll `check` until it holds; a hang guard, not a timing assertion: `timeout` is
    generous and failing it means the condition never came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def configmap_writes(audit_log: Path, identity: str, namespace: str
                     ) -> list[tuple[str, str, str]]:
    """(verb, name, requestURI) of every ConfigMap write (create, update, patch, delete)
    that the agent `identity` made in the namespace, from the API server's audit log."""
    found = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if f"(agent {identity})" in event.get("userAgent", "") and \
                event.get("stage") == "ResponseComplete" and \
                event.get("verb") in ("create", "update", "patch", "delete") and \
                ref.get("resource") == "configmaps" and ref.get("namespace") == namespace:
            found.append((str(event["verb"]), str(ref.get("name")),
                          str(event.get("requestURI"))))
    return found
