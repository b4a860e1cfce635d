"""`orksync diff`: what a sync of a repository or a rendered directory would change, by a
server-side dry run, and what its prune would delete."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orksync.cli.common import (
    connect,
    directory_source,
    impersonation_of,
    local_source,
    render_repo,
)
from orksync.cli.flags import (
    add_adopt_flag,
    add_cluster_flags,
    add_namespace_flags,
    add_render_flags,
    add_sync_flags,
)
from orksync.errors import OrksyncError, UsageError

if TYPE_CHECKING:
    import argparse

    from orksync.cluster.kube import Kube

log = logging.getLogger("orksync")


def add_diff_parser(sub: Any) -> None:
    p = sub.add_parser("diff", help="show what a sync would change (server-side dry run)",
                       description="Render REPO (or read a directory written by `orksync "
                       "render`), dry-run every object against the cluster and print a "
                       "unified diff per object, and what the sync's prune and teardown "
                       "would delete (from the inventory of --name); Secret data masked. "
                       "Exit 0: no difference, 1: differences, 2: errors.")
    p.add_argument("source", type=Path,
                   help="a repository, or a directory written by `orksync render`")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="unified diffs (text, default) or one JSON document: the changes "
                        "(object, action created/changed/deleted, diff), the refused "
                        "deletions and the errors")
    add_namespace_flags(p, "objects")
    p.add_argument("--sync", default="", metavar="NAMESPACE/NAME",
                   help="compare as the Sync NAMESPACE/NAME would sync SOURCE (a working copy "
                        "of its repository): its inventory, its label and its "
                        "serviceAccountName; the inventory's recorded source is not checked")
    add_render_flags(p)
    add_cluster_flags(p)
    add_sync_flags(p)
    add_adopt_flag(p)


def cmd_diff(args: argparse.Namespace) -> int:
    """The dry run of a sync (orksync.apply.diff), against the inventory of --name: the
    same source check as the sync (a conflict is an error), the same prune plan."""
    from orksync.apply.diff import PruneInputs, diff_objects
    from orksync.apply.inventory import check_source, inventory_identity
    from orksync.rendered.directory import read_rendered
    from orksync.sync import hook_renderers, mark_for_cleanup, read_inventory

    try:
        kube = connect(args)
        try:
            shard = _diff_as_sync(args, kube) if args.sync else ""
            identity = inventory_identity(args.name, args.inventory_namespace)
            hooks = None
            catalog = None
            if (args.source / "index.yaml").is_file():
                head: dict[str, object] = {}
                rendered = read_rendered(args.source, head=head)
                source = directory_source(args.source, head)
            else:
                rendered, _, catalog = render_repo(args.source, args, kube, read_as=True)
                source = local_source(args.source)
                hooks = hook_renderers(catalog)
            stored = read_inventory(kube, args.name, args.inventory_namespace)
            if not args.adopt_inventory and not args.sync:
                check_source(stored, source, name=args.name, namespace=args.inventory_namespace)
            result = diff_objects(kube, mark_for_cleanup(rendered, identity, shard), PruneInputs(
                stored=stored, inventory=identity, allow_empty=args.allow_empty,
                prune_crds=args.prune_crds, hooks=hooks),
                impersonation=impersonation_of(args, catalog))
        finally:
            kube.close()
    except OrksyncError as err:
        log.error("error: %s", err)
        return 2
    if args.namespace is not None:
        result = result.in_namespace(args.namespace)
    if args.output == "json":
        import json

        from orksync.rendered.diff import json_document

        sys.stdout.write(json.dumps(json_document(result.object_diffs(), result.errors,
                                                  refused=result.refused), indent=2) + "\n")
    else:
        from orksync.cli.colour import colour_diff, wanted

        text = result.text()
        sys.stdout.write(colour_diff(text) if wanted(sys.stdout) else text)
    for error in result.errors[len(rendered.errors):]:  # render errors were logged already
        log.error("error: %s", error)
    log.info("diff objects=%d differ=%d refused=%d errors=%d", len(rendered.objects),
             len(result.diffs), len(result.refused), len(result.errors))
    return result.exit_code


def _diff_as_sync(args: argparse.Namespace, kube: Kube) -> str:
    """Point the diff at the Sync `args.sync`: its inventory as --name, its
    serviceAccountName as --default-service-account (unless given). Returns the label the
    Sync's agent stamps on what it writes, so that a diff of an unchanged working copy is
    empty. A working copy is another source than the Sync's URL by nature, so the caller
    leaves the inventory's source unchecked."""
    from orksync.agent.roots import sync_label_of
    from orksync.agent.syncs import API_VERSION, KIND

    namespace, _, name = args.sync.partition("/")
    if not namespace or not name or "/" in name:
        raise UsageError(f"--sync {args.sync}: expected NAMESPACE/NAME")
    found = kube.get_or_none(kube.resource(API_VERSION, KIND), namespace, name)
    if found is None:
        raise UsageError(f"--sync {args.sync}: no such Sync")
    args.name = f"{namespace}.{name}"
    if not getattr(args, "default_service_account", ""):
        args.default_service_account = str((found.get("spec") or {})
                                           .get("serviceAccountName") or "")
    return sync_label_of(f"{namespace}/{name}")
