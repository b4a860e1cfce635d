"""One agent taking over every Sync of another (issue 32: what a hand-over costs the new
server): `--syncs` Syncs of `--crs` Bundles of 4 ConfigMaps (bench/syncs.py's), applied by
agent `a`; `a` stopped with SIGTERM, then agent `b` started with an empty state directory
(no leader election: it serves them all at once, as a replica taking a share).
`--bystanders N`: before `b` starts, the objects of N other Syncs (as many Bundles and
ConfigMaps each, with orksync's labels and a shard label of their own) are created
directly, so that the API server holds what it holds when a replica takes its share of
N + `--syncs` Syncs (a LIST by label scans every object of its kind). Prints the
seconds until every Sync names `b` and is Ready at its revision, `b`'s CPU and peak RSS,
and its requests in that time by verb and resource (the API server's audit log).
`--code DIR` (repeatable) measures each tree in turn on the same machine; prints only,
no record.

    python bench/takeover.py [--syncs 100] [--crs 10] [--bystanders 0] [--agent-args ARGS]
                             [--code DIR ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from syncs import CONFIGMAPS, NS, prepare, sync_object

from orksync.cluster.kube import Kube
from testbed.gitdaemon import GitDaemon, free_port


def bystanders(kube: Kube, count: int, crs: int) -> None:
    """The objects `count` other Syncs of `crs` Bundles would have written."""
    bundles = kube.resource(common.SITE_API, common.BUNDLE_KIND)
    configmaps = kube.resource("v1", "ConfigMap")

    def create(k: int) -> None:
        for i in range(crs):
            meta = {"namespace": f"bench-ns{k % 20:02d}",
                    "labels": {"app.kubernetes.io/managed-by": "orksync",
                               "orksync.io/shard": f"sync-bystander-{k:04d}"}}
            name = f"x{k:04d}-b{i:02d}"
            kube.create(bundles, {"apiVersion": common.SITE_API, "kind": common.BUNDLE_KIND,
                                  "metadata": {**meta, "name": name},
                                  "spec": {"value": "v0"}}, field_manager="bench")
            for j in range(CONFIGMAPS):
                kube.create(configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {**meta, "name": f"{name}-{j}"},
                                         "data": {"key": "v0"}}, field_manager="bench")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


def run(code: Path, syncs: int, crs: int, others: int, agent_args: list[str]) -> None:
    with common.environment(audit=True) as env:
        kube = env.kube
        base = env.work / "served"
        repos = prepare(env, base, syncs, crs, code / "deploy/base/sync.crd.yaml")
        res = kube.resource("orksync.io/v1alpha1", "Sync")
        heads = {f"s{s:03d}": common.head(repos[s]) for s in range(syncs)}
        assert env.audit is not None

        def agent(identity: str) -> subprocess.Popen[bytes]:
            state = env.work / f"state-{identity}"
            state.mkdir()
            return subprocess.Popen(
                [sys.executable, "-m", "orksync", "agent", "--watch-namespace", NS,
                 "--state-dir", str(state), "--listen", f"127.0.0.1:{free_port()}",
                 "--kubeconfig", env.kubeconfig, "--no-leader-elect", "--identity", identity,
                 *agent_args], stdout=subprocess.DEVNULL,
                stderr=(env.work / f"{identity}.log").open("w"), start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(code)}, cwd=code)

        def served_by(identity: str) -> bool:
            found = {o["metadata"]["name"]: o.get("status") or {}
                     for o in kube.list(res, namespace=NS)}
            return all(
                found.get(name, {}).get("lastAppliedRevision") == sha and
                found[name].get("servedBy") == identity and
                next((c for c in found[name].get("conditions") or []
                      if c["type"] == "Ready"), {}).get("status") == "True"
                for name, sha in heads.items())

        with GitDaemon(base) as daemon:
            first = agent("a")
            for s in range(syncs):
                kube.create(res, sync_object(f"s{s:03d}", daemon.url(f"s{s:03d}"),
                                             interval="1h"), field_manager="bench")
            common.wait_until("a serving every Sync", lambda: served_by("a"), 1800, 1)
            os.killpg(first.pid, signal.SIGTERM)
            first.wait(60)
            bystanders(kube, others, crs)
            mark = env.audit.mark()
            began = time.monotonic()
            second = agent("b")
            common.wait_until("b serving every Sync", lambda: served_by("b"), 1800, 0.5)
            wall = time.monotonic() - began
            ticks = [float(x) for x in Path(f"/proc/{second.pid}/stat").read_text()
                     .split()[13:15]]
            peak = common.proc_memory(second.pid)["VmHWM"]
            count = env.audit.count(mark, "(agent b)")
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(60)
    top = sorted(count.requests.items(), key=lambda kv: -kv[1])
    print(f"{code}: b took over {syncs} Syncs in {wall:.1f}s, cpu "
          f"{sum(ticks) / os.sysconf('SC_CLK_TCK'):.1f}s, peak RSS {peak:.0f} MiB; "
          f"{count.total} requests "
          f"({count.total / syncs:.1f} per Sync): "
          + ", ".join(f"{k} {v}" for k, v in top) + f"; watches {dict(count.watch_opens)}",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=100)
    parser.add_argument("--crs", type=int, default=10)
    parser.add_argument("--bystanders", type=int, default=0)
    parser.add_argument("--agent-args", default="")
    parser.add_argument("--code", action="append", type=Path)
    args = parser.parse_args()
    for code in args.code or [common.ROOT]:
        run(code, args.syncs, args.crs, args.bystanders, args.agent_args.split())
    return 0


if __name__ == "__main__":
    sys.exit(main())
