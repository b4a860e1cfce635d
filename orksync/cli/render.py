"""`orksync render` (into a directory, or the rendered change against a git revision:
--diff-against) and `orksync validate`."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orksync.cli.common import connect, load_repo, local_source, log_render_problems, render_repo
from orksync.cli.flags import (
    add_render_flags,
    add_service_account_flag,
    add_strict_fields_flag,
    positive_int,
)
from orksync.errors import OrksyncError, UsageError
from orksync.model import RenderedSet, short_revision
from orksync.runtime.progress import current as progress

if TYPE_CHECKING:
    import argparse

    from orksync.render.parallel import DirectoryRender
    from orksync.rendered.diff import RenderedDiff

log = logging.getLogger("orksync")


def add_render_parsers(sub: Any) -> None:
    p = sub.add_parser("render", help="render a repository into manifests on disk",
                       description="Load the Katalogs, CRDs and custom resources of REPO and "
                       "write one manifest per object plus index.yaml into DIR. Offline: no "
                       "cluster is contacted (.children, .status and .cross status are empty) "
                       "unless --live; generated secret values appear as placeholders.")
    p.add_argument("repo", type=Path, help="repository directory")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="output directory (required unless --diff-against)")
    add_render_flags(p)
    add_strict_fields_flag(p)
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
    add_service_account_flag(p)
    p.add_argument("-j", "--jobs", type=positive_int, default=None,
                   help="processes that load and render (default: the CPUs available "
                        "within the cgroup's CPU quota, at most 8; a render with --live uses "
                        "one)")
    p.set_defaults(workers=8)

    p = sub.add_parser("validate", help="load and render a repository, report every error",
                       description="Like render, but writes nothing; also checks the custom "
                       "resources against their CRDs' schemas from the repository.")
    p.add_argument("repo", type=Path)
    add_render_flags(p)
    add_strict_fields_flag(p)


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

        kube = connect(args)
        try:
            rendered, revision, _ = render_repo(args.repo, args, kube, read_as=True)
        finally:
            kube.close()
        out = write_rendered(rendered, args.output, revision=revision,
                             source=local_source(args.repo))
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
    from orksync.render.parallel import render_to_directory
    from orksync.runtime.forked import default_jobs
    from orksync.source import local_revision

    jobs = args.jobs or default_jobs()
    progress().phase("load")
    catalog = load_repo(args.repo, jobs)
    revision = local_revision(args.repo)
    progress().phase("render", len(catalog.crs), "custom resources")
    written = render_to_directory(catalog, args.output, source=local_source(args.repo),
                                  revision=revision, jobs=jobs,
                                  strict_cluster_scope=args.strict_cluster_scope,
                                  strict_fields=args.strict_fields,
                                  progress=progress().advance)
    progress().finish()
    log_render_problems(written.facts)
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
        catalog = load_repo(repo)
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
        from orksync.cli.colour import colour_diff, wanted

        text = result.text()
        sys.stdout.write(colour_diff(text) if wanted(sys.stdout) else text)


def cmd_validate(args: argparse.Namespace) -> int:
    from orksync.katalog.schema import catalog_schema_errors

    rendered, _, catalog = render_repo(args.repo, args)
    # the custom resources (and the rendered children of the repository's kinds) against
    # their CRDs' schemas, as the API server would check them
    schema_errors = catalog_schema_errors(catalog, rendered.objects)
    for err in schema_errors:
        log.error("error: %s", err)
    errors = len(rendered.errors) + len(schema_errors)
    log.info("validate objects=%d errors=%d warnings=%d", len(rendered.objects),
             errors, len(rendered.warnings))
    return 1 if errors else 0
