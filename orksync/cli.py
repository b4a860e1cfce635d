"""The command line: render (and the rendered change against a git revision), validate,
apply, sync, diff, rotate, agent, status, tree, completion, version.

Imperative shell: parses flags, calls the pipeline, prints ChangeSets and errors, maps
results to exit codes (0 success, 1 errors or failed objects, 2 usage). The global flags
(`_add_global_flags`) are accepted before and after every command.
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
    sync_overview,
)
from orksync.errors import OrksyncError, UsageError
from orksync.gcpause import paused_gc
from orksync.install import add_install_parser, cmd_install
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
    from orksync.rendered.diff import RenderedDiff
    from orksync.sync import SyncResult
from orksync.logs import log_change, log_problems, setup_logging, summary_line
from orksync.model import Change, RenderedSet, Source, short_revision

log = logging.getLogger("orksync")


def _add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command that writes to the cluster (--kubeconfig and --context are
    global: `_add_global_flags`)."""
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


def _add_strict_fields_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict-fields", action="store_true",
                   default=os.environ.get("ORKSYNC_STRICT_FIELDS") == "true",
                   help="a .spec or .status path a template reads that the CRD's schema "
                        "does not have is an error of its Katalog entry (its custom "
                        "resources are not rendered), not a warning [ORKSYNC_STRICT_FIELDS=true]")


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


def _add_global_flags(p: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The flags every command accepts, before or after its name (`orksync --kubeconfig K
    status` and `orksync status --kubeconfig K`). On the top-level parser they carry the
    defaults; on each command's (`suppress`) they default to nothing, so a flag given
    before the command is not overwritten by the command's default."""
    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    group = p.add_argument_group("global flags")
    group.add_argument("--kubeconfig", default=default(os.environ.get("ORKSYNC_KUBECONFIG")),
                       help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; "
                            "in a pod without either: the in-cluster service account) "
                            "[ORKSYNC_KUBECONFIG]")
    group.add_argument("--context", default=default(None), help="kubeconfig context to use")
    group.add_argument("--log-format", choices=("plain", "json"),
                       default=default(os.environ.get("ORKSYNC_LOG_FORMAT", "plain")),
                       help="plain lines or JSON lines (default: plain) [ORKSYNC_LOG_FORMAT]")
    group.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                       default=default(os.environ.get("ORKSYNC_LOG_LEVEL", "info")),
                       help="default: info [ORKSYNC_LOG_LEVEL]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orksync",
        description="Render Orkestra Katalogs from a Git repository into Kubernetes "
                    "manifests and sync them to a cluster.")
    parser.add_argument("--version", action="version", version=f"orksync {__version__}")
    _add_global_flags(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _add_global_flags(common, suppress=True)
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
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="output directory (required unless --diff-against)")
    _add_render_flags(p)
    _add_strict_fields_flag(p)
    p.add_argument("--diff-against", metavar="REV", default=None,
                   help="instead of writing: render REPO as the git revision REV holds it "
                        "(read from the repository's objects, nothing checked out) and print "
                        "the change to the working tree's render, per object, Secret values "
                        "masked; exit 0 no difference, 1 differences, 2 errors")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="with --diff-against: unified diffs (text, default), a pull "
                        "request comment (markdown) or JSON")
    p.add_argument("--live", action="store_true",
                   help="read the cluster (read only) for .children, the custom resources' "
                        "own .status and .cross status, as `orksync sync` does")
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
    _add_strict_fields_flag(p)

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
    p.add_argument("--once", action="store_true",
                   help="sync once and exit: what `orksync sync` always does (accepted for "
                        "scripts that say it; the long-running agent is `orksync agent`)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="also write the rendered manifests to this directory")
    _add_render_flags(p)
    _add_strict_fields_flag(p)
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
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="unified diffs (text, default) or one JSON document: the changes "
                        "(object, action created/changed/deleted, diff), the refused "
                        "deletions and the errors")
    _add_namespace_flags(p, "objects")
    p.add_argument("--sync", default="", metavar="NAMESPACE/NAME",
                   help="compare as the Sync NAMESPACE/NAME would sync SOURCE (a working copy "
                        "of its repository): its inventory, its label and its "
                        "serviceAccountName; the inventory's recorded source is not checked")
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
    p.add_argument("-n", "--namespace", default="", help="only Secrets in this namespace")
    p.add_argument("--inventory-namespace",
                   default=os.environ.get("ORKSYNC_INVENTORY_NAMESPACE", "orksync-system"),
                   help="where the inventories are (default: orksync-system): each records "
                        "the ServiceAccount a custom resource's Secrets are written as")
    _add_service_account_flag(p)
    _add_cluster_flags(p)

    add_agent_parser(sub, common_flags=(_add_cluster_flags, _add_sync_flags, _add_render_flags,
                                        _add_adopt_flag),
                     seconds=_seconds)

    add_overview_parsers(sub, seconds=_seconds, namespace_flags=_add_namespace_flags)

    add_install_parser(sub, cluster_flags=_add_cluster_flags)
    add_sync_parsers(sub, common_flags=(_add_cluster_flags,), seconds=_seconds)

    sub.add_parser("version", help="print the version")

    p = sub.add_parser("completion", help="print a shell completion script",
                       description="Print the completion script of SHELL for orksync's "
                       "commands and flags. bash: `source <(orksync completion bash)`; zsh: "
                       "`orksync completion zsh > \"${fpath[1]}/_orksync\"`; fish: `orksync "
                       "completion fish > ~/.config/fish/completions/orksync.fish`.")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    return parser


