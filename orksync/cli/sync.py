"""`orksync apply` (a rendered directory) and `orksync sync` (a repository rendered against
the cluster): both through `orksync.sync.sync_rendered`."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
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
    add_render_flags,
    add_strict_fields_flag,
    add_sync_flags,
)
from orksync.model import Change, RenderedSet, Source
from orksync.runtime.gcpause import paused_gc
from orksync.runtime.logs import log_change, summary_line
from orksync.runtime.progress import current as progress

if TYPE_CHECKING:
    import argparse
    from concurrent.futures import Future

    from orksync.apply.engine import Applier
    from orksync.apply.inventory import Inventory
    from orksync.apply.run import ApplyOptions
    from orksync.cluster.kube import Kube
    from orksync.katalog.model import Catalog
    from orksync.sync import SyncResult

log = logging.getLogger("orksync")


def add_apply_parsers(sub: Any) -> None:
    p = sub.add_parser("apply", help="apply a rendered directory to the cluster",
                       description="Apply exactly what `orksync render` wrote in DIR (every "
                       "file is checked against index.yaml first).")
    p.add_argument("dir", type=Path, help="a directory written by `orksync render`")
    add_cluster_flags(p)
    add_sync_flags(p)
    add_adopt_flag(p)

    p = sub.add_parser("sync", help="render a repository and apply it",
                       description="Load, render and apply REPO to the cluster once. Custom "
                       "resources that fail to render are reported and not applied; the "
                       "others are.")
    p.add_argument("repo", type=Path)
    p.add_argument("--once", action="store_true",
                   help="sync once and exit: what `orksync sync` always does (accepted for "
                        "scripts that say it; the long-running agent is `orksync agent`)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="also write the rendered manifests to this directory")
    add_render_flags(p)
    add_strict_fields_flag(p)
    add_cluster_flags(p)
    add_sync_flags(p)
    add_adopt_flag(p)


def cmd_apply(args: argparse.Namespace) -> int:
    """Read DIR, sync it. The cyclic collector is paused throughout (orksync.runtime.gcpause): the
    command builds tens of thousands of containers (the rendered bodies, the listed
    objects) and frees them by reference counting; its collections found nothing and cost
    a few percent of a no-change apply."""
    with paused_gc():
        return _apply_directory(args)


def _apply_directory(args: argparse.Namespace) -> int:
    from orksync.apply.engine import Applier
    from orksync.rendered.directory import IndexEntry, read_rendered

    start = time.monotonic()
    started: list[Applier] = []
    inventory: list[Future[Inventory]] = []

    def prefetch(entries: Sequence[IndexEntry]) -> None:
        """The apply's LISTs and the inventory's GET, sent once the index is read, while
        the files are read and verified. A connection that cannot be made is left to
        `_sync`, which reports it where it did before: after the directory's own errors."""
        from orksync.sync import prefetch_inventory

        try:
            kube = connect(args)
        except Exception:  # made again, and reported, by _sync
            return
        started.append(Applier(kube, _apply_options(args), on_change=_log_change,
                               impersonation=impersonation_of(args, None)))
        started[0].prefetch(entries)
        inventory.append(prefetch_inventory(kube, args.name, args.inventory_namespace))

    head: dict[str, object] = {}
    progress().phase("read")
    try:
        rendered = read_rendered(args.dir, prefetch, head=head)
    except BaseException:
        for applier in started:
            applier.discard_prefetch()
            applier.kube.close()
        raise
    for err in rendered.errors:  # recorded by the render that wrote the directory
        log.error("error (at render): %s", err)
    result = _sync(args, rendered, None, directory_source(args.dir, head),
                   applier=started[0] if started else None,
                   inventory=inventory[0] if inventory else None)
    log.info(summary_line("apply", result.changes, seconds=time.monotonic() - start))
    return _exit_code(result)


def cmd_sync(args: argparse.Namespace) -> int:
    from orksync.rendered.directory import check_output, write_rendered

    start = time.monotonic()
    if args.output is not None:
        check_output(args.output)
    kube = connect(args)
    try:
        source = local_source(args.repo)
        rendered, revision, catalog = render_repo(args.repo, args, kube)
        if args.output is not None:
            write_rendered(rendered, args.output, revision=revision, source=source)
    except BaseException:
        kube.close()
        raise
    result = _sync(args, rendered, catalog, source, revision, kube)
    log.info(summary_line("sync", result.changes, revision=revision,
                          seconds=time.monotonic() - start, errors=len(rendered.errors)))
    return _exit_code(result, len(rendered.errors))


def _sync(args: argparse.Namespace, rendered: RenderedSet, catalog: Catalog | None,
          source: Source | None, revision: str = "", kube: Kube | None = None,
          applier: Applier | None = None, inventory: Future[Inventory] | None = None
          ) -> SyncResult:
    """Apply, tear down what left Git, prune from the inventory, record the inventory
    (with `source`), then write each custom resource's status and an Event for its
    changes. Closes `kube` (`applier.kube` when an applier with its prefetch under way is
    given). The prune's refusals are logged by `sync_once`, once."""
    from orksync.sync import SyncOptions, SyncRequest, sync_rendered

    kube = applier.kube if applier is not None else kube or connect(args)
    progress().phase("apply", len(rendered.objects) + len(rendered.skipped), "objects")
    try:
        request = SyncRequest(
            rendered, inventory_name=args.name, inventory_namespace=args.inventory_namespace,
            options=SyncOptions(apply=applier.options if applier is not None else
                                _apply_options(args),
                                allow_empty=args.allow_empty, prune_crds=args.prune_crds,
                                adopt_inventory=args.adopt_inventory,
                                impersonation=impersonation_of(args, catalog)),
            source=source, on_change=_log_change, applier=applier, stored_inventory=inventory)
        result = sync_rendered(kube, request, catalog, revision=revision,
                               on_phase=progress().phase)
    finally:
        kube.close()
        progress().finish()
    return result


def _apply_options(args: argparse.Namespace) -> ApplyOptions:
    from orksync.apply.run import ApplyOptions

    return ApplyOptions(workers=args.workers, dry_run=args.dry_run)


def _log_change(change: Change) -> None:
    log_change(change, log)
    progress().advance()  # one per object of an apply (orksync.runtime.progress)


def _exit_code(result: SyncResult, render_errors: int = 0) -> int:
    """1 when an object failed, the render had errors, or an empty render was refused
    (the refusal names --allow-empty); else 0."""
    return 1 if result.changes.failed or render_errors or result.refused_empty else 0
