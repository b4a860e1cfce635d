"""Replicas sharing the Sync objects (issue 32): `--syncs` Syncs of `--crs` custom resources
each (Bundles of 4 ConfigMaps) over `--replicas` agent processes (default leader election
and lease flags), on a control plane of its own with the audit log; then one replica more,
then back (the added one stopped with SIGTERM). For each step: the seconds from the change
until every Sync's `status.servedBy` names its rendezvous replica and the Sync is Ready at
its revision; and at the end, over the whole run: ConfigMaps deleted or created again (UIDs
before and after), Syncs with two replicas' writes interleaved (audit log), and each
replica's peak RSS.

    python bench/scaleout.py [--syncs 1000] [--crs 10] [--replicas 3] [--no-record]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from syncs import CONFIGMAPS, NS, TOKEN, _served, sync_object, write_repo

from testbed.gitdaemon import GitDaemon, free_port


def owner(key: str, members: list[str]) -> str:
    return max(members, key=lambda m: hashlib.sha256(f"{key}\0{m}".encode()).digest())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=1000)
    parser.add_argument("--crs", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    from ruamel.yaml import YAML

    with common.environment(audit=True) as env:
        kube = env.kube
        base = env.work / "served"
        for s in range(args.syncs):
            repo = base / f"s{s:03d}"
            write_repo(repo, s, args.crs)
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
            common.commit(repo, "first")
        crd = YAML(typ="safe").load((common.ROOT / "deploy/base/sync.crd.yaml").read_text())
        kube.apply(kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd,
                   field_manager="bench", force=True)
        common.wait_until("the Sync CRD", lambda: _served(kube), 60)
        common.create_namespaces(env, [NS, *common.namespaces("bench-ns")])
        kube.create(kube.resource("v1", "Secret"), {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": NS},
            "stringData": {"token": TOKEN.decode()}}, field_manager="bench")
        res = kube.resource("orksync.io/v1alpha1", "Sync")
        maps = kube.resource("v1", "ConfigMap")
        procs: dict[str, subprocess.Popen[bytes]] = {}
        peaks: dict[str, float] = {}

        def start(identity: str) -> None:
            state = env.work / identity
            state.mkdir()
            procs[identity] = subprocess.Popen(
                [sys.executable, "-m", "orksync", "agent", "--watch-namespace", NS,
                 "--state-dir", str(state), "--listen", f"127.0.0.1:{free_port()}",
                 "--kubeconfig", env.kubeconfig, "--identity", identity],
                stdout=subprocess.DEVNULL, stderr=(env.work / f"{identity}.log").open("w"),
                start_new_session=True)

        def sample() -> None:
            for identity, proc in procs.items():
                if proc.poll() is None:
                    peaks[identity] = max(peaks.get(identity, 0.0),
                                          common.proc_memory(proc.pid)["VmHWM"])

        def settled(members: list[str], heads: dict[str, str]) -> bool:
            sample()
            for obj in kube.list(res, namespace=NS):
                name, status = obj["metadata"]["name"], obj.get("status") or {}
                if status.get("servedBy") != owner(f"{NS}/{name}", members) or \
                        status.get("lastAppliedRevision") != heads[name]:
                    return False
            return True

        def uids() -> dict[str, str]:
            return {f"{o['metadata']['namespace']}/{o['metadata']['name']}":
                    o["metadata"]["uid"] for o in kube.list(maps, metadata_only=True)
                    if o["metadata"]["name"].startswith("s")}

        steps: list[tuple[str, float]] = []
        with GitDaemon(base) as daemon:
            members = [f"replica-{i}" for i in range(args.replicas)]
            try:
                for identity in members:
                    start(identity)
                time.sleep(5)  # the replicas see each other before the Syncs come
                began = time.monotonic()
                for s in range(args.syncs):
                    kube.create(res, sync_object(f"s{s:03d}", daemon.url(f"s{s:03d}")),
                                field_manager="bench")
                heads = {f"s{s:03d}": common.head(base / f"s{s:03d}")
                         for s in range(args.syncs)}
                common.wait_until("every Sync served", lambda: settled(members, heads),
                                  args.timeout, interval=2)
                steps.append((f"{args.syncs} Syncs first applied over {len(members)}",
                              time.monotonic() - began))
                before = uids()
                extra = f"replica-{args.replicas}"
                began = time.monotonic()
                start(extra)
                grown = [*members, extra]
                common.wait_until("scaled up", lambda: settled(grown, heads), args.timeout,
                                  interval=1)
                steps.append((f"scale {len(members)} -> {len(grown)}: every Sync served",
                              time.monotonic() - began))
                began = time.monotonic()
                procs[extra].send_signal(signal.SIGTERM)
                procs[extra].wait(120)
                common.wait_until("scaled down", lambda: settled(members, heads),
                                  args.timeout, interval=1)
                steps.append((f"scale {len(grown)} -> {len(members)}: every Sync served",
                              time.monotonic() - began))
                after = uids()
            finally:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.terminate()
                        proc.wait(60)

        assert env.audit is not None
        writes: dict[str, list[tuple[str, str, str]]] = {}
        for line in env.audit.path.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            agent = str(event.get("userAgent") or "")
            if event.get("stage") != "ResponseComplete" or "(agent " not in agent or \
                    event.get("verb") not in ("create", "update", "patch", "delete") or \
                    ref.get("resource") != "syncs":
                continue
            writes.setdefault(str(ref.get("name")), []).append((
                event["requestReceivedTimestamp"], event["stageTimestamp"],
                agent.rpartition("(agent ")[2].rstrip(")")))
        overlapping = 0
        for events in writes.values():
            events.sort()
            if any(a[2] != b[2] and a[1] > b[0] for a, b in itertools.pairwise(events)):
                overlapping += 1
        gone = len(set(before) - set(after))
        again = sum(1 for k in before if k in after and after[k] != before[k])
        rows = [(what, f"{seconds:.1f}", "", "<= 30" if "scale" in what else "")
                for what, seconds in steps]
        rows += [("ConfigMaps deleted / created again", f"{gone} / {again}",
                  f"of {len(before)}", "0 / 0"),
                 ("Syncs with overlapping writers (their status writes, audit log)",
                  str(overlapping), f"of {args.syncs}", "0"),
                 ("peak RSS per replica (MiB)", " ".join(f"{peaks[m]:.0f}" for m in
                                                         sorted(peaks)), "", "< 300")]
        table = common.table(("figure", "value", "note", "target"), rows)
        print(table)
        if not args.no_record:
            common.record_run("scaleout", env, {
                "syncs": args.syncs, "crs": args.crs, "configmaps_per_cr": CONFIGMAPS,
                "replicas": args.replicas, "steps": dict(steps), "deleted": gone,
                "created_again": again, "overlapping": overlapping,
                "peak_rss_mib": peaks}, table=table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
