"""Semantic-version constraints (Masterminds syntax), for Orkestra's `semverConstraint`
(`orkestra_time`, which parses versions as Masterminds does before asking here).

Pure. No I/O, clock and randomness injected.

Versions: an optional `v`, `MAJOR[.MINOR[.PATCH]]` (missing parts are 0), an optional
`-prerelease` and `+build` (ignored in comparisons); precedence per semver 2.0.

Constraints (Masterminds syntax, as sprig and Orkestra's semverConstraint): comparators
`= != > >= < <= ~ ^` followed by a version whose missing parts or `x`/`X`/`*` are
wildcards; a bare version means `=`; comparators separated by commas or blanks are ANDed,
groups separated by `||` are ORed. `^1.2.3` = `>=1.2.3 <2.0.0` (`^0.2.3` = `<0.3.0`,
`^0.0.3` = `<0.0.4`); `~1.2.3` = `>=1.2.3 <1.3.0` (`~1` = `<2.0.0`). A pre-release version
satisfies a group only when one of its comparators names a pre-release.

Orkestra's `semverCompare` compares two versions (-1/0/1); see `orkestra_time`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from orksync.render.notes._common import to_str

_VERSION = re.compile(
    r"v?(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:\.(0|[1-9]\d*))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?",
    re.ASCII)
_PARTIAL = re.compile(
    r"v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?", re.ASCII)
_COMPARATOR = re.compile(r"\s*(!=|>=|<=|=>|=<|>|<|=|~>|~|\^)?\s*([^\s,<>=!~^|]+)")


@dataclass(frozen=True, order=False, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        pre: tuple[Any, ...] = tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                                     for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)


def parse_version(text: Any) -> Version | None:
    match = _VERSION.fullmatch(to_str(text).strip())
    if not match:
        return None
    pre = tuple(match.group(4).split(".")) if match.group(4) else ()
    if any(p.isdigit() and len(p) > 1 and p.startswith("0") for p in pre):
        return None
    return Version(int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0), pre)


def _cmp(a: Version, b: Version) -> int:
    ka, kb = a.key(), b.key()
    return (ka > kb) - (ka < kb)


Bounds = tuple[Version | None, Version | None, bool, bool]


def _bump_at(nums: list[int], index: int) -> Version:
    up = [*nums[:index], nums[index] + 1] + [0] * (2 - index)
    return Version(up[0], up[1], up[2])


def _bounds(op: str, text: str) -> Bounds | None:
    """One comparator as an interval (low, high, low inclusive, high inclusive); None
    when it does not parse. For `!=` the interval is the excluded set."""
    match = _PARTIAL.fullmatch(text)
    if not match:
        return None
    parts = [match.group(i) for i in (1, 2, 3)]
    wild = next((i for i, p in enumerate(parts) if p is None or p in "xX*"), 3)
    nums = [int(p) if i < wild and p is not None else 0 for i, p in enumerate(parts)]
    pre = tuple(match.group(4).split(".")) if match.group(4) and wild == 3 else ()
    low = Version(nums[0], nums[1], nums[2], pre)
    everything: Bounds = (None, None, True, False)
    nothing: Bounds = (low, low, False, False)
    upper = _bump_at(nums, wild - 1) if 0 < wild < 3 else None
    if op in ("", "=", "!="):
        if wild == 0:
            return everything
        return (low, low, True, True) if wild == 3 else (low, upper, True, False)
    if op in (">=", "=>"):
        return (low, None, True, False)
    if op == ">":
        if wild == 0:
            return nothing
        return (low, None, False, False) if wild == 3 else (upper, None, True, False)
    if op == "<":
        return (None, low, False, False) if wild else nothing
    if op in ("<=", "=<"):
        if wild == 0:
            return everything
        return (None, low, False, True) if wild == 3 else (None, upper, False, False)
    if op == "^":
        if wild == 0:
            return everything
        index = next((i for i in range(wild) if nums[i]), wild - 1)
        return (low, _bump_at(nums, index), True, False)
    if op in ("~", "~>"):
        if wild == 0:
            return everything
        return (low, _bump_at(nums, 0 if wild == 1 else 1), True, False)
    return None


def _satisfies(version: Version, constraint: str) -> bool | None:
    """None when the constraint does not parse."""
    groups = [g.strip() for g in constraint.split("||")]
    if not all(groups):
        return None
    verdict = False
    for group in groups:
        comparators = _COMPARATOR.findall(group.replace(",", " "))
        if not comparators or _COMPARATOR.sub("", group.replace(",", " ")).strip():
            return None
        ok, mentions_pre = True, False
        for op, text in comparators:
            bounds = _bounds(op, text)
            if bounds is None:
                return None
            low, high, low_inclusive, high_inclusive = bounds
            mentions_pre = mentions_pre or bool("-" in text)
            if op == "!=":
                inside = _within(version, low, high, low_inclusive, high_inclusive)
                ok = ok and not inside
            else:
                ok = ok and _within(version, low, high, low_inclusive, high_inclusive)
        if version.pre and not mentions_pre:
            ok = False
        verdict = verdict or ok
    return verdict


def _within(v: Version, low: Version | None, high: Version | None, low_inc: bool,
            high_inc: bool) -> bool:
    if low is not None and (_cmp(v, low) < 0 or (_cmp(v, low) == 0 and not low_inc)):
        return False
    return not (high is not None and (_cmp(v, high) > 0 or (_cmp(v, high) == 0
                                                            and not high_inc)))


_HYPHEN_RANGE = re.compile(r"\s*([^\s,|]+)\s+-\s+([^\s,|]+)\s*")


def semver_constraint(version: Any, constraint: Any) -> bool:
    """Whether the version satisfies the constraint; a hyphen range `a - b` is
    `>= a, <= b` as Masterminds rewrites it."""
    parsed = parse_version(version)
    if parsed is None:
        return False
    text = _HYPHEN_RANGE.sub(r" >= \1, <= \2 ", to_str(constraint)).strip()
    return _satisfies(parsed, text) is True


