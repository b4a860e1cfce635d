"""Orkestra's general notes, ported from its pkg/note with their Go signatures: as,
conditional, data, strings, types, math, list/map, safe access (validation, network,
domain and Kubernetes names: orkestra_validation).

Pure. No I/O. Each note is the Go function's behaviour for every value a custom
resource can carry (see `gosig` for how arguments reach a typed parameter). Where Go's
result depends on a map's iteration order (`mapValues`), orksync uses the keys' sorted
order.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from orksync.render.gotemplate.gotypes import GoInt, GoStrings, GoUint8, GoUint64, to_go_bytes
from orksync.render.notes._common import NoteError
from orksync.render.notes.gocore import (
    INT64_MIN,
    any_to_float,
    byte_len,
    byte_slice,
    int64_of,
    json_decode,
    json_marshal,
    native_number,
    sprint_v,
    to_lower,
    to_upper,
    trim_space,
)
from orksync.render.notes.gosig import GoNote, registrar

NOTES: list[GoNote] = []
note = registrar(NOTES)


def go_type_key(value: Any) -> Any:
    """The Go dynamic type of a value, for interface comparison."""
    return type(value)


def iface_equal(a: Any, b: Any) -> bool:
    """Go's `==` on two interface{} values: same dynamic type and value; comparing two
    maps or two lists panics (an error)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list):
        raise NoteError(f"runtime error: comparing uncomparable type {_type_text(a)}")
    return bool(a == b)


def _type_text(value: Any) -> str:
    from orksync.render.gotemplate.gotypes import go_type_name
    return go_type_name(value)


# ── as ──────────────────────────────────────────────────────────────────────────────
def _yaml_any(text: str) -> tuple[bool, Any]:
    """gopkg.in/yaml.v3 Unmarshal into `any`: (ok, value). Plain scalars are resolved as
    yaml.v3 resolves them (`_v3_scalar`); a mapping with a key that is not a string is
    not a map[string]any (None in its place, so asMap and asList refuse it)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="safe", pure=True)
    try:
        node = yaml.compose(text)
    except (YAMLError, ValueError, TypeError, RecursionError):
        return False, None
    except Exception:
        return False, None
    try:
        return True, _from_node(node, 0)
    except (ValueError, RecursionError):
        return False, None


class _AnyKeyMap(dict[str, Any]):
    """A YAML mapping with a key that is not a string (Go: map[interface{}]interface{}),
    keys printed; asMap does not take it for a map[string]any."""


def _from_node(node: Any, depth: int) -> Any:
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if node is None:
        return None
    if depth > 200:
        raise ValueError("too deep")
    if isinstance(node, SequenceNode):
        return [_from_node(item, depth + 1) for item in node.value]
    if isinstance(node, MappingNode):
        out: dict[str, Any] = {}
        string_keys = True
        for key_node, value_node in node.value:
            if isinstance(key_node, MappingNode | SequenceNode):
                raise ValueError("a collection as a mapping key")
            key = _scalar(key_node)
            if key_node.tag == "tag:yaml.org,2002:merge" and key == "<<":
                merged = _from_node(value_node, depth + 1)
                if isinstance(merged, dict):
                    for k, v in merged.items():
                        out.setdefault(k, v)
                    continue
            if not isinstance(key, str) or (key_node.style is None and _v3_timestamp(key)):
                string_keys = False
                key = sprint_v(key)
            out[key] = _from_node(value_node, depth + 1)
        return out if string_keys else _AnyKeyMap(out)
    return _scalar(node)


def _scalar(node: Any) -> Any:
    if node.style is not None:  # quoted or a block scalar: a string
        return node.value
    return _v3_scalar(node.value)


_V3_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_V3_WORDS: dict[str, Any] = {
    "~": None, "null": None, "Null": None, "NULL": None, "": None,
    "true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False,
    ".inf": float("inf"), ".Inf": float("inf"), ".INF": float("inf"),
    "+.inf": float("inf"), "+.Inf": float("inf"), "+.INF": float("inf"),
    "-.inf": float("-inf"), "-.Inf": float("-inf"), "-.INF": float("-inf"),
    ".nan": float("nan"), ".NaN": float("nan"), ".NAN": float("nan"),
}
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7_]*|"
                     r"[1-9][0-9_]*)\Z")


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64) / ParseUint without the range check: base prefixes,
    a leading 0 for octal, underscores only after a prefix or between digits."""
    if not _GO_INT.match(text):
        return None
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    if "_" in body and (body.endswith("_") or "__" in body or
                        not (body[:2].lower() in ("0x", "0o", "0b") or body[0] == "0")):
        return None
    digits = body.replace("_", "")
    lowered = digits[:2].lower()
    if lowered in ("0x", "0o", "0b"):
        if len(digits) == 2:
            return None
        return sign * int(digits[2:], {"0x": 16, "0o": 8, "0b": 2}[lowered])
    if len(digits) > 1 and digits[0] == "0":
        return sign * int(digits[1:], 8)
    return sign * int(digits)


