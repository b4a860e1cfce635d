"""Templates computing on random values: the expression is deferred to the Secret's write
and evaluated there over the generated value, as Orkestra evaluates it over its value.

* Pure: what a render writes for such an expression, one value used twice, conditions and
  fields of a computed value refused, an evaluation failure that names the call and never
  the value.
* Against orkoracle (marker `go`, Orkestra's note library with Go text/template): every
  builtin and every note that takes a string, applied to each random note
  (tests/templates/random_cases.py), evaluated by orksync over a value it generated must give what
  Orkestra gives over that same value, and the value and the named results must have
  Orkestra's shapes.
* On the real control plane (marker `cluster`): a Katalog whose Secrets use these
  expressions is synced; each key holds the generated value and the result, which must be
  what the template computes from that value, with Orkestra's shape; a resync keeps every
  value; neither the rendered files nor the logs hold any of them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster.kube import Kube
from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import builtin_functions, user_notes
from orksync.secrets.random import (
    GENERATE_TOKEN_RE,
    CryptoRandom,
    PlaceholderRandom,
    RandomSource,
    fill_generated,
)
from testbed.controlplane import ControlPlane
from tests.helpers import CRD, write_repo
from tests.templates import orkoracle_cases as oc
from tests.templates import random_cases as rc
from tests.templates.orkoracle import oracle_run

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
SEED = int(os.environ.get("ORKORACLE_SEED", "20261207"))
DRAWS = 12  # values each case is evaluated over before it goes into the cluster's Secrets


def engine() -> GoTemplateEngine:
    return GoTemplateEngine(builtin_functions(clock=lambda: NOW,
                                              random=PlaceholderRandom()))


def generate(text: str, random: RandomSource | None = None, now: datetime = NOW) -> str:
    """What the Secret's write makes of a rendered text."""
    from orksync.apply.secrets import Generating

    return fill_generated(text, Generating(random or CryptoRandom(), now))


# ── pure ─────────────────────────────────────────────────────────────────────────────
def test_a_computed_random_value_renders_an_expression_and_is_made_at_generation() -> None:
    rendered = engine().render('{{ printf "%.6s" (randomHex 8) }}', {})
    assert GENERATE_TOKEN_RE.fullmatch(rendered) and "gener" not in rendered[10:]
    assert re.fullmatch(r"[0-9a-f]{6}", generate(rendered))
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f-]{27}", generate(
        engine().render("{{ uuidv4 | urlquery }}", {})))
    assert generate(engine().render("{{ len (randomHex 5) }}", {})) == "10"
    encoded = generate(engine().render("{{ randomAlphanumeric 32 | toBase64 }}", {}))
    assert re.fullmatch(r"[A-Za-z0-9]{32}", base64.b64decode(encoded).decode())


def test_a_random_value_printed_as_it_is_keeps_its_plain_placeholder() -> None:
    assert engine().render("x-{{ randomHex 4 }}-{{ uuidv4 }}", {}) == \
        "x-<generate:randomHex:4>-<generate:uuidv4>"
    assert engine().render("{{ or .spec.password (randomHex 4) }}", {"spec": {}}) == \
        "<generate:randomHex:4>"


def test_one_random_value_used_twice_in_a_text_is_one_value() -> None:
    rendered = engine().render(
        "{{ $p := randomHex 8 }}{{ $p }}:{{ toUpper $p }}:{{ $p }}:{{ randomHex 8 }}", {})
    first, upper, again, other = generate(rendered).split(":")
    assert upper == first.upper() and again == first and other != first
    assert re.fullmatch(r"[0-9a-f]{16}", first) and re.fullmatch(r"[0-9a-f]{16}", other)


@pytest.mark.parametrize(("template", "message"), [
    ('{{ if eq (randomHex 1) "aa" }}y{{ end }}', "eq over randomHex 1 .* cannot decide a "
                                                 "condition"),
    ('{{ range split (randomHex 4) "a" }}{{ . }}{{ end }}', "range over split over "
                                                             "randomHex 4"),
    ("{{ (toList (randomHex 2)).x }}", "can't evaluate field x of the result of toList over "
                                       "randomHex 2"),
    ("{{ repeat (randomHex 2) (len (randomHex 1)) | toUpper | truncate (randomHex 1) }}",
     "truncate: argument 2: wrong type for value; expected int; got string"),
])
def test_what_cannot_be_deferred_is_an_error_naming_the_random_call(template: str,
                                                                    message: str) -> None:
    with pytest.raises(GoTemplateError, match=message):
        engine().render(template, {"spec": {}})


