"""The layering rules of docs/architecture.md, enforced by import-linter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_layers_and_the_import_contracts_hold() -> None:
    """pyproject.toml's contracts: the pipeline's layers (entry points, sync recipe,
    lifecycle, apply, cluster), pure loading and rendering, the narrow modules that import
    kubernetes, httptools, cryptography and git, no cycle between the package's parts."""
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout
    assert "The pipeline's layers: entry points, the sync recipe, lifecycle, apply, cluster " \
        "KEPT" in result.stdout


def test_the_package_type_checks_with_mypy() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "orksync"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_code_is_clean_under_ruff() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "orksync", "tests",
                             "testbed", "bench"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
