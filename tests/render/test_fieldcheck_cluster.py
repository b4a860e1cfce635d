"""`orksync sync --strict-fields` against the real control plane: a template path the CRD's
schema does not have stops its own entry, prunes nothing, and the rest syncs."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from tests.helpers import crd, write_repo

pytestmark = pytest.mark.cluster

TIER = """
    spec:
      type: object
      properties:
        tier: {type: string}
"""

KATALOG = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {{name: {plural}}}
spec:
  crds:
    {singular}:
      crdFile: ./crd.yaml
      operatorBox:
        onReconcile:
          configMaps:
            - name: "{singular}-{{{{ .metadata.name }}}}"
              data: {{tier: "{{{{ .spec.{field} }}}}"}}
"""

CR = """
apiVersion: fieldcheck.test.orksync.io/v1
kind: {kind}
metadata: {{name: a, namespace: {ns}}}
spec: {{tier: {tier}}}
"""


def kinds(root: Path, ns: str, *, shop_field: str, store_tier: str) -> Path:
    files = {}
    for kind, field, tier in (("Shop", shop_field, "pro"), ("Store", "tier", store_tier)):
        names = {"kind": kind, "plural": kind.lower() + "s", "singular": kind.lower()}
        folder = kind.lower()
        files[f"{folder}/crd.yaml"] = crd(kind, "fieldcheck.test.orksync.io", status=False,
                                           properties=TIER)
        files[f"{folder}/katalog.yaml"] = KATALOG.format(**names, field=field)
        files[f"{folder}/a.yaml"] = CR.format(kind=kind, ns=ns, tier=tier)
    return write_repo(root, files)


def sync(repo: Path, kubeconfig: Path, name: str, *flags: str
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", "sync", str(repo), "--once",
                           "--kubeconfig", str(kubeconfig), "--name", name, *flags],
                          capture_output=True, text=True, timeout=180)


def tiers(kube: Kube, ns: str) -> dict[str, str]:
    listed = kube.list(kube.resource("v1", "ConfigMap"), namespace=ns)
    return {o["metadata"]["name"]: (o.get("data") or {}).get("tier", "")
            for o in listed if o["metadata"]["name"] in ("shop-a", "store-a")}


def test_strict_fields_stops_the_entry_prunes_nothing_and_the_rest_syncs(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns, name = f"fc-{uuid.uuid4().hex[:8]}", f"fc-{uuid.uuid4().hex[:8]}"
    repo = kinds(tmp_path / "repo", ns, shop_field="tier", store_tier="free")
    first = sync(repo, control_plane.kubeconfig, name, "--strict-fields")
    assert first.returncode == 0, first.stderr
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        assert tiers(kube, ns) == {"shop-a": "pro", "store-a": "free"}
        # a typo in the Shop Katalog, a change to the Store custom resource
        kinds(repo, ns, shop_field="teir", store_tier="pro")
        strict = sync(repo, control_plane.kubeconfig, name, "--strict-fields")
        assert strict.returncode == 1
        assert "error: shop/katalog.yaml:12 Katalog/shops spec.crds.shop.operatorBox." \
            "onReconcile.configMaps[0].data.tier: reads .spec.teir, which the schema of " \
            "Shop fieldcheck.test.orksync.io/v1 (shop/crd.yaml) does not have (nearest " \
            "field: .spec.tier)" in strict.stderr
        assert "prune refused" in strict.stderr
        # the Shop's ConfigMap kept as it was, not pruned; the Store's change applied
        assert tiers(kube, ns) == {"shop-a": "pro", "store-a": "pro"}
        # without the flag: a warning, and the typo renders "" as it does in Orkestra
        loose = sync(repo, control_plane.kubeconfig, name)
        assert loose.returncode == 0, loose.stderr
        assert "warning: shop/katalog.yaml:12 Katalog/shops" in loose.stderr
        assert tiers(kube, ns) == {"shop-a": "", "store-a": "pro"}
    finally:
        kube.close()