def _add_namespace_flags(p: argparse.ArgumentParser, what: str) -> None:
    """-n/--namespace and -A/--all-namespaces: which namespace's `what` are shown. The
    default is every namespace: a repository, not the kubeconfig's context, decides where
    orksync's objects live."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--namespace", dest="namespace", default=None, metavar="NS",
                       help=f"show only the {what} in namespace NS (cluster-scoped ones are "
                            "left out)")
    group.add_argument("-A", "--all-namespaces", dest="namespace", action="store_const",
                       const=None, help=f"show the {what} of every namespace (the default)")


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
    fields = getattr(args, "strict_fields", False)  # render, validate and sync have it
    progress().phase("render", len(catalog.crs), "custom resources")
    rendered = render_catalog(catalog, strict_cluster_scope=strict, strict_fields=fields,
                              progress=progress().advance) if kube is None else \
        render_live(kube, catalog, strict_cluster_scope=strict, progress=progress().advance,
                    read_as=_impersonation(args, catalog) if read_as else None,
                    strict_fields=fields)
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
    log_problems(rendered.warnings, rendered.errors, log)


def cmd_render(args: argparse.Namespace) -> int:
    from orksync.rendered.directory import check_output

    if args.diff_against is not None:
        if args.output is not None or args.live:
            raise UsageError("--diff-against compares two offline renders and writes "
                             "nothing: leave out -o and --live")
        return _render_diff(args)
    if args.format != "text":
        raise UsageError("--format applies to --diff-against only")
    if args.output is None:
        raise UsageError("render needs -o DIR (the output directory), or --diff-against REV")
    start = time.monotonic()
    check_output(args.output)
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
             f" rev={short_revision(revision)}" if revision else "", count,
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
                                  strict_fields=args.strict_fields,
                                  progress=progress().advance)
    progress().finish()
    _log_problems(written.facts)
    return written, revision


def _render_diff(args: argparse.Namespace) -> int:
    """`orksync render REPO --diff-against REV`: REPO's working tree and REPO as the git
    revision REV holds it, each loaded and rendered offline as `orksync render` renders,
    compared per object (orksync.rendered.diff). REV's files are read from the
    repository's objects into a temporary directory (orksync.source.revision_tree). An
    error that stops the comparison (no such revision, no git repository) is printed in
    the chosen format too, so a CI job posts it."""
    import tempfile

    from orksync.render.engine import render_catalog
    from orksync.rendered.diff import RenderedDiff, compare_rendered
    from orksync.source.revision_tree import export_revision

    start = time.monotonic()

    def render(repo: Path) -> RenderedSet:
        progress().phase("load")
        catalog = _load(repo)
        progress().phase("render", len(catalog.crs), "custom resources")
        return render_catalog(catalog, strict_cluster_scope=args.strict_cluster_scope,
                              progress=progress().advance)

    sha = ""
    try:
        if not args.repo.is_dir():
            raise UsageError(f"{args.repo}: not a directory")
        with tempfile.TemporaryDirectory(prefix="orksync-diff-against-") as tmp:
            base = export_revision(args.repo, args.diff_against, Path(tmp))
            sha = base.sha
            if not base.existed:
                log.warning("warning: %s does not exist at %s: every object counts as "
                            "created", args.repo, args.diff_against)
            old = render(Path(tmp))
        new = render(args.repo)
        progress().finish()
    except OrksyncError as err:
        progress().finish()
        result = RenderedDiff(errors=[str(err)])
    else:
        short = short_revision(sha)
        result = compare_rendered(old, new, old_label=short, new_label="worktree",
                                  old_name=f"at {short}", new_name="working tree")
    _print_render_diff(args, result, sha)
    for error in result.errors:
        log.error("error: %s", error)
    counts = result.counts()
    log.info("render diff against=%s created=%d changed=%d deleted=%d errors=%d in %.1fs",
             short_revision(sha) if sha else args.diff_against, counts["created"],
             counts["changed"], counts["deleted"], len(result.errors),
             time.monotonic() - start)
    return result.exit_code


def _print_render_diff(args: argparse.Namespace, result: RenderedDiff, sha: str) -> None:
    """`result` on stdout in `--format`: text (coloured on a terminal), markdown, json."""
    import json

    from orksync.rendered.diff import json_document, markdown
    from orksync.source import local_revision

    if args.format == "json":
        sys.stdout.write(json.dumps(json_document(
            result.changes, result.errors, revision=sha,
            withheld=[str(r) for r in result.withheld]), indent=2) + "\n")
    elif args.format == "markdown":
        head = local_revision(args.repo) if args.repo.is_dir() else ""
        title = (f"orksync: rendered change from {short_revision(sha) or args.diff_against}"
                 f" to {short_revision(head) if head else 'the working tree'}")
        sys.stdout.write(markdown(result.changes, result.errors, title=title,
                                  notes=result.notes()))
    else:
        from orksync.colour import colour_diff, wanted

        text = result.text()
        sys.stdout.write(colour_diff(text) if wanted(sys.stdout) else text)


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


def _kube(args: argparse.Namespace, *, reach: bool = True) -> Kube:
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
    from orksync.sync import SyncOptions, SyncRequest, sync_rendered

    kube = applier.kube if applier is not None else kube or _kube(args)
    progress().phase("apply", len(rendered.objects) + len(rendered.skipped), "objects")
    try:
        request = SyncRequest(
            rendered, inventory_name=args.name, inventory_namespace=args.inventory_namespace,
            options=SyncOptions(apply=applier.options if applier is not None else
                                _apply_options(args),
                                allow_empty=args.allow_empty, prune_crds=args.prune_crds,
                                adopt_inventory=args.adopt_inventory,
                                impersonation=_impersonation(args, catalog)),
            source=source, on_change=_log_change, applier=applier, stored_inventory=inventory)
        result = sync_rendered(kube, request, catalog, revision=revision,
                               on_phase=progress().phase)
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
    from orksync.rendered.directory import check_output, write_rendered

    start = time.monotonic()
    if args.output is not None:
        check_output(args.output)
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


def cmd_diff(args: argparse.Namespace) -> int:
    """The dry run of a sync (orksync.apply.diff), against the inventory of --name: the
    same source check as the sync (a conflict is an error), the same prune plan."""
    from orksync.apply.diff import PruneInputs, diff_objects
    from orksync.apply.inventory import check_source, inventory_identity
    from orksync.rendered.directory import read_rendered
    from orksync.sync import hook_renderers, mark_for_cleanup, read_inventory

    try:
        kube = _kube(args)
        try:
            shard = _diff_as_sync(args, kube) if args.sync else ""
            identity = inventory_identity(args.name, args.inventory_namespace)
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
            if not args.adopt_inventory and not args.sync:
                check_source(stored, source, name=args.name, namespace=args.inventory_namespace)
            result = diff_objects(kube, mark_for_cleanup(rendered, identity, shard), PruneInputs(
                stored=stored, inventory=identity, allow_empty=args.allow_empty,
                prune_crds=args.prune_crds, hooks=hooks),
                impersonation=_impersonation(args, catalog))
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
        from orksync.colour import colour_diff, wanted

        text = result.text()
        sys.stdout.write(colour_diff(text) if wanted(sys.stdout) else text)
    for error in result.errors[len(rendered.errors):]:  # render errors were logged already
        log.error("error: %s", error)
    log.info("diff objects=%d differ=%d refused=%d errors=%d", len(rendered.objects),
             len(result.diffs), len(result.refused), len(result.errors))
    return result.exit_code


def cmd_completion(args: argparse.Namespace) -> int:
    """The completion script of `args.shell`, made by shtab from this parser: every
    command, every flag and the choices of each."""
    import shtab

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


COMMANDS = {
    "render": cmd_render,
    "validate": cmd_validate,
    "agent": lambda args: cmd_agent(args, _kube(args, reach=False)),
    "apply": cmd_apply,
    "diff": cmd_diff,
    "sync": cmd_sync,
    "rotate": cmd_rotate,
    "status": lambda args: cmd_status_with_syncs(args, _kube, cmd_status),
    "reconcile": lambda args: cmd_reconcile(args, _kube),
    "suspend": lambda args: cmd_suspend(args, _kube, suspend=True),
    "resume": lambda args: cmd_suspend(args, _kube, suspend=False),
    "history": lambda args: cmd_history(args, _kube),
    "tree": lambda args: cmd_tree(args, _kube, syncs_view=sync_overview),
    "install": lambda args: cmd_install(args, _kube),
    "version": cmd_version,
    "completion": cmd_completion,
}


if __name__ == "__main__":
    sys.exit(main())
