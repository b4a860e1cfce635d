"""The operator's verbs on Sync objects: `orksync reconcile`, `suspend`, `resume`,
`history`, and the Sync rows `orksync status` shows first. Each reads and writes the Sync
object only; the agent serving it does the work (orksync.agent.controller)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from orksync.agent import syncs
from orksync.cluster.kube import Kube
from orksync.errors import ClusterError, InputError, UsageError

KubeFactory = Callable[[argparse.Namespace], Kube]


def add_sync_parsers(sub: Any, *, common_flags: tuple[Callable[[argparse.ArgumentParser],
                                                               None], ...],
                     seconds: Callable[[str], float]) -> None:
    def target(p: argparse.ArgumentParser) -> None:
        p.add_argument("target", metavar="NAMESPACE/NAME", help="the Sync")
        for add in common_flags:
            add(p)

    p = sub.add_parser("reconcile", help="fetch and sync a Sync now",
                       description="Ask the agent serving the Sync to fetch its repository "
                       "and sync now (the annotation reconcile.orksync.io/requestedAt). "
                       "With --wait: wait until it answered, print the result, exit 1 when "
                       "the sync failed.")
    target(p)
    p.add_argument("--wait", action="store_true", help="wait for the result")
    p.add_argument("--timeout", type=seconds, default=300.0,
                   help="how long --wait waits: seconds or a duration like 3m (default 5m)")
    p = sub.add_parser("suspend", help="stop syncing a Sync (spec.suspend)",
                       description="A suspended Sync applies nothing: no poll, webhook, "
                       "drift repair or prune, until `orksync resume`.")
    target(p)
    p = sub.add_parser("resume", help="resume a suspended Sync: it syncs at once")
    target(p)
    p = sub.add_parser("history", help="the last syncs of new revisions of a Sync",
                       description="The Sync's status.history: the last 10 syncs of a new "
                       "revision, newest first (revision, time, result, counts, message).")
    target(p)
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")


def _target(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise UsageError(f"{text!r}: name a Sync as NAMESPACE/NAME")
    return namespace, name


def _get(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    try:
        found = kube.get_or_none(syncs.sync_resource(kube), namespace, name)
    except ClusterError as err:
        if err.status == 404:  # the CRD is not installed
            raise UsageError(f"Sync {namespace}/{name}: the Sync CRD is not installed "
                             "(deploy/base/sync.crd.yaml)") from None
        raise
    if found is None:
        raise UsageError(f"Sync {namespace}/{name} not found")
    return dict(found)


def _patch(kube: Kube, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    res = syncs.sync_resource(kube)
    return dict(kube.request("PATCH", res.path(namespace, name), body=body,
                             content_type="application/merge-patch+json",
                             subject=f"Sync/{namespace}/{name}"))


def cmd_reconcile(args: argparse.Namespace, kube_factory: KubeFactory) -> int:
    namespace, name = _target(args.target)
    kube = kube_factory(args)
    try:
        obj = _get(kube, namespace, name)
        if (obj.get("spec") or {}).get("suspend"):
            sys.stderr.write(f"Sync {namespace}/{name} is suspended: `orksync resume "
                             f"{namespace}/{name}` first\n")
            return 1
        # unique per request, so that the agent's answer names this one
        requested = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        _patch(kube, namespace, name, {"metadata": {"annotations": {
            syncs.RECONCILE_ANNOTATION: requested}}})
        if not args.wait:
            print(f"Sync {namespace}/{name}: reconcile requested at {requested}")
            return 0
        deadline = time.monotonic() + args.timeout
        while True:
            obj = _get(kube, namespace, name)
            status = obj.get("status") or {}
            if status.get("lastHandledReconcileAt") == requested:
                break
            if time.monotonic() > deadline:
                sys.stderr.write(f"Sync {namespace}/{name}: no answer to the reconcile "
                                 f"request within {args.timeout:.0f}s (is an agent serving "
                                 "it?)\n")
                return 1
            time.sleep(0.25)
        ready = syncs.ready_condition(obj)
        revision = str(status.get("lastAttemptedRevision") or "")[:12]
        print(f"Sync {namespace}/{name}: Ready={ready.get('status', 'Unknown')} "
              f"revision={revision or '-'} {ready.get('reason', '')}: "
              f"{ready.get('message', '')}")
        return 0 if ready.get("status") == "True" else 1
    finally:
        kube.close()


def cmd_suspend(args: argparse.Namespace, kube_factory: KubeFactory, *,
                suspend: bool) -> int:
    namespace, name = _target(args.target)
    kube = kube_factory(args)
    try:
        _get(kube, namespace, name)
        _patch(kube, namespace, name, {"spec": {"suspend": suspend}})
    finally:
        kube.close()
    print(f"Sync {namespace}/{name} {'suspended' if suspend else 'resumed'}")
    return 0


def cmd_history(args: argparse.Namespace, kube_factory: KubeFactory) -> int:
    from orksync.yamls.io import dump_yaml

    namespace, name = _target(args.target)
    kube = kube_factory(args)
    try:
        obj = _get(kube, namespace, name)
    finally:
        kube.close()
    history = list((obj.get("status") or {}).get("history") or [])
    if args.output == "json":
        print(json.dumps({"sync": f"{namespace}/{name}", "history": history}, indent=2))
        return 0
    if args.output == "yaml":
        sys.stdout.write(dump_yaml({"sync": f"{namespace}/{name}", "history": history}))
        return 0
    rows = [["REVISION", "TIME", "RESULT", "COUNTS", "MESSAGE"]]
    for entry in history:
        counts = " ".join(f"{k}={v}" for k, v in sorted((entry.get("counts") or {}).items()))
        rows.append([str(entry.get("revision", ""))[:12], str(entry.get("time", "")),
                     str(entry.get("result", "")), counts or "-",
                     str(entry.get("message", ""))])
    sys.stdout.write(_table(rows))
    return 0


def sync_overview(kube: Kube) -> tuple[list[dict[str, str]], dict[str, str], str]:
    """The Syncs of the cluster for `orksync status` (every output, --watch too): their
    rows (URL, revision, Ready, last sync, message), the sync root name of each Sync's
    inventory mapped to `namespace/name` (the SYNC ROOT column of the object rows), and
    their table ("" without any Sync, or without the CRD)."""
    try:
        found = list(kube.list(syncs.sync_resource(kube)))
    except ClusterError:
        return [], {}, ""
    if not found:
        return [], {}, ""
    rows = syncs.sync_rows(found)
    labels = {}
    for obj in found:
        try:
            spec = syncs.parse_spec(obj, allow_file_urls=True)
        except InputError:
            meta = obj.get("metadata") or {}
            labels[f"{meta.get('namespace')}.{meta.get('name')}"] = syncs.key_of(obj)
            continue
        for shard in range(spec.shards):  # each shard's inventory names the Sync too
            labels[spec.unit_inventory(shard)] = syncs.key_of(obj)
    table = [["SYNC", "URL", "REVISION", "READY", "LAST SYNC", "MESSAGE"]]
    for row in rows:
        table.append([row["sync"], row["url"], row["revision"] or "-", row["ready"],
                      row["lastSync"] or "-", row["message"]])
    return rows, labels, _table(table)


def cmd_status_with_syncs(args: argparse.Namespace, kube_factory: KubeFactory,
                          status: Callable[..., int]) -> int:
    """`orksync status`: the Syncs first, then the managed custom resources, each row
    naming the Sync whose inventory lists it."""
    return status(args, kube_factory, syncs_view=sync_overview)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                   + "\n" for r in rows)
