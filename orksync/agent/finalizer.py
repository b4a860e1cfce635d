"""The finalizer of a Sync, `orksync.io/sync-cleanup`: added at its first run, removed
once its deletion is done: with `prune: true` (and not suspended) everything its
inventory holds deleted first, custom resources through their onDelete
(docs/operations.md, "Sync objects")."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time

from orksync.agent import syncs
from orksync.agent.reconciler import prune_all
from orksync.agent.roots import Root, RootBuilder
from orksync.agent.runner import Agent
from orksync.apply.inventory import configmap_name
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, InputError, OrksyncError
from orksync.model import Source

log = logging.getLogger("orksync.agent.controller")


def add_finalizer(kube: Kube, root: Root) -> None:
    """`orksync.io/sync-cleanup` on the Sync, so that its deletion waits for `finalize`."""
    meta = root.obj.get("metadata") or {}
    finalizers = [*(meta.get("finalizers") or []), syncs.FINALIZER]
    res = syncs.sync_resource(kube)
    try:
        live = kube.request(
            "PATCH", res.path(str(meta["namespace"]), str(meta["name"])),
            body={"metadata": {"finalizers": finalizers,
                               "resourceVersion": meta.get("resourceVersion")}},
            content_type="application/merge-patch+json", subject=f"Sync/{root.key}")
    except ClusterError as err:  # changed meanwhile: added at the next run
        log.info("Sync %s: finalizer not added yet: %s", root.key, err)
        return
    if isinstance(live, dict):
        root.obj = live


def finalize(kube: Kube, builder: RootBuilder, root: Root) -> str | None:
    """A deleted Sync: with prune, everything its inventory holds deleted (custom
    resources through their onDelete, the Sync's ServiceAccount as their writer),
    then its inventory and the finalizer; without prune, or suspended (as Flux does),
    only the inventory and the finalizer. The failure that keeps the finalizer, to be
    tried again; "" otherwise. A Sync of several shards: each shard deletes its own
    inventory's objects, and shard 0, which holds the plain manifests (a Namespace the
    others' objects live in), begins once the others' inventories are gone (None until
    then), and removes the finalizer."""
    meta = root.obj.get("metadata") or {}
    if syncs.FINALIZER not in (meta.get("finalizers") or []):
        builder.stop(root)
        return ""
    spec = root.spec
    base = builder.base
    if spec is not None and root.shard == 0 and spec.shards > 1:
        res = kube.resource("v1", "ConfigMap")
        for shard in range(1, spec.shards):
            if kube.get_or_none(res, base.inventory_namespace,
                                configmap_name(spec.unit_inventory(shard))) is not None:
                log.info("Sync %s: deletion waits for shard %d", root.key, shard)
                return None
    if spec is not None and spec.prune and not spec.suspend:
        try:
            agent: Agent | None = builder.agent(root, spec)
        except InputError as err:  # its Secrets gone: no onDelete renderers then
            log.warning("Sync %s: deleting without its repository: %s", root.key, err)
            agent = None
        if agent is not None:  # no repair may write back what the deletion removes
            agent.reconciler.stop_drift()
        failure = _prune_all(kube, builder, root, agent, spec)
        if failure:
            return failure
    builder.stop(root)
    with contextlib.suppress(ClusterError):  # gone already
        kube.delete(kube.resource("v1", "ConfigMap"), base.inventory_namespace,
                    configmap_name(root.inventory))
    if spec is not None:
        shutil.rmtree(builder.state_dir(spec, root.shard), ignore_errors=True)
    if root.shard > 0:
        log.info("Sync %s: shard %d deleted", root.sync_key, root.shard)
        return ""
    finalizers = [f for f in meta.get("finalizers") or [] if f != syncs.FINALIZER]
    res = syncs.sync_resource(kube)
    try:
        kube.request(
            "PATCH", res.path(str(meta["namespace"]), str(meta["name"])),
            body={"metadata": {"finalizers": finalizers,
                               "resourceVersion": meta.get("resourceVersion")}},
            content_type="application/merge-patch+json", subject=f"Sync/{root.key}")
    except ClusterError as err:
        if err.status not in (404, 409):
            raise
        root.wanted = True  # changed meanwhile: look again
    log.info("Sync %s: deleted (%s)", root.key,
             "its objects pruned" if spec is not None and spec.prune else
             "its objects left in place")
    return ""


def _prune_all(kube: Kube, builder: RootBuilder, root: Root, agent: Agent | None,
               spec: syncs.SyncSpec) -> str:
    """An empty render synced: the prune deletes the whole inventory. The error, or
    "" when everything is gone."""
    catalog = agent.state.catalog if agent is not None else None
    if agent is not None:
        kube, account = agent.kube, agent.config.default_service_account
    else:  # its deletes go as its ServiceAccount all the same
        try:
            account = builder.account(spec)
            kube = builder.writer(kube, account)
        except InputError as err:
            return f"{err}; its objects are kept until it exists (or set prune: false)"
    if catalog is None and agent is not None:
        # its onDelete renderers: from the repository, when it answers
        with contextlib.suppress(OrksyncError):
            revision = agent.jobs.fetch()
            if revision is not None:
                from orksync.katalog.loader import load_repository

                catalog = load_repository(revision.path)
    root.deadline = time.monotonic() + spec.timeout
    try:
        result = prune_all(kube, root.inventory, builder.base.inventory_namespace,
                           catalog=catalog, account=account, workers=builder.base.workers,
                           source=Source.of(spec.url, spec.path),
                           on_change=lambda change: log.info("Sync %s: %s %s", root.key,
                                                             change.action.value, change.ref))
    except OrksyncError as err:
        return str(err)
    finally:
        root.deadline = None
    if result.changes.failed:
        first = result.changes.failed[0]
        return f"{len(result.changes.failed)} object(s) not deleted: {first.ref}: " \
            f"{first.message}"
    # CRDs stay (deleting one deletes every custom resource of its kind, whoever
    # wrote them), as a prune leaves them without --prune-crds
    left = [e.ref for e in result.inventory if not e.is_crd]
    if left:
        return f"{len(left)} object(s) not deleted yet, {left[0]} first"
    return ""
