"""The CRDs of an apply: the kinds they serve, and the wait until each is Established and
served by discovery, since a custom resource applied before that fails as a kind "not
served"."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from orksync.apply.kinds import CRD_API, policy
from orksync.apply.run import Kind
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError
from orksync.model import Action, Change, ObjRef, RenderedObject


def crd_kinds(objects: Iterable[RenderedObject]) -> set[Kind]:
    """The (apiVersion, kind) pairs the rendered CRDs serve."""
    kinds = set()
    for obj in objects:
        if not policy(obj.ref).crd:
            continue
        spec = obj.body.get("spec") or {}
        kind = str((spec.get("names") or {}).get("kind") or "")
        for version in spec.get("versions") or []:
            if isinstance(version, Mapping) and version.get("served", True):
                kinds.add((f"{spec.get('group')}/{version.get('name')}", kind))
    return kinds


def wait_established(kube: Kube, crds: list[RenderedObject], results: list[Change],
                     listed: Mapping[ObjRef, dict[str, Any]], timeout: float
                     ) -> list[Change]:
    """`results` once every CRD is Established and discovery serves its kind in each of
    its served versions (the API server updates discovery a moment after the condition),
    a CRD still waiting after `timeout` seconds failed. A CRD this apply did not write and
    that was Established when the stage listed it is taken as it was listed, and its
    discovery is kept when it already serves the kind in every version: a resync sends
    neither a GET per CRD nor a discovery request per version for them."""
    res = kube.resource(CRD_API, "CustomResourceDefinition")
    deadline = time.monotonic() + timeout
    untouched = {c.ref for c in results if c.action is Action.UNCHANGED}
    pending = {o.ref.name: o for o in crds}
    waiting_for = dict.fromkeys(pending, "Established")  # what each CRD still waits for
    delay = 0.05
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            crd = pending[name]
            kept = crd.ref in untouched and _established(listed.get(crd.ref))
            if not kept and waiting_for[name] == "Established":  # not read once it is
                if not _established(kube.get_or_none(res, "", name)):
                    continue
                waiting_for[name] = "served by discovery"
            spec = crd.body.get("spec") or {}
            kind = str((spec.get("names") or {}).get("kind"))
            versions = {f"{spec.get('group')}/{v.get('name')}": v.get("served", True)
                        for v in spec.get("versions") or []}
            if kept:
                for api_version in versions:
                    if not kube.serves(api_version, kind):
                        kube.forget(api_version)
            else:
                for api_version in versions:  # a version no longer served included
                    kube.forget(api_version)
                if not all(discovered(kube, v, kind) for v, served in versions.items()
                           if served):
                    continue
            del pending[name]
        if pending:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    if not pending:
        return results
    late = {pending[n].ref: waiting_for[n] for n in pending}
    return [Change(ref=c.ref, action=Action.FAILED,
                   message=f"not {late[c.ref]} within {timeout:.0f}s")
            if c.ref in late else c for c in results]


def discovered(kube: Kube, api_version: str, kind: str) -> bool:
    """Whether discovery, asked again now, serves `kind` in `api_version` (a cached
    answer that does is kept: it was asked after the CRD was Established)."""
    try:
        kube.resource(api_version, kind)
    except ClusterError:
        return False
    return True


def _established(crd: Mapping[str, Any] | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)