def test_the_jinja_dialect_defers_through_notes_and_refuses_its_own_filters() -> None:
    from orksync.render.jinja_dialect import JinjaTemplateEngine

    jinja = JinjaTemplateEngine(builtin_functions(clock=lambda: NOW,
                                                  random=PlaceholderRandom()))
    first, upper = generate(jinja.render(
        "{% set p = randomHex(4) %}{{ p }}:{{ toUpper(p) }}", {})).split(":")
    assert upper == first.upper() and re.fullmatch(r"[0-9a-f]{8}", first)
    for template in ('{{ "%.6s" % randomHex(8) }}', '{{ randomHex(8) | replace("a", "b") }}',
                     "{{ randomHex(8) | upper }}"):
        with pytest.raises(GoTemplateError, match="randomHex 8 is computed from a random "
                                                  "value"):
            jinja.render(template, {})


def test_a_secret_read_from_the_cluster_is_never_recorded_in_an_expression() -> None:
    data = {"children": {"secret": {"apiVersion": "v1", "kind": "Secret",
                                    "data": {"password": "c2VjcmV0LXZhbHVl"}}}}
    with pytest.raises(GoTemplateError, match="a Secret read from the cluster cannot be "
                                              "combined with a random value"):
        engine().render('{{ printf "%v-%s" .children (randomHex 2) }}', data)


def test_a_katalog_note_given_a_random_value_computes_on_it_when_it_is_made() -> None:
    holder: list[GoTemplateEngine] = []
    functions = builtin_functions(clock=lambda: NOW, random=PlaceholderRandom())
    functions.update(user_notes({"twice": "{{ .arg0 }}{{ .arg0 }}"},
                                lambda text, args: holder[0].render(text, args)))
    holder.append(GoTemplateEngine(functions))
    rendered = holder[0].render("{{ $p := randomHex 4 }}{{ $p }}={{ twice $p | len }}", {})
    value, length = generate(rendered).split("=")
    assert re.fullmatch(r"[0-9a-f]{8}", value) and length == "16"


def test_an_expression_failing_at_generation_names_the_call_and_never_the_value() -> None:
    from orksync.render.notes.expressions import ExpressionError

    rendered = engine().render("{{ index (randomHex 4) 40 }}", {})
    seen: list[str] = []

    class Recording(CryptoRandom):
        def token(self, func: str, n: int | None) -> str:
            seen.append(super().token(func, n))
            return seen[-1]

    with pytest.raises(ExpressionError, match="index failed on the generated value") as info:
        generate(rendered, Recording())
    assert seen and seen[0] not in str(info.value)


def test_an_expression_token_needs_a_source_that_evaluates_it() -> None:
    rendered = engine().render("{{ len (randomHex 5) }}", {})
    with pytest.raises(ValueError, match="needs an evaluator"):
        fill_generated(rendered, CryptoRandom())
    assert fill_generated(rendered, PlaceholderRandom()) == rendered


# ── against Orkestra (orkoracle) ─────────────────────────────────────────────────────
def _cases(listed: list[str]) -> list[str]:
    functions = builtin_functions(clock=lambda: NOW, random=PlaceholderRandom())
    return rc.BUILTINS + rc.note_cases(functions, listed, SEED)


def _orksync(engine: GoTemplateEngine, text: str, data: Any, random: RandomSource,
             now: datetime) -> dict[str, Any]:
    """{ok, out} or {ok: False, err}: rendered, then generated."""
    try:
        return {"ok": True, "out": generate(engine.render(text, data), random, now)}
    except GoTemplateError as exc:
        return {"ok": False, "err": exc.message}
    except ValueError as exc:
        return {"ok": False, "err": str(exc)}


