"""Render benchmark.

Repositories of N custom resources whose Katalog produces 8 objects each (Deployment,
Service, ConfigMap, once-Secret, ServiceAccount, Role, RoleBinding, PDB). For N = 1,000 and
10,000: load + render + write the rendered directory as `orksync render` does it (in
`orksync.runtime.forked.default_jobs()` processes), and the same in one process (objects per
second, CPU seconds, peak RSS), and the floor: writing the same final objects as YAML files
at the same paths with no loading, templating, hashing or index.
Each measurement runs in a fresh subprocess so peak RSS is its own, and its output is
removed once measured (outputs kept until the end fill a tmpfs by gigabytes and slow the
later runs).

    TMPDIR=/dev/shm python bench/render.py [--sizes 1000,10000] [--runs 3] [--no-record]

(/dev/shm: on a disk file system, creating the files dominates.) The run is appended to
bench/results/render.jsonl.

Each size runs the three `--runs` times, rotating which goes first, and the sizes take
turns run by run (1,000, 10,000, 1,000, ...), so that the 10k/1k ratio compares sizes
measured in the same minutes; the table shows the median run of each (by total seconds).
The floor writes each file as the render does (`orksync.rendered.directory._write_file`: open,
write, close), with the cyclic collector off as the render has it (orksync.runtime.gcpause).
"""


from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KATALOG = """apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: bench}
spec:
  crds:
    app:
      crdFile: ./crd.yaml
      operatorBox:
        onCreate:
          secrets:
            - name: "{{ .metadata.name }}-creds"
              once: true
              data: {password: "{{ randomAlphanumeric 32 }}", user: "{{ .metadata.name }}"}
          configMaps:
            - name: "{{ .metadata.name }}-config"
              data: {tier: "{{ .spec.tier }}", replicas: "{{ .spec.replicas }}"}
              reconcile: true
          serviceAccounts:
            - name: "{{ .metadata.name }}"
          roles:
            - name: "{{ .metadata.name }}-reader"
              rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]
          roleBindings:
            - name: "{{ .metadata.name }}-reader"
              roleRef: {name: "{{ .metadata.name }}-reader"}
              subjects: [{name: "{{ .metadata.name }}"}]
          deployments:
            - name: "{{ .metadata.name }}"
              image: "{{ .spec.image }}"
              replicas: "{{ .spec.replicas }}"
              port: "8080"
              reconcile: true
          services:
            - name: "{{ .metadata.name }}"
              port: "80"
              targetPort: "8080"
              reconcile: true
          pdb:
            - name: "{{ .metadata.name }}"
              minAvailable: "1"
"""

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: apps.bench.orksync.io}
spec:
  group: bench.orksync.io
  scope: Namespaced
  names: {kind: App, plural: apps, singular: app}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def make_repo(root: Path, n: int) -> None:
    (root / "crs").mkdir(parents=True)
    (root / "katalog.yaml").write_text(KATALOG)
    (root / "crd.yaml").write_text(CRD)
    for i in range(n):
        (root / "crs" / f"app-{i:05d}.yaml").write_text(
            f"apiVersion: bench.orksync.io/v1\nkind: App\nmetadata:\n  name: app-{i:05d}\n"
            f"  namespace: ns-{i % 20:02d}\nspec:\n  image: nginx:1.{i % 30}\n"
            f"  replicas: {i % 3}\n  tier: {'prod' if i % 2 else 'dev'}\n")


def child(mode: str, repo: Path, out: Path) -> dict[str, float]:
    """Runs inside the measuring subprocess. `render` is what `orksync render REPO -o OUT`
    runs, with the CPUs available (orksync.runtime.forked.default_jobs); `render1` the same in one
    process; `floor` writes the same final objects, prepared beforehand, as YAML files."""
    import gc

    from orksync.katalog.loader import load_repository
    from orksync.render.engine import render_catalog
    from orksync.render.parallel import render_to_directory
    from orksync.rendered.directory import _write_file, object_path
    from orksync.runtime.forked import default_jobs
    from orksync.yamls.io import dump_yaml

    jobs = 1
    cpu = os.times()
    if mode == "floor":
        # the same final objects at the same paths, prepared beforehand
        objects = [(object_path(o), dict(o.body))
                   for o in render_catalog(load_repository(repo)).objects]
        gc.disable()  # as the render runs (orksync.runtime.gcpause): a fair floor
        cpu = os.times()
        start = time.perf_counter()
        made: set[str] = set()
        for rel, body in objects:  # each file written as the render writes it
            parent = rel.rpartition("/")[0]
            if parent not in made:
                os.makedirs(out / parent, exist_ok=True)
                made.add(parent)
            _write_file(f"{out}/{rel}", dump_yaml(body).encode("utf-8"))
        seconds = time.perf_counter() - start
        count = len(objects)
        parts = {}
    else:
        jobs = default_jobs() if mode == "render" else 1
        start = time.perf_counter()
        catalog = load_repository(repo, jobs=jobs)
        loaded = time.perf_counter()
        written = render_to_directory(catalog, out, jobs=jobs)
        seconds = time.perf_counter() - start
        parts = {"load": loaded - start, "render_write": seconds - (loaded - start)}
        count = written.count
        assert written.facts.ok, written.facts.errors[:3]
    end = os.times()
    used = sum(end[i] - cpu[i] for i in range(4))  # user + system, this process + children
    peak = max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024
    return {"seconds": seconds, "cpu": used, "objects": count, "peak_mib": peak,
            "jobs": jobs, **parts}


