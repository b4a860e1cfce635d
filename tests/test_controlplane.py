"""The local control plane itself: etcd + kube-apiserver + kube-controller-manager on loopback."""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import kubernetes.client
import kubernetes.config
import pytest
from kubernetes.client import ApiClient, CoreV1Api, V1ConfigMap, V1ObjectMeta, V1OwnerReference
from kubernetes.client.exceptions import ApiException

from testbed.controlplane import (
    ControlPlane,
    ControlPlaneError,
    find_binaries,
    repository_root,
)
from tests.helpers import wait_for

FIELD_MANAGER = "orksync-tests"
GC_TIMEOUT = 60.0


def _config_map(core: CoreV1Api, namespace: str, name: str, **meta: object) -> V1ConfigMap:
    body = V1ConfigMap(metadata=V1ObjectMeta(name=name, **meta), data={"k": "v"})
    return core.create_namespaced_config_map(namespace, body, field_manager=FIELD_MANAGER)


def _exists(core: CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _unauthenticated_status(cp: ControlPlane, path: str) -> int:
    context = ssl.create_default_context(cadata=cp.ca_pem.decode())
    port = int(cp.server.rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.cluster
def test_the_control_plane_serves_the_api_with_client_certificate_auth(
    control_plane: ControlPlane, api_client: ApiClient
) -> None:
    names = {ns.metadata.name for ns in CoreV1Api(api_client).list_namespace().items}

    assert {"default", "kube-system"} <= names
    assert _unauthenticated_status(control_plane, "/api/v1/namespaces") in (401, 403)
    default = kubernetes.client.Configuration.get_default_copy()
    assert default.host != control_plane.server and default.cert_file is None


@pytest.mark.cluster
def test_the_kubeconfig_reaches_the_api_as_the_admin(control_plane: ControlPlane) -> None:
    client = kubernetes.config.new_client_from_config(
        config_file=str(control_plane.kubeconfig), context="orksync-local"
    )
    with client:
        review = kubernetes.client.AuthenticationV1Api(client).create_self_subject_review(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )

    assert review.status.user_info.username == "orksync-admin"
    assert "system:masters" in review.status.user_info.groups
    assert (
        json.loads(control_plane.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        == control_plane.server
    )


@pytest.mark.cluster
def test_garbage_collector_deletes_dependents_of_a_deleted_owner(
    api_client: ApiClient, namespace: str
) -> None:
    core = CoreV1Api(api_client)
    owner = _config_map(core, namespace, "owner")
    reference = V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    _config_map(core, namespace, "dependent", owner_references=[reference])

    core.delete_namespaced_config_map("owner", namespace)

    wait_for(
        "the dependent ConfigMap is garbage-collected",
        lambda: not _exists(core, namespace, "dependent"),
        GC_TIMEOUT,
    )


@pytest.mark.cluster
def test_a_deleted_namespace_goes_away_with_its_contents(api_client: ApiClient) -> None:
    core = CoreV1Api(api_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=V1ObjectMeta(name=name)), field_manager=FIELD_MANAGER
    )
    _config_map(core, name, "content")

    core.delete_namespace(name)

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the namespace is deleted by the namespace controller", gone, GC_TIMEOUT)


@pytest.mark.cluster
def test_the_service_range_holds_more_services_than_a_slash_24(
        api_client: ApiClient, namespace: str) -> None:
    """A /24 has 253 cluster IPs (one is the `kubernetes` Service's): the 254th ClusterIP
    Service was refused, and benches with a Service per custom resource ran out."""
    core = CoreV1Api(api_client)
    for i in range(260):
        core.create_namespaced_service(namespace, {
            "metadata": {"name": f"s{i}"},
            "spec": {"ports": [{"port": 80}]}}, field_manager=FIELD_MANAGER)
    ips = {s.spec.cluster_ip for s in core.list_namespaced_service(namespace).items}
    assert len(ips) == 260 and None not in ips
    for i in range(260):  # the IPs back to the range for the tests that follow
        core.delete_namespaced_service(f"s{i}", namespace)


@pytest.mark.cluster
def test_restart_apiserver_keeps_data(control_plane: ControlPlane, namespace: str) -> None:
    with control_plane.api_client() as before:
        _config_map(CoreV1Api(before), namespace, "survivor")

    # From a thread that then ends: the new kube-apiserver must outlive it (children are
    # forked from one long-lived thread; PR_SET_PDEATHSIG follows the forking thread).
    restarter = threading.Thread(target=control_plane.restart_apiserver)
    restarter.start()
    restarter.join()
    time.sleep(1.0)

    assert "kube-apiserver" in {info.component for info in control_plane.processes()}
    with control_plane.api_client() as after:
        assert CoreV1Api(after).read_namespaced_config_map("survivor", namespace).data == {"k": "v"}


@pytest.mark.cluster
def test_restart_etcd_after_a_crash_keeps_data(control_plane: ControlPlane, namespace: str) -> None:
    with control_plane.api_client() as before:
        _config_map(CoreV1Api(before), namespace, "survivor")

    control_plane.restart_etcd(graceful=False)

    with control_plane.api_client() as after:
        assert CoreV1Api(after).read_namespaced_config_map("survivor", namespace).data == {"k": "v"}


@pytest.mark.cluster
def test_up_and_down_run_a_detached_control_plane(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "ORKSYNC_CONTROL_PLANE_BIN": str(control_plane.bin_dir),
        "PYTHONPATH": str(repository_root()),
    }
    state_dir, kubeconfig = tmp_path / "state", tmp_path / "kubeconfig"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "testbed.controlplane", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    up = cli("up", "--kubeconfig", str(kubeconfig), "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    pids = [p["pid"] for p in json.loads((state_dir / "state.json").read_text())["processes"]]
    try:
        client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        with client:
            assert CoreV1Api(client).read_namespace("default").metadata.name == "default"
    finally:
        down = cli("down", "--state-dir", str(state_dir))

    assert down.returncode == 0, down.stderr
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists() and _not_zombie(pid)] == []
    assert not (state_dir / "state.json").exists()
    assert not (state_dir / "control-plane").exists()


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# --- no cluster needed ---------------------------------------------------------------------


def _fake_bin_dir(directory: Path, names: tuple[str, ...]) -> Path:
    directory.mkdir()
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    return directory


def test_find_binaries_honours_the_environment_variables(tmp_path: Path) -> None:
    bins = _fake_bin_dir(tmp_path / "bin", ("etcd", "kube-apiserver"))

    assert find_binaries(environ={"ORKSYNC_CONTROL_PLANE_BIN": str(bins)}) == bins
    assert find_binaries(environ={"KUBEBUILDER_ASSETS": str(bins)}) == bins


def test_a_missing_binary_is_named_in_the_error(tmp_path: Path) -> None:
    bins = _fake_bin_dir(tmp_path / "bin", ("etcd", "kube-apiserver"))

    with pytest.raises(ControlPlaneError, match="kube-controller-manager"):
        ControlPlane(bin_dir=bins, controller_manager=True).start()


def test_a_component_that_dies_at_start_fails_with_its_log(tmp_path: Path) -> None:
    bins = _fake_bin_dir(tmp_path / "bin", ("kube-apiserver",))
    (bins / "etcd").write_text("#!/bin/sh\necho 'etcd: cannot open data dir' >&2\nexit 3\n")
    (bins / "etcd").chmod(0o755)
    cp = ControlPlane(bin_dir=bins, work_dir=tmp_path / "work")

    with pytest.raises(
        ControlPlaneError, match=r"(?s)etcd exited with code 3.*etcd: cannot open data dir"
    ):
        cp.start()
    assert not (tmp_path / "work").exists()
