"""The layering rules of docs/architecture.md, enforced by import-linter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_only_the_narrow_modules_import_kubernetes_cryptography_and_git() -> None:
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def test_the_package_type_checks_with_mypy() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "orksync"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_code_is_clean_under_ruff() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "orksync", "tests"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
