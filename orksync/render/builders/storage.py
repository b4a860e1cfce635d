"""PersistentVolumeClaim and PersistentVolume: Orkestra's builders (semantics §2.4). Pure.

* PVC: `storage` required and validated (fix of bug #16, §7.2: Orkestra's parse panics on
  a bad size), `accessModes` default [ReadWriteOnce], `volumeMode` default Filesystem
  (or Block), `storageClassName` and `volumeName` only when non-empty (no class = the
  cluster's default class).
* PV (cluster-scoped): `capacity` required and validated, `accessModes` default
  [ReadWriteOnce], `persistentVolumeReclaimPolicy` from `reclaimPolicy` (Retain default,
  Delete, Recycle), `storageClassName` when non-empty, and exactly one source: `hostPath`
  (a path) or `csiDriver` + `csiVolumeHandle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orksync.render.builders import BuildContext, BuildError, metadata
from orksync.render.builders.common import access_modes, as_text, choice, quantity

VOLUME_MODES = ("Filesystem", "Block")
RECLAIM_POLICIES = ("Retain", "Delete", "Recycle")


def _size(entry: Mapping[str, Any], key: str) -> str:
    if not as_text(entry.get(key), key):
        raise BuildError(key, "is required (a size such as 10Gi)")
    return quantity(entry[key], key)


def build_persistent_volume_claim(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": access_modes(entry.get("accessModes"), "accessModes"),
        "resources": {"requests": {"storage": _size(entry, "storage")}},  # bug #16
        "volumeMode": choice(entry.get("volumeMode"), "volumeMode", VOLUME_MODES, "Filesystem"),
    }
    for key in ("storageClassName", "volumeName"):
        value = as_text(entry.get(key), key)
        if value:
            spec[key] = value
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata(ctx),
            "spec": spec}


def build_persistent_volume(entry: Mapping[str, Any], ctx: BuildContext) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": _size(entry, "capacity")},
        "accessModes": access_modes(entry.get("accessModes"), "accessModes"),
        "persistentVolumeReclaimPolicy": choice(entry.get("reclaimPolicy"), "reclaimPolicy",
                                                RECLAIM_POLICIES, "Retain"),
    }
    storage_class = as_text(entry.get("storageClassName"), "storageClassName")
    if storage_class:
        spec["storageClassName"] = storage_class
    host_path = as_text(entry.get("hostPath"), "hostPath")
    driver = as_text(entry.get("csiDriver"), "csiDriver")
    handle = as_text(entry.get("csiVolumeHandle"), "csiVolumeHandle")
    if host_path and (driver or handle):
        raise BuildError("hostPath", "cannot be combined with csiDriver/csiVolumeHandle: a "
                         "PersistentVolume has one source")
    if host_path:
        spec["hostPath"] = {"path": host_path}
    elif driver and handle:
        spec["csi"] = {"driver": driver, "volumeHandle": handle}
    elif driver or handle:
        missing = "csiVolumeHandle" if driver else "csiDriver"
        raise BuildError(missing, "is required with " +
                         ("csiDriver" if driver else "csiVolumeHandle"))
    else:
        raise BuildError("hostPath", "a PersistentVolume needs a source: hostPath, or "
                         "csiDriver with csiVolumeHandle")
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata(ctx),
            "spec": spec}
