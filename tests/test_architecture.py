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
    kubernetes, urllib3, cryptography and git, no cycle between the package's parts."""
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


def test_every_declared_runtime_dependency_is_imported_and_every_import_is_declared() -> None:
    """pyproject.toml's `dependencies` against the third-party modules the package imports
    (any import statement, at the top or inside a function): none declared for nothing,
    none used without being declared."""
    import ast
    import importlib.metadata
    import re
    import tomllib

    def canonical(name: str) -> str:  # PEP 503: case and runs of -_. do not matter
        return re.sub(r"[-_.]+", "-", name).lower()

    declared = {canonical(re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0])
                for spec in tomllib.loads((ROOT / "pyproject.toml").read_text())
                ["project"]["dependencies"]}
    imported: set[str] = set()
    for path in (ROOT / "orksync").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    owners = importlib.metadata.packages_distributions()
    used = {canonical(dist) for name in imported if name not in sys.stdlib_module_names
            and name != "orksync" for dist in owners.get(name, [f"<{name}: no package>"])}
    assert sorted(declared - used) == []  # declared, never imported
    # imported, not declared (ruamel.yaml.clib arrives with the `ruamel` name it shares)
    assert sorted(used - declared) == []