_V3_TIMESTAMP = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:(?:[Tt]\d{1,2}:\d{1,2}:\d{1,2}(?:[.,]\d+)?"
    r"(?:Z|[+-]\d{2}:\d{2}))|(?: \d{1,2}:\d{1,2}:\d{1,2}(?:[.,]\d+)?))?\Z", re.ASCII)


def _v3_timestamp(text: str) -> bool:
    """Whether yaml.v3 reads a plain scalar as a timestamp (its parseTimestamp layouts,
    read by time.Parse: a real date, hours below 24, minutes and seconds below 60)."""
    if not _V3_TIMESTAMP.match(text):
        return False
    from orksync.render.notes.time import days_in_month
    numbers = [int(n) for n in re.findall(r"\d+", text.split(".")[0].split(",")[0])[:6]]
    year, month, day = numbers[:3]
    clock = numbers[3:] or [0, 0, 0]
    zone = re.search(r"[+-](\d{2}):(\d{2})\Z", text)
    if zone and (int(zone.group(1)) > 24 or int(zone.group(2)) > 60):
        return False
    return (1 <= month <= 12 and 1 <= day <= days_in_month(year, month) and clock[0] < 24
            and clock[1] < 60 and clock[2] < 60)


def _v3_scalar(text: str) -> Any:
    """yaml.v3's resolve() of a plain scalar decoded into `any`: null, booleans and the
    float words, then integers as strconv.ParseInt(_, 0, 64) reads them (so `017` is
    octal 15) after removing every `_`, uint64, YAML floats (`08` is the float 8); the
    rest (timestamps included, see docs/differences.md) stays text."""
    if text in _V3_WORDS:
        return _V3_WORDS[text]
    if not text or text[0] not in "0123456789+-.":
        return text
    plain = text.replace("_", "")
    number = _go_parse_int(plain)
    if number is not None:
        if INT64_MIN <= number < 2**63:
            return GoInt(number)
        if 0 <= number < 2**64:
            return GoUint64(number)
    if _V3_FLOAT.match(plain):
        try:
            return float(plain)
        except ValueError:
            pass
    return text


@note("asList", "a->l")
def as_list(value: Any) -> Any:
    """A list as is; a YAML or JSON list text parsed; anything else an empty list."""
    if type(value) is list:
        return value
    if isinstance(value, str):
        ok, parsed = _yaml_any(value)
        if ok and type(parsed) is list:
            return parsed
        try:
            decoded = json_decode(value)
        except ValueError:
            return []
        return decoded if type(decoded) is list else []
    return []


@note("asMap", "a->m")
def as_map(value: Any) -> Any:
    """A map as is; a YAML or JSON object text parsed; anything else an empty map."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        ok, parsed = _yaml_any(value)
        if ok and type(parsed) is dict:
            return parsed
        try:
            decoded = json_decode(value)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


@note("asString", "a->s")
def as_string(value: Any) -> str:
    """A string as is; anything else as JSON ("" when it cannot be written)."""
    if isinstance(value, str):
        return value
    text = json_marshal(value)
    return "" if text is None else text


# ── conditional ─────────────────────────────────────────────────────────────────────
def note_empty(value: Any) -> bool:
    """Orkestra's noteEmpty."""
    if value is None:
        return True
    if isinstance(value, str):
        return value == "" or value == "<no value>"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value == 0
    if type(value) is list or isinstance(value, dict):
        return len(value) == 0
    return sprint_v(value) == ""


