"""The native Jinja2 dialect: rendering with Orkestra's post-processing, the function
library as globals and filters, undefined values, the sandbox and its bounds, load-time
checks, and the Katalog annotation that selects the dialect."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.jinja_dialect import (
    DIALECT_ANNOTATION,
    JinjaTemplateEngine,
    make_engine,
    template_dialect,
)
from orksync.render.notes import builtin_functions, user_notes
from orksync.secrets.random import PlaceholderRandom
from tests.corpus import HANG, bounded

NOW = datetime(2026, 4, 6, 8, 0, tzinfo=UTC)
DATA: dict[str, Any] = {
    "metadata": {"name": "shop", "namespace": "team"},
    "spec": {"image": "nginx", "replicas": 3, "debug": True, "version": "v1.2",
             "items": ["a", "b"], "labels": {"tier": "gold"}, "ratio": 0.5},
    "inputs": {"team": "blue"},
}


@pytest.fixture(scope="module")
def engine() -> JinjaTemplateEngine:
    return JinjaTemplateEngine(builtin_functions(clock=lambda: NOW,
                                                 random=PlaceholderRandom()))


@pytest.fixture()
def small() -> JinjaTemplateEngine:
    """Small work bounds; the wall-clock backstop out of reach, so that what refuses a
    template here is its work, whatever the machine's speed."""
    return JinjaTemplateEngine({"echo": lambda x: x}, max_output=1000, max_steps=5000,
                               max_seconds=HANG * 10)


def test_data_keys_are_top_level_variables(engine: JinjaTemplateEngine) -> None:
    assert engine.render("{{ metadata.name }}-{{ inputs.team }}", DATA) == "shop-blue"
    assert engine.render("{{ spec['image'] }}:{{ spec.replicas }}", DATA) == "nginx:3"


def test_values_print_like_orkestra_expects(engine: JinjaTemplateEngine) -> None:
    assert engine.render("{{ spec.debug }}", DATA) == "true"
    assert engine.render("{{ spec.items }}", DATA) == '["a","b"]'
    assert engine.render("{{ spec.labels }}", DATA) == '{"tier":"gold"}'
    assert engine.render("{{ 'x' ~ spec.debug }}", DATA) == "xtrue"


def test_orkestra_post_processing_applies(engine: JinjaTemplateEngine) -> None:
    assert engine.render("  {{ metadata.name }}\n", DATA) == "shop"
    assert engine.render("{% if spec.debug %}x{% endif %}", DATA) == \
        "{% if spec.debug %}x{% endif %}"  # no `{{`: verbatim, like the Go fast path
    assert engine.render("  {{ metadata.name }}\n", DATA, orkestra=False) == "  shop\n"


def test_functions_are_globals_and_subject_first_filters(engine: JinjaTemplateEngine) -> None:
    assert engine.render("{{ toUpper(spec.image) }}", DATA) == "NGINX"
    assert engine.render("{{ spec.image | toUpper }}", DATA) == "NGINX"
    assert engine.render("{{ spec.version | trimPrefix('v') }}", DATA) == "1.2"
    assert engine.render("{{ randomHex(8) }}", DATA) == "<generate:randomHex:8>"


def test_jinja_builtin_filters_keep_their_meaning(engine: JinjaTemplateEngine) -> None:
    assert engine.render("{{ spec.items | join(',') }}", DATA) == "a,b"
    assert engine.render("{{ spec.nope | default('none') }}", DATA) == "none"
    assert engine.render("{% for k, v in spec.labels | items %}{{ k }}={{ v }}{% endfor %}",
                         DATA) == "tier=gold"


def test_a_missing_field_renders_empty_but_reading_into_it_fails(
        engine: JinjaTemplateEngine) -> None:
    assert engine.render("{{ spec.nmae }}", DATA) == ""
    with pytest.raises(GoTemplateError, match="has no attribute 'nmae'"):
        engine.render("{{ spec.nmae.x }}", DATA)


def test_map_fields_shadow_dict_methods(engine: JinjaTemplateEngine) -> None:
    data = {"spec": {"items": [1, 2], "keys": "k"}}
    assert engine.render("{{ spec.items | length }}{{ spec.keys }}", data) == "2k"
    assert engine.render("{{ spec.values }}", data) == ""


