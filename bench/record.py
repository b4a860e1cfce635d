"""The benchmarks' records: one JSON line per run appended to bench/results/<name>.jsonl.

Each line holds the date (UTC), the git commit measured (with `+dirty` when the tree had
uncommitted changes), a summary of the machine (host, cores, load average at the end,
Python), the figures, the peer's figures (kubectl, or the floor) and the command that
produced them. docs/performance.md shows the latest; the files and git keep the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def commit() -> str:
    """The commit measured: ORKSYNC_BENCH_COMMIT when set (a copy of a commit made with
    `git archive`, outside git), else this checkout's HEAD."""
    if os.environ.get("ORKSYNC_BENCH_COMMIT"):
        return os.environ["ORKSYNC_BENCH_COMMIT"]

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True,
                              check=False).stdout.strip()
    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "orksync")
    return f"{head}+dirty" if dirty else head


def machine() -> dict[str, Any]:
    return {"host": platform.node(), "cores": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "shared": "other work may run on the same cores"}


def command() -> str:
    return " ".join(["python", *sys.argv])


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def append(name: str, record: dict[str, Any]) -> Path:
    """Append one line to bench/results/<name>.jsonl."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=False) + "\n")
    print(f"appended to {path}", file=sys.stderr)
    return path


def run(name: str, figures: dict[str, Any], peer: dict[str, Any] | None = None) -> Path:
    """One benchmark run: its figures and its peer's."""
    return append(name, {"date": now(), "commit": commit(), "machine": machine(),
                         "figures": figures, "peer": peer or {}, "command": command()})
