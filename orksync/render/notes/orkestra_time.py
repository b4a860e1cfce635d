"""Orkestra's time, duration, cron, semver, quantity and random notes, ported from its
pkg/note with their Go signatures.

Pure. No I/O: the time notes read the injected clock, the random notes the injected
`RandomSource` (placeholders when rendering to disk; see `random.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import Any

from orksync.render.gotemplate import deferred
from orksync.render.notes import quantity as q
from orksync.render.notes import semver as sv
from orksync.render.notes._common import Clock, NoteError, go_json, now_utc
from orksync.render.notes.cron import parse_standard
from orksync.render.notes.gocore import INT64_MAX, INT64_MIN, int64_of, parse_float, sprint_v
from orksync.render.notes.gocore import trim_space as _trim_space
from orksync.render.notes.gosig import GoNote, registrar
from orksync.render.notes.time import days_from_civil, days_in_month, go_format
from orksync.secrets.random import GENERATE_TOKEN_RE, MAX_RANDOM_N, RandomSource

NS = 1
US = 1000
MS = 1000 * US
SECOND = 1000 * MS
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE




# ── Go durations ────────────────────────────────────────────────────────────────────
_UNITS = {"ns": NS, "us": US, "\u00b5s": US, "\u03bcs": US, "ms": MS, "s": SECOND,
          "m": MINUTE, "h": HOUR}


def go_parse_duration(s: str) -> int:
    """time.ParseDuration: nanoseconds; ValueError on a bad text or an overflow."""
    orig = s
    neg = False
    if s and s[0] in "-+":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if s == "":
        raise ValueError(f"time: invalid duration {orig!r}")
    total = 0
    while s:
        m = re.match(r"([0-9]*)(\.([0-9]*))?", s)
        assert m is not None
        whole, frac = m.group(1), m.group(3)
        if whole == "" and not frac:
            raise ValueError(f"time: invalid duration {orig!r}")
        s = s[m.end():]
        u = re.match(r"[^0-9.]*", s)
        assert u is not None
        unit = u.group(0)
        if unit == "":
            raise ValueError(f"time: missing unit in duration {orig!r}")
        if unit not in _UNITS:
            raise ValueError(f"time: unknown unit {unit!r} in duration {orig!r}")
        s = s[u.end():]
        size = _UNITS[unit]
        v = int(whole or "0")
        if v > (2**63) // size:
            raise ValueError(f"time: invalid duration {orig!r}")
        v *= size
        if frac:
            scale = 10 ** len(frac)
            v += int(int(frac) * size / scale) if len(frac) < 18 else int(
                Decimal(int(frac)) * size / Decimal(scale))
        total += v
        if total > 2**63:
            raise ValueError(f"time: invalid duration {orig!r}")
    if neg:
        return -total
    if total > INT64_MAX:
        raise ValueError(f"time: invalid duration {orig!r}")
    return total


def _float_duration(n: float, unit: int) -> int:
    return int64_of(n * float(unit))


def parse_time_duration(s: str) -> int:
    """Orkestra's utils.ParseTimeDuration (y, mo, w, d and Go durations), nanoseconds."""
    if s == "":
        raise ValueError("empty duration")
    if s == "never":
        return 0
    s = _trim_space(s)
    for suffix, unit in (("y", 365 * 24 * HOUR), ("mo", 30 * 24 * HOUR), ("w", 7 * 24 * HOUR),
                         ("d", 24 * HOUR)):
        if s.endswith(suffix):
            n = parse_float(s[: -len(suffix)])
            if n is None:
                raise ValueError(f"invalid duration {s!r}")
            return _float_duration(n, unit)
    return go_parse_duration(s)


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    digits = ""
    printed = False
    for _ in range(prec):
        digit = v % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def go_duration_string(d: int) -> str:
    """time.Duration.String."""
    d = (d - INT64_MIN) % 2**64 + INT64_MIN
    if d == 0:
        return "0s"
    neg = d < 0
    u = -d if neg else d
    if u < SECOND:
        if u < US:
            text = f"{u}ns"
        elif u < MS:
            frac, whole = _fmt_frac(u, 3)
            text = f"{whole}{frac}\u00b5s"
        else:
            frac, whole = _fmt_frac(u, 6)
            text = f"{whole}{frac}ms"
    else:
        frac, u = _fmt_frac(u, 9)
        text = f"{u % 60}{frac}s"
        u //= 60
        if u > 0:
            text = f"{u % 60}m" + text
            u //= 60
            if u > 0:
                text = f"{u}h" + text
    return ("-" if neg else "") + text