def note_truthy(value: Any) -> bool:
    """Orkestra's noteIsTruthy: an int64 compares unequal to the untyped 0 (an int), so
    every int64, zero included, is true."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value != ""
    if isinstance(value, int):
        return True if type(value) is int else value != 0
    if isinstance(value, float):
        return value != 0.0
    if type(value) is list or isinstance(value, dict):
        return len(value) > 0
    return True


@note("ternary", "a,a,a->a")
def ternary(cond: Any, yes: Any, no: Any) -> Any:
    """`yes` when cond is truthy (any int64 is), else `no`."""
    return yes if note_truthy(cond) else no


@note("boolTernary", "b,a,a->a")
def bool_ternary(cond: bool, yes: Any, no: Any) -> Any:
    """`yes` when the bool cond is true, else `no`."""
    return yes if cond else no


@note("boolDefault", "a,b->b")
def bool_default(value: Any, fallback: bool) -> bool:
    """value when it is a bool, else the fallback."""
    return value if isinstance(value, bool) else fallback


@note("eqTernary", "a,a,a,a->a")
def eq_ternary(value: Any, target: Any, yes: Any, no: Any) -> Any:
    """`yes` when value and target print the same (%v), else `no`."""
    return yes if sprint_v(value) == sprint_v(target) else no


@note("coalesce", "a...->a")
def coalesce(*values: Any) -> Any:
    """The first value that is not empty; nil when all are."""
    for value in values:
        if not note_empty(value):
            return value
    return None


@note("default", "a,a->a")
def default(fallback: Any, value: Any) -> Any:
    """value unless it is empty, then the fallback: `{{ .spec.x | default "y" }}`."""
    return fallback if note_empty(value) else value


@note("empty", "a->b")
def empty(value: Any) -> bool:
    """nil, "", "<no value>", false, 0, an empty list or map."""
    return note_empty(value)


@note("notEmpty", "a->b")
def not_empty(value: Any) -> bool:
    """The negation of empty."""
    return not note_empty(value)


# ── data ────────────────────────────────────────────────────────────────────────────
@note("toBase64", "s->s")
def to_base64(s: str) -> str:
    """Standard base64 of the string's bytes."""
    return base64.b64encode(to_go_bytes(s)).decode("ascii")


@note("fromBase64", "s->s")
def from_base64(s: str) -> str:
    """The decoded standard base64 text; "" when it is not valid base64."""
    text = s.replace("\r", "").replace("\n", "")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return ""
    from orksync.render.gotemplate.gotypes import from_go_bytes
    return from_go_bytes(raw)


@note("toJSON", "a->s")
def to_json_lenient(value: Any) -> str:
    """JSON text ("{}" when the value cannot be written)."""
    text = json_marshal(value)
    return "{}" if text is None else text


@note("sha256sum", "s->s")
def sha256sum(s: str) -> str:
    """The first 8 hex characters of the SHA-256 of the string."""
    return hashlib.sha256(to_go_bytes(s)).hexdigest()[:8]


@note("truncateName", "s,i->s")
def truncate_name(s: str, limit: int) -> str:
    """The first `limit` bytes."""
    if byte_len(s) <= limit:
        return s
    if limit < 0:
        raise NoteError(f"runtime error: slice bounds out of range [:{limit}]")
    return byte_slice(s, 0, limit)


_SLUG_NON = re.compile(r"[^a-z0-9-]")
_SLUG_DASHES = re.compile(r"-+")


@note("slugify", "s->s")
def slugify(s: str) -> str:
    """Lower case, every other character a dash, dashes squeezed and trimmed."""
    lowered = to_lower(s)
    text = _SLUG_NON.sub("-", lowered) if lowered.isascii() else "".join(
        c if ("a" <= c <= "z" or "0" <= c <= "9" or c == "-") else "-"
        for c in _runes(lowered))
    return _SLUG_DASHES.sub("-", text).strip("-")


def _runes(s: str) -> list[str]:
    """Go's runes of a string: an invalid byte (a surrogate escape) is one rune."""
    return list(s)


