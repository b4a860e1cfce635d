"""No generated value leaks: one scenario drives every channel orksync writes to (rendered
files, command output and logs at debug level, Events, custom resource status, diff, a
rotation) and scans them all for every secret value that lives in the cluster."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, write_repo

pytestmark = pytest.mark.cluster

KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: apps}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBox:
        status:
          fields:
            - {path: secret, value: "{{ .metadata.name }}-db"}
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-db"
              once: true
              rotateAfter: 30d
              data:
                password: "{{ randomAlphanumeric 32 }}"
                token: "tok-{{ randomHex 16 }}"
                key: "{{ randomBase64 24 }}"
                id: "{{ uuidv4 }}"
            - name: "{{ .metadata.name }}-webhook"
              once: true
              tls:
                dnsNames: ["{{ .metadata.name }}.{{ .metadata.namespace }}.svc"]
          ingresses:
            - name: "{{ .metadata.name }}"
              host: "{{ .metadata.name }}.example.com"
              serviceName: "{{ .metadata.name }}"
              servicePort: "80"
              tls: {create: true}
          deployments:
            - name: "{{ .metadata.name }}"
              image: nginx
              envFrom:
                secretRef: [{name: "{{ .metadata.name }}-db"}]
"""


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args, "--log-level", "debug"],
                          capture_output=True, text=True, timeout=180)


def test_no_generated_value_reaches_files_logs_events_status_or_diffs(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {{}}\n"})
    kc, name = str(control_plane.kubeconfig), f"leaks-{uuid.uuid4().hex[:8]}"
    outputs: list[str] = []
    for args in (("sync", str(repo), "--once", "--kubeconfig", kc, "-o", str(tmp_path / "a"),
                  "--name", name),
                 ("sync", str(repo), "--once", "--kubeconfig", kc, "--name", name),
                 ("rotate", "--force", f"{ns}/w-db", "--kubeconfig", kc),
                 ("diff", str(repo), "--kubeconfig", kc, "--name", name),
                 ("sync", str(repo), "--once", "--kubeconfig", kc, "--log-format", "json",
                  "--name", name),
                 ("render", str(repo), "-o", str(tmp_path / "b"))):
        result = orksync(*args)
        assert result.returncode in (0, 1), (args, result.stderr)
        outputs += [result.stdout, result.stderr]
    outputs += [p.read_text() for d in ("a", "b") for p in (tmp_path / d).rglob("*.yaml")]

    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    secrets = {s["metadata"]["name"]: s for s in kube.list(kube.resource("v1", "Secret"),
                                                             namespace=ns)}
    assert {"w-db", "w-webhook", "w-tls"} <= set(secrets)
    assert secrets["w-tls"]["type"] == "kubernetes.io/tls"  # made for Ingress tls.create
    events = list(kube.list(kube.resource("v1", "Event"), namespace=ns))
    assert events, "the sync records Events"
    widget = kube.get(kube.resource("test.orksync.io/v1", "Widget"), ns, "w")
    outputs += [json.dumps(events), json.dumps(widget.get("status"))]
    kube.close()

    values = set()
    for secret in secrets.values():
        for encoded in (secret.get("data") or {}).values():
            decoded = base64.b64decode(encoded).decode(errors="replace")
            values.add(encoded)
            values.add(decoded)
            values.update(line for line in decoded.splitlines() if len(line) >= 16
                          and not line.startswith("-----"))
    values = {v for v in values if len(v) >= 8}
    assert len(values) >= 8
    haystack = "\n".join(outputs)
    leaked = [v[:6] + "..." for v in values if v in haystack]
    assert not leaked, f"{len(leaked)} secret values found in the outputs"
