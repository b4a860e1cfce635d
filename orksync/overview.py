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

if TYPE_CHECKING:
    from orksync.cluster.kube import Kube

__all__ = ["add_overview_parsers", "cmd_status", "cmd_tree"]


def _add_common(p: argparse.ArgumentParser, seconds: Callable[[str], float]) -> None:
    p.add_argument("--kubeconfig", default=os.environ.get("ORKSYNC_KUBECONFIG"),
                   help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; in a "
                        "pod without either: the in-cluster service account)")
    p.add_argument("--context", default=None, help="kubeconfig context to use")
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
    p.set_defaults(workers=2)  # the connection pool of orksync.cli._kube


_COLUMNS_HELP = (
    "Health is read now from the live objects (one LIST per kind): a child the inventory "
    "lists but the cluster does not hold is Missing, a Secret (a tls: Secret's CA Secret "
    "too) is Current once it exists, and a custom resource takes its worst child's health. "
    "READY is the custom resource's Ready condition as its last sync wrote it. REVISION is "
    "the revision at which the custom resource was last applied, i.e. its last change: the "
    "agent applies only the custom resources a commit changed, so an untouched one keeps an "
    "older revision. SYNC ROOT is the sync root (--name of `orksync sync`) whose inventory "
    "lists the object; when several do, the one that wrote it last comes first.")


def add_overview_parsers(sub: Any, *, seconds: Callable[[str], float]) -> None:
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
    _add_common(p, seconds)
    p = sub.add_parser("tree", help="show a custom resource and its children with their "
                       "health",
                       description="The custom resource KIND/NAMESPACE/NAME (KIND/NAME when "
                       "cluster-scoped; KIND may carry its group: Widget.example.io) and "
                       "the children its inventory lists, each with its health. "
                       + _COLUMNS_HELP + " Reads the cluster only.")
    p.add_argument("target", metavar="KIND/NAMESPACE/NAME")
    _add_common(p, seconds)


def _render(args: argparse.Namespace, doc: Any, text: str) -> str:
    from orksync.yamlio import dump_yaml

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


def cmd_status(args: argparse.Namespace,
               kube_factory: Callable[[argparse.Namespace], Kube]) -> int:
    from orksync.lifecycle.overview import read_rows, status_table

    def view(kube: Kube) -> Callable[[datetime], str]:
        rows = read_rows(kube, args.inventory_namespace, args.name)
        if not rows and args.output == "table":
            return lambda now: (f"No custom resources managed by orksync (no inventory in "
                                f"namespace {args.inventory_namespace} lists one).\n")
        return lambda now: _render(args, {"items": [r.to_dict(now) for r in rows]},
                                   status_table(rows, now))

    return _run(args, kube_factory, view)


def cmd_tree(args: argparse.Namespace,
             kube_factory: Callable[[argparse.Namespace], Kube]) -> int:
    from orksync.lifecycle.overview import find_tree, parse_target, tree_table

    parse_target(args.target)  # a malformed target fails before any request

    def view(kube: Kube) -> Callable[[datetime], str]:
        tree = find_tree(kube, args.inventory_namespace, args.target)
        return lambda now: _render(args, tree.to_dict(now), tree_table(tree, now))

    return _run(args, kube_factory, view)