# ── strings ─────────────────────────────────────────────────────────────────────────
note("toLower", "s->s")(to_lower)
note("toUpper", "s->s")(to_upper)
note("trimSpace", "s->s")(trim_space)


@note("trim", "s,s->s")
def trim(s: str, cutset: str) -> str:
    """s without leading and trailing characters of cutset."""
    return s.strip(cutset) if cutset else s


@note("trimPrefix", "s,s->s")
def trim_prefix(s: str, prefix: str) -> str:
    return s[len(prefix):] if prefix and s.startswith(prefix) else s


@note("trimSuffix", "s,s->s")
def trim_suffix(s: str, suffix: str) -> str:
    return s[: len(s) - len(suffix)] if suffix and s.endswith(suffix) else s


note("hasPrefix", "s,s->b")(lambda s, p: s.startswith(p))
note("hasSuffix", "s,s->b")(lambda s, p: s.endswith(p))
note("contains", "s,s->b")(lambda s, sub: sub in s)


@note("replace", "s,s,s->s")
def replace(s: str, old: str, new: str) -> str:
    """Every `old` replaced by `new`."""
    return s.replace(old, new)


@note("split", "s,s->S")
def split(s: str, sep: str) -> list[str]:
    """s split at every sep (a list of strings; empty for "")."""
    if s == "":
        return GoStrings()
    if sep == "":
        return GoStrings(_runes(s))
    return GoStrings(s.split(sep))


@note("join", "S,s->s")
def join(items: list[str], sep: str) -> str:
    """A list of strings joined (a list of the custom resource is not one: Go refuses)."""
    return sep.join(items)


@note("repeat", "s,i->s")
def repeat(s: str, count: int) -> str:
    """s repeated count times."""
    if count < 0:
        raise NoteError("strings: negative Repeat count")
    if count and byte_len(s) * count > 1_000_000:
        raise NoteError("repeat: result longer than 1 MiB (orksync's bound on a render)")
    return s * count


@note("camelToKebab", "s->s")
def camel_to_kebab(s: str) -> str:
    """`fooBar` → `foo-bar`, `HTTPServer` → `http-server` (ASCII letters only)."""
    data = to_go_bytes(s)
    out = bytearray()
    for i, c in enumerate(data):
        upper = 65 <= c <= 90
        if i > 0 and upper:
            prev = data[i - 1]
            nxt = data[i + 1] if i + 1 < len(data) else 0
            if 97 <= prev <= 122 or (65 <= prev <= 90 and 97 <= nxt <= 122):
                out.append(45)
        out.append(c + 32 if upper else c)
    from orksync.render.gotemplate.gotypes import from_go_bytes
    return from_go_bytes(bytes(out))


@note("truncate", "s,i->s")
def truncate(s: str, n: int) -> str:
    """The first n bytes, the last three replaced by `...` when n > 3."""
    if byte_len(s) <= n:
        return s
    if n < 0:
        raise NoteError(f"runtime error: slice bounds out of range [:{n}]")
    if n <= 3:
        return byte_slice(s, 0, n)
    return byte_slice(s, 0, n - 3) + "..."


# ── types ───────────────────────────────────────────────────────────────────────────
def type_of(value: Any) -> str:
    """Orkestra's TypeOf."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float) and not isinstance(value, GoUint8):
        return "number"
    if isinstance(value, dict):
        return "map"
    if type(value) is list:
        return "slice"
    return "unknown"


@note("toInt", "a->I!")
def to_int(value: Any) -> int:
    """A number, bool or numeric string as an int64 (truncated); an error otherwise."""
    if isinstance(value, bool):
        return int(value)
    f = any_to_float(value)
    if f is None:
        raise NoteError(f"toInt: cannot convert {_type_text(value)} to number"
                        if not isinstance(value, str) else
                        f"toInt: strconv.ParseFloat: parsing {value!r}: invalid syntax")
    return int64_of(f)


@note("toFloat", "a->f!")
def to_float(value: Any) -> float:
    """A number, bool or numeric string as a float64; an error otherwise."""
    f = any_to_float(value)
    if f is None:
        raise NoteError(f"cannot convert {_type_text(value)} to number"
                        if not isinstance(value, str) else
                        f"strconv.ParseFloat: parsing {value!r}: invalid syntax")
    return f


_TRUE = frozenset({"true", "True", "TRUE", "1", "yes", "YES", "Yes", "on", "ON"})
_FALSE = frozenset({"false", "False", "FALSE", "0", "no", "NO", "No", "off", "OFF", ""})


@note("toBool", "a->b!")
def to_bool(value: Any) -> bool:
    """A bool, a number (non-zero) or a yes/no/on/off/true/false word; an error otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and not isinstance(value, GoUint8):
        return float(value) != 0
    if isinstance(value, str):
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise NoteError(f"toBool: unrecognised value {value!r}")
    raise NoteError(f"toBool: cannot convert {_type_text(value)}")


