"""The command line's flags: the global ones every command accepts, the groups several
commands share (cluster writes, the sync root, rendering, impersonation, namespaces), and
the value types argparse checks them with."""

from __future__ import annotations

import argparse
import os


def add_global_flags(p: argparse.ArgumentParser, *, suppress: bool) -> None:
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


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """The flags of a command that writes to the cluster (--kubeconfig and --context are
    global: `add_global_flags`)."""
    p.add_argument("--workers", type=int, default=8,
                   help="objects written concurrently inside one stage (default 8)")
    p.add_argument("--dry-run", action="store_true",
                   help="send every write as a server-side dry run; change nothing")


def add_sync_flags(p: argparse.ArgumentParser) -> None:
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
    add_service_account_flag(p)


def add_service_account_flag(p: argparse.ArgumentParser) -> None:
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


def add_adopt_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adopt-inventory", action="store_true",
                   help="use the inventory of --name even though another source (repository "
                        "or path) wrote it, and record this source in it: for a repository "
                        "that moved. What this source does not render is then pruned")


def add_render_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict-cluster-scope", action="store_true",
                   default=os.environ.get("ORKSYNC_STRICT_CLUSTER_SCOPE") == "true",
                   help="a CRD entry without allowedClusterScopedKinds may create no "
                        "cluster-scoped object (default: the kinds it names itself) "
                        "[ORKSYNC_STRICT_CLUSTER_SCOPE=true]")


def add_strict_fields_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strict-fields", action="store_true",
                   default=os.environ.get("ORKSYNC_STRICT_FIELDS") == "true",
                   help="a .spec or .status path a template reads that the CRD's schema "
                        "does not have is an error of its Katalog entry (its custom "
                        "resources are not rendered), not a warning [ORKSYNC_STRICT_FIELDS=true]")


def add_namespace_flags(p: argparse.ArgumentParser, what: str) -> None:
    """-n/--namespace and -A/--all-namespaces: which namespace's `what` are shown. The
    default is every namespace: a repository, not the kubeconfig's context, decides where
    orksync's objects live."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("-n", "--namespace", dest="namespace", default=None, metavar="NS",
                       help=f"show only the {what} in namespace NS (cluster-scoped ones are "
                            "left out)")
    group.add_argument("-A", "--all-namespaces", dest="namespace", action="store_const",
                       const=None, help=f"show the {what} of every namespace (the default)")


def positive_int(text: str) -> int:
    """A whole number of at least 1 for argparse."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def seconds(text: str) -> float:
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
