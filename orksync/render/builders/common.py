"""Typed readers for rendered entry fields, shared by every builder. Pure.

Each reader takes the value and its entry-relative field path (`resources.limits.memory`,
`volumeClaimTemplates[0].storageSize`) and raises BuildError naming that path, saying what
was expected and what was found. Absent and null read as "not set"; for text fields the
empty string (what a template over a missing CR field renders) is "not set" too, so
defaults apply exactly where Orkestra applies them.

Quantities come back in Kubernetes' canonical form (`0.5` → `500m`, `1024Mi` → `1Gi`), the
form the API server stores, so that a re-read object compares equal to what we built.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from orksync.render.builders import BuildError
from orksync.render.coercion import go_atoi
from orksync.render.notes.quantity import format_quantity, parse_quantity_format

OWNER_LABEL = "orkestra-owner"
PROTOCOLS = ("TCP", "UDP", "SCTP")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_TRUE = frozenset({"true", "True", "TRUE", "1", "yes", "YES"})  # Orkestra's true words
_FALSE = frozenset({"false", "False", "FALSE", "0", "no", "NO"})
_PERCENT = re.compile(r"[0-9]+%")


def sub(field: str, key: str | int) -> str:
    """The path of a child: `sub("env", 0)` = `env[0]`, `sub("tls", "hosts")` = `tls.hosts`."""
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else key


def _kind(value: Any) -> str:
    return {dict: "map", list: "list", str: "string", bool: "boolean"}.get(
        type(value), "map" if isinstance(value, Mapping) else type(value).__name__)


def as_text(value: Any, field: str) -> str:
    """A scalar as rendered text (stripped); absent/null is ""; a map or list is an error."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise BuildError(field, f"must be a single value, got a {_kind(value)}")


def node(value: Any, field: str) -> dict[str, Any]:
    """A nested map; absent/null is {}."""
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise BuildError(field, f"must be a map, got a {_kind(value)}: {value!r}")
    return dict(value)


