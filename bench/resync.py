"""No-change resync of 1,000 objects: apply once, then time the second apply.
`orksync apply DIR` against the same kubectl command (alternating, 3 runs each), plus
orksync's API requests per unchanged object counted at the client (`kube.requests`, the
in-process Applier) and at the server (`apiserver_request_total` before/after).
Issue targets: ratio at most 0.1; at most 0.05 requests per unchanged object.

    python bench/resync.py [--runs 3] [--objects 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

from orksync.apply.engine import Applier
from orksync.apply.inventory import inventory_identity
from orksync.apply.run import ApplyOptions
from orksync.model import Action
from orksync.rendered.directory import read_rendered
from orksync.sync import SyncRequest, mark_for_cleanup, sync_once

TARGET_RATIO = 0.1
TARGET_PER_OBJECT = 0.05


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else f"MISSED by {value - target:.3f} ({value / target:.1f}x)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--no-record", "--no-doc", dest="no_doc", action="store_true",
                        help="do not append to bench/results/resync.jsonl")
    args = parser.parse_args()
    n = args.objects

    with common.environment() as env:
        dirs = {}
        for client, prefix in (("orksync", "ro"), ("kubectl", "rk")):
            common.create_namespaces(env, common.namespaces(prefix))
            dirs[client] = common.render(common.make_objects(prefix, n), env.work / prefix)
        first_o = common.run_orksync(env, dirs["orksync"], "bench-ro")
        first_k = common.run_kubectl(env, dirs["kubectl"])
        print(f"first apply: orksync {first_o.seconds:.2f}s kubectl {first_k.seconds:.2f}s",
              file=sys.stderr)

        rows, ratios, server_counts = [], [], []
        for run in range(1, args.runs + 1):
            order = ("orksync", "kubectl") if run % 2 else ("kubectl", "orksync")
            times: dict[str, float] = {}
            reqs: dict[str, int] = {}
            for client in order:
                before = common.server_requests(env)
                if client == "orksync":
                    timed = common.run_orksync(env, dirs["orksync"], "bench-ro")
                    line = common.summary_line(timed.output)
                    if f"unchanged={n}" not in line:
                        raise RuntimeError(f"resync was not a no-op: {line}")
                else:
                    timed = common.run_kubectl(env, dirs["kubectl"])
                after = common.server_requests(env)
                reqs[client], by = common.request_delta(before, after)
                if client == "orksync":
                    server_counts.append((reqs[client], by))
                times[client] = timed.seconds
                print(f"run {run} {client} {timed.seconds:.2f}s cpu={timed.cpu:.2f}s "
                      f"requests={reqs[client]}",
                      file=sys.stderr)
            r = common.ratio(times["orksync"], times["kubectl"])
            ratios.append(r)
            rows.append((run, " then ".join(order), times["orksync"], times["kubectl"], r,
                         reqs["orksync"], reqs["kubectl"]))

        # in process: the Applier alone (no CLI start-up, no directory read, no inventory)
        # the bodies `orksync apply --name bench-ro` sends: plain objects get its label and
        # finalizer, every object the annotation naming its inventory
        objs = mark_for_cleanup(common.RenderedSet(
            objects=tuple(common.make_objects("ro", n))), inventory_identity("bench-ro")).objects
        kube = env.kube
        before_srv = common.server_requests(env)
        before_cli = kube.requests
        start = time.perf_counter()
        changes = Applier(kube, ApplyOptions(workers=8)).apply(objs)
        applier_s = time.perf_counter() - start
        client_reqs = kube.requests - before_cli
        server_reqs, server_by = common.request_delta(before_srv, common.server_requests(env))
        counts = changes.counts()
        if counts.get(Action.UNCHANGED, 0) != n:
            raise RuntimeError(f"in-process resync was not a no-op: {changes.summary()}")

        # in process: one sync as the agent runs it on an unchanged revision (the rendered
        # set in memory): apply, teardown check, prune plan, inventory write
        rendered = read_rendered(dirs["orksync"])
        start = time.perf_counter()
        result = sync_once(kube, SyncRequest(rendered, inventory_name="bench-ro"))
        sync_s = time.perf_counter() - start
        if result.changes.counts().get(Action.UNCHANGED, 0) != n:
            raise RuntimeError(f"in-process sync was not a no-op: {result.changes.summary()}")
        startup = common.median([common.startup_seconds() for _ in range(3)])
        start = time.perf_counter()
        read_rendered(dirs["orksync"])
        read_s = time.perf_counter() - start
        kubectl_med = common.median([row[3] for row in rows])

        med = common.median(ratios)
        text = common.table(("run", "order", "orksync s", "kubectl s", "orksync/kubectl",
                             "orksync server reqs", "kubectl server reqs"), rows)
        cli_reqs, cli_by = server_counts[-1]
        text += (
            f"\n\nmedian ratio orksync/kubectl: **{med:.3f}** (target <= {TARGET_RATIO}: "
            f"{verdict(med, TARGET_RATIO)})\n\n"
            + common.table(("orksync requests per unchanged object", "requests",
                            "per object", f"target <= {TARGET_PER_OBJECT}"), [
                ("in-process Applier, client (`kube.requests`)", client_reqs,
                 client_reqs / n, verdict(client_reqs / n, TARGET_PER_OBJECT)),
                ("in-process Applier, server (`apiserver_request_total`)", server_reqs,
                 server_reqs / n, verdict(server_reqs / n, TARGET_PER_OBJECT)),
                ("`orksync apply` CLI (last run), server", cli_reqs, cli_reqs / n,
                 verdict(cli_reqs / n, TARGET_PER_OBJECT)),
            ])
            + "\n\nWhere the CLI's time goes, and the agent's resync (same run):\n\n"
            + common.table(("part", "s", "vs kubectl median"), [
                ("start-up: Python and the imports of `orksync apply`", startup,
                 startup / kubectl_med),
                ("reading and verifying the rendered directory (`read_rendered`)", read_s,
                 read_s / kubectl_med),
                ("in-process `sync_once`, the agent's resync of an unchanged revision",
                 sync_s, sync_s / kubectl_med),
                ("in-process Applier alone", applier_s, applier_s / kubectl_med),
            ])
            + f"\n\nin-process Applier resync: {applier_s:.3f}s, {changes.summary()}; "
            f"server requests by verb: {server_by}\n\n"
            f"`orksync apply` CLI resync requests by verb (last run): {cli_by}\n\n"
            f"First (untimed for the ratio) apply: orksync {first_o.seconds:.2f}s, kubectl "
            f"{first_k.seconds:.2f}s. {n} objects over 20 namespaces, separate namespaces for "
            f"the two clients. Server counts exclude lease renewals, watches and non-resource "
            f"GETs (the /metrics scrapes, discovery). orksync: `{common.ORKSYNC_CMD}`; "
            f"kubectl: `{common.KUBECTL_CMD}`.")
        print(text)
        if not args.no_doc:
            common.record_run("resync", env, {
                "objects": n, "runs": args.runs, "orksync_s": [row[2] for row in rows],
                "median_ratio": med, "target_ratio": TARGET_RATIO,
                "requests_per_object": {"client": client_reqs / n, "server": server_reqs / n,
                                        "cli_server": cli_reqs / n},
                "target_requests_per_object": TARGET_PER_OBJECT, "startup_s": startup,
                "read_rendered_s": read_s, "sync_once_s": sync_s, "applier_s": applier_s},
                {"kubectl_s": [row[3] for row in rows]}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
