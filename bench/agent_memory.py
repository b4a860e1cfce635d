"""Agent memory with its view at 10,000 and at 100,000 managed objects (issue 22, targets
< 300 MiB / < 1.5 GiB): the real `orksync agent` process syncs a repository served by
`git daemon` on 127.0.0.1 until its watched view holds every managed object, then its RSS
is read from /proc `--samples` times, `--every` seconds apart, with the peak (VmHWM).

Two shapes of custom resources (bench/common.py):

* Sites (the default): 4 children each, a ServiceAccount, a Deployment scaled to 0, a
  headless Service and an Ingress, the shape of bench/commit_to_converged.py;
  `--objects 10000`: 2,000 Sites;
* Bundles (`--configmaps M`): M small ConfigMaps each (one 16-byte key);
  `--objects 100000 --configmaps 19`: 5,000 Bundles. At 100,000 objects the Sites would
  have the API server create 20,000 Deployments (and the controller manager as many
  ReplicaSets) on the same 2 cores; ConfigMaps give the agent's view as many objects for
  a fraction of the control plane's work.

    python bench/agent_memory.py [--objects 10000] [--configmaps 0] [--interval 5]
                                 [--samples 3] [--every 10] [--agent-args ARGS] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

TARGET_MIB = {10_000: 300.0, 100_000: 1536.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000,
                        help="managed objects, custom resources included (default 10000)")
    parser.add_argument("--configmaps", type=int, default=0,
                        help="Bundles of this many ConfigMaps each instead of Sites")
    parser.add_argument("--interval", type=float, default=5.0,
                        help="the agent's --interval in seconds (default 5)")
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--every", type=float, default=10.0,
                        help="seconds between two samples (default 10)")
    parser.add_argument("--agent-args", default="",
                        help="more flags for the agent, e.g. '--resync-interval 10m'")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/agent_memory.jsonl")
    args = parser.parse_args()
    per_cr = 1 + (args.configmaps or len(common.SITE_CHILDREN))
    n = args.objects // per_cr
    managed = n * per_cr
    shape = (f"{n:,} Bundles of {args.configmaps} ConfigMaps" if args.configmaps
             else f"{n:,} Sites of 4 children")
    target = TARGET_MIB[10_000 if managed <= 10_000 else 100_000]

    with common.environment(controller_manager=True) as env:
        with common.git_daemon(env.work / "served") as (repo, url):
            if args.configmaps:
                common.write_bundles(repo, n, args.configmaps)
            else:
                common.write_sites(repo, n)
            common.commit(repo, shape)
            agent = common.Agent(env, url, env.work / "state", interval=args.interval,
                                 extra=args.agent_args.split())
            rows = []
            try:
                start = time.monotonic()
                agent.wait_synced(managed, args.timeout)
                synced_s = time.monotonic() - start
                scrapes = []  # API server request counters at each sample
                for sample in range(1, args.samples + 1):
                    if sample > 1:
                        time.sleep(args.every)
                    agent.check_alive()
                    scrapes.append(common.server_requests(env))
                    memory = agent.memory()
                    lines = agent.summaries()
                    rows.append((sample, f"{time.monotonic() - start:.0f}",
                                 f"{memory['VmRSS']:.0f}", f"{memory['VmHWM']:.0f}",
                                 f"{agent.metric('orksync_view_objects'):.0f}",
                                 f"{agent.syncs()}", f"`{lines[-1]}`" if lines else ""))
                    print(f"sample {sample}: RSS {memory['VmRSS']:.0f} MiB, peak "
                          f"{memory['VmHWM']:.0f} MiB", file=sys.stderr, flush=True)
                command = agent.command
            finally:
                agent.stop()
            kinds = ([(common.SITE_API, common.BUNDLE_KIND), ("v1", "ConfigMap")]
                     if args.configmaps else
                     [(common.SITE_API, common.SITE_KIND), *common.SITE_CHILDREN])
            live = sum(common.count_objects(env, api, kind, selector="app.kubernetes.io/"
                                            "managed-by=orksync") for api, kind in kinds)

        # between the last two samples: the agent's requests (leader election is off, the
        # scrapes are not resource requests) and the controller manager's in that window
        window_reqs, window_by = common.request_delta(scrapes[-2], scrapes[-1]) \
            if len(scrapes) >= 2 else (0, {})
        if live < managed:
            raise RuntimeError(f"expected {managed} managed objects, the cluster has {live}")
        rss = float(rows[-1][2])
        peak = float(rows[-1][3])
        verdict = "met" if rss < target else \
            f"MISSED by {rss - target:.0f} MiB ({rss / target:.2f}x)"
        text = common.table(("sample", "s since start", "RSS MiB", "peak RSS MiB (VmHWM)",
                             "objects in the view", "successful syncs",
                             "the agent's last summary line"), rows)
        text += (f"\n\nRSS with the view at {managed:,} managed objects ({shape}): "
                 f"**{rss:.0f} MiB** (target < {target:.0f} MiB: {verdict}); peak over the run "
                 f"{peak:.0f} MiB; first sync and view complete {synced_s:.0f} s after the "
                 f"agent started.\n\nAPI requests between the last two samples, at the "
                 f"server (the agent's and the controller manager's): {window_reqs}; by verb: "
                 f"{window_by}\n\n{live:,} objects labelled managed-by orksync counted live "
                 f"afterwards, over 20 namespaces. Agent: `{command}`; RSS from "
                 f"/proc/PID/status, the first sample when `orksync_view_objects` reached "
                 f"{managed:,}.")
        print(text)
        if not args.no_record:
            common.record_run("agent_memory", env, {
                "managed_objects": managed, "shape": shape, "rss_mib": rss,
                "peak_mib": peak, "target_mib": target, "synced_s": synced_s,
                "window_requests": window_reqs}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