# ── time ────────────────────────────────────────────────────────────────────────────
# The union of what Go's time.Parse accepts for Orkestra's layouts (RFC3339,
# RFC3339Nano, "2006-01-02T15:04:05Z", "2006-01-02"): the general parser reads a one-digit
# hour, a `,` or `.` fraction, and zone offsets up to +24:00 / 60 minutes.
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?"
                      r"(Z|[+-]\d{2}:\d{2})\Z", re.ASCII)
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z", re.ASCII)


def parse_time(s: str) -> tuple[int, int] | None:
    """Orkestra's parseTime: RFC 3339 (fractions allowed) or a date, as Go's time.Parse
    reads them; (seconds since the Unix epoch, nanoseconds), or None."""
    m = _RFC3339.match(s) or _DATE.match(s)
    if not m:
        return None
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month):
        return None
    if m.re is _DATE:
        return days_from_civil(year, month, day) * 86400, 0
    hour, minute, second = int(m.group(4)), int(m.group(5)), int(m.group(6))
    if hour > 23 or minute > 59 or second > 59:
        return None
    nanos = int(m.group(7)[:9].ljust(9, "0")) if m.group(7) else 0
    zone = m.group(8)
    offset = 0
    if zone != "Z":
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 24 or om > 60:
            return None
        offset = (oh * 60 + om) * 60 * (-1 if zone[0] == "-" else 1)
    unix = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return unix - offset, nanos