def test_undefined_arguments_reach_functions_as_nil(engine: JinjaTemplateEngine) -> None:
    assert engine.render("[{{ toUpper(spec.nope) }}]", DATA) == "[]"


def test_function_errors_are_template_errors(engine: JinjaTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match="error calling repeat"):
        engine.render("{{ repeat('a', 100000000) }}", DATA)


def test_render_value_returns_raw_values_for_plain_paths(engine: JinjaTemplateEngine) -> None:
    assert engine.render_value("{{ spec.replicas }}", DATA) == 3
    assert engine.render_value(" {{ spec['items'] }} ", DATA) == ["a", "b"]
    assert engine.render_value("{{ spec.zz }}", DATA) is None
    assert engine.render_value("{{ metadata.name }}-x", DATA) == "shop-x"
    assert engine.render_value("plain", DATA) == "plain"


def test_user_notes_work_in_the_jinja_dialect() -> None:
    holder: list[JinjaTemplateEngine] = []
    functions: dict[str, Any] = {"toUpper": str.upper}
    functions.update(user_notes({"shout": "{{ toUpper(arg0) }}!"},
                                lambda expr, args: holder[0].render(expr, args)))
    holder.append(JinjaTemplateEngine(functions))
    assert holder[0].render("{{ shout(spec.image) }}", DATA) == "NGINX!"


@pytest.mark.parametrize("source", [
    "{{ ''.__class__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ spec.__class__.__mro__ }}",
    "{{ (spec.items|first).__class__ }}",
    "{{ spec.items.append('x') }}",
    "{{ range.__self__ }}",
])
def test_the_sandbox_refuses_escapes(engine: JinjaTemplateEngine, source: str) -> None:
    with pytest.raises(GoTemplateError):
        engine.render(source, DATA)
    assert DATA["spec"]["items"] == ["a", "b"]


@pytest.mark.parametrize("source", [
    "{% include 'other' %}{{ 1 }}", "{% import 'x' as y %}{{ 1 }}",
    "{% extends 'base' %}{{ 1 }}",
])
def test_loaders_are_refused(engine: JinjaTemplateEngine, source: str) -> None:
    with pytest.raises(GoTemplateError, match="not supported"):
        engine.check(source)


STEPS, SIZE = "template too expensive", r"(result|value) too large"
WIDTH = r"(format )?width too large"


@pytest.mark.parametrize(("source", "refusal"), [
    ("{{ range(10**9) | list }}", "Range too big"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ 1 }}",
     STEPS),
    ("{{ 'a' * 10**9 }}", SIZE),
    ("{{ 2 ** (10**9) }}", "number too large"),
    ("{{ '%999999999d' % 1 }}", WIDTH),
    ("{{ '{:>999999999}'.format(1) }}", WIDTH),
    ("{{ 'ab'.center(999999999) }}", WIDTH),
    ("{{ 'ab' | center(999999999) }}", WIDTH),
    ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}{{ ns.s }}", SIZE),
    ("{% set s = 'a' * 999 %}{% set t = [s,s,s,s,s,s,s,s,s,s] %}{% set u = [t,t,t,t,t,t,t,t,t,t]"
     " %}{% set v = [u,u,u,u,u,u,u,u,u,u] %}{{ v | join }}", SIZE),
    ("{{ range(10000) | batch(1) | sum(start=[]) }}", "only numbers can be summed"),
    ("{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}",
     STEPS),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "template too complex"),
])
def test_bombs_are_refused_by_a_work_bound(small: JinjaTemplateEngine, source: str,
                                           refusal: str) -> None:
    """Each bomb is refused by the bound on its work (steps, sizes checked before the
    work), not by the clock; HANG only fails a render that never ends."""
    with bounded(HANG), pytest.raises(GoTemplateError, match=refusal):
        small.render(source, DATA)


class Overrun(BaseException):
    """Raised by a template function called more often than the step budget allows (not
    an Exception: the engine cannot turn it into a template error)."""


