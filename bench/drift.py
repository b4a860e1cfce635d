"""Drift correction: edit 1% of 1,000 objects by hand (a merge patch of a label value, or
of a ConfigMap data key, that orksync owns), then time the correcting `orksync apply DIR`
relative to a no-change resync; verify every edit was corrected.

    python bench/drift.py [--runs 3] [--objects 1000] [--percent 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

from orksync.apply.engine import Applier
from orksync.apply.inventory import inventory_identity
from orksync.apply.run import ApplyOptions
from orksync.cluster.kube import MERGE_PATCH
from orksync.model import Action, RenderedObject
from orksync.sync import mark_for_cleanup


def edit(env: common.Env, obj: RenderedObject, run: int) -> None:
    """A hand edit by another field manager: ConfigMap data key0, else the tier label."""
    res = env.kube.resource(obj.ref.api_version, obj.ref.kind)
    if obj.ref.kind == "ConfigMap":
        patch = {"data": {"key0": f"edited-{run}"}}
    else:
        patch = {"metadata": {"labels": {common.EDIT_LABEL: f"edited-{run}"}}}
    env.kube.request("PATCH", res.path(obj.ref.namespace, obj.ref.name),
                     query={"fieldManager": "bench-hand"}, body=patch,
                     content_type=MERGE_PATCH)


def corrected(env: common.Env, obj: RenderedObject) -> bool:
    res = env.kube.resource(obj.ref.api_version, obj.ref.kind)
    live = env.kube.get(res, obj.ref.namespace, obj.ref.name)
    if obj.ref.kind == "ConfigMap":
        return live["data"]["key0"] == obj.body["data"]["key0"]
    return live["metadata"]["labels"][common.EDIT_LABEL] == "gold"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--percent", type=float, default=1.0)
    parser.add_argument("--no-record", "--no-doc", dest="no_doc", action="store_true",
                        help="do not append to bench/results/drift.jsonl")
    args = parser.parse_args()
    n = args.objects

    with common.environment() as env:
        prefix, name = "dr", "bench-dr"
        common.create_namespaces(env, common.namespaces(prefix))
        objs = common.make_objects(prefix, n)
        rendered = common.render(objs, env.work / prefix)
        first = common.run_orksync(env, rendered, name)
        print(f"first apply {first.seconds:.2f}s", file=sys.stderr)
        step = max(1, round(100 / args.percent))
        # every step-th object, offset per run so each kind gets edited over the runs
        rows, ratios = [], []
        for run in range(1, args.runs + 1):
            resync = common.run_orksync(env, rendered, name)
            line = common.summary_line(resync.output)
            if f"unchanged={n}" not in line:
                raise RuntimeError(f"resync was not a no-op: {line}")
            targets = objs[run % step::step]
            for obj in targets:
                edit(env, obj, run)
            fix = common.run_orksync(env, rendered, name)
            line = common.summary_line(fix.output)
            if f"configured={len(targets)}" not in line:
                raise RuntimeError(f"expected {len(targets)} configured: {line}")
            ok = sum(corrected(env, o) for o in targets)
            if ok != len(targets):
                raise RuntimeError(f"only {ok} of {len(targets)} edits were corrected")
            kinds = sorted({o.ref.kind for o in targets})
            r = common.ratio(fix.seconds, resync.seconds)
            ratios.append(r)
            rows.append((run, len(targets), ",".join(kinds), resync.seconds, fix.seconds, r,
                         f"{ok}/{len(targets)}"))
            print(f"run {run}: resync {resync.seconds:.2f}s correcting {fix.seconds:.2f}s "
                  f"{line}", file=sys.stderr)

        # in process: requests of a correcting sync at the client
        targets = objs[::step]
        for obj in targets:
            edit(env, obj, 99)
        before = env.kube.requests
        start = time.perf_counter()
        changes = Applier(env.kube, ApplyOptions(workers=8)).apply(
            mark_for_cleanup(common.RenderedSet(objects=tuple(objs)),
                             inventory_identity(name)))
        seconds = time.perf_counter() - start
        reqs = env.kube.requests - before
        if changes.counts().get(Action.CONFIGURED, 0) != len(targets) or \
                not all(corrected(env, o) for o in targets):
            raise RuntimeError(f"in-process correction incomplete: {changes.summary()}")

        med = common.median(ratios)
        text = common.table(("run", "edited", "kinds edited", "no-change resync s",
                             "correcting sync s", "correcting/resync", "corrected"), rows)
        text += (f"\n\nmedian ratio correcting/no-change: **{med:.3f}**\n\n"
                 f"in-process Applier correcting sync ({len(targets)} edited): "
                 f"{seconds:.3f}s, {reqs} client requests ({changes.summary()})\n\n"
                 f"{n} objects over 20 namespaces, {args.percent:g}% edited per run by a merge "
                 f"patch from field manager `bench-hand` (ConfigMaps: data key `key0`; other "
                 f"kinds: label `{common.EDIT_LABEL}`); both syncs are `{common.ORKSYNC_CMD}`; "
                 f"each edit verified corrected with a GET afterwards.")
        print(text)
        if not args.no_doc:
            common.record_run("drift", env, {
                "objects": n, "percent": args.percent, "median_ratio_correcting_to_resync": med,
                "in_process_correcting_s": seconds, "in_process_requests": reqs}, table=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
