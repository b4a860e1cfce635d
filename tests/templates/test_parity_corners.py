"""The dark corners a generated corpus found against Orkestra (issue 33), one reproducer
each, with the answer Orkestra's own code gives (checked with shared/tools/orkoracle; the
generated differential test in test_orkoracle_differential covers each category
broadly). These run without Go."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from orksync.render.gotemplate import GoTemplateEngine, GoTemplateError
from orksync.render.notes import builtin_functions
from orksync.secrets.random import PlaceholderRandom

NOW = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)
DATA: dict[str, Any] = {"spec": {"l": ["a", "b", "c"], "i": 1}, "metadata": {"name": "x",
                                                                          "namespace": "n"}}


def render(template: str) -> str:
    engine = GoTemplateEngine(builtin_functions(clock=lambda: NOW, random=PlaceholderRandom()))
    return engine.render(template, DATA)


@pytest.mark.parametrize(("template", "expected"), [
    ('{{ nextCron "CRON_TZ=UTC 0 1 * * *" }}', "2026-12-08T01:00:00Z"),
    ('{{ nextCron "TZ=Europe/Paris 0 1 * * *" }}', "2026-12-08T00:00:00Z"),
    ('{{ nextCron "CRON_TZ= @daily" }}', "2026-12-08T00:00:00Z"),
    ('{{ nextCron "@Daily" }}', ""),
    ('{{ nextCron "@daily " }}', ""),
    ('{{ nextCron "0 0 */2 * 1" }}', "2026-12-09T00:00:00Z"),
    ('{{ nextCron "+0 1 * * *" }}', "2026-12-08T01:00:00Z"),
    ('{{ asMap "a: 017" | toJson }}', '{"a":15}'),
    ('{{ printf "%T" (index (asMap "a: 08") "a") }}', "float64"),
    ('{{ printf "%#v" (asList "[18446744073709551615]") }}',
     "[]interface {}{0xffffffffffffffff}"),
    ('{{ asMap "1: a" }}', "map[]"),
    ('{{ timeFormat "2024-01-15T10:30:00,5Z" "2006" }}', "2024"),
    ('{{ timeFormat "2024-01-15T10:30:00+24:00" "2006-01-02T15:04:05Z07:00" }}',
     "2024-01-14T10:30:00Z"),
    ('{{ timeFormat "0000-02-29" "Monday 2006-01-02" }}', "Tuesday 0000-02-29"),
    ('{{ isExpired "0001-01-01T00:00:00Z" "-5m" }}', "true"),
    ('{{ timeFormat "2024-01-15T10:30:00.123456789Z" "15:04:05.999999999" }}',
     "10:30:00.123456789"),
    ('{{ timeSince "0000-01-01T00:00:00Z" }}', "9223372037"),
    ('{{ sumQuantity "1e19" "1" }}', "10000000000000000001"),
    ('{{ sumQuantity "-8Ei" "0" }}', "-9223372036854775807"),
    ('{{ parseQuantity "1e400" }}', "+Inf"),
    ('{{ sumQuantity "1" "1e400" }}', "1" + "0" * 399 + "1"),
    ('{{ toJson "\\f\\b" }}', '"\\f\\b"'),
    ('{{ toJson "a\\xffb" }}', '"a\\ufffdb"'),
    ('{{ printf "%#v" (split "a,b" ",") }}', '[]string{"a", "b"}'),
    ('{{ printf "%#v" (toList "a,b") }}', '[]string{"a", "b"}'),
    ('{{ printf "%#v" (mapKeys .metadata) }}', '[]string{"name", "namespace"}'),
    ('{{ isValidURL "https://ex%20ample.com" }}', "false"),
    ('{{ isValidEmail "a@b.c\\n" }}', "false"),
    ('{{ isValidEmail "a@[1.2.3.4]" }}', "true"),
    ('{{ len (toLower "A\\xffB") }}', "5"),
    ('{{ $i := .spec.i }}{{ slice .spec.l $i }}', "[b c]"),
])
def test_orksync_answers_as_orkestra(template: str, expected: str) -> None:
    assert render(template) == expected


@pytest.mark.parametrize("template", [
    "{{ slice .spec.l .spec.i }}", "{{ slice .spec.l 1 $.spec.i }}",
])
def test_slice_refuses_an_index_read_from_a_field_as_go_does(template: str) -> None:
    with pytest.raises(GoTemplateError, match="cannot index slice/array with type interface"):
        render(template)


def test_a_panicking_cron_time_zone_prefix_is_an_error() -> None:
    with pytest.raises(GoTemplateError, match="slice bounds out of range"):
        render('{{ nextCron "TZ=UTC" }}')
