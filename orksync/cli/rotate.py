"""`orksync rotate`: the managed Secrets and certificates that are due, rotated in place."""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from orksync.cli.common import connect, impersonation_of
from orksync.cli.flags import add_cluster_flags, add_service_account_flag
from orksync.errors import UsageError
from orksync.runtime.logs import log_change, summary_line

if TYPE_CHECKING:
    import argparse

log = logging.getLogger("orksync")


def add_rotate_parser(sub: Any) -> None:
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
    add_service_account_flag(p)
    add_cluster_flags(p)


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
    kube = connect(args)
    try:
        identities = Identities(kube, impersonation_of(args, None),
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
