"""A/B of the kubeconfig reader: orksync's own (this checkout) against the `kubernetes`
package's loader (commit LOADER, extracted with `git archive`), in one-shot runs.

Each measurement runs in a fresh process, the two variants interleaved (the order
alternating each repetition), so a change in the machine's load falls on both:

  import      `python -X importtime -c "import orksync.cli"`: the cumulative microseconds
              of orksync.cli (neither variant imports `kubernetes` here)
  load        a fresh process reading the control plane's kubeconfig
              (orksync.cluster.kubeconfig.load_kubeconfig): wall seconds from before the
              import of orksync.cluster.kubeconfig to the Connection, and the process's
              peak RSS
  help        `python -m orksync status --help`: wall seconds
  diff        `python -m orksync diff examples/quickstart --kubeconfig K` against the local
              control plane (`--no-control-plane`: skipped): wall seconds and peak RSS

One line per (measurement, variant) is appended to bench/results/ab.jsonl: median, all
samples, and the ratio to the own reader (`vs_machinery`: the baseline is the variant that
was there before).

    python bench/kubeconfig_ab.py [--runs 7] [--no-control-plane]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import record  # noqa: E402

LOADER = "80a60fa"  # the kubeconfig read through the kubernetes package's loader (not taken)
VARIANTS = ("own-reader", "kubernetes-loader")

LOAD = """
import resource, sys, time
start = time.perf_counter()
from orksync.cluster.kubeconfig import load_kubeconfig
load_kubeconfig(sys.argv[1])
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def timed(tree: Path, argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds and peak RSS (MiB) of one run, through GNU time's %M when present."""
    start = time.perf_counter()
    gnu_time = Path("/usr/bin/time")
    prefix = [str(gnu_time), "-f", "MAXRSS %M"] if gnu_time.exists() else []
    done = subprocess.run([*prefix, *argv], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    found = re.search(r"MAXRSS (\d+)", done.stderr)
    return wall, int(found.group(1)) / 1024 if found else 0.0, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-control-plane", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="orksync-kcfg-ab-") as scratch:
        loader = Path(scratch) / "loader"
        loader.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", LOADER],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(loader)], input=archive, check=True)
        trees = {"own-reader": ROOT, "kubernetes-loader": loader}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

        cp: Any = None
        if not args.no_control_plane:
            from testbed.controlplane import ControlPlane

            cp = ControlPlane()
            cp.start()
        try:
            kubeconfig = str(cp.kubeconfig) if cp is not None else ""
            samples: dict[tuple[str, str, str], list[float]] = {}
            statuses: dict[tuple[str, str], set[int]] = {}

            def add(what: str, metric: str, variant: str, value: float) -> None:
                samples.setdefault((what, metric, variant), []).append(round(value, 4))

            for i in range(args.runs):
                order = VARIANTS if i % 2 == 0 else VARIANTS[::-1]
                for variant in order:
                    tree = trees[variant]
                    py = sys.executable
                    done = subprocess.run([py, "-X", "importtime", "-c", "import orksync.cli"],
                                          cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                                          capture_output=True, text=True, check=True)
                    line = [x for x in done.stderr.splitlines() if x.endswith("| orksync.cli")]
                    add("import orksync.cli", "cumulative_seconds", variant,
                        int(line[-1].split("|")[1]) / 1e6)
                    wall, _, _ = timed(tree, [py, "-m", "orksync", "status", "--help"], env)
                    add("orksync status --help", "wall_seconds", variant, wall)
                    if cp is None:
                        continue
                    done = subprocess.run([py, "-c", LOAD, kubeconfig], cwd=tree,
                                          env={**env, "PYTHONPATH": str(tree)},
                                          capture_output=True, text=True, check=True)
                    seconds, rss = done.stdout.split()
                    add("load_kubeconfig in a fresh process", "wall_seconds", variant,
                        float(seconds))
                    add("load_kubeconfig in a fresh process", "peak_rss_mib", variant,
                        int(rss) / 1024)
                    wall, peak, status = timed(
                        tree, [py, "-m", "orksync", "diff", "examples/quickstart",
                               "--kubeconfig", kubeconfig], env)
                    statuses.setdefault(("diff", variant), set()).add(status)
                    add("orksync diff examples/quickstart", "wall_seconds", variant, wall)
                    if peak:
                        add("orksync diff examples/quickstart", "peak_rss_mib", variant, peak)
        finally:
            if cp is not None:
                cp.stop()

    for (what, metric, variant), values in samples.items():
        base = statistics.median(samples[(what, metric, "own-reader")])
        median = statistics.median(values)
        note = {}
        if what.startswith("orksync diff"):
            note = {"exit_status": sorted(statuses[("diff", variant)])}
        record.append("ab", {
            "date": record.now(), "commit": record.commit(), "what": what,
            "variant": variant, "metric": metric, "median": round(median, 4),
            "samples": values, "vs_machinery": round(median / base, 4) if base else None,
            **note, "baseline": "own-reader = this checkout",
            "kubernetes-loader": LOADER, "machine": record.machine(),
            "command": record.command()})
        print(f"{what:40} {metric:20} {variant:18} median {median:.4f} "
              f"({median / base if base else 0:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
