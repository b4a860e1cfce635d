"""`orksync install`'s builder offline (orksync.cli.install); against the control plane:
tests/cli/test_install_cluster.py."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from orksync.cli.install import DEPLOY, InstallOptions, build
from tests.helpers import ROOT

DEPLOYED_IMAGE = "registry.example.com/orksync"


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace", ""), meta["name"]


def test_every_crd_deploy_lists_is_installed_first(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, deploy)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.orksync.io"},
           "spec": {"group": "orksync.io", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    (deploy / "base" / "gadget.crd.yaml").write_text(yaml.safe_dump(crd))
    kustomization = deploy / "base" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace(
        "resources:\n", "resources:\n  - gadget.crd.yaml\n"))
    for impersonation in (True, False):
        docs = build(InstallOptions(impersonation=impersonation), deploy)
        assert [d["kind"] for d in docs[:2]] == ["Namespace", "CustomResourceDefinition"]
        assert docs[1]["metadata"]["name"] == "gadgets.orksync.io"
        assert "namespace" not in docs[1]["metadata"]  # cluster-scoped, left alone
    # and deploy/ as it is: every CRD its base holds is in the install
    listed = [d for p in sorted((DEPLOY / "base").glob("*.yaml"))
              for d in yaml.safe_load_all(p.read_text()) if d and
              d.get("kind") == "CustomResourceDefinition" and
              p.name in kustomization.read_text()]
    installed = {key(d) for d in build(InstallOptions())}
    assert {key(d) for d in listed} <= installed


def test_a_kustomization_field_the_builder_does_not_know_is_refused(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, deploy)
    kustomization = deploy / "base" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "\nreplicas:\n  - {name: orksync, "
                             "count: 2}\n")
    from orksync.cli.install import InstallError

    with pytest.raises(InstallError, match=f"{kustomization}: replicas: not understood"):
        build(InstallOptions(), deploy)


def test_the_manifests_image_is_tagged_with_this_version() -> None:
    """The tag policy (deploy/README.md): deploy/ names the image by the version it ships
    with, never a moving tag."""
    from orksync import __version__

    (deployment,) = (d for d in build(InstallOptions()) if d["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{DEPLOYED_IMAGE}:{__version__}"


def test_the_package_ships_every_file_of_deploy() -> None:
    """orksync/deploy links to deploy/; pyproject's package data must take every YAML file
    in it, or an installed orksync builds from less than a checkout."""
    assert (ROOT / "orksync" / "deploy").resolve() == (ROOT / "deploy").resolve()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["orksync"]
    shipped = {p for pattern in patterns for p in (ROOT / "orksync").glob(pattern)}
    assert shipped == set((ROOT / "orksync" / "deploy").rglob("*.yaml"))
    docker = (ROOT / "Dockerfile").read_text()
    assert "COPY deploy ./deploy" in docker
    assert "deploy" not in (ROOT / ".dockerignore").read_text().split()


@pytest.mark.parametrize(("image", "parts"), [
    ("ghcr.io/acme/orksync:1.2.3", ("ghcr.io/acme/orksync", "1.2.3", "")),
    ("localhost:5000/orksync:1", ("localhost:5000/orksync", "1", "")),
    ("r.io/o@sha256:" + "0" * 64, ("r.io/o", "", "sha256:" + "0" * 64)),
])
def test_an_image_reference_is_split(image: str, parts: tuple[str, str, str]) -> None:
    from orksync.cli.install import split_image

    assert split_image(image) == parts
