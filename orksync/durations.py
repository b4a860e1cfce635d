"""Orkestra's extended durations (`rotateAfter`, `validFor`, `sleep`, `isExpired`, ...).

Pure. No I/O, clock and randomness injected (none needed here).

Grammar accepted by `parse_duration` (semantics §3.4):

* one or more `<number><unit>` components, summed: `90d`, `1.5h`, `1h30m`, `1d12h`;
  the number is decimal with an optional fraction (`1.5h`, `.5s`, `1.s`, as Go);
* units: Go's `ns us µs μs ms s m h` plus `d` = 24h, `w` = 7d, `mo` = 30d, `y` = 365d;
* `0` alone (Go accepts a bare zero) and `never` both mean `timedelta(0)`, "no rotation";
* an optional leading `+`; a leading `-` is rejected (a negative rotation/sleep/validity
  has no meaning), as are blanks inside the text, a number without unit and an empty text.

Decision on compound forms: Go's time.ParseDuration accepts compounds (`1h30m`, even a
repeated unit `1h1h` = 2h); Orkestra's handling of compounds that mix the extended units
(`1d12h`) was not confirmed. orksync accepts them, component by component, because the
grammar stays unambiguous (`mo` is matched before `m`, `ms` before `m`/`s`) and it is a
strict superset of every form Orkestra documents.

Range and precision: like Go's time.Duration the total must fit in int64 nanoseconds
(about 292 years) — `300y` raises. `timedelta` has microsecond resolution, so
sub-microsecond amounts are rounded half-even to the microsecond (`1ns` → 0).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["UNIT_NANOS", "format_duration", "format_go_duration", "parse_duration", "rfc3339"]

_NS = 1
_US = 1_000
_MS = 1_000_000
_S = 1_000_000_000
_M = 60 * _S
_H = 60 * _M
_D = 24 * _H

UNIT_NANOS: dict[str, int] = {
    "ns": _NS, "us": _US, "µs": _US, "μs": _US, "ms": _MS, "s": _S, "m": _M, "h": _H,
    "d": _D, "w": 7 * _D, "mo": 30 * _D, "y": 365 * _D,
}
_MAX_NANOS = 2**63 - 1
# Longest alternatives first so that `ms`/`mo` win over `m` and `ns`/`us` over `s`.
_COMPONENT = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|mo|s|m|h|d|w|y)")


def parse_duration(text: str) -> timedelta:
    """Parse an extended duration (see the module docstring) into a timedelta.

    Raises ValueError naming the text when it does not follow the grammar."""
    # imported here: `orksync apply` loads this module and seldom parses a duration
    from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

    if not isinstance(text, str):
        raise ValueError(f"invalid duration {text!r}: expected a string such as '90d' or '1h30m'")
    raw = text.strip()
    if raw in ("never", "0", "+0"):
        return timedelta(0)
    body = raw[1:] if raw.startswith("+") else raw
    if raw.startswith("-"):
        raise ValueError(f"invalid duration {text!r}: negative durations are not allowed")
    if not body:
        raise ValueError(f"invalid duration {text!r}: empty")
    total = Decimal(0)
    pos = 0
    while pos < len(body):
        match = _COMPONENT.match(body, pos)
        if match is None:
            rest = body[pos:]
            if re.match(r"\d*\.?\d*$", rest):
                reason = f"missing unit after {rest!r}"
            else:
                reason = f"unexpected {rest!r}"
            raise ValueError(
                f"invalid duration {text!r}: {reason} (a number followed by one of "
                "ns us µs ms s m h d w mo y, e.g. '90d', '1h30m', or 'never')")
        try:
            number = Decimal(match.group(1))
        except InvalidOperation as err:  # pragma: no cover - the regex admits only decimals
            raise ValueError(f"invalid duration {text!r}") from err
        total += number * UNIT_NANOS[match.group(2)]
        if total > _MAX_NANOS:
            raise ValueError(f"invalid duration {text!r}: out of range (at most ~292 years)")
        pos = match.end()
    micros = (total / _US).quantize(Decimal(1), rounding=ROUND_HALF_EVEN)
    return timedelta(microseconds=int(micros))


def format_duration(td: timedelta) -> str:
    """Short text for a timedelta that `parse_duration` reads back to the same value.

    Whole days use `d` (never `w`/`mo`/`y`: `90d` stays `90d`), then `h`, `m`, `s`, `ms`,
    `us`: `90d`, `1h30m`, `1d12h`, `1s500ms`; zero is `0s`; negatives get a leading `-`
    (which `parse_duration` rejects)."""
    micros = (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds
    if micros == 0:
        return "0s"
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    parts: list[str] = []
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000),
                       ("s", 1_000_000), ("ms", 1_000), ("us", 1)):
        count, micros = divmod(micros, size)
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)


def format_go_duration(td: timedelta) -> str:
    """Go's time.Duration.String(): `1h30m0s`, `2160h0m0s`, `1.5s`, `1µs`, `0s`."""
    nanos = ((td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds) * 1_000
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < _S:
        for unit, size in (("ms", _MS), ("µs", _US), ("ns", _NS)):
            if nanos >= size:
                return sign + _fraction(nanos, size) + unit
    hours, rest = divmod(nanos, _H)
    minutes, rest = divmod(rest, _M)
    seconds = _fraction(rest, _S)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _fraction(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}." + str(frac).rjust(width, "0").rstrip("0")


def rfc3339(now: datetime) -> str:
    """`now` as Kubernetes writes timestamps (UTC, seconds, `Z`); a naive time is UTC."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
