"""`orksync render REPO --diff-against HEAD` against `orksync render REPO -o DIR`.

The repository of bench/render.py (N custom resources of 8 objects each) committed to a
fresh git repository, then one custom resource's image changed in the working tree: the
shape of a pull request. Measured as a user runs them, `python -m orksync` in a
subprocess, wall clock: the rendered change (REV's files read from git's objects, two
offline renders in one process, the per-object comparison, one object changed), and one
`orksync render -o` of the same working tree (in orksync.runtime.forked.default_jobs() processes).
Each size runs `--runs` times, alternating which goes first; the median of each is shown.

    TMPDIR=/dev/shm python bench/render_diff.py [--sizes 1000] [--runs 3] [--no-record]

The run is appended to bench/results/render_diff.jsonl.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import record  # noqa: E402
from render import make_repo  # noqa: E402


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=bench",
                    "-c", "user.email=bench@example.com", *args], check=True,
                   capture_output=True)


def timed(argv: list[str], expect: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ORKSYNC_PROGRESS": "false"}
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "orksync", *argv], capture_output=True,
                            text=True, env=env, check=False)
    seconds = time.monotonic() - start
    if result.returncode != expect:
        raise SystemExit(f"{argv}: exit {result.returncode}\n{result.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        work = Path(tempfile.mkdtemp(prefix="orksync-bench-diff-"))
        try:
            repo = work / "repo"
            make_repo(repo, n)
            git(repo, "init", "-q")
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", "base")
            changed = repo / "crs" / "app-00000.yaml"
            changed.write_text(changed.read_text().replace("nginx:1.0", "nginx:2.0"))
            diff_runs, render_runs = [], []
            for run in range(args.runs):
                order = ("diff", "render") if run % 2 == 0 else ("render", "diff")
                for what in order:
                    if what == "diff":
                        diff_runs.append(timed(["render", str(repo), "--diff-against",
                                                "HEAD", "--format", "json"], expect=1))
                    else:
                        out = work / "out"
                        render_runs.append(timed(["render", str(repo), "-o", str(out)],
                                                 expect=0))
                        shutil.rmtree(out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        diff_s, render_s = statistics.median(diff_runs), statistics.median(render_runs)
        figures[str(n)] = {"diff_against_s": round(diff_s, 2),
                           "render_s": round(render_s, 2),
                           "ratio": round(diff_s / render_s, 2)}
        print(f"{n} custom resources ({n * 8} objects): render --diff-against {diff_s:.2f}s, "
              f"render -o {render_s:.2f}s, ratio {diff_s / render_s:.2f} "
              f"(runs: {[round(x, 2) for x in diff_runs]} / "
              f"{[round(x, 2) for x in render_runs]})")
    if not args.no_record:
        record.append("render_diff", {"date": record.now(), "commit": record.commit(),
                                      "machine": record.machine(), "figures": figures,
                                      "command": record.command()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