@note("toString", "a->s")
def to_string(value: Any) -> str:
    """The value as %v prints it; nil is ""."""
    return "" if value is None else sprint_v(value)


@note("toJson", "a->s!")
def to_json(value: Any) -> str:
    """JSON text; an error when the value cannot be written."""
    text = json_marshal(value)
    if text is None:
        raise NoteError("toJson: json: unsupported value")
    return text


@note("toList", "s->S")
def to_list(s: str) -> list[str]:
    """A comma-separated text as a list of its trimmed, non-empty items."""
    if trim_space(s) == "":
        return GoStrings()
    return GoStrings(p for p in (trim_space(part) for part in s.split(",")) if p)


note("typeOf", "a->s")(type_of)


@note("len", "a->i")
def ork_len(value: Any) -> int:
    """Bytes of a string, items of a list or map; 0 for anything else (never an error)."""
    if isinstance(value, str):
        return byte_len(value)
    if type(value) is list or isinstance(value, dict):
        return len(value)
    return 0


note("typeMap", "a->b")(lambda v: type_of(v) == "map")
note("typeList", "a->b")(lambda v: type_of(v) == "slice")
note("typeString", "a->b")(lambda v: type_of(v) == "string")
note("typeNumber", "a->b")(lambda v: type_of(v) == "number")
note("typeBool", "a->b")(lambda v: type_of(v) == "bool")
note("typeNull", "a->b")(lambda v: type_of(v) == "null")


@note("isEmpty", "a->b")
def is_empty(value: Any) -> bool:
    """nil, "", an empty list or map (0 and false are not empty)."""
    if value is None:
        return True
    if isinstance(value, str):
        return value == ""
    if type(value) is list or isinstance(value, dict):
        return len(value) == 0
    return False


note("isScalar", "a->b")(lambda v: type_of(v) in ("string", "number", "bool"))
note("isComposite", "a->b")(lambda v: type_of(v) in ("map", "slice"))


# ── math ────────────────────────────────────────────────────────────────────────────
def _floats(name: str, *values: Any) -> list[float]:
    out = []
    for value in values:
        f = any_to_float(value)
        if f is None:
            if name == "clamp":
                raise NoteError("clamp: non-numeric arguments")
            raise NoteError(f"{name}: non-numeric arguments "
                            + ", ".join(sprint_v(v) for v in values))
        out.append(f)
    return out


@note("add", "a,a->a!")
def add(a: Any, b: Any) -> Any:
    """a + b (numbers or numeric strings; a whole result is an int64)."""
    x, y = _floats("add", a, b)
    return native_number(x + y)


@note("sub", "a,a->a!")
def sub(a: Any, b: Any) -> Any:
    """a - b."""
    x, y = _floats("sub", a, b)
    return native_number(x - y)


@note("mul", "a,a->a!")
def mul(a: Any, b: Any) -> Any:
    """a × b."""
    x, y = _floats("mul", a, b)
    return native_number(x * y)


@note("div", "a,a->a!")
def div(a: Any, b: Any) -> Any:
    """a / b; an error when b is 0."""
    x, y = _floats("div", a, b)
    if y == 0:
        raise NoteError("div: division by zero")
    return native_number(x / y)


