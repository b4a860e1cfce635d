"""What the commands share: the cluster connection, the repository loaded and rendered,
the source an inventory records, the impersonation of the children's writes."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from orksync.errors import UsageError
from orksync.model import RenderedSet, Source
from orksync.runtime.logs import log_problems
from orksync.runtime.progress import current as progress

if TYPE_CHECKING:
    from orksync.apply.impersonation import Impersonation
    from orksync.cluster.kube import Kube
    from orksync.katalog.model import Catalog

log = logging.getLogger("orksync")


def connect(args: argparse.Namespace, *, reach: bool = True) -> Kube:
    """The command's cluster connection. `reach`: checked with one request first, so that
    a server that cannot be reached fails the command at once with one line naming it and
    the kubeconfig context (Kube.reach), not once per object after the retries; a server
    that answered it and fails later is retried (orksync.cluster.retry)."""
    from orksync.cluster.kube import Kube

    if args.kubeconfig or os.environ.get("KUBECONFIG") or \
            Path("~/.kube/config").expanduser().exists() or \
            not os.environ.get("KUBERNETES_SERVICE_HOST"):
        kube = Kube.from_kubeconfig(args.kubeconfig, args.context,
                                    pool_size=max(args.workers * 2, 4))
    else:
        kube = Kube.in_cluster(pool_size=max(args.workers * 2, 4))
    if reach:
        kube.reach()
    return kube


def impersonation_of(args: argparse.Namespace, catalog: Catalog | None) -> Impersonation:
    """The --default-service-account and the repository's entries' serviceAccountName."""
    from orksync.apply.impersonation import Impersonation

    return Impersonation.of_catalog(catalog, getattr(args, "default_service_account", ""))


def local_source(repo: Path) -> Source:
    """The source of `orksync render|sync|diff REPO`: the repository's absolute path."""
    return Source.of(str(repo.resolve()))


def directory_source(out_dir: Path, head: dict[str, object]) -> Source | None:
    """The source of `orksync apply|diff DIR`: the one its index records. A directory
    rendered by an earlier orksync records none: then the inventory's source is neither
    checked nor changed (said in a warning)."""
    source = head.get("source")
    if isinstance(source, Source):
        return source
    log.warning("warning: %s records no source (rendered by an earlier orksync): the "
                "inventory's source is not checked; render again to check it",
                out_dir / "index.yaml")
    return None


def render_repo(repo: Path, args: argparse.Namespace, kube: Kube | None = None, *,
                read_as: bool = False) -> tuple[RenderedSet, str, Catalog]:
    """Load and render REPO; with `kube`, against the live cluster (orksync.render.children);
    `read_as`: each custom resource's children read as its ServiceAccount, as the sync
    writes them (`diff`, `render --live`; orksync.apply.impersonation)."""
    from orksync.render.engine import render_catalog
    from orksync.source import local_revision
    from orksync.sync import render_live

    progress().phase("load")
    catalog = load_repo(repo)
    strict = args.strict_cluster_scope
    fields = getattr(args, "strict_fields", False)  # render, validate and sync have it
    progress().phase("render", len(catalog.crs), "custom resources")
    rendered = render_catalog(catalog, strict_cluster_scope=strict, strict_fields=fields,
                              progress=progress().advance) if kube is None else \
        render_live(kube, catalog, strict_cluster_scope=strict, progress=progress().advance,
                    read_as=impersonation_of(args, catalog) if read_as else None,
                    strict_fields=fields)
    progress().finish()
    log_render_problems(rendered)
    return rendered, local_revision(repo), catalog


def load_repo(repo: Path, jobs: int = 1) -> Catalog:
    """The repository at `repo`, loaded (in `jobs` processes)."""
    from orksync.katalog.loader import load_repository

    if not repo.is_dir():
        raise UsageError(f"{repo}: not a directory")
    return load_repository(repo, jobs=jobs)


def log_render_problems(rendered: RenderedSet) -> None:
    log_problems(rendered.warnings, rendered.errors, log)