MODES = ("render", "render1", "floor")


def measure(mode: str, repo: Path, workdir: Path) -> dict[str, float]:
    out = workdir / f"out-{mode}-{time.monotonic_ns()}"
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(repo), str(out)],
                          capture_output=True, text=True, check=True)
    shutil.rmtree(out)  # not kept for the next runs (10,000: 90,001 files, 0.4 GB in tmpfs)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "REPO", "OUT"))
    args = parser.parse_args()
    if args.child:
        mode, repo, out = args.child
        print(json.dumps(child(mode, Path(repo), Path(out))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        filesystem = subprocess.run(["stat", "-f", "-c", "%T", tmp], capture_output=True,
                                    text=True).stdout.strip() or "unknown"
        repos = {n: Path(tmp) / f"repo-{n}" for n in sizes}
        for n, repo in repos.items():
            make_repo(repo, n)
        runs: dict[int, dict[str, list[dict[str, float]]]] = {
            n: {m: [] for m in MODES} for n in sizes}
        # the sizes take turns, run by run, as the modes do within a run: a change in the
        # machine's speed during the benchmark then
        # falls on every size, not on the ones measured last
        for run in range(args.runs):
            for n, repo in repos.items():
                for mode in MODES[run % 3:] + MODES[:run % 3]:  # rotating which goes first
                    runs[n][mode].append(measure(mode, repo, Path(tmp)))
                print(f"{n}: " + " ".join(f"{m} {runs[n][m][-1]['seconds']:.2f}s"
                                          for m in MODES), file=sys.stderr, flush=True)
        rows = [(n, {m: median_run(runs[n][m]) for m in MODES}) for n in sizes]
    lines = ["| custom resources | objects | processes | render+write s | (load / render and "
             "write s) | CPU s | objects/s | peak MiB (largest process) | floor s (YAML only) "
             "| floor objects/s | speed vs floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, by_mode in rows:
        f = by_mode["floor"]
        for mode in ("render", "render1"):
            r = by_mode[mode]
            lines.append(
                f"| {n:,} | {int(r['objects']):,} | {int(r['jobs'])} | {r['seconds']:.2f} | "
                f"{r['load']:.2f} / {r['render_write']:.2f} | {r['cpu']:.2f} | "
                f"{r['objects'] / r['seconds']:,.0f} | {r['peak_mib']:.0f} | "
                f"{f['seconds']:.2f} | {f['objects'] / f['seconds']:,.0f} | "
                f"{f['seconds'] / r['seconds']:.2f} |")
    if len(rows) >= 2:
        lines.append("")
        for mode in ("render", "render1"):
            ratio = rows[-1][1][mode]["seconds"] / rows[0][1][mode]["seconds"]
            floor = rows[-1][1]["floor"]["seconds"] / rows[0][1]["floor"]["seconds"]
            lines.append(f"{int(rows[0][1][mode]['jobs'])} process(es): {rows[-1][0]:,} custom "
                         f"resources cost {ratio:.2f} times {rows[0][0]:,} (target: at most "
                         f"11; the floor: {floor:.2f} times).")
        lines.append("Speed vs floor target: at least 0.5.")
    table = "\n".join(lines)
    print(table)
    if not args.no_record:
        import record
        record.run("render", {
            "tmpdir": tempfile.gettempdir(), "filesystem": filesystem, "runs": args.runs,
            "sizes": {str(n): {mode: by_mode[mode] for mode in ("render", "render1")}
                      for n, by_mode in rows},
            "targets": {"ratio_largest_to_smallest": 11, "speed_vs_floor": 0.5},
            "table": table},
            {"floor": {str(n): by_mode["floor"] for n, by_mode in rows}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
