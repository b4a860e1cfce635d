"""Agent memory with 10,000 managed objects (issue: performance, benchmark 6): the real
`orksync agent` process syncs a repository of 2,000 custom resources of 4 children each
(the Sites of bench/commit_to_converged.py: 2,000 + 8,000 = 10,000 managed objects),
served by `git daemon` on 127.0.0.1; its RSS is read from /proc after each of three
successful syncs (the first creates everything, the next two are no-change resyncs), with
the peak (VmHWM).

    python bench/agent_memory.py [--crs 2000] [--syncs 3] [--interval 5] [--no-record]

Issue target: under 300 MiB for 10,000 managed objects.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

TARGET_MIB = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=2000,
                        help="custom resources, 5 managed objects each (default 2000)")
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--interval", type=float, default=5.0,
                        help="the agent's --interval in seconds (default 5)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/agent_memory.jsonl")
    args = parser.parse_args()
    n = args.crs
    managed = n * (1 + len(common.SITE_CHILDREN))

    with common.environment(controller_manager=True) as env:
        with common.git_daemon(env.work / "served") as (repo, url):
            common.write_sites(repo, n)
            common.commit(repo, f"{n} sites")
            agent = common.Agent(env, url, env.work / "state", interval=args.interval)
            rows = []
            scrapes = []  # API server request counters after each sync
            try:
                start = time.monotonic()
                for sync in range(1, args.syncs + 1):
                    common.wait_until(f"successful sync {sync}", lambda s=sync: (
                        agent.check_alive() or agent.syncs() >= s), args.timeout, 0.5)
                    scrapes.append(common.server_requests(env))
                    memory = agent.memory()
                    failed = agent.syncs("failure")
                    line = agent.summaries()[-1]
                    rows.append((sync, f"{time.monotonic() - start:.0f}",
                                 f"{memory['VmRSS']:.0f}", f"{memory['VmHWM']:.0f}", f"`{line}`"))
                    print(f"sync {sync}: RSS {memory['VmRSS']:.0f} MiB, peak "
                          f"{memory['VmHWM']:.0f} MiB, failed syncs {failed}: {line}",
                          file=sys.stderr, flush=True)
                live = sum(common.count_objects(env, api, kind, selector="app.kubernetes.io/"
                                                "managed-by=orksync")
                           for api, kind in [(common.SITE_API, common.SITE_KIND),
                                             *common.SITE_CHILDREN])
            finally:
                agent.stop()

        # the last no-change resync, counted at the API server: the agent's requests
        # (leader election is off, the scrapes are not resource requests) plus the
        # controller manager's in that window: the single GETs of Sites are its garbage
        # collector checking the owners of the new children (the agent sends none), and
        # GET/POST endpoints are its endpoints controller
        resync_reqs, resync_by = common.request_delta(scrapes[-2], scrapes[-1]) \
            if len(scrapes) >= 2 else (0, {})
        if live != managed:
            raise RuntimeError(f"expected {managed} managed objects, the cluster has {live}")
        rss = float(rows[-1][2])
        peak = float(rows[-1][3])
        verdict = "met" if rss < TARGET_MIB else \
            f"MISSED by {rss - TARGET_MIB:.0f} MiB ({rss / TARGET_MIB:.2f}x)"
        text = common.table(("after sync", "s since start", "RSS MiB", "peak RSS MiB (VmHWM)",
                             "the agent's summary line"), rows)
        text += (f"\n\nRSS after sync {args.syncs} with {managed:,} managed objects: "
                 f"**{rss:.0f} MiB** (target < {TARGET_MIB:.0f} MiB: {verdict}); peak over the "
                 f"run {peak:.0f} MiB.\n\nAPI requests of the last no-change resync "
                 f"(sync {args.syncs}), at the server: {resync_reqs} for {managed:,} objects, "
                 f"{resync_reqs / managed:.3f} per object (benchmark 3's target: at most "
                 f"0.05); by verb: {resync_by}\n\n{n:,} Site custom resources x (the Site + "
                 f"ServiceAccount, Deployment scaled to 0, headless Service, Ingress) over 20 "
                 f"namespaces, all counted live afterwards ({live:,} objects labelled "
                 f"managed-by orksync). Agent: `orksync agent --repo-url "
                 f"git://127.0.0.1:PORT/bench --interval {args.interval:g} --no-leader-elect` "
                 f"(8 workers); RSS from /proc/PID/status when `orksync_syncs_total"
                 f"{{result=\"success\"}}` reached each count.")
        print(text)
        if not args.no_record:
            common.record_run("agent_memory", env, {
                "managed_objects": managed, "syncs": args.syncs, "rss_mib": rss,
                "peak_mib": peak, "target_mib": TARGET_MIB,
                "resync_requests_per_object": resync_reqs / managed}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
