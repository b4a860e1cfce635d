"""The command line: render, validate, apply, sync, version.

Imperative shell: parses flags, calls the pipeline, prints ChangeSets and errors, maps
results to exit codes (0 success, 1 errors or failed objects, 2 usage).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orksync import __version__
from orksync.agent.command import add_agent_parser, cmd_agent
from orksync.agent.verbs import (
    add_sync_parsers,
    cmd_history,
    cmd_reconcile,
    cmd_status_with_syncs,
    cmd_suspend,
)
from orksync.errors import OrksyncError, UsageError
from orksync.gcpause import paused_gc
from orksync.overview import add_overview_parsers, cmd_status, cmd_tree
from orksync.progress import current as progress
from orksync.progress import progress_for

if TYPE_CHECKING:
    from concurrent.futures import Future

    from orksync.apply.engine import Applier, ApplyOptions
    from orksync.apply.impersonation import Impersonation
    from orksync.apply.inventory import Inventory
    from orksync.cluster.kube import Kube
    from orksync.katalog.model import Catalog
    from orksync.render.parallel import DirectoryRender
    from orksync.sync import SyncResult
from orksync.logs import log_change, setup_logging, summary_line
from orksync.model import Change, RenderedSet, Source

log = logging.getLogger("orksync")


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=os.environ.get("ORKSYNC_KUBECONFIG"),
                   help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; "
                        "in a pod without either: the in-cluster service account)")
    p.add_argument("--context", default=None, help="kubeconfig context to use")
    p.add_argument("--workers", type=int, default=8,
                   help="objects written concurrently inside one stage (default 8)")
    p.add_argument("--dry-run", action="store_true",
                   help="send every write as a server-side dry run; change nothing")


def _add_sync_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default=os.environ.get("ORKSYNC_NAME", "default"),
                   help="name of this sync root: its inventory is the ConfigMap "
                        "orksync-inventory-NAME (default: default)")
    p.add_argument("--inventory-namespace",
                   default=os.environ.get("ORKSYNC_INVENTORY_NAMESPACE", "orksync-system"),
                   help="namespace of the inventory ConfigMap (default: orksync-system)")
    p.add_argument("--allow-empty", action="store_true",
                   help="allow a render with no objects to prune everything it had")
    p.add_argument("--prune-crds", action="store_true",
                   help="also delete CRDs that left Git (deletes every custom resource of "
                        "them); off by default")
    _add_service_account_flag(p)


def _add_service_account_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--default-service-account", metavar="NAME", type=_account_name,
                   default=os.environ.get("ORKSYNC_DEFAULT_SERVICE_ACCOUNT", ""),
                   help="write the children of every custom resource whose Katalog entry "
                        "names no serviceAccountName as the ServiceAccount NAME of the custom "
                        "resource's namespace (impersonation; docs/multi-tenancy.md) "
                        "[ORKSYNC_DEFAULT_SERVICE_ACCOUNT]")


def _account_name(text: str) -> str:
    """A ServiceAccount name (or "": none) for argparse."""
    from orksync.names import subdomain_problem

    problem = subdomain_problem(text) if text else None
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _impersonation(args: argparse.Namespace, catalog: Catalog | None) -> Impersonation:
    """The --default-service-account and the repository's entries' serviceAccountName."""
    from orksync.apply.impersonation import Impersonation

    return Impersonation.of_catalog(catalog, getattr(args, "default_service_account", ""))


def _add_adopt_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adopt-inventory", action="store_true",
                   help="use the inventory of --name even though another source (repository "
                        "or path) wrote it, and record this source in it: for a repository "
                        "that moved. What this source does not render is then pruned")


def _add_render_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict-cluster-scope", action="store_true",
                   default=os.environ.get("ORKSYNC_STRICT_CLUSTER_SCOPE") == "true",
                   help="a CRD entry without allowedClusterScopedKinds may create no "
                        "cluster-scoped object (default: the kinds it names itself) "
                        "[ORKSYNC_STRICT_CLUSTER_SCOPE=true]")


def _positive(text: str) -> int:
    """A whole number of at least 1 for argparse."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def _seconds(text: str) -> float:
    """A number of seconds or a duration (`90s`, `3m`, `1h`) for argparse."""
    from orksync.durations import parse_duration

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text).total_seconds()
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orksync",
        description="Render Orkestra Katalogs from a Git repository into Kubernetes "
                    "manifests and sync them to a cluster.")
    parser.add_argument("--log-format", choices=("plain", "json"),
                        default=os.environ.get("ORKSYNC_LOG_FORMAT", "plain"))
    parser.add_argument("--log-level", default=os.environ.get("ORKSYNC_LOG_LEVEL", "info"),
                        choices=("debug", "info", "warning", "error"))
    # the logging flags are accepted after the command too (`orksync sync ... --log-level debug`)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-format", choices=("plain", "json"), default=argparse.SUPPRESS)
    common.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    original = sub.add_parser

    def add_parser(name: str, **kwargs: object) -> argparse.ArgumentParser:
        return original(name, parents=[common], **kwargs)  # type: ignore[arg-type]

    sub.add_parser = add_parser  # type: ignore[method-assign]

    p = sub.add_parser("render", help="render a repository into manifests on disk",
                       description="Load the Katalogs, CRDs and custom resources of REPO and "
                       "write one manifest per object plus index.yaml into DIR. Offline: no "
                       "cluster is contacted (.children, .status and .cross status are empty) "
                       "unless --live; generated secret values appear as placeholders.")
    p.add_argument("repo", type=Path, help="repository directory")
    p.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    _add_render_flags(p)
    p.add_argument("--live", action="store_true",
                   help="read the cluster (read only) for .children, the custom resources' "
                        "own .status and .cross status, as `orksync sync` does")
    p.add_argument("--kubeconfig", default=os.environ.get("ORKSYNC_KUBECONFIG"),
                   help="kubeconfig file for --live (default: $KUBECONFIG, then "
                        "~/.kube/config)")
    p.add_argument("--context", default=None, help="kubeconfig context for --live")
    _add_service_account_flag(p)
    p.add_argument("-j", "--jobs", type=_positive, default=None,
                   help="processes that load and render (default: the CPUs available "
                        "within the cgroup's CPU quota, at most 8; a render with --live uses "
                        "one)")
    p.set_defaults(workers=8)

    p = sub.add_parser("validate", help="load and render a repository, report every error",
                       description="Like render, but writes nothing; also checks the custom "
                       "resources against their CRDs' schemas from the repository.")
    p.add_argument("repo", type=Path)
    _add_render_flags(p)

    p = sub.add_parser("apply", help="apply a rendered directory to the cluster",
                       description="Apply exactly what `orksync render` wrote in DIR (every "
                       "file is checked against index.yaml first).")
    p.add_argument("dir", type=Path, help="a directory written by `orksync render`")
    _add_cluster_flags(p)
    _add_sync_flags(p)
    _add_adopt_flag(p)

    p = sub.add_parser("sync", help="render a repository and apply it",
                       description="Load, render and apply REPO to the cluster once. Custom "
                       "resources that fail to render are reported and not applied; the "
                       "others are.")
    p.add_argument("repo", type=Path)
    p.add_argument("--once", action="store_true", required=True,
                   help="sync once and exit (the long-running agent is `orksync agent`)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="also write the rendered manifests to this directory")
    _add_render_flags(p)
    _add_cluster_flags(p)
    _add_sync_flags(p)
    _add_adopt_flag(p)

    p = sub.add_parser("diff", help="show what a sync would change (server-side dry run)",
                       description="Render REPO (or read a directory written by `orksync "
                       "render`), dry-run every object against the cluster and print a "
                       "unified diff per object, and what the sync's prune and teardown "
                       "would delete (from the inventory of --name); Secret data masked. "
                       "Exit 0: no difference, 1: differences, 2: errors.")
    p.add_argument("source", type=Path,
                   help="a repository, or a directory written by `orksync render`")
    _add_render_flags(p)
    _add_cluster_flags(p)
    _add_sync_flags(p)
    _add_adopt_flag(p)

    p = sub.add_parser("rotate", help="rotate the managed Secrets and certificates that are due",
                       description="Check every Secret managed by orksync that carries a "
                       "rotation or TLS annotation against the clock and rotate the due ones "
                       "in place (new values, same Secret). Needs no repository: the "
                       "generators are recorded on the Secret. Suitable for a CronJob.")
    p.add_argument("--force", action="append", default=[], metavar="NAMESPACE/NAME",
                   help="rotate this Secret now, due or not (repeatable)")
    p.add_argument("--namespace", default="", help="only Secrets in this namespace")
    p.add_argument("--inventory-namespace",
                   default=os.environ.get("ORKSYNC_INVENTORY_NAMESPACE", "orksync-system"),
                   help="where the inventories are (default: orksync-system): each records "
                        "the ServiceAccount a custom resource's Secrets are written as")
    _add_service_account_flag(p)
    _add_cluster_flags(p)

    add_agent_parser(sub, common_flags=(_add_cluster_flags, _add_sync_flags, _add_render_flags,
                                        _add_adopt_flag),
                     seconds=_seconds)

    add_overview_parsers(sub, seconds=_seconds)
    add_sync_parsers(sub, common_flags=(_add_cluster_flags,), seconds=_seconds)

    sub.add_parser("version", help="print the version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The program. Called without `argv` (the console script, `python -m orksync`), a
    command other than `agent` ends the process when it is done (`_exit_now`); called with
    `argv` (tests, embedding), it returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # the agent's plain lines carry a timestamp (a long-running log, read later); a one-shot
    # command's do not (its summary line says how long it took; `--log-format json` has them)
    setup_logging(level=args.log_level, fmt=args.log_format,
                  timestamps=args.command == "agent")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        with progress_for(args.log_format, wanted=args.command in ("render", "apply", "sync")):
            code = int(COMMANDS[args.command](args))
    except OrksyncError as err:
        log.error("error: %s", err)
        code = err.exit_code
    except KeyboardInterrupt:
        code = 130
    if argv is None and args.command != "agent":
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a one-shot command without the interpreter's teardown: the process is over,
    and clearing every module and running a last collection is work nobody sees the
    result of, at the end of every command. Logs and output are flushed first;
    a stream that cannot be flushed (a closed pipe) is left to the interpreter's own exit,
    which reports it. Nothing orksync runs registers exit handlers; the threads still
    alive here are the prefetch's daemon threads, idle."""
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def cmd_version(args: argparse.Namespace) -> int:
    print(f"orksync {__version__}")
    return 0


def _local_source(repo: Path) -> Source:
    """The source of `orksync render|sync|diff REPO`: the repository's absolute path."""
    return Source.of(str(repo.resolve()))


def _directory_source(out_dir: Path, head: dict[str, object]) -> Source | None:
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


def _render(repo: Path, args: argparse.Namespace, kube: Kube | None = None, *,
            read_as: bool = False) -> tuple[RenderedSet, str, Catalog]:
    """Load and render REPO; with `kube`, against the live cluster (orksync.render.children);
    `read_as`: each custom resource's children read as its ServiceAccount, as the sync
    writes them (`diff`, `render --live`; orksync.apply.impersonation)."""
    from orksync.render.engine import render_catalog
    from orksync.source import local_revision
    from orksync.sync import render_live

    progress().phase("load")
    catalog = _load(repo)
    strict = args.strict_cluster_scope
    progress().phase("render", len(catalog.crs), "custom resources")
    rendered = render_catalog(catalog, strict_cluster_scope=strict,
                              progress=progress().advance) if kube is None else \
        render_live(kube, catalog, strict_cluster_scope=strict, progress=progress().advance,
                    read_as=_impersonation(args, catalog) if read_as else None)
    progress().finish()
    _log_problems(rendered)
    return rendered, local_revision(repo), catalog


def _load(repo: Path, jobs: int = 1) -> Catalog:
    """The repository at `repo`, loaded (in `jobs` processes)."""
    from orksync.katalog.loader import load_repository

    if not repo.is_dir():
        raise UsageError(f"{repo}: not a directory")
    return load_repository(repo, jobs=jobs)


def _log_problems(rendered: RenderedSet) -> None:
    for warning in rendered.warnings:
        log.warning("warning: %s", warning)
    for err in rendered.errors:
        log.error("error: %s", err)


def cmd_render(args: argparse.Namespace) -> int:
    start = time.monotonic()
    if args.live:
        from orksync.rendered.directory import write_rendered

        kube = _kube(args)
        try:
            rendered, revision, _ = _render(args.repo, args, kube, read_as=True)
        finally:
            kube.close()
        out = write_rendered(rendered, args.output, revision=revision,
                             source=_local_source(args.repo))
        count = len(rendered.objects)
    else:
        written, revision = _render_offline(args)
        out, count, rendered = written.out_dir, written.count, written.facts
    log.info("render%s objects=%d errors=%d into %s in %.1fs",
             f" rev={revision[:7]}" if revision else "", count,
             len(rendered.errors), out, time.monotonic() - start)
    return 1 if rendered.errors else 0


def _render_offline(args: argparse.Namespace) -> tuple[DirectoryRender, str]:
    """`orksync render` without --live: loaded, rendered and written in `--jobs`
    processes (orksync.render.parallel), the same files as one process writes."""
    from orksync.forked import default_jobs
    from orksync.render.parallel import render_to_directory
    from orksync.source import local_revision

    jobs = args.jobs or default_jobs()
    progress().phase("load")
    catalog = _load(args.repo, jobs)
    revision = local_revision(args.repo)
    progress().phase("render", len(catalog.crs), "custom resources")
    written = render_to_directory(catalog, args.output, source=_local_source(args.repo),
                                  revision=revision, jobs=jobs,
                                  strict_cluster_scope=args.strict_cluster_scope,
                                  progress=progress().advance)
    progress().finish()
    _log_problems(written.facts)
    return written, revision


def cmd_validate(args: argparse.Namespace) -> int:
    from orksync.katalog.schema import catalog_schema_errors

    rendered, _, catalog = _render(args.repo, args)
    # the custom resources (and the rendered children of the repository's kinds) against
    # their CRDs' schemas, as the API server would check them
    schema_errors = catalog_schema_errors(catalog, rendered.objects)
    for err in schema_errors:
        log.error("error: %s", err)
    errors = len(rendered.errors) + len(schema_errors)
    log.info("validate objects=%d errors=%d warnings=%d", len(rendered.objects),
             errors, len(rendered.warnings))
    return 1 if errors else 0


def _kube(args: argparse.Namespace) -> Kube:
    from orksync.cluster.kube import Kube

    if args.kubeconfig or os.environ.get("KUBECONFIG") or \
            Path("~/.kube/config").expanduser().exists() or \
            not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return Kube.from_kubeconfig(args.kubeconfig, args.context,
                                    pool_size=max(args.workers * 2, 4))
    return Kube.in_cluster(pool_size=max(args.workers * 2, 4))


def _apply_options(args: argparse.Namespace) -> ApplyOptions:
    from orksync.apply.engine import ApplyOptions

    return ApplyOptions(workers=args.workers, dry_run=args.dry_run)


def _log_change(change: Change) -> None:
    log_change(change, log)
    progress().advance()  # one per object of an apply (orksync.progress)


def _sync(args: argparse.Namespace, rendered: RenderedSet, catalog: Catalog | None,
          source: Source | None, revision: str = "", kube: Kube | None = None,
          applier: Applier | None = None, inventory: Future[Inventory] | None = None
          ) -> SyncResult:
    """Apply, tear down what left Git, prune from the inventory, record the inventory
    (with `source`), then write each custom resource's status and an Event for its
    changes. Closes `kube` (`applier.kube` when an applier with its prefetch under way is
    given). The prune's refusals are logged by `sync_once`, once."""
    from orksync.sync import SyncOptions, sync_rendered

    kube = applier.kube if applier is not None else kube or _kube(args)
    progress().phase("apply", len(rendered.objects) + len(rendered.skipped), "objects")
    try:
        result = sync_rendered(
            kube, rendered, catalog, inventory_name=args.name,
            inventory_namespace=args.inventory_namespace,
            options=SyncOptions(apply=applier.options if applier is not None else
                                _apply_options(args),
                                allow_empty=args.allow_empty, prune_crds=args.prune_crds,
                                adopt_inventory=args.adopt_inventory,
                                impersonation=_impersonation(args, catalog)),
            source=source, revision=revision, on_change=_log_change, applier=applier,
            stored_inventory=inventory, on_phase=progress().phase)
    finally:
        kube.close()
        progress().finish()
    return result


def _exit_code(result: SyncResult, render_errors: int = 0) -> int:
    """1 when an object failed, the render had errors, or an empty render was refused
    (the refusal names --allow-empty); else 0."""
    return 1 if result.changes.failed or render_errors or result.refused_empty else 0


def cmd_apply(args: argparse.Namespace) -> int:
    """Read DIR, sync it. The cyclic collector is paused throughout (orksync.gcpause): the
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
            kube = _kube(args)
        except Exception:  # made again, and reported, by _sync
            return
        started.append(Applier(kube, _apply_options(args), on_change=_log_change,
                               impersonation=_impersonation(args, None)))
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
    result = _sync(args, rendered, None, _directory_source(args.dir, head),
                   applier=started[0] if started else None,
                   inventory=inventory[0] if inventory else None)
    log.info(summary_line("apply", result.changes, seconds=time.monotonic() - start))
    return _exit_code(result)


def cmd_sync(args: argparse.Namespace) -> int:
    from orksync.rendered.directory import write_rendered

    start = time.monotonic()
    kube = _kube(args)
    try:
        source = _local_source(args.repo)
        rendered, revision, catalog = _render(args.repo, args, kube)
        if args.output is not None:
            write_rendered(rendered, args.output, revision=revision, source=source)
    except BaseException:
        kube.close()
        raise
    result = _sync(args, rendered, catalog, source, revision, kube)
    log.info(summary_line("sync", result.changes, revision=revision,
                          seconds=time.monotonic() - start, errors=len(rendered.errors)))
    return _exit_code(result, len(rendered.errors))


def cmd_rotate(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from orksync.apply.impersonation import Identities
    from orksync.apply.secrets import rotate_due
    from orksync.secrets.random import CryptoRandom
    from orksync.sync import recorded_accounts

    for name in args.force:
        if name.count("/") != 1:
            raise UsageError(f"--force {name}: expected NAMESPACE/NAME")
    start = time.monotonic()
    kube = _kube(args)
    try:
        identities = Identities(kube, _impersonation(args, None),
                                recorded=recorded_accounts(kube, args.inventory_namespace))
        changes = rotate_due(kube, now=datetime.now(UTC), random=CryptoRandom(),
                             dry_run=args.dry_run, force=set(args.force),
                             namespace=args.namespace, writer=identities.kube_for_owner)
    finally:
        kube.close()
    for change in changes.changes:
        log_change(change, log)
    log.info(summary_line("rotate", changes, seconds=time.monotonic() - start))
    return 1 if changes.failed else 0


def cmd_diff(args: argparse.Namespace) -> int:
    """The dry run of a sync (orksync.apply.diff), against the inventory of --name: the
    same source check as the sync (a conflict is an error), the same prune plan."""
    from orksync.apply.diff import PruneInputs, diff_objects
    from orksync.apply.inventory import check_source, inventory_identity
    from orksync.rendered.directory import read_rendered
    from orksync.sync import hook_renderers, mark_for_cleanup, read_inventory

    identity = inventory_identity(args.name, args.inventory_namespace)
    try:
        kube = _kube(args)
        try:
            hooks = None
            catalog = None
            if (args.source / "index.yaml").is_file():
                head: dict[str, object] = {}
                rendered = read_rendered(args.source, head=head)
                source = _directory_source(args.source, head)
            else:
                rendered, _, catalog = _render(args.source, args, kube, read_as=True)
                source = _local_source(args.source)
                hooks = hook_renderers(catalog)
            stored = read_inventory(kube, args.name, args.inventory_namespace)
            if not args.adopt_inventory:
                check_source(stored, source, name=args.name, namespace=args.inventory_namespace)
            result = diff_objects(kube, mark_for_cleanup(rendered, identity), PruneInputs(
                stored=stored, inventory=identity, allow_empty=args.allow_empty,
                prune_crds=args.prune_crds, hooks=hooks),
                impersonation=_impersonation(args, catalog))
        finally:
            kube.close()
    except OrksyncError as err:
        log.error("error: %s", err)
        return 2
    sys.stdout.write(result.text())
    for error in result.errors[len(rendered.errors):]:  # render errors were logged already
        log.error("error: %s", error)
    log.info("diff objects=%d differ=%d refused=%d errors=%d", len(rendered.objects),
             len(result.diffs), len(result.refused), len(result.errors))
    return result.exit_code


COMMANDS = {
    "render": cmd_render,
    "validate": cmd_validate,
    "agent": lambda args: cmd_agent(args, _kube(args)),
    "apply": cmd_apply,
    "diff": cmd_diff,
    "sync": cmd_sync,
    "rotate": cmd_rotate,
    "status": lambda args: cmd_status_with_syncs(args, _kube, cmd_status),
    "reconcile": lambda args: cmd_reconcile(args, _kube),
    "suspend": lambda args: cmd_suspend(args, _kube, suspend=True),
    "resume": lambda args: cmd_suspend(args, _kube, suspend=False),
    "history": lambda args: cmd_history(args, _kube),
    "tree": lambda args: cmd_tree(args, _kube),
    "version": cmd_version,
}


if __name__ == "__main__":
    sys.exit(main())
