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

import os
import subprocess
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import EXTENSIONS, builtin_functions
from orksync.secrets.random import PlaceholderRandom
from tests.templates import orkoracle_cases as oc
from tests.templates.orkoracle import oracle_run

pytestmark = pytest.mark.go
SEED = int(os.environ.get("ORKORACLE_SEED", "20261201"))
PER_FUNCTION = int(os.environ.get("ORKORACLE_PER_FUNCTION", "24"))
MIN_CASES = 5000


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
    go = oracle_run(orkoracle, data_file, {k: t for k, (_, t) in cases.items()}, tmp_path)
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
    go = oracle_run(orkoracle, data_file, {k: t for k, (_, t) in cases.items()}, tmp_path)
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
