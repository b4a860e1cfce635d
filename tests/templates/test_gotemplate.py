"""Unit tests of the Go template engine's API (no Go toolchain needed): Orkestra
post-processing, render_value, caching, errors and positions, the function map, the
sandbox and the resource limits."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.gotemplate.engine import ENV
from orksync.render.gotemplate.runtime import Runtime

DATA: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "prod", "labels": {"tier": "front"}},
    "spec": {"replicas": 3, "ports": [80, 443], "size": 1e6, "enabled": True, "items": "real"},
}


def _shout(s: str) -> str:
    return s.upper() + "!"


def _boom() -> str:
    raise ValueError("kaboom")


@pytest.fixture
def engine() -> GoTemplateEngine:
    return GoTemplateEngine({"shout": _shout, "boom": _boom, "toList": lambda *a: list(a)})


def render(engine: GoTemplateEngine, source: str, data: Any = None, **kw: Any) -> str:
    return engine.render(source, DATA if data is None else data, **kw)


# -- Orkestra semantics -----------------------------------------------------------------
def test_a_missing_key_prints_no_value(engine: GoTemplateEngine) -> None:
    assert render(engine, "{{ .metadata.nmae }}", orkestra=False) == "<no value>"


def test_orkestra_mode_removes_no_value(engine: GoTemplateEngine) -> None:
    assert render(engine, "{{ .metadata.nmae }}") == ""
    assert render(engine, "a-{{ .nope }}-b") == "a--b"


def test_orkestra_mode_trims_before_removing_no_value(engine: GoTemplateEngine) -> None:
    assert render(engine, " {{ .nope }} x ") == " x"


def test_a_text_without_braces_is_returned_verbatim(engine: GoTemplateEngine) -> None:
    assert render(engine, "  plain {text}  ") == "  plain {text}  "
    assert render(engine, "") == ""


def test_trimming_uses_go_whitespace_only(engine: GoTemplateEngine) -> None:
    assert render(engine, "\u3000\x1c{{ 1 }}\x1c\u00a0") == "\x1c1\x1c"


def test_a_field_of_a_missing_parent_is_an_error(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match=r"nil pointer evaluating interface \{\}\.b"):
        render(engine, "{{ .missing.b }}")


def test_values_print_like_go(engine: GoTemplateEngine) -> None:
    source = "{{ .spec.size }} {{ .spec.enabled }} {{ .spec.ports }} {{ .metadata.labels }}"
    out = render(engine, source)
    assert out == "1e+06 true [80 443] map[tier:front]"


def test_trim_markers_follow_the_go_rule(engine: GoTemplateEngine) -> None:
    assert render(engine, "a  {{- 1 -}}  b", orkestra=False) == "a1b"
    assert render(engine, "a {{-3}} b", orkestra=False) == "a -3 b"


def test_invalid_utf8_becomes_replacement_characters(engine: GoTemplateEngine) -> None:
    assert render(engine, '{{ "\\xff" }}') == "\ufffd"
    assert render(engine, '{{ slice "\u00e9" 0 1 }}{{ slice "\u00e9" 1 2 }}') == "\u00e9"


def test_user_functions_take_precedence_over_builtins() -> None:
    engine = GoTemplateEngine({"len": lambda x: "mine"})
    assert engine.render("{{ len .a }}", {"a": [1]}) == "mine"


# -- render_value ----------------------------------------------------------------------
def test_render_value_returns_raw_lists_and_maps(engine: GoTemplateEngine) -> None:
    assert engine.render_value("{{ .spec.ports }}", DATA) == [80, 443]
    assert engine.render_value("  {{- .metadata.labels -}}\n", DATA) == {"tier": "front"}
    assert engine.render_value("{{ $.spec.replicas }}", DATA) == 3
    assert engine.render_value("{{ . }}", DATA) is DATA


def test_render_value_of_a_missing_field_is_none(engine: GoTemplateEngine) -> None:
    assert engine.render_value("{{ .spec.nope }}", DATA) is None


def test_render_value_of_a_string_is_the_rendered_text(engine: GoTemplateEngine) -> None:
    assert engine.render_value("{{ .metadata.name }}", {"metadata": {"name": " web "}}) == "web"


def test_render_value_of_anything_else_is_render(engine: GoTemplateEngine) -> None:
    assert engine.render_value("{{ .spec.replicas }}x", DATA) == "3x"
    assert engine.render_value("{{ len .spec.ports }}", DATA) == "2"
    assert engine.render_value("no braces", DATA) == "no braces"


def test_render_value_propagates_errors(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match="nil pointer"):
        engine.render_value("{{ .x.y }}", DATA)


# -- compile-time checks, errors and positions -------------------------------------------
def test_an_unknown_function_fails_at_check_time_naming_it(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match='function "randomHex" not defined'):
        engine.check("x{{ randomHex 8 }}")


def test_check_accepts_a_valid_template(engine: GoTemplateEngine) -> None:
    engine.check("{{ range $i, $p := .spec.ports }}{{ shout (print $p) }}{{ end }}")
    engine.check("no template here")


def test_referenced_functions_lists_known_and_unknown_calls(engine: GoTemplateEngine) -> None:
    found = engine.referenced_functions("{{ shout (randomHex 8) | printf `%s` }}{{ len .a }}")
    assert found == {"shout", "randomHex"}
    assert engine.referenced_functions("plain") == set()


def test_syntax_errors_report_line_and_column(engine: GoTemplateEngine) -> None:
    source = "line one\n  {{ if .x }}ok{{ end }} {{ .a | }}{{ 1 + }}"
    with pytest.raises(GoTemplateError) as info:
        engine.check(source)
    err = info.value
    assert err.source == source and err.position is not None
    assert "at line 2 col" in str(err) and "in template line one" in str(err)


def test_error_messages_cut_long_templates(engine: GoTemplateEngine) -> None:
    source = "{{ .a.b.c }}" + "x" * 500
    with pytest.raises(GoTemplateError) as info:
        engine.render(source, {"a": {}})
    text = str(info.value)
    assert text.startswith("nil pointer evaluating interface {}.c at line 1 col 4 in template")
    assert text.endswith("...") and len(text) < 250


def test_execution_errors_carry_the_position_of_the_failing_action(
    engine: GoTemplateEngine,
) -> None:
    source = "ok {{ .metadata.name }}\n  {{ index .spec.ports 7 }}"
    with pytest.raises(GoTemplateError) as info:
        engine.render(source, DATA)
    assert info.value.position == source.index("{{ index") + 3
    assert "index out of range: 7" in info.value.message


def test_function_errors_are_wrapped_with_the_function_name(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match="error calling boom: kaboom"):
        render(engine, "{{ boom }}")


def test_unsupported_constructs_are_rejected_clearly(engine: GoTemplateEngine) -> None:
    for source in ("{{ 1i }}", "{{ print ($x := 1) }}"):
        with pytest.raises(GoTemplateError, match="not supported"):
            engine.check(source)


# -- caching ---------------------------------------------------------------------------
def test_compiled_templates_are_cached_by_source(engine: GoTemplateEngine) -> None:
    for _ in range(3):
        render(engine, "{{ .metadata.name }}-svc")
    info = engine._get.cache_info()
    assert info.misses == 1 and info.hits == 2


def test_the_cache_is_bounded() -> None:
    engine = GoTemplateEngine({}, cache_size=8)
    for i in range(50):
        engine.render(f"{{{{ {i} }}}}", {})
    assert engine._get.cache_info().currsize == 8


def test_compile_errors_are_cached_and_raised_each_time(engine: GoTemplateEngine) -> None:
    for _ in range(2):
        with pytest.raises(GoTemplateError, match="unexpected EOF"):
            render(engine, "{{ if 1 }}")
    assert engine._get.cache_info().misses == 1


def test_concurrent_renders_are_independent(engine: GoTemplateEngine) -> None:
    source = "{{ range .items }}{{ . }}{{ end }}"
    results: list[str] = []

    def work(n: int) -> None:
        results.append(engine.render(source, {"items": list(range(n))}))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted("".join(map(str, range(n))) for n in range(20))


# -- sandbox ---------------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "{{ .__class__ }}", "{{ .metadata.__init__ }}", "{{ .metadata.items }}",
    "{{ .metadata.keys }}", "{{ .metadata.get }}", "{{ printf `%s` .metadata.__init__ }}",
    "{{ print .__dict__ }}", "{{ $.__globals__ }}", "{{ (.spec.ports).__len__ }}",
])
def test_field_names_never_reach_python_attributes(engine: GoTemplateEngine, source: str) -> None:
    try:
        out = render(engine, source)
    except GoTemplateError as exc:  # a field of a missing key, or of a non-map: Go errors
        assert "nil pointer evaluating" in exc.message or "can't evaluate field" in exc.message
    else:
        assert out in ("", "%!s(<nil>)", "<nil>")


def test_a_field_of_a_missing_dunder_is_a_go_error(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match=r"nil pointer evaluating interface \{\}\.__mro__"):
        render(engine, "{{ .__class__.__mro__ }}")


def test_a_field_named_like_a_dict_method_reads_the_key(engine: GoTemplateEngine) -> None:
    assert render(engine, "{{ .spec.items }}") == "real"


def test_jinja_syntax_in_a_template_is_plain_text(engine: GoTemplateEngine) -> None:
    assert render(engine, "{% for x in range(3) %}{{ `{{ 7*7 }}` }}{# c #}") == (
        "{% for x in range(3) %}{{ 7*7 }}{# c #}"
    )
    assert render(engine, "{{ \"'); import os; ('\" }}") == "'); import os; ('"


def test_field_access_on_a_function_result_only_reads_maps() -> None:
    engine = GoTemplateEngine({"obj": lambda: ValueError("x")})
    with pytest.raises(GoTemplateError, match="can't evaluate field args"):
        engine.render("{{ (obj).args }}", {})


def test_the_sandbox_has_no_globals_filters_or_tests() -> None:
    assert not ENV.globals and not ENV.filters and not ENV.tests


def test_runtime_state_is_not_reachable_through_the_sandbox() -> None:
    runtime = Runtime({}, 10, 10)
    with pytest.raises(Exception, match="not allowed"):
        ENV.getattr(runtime, "functions")
    assert ENV.getattr(runtime, "f") == runtime.f


def test_output_size_is_bounded() -> None:
    engine = GoTemplateEngine({}, max_output=1000)
    with pytest.raises(GoTemplateError, match="output too large"):
        engine.render("{{ range 10000 }}xxxxxxxxxx{{ end }}", {})
    with pytest.raises(GoTemplateError, match="output too large"):
        engine.render('{{ printf "%999999d" 1 }}', {})


def test_string_doubling_is_bounded() -> None:
    engine = GoTemplateEngine({}, max_output=100_000)
    source = '{{ $s := "ab" }}{{ range 60 }}{{ $s = printf "%s%s" $s $s }}{{ end }}{{ len $s }}'
    with pytest.raises(GoTemplateError, match="output too large"):
        engine.render(source, {})


def test_work_is_bounded() -> None:
    engine = GoTemplateEngine({}, max_steps=10_000)
    for source in ("{{ range 1000000000 }}{{ end }}",
                   "{{ range .l }}{{ range $.l }}{{ range $.l }}{{ end }}{{ end }}{{ end }}",
                   "{{ range len .l }}{{ eq 1 1 }}{{ end }}"):
        with pytest.raises(GoTemplateError, match="template too expensive"):
            engine.render(source, {"l": list(range(100)) * 60})


class Overrun(BaseException):
    """Raised by a template function called more often than the step budget allows (not
    an Exception: the engine cannot turn it into a template error)."""


def test_a_refused_range_ran_no_more_steps_than_its_budget() -> None:
    """The work done before the refusal, counted (the bad-input corpus's
    template-too-expensive-for-one-cr, with a counter inside): each inner iteration calls
    `tick`, and iterations and calls each cost a step, so at most max_steps / 2 calls
    happen, on any machine."""
    calls = 0

    def tick() -> str:
        nonlocal calls
        calls += 1
        if calls > 10_000:
            raise Overrun(f"{calls} calls with a budget of 10000 steps")
        return ""

    engine = GoTemplateEngine({"tick": tick}, max_steps=10_000)
    with pytest.raises(GoTemplateError, match="template too expensive"):
        engine.render("{{ range .n }}{{ range $.n }}{{ tick }}{{ end }}{{ end }}",
                      {"n": 100_000_000})
    assert 0 < calls <= 10_000 // 2


def test_deep_nesting_is_rejected_not_crashing(engine: GoTemplateEngine) -> None:
    with pytest.raises(GoTemplateError, match="max expression depth"):
        engine.check("{{ " + "(" * 300 + "1" + ")" * 300 + " }}")
    with pytest.raises(GoTemplateError, match="nested too deeply"):
        engine.check("{{ if 1 }}" * 300 + "{{ end }}" * 300)
    deep = "{{ range .l }}" * 40 + "x" + "{{ end }}" * 40
    with pytest.raises(GoTemplateError, match="too complex"):
        engine.check(deep)


# -- templates of text and fields: printed without running them ---------------------------

PLAIN_DATA: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "prod", "labels": {"tier": " front "}},
    "spec": {"replicas": 3, "image": "nginx:1.27", "text": "h\u00e9", "list": ["a"],
             "empty": "", "none": None, "nested": {"x": "y"}, "pad": "  p  ",
             "negative": -12, "zero": 0, "huge": 2 ** 70, "flag": True, "ratio": 0.5,
             "big": 1e21},
}
PLAIN_SOURCES = [
    "{{ .metadata.name }}", "{{ .metadata.name }}-config",
    "{{.metadata.name}}.{{.metadata.namespace}}",
    "pre {{ $.spec.image }} post", "{{ .metadata.labels.tier }}", "{{- .spec.pad -}} x",
    " {{ .spec.pad }} ", "{{ .spec.empty }}", "{{ .spec.none }}-n", "{{ .spec.missing }}",
    "{{ .spec.missing.deeper }}", "{{ .spec.replicas }}", "{{ .spec.list }}", "{{ .spec.nested }}",
    "{{ .spec.text }}", "caf\u00e9-{{ .metadata.name }}", "{{ .spec.list.x }}", "{{ . }}",
    "{{ .metadata.name.x }}", "{{ .spec.image }}{{ .spec.image }}",
    "{{ .spec.negative }}", "n{{ .spec.zero }}-{{ .spec.replicas }}", "{{ .spec.huge }}",
    "{{ .spec.flag }}", "{{ .spec.ratio }}", "{{ .spec.big }}", "{{ .spec.replicas.x }}",
]


@pytest.mark.parametrize("source", PLAIN_SOURCES)
def test_a_template_of_text_and_fields_prints_what_running_it_prints(
        engine: GoTemplateEngine, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut for templates made of text and `{{ .a.b }}` actions (most of a
    Katalog's) against the template actually run, errors included."""
    def outcome() -> tuple[str, str]:
        try:
            return "ok", engine.render(source, PLAIN_DATA)
        except GoTemplateError as err:
            return "error", str(err)

    fast = outcome()
    monkeypatch.setattr(GoTemplateEngine, "_plain_text", lambda *a: None)
    assert fast == outcome()