def items(value: Any, field: str) -> list[Any]:
    """A list; absent/null is []."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BuildError(field, f"must be a list, got a {_kind(value)}: {value!r}")
    return value


def nodes(value: Any, field: str) -> list[dict[str, Any]]:
    """A list of maps."""
    out = []
    for i, v in enumerate(items(value, field)):
        if v is None:
            raise BuildError(sub(field, i), "is empty: expected a map")
        out.append(node(v, sub(field, i)))
    return out


def string_map(value: Any, field: str) -> dict[str, str]:
    """A map of text values (labels, selectors, data); keys are kept as written."""
    return {str(k): as_text(v, sub(field, str(k))) for k, v in node(value, field).items()}


def text_map(value: Any, field: str) -> dict[str, str]:
    """A map of text values kept as rendered, spaces included (ConfigMap data: Orkestra
    writes a text without `{{` verbatim)."""
    return {str(k): v if isinstance(v, str) else as_text(v, sub(field, str(k)))
            for k, v in node(value, field).items()}


def string_list(value: Any, field: str, *, allow_empty_items: bool = False) -> list[str]:
    """A list of text values; an item that renders empty is an error unless allowed."""
    out = []
    for i, v in enumerate(items(value, field)):
        s = as_text(v, sub(field, i))
        if not s and not allow_empty_items:
            raise BuildError(sub(field, i), "is empty (a template rendered nothing?)")
        out.append(s)
    return out


def required(value: Any, field: str, what: str = "") -> str:
    s = as_text(value, field)
    if not s:
        raise BuildError(field, f"is required{what}")
    return s


def as_bool(value: Any, field: str, default: bool = False) -> bool:
    """A boolean: YAML true/false or Orkestra's words (`true True TRUE 1 yes YES` and their
    false counterparts); empty is the default; anything else is an error (Orkestra reads
    it as false)."""
    if isinstance(value, bool):
        return value
    s = as_text(value, field)
    if not s:
        return default
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise BuildError(field, f"must be true or false, got {s!r}")


def as_int(value: Any, field: str, *, default: int | None = None,
           minimum: int | None = None) -> int | None:
    """A whole number (strconv.Atoi); empty is the default; text that is not a number, or
    one below `minimum`, is an error."""
    if isinstance(value, bool):
        raise BuildError(field, f"must be a whole number, got {value!r}")
    s = as_text(value, field)
    if not s:
        return default
    n = go_atoi(s)
    if n is None:
        raise BuildError(field, f"must be a whole number, got {s!r}")
    if minimum is not None and n < minimum:
        raise BuildError(field, f"must be at least {minimum}, got {n}")
    return n


def as_port(value: Any, field: str, *, named: bool = False) -> int | str | None:
    """A port number 1-65535 (or, with `named`, an IANA port name); empty is None."""
    s = as_text(value, field)
    if not s:
        return None
    n = go_atoi(s)
    if n is None:
        if named and re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", s) and len(s) <= 15:
            return s
        kind = "a port number or a port name" if named else "a port number"
        raise BuildError(field, f"must be {kind}, got {s!r}")
    if not 0 < n <= 65535:
        raise BuildError(field, f"must be a port number between 1 and 65535, got {n}")
    return n


def file_mode(value: Any, field: str) -> int | None:
    """A file mode: a number, or text with a leading 0 read as octal ("0400" → 256)."""
    text = as_text(value, field)
    if len(text) > 1 and text.startswith("0") and set(text) <= set("01234567"):
        return int(text, 8)
    mode = as_int(value, field, minimum=0)
    if mode is not None and mode > 0o777:
        raise BuildError(field, f"must be a file mode between 0 and 0777 (511), got {mode}")
    return mode


def quantity(value: Any, field: str) -> str:
    """A Kubernetes quantity (`500m`, `2`, `4Gi`) in canonical form; never negative."""
    s = as_text(value, field)
    if not s:
        raise BuildError(field, "must be a Kubernetes quantity such as 500m, 2, 512Mi or 10Gi, "
                         "got an empty value (a template over a missing field?)")
    try:
        number, fmt = parse_quantity_format(s)
    except ValueError:
        raise BuildError(field, "must be a Kubernetes quantity such as 500m, 2, 512Mi or "
                         f"10Gi, got {s!r}") from None
    if number < 0:
        raise BuildError(field, f"must not be negative, got {s!r}")
    return format_quantity(number, fmt)


def resource_list(value: Any, field: str) -> dict[str, str]:
    """{resource name: quantity}, every value validated."""
    return {str(k): quantity(v, sub(field, str(k))) for k, v in node(value, field).items()}


def int_or_percent(value: Any, field: str) -> int | str | None:
    """`3` → 3, `"25%"` → "25%"; empty is None; anything else (or negative) is an error."""
    s = as_text(value, field)
    if not s:
        return None
    if _PERCENT.fullmatch(s):
        return s
    n = go_atoi(s)
    if n is None or n < 0:
        raise BuildError(field, f"must be a whole number or a percentage such as 1 or 25%, "
                         f"got {s!r}")
    return n


def choice(value: Any, field: str, options: Sequence[str], default: str = "") -> str:
    """One of `options`, matched case-insensitively and returned as spelled there."""
    s = as_text(value, field)
    if not s:
        if default:
            return default
        raise BuildError(field, f"is required: one of {', '.join(options)}")
    for option in options:
        if s.lower() == option.lower():
            return option
    raise BuildError(field, f"must be one of {', '.join(options)}, got {s!r}")


def protocol(value: Any, field: str) -> str:
    """TCP (default), UDP or SCTP."""
    return choice(value, field, PROTOCOLS, "TCP")


def access_modes(value: Any, field: str) -> list[str]:
    """PersistentVolume access modes; default [ReadWriteOnce]."""
    modes = [choice(m, sub(field, i), ACCESS_MODES)
             for i, m in enumerate(string_list(value, field))]
    return modes or ["ReadWriteOnce"]


def profile(name: str, table: Mapping[str, Any], field: str) -> Any:
    """A built-in profile, matched case-insensitively (Orkestra lower-cases names)."""
    found = table.get(name.lower())
    if found is None:
        raise BuildError(field, f"unknown profile {name!r}: use one of {', '.join(table)}")
    return found


def exclusive(block: Mapping[str, Any], field: str, explicit: Sequence[str],
              key: str = "profile") -> None:
    """A profile and the explicit fields it expands to cannot be combined (Orkestra's
    load-time rule)."""
    given = [k for k in explicit if block.get(k) not in (None, "", [], {})]
    if given:
        raise BuildError(sub(field, key), f"cannot be combined with {', '.join(given)}: use "
                         "either the profile or explicit values")


def selector(value: Any, field: str) -> dict[str, str]:
    """A flat label selector map (`{app: web}`), as Orkestra reads podSelector/selector."""
    raw = node(value, field)
    for k, v in raw.items():
        if isinstance(v, Mapping | list):
            raise BuildError(sub(field, str(k)), "must be a label value: this selector is a "
                             "flat map of labels ({app: web}), not a LabelSelector")
    return string_map(raw, field)


def pull_secrets(value: Any, field: str) -> list[dict[str, str]]:
    """imagePullSecrets given as names or as {name} maps → [{name}]."""
    out = []
    for i, v in enumerate(items(value, field)):
        if isinstance(v, Mapping):
            name = required(v.get("name"), sub(sub(field, i), "name"))
        else:
            name = required(v, sub(field, i))
        out.append({"name": name})
    return out
