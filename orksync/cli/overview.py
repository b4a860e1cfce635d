"""The `orksync status` and `orksync tree` commands: flags, output formats, `--watch`.

Both read the cluster only, the health from the live objects
(orksync.lifecycle.overview). `-o table` (default) prints a
kubectl-style table, `-o json` one JSON document, `-o yaml` one YAML document. `--watch`
reads again every `--interval` and prints the view again when it changed (a JSON view as
one line per change, YAML documents separated by `---`), until Ctrl-C or `--timeout`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orksync.cli.flags import add_namespace_flags, seconds

if TYPE_CHECKING:
    from orksync.cluster.kube import Kube

__all__ = ["add_overview_parsers", "cmd_status", "cmd_tree"]


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inventory-namespace",
                   default=os.environ.get("ORKSYNC_INVENTORY_NAMESPACE", "orksync-system"),
                   help="namespace of the inventory ConfigMaps (default: orksync-system)")
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table",
                   help="output format (default: table)")
    p.add_argument("-w", "--watch", action="store_true",
                   help="read again every --interval and print again when it changed")
    p.add_argument("--interval", type=seconds, default=2.0,
                   help="with --watch: time between reads (default 2s)")
    p.add_argument("--timeout", type=seconds, default=0.0,
                   help="with --watch: stop after this long (default: until interrupted)")
    p.set_defaults(workers=2)  # the connection pool of orksync.cli.common.connect


_COLUMNS_HELP = (
    "Health is read now from the live objects (one LIST per kind): a child the inventory "
    "lists but the cluster does not hold is Missing, a Secret (a tls: Secret's CA Secret "
    "too) is Current once it exists, and a custom resource takes its worst child's health. "
    "READY is the custom resource's Ready condition as its last sync wrote it. REVISION is "
    "the revision at which the custom resource was last applied, i.e. its last change: the "
    "agent applies only the custom resources a commit changed, so an untouched one keeps an "
    "older revision. SYNC ROOT is the sync root (--name of `orksync sync`, or a Sync's "
    "NAMESPACE/NAME) whose inventory lists the object; when several do, the one that wrote "
    "it last comes first.")


def add_overview_parsers(sub: Any) -> None:
    p = sub.add_parser("status", help="list the custom resources orksync manages and their "
                       "health",
                       description="Every custom resource and plain manifest the "
                       "inventories list, one row each: kind, namespace, name, sync root, "
                       "Ready, health, revision, age and message. " + _COLUMNS_HELP
                       + " Reads the cluster only.")
    p.add_argument("--name", "--sync-root", dest="name", action="append", default=[],
                   metavar="ROOT",
                   help="only the objects this sync root's inventory lists (repeatable; "
                        "default: every root)")
    add_namespace_flags(p, "custom resources and manifests")
    _add_common(p)
    p = sub.add_parser("tree", help="show a custom resource and its children with their "
                       "health",
                       description="The custom resource KIND/NAMESPACE/NAME (KIND/NAME when "
                       "cluster-scoped; KIND may carry its group: Widget.example.io) and "
                       "the children its inventory lists, each with its health (a custom "
                       "resource a custom: block created with its own children beneath "
                       "it); with "
                       "-n NS the target may be KIND/NAME, as kubectl takes it. "
                       + _COLUMNS_HELP + " Reads the cluster only.")
    p.add_argument("target", metavar="KIND/NAMESPACE/NAME")
    p.add_argument("-n", "--namespace", default=None, metavar="NS",
                   help="the namespace of the custom resource when the target is KIND/NAME")
    _add_common(p)


def _render(args: argparse.Namespace, doc: Any, text: str) -> str:
    from orksync.yamls.io import dump_yaml

    if args.output == "json":
        if args.watch:
            return json.dumps(doc, sort_keys=False) + "\n"
        return json.dumps(doc, indent=2) + "\n"
    if args.output == "yaml":
        return ("---\n" if args.watch else "") + dump_yaml(doc)
    return text


def _run(args: argparse.Namespace, kube_factory: Callable[[argparse.Namespace], Kube],
         view: Callable[[Kube], Callable[[datetime], str]]) -> int:
    """Print the view; with --watch, read again and print again when it changed. Ages
    move every second: two reads are compared as rendered at the same time."""
    kube = kube_factory(args)
    started = datetime.now(UTC)
    try:
        deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
        last = None
        while True:
            render = view(kube)
            key = render(started)
            if key != last:
                if last is not None and args.output == "table":
                    sys.stdout.write("\n")
                sys.stdout.write(render(datetime.now(UTC)))
                sys.stdout.flush()
                last = key
            if not args.watch:
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                return 0
            pause = args.interval if deadline is None else \
                min(args.interval, max(deadline - time.monotonic(), 0.0))
            time.sleep(pause)
    finally:
        kube.close()


def _coloured(args: argparse.Namespace, text: str) -> str:
    """A table's HEALTH column in colour, on a terminal (orksync.cli.colour)."""
    from orksync.cli.colour import GREEN, RED, YELLOW, colour_column, wanted

    if args.output != "table" or not wanted(sys.stdout):
        return text
    return colour_column(text, "HEALTH", {
        "Current": GREEN, "Failed": RED, "Missing": RED, "InProgress": YELLOW,
        "Terminating": YELLOW, "Unknown": YELLOW})