@note("mod", "a,a->a!")
def mod(a: Any, b: Any) -> Any:
    """int64(a) % int64(b); an error when b is 0."""
    x, y = _floats("mod", a, b)
    if y == 0:
        raise NoteError("mod: division by zero")
    i, j = int64_of(x), int64_of(y)
    if j == 0:
        raise NoteError("runtime error: integer divide by zero")
    if j == -1:
        return 0
    r = abs(i) % abs(j)
    return -r if i < 0 else r


@note("min", "a,a->a!")
def min_(a: Any, b: Any) -> Any:
    """The smaller of a and b."""
    x, y = _floats("min", a, b)
    return native_number(x if x < y else y)


@note("max", "a,a->a!")
def max_(a: Any, b: Any) -> Any:
    """The larger of a and b."""
    x, y = _floats("max", a, b)
    return native_number(x if x > y else y)


@note("clamp", "a,a,a->a!")
def clamp(value: Any, lo: Any, hi: Any) -> Any:
    """value limited to [lo, hi]."""
    v, low, high = _floats("clamp", value, lo, hi)
    if v < low:
        return native_number(low)
    if v > high:
        return native_number(high)
    return native_number(v)


@note("abs", "a->a!")
def abs_(value: Any) -> Any:
    """The absolute value."""
    f = any_to_float(value)
    if f is None:
        raise NoteError(f"abs: non-numeric argument {sprint_v(value)}")
    return native_number(-f if f < 0 else f)


# ── list / map ──────────────────────────────────────────────────────────────────────
@note("listHas", "a,a->b")
def list_has(items: Any, value: Any) -> bool:
    """Whether the list holds value (same Go type and value: an int64 3 is not 3.0)."""
    if type(items) is not list:
        return False
    return any(iface_equal(v, value) for v in items)


@note("listGet", "a,i->a")
def list_get(items: Any, index: int) -> Any:
    """The item at index; nil when out of range or not a list."""
    if type(items) is not list or index < 0 or index >= len(items):
        return None
    return items[index]


@note("listLen", "a->i")
def list_len(items: Any) -> int:
    """The number of items of a list; 0 for anything else."""
    return len(items) if type(items) is list else 0


@note("mapGet", "a,s->a")
def map_get(m: Any, key: str) -> Any:
    """m[key]; nil when absent or m is not a map."""
    return m.get(key) if isinstance(m, Mapping) else None


@note("mapKeys", "a->S")
def map_keys(m: Any) -> list[str]:
    """The keys, sorted."""
    return GoStrings(sorted(m)) if isinstance(m, Mapping) else GoStrings()


@note("mapValues", "a->l")
def map_values(m: Any) -> list[Any]:
    """The values (in the keys' sorted order; Go's order is random)."""
    return [m[k] for k in sorted(m)] if isinstance(m, Mapping) else []


@note("mapPick", "a,s...->m")
def map_pick(m: Any, *keys: str) -> dict[str, Any]:
    """A map of only the given keys that m has."""
    if not isinstance(m, Mapping):
        return {}
    return {k: m[k] for k in keys if k in m}


@note("mapOmit", "a,s...->m")
def map_omit(m: Any, *keys: str) -> dict[str, Any]:
    """m without the given keys."""
    if not isinstance(m, Mapping):
        return {}
    skip = set(keys)
    return {k: v for k, v in m.items() if k not in skip}


# ── safe access ─────────────────────────────────────────────────────────────────────
@note("getOr", "a,a->a")
def get_or(value: Any, fallback: Any) -> Any:
    """value unless it is empty, then the fallback."""
    return fallback if note_empty(value) else value


@note("getStringOr", "a,s->s")
def get_string_or(value: Any, fallback: str) -> str:
    """value when it is a non-empty string, else the fallback."""
    return value if isinstance(value, str) and value != "" else fallback


@note("getIntOr", "a,i->i")
def get_int_or(value: Any, fallback: int) -> int:
    """value when it is a number (truncated), else the fallback."""
    if isinstance(value, bool | GoUint8):
        return fallback
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int64_of(value)
    return fallback


@note("getBoolOr", "a,b->b")
def get_bool_or(value: Any, fallback: bool) -> bool:
    """value when it is a bool, else the fallback."""
    return value if isinstance(value, bool) else fallback
