"""One agent serving many Sync objects (issue 31): `--syncs` Syncs of `--crs` custom
resources each (Bundles of 4 ConfigMaps: 5 objects per custom resource), each Sync its
own repository served by `git daemon` on 127.0.0.1, on a control plane of its own with
the API server's audit log. In one run:

* idle: once every Sync is Ready at its revision, the agent's RSS (and peak), its CPU
  over `--idle` seconds, and its API requests in that window from the audit log (its
  User-Agent), watches and their reconnections apart (leader election off: no Lease);
* webhook commits: `--commits` times, one Bundle's value changed in a random Sync's
  repository, committed, and that Sync's webhook posted; the time until the Sync's
  status names the new revision as applied (read every 50 ms by this script);
* `orksync reconcile NS/NAME --wait` on an unchanged Sync, `--commits` times: the wall
  time of the command (a process of its own, its start-up included);
* slow-render isolation: a Sync whose render waits `--slow` seconds on an `external:`
  call is triggered, and while it waits the webhook commits are measured again.

    python bench/syncs.py [--syncs 100] [--crs 20] [--commits 20] [--idle 60]
                          [--slow 60] [--no-record]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from ruamel.yaml import YAML

from testbed.gitdaemon import GitDaemon, free_port

NS = "bench-syncs"
TOKEN = b"bench-webhook-token-0123456789"
CONFIGMAPS = 4


def write_repo(repo: Path, sync: int, crs: int, *, slow_url: str = "") -> None:
    entries = "".join(f'            - name: "{{{{ .metadata.name }}}}-{j}"\n'
                      f'              data: {{key: "{{{{ .spec.value }}}}"}}\n'
                      f"              reconcile: true\n" for j in range(CONFIGMAPS))
    external = ""
    if slow_url:
        external = (f"        onReconcile:\n          external:\n            - name: slow\n"
                    f'              url: "{slow_url}"\n              timeout: 30s\n'
                    f"              continueOnError: true\n")
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "katalog.yaml").write_text(
        "apiVersion: orkestra.orkspace.io/v1\nkind: Katalog\nmetadata: {name: bench-bundles}\n"
        "spec:\n  crds:\n    bundle:\n      crdFile: ./crd.yaml\n      operatorBox:\n"
        + external + "        onCreate:\n          configMaps:\n" + entries)
    (repo / "crd.yaml").write_text(common.SITE_CRD.replace("sites", "bundles").replace(
        f"kind: {common.SITE_KIND}", f"kind: {common.BUNDLE_KIND}").replace("site}", "bundle}"))
    for i in range(crs):
        set_value(repo, sync, i, "v0")


def set_value(repo: Path, sync: int, i: int, value: str) -> None:
    (repo / f"b{i:02d}.yaml").write_text(
        f"apiVersion: {common.SITE_API}\nkind: {common.BUNDLE_KIND}\nmetadata:\n"
        f"  name: s{sync:03d}-b{i:02d}\n  namespace: bench-ns{sync % 20:02d}\n"
        f"spec:\n  value: {value}\n")


def prepare(env: common.Env, base: Path, syncs: int, crs: int,
            crd_file: Path = common.ROOT / "deploy/base/sync.crd.yaml") -> list[Path]:
    """The repositories s000.. under `base` (one commit each), the Sync CRD, the
    namespaces and the webhook Secret: what every Sync benchmark starts from."""
    repos = [base / f"s{s:03d}" for s in range(syncs)]
    for s, repo in enumerate(repos):
        write_repo(repo, s, crs)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        common.commit(repo, "first")
    kube = env.kube
    crd = YAML(typ="safe").load(crd_file.read_text())
    kube.apply(kube.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition"), crd,
               field_manager="bench", force=True)
    common.wait_until("the Sync CRD", lambda: _served(kube), 60)
    common.create_namespaces(env, [NS, *common.namespaces("bench-ns")])
    kube.create(kube.resource("v1", "Secret"), {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hook", "namespace": NS},
        "stringData": {"token": TOKEN.decode()}}, field_manager="bench")
    return repos


def sync_object(name: str, url: str, *, interval: str = "1m") -> dict[str, Any]:
    return {"apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"url": url, "interval": interval,
                     "webhook": {"secretRef": {"name": "hook"}}}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=100)
    parser.add_argument("--crs", type=int, default=20)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--slow", type=float, default=60.0,
                        help="seconds the slow Sync's render waits (0: no isolation run)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--agent-args", default="",
                        help="more flags for the agent, e.g. '--repair-workers 1'")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    objects = args.syncs * args.crs * (1 + CONFIGMAPS)
    release = threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(args.slow)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_: Any) -> None:
            pass

    slow_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=slow_server.serve_forever, daemon=True).start()

    with common.environment(audit=True) as env:
        kube = env.kube
        base = env.work / "served"
        repos = prepare(env, base, args.syncs, args.crs)
        slow_repo = base / "slow"
        write_repo(slow_repo, 999, 1,
                   slow_url=f"http://127.0.0.1:{slow_server.server_address[1]}/slow")
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=slow_repo, check=True)
        common.commit(slow_repo, "first")
        with GitDaemon(base) as daemon:
            port = free_port()
            state = env.work / "state"
            state.mkdir()
            argv = [sys.executable, "-m", "orksync", "agent", "--watch-namespace", NS,
                    "--state-dir", str(state), "--listen", f"127.0.0.1:{port}",
                    "--kubeconfig", env.kubeconfig, "--no-leader-elect",
                    "--identity", common.AGENT_IDENTITY, *args.agent_args.split()]
            log = env.work / "agent.log"
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log.open("w"),
                                    start_new_session=True)
            res = kube.resource("orksync.io/v1alpha1", "Sync")
            try:
                start = time.monotonic()
                for s in range(args.syncs):
                    kube.create(res, sync_object(f"s{s:03d}", daemon.url(f"s{s:03d}")),
                                field_manager="bench")
                heads = {f"s{s:03d}": common.head(repos[s]) for s in range(args.syncs)}

                def all_ready() -> bool:
                    if proc.poll() is not None:
                        raise RuntimeError("the agent exited:\n" + log.read_text()[-3000:])
                    done = {o["metadata"]["name"]: (o.get("status") or {}).get(
                        "lastAppliedRevision") for o in kube.list(res, namespace=NS)}
                    return all(done.get(n) == h for n, h in heads.items())

                common.wait_until("every Sync applied", all_ready, args.timeout, interval=2)
                synced_s = time.monotonic() - start
                time.sleep(10)  # the first syncs' drift repair and status settle
                rss_before = common.proc_memory(proc.pid)
                cpu0, mark0, t0 = common.cpu_seconds(proc.pid), env.audit.mark(), \
                    time.monotonic()
                time.sleep(args.idle)
                cpu1, mark1, t1 = common.cpu_seconds(proc.pid), env.audit.mark(), \
                    time.monotonic()
                memory = common.proc_memory(proc.pid)
                idle = env.audit.count(mark0, common.AGENT_IDENTITY, mark1)
                idle_cpu = (cpu1 - cpu0) / (t1 - t0)

                def commit_and_hook(rng: random.Random) -> float:
                    s = rng.randrange(args.syncs)
                    name = f"s{s:03d}"
                    set_value(repos[s], s, rng.randrange(args.crs), f"v{time.time_ns()}")
                    common.commit(repos[s], "change")
                    sha = common.head(repos[s])
                    sent = time.monotonic()
                    body = b'{"ref": "refs/heads/main"}'
                    signature = "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()
                    request = urllib.request.Request(
                        f"http://127.0.0.1:{port}/hooks/git/{NS}/{name}", data=body,
                        method="POST", headers={"X-Hub-Signature-256": signature})
                    with urllib.request.urlopen(request, timeout=10) as resp:
                        assert resp.status == 202, resp.status
                    while True:
                        obj = kube.get(res, NS, name)
                        if (obj.get("status") or {}).get("lastAppliedRevision") == sha:
                            return time.monotonic() - sent
                        if time.monotonic() - sent > 120:
                            raise RuntimeError(f"{name}: {sha} not applied in 120 s")
                        time.sleep(0.05)

                rng = random.Random(31)
                hooks = [commit_and_hook(rng) for _ in range(args.commits)]

                reconciles = []
                for i in range(args.commits):
                    name = f"s{i % args.syncs:03d}"
                    began = time.monotonic()
                    done = subprocess.run(
                        [sys.executable, "-m", "orksync", "reconcile", f"{NS}/{name}",
                         "--wait", "--kubeconfig", env.kubeconfig],
                        capture_output=True, text=True, check=False)
                    reconciles.append(time.monotonic() - began)
                    if done.returncode != 0:
                        raise RuntimeError(done.stdout + done.stderr)

                slow_hooks: list[float] = []
                if args.slow > 0:
                    kube.create(res, sync_object("slow", daemon.url("slow"), interval="1h"),
                                field_manager="bench")
                    slow_started = time.monotonic()
                    time.sleep(2)  # its render is waiting on its call now
                    while time.monotonic() - slow_started < args.slow - 5 and \
                            len(slow_hooks) < args.commits:
                        slow_hooks.append(commit_and_hook(rng))
                    release.set()
            finally:
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait(60)
                release.set()
                slow_server.shutdown()

            rows = [
                ("RSS after the idle window (MiB)", f"{memory['VmRSS']:.0f}",
                 f"{rss_before['VmRSS']:.0f} before it", "< 400"),
                ("peak RSS (VmHWM, MiB)", f"{memory['VmHWM']:.0f}", "", ""),
                ("idle CPU (fraction of a core)", f"{idle_cpu:.3f}", f"over {t1 - t0:.0f} s",
                 "< 0.01"),
                ("idle API requests (not watches)", f"{idle.total}",
                 f"{idle.requests}; watch opens {sum(idle.watch_opens.values())}", "0"),
                ("webhook commit applied p50 (s)", f"{common.percentile(hooks, 50):.2f}",
                 f"{len(hooks)} commits", "<= 2"),
                ("webhook commit applied p99 (s)", f"{common.percentile(hooks, 99):.2f}", "",
                 "<= 5"),
                ("reconcile --wait, unchanged, median (s)", f"{common.median(reconciles):.2f}",
                 f"max {max(reconciles):.2f}, {len(reconciles)} runs", "< 2"),
            ]
            if slow_hooks:
                delay = common.percentile(slow_hooks, 50) - common.percentile(hooks, 50)
                rows.append(("webhook commit p50 while a render waits (s)",
                             f"{common.percentile(slow_hooks, 50):.2f}",
                             f"{len(slow_hooks)} commits; delay over p50 "
                             f"{delay:+.2f}",
                             "delay <= 1"))
            text = common.table(("figure", "value", "detail", "target"), rows)
            text += (f"\n\n{args.syncs} Syncs x {args.crs} Bundles of {CONFIGMAPS} ConfigMaps: "
                     f"{objects:,} objects; every Sync applied {synced_s:.0f} s after the agent "
                     f"started. Agent: `orksync agent --watch-namespace {NS} --no-leader-elect "
                     f"{args.agent_args}`.")
            print(text)
            if not args.no_record:
                common.record_run("syncs", env, {
                    "syncs": args.syncs, "crs": args.crs, "objects": objects,
                    "rss_mib": memory["VmRSS"], "peak_mib": memory["VmHWM"],
                    "idle_cpu": idle_cpu, "idle_requests": idle.total,
                    "webhook_p50_s": common.percentile(hooks, 50),
                    "webhook_p99_s": common.percentile(hooks, 99),
                    "reconcile_wait_median_s": common.median(reconciles),
                    "slow_webhook_p50_s": common.percentile(slow_hooks, 50) if slow_hooks else None,
                    "synced_s": synced_s, "agent_args": args.agent_args}, table=text)
    return 0


def _served(kube: Any) -> bool:
    try:
        kube.resource("orksync.io/v1alpha1", "Sync", refresh=True)
    except Exception:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
