"""A Sync's first sync beside many other Syncs' objects (issue 32: what a hand-over costs as
the cluster grows): one Sync of `--crs` Widgets (each with a ConfigMap) served by one
agent process (no leader election), on a control plane holding `--others` Widgets and as
many ConfigMaps labelled as another Sync's. The agent is started `--runs` times: first for
the new Sync, then again as after a restart or a hand-over (a fresh root, the Sync's
inventory in place). For each start: the seconds from the process start until the Sync is
Ready at its revision, and the duration its `sync ... in Xs` line gives. Each code tree
(`--code DIR`, repeatable; default this checkout) is measured in the same run, one after
the other, on the same control plane.

    python bench/first_sync.py [--others 10000] [--crs 10] [--runs 3]
                               [--code DIR ...] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import record
from ruamel.yaml import YAML

from testbed.gitdaemon import GitDaemon, free_port
from tests.helpers import CRD, katalog, widget, write_repo

BOX = katalog("""\
        onCreate:
          configMaps: [{name: "{{ .metadata.name }}-config", data: {a: "{{ .spec.a }}"}}]
""")
OTHER = {"app.kubernetes.io/managed-by": "orksync", "orksync.io/shard": "sync-other"}


def fill(env: common.Env, total: int) -> None:
    """`total` Widgets and ConfigMaps over 20 namespaces, labelled as another Sync's."""
    common.create_namespaces(env, [f"other{i:02d}" for i in range(20)])
    widgets = env.kube.resource("test.orksync.io/v1", "Widget", refresh=True)
    maps = env.kube.resource("v1", "ConfigMap")

    def make(i: int) -> None:
        meta = {"name": f"x{i}", "namespace": f"other{i % 20:02d}", "labels": OTHER}
        env.kube.create(widgets, {"apiVersion": "test.orksync.io/v1", "kind": "Widget",
                                  "metadata": meta, "spec": {"a": 1}}, field_manager="bench")
        env.kube.create(maps, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {**meta, "name": f"x{i}-config"},
                               "data": {"a": "1" * 200}}, field_manager="bench")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(make, range(total)))


def ready(env: common.Env, name: str, sha: str) -> bool:
    status = env.kube.get(env.kube.resource("orksync.io/v1alpha1", "Sync"), "bench",
                          name).get("status") or {}
    condition = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return condition.get("status") == "True" and status.get("lastAppliedRevision") == sha


def start(env: common.Env, code: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "orksync", "agent", "--watch-namespace", "bench",
         "--kubeconfig", str(env.cp.kubeconfig), "--state-dir", str(state),
         "--listen", f"127.0.0.1:{free_port()}", "--no-leader-elect", "--identity", "bench"],
        env={**os.environ, "PYTHONPATH": str(code)}, cwd=code, stdout=subprocess.DEVNULL,
        stderr=log.open("w"), start_new_session=True)


def measure(env: common.Env, code: Path, name: str, url: str, sha: str, runs: int
            ) -> list[tuple[str, float, float]]:
    syncs = env.kube.resource("orksync.io/v1alpha1", "Sync")
    env.kube.create(syncs, {"apiVersion": "orksync.io/v1alpha1", "kind": "Sync",
                            "metadata": {"name": name, "namespace": "bench"},
                            "spec": {"url": url, "interval": "1h"}}, field_manager="bench")
    rows = []
    for run in range(runs):
        log = env.work / f"{name}-{run}.log"
        began = time.monotonic()
        proc = start(env, code, env.work / f"state-{name}", log)
        common.wait_until(f"{name} ready", lambda: ready(env, name, sha), 600, 0.05)
        wall = time.monotonic() - began
        lines = re.findall(r" sync rev=\S+ .* in ([0-9.]+)s", log.read_text())
        rows.append(("new Sync" if run == 0 else "restart", wall, float(lines[-1])))
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        # a fresh Ready for the next start to write (the status says nothing new otherwise)
        env.kube.request("PATCH", syncs.path("bench", name, "status"),
                         body={"status": {"conditions": [], "lastAppliedRevision": ""}},
                         content_type="application/merge-patch+json")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--others", type=int, default=10000)
    parser.add_argument("--crs", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--code", action="append", type=Path,
                        help="a tree of orksync to measure (repeatable; default this one)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    codes = args.code or [common.ROOT]
    figures: dict[str, Any] = {"others": args.others, "crs": args.crs}
    with common.environment() as env:
        common.create_namespaces(env, ["bench"])
        env.kube.apply(env.kube.resource("apiextensions.k8s.io/v1",
                                         "CustomResourceDefinition"),
                       YAML(typ="safe").load(CRD), field_manager="bench", force=True)
        common.wait_until("Widgets served", lambda: _served(env), 60)
        fill(env, args.others)
        sync_crd = common.ROOT / "deploy" / "base" / "sync.crd.yaml"
        subprocess.run(["kubectl", "--kubeconfig", str(env.cp.kubeconfig), "apply", "-f",
                        str(sync_crd)], check=True, capture_output=True)
        common.wait_until("Syncs served", lambda: _served(env, "orksync.io/v1alpha1",
                                                           "Sync"), 60)
        served = env.work / "served"
        served.mkdir()
        with GitDaemon(served) as daemon:
            for i, code in enumerate(codes):
                repo = served / f"r{i}"
                repo.mkdir(parents=True)
                subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
                write_repo(repo, {"katalog.yaml": BOX, "crd.yaml": CRD, **{
                    f"w{j}.yaml": widget(f"c{i}w{j}", "bench", a=1) for j in range(args.crs)}})
                common.commit(repo, "first")
                sha = common.head(repo)
                rows = measure(env, code, f"s{i}", daemon.url(f"r{i}"), sha, args.runs)
                for what, wall, sync in rows:
                    print(f"{code}: {what}: ready after {wall:.2f}s, sync {sync:.2f}s",
                          file=sys.stderr)
                figures[str(code)] = [{"start": w, "ready_s": round(r, 3), "sync_s": s}
                                      for w, r, s in rows]
    if not args.no_record:
        record.run("first_sync", figures)
    return 0


def _served(env: common.Env, api_version: str = "test.orksync.io/v1",
            kind: str = "Widget") -> bool:
    try:
        env.kube.resource(api_version, kind, refresh=True)
    except Exception:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