def test_a_refused_loop_ran_no_more_steps_than_its_budget() -> None:
    """The work done before the refusal, counted: each inner iteration calls `tick`, and
    iterations and calls each cost a step, so at most max_steps calls happen."""
    calls = 0

    def tick() -> str:
        nonlocal calls
        calls += 1
        if calls > 5000:
            raise Overrun(f"{calls} calls with a budget of 5000 steps")
        return ""

    engine = JinjaTemplateEngine({"tick": tick}, max_steps=5000, max_seconds=HANG * 10)
    with pytest.raises(GoTemplateError, match="template too expensive"):
        engine.render("{% for i in range(100000) %}{% for j in range(100000) %}{{ tick() }}"
                      "{% endfor %}{% endfor %}", {})
    assert 0 < calls <= 5000 // 2  # two steps per inner iteration: the loop's, the call's


def test_the_wall_clock_backstop_refuses_a_render_past_its_deadline() -> None:
    """`max_seconds` backs up the work bounds (a step may carry work the steps do not
    count). A deadline already past is checked every 256 steps: the refusal comes after
    256 of them, before the step budget."""
    engine = JinjaTemplateEngine({}, max_steps=5000, max_seconds=-1)
    with pytest.raises(GoTemplateError, match="template took too long"):
        engine.render("{% for i in range(100000) %}{% endfor %}{{ 1 }}", {})
    assert JinjaTemplateEngine({}, max_seconds=-1).render("{{ 1 }}", {}) == "1"


def test_the_output_is_bounded(small: JinjaTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match="output too large"):
        small.render("{% for i in range(200) %}xxxxxxxxxx{% endfor %}{{ 1 }}", DATA)
    assert len(small.render("{% for i in range(90) %}xxxxxxxxxx{% endfor %}{{ 1 }}",
                            DATA)) == 901


def test_check_finds_unknown_functions_filters_and_tests(engine: JinjaTemplateEngine) -> None:
    for source, what in (("{% if spec.debug %}{{ nosuch(1) }}{% endif %}", "function"),
                         ("{{ spec.image | nofilter }}", "filter"),
                         ("{{ spec.image is notatest }}", "test")):
        with pytest.raises(GoTemplateError, match=f"{what} 'no"):
            engine.check(source)


def test_check_accepts_names_the_template_binds(engine: JinjaTemplateEngine) -> None:
    engine.check("{% macro m(x) %}{{ x }}{% endmacro %}{{ m(1) }}")
    engine.check("{% set f = toUpper %}{{ f('a') }}{{ range(3) | list }}{{ dict(a=1) }}")
    engine.check("{% for x in spec.items %}{{ loop.index }}{% endfor %}")
    engine.check("no template here")


def test_check_reports_syntax_errors_with_the_line(engine: JinjaTemplateEngine) -> None:
    with pytest.raises(GoTemplateError) as err:
        engine.check("line one\n{{ 1 + }}")
    assert err.value.position == len("line one\n")
    assert "line 2" in str(err.value)


def test_referenced_functions_lists_library_and_unknown_names(
        engine: JinjaTemplateEngine) -> None:
    found = engine.referenced_functions(
        "{% set g = 1 %}{{ toUpper(spec.image) | trimPrefix('N') | upper }}{{ nosuch() }}"
        "{{ range(2) }}")
    assert found == {"toUpper", "trimPrefix", "nosuch"}
    assert engine.referenced_functions("plain") == set()


def test_compiled_templates_are_cached_by_source(engine: JinjaTemplateEngine) -> None:
    engine.render("{{ metadata.name }}", DATA)
    before = engine._get.cache_info().hits
    engine.render("{{ metadata.name }}", {"metadata": {"name": "other"}})
    assert engine._get.cache_info().hits == before + 1


def test_the_dialect_comes_from_the_katalog_annotation() -> None:
    doc = {"metadata": {"name": "k", "annotations": {DIALECT_ANNOTATION: "jinja2"}}}
    assert template_dialect(doc) == "jinja2"
    assert template_dialect({"metadata": {"name": "k"}}) == "go"
    with pytest.raises(ValueError, match="unknown template dialect"):
        template_dialect({"metadata": {"annotations": {DIALECT_ANNOTATION: "mustache"}}})


def test_make_engine_builds_the_engine_of_a_dialect() -> None:
    assert isinstance(make_engine("jinja2", {}), JinjaTemplateEngine)
    assert isinstance(make_engine("go", {}, max_seconds=1), GoTemplateEngine)