@pytest.mark.go
def test_every_builtin_and_string_note_over_each_random_note_agrees_with_orkestra(
        orkoracle: Path, case_data: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    data_file, data = case_data
    listed = subprocess.run([str(orkoracle), "-list-funcs"], check=True, capture_output=True,
                            text=True).stdout.split()
    expressions = _cases(listed)
    assert len(expressions) > 300
    eng = engine()
    seeded = rc.SeededRandom(SEED)
    now = datetime.now(UTC)
    ours: dict[str, dict[str, Any]] = {}
    literal: dict[str, str] = {}
    real: dict[str, str] = {}
    for func in rc.RANDOM_CALLS:
        for i, expression in enumerate(expressions):
            key = f"{func}#{i}"
            text = rc.template(func, expression)
            ours[key] = _orksync(eng, text, data, seeded, now)
            value = rc.split(ours[key]["out"])[0] if ours[key]["ok"] else \
                seeded.token(func, 16 if func == "randomAlphanumeric" else
                             None if func == "uuidv4" else 8 if func == "randomHex" else 12)
            literal[key] = rc.literal(text, func, value)
            for draw in range(3):
                real[f"{key}#{draw}"] = text
    go = oracle_run(orkoracle, data_file, literal, tmp_path)
    go_real = oracle_run(orkoracle, data_file, real, tmp_path)
    failures: list[str] = []
    for key, py in ours.items():
        func, i = key.split("#")
        expression = expressions[int(i)]
        name = expression.split()[0] if not expression.startswith("$v |") else \
            expression.split()[2]
        why = oc.compare(name, literal[key], go[key], py)
        if why:
            failures.append(f"{key}: {why}\n  template: {literal[key]}\n  go: {go[key]}\n"
                            f"  orksync: {py}")
            continue
        draws = [go_real[f"{key}#{d}"] for d in range(3)]
        if py["ok"]:
            value, result = rc.split(py["out"])
            if not rc.SHAPES[func].fullmatch(value):
                failures.append(f"{key}: the value {value!r} is not of {func}'s shape")
            named = rc.NAMED.get(expression)
            problem = named and rc.shape_problem(named, value, result)
            if problem:
                failures.append(f"{key}: {expression}: {problem}")
        for draw in draws:  # Orkestra's own values have the shape orksync makes
            if draw["ok"] and not rc.SHAPES[func].fullmatch(rc.split(draw["out"])[0]):
                failures.append(f"{key}: Orkestra's {func} made a value of another shape")
    assert not failures, f"{len(failures)} of {len(ours)} cases differ (ORKORACLE_SEED=" \
        f"{SEED}):\n" + "\n".join(failures[:40])


# ── on the real control plane ────────────────────────────────────────────────────────
def _katalog(secrets: dict[str, dict[str, str]]) -> str:
    lines = ["apiVersion: orkestra.orkspace.io/v1", "kind: Katalog",
             "metadata: {name: randoms}", "spec:", "  crds:", "    widget:",
             "      crdFile: ./crd.yaml", "      operatorBox:", "        onReconcile:",
             "          secrets:"]
    for name, data in secrets.items():
        lines += [f'            - name: "{{{{ .metadata.name }}}}-{name}"', "              data:"]
        lines += [f"                {key}: {json.dumps(text, ensure_ascii=False)}"
                  for key, text in data.items()]
    return "\n".join(lines) + "\n"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=300)


def _stable_cases(orkoracle: Path, data_file: Path, data: Any, listed: list[str],
                  tmp: Path) -> dict[str, dict[str, str]]:
    """The cases that render and generate over every one of DRAWS values, in orksync and in
    Orkestra: a Secret holds only expressions that cannot fail on the value it makes.
    {secret name: {key: template}}."""
    eng = engine()
    seeded = rc.SeededRandom(SEED)
    expressions = _cases(listed)
    real = {f"{func}#{i}#{d}": rc.template(func, e) for func in rc.RANDOM_CALLS
            for i, e in enumerate(expressions) for d in range(DRAWS)}
    go = oracle_run(orkoracle, data_file, real, tmp)
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for func in rc.RANDOM_CALLS:
        for i, expression in enumerate(expressions):
            if re.search(r"\s\.(\s|$)", expression):
                continue  # the whole data: in a sync it holds the live Secrets (refused)
            text = rc.template(func, expression)
            if all(go[f"{func}#{i}#{d}"]["ok"] for d in range(DRAWS)) and all(
                    _orksync(eng, text, data, seeded, NOW)["ok"] for _ in range(DRAWS)):
                out[func.lower()][f"k{i:03d}"] = text
    return dict(out)


