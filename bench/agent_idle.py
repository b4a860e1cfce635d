"""The agent idle (issue 22, targets at 10,000 objects with nothing changing: at most 2 API
requests a minute beyond the open watches, at most 1 % of a core): Site custom resources of
4 children each (bench/common.py, default 2,500 Sites = 10,000 children) committed to a
repository served by `git daemon`, the real `orksync agent` process synced on them, then
left alone for `--minutes`. Counted over that window, from the API server's audit log (every
request's metadata, bench/common.Audit) by the agent's User-Agent: its completed requests
other than watches, and, apart, the watches it opened (a watch that the server ends after
its timeout is opened again: that is the price of keeping it open) and that ended. Its CPU
from /proc/PID/stat (utime + stime) over the window, as a fraction of one core. The control
plane (etcd, kube-apiserver, kube-controller-manager) runs on the same cores.

    python bench/agent_idle.py [--crs 2500] [--minutes 3] [--interval 60] [--agent-args ARGS]
                               [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

TARGET_PER_MINUTE = 2.0
TARGET_CORE = 0.01


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crs", type=int, default=2500,
                        help="Site custom resources, 4 children each (default 2500)")
    parser.add_argument("--minutes", type=float, default=3.0,
                        help="the idle window measured (default 3)")
    parser.add_argument("--interval", type=float, default=60.0,
                        help="the agent's --interval (default 60: the agent's own default)")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds left to the first sync's aftermath before the window "
                             "(default 30)")
    parser.add_argument("--agent-args", default="",
                        help="more flags for the agent, e.g. '--resync-interval 10m'")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/agent_idle.jsonl")
    args = parser.parse_args()
    n = args.crs
    objects = n * (1 + len(common.SITE_CHILDREN))
    user_agent = f"(agent {common.AGENT_IDENTITY})"

    with common.environment(controller_manager=True, audit=True) as env, \
            common.git_daemon(env.work / "served") as (repo, url):
        assert env.audit is not None
        common.write_sites(repo, n)
        common.commit(repo, f"{n} sites")
        agent = common.Agent(env, url, env.work / "state", interval=args.interval,
                             extra=args.agent_args.split())
        try:
            agent.wait_synced(objects, args.timeout)
            print(f"synced {objects:,} objects; settling {args.settle:.0f} s",
                  file=sys.stderr, flush=True)
            time.sleep(args.settle)
            agent.wait_idle(timeout=args.settle * 4)
            syncs = agent.syncs()
            mark, cpu, start = env.audit.mark(), agent.cpu(), time.monotonic()
            print(f"measuring {args.minutes:g} minutes idle", file=sys.stderr, flush=True)
            while time.monotonic() - start < args.minutes * 60:
                agent.check_alive()
                time.sleep(1)
            end_mark, cpu_end, seconds = env.audit.mark(), agent.cpu(), \
                time.monotonic() - start
            syncs = agent.syncs() - syncs
            memory = agent.memory()
            command = agent.command
        finally:
            agent.stop()
        counted = env.audit.count(mark, user_agent, end_mark)
        whole = env.audit.count(0, user_agent, end_mark)  # the run: watches still open

        minutes = seconds / 60
        per_minute = counted.total / minutes
        core = (cpu_end - cpu) / seconds
        opens = sum(counted.watch_opens.values())
        verdict_requests = "met" if per_minute <= TARGET_PER_MINUTE else \
            f"MISSED ({per_minute / TARGET_PER_MINUTE:.0f}x)"
        verdict_cpu = "met" if core <= TARGET_CORE else f"MISSED ({core / TARGET_CORE:.1f}x)"
        text = common.table(
            ("custom resources", "objects", "window min", "requests", "requests a minute",
             "watches opened", "watches ended", "agent CPU s", "fraction of a core",
             "agent syncs in the window", "agent RSS MiB"),
            [(f"{n:,}", f"{objects:,}", f"{minutes:.1f}", f"{counted.total}", f"{per_minute:.1f}",
              f"{opens}", f"{counted.watch_ends}", f"{cpu_end - cpu:.2f}", f"{core * 100:.2f} %",
              f"{syncs}", f"{memory['VmRSS']:.0f}")])
        text += (f"\n\nIdle at {objects:,} objects: **{per_minute:.1f} requests a minute** beyond "
                 f"the open watches (target <= {TARGET_PER_MINUTE:g}: {verdict_requests}), "
                 f"**{core * 100:.2f} % of a core** (target <= {TARGET_CORE * 100:g} %: "
                 f"{verdict_cpu}). Requests by verb and resource: "
                 f"{dict(sorted(counted.requests.items()))}; watches opened by resource: "
                 f"{dict(sorted(counted.watch_opens.items()))}; watches open at the end: "
                 f"{sum(whole.watch_opens.values()) - whole.watch_ends}.\n\nCounted in the "
                 f"API server's audit log (every request's metadata) by the agent's User-Agent "
                 f"`{user_agent}`, from {args.settle:.0f} s after its view held every managed "
                 f"object; CPU: utime + stime of /proc/PID/stat over the window. Agent: "
                 f"`{command}`.")
        print(text)
        if not args.no_record:
            common.record_run("agent_idle", env, {
                "custom_resources": n, "objects": objects, "window_s": seconds,
                "requests": counted.total, "requests_per_minute": per_minute,
                "requests_by": counted.requests, "watch_opens": counted.watch_opens,
                "watch_ends": counted.watch_ends,
                "watches_open": sum(whole.watch_opens.values()) - whole.watch_ends,
                "agent_cpu_s": cpu_end - cpu,
                "fraction_of_a_core": core, "syncs_in_window": syncs,
                "target_requests_per_minute": TARGET_PER_MINUTE, "target_fraction_of_a_core":
                TARGET_CORE, "agent_rss_mib": memory["VmRSS"]}, table=text)

    return 0


if __name__ == "__main__":
    raise SystemExit(main())