def test_the_shortcut_is_taken_for_a_template_of_text_and_string_or_int_fields(
        engine: GoTemplateEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_run(*args: Any) -> str:
        raise AssertionError("the template was run")

    monkeypatch.setattr(GoTemplateEngine, "_execute", no_run)
    assert engine.render("{{ .metadata.name }}-{{ $.spec.image }}", PLAIN_DATA) == \
        "web-nginx:1.27"
    assert engine.render("{{ .spec.replicas }}/{{ .spec.negative }}", PLAIN_DATA) == "3/-12"
    for source in ("{{ .spec.flag }}", "{{ .spec.ratio }}"):  # printed by the run
        with pytest.raises(AssertionError, match="was run"):
            engine.render(source, PLAIN_DATA)


def test_a_template_of_text_and_fields_is_compiled_to_jinja_only_when_first_run(
        engine: GoTemplateEngine) -> None:
    """Checking one (a render plan checks every template of a Katalog) parses it; the
    Jinja2 compilation, most of the cost, waits until a render has to run it."""
    source = "{{ .spec.list }}-{{ .metadata.name }}"
    engine.check(source)
    compiled = engine._get(source)
    assert compiled.plain is not None and compiled.template is None
    assert engine.render(source, {"metadata": {"name": "web"}, "spec": {"list": "a"}}) == \
        "a-web"  # printed without running it
    assert compiled.template is None
    assert engine.render(source, PLAIN_DATA) == "[a]-web"  # a list: the template runs
    assert compiled.template is not None
    assert engine.render(source, PLAIN_DATA) == "[a]-web"
    engine.check("{{ .metadata.name }} {{ len .spec.list }}")  # not plain: compiled at once
    assert engine._get("{{ .metadata.name }} {{ len .spec.list }}").template is not None


def test_define_template_and_block_follow_go(engine: GoTemplateEngine) -> None:
    """{{define}} anywhere, {{template}} with or without a value (a fresh scope: `$` and dot
    are the value passed), {{block}} defining and running in place; Go's parse errors."""
    data = {"spec": {"items": ["a", "b"], "name": "web"}}
    assert engine.render('{{ template "x" .spec }}{{ define "x" }}<{{ .name }}>{{ end }}',
                         data) == "<web>"
    assert engine.render('{{ define "x" }}[{{ . }}]{{ end }}{{ template "x" }}', data) == "[]"
    assert engine.render('{{ block "b" .spec.items }}{{ range . }}{{ . }}{{ end }}{{ end }}',
                         data) == "ab"
    assert engine.render('{{ define "r" }}{{ if . }}{{ . }}{{ template "r" (slice . 1) }}'
                         '{{ end }}{{ end }}{{ template "r" "abc" }}', data) == "abcbcc"
    for source, message in (
            ('{{ template "nope" }}', 'template "nope" not defined'),
            ('{{ define "x" }}1{{ end }}{{ define "x" }}2{{ end }}', "multiple definition"),
            ('{{ define "x" }}{{ $y }}{{ end }}{{ $y := 1 }}', "undefined variable"),
            ('{{ define "x" }}{{ break }}{{ end }}', "outside {{range}}"),
            ('{{ define "x" }}a{{ else }}b{{ end }}', "in define clause"),
            ("{{ template .spec.name }}", "in template clause")):
        with pytest.raises(GoTemplateError, match=message):
            engine.render(source, data)
