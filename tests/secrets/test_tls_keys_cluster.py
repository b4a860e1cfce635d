"""The keys of `tls:` Secrets against the real control plane (issue 30, item 5): validated
when they are made or change, not at every sync; a key changed in the cluster is still
validated, and an inconsistent one is replaced."""

from __future__ import annotations

import base64
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from orksync.cli import main
from orksync.cluster.kube import Kube
from orksync.secrets.plan import TLS_CHECKED
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, katalog, write_repo
from tests.secrets.keycheck import digest, tampered_rsa_key, validated_loads

pytestmark = pytest.mark.cluster

TLS_KATALOG = katalog("""\
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-tls"
              tls:
                dnsNames: [web.example]
""")  # RSA, the default algorithm: the key whose validation is costly


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[Kube]:
    client = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        client.close()


def secret(kube: Kube, ns: str, name: str) -> dict[str, object]:
    live: dict[str, object] = kube.get(kube.resource("v1", "Secret"), ns, name)
    return live


def values(live: dict[str, object]) -> dict[str, bytes]:
    data = live["data"]
    assert isinstance(data, dict)
    return {k: base64.b64decode(v) for k, v in data.items()}


def summary(err: str) -> str:
    return [line for line in err.splitlines() if line.startswith("sync ")][-1]


def test_a_no_change_resync_validates_no_key_and_a_tampered_key_is_validated_and_replaced(
        kube: Kube, control_plane: ControlPlane, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": TLS_KATALOG, "crd.yaml": CRD,
        **{f"w{i}.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n"
                         f"  name: w{i}\n  namespace: {ns}\nspec: {{}}\n" for i in range(3)}})
    argv = ["sync", str(repo), "--once", "--kubeconfig", str(control_plane.kubeconfig),
            "--name", f"keys-{ns}"]
    first = subprocess.run([sys.executable, "-m", "orksync", *argv], capture_output=True,
                           text=True, timeout=180)
    assert first.returncode == 0, first.stderr
    made = {i: values(secret(kube, ns, f"w{i}-tls")) for i in range(3)}
    assert all(m["tls.key"].startswith(b"-----BEGIN RSA PRIVATE KEY") for m in made.values())

    # a new process: what it knows of the keys comes from the cluster alone
    capsys.readouterr()
    with validated_loads() as loads:
        assert main(argv) == 0
    assert len(loads) == 0
    assert " configured=0 " in summary(capsys.readouterr().err)

    # w0's key replaced in the cluster by an inconsistent one with the same public key
    # (it still matches the certificate); the fingerprint annotation left as it was
    bad = tampered_rsa_key(made[0]["tls.key"])
    kube.request("PATCH", kube.resource("v1", "Secret").path(ns, "w0-tls"),
                 body={"data": {"tls.key": base64.b64encode(bad).decode()}},
                 content_type="application/merge-patch+json")
    with validated_loads() as loads:
        assert main(argv) == 0
    err = capsys.readouterr().err
    # the two keys the fingerprint covers, the changed one among them
    assert sorted(key == digest(bad) for key in loads) == [False, True]
    assert f"configured Secret/{ns}/w0-tls" in err and " configured=1 " in summary(err)
    fixed = values(secret(kube, ns, "w0-tls"))
    replaced = fixed["tls.key"] not in (bad, made[0]["tls.key"])
    assert replaced
    leaf = x509.load_pem_x509_certificate(fixed["tls.crt"])
    key = serialization.load_pem_private_key(fixed["tls.key"], password=None)
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert leaf.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)
    same_ca = fixed["ca.crt"] == made[0]["ca.crt"]
    assert same_ca  # same CA: only the server certificate
    unchanged = [values(secret(kube, ns, f"w{i}-tls")) == made[i] for i in (1, 2)]
    assert unchanged == [True, True]

    with validated_loads() as loads:  # the new key was made here: nothing to validate
        assert main(argv) == 0
    assert len(loads) == 0 and " configured=0 " in summary(capsys.readouterr().err)
    annotations = secret(kube, ns, "w0-tls")["metadata"]
    assert isinstance(annotations, dict) and annotations["annotations"][TLS_CHECKED]