# the Syncs of the cluster: their rows, `namespace/name` by their inventory's sync root
# name, and their table (orksync.agent.verbs.sync_overview; the agent layer is not this
# one's to import)
SyncsView = Callable[["Kube"], tuple[list[dict[str, str]], dict[str, str], str]]


def cmd_status(args: argparse.Namespace,
               kube_factory: Callable[[argparse.Namespace], Kube],
               syncs_view: SyncsView | None = None) -> int:
    """The Syncs first (`syncs_view`, in every output and with --watch), then every
    object row, its SYNC ROOT a Sync's `namespace/name` where a Sync's inventory lists
    it."""
    import dataclasses

    from orksync.lifecycle.overview import read_rows, status_table

    def view(kube: Kube) -> Callable[[datetime], str]:
        sync_rows, labels, sync_text = syncs_view(kube) if syncs_view is not None else \
            ([], {}, "")
        rows = read_rows(kube, args.inventory_namespace, args.name)
        if args.namespace is not None:
            rows = [r for r in rows if r.ref.namespace == args.namespace]
        rows = [dataclasses.replace(r, sync=labels.get(r.root, ""),
                                    syncs=tuple(labels.get(n, n) for n in r.roots))
                for r in rows]
        head = sync_text + "\n" if sync_text else ""
        if not rows and args.output == "table":
            where = f" in namespace {args.namespace}" if args.namespace is not None else ""
            return lambda now: head + (
                f"No custom resources managed by orksync{where} (no inventory in namespace "
                f"{args.inventory_namespace} lists one).\n")
        return lambda now: _render(
            args, {"syncs": sync_rows, "items": [r.to_dict(now) for r in rows]},
            head + _coloured(args, status_table(rows, now)))

    return _run(args, kube_factory, view)


def _tree_target(args: argparse.Namespace) -> str:
    """The target with -n's namespace put in (`Widget/web -n team-a`)."""
    from orksync.errors import UsageError
    from orksync.lifecycle.overview import parse_target

    kind, ns, name = parse_target(args.target)  # a malformed target fails before any request
    if args.namespace is None:
        return str(args.target)
    if ns and ns != args.namespace:
        raise UsageError(f"{args.target}: names namespace {ns}, but -n says "
                         f"{args.namespace}")
    return f"{kind}/{args.namespace}/{name}"


def cmd_tree(args: argparse.Namespace,
             kube_factory: Callable[[argparse.Namespace], Kube],
             syncs_view: SyncsView | None = None) -> int:
    """The custom resource's tree, its SYNC ROOT a Sync's `namespace/name` where a Sync's
    inventory lists it (`syncs_view`)."""
    import dataclasses

    from orksync.lifecycle.overview import Tree, find_tree, tree_table

    target = _tree_target(args)

    def view(kube: Kube) -> Callable[[datetime], str]:
        tree = find_tree(kube, args.inventory_namespace, target)
        if syncs_view is not None:
            labels = syncs_view(kube)[1]
            row = tree.resource
            tree = Tree(dataclasses.replace(
                row, sync=labels.get(row.root, ""),
                syncs=tuple(labels.get(n, n) for n in row.roots)))
        return lambda now: _render(args, tree.to_dict(now),
                                   _coloured(args, tree_table(tree, now)))

    return _run(args, kube_factory, view)
