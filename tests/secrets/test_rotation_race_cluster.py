"""A rotation (`orksync rotate`, the agent's schedule) that runs while a sync is between
its Secret stage and its workload stage: the sync must not put back the secrets-hash of
the Secrets the rotation replaced (which rolled the workload a second time, and left it
on the old hash until the next full sync). The interleaving is forced: the rotation runs
from the sync's own report of its Secret stage, through a connection of its own."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orksync.apply.rollout import ROLLOUT_ANNOTATION
from orksync.apply.secrets import rotate_due
from orksync.cluster.kube import Kube
from orksync.katalog.loader import load_repository
from orksync.model import Action, Change
from orksync.render.engine import render_catalog
from orksync.secrets.random import CryptoRandom
from orksync.sync import SyncRequest, hook_renderers, sync_rendered
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
        onReconcile:
          secrets:
            - name: "{{ .metadata.name }}-credentials"
              once: true
              data:
                password: "{{ randomAlphanumeric 24 }}"
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              env:
                - name: PASSWORD
                  valueFrom:
                    secretKeyRef: {name: "{{ .metadata.name }}-credentials", key: password}
"""


def test_a_rotation_between_the_secret_and_workload_stages_is_not_rolled_back(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    def widget(image: str) -> dict[str, str]:
        return {"w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n"
                          f"  name: w\n  namespace: {ns}\nspec: {{image: \"{image}\"}}\n"}

    repo = write_repo(tmp_path / "repo", {"katalog.yaml": KATALOG, "crd.yaml": CRD,
                                          **widget("nginx:1")})
    name = f"race-{uuid.uuid4().hex[:8]}"
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    rotator = Kube.from_kubeconfig(control_plane.kubeconfig)  # `orksync rotate`'s own

    def sync(on_change: object = None) -> None:
        catalog = load_repository(repo)
        hooks = hook_renderers(catalog)
        rendered = render_catalog(catalog)
        assert rendered.ok, rendered.errors
        result = sync_rendered(kube, SyncRequest(rendered, inventory_name=name, hooks=hooks,
                                                 on_change=on_change),  # type: ignore[arg-type]
                               catalog)
        assert not result.changes.failed, result.changes.failed

    deployments = kube.resource("apps/v1", "Deployment")
    try:
        sync()
        first = kube.get(deployments, ns, "w")
        rotated: list[Change] = []

        def rotate_after_the_secret_stage(change: Change) -> None:
            if change.ref.kind == "Secret" and not rotated:
                changes = rotate_due(rotator, now=datetime.now(UTC), random=CryptoRandom(),
                                     force={f"{ns}/w-credentials"})
                rotated.extend(changes.changes)

        write_repo(repo, widget("nginx:2"))  # the sync writes the Deployment anyway
        sync(rotate_after_the_secret_stage)
        assert any(c.ref.kind == "Deployment" and c.action is Action.CONFIGURED
                   for c in rotated), rotated  # the rotation rolled it
        after = kube.get(deployments, ns, "w")
        hashes = [d["spec"]["template"]["metadata"]["annotations"][ROLLOUT_ANNOTATION]
                  for d in (first, after)]
        assert hashes[0] != hashes[1]  # the rotation's hash stayed
        # written twice: rolled by the rotation, then the image; never back to the old hash
        assert after["metadata"]["generation"] == first["metadata"]["generation"] + 2
        sync()  # and the next sync agrees: no change, no roll
        assert kube.get(deployments, ns, "w")["metadata"]["generation"] == \
            after["metadata"]["generation"]
    finally:
        kube.close()
        rotator.close()
