"""Replicas sharing the Sync objects (issue 32): `--syncs` Syncs of `--crs` custom resources
each (Bundles of 4 ConfigMaps) over `--replicas` agent processes (default leader election
and lease flags), on a control plane of its own with the audit log; then one replica more,
then back (the added one stopped with SIGTERM); then a rolling update as deploy/'s
Deployment makes it (a replica of the next --generation started, then an old one stopped,
one at a time; begun a lease duration after the scale-down); then a replica SIGKILLed
under load (a commit and its webhook to each of up to 20 of its Syncs, sent to the
replica that serves them next). For each step: the seconds from the change until every
Sync's `status.servedBy` names the replica holding its rendezvous slot and the Sync is
Ready at its revision; the rolling update's hand-overs per Sync (audit log); the killed
replica's commits: seconds from the kill until applied; and over the whole run:
ConfigMaps deleted or created again (UIDs before and after), Syncs with two replicas'
writes interleaved (audit log), and each replica's peak RSS.

    python bench/scaleout.py [--syncs 1000] [--crs 10] [--replicas 3] [--no-record]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import itertools
import json
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from syncs import CONFIGMAPS, NS, TOKEN, prepare, set_value, sync_object

from testbed.gitdaemon import GitDaemon, free_port

LEASE_DURATION = 15.0  # the agent's default


def owner(key: str, members: list[str]) -> str:
    return max(members, key=lambda m: hashlib.sha256(f"{key}\0{m}".encode()).digest())


def served_by(key: str, slots: dict[str, str]) -> str:
    """The replica holding the Sync's rendezvous slot (slot: the replica that made it)."""
    return slots[owner(key, list(slots))]


def hook(port: int, name: str) -> int:
    body = b'{"ref": "refs/heads/main"}'
    signature = "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/hooks/git/{NS}/{name}",
                                     data=body, method="POST",
                                     headers={"X-Hub-Signature-256": signature})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except OSError:
        return 0


def readyz(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.read().decode()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=1000)
    parser.add_argument("--crs", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    with common.environment(audit=True) as env:
        kube = env.kube
        base = env.work / "served"
        prepare(env, base, args.syncs, args.crs)
        res = kube.resource("orksync.io/v1alpha1", "Sync")
        maps = kube.resource("v1", "ConfigMap")
        procs: dict[str, subprocess.Popen[bytes]] = {}
        ports: dict[str, int] = {}
        peaks: dict[str, float] = {}

        def start(identity: str, generation: str = "1") -> None:
            state = env.work / identity
            state.mkdir()
            ports[identity] = free_port()
            procs[identity] = subprocess.Popen(
                [sys.executable, "-m", "orksync", "agent", "--watch-namespace", NS,
                 "--state-dir", str(state), "--listen", f"127.0.0.1:{ports[identity]}",
                 "--kubeconfig", env.kubeconfig, "--identity", identity,
                 "--generation", generation],
                stdout=subprocess.DEVNULL, stderr=(env.work / f"{identity}.log").open("w"),
                start_new_session=True)

        def sample() -> None:
            for identity, proc in procs.items():
                if proc.poll() is None:
                    peaks[identity] = max(peaks.get(identity, 0.0),
                                          common.proc_memory(proc.pid)["VmHWM"])

        def settled(slots: list[str] | dict[str, str], heads: dict[str, str]) -> bool:
            sample()
            held = slots if isinstance(slots, dict) else {m: m for m in slots}
            for obj in kube.list(res, namespace=NS):
                name, status = obj["metadata"]["name"], obj.get("status") or {}
                if status.get("servedBy") != served_by(f"{NS}/{name}", held) or \
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
                time.sleep(LEASE_DURATION + 5)  # the released slot deleted
                slots = {m: m for m in members}
                rollout_began = datetime.now(UTC)
                for i, old in enumerate(members):
                    new = f"next-{i}"
                    start(new, "2")
                    common.wait_until(f"{new} waiting", lambda n=new: "standby: waiting" in
                                      readyz(ports[n]), 120, interval=1)
                    began = time.monotonic()
                    procs[old].send_signal(signal.SIGTERM)
                    procs[old].wait(120)
                    slots[old] = new
                    common.wait_until(f"{old} replaced", lambda: settled(slots, heads),
                                      args.timeout, interval=1)
                    steps.append((f"rolling update: {old} stopped, every Sync served",
                                  time.monotonic() - began))
                rollout_ended = datetime.now(UTC)
                victim_slot = members[0]
                victim = slots[victim_slot]
                left = {k: v for k, v in slots.items() if k != victim_slot}
                theirs = [f"s{s:03d}" for s in range(args.syncs)
                          if served_by(f"{NS}/s{s:03d}", slots) == victim][:20]
                for name in theirs:
                    repo = base / name
                    set_value(repo, int(name[1:]), 0, f"k{time.time_ns()}")
                    common.commit(repo, "under the kill")
                    heads[name] = common.head(repo)
                procs[victim].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                procs[victim].wait(60)
                applied: dict[str, float] = {}
                hooked: set[str] = set()
                while len(applied) < len(theirs):
                    if time.monotonic() - killed > args.timeout:
                        raise RuntimeError("the killed replica's commits were not applied")
                    for name in theirs:
                        if name not in hooked and hook(
                                ports[served_by(f"{NS}/{name}", left)], name) == 202:
                            hooked.add(name)
                    for obj in kube.list(res, namespace=NS):
                        name = obj["metadata"]["name"]
                        if name in theirs and name not in applied and (
                                obj.get("status") or {}).get("lastAppliedRevision") == \
                                heads[name]:
                            applied[name] = time.monotonic() - killed
                    time.sleep(0.5)
                common.wait_until("every Sync served after the kill",
                                  lambda: settled(left, heads), args.timeout, interval=1)
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
        moves: list[int] = []  # per Sync: its hand-overs during the rolling update
        for events in writes.values():
            events.sort()
            if any(a[2] != b[2] and a[1] > b[0] for a, b in itertools.pairwise(events)):
                overlapping += 1
            # its writer before the rolling update, then each writer during it
            seq = [who for at, _, who in events if _instant(at) < rollout_began][-1:] + \
                [who for at, _, who in events if rollout_began <= _instant(at) <= rollout_ended]
            moves.append(sum(1 for a, b in itertools.pairwise(seq) if a != b))
        gone = len(set(before) - set(after))
        again = sum(1 for k in before if k in after and after[k] != before[k])
        rows = [(what, f"{seconds:.1f}", "", "<= 30" if "scale" in what else "")
                for what, seconds in steps]
        kill = sorted(applied.values())
        rows += [("rolling update: hand-overs per Sync, max / total", f"{max(moves)} / "
                  f"{sum(moves)}", f"of {args.syncs} Syncs", "<= 1 each"),
                 ("killed replica: its commits applied after the kill, p50 / max (s)",
                  f"{statistics.median(kill):.1f} / {kill[-1]:.1f}", f"{len(kill)} Syncs",
                  f"<= {LEASE_DURATION + 15:.0f}")]
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
                "rollout_handovers_max": max(moves), "rollout_handovers": sum(moves),
                "kill_applied_s": kill,
                "created_again": again, "overlapping": overlapping,
                "peak_rss_mib": peaks}, table=table)
    return 0


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


if __name__ == "__main__":
    sys.exit(main())
