"""Fixtures of the template tests: orkoracle built once per session and the custom
resource its differential tests render (test_orkoracle_differential.py,
test_random_expressions.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orksync.render.notes.gocore import api_server_numbers
from tests.templates import orkoracle_cases as oc
from tests.templates.orkoracle import (
    ORACLE_SRC,
    cache_dir,
    int64_numbers,
    oracle_run,
    source_hash,
    typed,
)


@pytest.fixture(scope="session")
def orkoracle() -> Path:
    go = shutil.which("go")
    if go is None or not (ORACLE_SRC / "go.mod").is_file():
        why = "the go toolchain" if go is None else f"the oracle source ({ORACLE_SRC})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why} is required in CI for the orkoracle differential tests")
        pytest.skip(f"{why} not found")
    binary = cache_dir() / source_hash(ORACLE_SRC) / "orkoracle"
    if not binary.is_file():
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        subprocess.run([go, "build", "-buildvcs=false", "-o", str(partial), "./cmd/oracle"],
                       cwd=ORACLE_SRC, check=True)
        partial.replace(binary)
    return binary


@pytest.fixture(scope="session")
def case_data(orkoracle: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, dict[str, Any]]:
    """The custom resource file and the data map orksync renders it with."""
    tmp = tmp_path_factory.mktemp("orkoracle")
    data_file = tmp / "cr.json"
    raw = oc.build_data()
    data_file.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    seen = oracle_run(orkoracle, data_file, {"d": "{{ toJson . }}"}, tmp)["d"]
    assert seen["ok"], seen
    delivered = int64_numbers(seen["out"])
    data = api_server_numbers(raw)
    data["inputs"] = {}
    data["ork"] = {"inPod": False, "namespace": "", "version": ""}
    assert typed(data) == typed(delivered), \
        "orksync reads the numbers differently from the API server"
    return data_file, data
