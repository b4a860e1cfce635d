"""What one fresh apply costs the control plane: kube-apiserver and etcd CPU seconds (from
/proc/PID/stat) and wall time of the in-process Applier creating 1,000 objects over 20
fresh namespaces, with `fieldValidation=Warn` (the server's default) and `Ignore` (what
orksync sends, orksync.cluster.kube.FIELD_VALIDATION), alternating, several runs each.

On this 2-core machine a fresh apply is bound by the control plane's CPU, so this is where
a fresh-apply ratio is won or lost; see docs/performance.md.

    python bench/apiserver_cpu.py [--runs 6] [--objects 1000] [--no-record]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

import orksync.cluster.kube as kube_module
from orksync.apply.engine import Applier
from orksync.apply.run import ApplyOptions
from orksync.model import Action
from orksync.sync import mark_for_cleanup

MODES = ("Warn", "Ignore")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per mode (default 6)")
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results/apiserver_cpu.jsonl")
    args = parser.parse_args()

    results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
    default = kube_module.FIELD_VALIDATION
    with common.environment() as env:
        pids = {name: c.popen.pid for name, c in env.cp._components.items() if c.popen}
        try:
            for run in range(args.runs):
                for mode in MODES if run % 2 == 0 else tuple(reversed(MODES)):
                    kube_module.FIELD_VALIDATION = mode
                    prefix = f"c{mode[0].lower()}{run}"
                    common.create_namespaces(env, common.namespaces(prefix))
                    objs = mark_for_cleanup(common.RenderedSet(objects=tuple(
                        common.make_objects(prefix, args.objects)))).objects
                    before = {k: common.cpu_seconds(p) for k, p in pids.items()}
                    start = time.perf_counter()
                    changes = Applier(env.kube, ApplyOptions(workers=8)).apply(objs)
                    wall = time.perf_counter() - start
                    after = {k: common.cpu_seconds(p) for k, p in pids.items()}
                    if changes.counts()[Action.CREATED] != args.objects:
                        raise RuntimeError(f"{mode}: {changes.summary()}")
                    api = after["kube-apiserver"] - before["kube-apiserver"]
                    etcd = after["etcd"] - before["etcd"]
                    results[mode].append((wall, api, etcd))
                    print(f"run {run + 1} {mode}: wall {wall:.2f}s kube-apiserver {api:.2f} "
                          f"etcd {etcd:.2f} CPU s", file=sys.stderr, flush=True)
        finally:
            kube_module.FIELD_VALIDATION = default

        rows = []
        for mode in MODES:
            walls, apis, etcds = zip(*results[mode], strict=True)
            rows.append((f"`fieldValidation={mode}`", common.median(walls),
                         common.median(apis), common.median(etcds)))
        saving = 1 - rows[1][2] / rows[0][2]
        text = common.table(("applies sent with", "wall s (median)",
                             "kube-apiserver CPU s (median)", "etcd CPU s (median)"), rows)
        text += (f"\n\n`Ignore` costs the API server {saving:.0%} less CPU than `Warn` for "
                 f"{args.objects:,} fresh server-side applies (in-process Applier, 8 workers, "
                 f"{args.runs} runs per mode, alternating).")
        print(text)
        if not args.no_record:
            common.record_run("apiserver_cpu", env, {
                "objects": args.objects, "runs": args.runs,
                "by_mode": {mode: {"wall_s": wall, "apiserver_cpu_s": api, "etcd_cpu_s": etcd}
                            for (_, wall, api, etcd), mode in zip(rows, MODES, strict=True)},
                "apiserver_cpu_saving": saving}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
