"""Differential tests: orksync's Go dialect and note library against orkoracle, which is
Orkestra's own note library (260 functions) with Go text/template and Orkestra's resolver
(../shared/tools/orkoracle, built once into the cache; skipped locally without Go or
../shared, a failure in CI).

Every function the oracle lists is called with generated arguments (tests/templates/orkoracle_cases)
and every action is run, on a custom resource read as the API server delivers it; each
case must give the same output or fail on both sides, outside the documented allow-list
(`orkoracle_cases.ALLOWED`, docs/differences.md "Template functions"). The seed and the
number of calls per function come from ORKORACLE_SEED / ORKORACLE_PER_FUNCTION; with
ORKORACLE_REPORT=FILE the per-function result is written there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import EXTENSIONS, builtin_functions
from orksync.render.notes.gocore import api_server_numbers
from orksync.secrets.random import PlaceholderRandom
from tests.helpers import ROOT
from tests.templates import orkoracle_cases as oc

pytestmark = pytest.mark.go
ORACLE_SRC = Path(os.environ.get(
    "ORKORACLE_SRC", ROOT.parent / "shared/tools/orkoracle"))
SEED = int(os.environ.get("ORKORACLE_SEED", "20261201"))
PER_FUNCTION = int(os.environ.get("ORKORACLE_PER_FUNCTION", "24"))
MIN_CASES = 5000


def _cache_dir() -> Path:
    base = os.environ.get("ORKSYNC_CACHE") or str(Path.home() / ".cache" / "orksync")
    return Path(base) / "orkoracle"


def _source_hash(src: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.suffix in (".go", ".mod", ".sum"):
            digest.update(str(path.relative_to(src)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def orkoracle() -> Path:
    go = shutil.which("go")
    if go is None or not (ORACLE_SRC / "go.mod").is_file():
        why = "the go toolchain" if go is None else f"the oracle source ({ORACLE_SRC})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why} is required in CI for the orkoracle differential tests")
        pytest.skip(f"{why} not found")
    binary = _cache_dir() / _source_hash(ORACLE_SRC) / "orkoracle"
    if not binary.is_file():
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        subprocess.run([go, "build", "-buildvcs=false", "-o", str(partial), "./cmd/oracle"],
                       cwd=ORACLE_SRC, check=True)
        partial.replace(binary)
    return binary


def _oracle_run(binary: Path, data_file: Path, cases: dict[str, str],
                tmp: Path) -> dict[str, dict[str, Any]]:
    cases_file = tmp / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    out = subprocess.run([str(binary), "-d", str(data_file), "-cases", str(cases_file)],
                         check=True, capture_output=True, text=True, encoding="utf-8")
    result: dict[str, dict[str, Any]] = json.loads(out.stdout)
    return result


def _int64_numbers(text: str) -> Any:
    """JSON decoded as apimachinery decodes it: an integer that fits int64 is an int,
    every other number a float."""
    def integer(token: str) -> int | float:
        value = int(token)
        return value if -(2**63) <= value < 2**63 else float(token)

    return json.loads(text, parse_int=integer)


@pytest.fixture(scope="session")
def case_data(orkoracle: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[Path, dict[str, Any]]:
    """The custom resource file and the data map orksync renders it with."""
    tmp = tmp_path_factory.mktemp("orkoracle")
    data_file = tmp / "cr.json"
    raw = oc.build_data()
    data_file.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    seen = _oracle_run(orkoracle, data_file, {"d": "{{ toJson . }}"}, tmp)["d"]
    assert seen["ok"], seen
    delivered = _int64_numbers(seen["out"])
    data = api_server_numbers(raw)
    data["inputs"] = {}
    data["ork"] = {"inPod": False, "namespace": "", "version": ""}
    assert _typed(data) == _typed(delivered), \
        "orksync reads the numbers differently from the API server"
    return data_file, data


def _typed(value: Any) -> Any:
    """The value with the Python type of every leaf (1 and 1.0 differ)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


def _python(engine: GoTemplateEngine, template: str, data: Any) -> dict[str, Any]:
    try:
        return {"ok": True, "out": engine.render(template, data)}
    except GoTemplateError as exc:
        return {"ok": False, "err": exc.message}


def test_api_server_numbers_match_what_the_oracle_reads(case_data: Any) -> None:
    data = case_data[1]
    assert data["spec"]["fmil"] == 1000000 and type(data["spec"]["fmil"]) is int
    assert type(data["spec"]["huge"]) is float and type(data["spec"]["f15"]) is float


