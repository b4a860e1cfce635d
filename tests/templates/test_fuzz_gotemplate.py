"""Fuzzing the Go-template front end (lexer, parser, compiler, runtime) with the function
library a Katalog gets: random token soups, random text and mutated valid templates must
either render (within the output bound) or raise GoTemplateError, each within a few
seconds. Any other exception, an error that only the engine's catch-all turned into a
GoTemplateError (an unexpected Python exception inside the front end), or a message
showing Python internals (a signature, a class) is a bug.

`ORKSYNC_FUZZ_EXAMPLES=N` runs N examples per test (tests/corpus).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import builtin_functions, user_notes
from orksync.secrets.random import PlaceholderRandom
from tests.corpus import HANG, bounded, fuzz_settings, python_internals

MAX_OUTPUT = 100_000
UNEXPECTED = "template execution failed"  # the engine's catch-all for foreign exceptions


def _engine() -> GoTemplateEngine:
    functions = builtin_functions(clock=lambda: datetime(2024, 5, 1, 12, tzinfo=UTC),
                                  random=PlaceholderRandom())
    holder: list[GoTemplateEngine] = []
    notes = {"twice": "{{ .arg0 }}{{ .arg0 }}", "self": "{{ self .arg0 }}",
             "isProd": '{{ eq .arg0 "prod" }}'}
    functions.update(user_notes(notes, lambda expr, args: holder[0].render(expr, args)))
    holder.append(GoTemplateEngine(functions, max_output=MAX_OUTPUT, max_steps=20_000))
    return holder[0]


ENGINE = _engine()
DATA: dict[str, Any] = {
    "metadata": {"name": "web", "namespace": "prod", "labels": {"tier": "front", "a.b/c": "d"}},
    "spec": {"replicas": 3, "image": "nginx:1.25", "ports": [80, 443], "size": 1e6,
             "enabled": True, "nothing": None, "nested": {"list": [{"k": "v"}, [], {}]},
             "text": "a\u00e9\U0001f600\x00", "big": 2**62, "neg": -7, "ratio": 0.5,
             "empty": "", "zero": 0},
    "status": {}, "inputs": {}, "cross": {}, "external": {}, "children": {},
    "ork": {"katalog": "k", "crd": "c"},
}
SEEDS = [
    "{{ .metadata.name }}",
    "{{ .spec.image | toUpper }}",
    '{{ if eq .spec.replicas 3 }}three{{ else if gt .spec.replicas 3 }}more{{ else }}less{{ end }}',
    "{{ range $i, $p := .spec.ports }}{{ $i }}={{ $p }},{{ end }}",
    "{{ range .spec.ports }}{{ . }}{{ else }}none{{ end }}",
    "{{ with .spec.nested }}{{ .list }}{{ end }}",
    '{{ $x := 1 }}{{ $x = add $x 2 }}{{ $x }}',
    '{{ printf "%s-%d-%v-%q-%x-%5.2f" .metadata.name 3 .spec.ports "q" 255 1.5 }}',
    '{{ index .metadata.labels "tier" }} {{ index .spec.ports 1 }}',
    '{{ slice .spec.image 0 5 }} {{ len .spec.ports }}',
    '{{ and .spec.enabled (not .spec.nothing) }} {{ or .spec.empty "fallback" }}',
    '{{- /* a comment */ -}} {{ "trim" -}}   x',
    '{{ default "x" .spec.nothing }} {{ ternary "a" "b" .spec.enabled }}',
    '{{ toJSON .spec }} {{ fromJSON "{\\"a\\": [1, 2]}" }}',
    '{{ range $k, $v := .metadata.labels }}{{ $k }}:{{ $v }};{{ end }}',
    '{{ split "a,b,c" "," }} {{ join (split "a,b" ",") "-" }} {{ repeat "ab" 3 }}',
    '{{ twice .metadata.name }} {{ isProd .metadata.namespace }}',
    '{{ range 3 }}{{ . }}{{ break }}{{ end }}{{ range 4 }}{{ continue }}{{ end }}',
    "{{ `raw {{ }} string` }} {{ 'a' }} {{ 0x1F }} {{ 1e3 }} {{ -0.5 }} {{ 0b101 }}",
    '{{ html "<a&b>" }} {{ js "it\'s" }} {{ urlquery "a b&c" }} {{ print 1 2 "x" }}',
    '{{ println .spec.ratio }}{{ .spec.big }} {{ mul .spec.replicas 2 }}',
    '{{ semverCompare ">=1.2.0" "1.3.0" }} {{ quantityToBytes "1Gi" }} {{ sha256sum "x" }}',
    '{{ timeFormat "2006-01-02" (now) }} {{ durationSeconds "1h30m" }} {{ cronValid "* * * * *" }}',
    '{{ randomAlphanumeric 16 }} {{ toBase64 "x" }} {{ truncateName .metadata.name 3 }}',
    '{{ $m := .metadata }}{{ $m.labels.tier }} {{ $.spec.image }}',
    '{{ (index .spec.nested.list 0).k }}',
    '{{ call .spec.nothing }}',
    "{{ .spec.text }} {{ len .spec.text }} {{ printf \"%U %c\" 0x1F600 65 }}",
]
TOKENS = [
    "{{", "}}", "{{- ", " -}}", "{{/*", "*/}}", " ", "\n", ".", "$", "$x", "$i", ":=", "=",
    "|", "(", ")", ",", "if", "else", "else if", "end", "range", "with", "break", "continue",
    "define", "template", "block", "nil", "true", "false", "0", "1", "-1", "3.5", "1e9",
    "0x10", "1i", "'a'", "'\\n'", '"s"', '"\\x"', '"%d"', '"%999999999d"', "`raw`",
    "99999999999999999999999", ".metadata", ".metadata.name", ".spec", ".spec.ports",
    ".spec.nested.list", ".nope", ".spec.nothing.x", ".__class__", "and", "or", "not",
    "len", "index", "slice", "eq", "ne", "lt", "le", "gt", "ge", "print", "printf",
    "println", "html", "js", "urlquery", "call", "add", "mul", "repeat", "toUpper",
    "default", "toJSON", "fromJSON", "split", "join", "twice", "self", "nosuchfn", "{", "}",
    "\"", "'", "`", "\\", "\x00", "\u00e9", "\ud800",
]

token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
braced_text = st.text(max_size=80).map(lambda s: "{{" + s + "}}")


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid template with a few random edits: cut, duplicate, insert or swap."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["cut", "dup", "insert", "swap"]))
        if op == "cut":
            text = text[:i] + text[j:]
        elif op == "dup":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        else:
            text = text[:i] + text[j:j + (j - i)] + text[i:j] + text[j + (j - i):]
    return text


FUNCTIONS = sorted(set(ENGINE._functions) | {"len", "index", "slice", "eq", "ne", "lt", "le",
                                               "gt", "ge", "print", "printf", "println",
                                               "html", "js", "urlquery", "and", "or", "not"})
LITERALS = ["0", "1", "-1", "3", "2.5", "1e6", "9223372036854775807", '""', '"a"',
            '"web-1"', '"%s"', '"%v %d"', '"1Gi"', '"1.2.3"', '"* * * * *"',
            '"2024-01-01T00:00:00Z"', '"1h"', "true", "false", "nil", "'x'", "`{{`"]
FIELDS = [".", "$", ".metadata", ".metadata.name", ".metadata.labels", ".spec",
          ".spec.replicas", ".spec.ports", ".spec.nested.list", ".spec.text", ".spec.big",
          ".spec.nothing", ".status", "$.spec.image", ".nope"]
VARIABLES = ["$x", "$y", "$i", "$v"]


@st.composite
def argument(draw: st.DrawFn, depth: int) -> str:
    choice = draw(st.integers(0, 3 if depth < 2 else 2))
    if choice == 0:
        return draw(st.sampled_from(LITERALS))
    if choice == 1:
        return draw(st.sampled_from(FIELDS))
    if choice == 2:
        return draw(st.sampled_from(VARIABLES))
    return f"({draw(pipeline(depth + 1))})"


@st.composite
def pipeline(draw: st.DrawFn, depth: int = 0) -> str:
    """`operand | fn arg... | fn arg...`: real function names with random arities and
    arguments (Go passes each stage's value as the last argument of the next)."""
    first = draw(argument(depth)) if draw(st.booleans()) else None
    commands = [first] if first is not None else []
    for _ in range(draw(st.integers(0 if commands else 1, 2))):
        args = draw(st.lists(argument(depth), max_size=3))
        commands.append(" ".join([draw(st.sampled_from(FUNCTIONS)), *args]))
    return " | ".join(commands)


@st.composite
def template(draw: st.DrawFn, depth: int = 0) -> str:
    """A well-formed template: text, actions, assignments and nested if/range/with."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 6 if depth < 2 else 3))
        var = draw(st.sampled_from(VARIABLES))
        if kind == 0:
            parts.append(draw(st.sampled_from(["x", " ", "-", "\n", "é"])))
        elif kind == 1:
            parts.append(f"{{{{ {draw(pipeline())} }}}}")
        elif kind == 2:
            parts.append(f"{{{{ {var} := {draw(pipeline())} }}}}")
        elif kind == 3:
            parts.append(f"{{{{ {var} = {draw(pipeline())} }}}}")
        else:
            word = ["if", "range", "with"][kind - 4]
            head = draw(pipeline())
            if word == "range" and draw(st.booleans()):
                head = f"$i, $v := {head}"
            body = draw(template(depth + 1))
            other = f"{{{{ else }}}}{draw(template(depth + 1))}" if draw(st.booleans()) else ""
            parts.append(f"{{{{ {word} {head} }}}}{body}{other}{{{{ end }}}}")
    declared = "".join(f"{{{{ {v} := 0 }}}}" for v in VARIABLES)
    return (declared if depth == 0 else "") + "".join(parts)


def exercise(source: str) -> None:
    """Every entry point of the engine on one template: a result or a GoTemplateError."""
    with bounded(HANG):  # a hang guard per example, not a speed bound
        for call in (lambda: ENGINE.check(source), lambda: ENGINE.referenced_functions(source),
                     lambda: ENGINE.render(source, DATA, orkestra=False),
                     lambda: ENGINE.render_value(source, DATA)):
            try:
                result = call()
            except GoTemplateError as err:
                message = str(err)  # formatting the message must work too
                assert UNEXPECTED not in message, message
                assert not python_internals(err.message), message
                assert err.__cause__ is None or not isinstance(err.__cause__, RecursionError)
                continue
            if isinstance(result, str):
                assert len(result) <= MAX_OUTPUT


@fuzz_settings(300)
@given(token_soup)
def test_token_soups_render_or_fail_cleanly(source: str) -> None:
    exercise(source)


@fuzz_settings(150)
@given(braced_text)
def test_random_text_inside_actions_renders_or_fails_cleanly(source: str) -> None:
    exercise(source)


@fuzz_settings(300)
@given(mutated())
def test_mutated_templates_render_or_fail_cleanly(source: str) -> None:
    exercise(source)


@fuzz_settings(150)
@given(template())
def test_generated_templates_render_or_fail_cleanly(source: str) -> None:
    exercise(source)


def test_every_seed_renders() -> None:
    """The seeds are valid templates: the mutations start from working code."""
    failing = []
    for seed in SEEDS:
        try:
            ENGINE.render(seed, DATA)
        except GoTemplateError as err:
            failing.append((seed, err.message))
    assert failing == [("{{ call .spec.nothing }}", "error calling call: call of nil")]
