"""Render benchmark (issue: performance, benchmark 1).

Repositories of N custom resources whose Katalog produces 8 objects each (Deployment,
Service, ConfigMap, once-Secret, ServiceAccount, Role, RoleBinding, PDB). For N = 1,000 and
10,000: load + render + write the rendered directory (objects per second, peak RSS), and
the floor: writing the same final objects as YAML files with no loading or templating.
Each measurement runs in a fresh subprocess so peak RSS is its own.

    python bench/render.py [--sizes 1000,10000] [--runs 3] [--no-record]

Each size runs render and floor `--runs` times, alternating which goes first; the table
shows the median run of each (by total seconds). The floor writes each file as the render
does (`orksync.render.output._write_file`: open, write, close).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
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
    """Runs inside the measuring subprocess."""
    from orksync.katalog.loader import load_repository
    from orksync.render.engine import render_catalog
    from orksync.render.output import _write_file, write_rendered
    from orksync.yamlio import dump_yaml

    if mode == "floor":
        # the same final objects, prepared beforehand (not timed), written as YAML files
        objects = [dict(o.body) for o in render_catalog(load_repository(repo)).objects]
        start = time.perf_counter()
        out.mkdir()
        for i, body in enumerate(objects):  # each file written as write_rendered writes it
            _write_file(str(out / f"{i:06d}.yaml"), dump_yaml(body).encode("utf-8"))
        seconds = time.perf_counter() - start
        count = len(objects)
        parts = {}
    else:
        start = time.perf_counter()
        catalog = load_repository(repo)
        loaded = time.perf_counter()
        rendered = render_catalog(catalog)
        templated = time.perf_counter()
        write_rendered(rendered, out)
        seconds = time.perf_counter() - start
        parts = {"load": loaded - start, "render": templated - loaded,
                 "write": seconds - (templated - start)}
        count = len(rendered.objects)
        assert rendered.ok, rendered.errors[:3]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "objects": count, "peak_mib": peak, **parts}


def measure(mode: str, repo: Path, workdir: Path) -> dict[str, float]:
    out = workdir / f"out-{mode}-{time.monotonic_ns()}"
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(repo), str(out)],
                          capture_output=True, text=True, check=True)
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
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        filesystem = subprocess.run(["stat", "-f", "-c", "%T", tmp], capture_output=True,
                                    text=True).stdout.strip() or "unknown"
        for n in sizes:
            repo = Path(tmp) / f"repo-{n}"
            make_repo(repo, n)
            renders, floors = [], []
            for run in range(args.runs):  # alternating which goes first
                for mode in ("render", "floor") if run % 2 == 0 else ("floor", "render"):
                    (renders if mode == "render" else floors).append(
                        measure(mode, repo, Path(tmp)))
                print(f"{n}: render {renders[-1]['seconds']:.2f}s floor "
                      f"{floors[-1]['seconds']:.2f}s", file=sys.stderr, flush=True)
            rows.append((n, median_run(renders), median_run(floors)))
    lines = ["| custom resources | objects | render+write s | (load / render / write s) | "
             "objects/s | peak MiB | floor s (YAML only) | floor objects/s | speed vs floor |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n, r, f in rows:
        lines.append(f"| {n:,} | {int(r['objects']):,} | {r['seconds']:.2f} | "
                     f"{r['load']:.2f} / {r['render']:.2f} / {r['write']:.2f} | "
                     f"{r['objects'] / r['seconds']:,.0f} | {r['peak_mib']:.0f} | "
                     f"{f['seconds']:.2f} | {f['objects'] / f['seconds']:,.0f} | "
                     f"{f['seconds'] / r['seconds']:.2f} |")
    if len(rows) >= 2:
        ratio = rows[-1][1]["seconds"] / rows[0][1]["seconds"]
        lines.append("")
        lines.append(f"{rows[-1][0]:,} custom resources cost {ratio:.2f} times "
                     f"{rows[0][0]:,} (target: at most 11); speed vs floor target: at least 0.5.")
    table = "\n".join(lines)
    print(table)
    if not args.no_record:
        version = subprocess.run([sys.executable, "-m", "orksync", "version"],
                                 capture_output=True, text=True, cwd=ROOT).stdout.strip()
        section = (f"\n## Render ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)\n\n"
                   f"`python bench/render.py --sizes {args.sizes} --runs {args.runs}` "
                   f"(files written to {tempfile.gettempdir()}, a {filesystem} file system) on "
                   f"{platform.node()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}, {version}, load average "
                   f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. Each "
                   "measurement runs in its own process (median of the runs shown); the floor "
                   "writes the same final objects with `orksync.yamlio.dump_yaml`, one file "
                   "each in one directory, no loading or templating; the pairs alternate "
                   "which goes first.\n\n"
                   f"{table}\n")
        perf = ROOT / "docs" / "performance.md"
        if not perf.exists():
            perf.write_text("# Performance\n\nResults appended by the scripts in bench/, one "
                            "section per run, newest last.\n")
        with perf.open("a") as fh:
            fh.write(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