def test_every_function_and_action_agrees_with_orkestra(
        orkoracle: Path, case_data: tuple[Path, dict[str, Any]],
        tmp_path: Path) -> None:
    data_file, data = case_data
    listed = subprocess.run([str(orkoracle), "-list-funcs"], check=True, capture_output=True,
                            text=True).stdout.split()
    assert len(listed) == 260
    moment: list[datetime] = []  # the clock notes read: when the oracle ran
    functions = builtin_functions(clock=lambda: moment[0], random=PlaceholderRandom())
    assert set(listed) <= set(functions), sorted(set(listed) - set(functions))
    assert set(functions) - set(listed) == set(EXTENSIONS)
    cases = oc.generate(functions, listed, SEED, PER_FUNCTION)
    assert len(cases) >= MIN_CASES or PER_FUNCTION < 20
    engine = GoTemplateEngine(functions)
    started = datetime.now(UTC)
    go = _oracle_run(orkoracle, data_file, {k: t for k, (_, t) in cases.items()}, tmp_path)
    moment.append(started + (datetime.now(UTC) - started) / 2)
    verdicts: dict[str, Counter[str]] = defaultdict(Counter)
    failures: list[str] = []
    internal: list[str] = []
    for key, (name, template) in cases.items():
        py = _python(engine, template, data)
        if not py["ok"] and py["err"].startswith("template execution failed"):
            internal.append(f"{key}: {template!r}: {py['err']}")
        why = oc.compare(name, template, go[key], py)
        verdicts[name]["allowed" if why and why.startswith("allowed") else
                       "differ" if why else "same"] += 1
        if not why and go[key]["ok"]:
            verdicts[name]["rendered"] += 1  # the same output, not only a failure on both
        if why and not why.startswith("allowed"):
            failures.append(f"{key}: {why}\n  template: {template}\n  go: {go[key]}\n"
                            f"  py: {py}")
    report = os.environ.get("ORKORACLE_REPORT")
    if report:
        lines = [f"{name}\tsame={c['same']}\trendered={c['rendered']}\t"
                 f"allowed={c['allowed']}\tdiffer={c['differ']}"
                 for name, c in sorted(verdicts.items())]
        Path(report).write_text("\n".join(lines) + "\n\n" + "\n".join(failures) + "\n",
                                encoding="utf-8")
    assert not internal, "\n".join(internal[:20])
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + \
        "\n".join(failures[:40])


DARK_SEED = int(os.environ.get("ORKORACLE_DARK_SEED", str(int(time.time()))))
DARK_COUNT = int(os.environ.get("ORKORACLE_DARK_COUNT", "4000"))


def test_dark_corners_agree_with_orkestra(
        orkoracle: Path, case_data: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """The categories where a generated corpus once found disagreements (cron time zones
    and descriptors, yaml.v3 scalars, time parsing, quantities beyond int64, JSON escapes,
    %#v of []string, URL/e-mail checks, case mapping of invalid UTF-8, slice indexes):
    DARK_COUNT fresh templates per run, from a seed that changes every run (set
    ORKORACLE_DARK_SEED to replay one)."""
    data_file, data = case_data
    moment: list[datetime] = []
    functions = builtin_functions(clock=lambda: moment[0], random=PlaceholderRandom())
    cases = oc.generate_dark(DARK_SEED, DARK_COUNT)
    engine = GoTemplateEngine(functions)
    started = datetime.now(UTC)
    go = _oracle_run(orkoracle, data_file, {k: t for k, (_, t) in cases.items()}, tmp_path)
    moment.append(started + (datetime.now(UTC) - started) / 2)
    failures = []
    categories: Counter[str] = Counter()
    for key, (name, template) in cases.items():
        py = _python(engine, template, data)
        why = oc.compare(name, template, go[key], py)
        categories[key.split("#")[0]] += 1
        if why and not why.startswith("allowed"):
            failures.append(f"{key}: {why}\n  template: {template}\n  go: {go[key]}\n"
                            f"  py: {py}")
    assert len(categories) == len(oc.DARK_CATEGORIES)
    assert not failures, (f"seed {DARK_SEED} (ORKORACLE_DARK_SEED={DARK_SEED} replays it): "
                          f"{len(failures)} of {len(cases)} cases differ:\n"
                          + "\n".join(failures[:40]))
