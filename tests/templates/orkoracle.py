"""orkoracle, Orkestra's own note library (260 functions) with Go text/template and
Orkestra's resolver (../shared/tools/orkoracle; ORKORACLE_SRC overrides), for the
differential tests of this folder: where it is built, how a batch of templates is run
through it, and how its JSON is read. The fixtures that build it are in conftest.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import ROOT

ORACLE_SRC = Path(os.environ.get(
    "ORKORACLE_SRC", ROOT.parent / "shared/tools/orkoracle"))


def cache_dir() -> Path:
    base = os.environ.get("ORKSYNC_CACHE") or str(Path.home() / ".cache" / "orksync")
    return Path(base) / "orkoracle"


def source_hash(src: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.suffix in (".go", ".mod", ".sum"):
            digest.update(str(path.relative_to(src)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def oracle_run(binary: Path, data_file: Path, cases: dict[str, str],
               tmp: Path) -> dict[str, dict[str, Any]]:
    cases_file = tmp / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    out = subprocess.run([str(binary), "-d", str(data_file), "-cases", str(cases_file)],
                         check=True, capture_output=True, text=True, encoding="utf-8")
    result: dict[str, dict[str, Any]] = json.loads(out.stdout)
    return result


def int64_numbers(text: str) -> Any:
    """JSON decoded as apimachinery decodes it: an integer that fits int64 is an int,
    every other number a float."""
    def integer(token: str) -> int | float:
        value = int(token)
        return value if -(2**63) <= value < 2**63 else float(token)

    return json.loads(text, parse_int=integer)


def typed(value: Any) -> Any:
    """The value with the Python type of every leaf (1 and 1.0 differ)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)
