"""The layering rules of docs/architecture.md, enforced by import-linter."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.helpers import ROOT


def test_the_layers_and_the_import_contracts_hold() -> None:
    """pyproject.toml's contracts: the whole stack in layers and the layers inside render/,
    katalog/ and apply/, pure loading and rendering, the narrow modules that import
    kubernetes, urllib3, cryptography and git, no cycle between the package's parts."""
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is a test dependency (pip install -e '.[test]')"
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout
    assert "The whole stack in layers, entry points to foundations KEPT" in result.stdout


def _layered(container: str) -> set[str]:
    """The modules named by the `layers` contract over `container` ("" for the stack)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in contracts["contracts"]:
        if contract["type"] == "layers" and contract.get("containers", [""]) == [container]:
            return {name.strip() for layer in contract["layers"]
                    for name in layer.replace(":", "|").split("|")}
    raise AssertionError(f"no layers contract over {container or 'the whole stack'}")


def _children(package: Path) -> set[str]:
    return {p.stem for p in package.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}


def test_every_part_of_the_package_has_its_layer() -> None:
    """A module or package left out of a `layers` contract may import anything: every
    top-level part of orksync, and every part of render/, katalog/, the loader and apply/,
    is named."""
    package = ROOT / "orksync"
    assert {f"orksync.{c}" for c in _children(package)} \
        <= _layered(""), "add the new module to the whole stack's layers in pyproject.toml"
    for inner in ("render", "katalog", "katalog.loader", "apply"):
        assert _children(package.joinpath(*inner.split("."))) \
            <= _layered(f"orksync.{inner}"), inner


def test_the_package_type_checks_with_mypy() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "orksync"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_cluster_client_and_the_apply_engine_pass_mypy_strict() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "orksync/cluster",
                             "orksync/apply"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_code_is_clean_under_ruff() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "orksync", "tests",
                             "testbed", "bench"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 500


MAX_MODULE_DOCSTRING_LINES = 25


def test_no_module_or_class_is_a_mega_one() -> None:
    """Every module stays under 800 lines, its classes under 500 and its docstring under 25:
    a larger one is split by responsibility (the loader's stages, the entry renderer, the
    agent's loop, jobs and reconciler), and a specification goes to docs/."""
    too_big = []
    for path in sorted((ROOT / "orksync").rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(ROOT)
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{where}: {lines} lines")
        tree = ast.parse(text)
        doc = ast.get_docstring(tree, clean=False) or ""
        if doc.count("\n") + 1 > MAX_MODULE_DOCSTRING_LINES:
            too_big.append(f"{where}: a docstring of {doc.count(chr(10)) + 1} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big.append(f"{where}: class {node.name}: {size} lines")
    assert not too_big, too_big


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