def _unix_ns(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * SECOND + delta.microseconds * 1000


def time_notes(clock: Clock) -> list[GoNote]:
    table: list[GoNote] = []
    note = registrar(table)

    def now() -> datetime:
        return now_utc(clock).astimezone(UTC)

    def since(s: str) -> int | None:
        parsed = parse_time(s)
        if parsed is None:
            return None
        unix, nanos = parsed
        since = _unix_ns(now()) - (unix * SECOND + nanos)
        return max(INT64_MIN, min(INT64_MAX, since))  # time.Time.Sub saturates

    @note("timeAgo", "s->s")
    def time_ago(s: str) -> str:
        """How long ago the timestamp was (`5m ago`)."""
        d = since(s)
        if d is None:
            return ""
        if d < MINUTE:
            return f"{int(d / SECOND)}s ago"
        if d < HOUR:
            return f"{int(d / MINUTE)}m ago"
        if d < 24 * HOUR:
            return f"{int(d / HOUR)}h ago"
        return f"{int(d / HOUR / 24)}d ago"

    @note("timeSince", "s->I")
    def time_since(s: str) -> int:
        """Seconds since the timestamp, rounded."""
        d = since(s)
        if d is None:
            return 0
        seconds = d / SECOND
        return math.floor(abs(seconds) + 0.5) * (1 if seconds >= 0 else -1)

    @note("timeUntil", "s->s")
    def time_until(s: str) -> str:
        """The Go duration until the timestamp, whole seconds; `0s` when past."""
        d = since(s)
        if d is None:
            return "0s"
        d = -d if d != INT64_MIN else INT64_MAX
        if d <= 0:
            return "0s"
        return go_duration_string(d - d % SECOND)

    @note("isExpired", "a,s->b")
    def is_expired(timestamp: Any, duration: str) -> bool:
        """Whether timestamp + duration is past."""
        parsed = parse_time(timestamp if isinstance(timestamp, str) else sprint_v(timestamp))
        if parsed is None:
            return False
        try:
            d = parse_time_duration(duration)
        except ValueError:
            return False
        unix, nanos = parsed
        return _unix_ns(now()) > unix * SECOND + nanos + d

    @note("timeFormat", "a,s->s")
    def time_format(timestamp: Any, layout: str) -> str:
        """The timestamp in UTC in a Go layout."""
        parsed = parse_time(timestamp if isinstance(timestamp, str) else sprint_v(timestamp))
        if parsed is None:
            return ""
        return go_format(parsed[0], parsed[1], layout)

    @note("durationSeconds", "s->I")
    def duration_seconds(d: str) -> int:
        """The duration's whole seconds; 0 when invalid."""
        if d == "":
            return 0
        try:
            return int(parse_time_duration(d) / SECOND)
        except ValueError:
            return 0

    @note("durationAdd", "s,s->s")
    def duration_add(a: str, b: str) -> str:
        """The sum as a Go duration; `0s` when either is invalid."""
        try:
            return go_duration_string(parse_time_duration(a) + parse_time_duration(b))
        except ValueError:
            return "0s"

    @note("durationValid", "s->b")
    def duration_valid(s: str) -> bool:
        """Whether the text is a duration."""
        if s == "":
            return False
        try:
            parse_time_duration(s)
        except ValueError:
            return False
        return True

    note("weekday", "->b")(lambda: now().weekday() < 5)
    note("weekend", "->b")(lambda: now().weekday() >= 5)

    def hhmm(s: str) -> int | None:
        m = re.match(r"(\d{1,2}):(\d{2})\Z", s, re.ASCII)
        if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
            return None
        return int(m.group(1)) * 60 + int(m.group(2))

    def in_window(after: str, before: str) -> bool:
        a, b = hhmm(after), hhmm(before)
        if a is None or b is None:
            return False
        current = now()
        minute = current.hour * 60 + current.minute
        start = current.replace(hour=a // 60, minute=a % 60, second=0, microsecond=0)
        end = current.replace(hour=b // 60, minute=b % 60, second=0, microsecond=0)
        del minute
        return not current < start and current < end

    note("timeInWindow", "s,s->b")(in_window)
    note("timeNotInWindow", "s,s->b")(lambda a, b: not in_window(a, b))

    @note("nextCron", "s->s!")
    def next_cron(expr: str) -> str:
        """The next time the cron expression fires (robfig/cron's standard parser, a
        CRON_TZ= prefix honoured), RFC 3339 UTC; "" when invalid."""
        try:
            schedule, zone = parse_standard(expr, go_parse_duration)
        except ValueError as err:
            if str(err).startswith("runtime error"):  # Orkestra's parser panics
                raise NoteError(str(err)) from None
            return ""
        current = now()
        if zone is not None:
            from zoneinfo import ZoneInfo
            current = current.astimezone(ZoneInfo(zone))
        fire = schedule.next_after(current.replace(tzinfo=None))
        if fire is None:  # robfig/cron gives the zero time for a schedule that never fires
            return "0001-01-01T00:00:00Z"
        return fire.replace(tzinfo=current.tzinfo).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return table


# ── cron ────────────────────────────────────────────────────────────────────────────
CRON_MAP_SENTINEL = "\x00CMAP\x00"
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
           "@hourly": "0 * * * *"}


def expand_macro(expr: str) -> str:
    from orksync.render.notes.gocore import to_lower
    return _MACROS.get(_trim_space(to_lower(expr)), expr)


def fields(s: str) -> list[str]:
    """strings.Fields."""
    from orksync.render.notes.gocore import GO_SPACE
    return [f for f in re.split("[" + re.escape(GO_SPACE) + "]+", s) if f]


def _star(s: str) -> str:
    return "*" if _trim_space(s) == "" else s


def cron_normalize(expr: str) -> str:
    if _trim_space(expr) == "":
        return "* * * * *"
    parts = fields(expand_macro(expr))
    if len(parts) != 5:
        return "* * * * *"
    return " ".join(parts)


def cron_from_map(m: Mapping[str, Any]) -> str:
    def get(key: str) -> str:
        if key in m:
            s = sprint_v(m[key])
            if _trim_space(s) != "":
                return s
        return "*"

    return " ".join(_star(get(k)) for k in ("minute", "hour", "dayOfMonth", "month",
                                            "dayOfWeek"))


def cron_describe(expr: str) -> str:
    parts = fields(cron_normalize(expr))
    if len(parts) != 5:
        return "Invalid cron expression"
    mi, hr, dom, mon, dow = parts
    if mi.startswith("*/") and hr == "*" and dom == "*" and mon == "*" and dow == "*":
        return f"Every {mi[2:]} minutes"
    if mi == "0" and hr == "*" and dom == "*" and mon == "*" and dow == "*":
        return "Every hour"
    if dom == "*" and mon == "*" and dow == "*" and mi != "*" and hr != "*":
        return f"At {hr}:{mi} every day"
    if dom == "*" and mon == "*" and dow != "*":
        return f"At {hr}:{mi} on day-of-week {dow}"
    if dom != "*" and mon == "*" and dow == "*":
        return f"At {hr}:{mi} on day {dom} of every month"
    return f"Cron: {' '.join(parts)}"


def cron_notes() -> list[GoNote]:
    table: list[GoNote] = []
    note = registrar(table)

    def field(expr: str, pos: int) -> str:
        if _trim_space(expr) == "":
            return "*"
        if pos < 0 or pos > 4:
            raise NoteError(f"cronField: position {pos} out of range [0-4]")
        parts = fields(expand_macro(expr))
        if len(parts) != 5:
            raise NoteError(f"cronField: expected 5 fields in {expr!r}, got {len(parts)}")
        return parts[pos]

    note("cronField", "s,i->s!")(field)
    for i, name in enumerate(("cronMinute", "cronHour", "cronDom", "cronMonth", "cronDow")):
        note(name, "s->s!")(lambda expr, i=i: field(expr, i))
    note("cronExpr", "s,s,s,s,s->s")(lambda *parts: " ".join(_star(p) for p in parts))
    note("cronValid", "s->b")(
        lambda expr: _trim_space(expr) != "" and len(fields(expand_macro(expr))) == 5)

    @note("cronFromMap", "a->s!")
    def from_map(value: Any) -> str:
        """A cron map (`minute`, `hour`, ...) as an expression; an error for a non-map."""
        if not isinstance(value, Mapping):
            from orksync.render.gotemplate.gotypes import go_type_name
            raise NoteError(f"cronFromMap: expected map, got {go_type_name(value)} — use "
                            "cronFromAny if the input may be a cron string")
        return cron_from_map(value)

    @note("cronToMap", "a->s!")
    def to_map(value: Any) -> str:
        """A cron expression as Orkestra's marked JSON map."""
        if isinstance(value, Mapping):
            out: Mapping[str, Any] = value
        else:
            expr = sprint_v(value)
            out = {"minute": "*", "hour": "*", "dayOfMonth": "*", "month": "*",
                   "dayOfWeek": "*"}
            parts = fields(expand_macro(expr)) if _trim_space(expr) != "" else []
            if len(parts) == 5:
                out = dict(zip(("minute", "hour", "dayOfMonth", "month", "dayOfWeek"), parts,
                               strict=True))
        try:
            return CRON_MAP_SENTINEL + go_json(out)
        except NoteError as exc:
            raise NoteError(f"cronToMap: {exc}") from None

    @note("cronFromAny", "a->s")
    def from_any(value: Any) -> str:
        """A cron map or expression, normalized."""
        if isinstance(value, Mapping):
            return cron_from_map(value)
        if isinstance(value, str):
            return cron_normalize(value)
        return "* * * * *"

    note("cronNormalize", "s->s")(cron_normalize)
    note("cronDescribe", "s->s")(cron_describe)
    return table


# ── semver ──────────────────────────────────────────────────────────────────────────
_LOOSE = re.compile(r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
                    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?\Z", re.ASCII)
_UINT64 = 2**64


def mm_version(text: str) -> tuple[int, int, int, str] | None:
    """Masterminds semver v3 NewVersion (leading zeros coerced): (major, minor, patch,
    prerelease); None when invalid."""
    if len(text) > 128:
        return None
    m = _LOOSE.match(text)
    if not m:
        return None
    nums = [int(m.group(1)), int((m.group(2) or ".0")[1:]), int((m.group(3) or ".0")[1:])]
    if any(n >= _UINT64 for n in nums):
        return None
    pre = m.group(5) or ""
    for part in pre.split(".") if pre else []:
        if part.isdigit() and len(part) > 1 and part[0] == "0":
            return None
    return nums[0], nums[1], nums[2], pre


def _pre_part(a: str, b: str) -> int:
    an, bn = a.isdigit(), b.isdigit()
    if an and bn:
        x, y = int(a), int(b)
        return (x > y) - (x < y)
    if an != bn:
        return -1 if an else 1
    return (a > b) - (a < b)


def mm_compare(a: tuple[int, int, int, str], b: tuple[int, int, int, str]) -> int:
    for x, y in zip(a[:3], b[:3], strict=True):
        if x != y:
            return 1 if x > y else -1
    pa, pb = a[3], b[3]
    if pa == pb:
        return 0
    if not pa:
        return 1
    if not pb:
        return -1
    xs, ys = pa.split("."), pb.split(".")
    for px, py in zip(xs, ys, strict=False):
        c = _pre_part(px, py)
        if c:
            return c
    return (len(xs) > len(ys)) - (len(xs) < len(ys))


def semver_notes() -> list[GoNote]:
    table: list[GoNote] = []
    note = registrar(table)
    for index, name in enumerate(("semverMajor", "semverMinor", "semverPatch")):
        def part(v: str, index: int = index) -> str:
            parsed = mm_version(v)
            return "" if parsed is None else str(parsed[index])
        note(name, "s->s")(part)
    note("semverValid", "s->b")(lambda v: mm_version(v) is not None)

    @note("semverCompare", "s,s->i")
    def compare(a: str, b: str) -> int:
        """-1, 0 or 1 comparing version a with b; 0 when either is invalid."""
        va, vb = mm_version(a), mm_version(b)
        if va is None or vb is None:
            return 0
        return mm_compare(va, vb)

    @note("semverBump", "s,s->s")
    def bump(v: str, component: str) -> str:
        """v with the component (major, minor, patch) incremented; v when invalid."""
        parsed = mm_version(v[1:] if v.startswith("v") else v)
        if parsed is None:
            return v
        from orksync.render.notes.gocore import to_lower
        major, minor, patch, _ = parsed
        kind = to_lower(component)
        if kind == "major":
            major, minor, patch = major + 1, 0, 0
        elif kind == "minor":
            minor, patch = minor + 1, 0
        elif kind == "patch":
            patch += 1
        else:
            return v
        return f"{major % _UINT64}.{minor % _UINT64}.{patch % _UINT64}"

    @note("semverConstraint", "s,s->b")
    def constraint(v: str, c: str) -> bool:
        """Whether version v satisfies the constraint (false when either is invalid)."""
        parsed = mm_version(v)
        if parsed is None:
            return False
        canonical = ".".join(map(str, parsed[:3])) + (f"-{parsed[3]}" if parsed[3] else "")
        return bool(sv.semver_constraint(canonical, c))
    return table


# ── quantity ────────────────────────────────────────────────────────────────────────
def quantity_notes() -> list[GoNote]:
    table: list[GoNote] = []
    note = registrar(table)

    def parse(name: str, text: str) -> tuple[Decimal, Any]:
        try:
            return go_parse_quantity(text)
        except ValueError as err:
            raise NoteError(f"{name}: {text!r} is not a valid Kubernetes quantity: {err}"
                            ) from None

    @note("parseQuantity", "s->f!")
    def parse_quantity(text: str) -> float:
        """A quantity as a float, as Quantity.AsApproximateFloat64 computes it."""
        parse("parseQuantity", text)
        return approximate_float(text)

    @note("formatQuantity", "f->s!")
    def format_quantity(f: float) -> str:
        """A number as a quantity: whole numbers ≥ 1 in binary form, others in millis."""
        if math.isfinite(f) and f == float(int64_of(f)) and f >= 1:
            return q.format_quantity(Decimal(int64_of(f)), "BinarySI")
        millis = int64_of(f * 1000)
        return q.format_quantity(Decimal(millis) / 1000, "DecimalSI")

    def combine(name: str, a: str, b: str, sign: int) -> str:
        left, fmt = parse(name, a)
        right, right_fmt = parse(name, b)
        with localcontext() as ctx:
            ctx.prec = q.precision_for(left, right)
            total = left + sign * right
        # Quantity.Add / Sub: a zero receiver takes the other operand's format
        return q.format_quantity(total, right_fmt if left == 0 else fmt)

    note("sumQuantity", "s,s->s!")(lambda a, b: combine("sumQuantity", a, b, 1))
    note("minusQuantity", "s,s->s!")(lambda a, b: combine("subtractQuantity", a, b, -1))
    return table


_DECIMAL_SUFFIX = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                   "E": 18}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def _quantity_parts(text: str) -> tuple[bool, str, str, str]:
    """resource.parseQuantityString: (positive, numerator, denominator, suffix)."""
    if text == "":
        raise ValueError("quantities must match the regular expression")
    m = re.fullmatch(r"([+-]?)(0*)([0-9]*)(?:(\.)([0-9]*))?([eEinumkKMGTP]*)([-+]?[0-9]*)", text)
    if m is None:
        raise ValueError("quantities must match the regular expression")
    num = m.group(3) or "0"
    if not m.group(3) and not m.group(4) and not m.group(6) and not m.group(7):
        num = "0"
    return m.group(1) != "-", num, m.group(5) or "", m.group(6) + m.group(7)


def _suffix(suffix: str) -> tuple[int, int, str]:
    if suffix in _BINARY_SUFFIX:
        return 2, _BINARY_SUFFIX[suffix], "BinarySI"
    if suffix in _DECIMAL_SUFFIX:
        return 10, _DECIMAL_SUFFIX[suffix], "DecimalSI"
    m = re.fullmatch(r"[eE]([-+]?[0-9]+)", suffix)
    if m and len(m.group(1).lstrip("+-")) <= 9:
        return 10, int(m.group(1)), "DecimalExponent"
    raise ValueError("unable to parse quantity's suffix")


def go_parse_quantity(text: str) -> tuple[Decimal, Any]:
    """resource.ParseQuantity: the value (rounded up to nano units; the magnitude of a
    BinarySI value capped at the int64 maximum, as Go caps only that format) and its
    format; ValueError where Go returns an error."""
    positive, num, denom, suffix = _quantity_parts(text)
    base, exponent, fmt = _suffix(suffix)
    digits = len(num) + len(denom) + max(exponent, 0) + 9  # whole digits, nano units
    if digits > q.MAX_DIGITS:
        raise ValueError(f"more than {q.MAX_DIGITS} digits, beyond orksync's bound")
    with localcontext() as ctx:
        ctx.prec = max(400, digits + 20)
        value = Decimal(int(num + denom)).scaleb(-len(denom))
        value = value.scaleb(exponent) if base == 10 else value * (2**exponent)
        if value != value.quantize(Decimal("1e-9"), rounding="ROUND_DOWN"):
            value = value.quantize(Decimal("1e-9"), rounding="ROUND_UP")
        if fmt == "BinarySI":
            value = min(value, Decimal(INT64_MAX))
    return (value if positive else -value), fmt


def approximate_float(text: str) -> float:
    """resource.ParseQuantity then AsApproximateFloat64: the (unscaled, scale) pair the
    parse keeps (its int64 fast path, or the big-decimal path rounded up to nano units),
    then float(unscaled) * 10^-scale in float64 arithmetic."""
    if text == "0":
        return 0.0
    positive, num, denom, suffix = _quantity_parts(text)
    negative = not positive
    base, exponent, fmt = _suffix(suffix)
    binary = fmt == "BinarySI"
    digits = num + denom
    if not binary:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
        mantissa = 1
    elif exponent >= 0 and not denom:
        scale, mantissa = 0, 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        scale, mantissa, precision = 0, 1, -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            value = int(digits or "0")
            if value <= INT64_MAX and abs(value * mantissa) <= INT64_MAX:
                unscaled = value * mantissa * (-1 if negative else 1)
                return float(unscaled) if scale == 0 else float(unscaled) * _pow10(scale)
    unscaled = int(digits or "0")
    dec_scale = len(denom)
    if base == 10:
        dec_scale -= exponent
    else:
        unscaled <<= exponent
    if unscaled != 0:
        if dec_scale > 9:
            factor = 10 ** (dec_scale - 9)
            unscaled = -(-unscaled // factor)
        else:
            unscaled *= 10 ** (9 - dec_scale)
        dec_scale = 9
        if unscaled > INT64_MAX * 10**9:
            unscaled = INT64_MAX * 10**9
    unscaled = -unscaled if negative else unscaled
    if dec_scale == 0:
        return float(unscaled)
    return float(unscaled) * _pow10(-dec_scale)


def _pow10(n: int) -> float:
    """math.Pow10."""
    if 0 <= n <= 308:
        return float(10**n)
    if -323 <= n < 0:
        return 1 / float(10 ** -n)
    return 0.0 if n < 0 else math.inf


# ── random ──────────────────────────────────────────────────────────────────────────
def random_notes(source: RandomSource) -> list[GoNote]:
    """The random notes: a value from `source`; a placeholder (when rendering to disk) is
    returned as a deferred value (gotemplate.deferred), so that what a template computes
    from it is computed when the value is generated. n <= 0 gives "" as in Orkestra."""
    table: list[GoNote] = []
    note = registrar(table)

    def value(name: str, n: int | None) -> str | deferred.Deferred:
        text = source.token(name, n)
        return deferred.leaf(name, n) if GENERATE_TOKEN_RE.fullmatch(text) else text

    for name in ("randomAlphanumeric", "randomHex", "randomBase64"):
        def sized(n: int, name: str = name) -> str | deferred.Deferred:
            if n <= 0:
                return ""
            if n > MAX_RANDOM_N:
                raise NoteError(f"{name} {n}: the length must be at most {MAX_RANDOM_N}")
            return value(name, n)
        note(name, "i->s!")(sized)
    note("uuidv4", "->s!")(lambda: value("uuidv4", None))
    return table
