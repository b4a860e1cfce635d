"""Fresh apply of 1,000 objects across 20 namespaces: `orksync apply DIR` against
`kubectl apply --server-side` of the same files, alternating A and B, fresh namespaces per
run. Issue target: median orksync/kubectl wall-time ratio at most 0.5.

    python bench/apply_fresh.py [--runs 3] [--objects 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

TARGET = 0.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--no-record", "--no-doc", dest="no_doc", action="store_true",
                        help="do not append to bench/results/apply_fresh.jsonl")
    args = parser.parse_args()

    rows, ratios = [], []
    with common.environment() as env:
        for run in range(1, args.runs + 1):
            # alternate which client goes first, so neither always meets a warmer server
            order = ("orksync", "kubectl") if run % 2 else ("kubectl", "orksync")
            times: dict[str, float] = {}
            cpus: dict[str, tuple[float, float]] = {}  # (client CPU, control-plane CPU)
            for client in order:
                prefix = f"f{run}{client[0]}"
                names = common.namespaces(prefix)
                objs = common.make_objects(prefix, args.objects)
                rendered = common.render(objs, env.work / prefix)
                common.create_namespaces(env, names)  # untimed, for both clients
                server_cpu = common.control_plane_cpu(env)
                if client == "orksync":
                    timed = common.run_orksync(env, rendered, f"bench-{prefix}")
                    print(f"run {run} orksync {timed.seconds:.2f}s "
                          f"{common.summary_line(timed.output)}", file=sys.stderr)
                else:
                    timed = common.run_kubectl(env, rendered)
                    applied = sum(1 for ln in timed.output.splitlines()
                                  if ln.rstrip().endswith("serverside-applied"))
                    if applied != args.objects:
                        raise RuntimeError(f"kubectl applied {applied} of {args.objects}")
                    print(f"run {run} kubectl {timed.seconds:.2f}s applied={applied}",
                          file=sys.stderr)
                times[client] = timed.seconds
                cpus[client] = (timed.cpu, common.control_plane_cpu(env) - server_cpu)
                # keep the cluster the same size for every run (untimed)
                common.clear_namespaces(env, names)
                common.delete_inventory(env, f"bench-{prefix}")
            r = common.ratio(times["orksync"], times["kubectl"])
            ratios.append(r)
            rows.append((run, " then ".join(order), times["orksync"], times["kubectl"], r,
                         f"{cpus['orksync'][0]:.2f} / {cpus['orksync'][1]:.2f}",
                         f"{cpus['kubectl'][0]:.2f} / {cpus['kubectl'][1]:.2f}"))

        med = common.median(ratios)
        verdict = "met" if med <= TARGET else \
            f"MISSED by {med - TARGET:.3f} ({med / TARGET:.2f}x the target)"
        text = common.table(("run", "order", "orksync s", "kubectl s", "orksync/kubectl",
                             "orksync CPU s: client / control plane",
                             "kubectl CPU s: client / control plane"), rows)
        text += (f"\n\nmedian ratio orksync/kubectl: **{med:.3f}** "
                 f"(target <= {TARGET}: {verdict})\n\n"
                 f"{args.objects} objects (ConfigMap, ServiceAccount, Deployment replicas=0, "
                 "headless "
                 f"Service in rotation) over 20 fresh namespaces per run; namespaces created "
                 f"and objects deleted outside the timing. orksync: `{common.ORKSYNC_CMD}` "
                 f"(includes reading/verifying the rendered directory and writing its "
                 f"inventory); kubectl: `{common.KUBECTL_CMD}`. CPU: the client process "
                 f"(user + system) and etcd + kube-apiserver during its run, from /proc; the "
                 f"machine has {os.cpu_count()} cores.")
        print(text)
        if not args.no_doc:
            common.record_run("apply_fresh", env, {
                "objects": args.objects, "runs": args.runs,
                "orksync_s": [row[2] for row in rows], "median_ratio": med,
                "target_ratio": TARGET}, {"kubectl_s": [row[3] for row in rows]}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