@pytest.mark.cluster
@pytest.mark.go
def test_a_secret_computed_from_random_values_holds_orkestras_results_made_once_never_shown(
        control_plane: ControlPlane, orkoracle: Path, case_data: tuple[Path, dict[str, Any]],
        tmp_path: Path) -> None:
    data_file, full = case_data
    # the custom resource without its strings beyond the BMP: the API server's YAML reader
    # refuses the JSON escapes of their surrogate pairs, which orksync's apply body holds
    data = {**full, "spec": {k: v for k, v in full["spec"].items()
                             if not re.search("[\U00010000-\U0010ffff]", json.dumps(
                                 v, ensure_ascii=False))}}
    listed = subprocess.run([str(orkoracle), "-list-funcs"], check=True, capture_output=True,
                            text=True).stdout.split()
    secrets = _stable_cases(orkoracle, data_file, data, listed, tmp_path)
    assert sum(len(v) for v in secrets.values()) > 600
    prefix6 = rc.BUILTINS.index('printf "%.6s" $v')
    assert f"k{prefix6:03d}" in secrets["randomhex"]
    ns = f"t-{uuid.uuid4().hex[:8]}"
    spec = json.dumps(data["spec"], ensure_ascii=False)  # the data the case arguments read
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": _katalog(secrets), "crd.yaml": CRD,
        "w.yaml": f"apiVersion: test.orksync.io/v1\nkind: Widget\nmetadata:\n  name: w\n"
                  f"  namespace: {ns}\nspec: {spec}\n"})
    kc, name = str(control_plane.kubeconfig), f"randoms-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    rendered_run = _run("render", str(repo), "-o", str(out))
    assert rendered_run.returncode == 0, rendered_run.stderr
    first = _run("sync", str(repo), "--once", "--kubeconfig", kc, "--log-level", "debug",
                 "--name", name)
    assert first.returncode == 0, first.stderr[-3000:]
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        res = kube.resource("v1", "Secret")
        live = {secret: kube.get(res, ns, f"w-{secret}") for secret in secrets}
    finally:
        kube.close()
    values = {secret: {k: base64.b64decode(v).decode("utf-8", "surrogateescape")
                       for k, v in obj["data"].items()} for secret, obj in live.items()}

    # each key: the value and what the template computes from that value (which the
    # differential test above holds to Orkestra's), with Orkestra's shapes
    eng = engine()
    problems: list[str] = []
    seen: list[str] = []
    funcs = {f.lower(): f for f in rc.RANDOM_CALLS}
    expressions = _cases(listed)
    for secret, keys in secrets.items():
        func = funcs[secret]
        assert set(values[secret]) == set(keys), secret
        for key, text in keys.items():
            value, result = rc.split(values[secret][key])
            seen += [value, result]
            expression = expressions[int(key[1:])]
            if not rc.SHAPES[func].fullmatch(value):
                problems.append(f"{secret}/{key}: the value is not of {func}'s shape")
                continue
            expected = eng.render(rc.literal(text, func, value), data)
            if values[secret][key] != expected:
                problems.append(f"{secret}/{key} {expression}: not what the template "
                                "computes from the value")
            named = rc.NAMED.get(expression)
            problem = named and rc.shape_problem(named, value, result)
            if problem:
                problems.append(f"{secret}/{key} {expression}: {problem}")
    assert not problems, "\n".join(problems[:40])
    hex6 = rc.split(values["randomhex"][f"k{prefix6:03d}"])[1]
    assert re.fullmatch(r"[0-9a-f]{6}", hex6)

    # once: a resync changes nothing
    again = _run("sync", str(repo), "--once", "--kubeconfig", kc, "--log-level", "debug",
                 "--name", name)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "configured=0" in again.stderr.splitlines()[-1]
    kube = Kube.from_kubeconfig(control_plane.kubeconfig)
    try:
        for secret in secrets:
            assert kube.get(kube.resource("v1", "Secret"), ns, f"w-{secret}")["data"] == \
                live[secret]["data"]
    finally:
        kube.close()

    # never in a rendered file or a log line
    files = "".join(p.read_text(encoding="utf-8") for p in out.rglob("*.yaml"))
    logs = "".join(part for run in (rendered_run, first, again)
                   for part in (run.stdout, run.stderr))
    inputs = repo.joinpath("katalog.yaml").read_text(encoding="utf-8") + spec
    generated = [s for s in seen if len(s) >= 12 and s not in inputs]  # not a constant
    leaked = [i for i, s in enumerate(generated) if s in files or s in logs]
    assert not leaked, f"{len(leaked)} generated values or results in the files or logs"
